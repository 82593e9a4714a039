"""The ``coevo`` command line: one parser, one error boundary.

============================ ==========================================================
``coevo examples``           the files that ship with coevo (and ``--copy NAME DIR``)
``coevo check FILE``         run the Judge's checks on every record of a .jsonl/.json file
``coevo play FILE``          attempt a task yourself in the terminal
``coevo serve FILE``         serve a task to any MCP client (Claude Code, an agent harness)
``coevo import tau2 DIR``    import a τ²-bench domain's tasks as coevo records
``coevo audit FILE``         audit imported tasks' rewards with the Judge
``coevo schema``             print the JSON Schema of the record formats
``coevo synth``              make procedural tasks (offline)
``coevo mine DB``            make a world and tasks from a real SQLite database
``coevo mutate FILE``        make harder or easier children of tasks
``coevo corpus build``       a corpus of judged worlds and tasks, built on Ray in shards
``coevo corpus report DIR``  what a corpus holds
``coevo roles``              list the registered roles and curricula (built-ins and plugins)
``coevo run EXPERIMENT``     run a co-evolution experiment on Ray
``coevo resume RUN_DIR``     continue a run after its last committed generation
``coevo reference-trainer``  the reference consumer of the trainer hand-off
``coevo analyze RUN_DIR``    a run's metrics
``coevo report RUN_DIR...``  one HTML file comparing runs
``coevo export RUN_DIR``     a run's accepted tasks as training data
``coevo doctor RUN_DIR``     what is damaged in a run directory (and ``--repair``)
``coevo completion SHELL``   a shell completion script (bash, zsh)
============================ ==========================================================

Every command has ``--help`` with an example. Errors are handled here and
only here: a :class:`~coevo.arena.errors.CoevoError` prints ``coevo
<command>: <message>`` and exits with its status (2 unless the error says
otherwise); ``--debug`` (or ``COEVO_DEBUG=1``) prints the whole chain of
causes behind the message as well.

The command line is built with :mod:`argparse`: the commands are few, their
options plain, and the standard library keeps ``coevo --help`` fast and the
package free of another dependency; the repetition a CLI library would save
(one error boundary, shared options) lives here once.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from importlib import metadata

from coevo.arena.errors import CoevoError, CommandError
from coevo.arena.secrets import redact
from coevo.run.commands import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNREADABLE,
    analysis,
    benchmarks,
    completion,
    corpus,
    doctor,
    examples,
    records,
    roles,
    runs,
    serve,
    synthesis,
    training,
)
from coevo.run.driver.failures import without_doc_links
from coevo.run.driver.stopping import EXIT_TERMINATED, Terminated

__all__ = ["build_parser", "main"]

_GROUPS = (
    records,
    serve,
    benchmarks,
    synthesis,
    corpus,
    roles,
    runs,
    training,
    analysis,
    doctor,
    examples,
    completion,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``coevo`` command."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="on an error, also print the chain of causes behind the message",
    )
    parser = argparse.ArgumentParser(
        prog="coevo",
        description="coevo: agent-environment co-evolution — synthesized SQL tool-use worlds, "
        "a Judge that proves them, curricula at the Solver's frontier.",
        epilog="start with: coevo examples (the files that ship with coevo), coevo run quickstart",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"coevo {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    fmt = argparse.RawDescriptionHelpFormatter
    for group in _GROUPS:
        group.add_commands(_Subparsers(sub, common), fmt)
    parser.set_defaults(root_parser=parser)  # for commands that describe the command line itself
    return parser


class _Subparsers:
    """``sub`` whose every new subcommand also takes the common options (``--debug``)."""

    def __init__(self, sub: argparse._SubParsersAction, common: argparse.ArgumentParser):
        self._sub = sub
        self._common = common

    def add_parser(self, name: str, **kwargs: object) -> argparse.ArgumentParser:
        """Add subcommand ``name`` (as ``argparse`` does), with the common options."""
        return self._sub.add_parser(name, parents=[self._common], **kwargs)  # type: ignore[arg-type]


def _version() -> str:
    """The installed distribution's version (a source tree that was never installed says so)."""
    try:
        return metadata.version("coevo")
    except metadata.PackageNotFoundError:
        return "(not installed: run `pip install .` in the checkout)"


def _report(command: str, exc: BaseException, debug: bool) -> None:
    # a key pasted where a setting goes comes back in the message: never show it
    print(f"coevo {command}: {redact(without_doc_links(str(exc)))}", file=sys.stderr)
    if (
        debug
    ):  # shared when asking for help: redacted by the same rule (pydantic's frames echo input)
        print(redact("".join(traceback.format_exception(exc))), end="", file=sys.stderr)
    elif exc.__cause__ is not None and not isinstance(exc.__cause__, (CoevoError, ValueError)):
        # a bad value, bad TOML or a coevo error is already said in the message; anything else
        # (an OSError, a bug) may have more to show
        print("(run again with --debug to see what caused it)", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``coevo`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare `coevo`: what it can do, not an error
        parser.print_help()
        return EXIT_OK
    debug = bool(getattr(args, "debug", False)) or os.environ.get("COEVO_DEBUG") == "1"
    try:
        return int(args.func(args))
    except CommandError as exc:
        _report(args.command, exc, debug)
        return exc.status
    except CoevoError as exc:
        _report(args.command, exc, debug)
        return EXIT_UNREADABLE
    except KeyboardInterrupt as exc:
        if isinstance(exc, Terminated):
            print(f"coevo {args.command}: stopped by SIGTERM", file=sys.stderr)
            return EXIT_TERMINATED
        print(f"coevo {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); silence the flush at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
