"""``coevo roles``: every role and curriculum an experiment can name."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from coevo.arena.errors import CoevoError
from coevo.run.commands import EXIT_OK

__all__ = ["add_commands"]


def _rows() -> tuple[list[dict[str, Any]], list[str]]:
    """Every role, then every curriculum, as ``coevo roles --json`` prints them; and the plugins that did not load."""
    # the registries (numpy, pyarrow) load only for this command: every other one starts faster
    from coevo.agents.registry import REGISTRY
    from coevo.curricula.registry import CURRICULA

    rows = []
    for r in REGISTRY.roles():
        try:
            capabilities = r.capabilities
        except CoevoError as exc:  # a role whose module cannot be imported here
            capabilities = [f"(cannot import: {exc})"]
        rows.append(
            {
                "name": r.name,
                "kind": r.kind,
                "origin": r.origin,
                "capabilities": capabilities,
                "description": r.description,
            }
        )
    for c in CURRICULA.specs():
        rows.append(
            {
                "name": c.name,
                "kind": c.kind,
                "origin": c.origin,
                "capabilities": [],
                "description": c.description,
            }
        )
    return rows, [*REGISTRY.plugin_errors, *CURRICULA.plugin_errors]


def cmd_roles(args: argparse.Namespace) -> int:
    """``coevo roles``: the registered roles and curricula."""
    rows, errors = _rows()
    for error in errors:
        print(f"coevo roles: a plugin did not load: {error}", file=sys.stderr)
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
        return EXIT_OK
    for r in rows:
        r["capabilities"] = ", ".join(r["capabilities"]) or "–"
    columns = ("name", "kind", "origin", "capabilities")
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
    print("  ".join(f"{c:<{widths[c]}}" for c in columns) + "  description")
    for r in rows:
        print("  ".join(f"{r[c]:<{widths[c]}}" for c in columns) + f"  {r['description']}")
    return EXIT_OK


def add_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``roles`` to the ``coevo`` command."""
    roles = sub.add_parser(
        "roles",
        help="list every registered role and curriculum with its kind, origin and capabilities",
        formatter_class=fmt,
        description=(
            "Every role and curriculum an experiment can name: coevo's built-ins and those plugins\n"
            "register through the 'coevo.roles' and 'coevo.curricula' entry points, each with the\n"
            "capabilities it has (stateful: checkpointed; versioned; remembers; reports-usage;\n"
            "reports-attempts). A plugin that fails to load is reported on standard error and left out."
        ),
        epilog="examples:\n  coevo roles\n  coevo roles --json | jq -r '.[] | select(.kind == \"solver\") | .name'",
    )
    roles.add_argument(
        "--json",
        action="store_true",
        help="a JSON array of {name, kind, origin, capabilities, description}",
    )
    roles.set_defaults(func=cmd_roles)
