"""``coevo doctor``: what is damaged in a run directory, and truncating it back to what is intact."""

from __future__ import annotations

import argparse
from typing import Any

from coevo.run.commands import EXIT_OK, EXIT_REJECTED

__all__ = ["add_commands", "cmd_doctor"]


def cmd_doctor(args: argparse.Namespace) -> int:
    """``coevo doctor RUN_DIR [--repair]``."""
    from coevo.arena.gamelog import diagnose, repair

    if not args.repair:
        found = diagnose(args.run_dir)
        print("\n".join(found.lines()))
        return EXIT_REJECTED if found.damaged else EXIT_OK
    found, done = repair(args.run_dir)
    print("\n".join(found.lines()))
    print("\n".join(f"repaired: {line}" for line in done) or "nothing to repair")
    return EXIT_OK


def add_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``doctor`` to the ``coevo`` command."""
    doctor = sub.add_parser(
        "doctor",
        help="check a run directory: damaged generations, stale locks, orphan files",
        formatter_class=fmt,
        description=(
            "Check every committed generation of RUN_DIR (manifest; parts: size, rows, sha256;\n"
            "checkpoint files: size, sha256), its lock and its orphan files (files no manifest\n"
            "names). Exit status 1 when a generation is damaged. --repair truncates the run back\n"
            "to its last intact generation (removing later manifests, parts and checkpoints),\n"
            "clears a stale lock and removes orphan files; `coevo resume` then plays the rest again."
        ),
        epilog="examples:\n  coevo doctor runs/quickstart\n  coevo doctor runs/quickstart --repair",
    )
    doctor.add_argument("run_dir", metavar="RUN_DIR")
    doctor.add_argument(
        "--repair",
        action="store_true",
        help="truncate to the last intact generation, clear a stale lock, remove orphans",
    )
    doctor.set_defaults(func=cmd_doctor)
