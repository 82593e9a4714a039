"""``coevo roles``: every role and curriculum an experiment can name."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from coevo.agents.registry import REGISTRY
from coevo.arena.run.commands import EXIT_OK

__all__ = ["add_commands"]


def cmd_roles(args: argparse.Namespace) -> int:
    """``coevo roles``: the registered roles."""
    roles = REGISTRY.roles()
    for error in REGISTRY.plugin_errors:
        print(f"coevo roles: a plugin did not load: {error}", file=sys.stderr)
    if args.json:
        rows = [
            {"name": r.name, "kind": r.kind, "origin": r.origin, "description": r.description}
            for r in roles
        ]
        sys.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
        return EXIT_OK
    width = max((len(r.name) for r in roles), default=4)
    print(f"{'name':<{width}}  {'kind':<11}  {'origin':<24}  description")
    for r in roles:
        print(f"{r.name:<{width}}  {r.kind:<11}  {r.origin:<24}  {r.description}")
    return EXIT_OK


def add_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``roles`` to the ``coevo`` command."""
    roles = sub.add_parser(
        "roles",
        help="list every registered role with its kind and origin",
        formatter_class=fmt,
        description=(
            "Every role an experiment can name: coevo's built-ins and the roles plugins\n"
            "register through the 'coevo.roles' entry points. A plugin that fails to load is\n"
            "reported on standard error and left out."
        ),
        epilog="examples:\n  coevo roles\n  coevo roles --json | jq -r '.[] | select(.kind == \"solver\") | .name'",
    )
    roles.add_argument(
        "--json", action="store_true", help="a JSON array of {name, kind, origin, description}"
    )
    roles.set_defaults(func=cmd_roles)
