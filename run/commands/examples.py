"""``coevo examples``: the files that ship with coevo, and editable copies of them.

Lists every bundled file (the example tasks, the experiment files, the sample
database) with its installed path and what it holds; ``--copy NAME DIR``
copies one into ``DIR`` to edit, never over an existing file unless
``--force``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import textwrap
from dataclasses import asdict
from pathlib import Path
from typing import Any

from coevo.arena.bounded import open_to_write
from coevo.arena.errors import CommandError, FileRefusedError, RegistryError
from coevo.arena.examples import Bundled, bundled, find_bundled
from coevo.run.commands import EXIT_OK

__all__ = ["add_commands", "cmd_examples", "copy_bundled"]


def copy_bundled(name: str, folder: str | Path, *, force: bool = False) -> Path:
    """Copy the bundled file ``name`` into ``folder`` (made if missing), keeping its file name.

    Args:
        name: a bundled file's name or file name (``quickstart``, ``examples.jsonl``).
        folder: where the copy goes.
        force: overwrite a file of that name in ``folder``.

    Returns:
        The copy's path.

    Raises:
        CommandError: no bundled file has that name, ``folder`` is not a directory, the copy
            would overwrite a file (without ``force``) or go through a link (``DIR/NAME`` a
            symbolic link), or it cannot be written.
    """
    try:
        file = find_bundled(name)
    except RegistryError as exc:
        raise CommandError(str(exc)) from None
    target_dir = Path(folder)
    if target_dir.exists() and not target_dir.is_dir():
        raise CommandError(f"{target_dir} is not a directory; give the folder to copy {name} into")
    target = target_dir / file.path.name
    if target.is_dir():
        raise CommandError(f"{target} is a directory; choose another folder")
    if target.exists() and not force:
        raise CommandError(f"{target} exists; pass --force to overwrite it")
    if target.exists() and target.samefile(file.path):
        raise CommandError(f"{target} is the bundled file itself; copy it elsewhere")
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        data = file.path.read_bytes()
        # through no link: a planted DIR/quickstart.toml -> elsewhere is refused, not written
        with os.fdopen(open_to_write(target, target_dir), "wb") as out:
            out.write(data)
    except FileRefusedError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot copy {file.name} to {target}: {exc}") from exc
    return target


def _print_table(files: list[Bundled]) -> None:
    name_width = max(len("name"), *(len(f.name) for f in files))
    kind_width = max(len("kind"), *(len(f.kind) for f in files))
    indent = " " * (name_width + kind_width + 4)
    print(f"{'name':<{name_width}}  {'kind':<{kind_width}}  description / installed path")
    # whole descriptions, wrapped under their column (never cut)
    width = max(shutil.get_terminal_size().columns, len(indent) + 40)
    for f in files:
        head = f"{f.name:<{name_width}}  {f.kind:<{kind_width}}  "
        print(textwrap.fill(f.description, width, initial_indent=head, subsequent_indent=indent))
        print(f"{indent}{f.path}")


def cmd_examples(args: argparse.Namespace) -> int:
    """``coevo examples``: list the bundled files, or copy one."""
    if args.copy:
        name, folder = args.copy
        target = copy_bundled(name, folder, force=args.force)
        print(f"copied {name} to {target}", file=sys.stderr)
        return EXIT_OK
    if args.force:
        raise CommandError("--force goes with --copy NAME DIR")
    files = bundled()
    if args.json:
        rows: list[dict[str, Any]] = [{**asdict(f), "path": str(f.path)} for f in files]
        sys.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
        return EXIT_OK
    _print_table(files)
    print(
        "\n`coevo run NAME` runs a bundled experiment; "
        "`coevo examples --copy NAME DIR` puts an editable copy of a file in DIR.",
        file=sys.stderr,
    )
    return EXIT_OK


def add_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``examples`` to the ``coevo`` command."""
    examples = sub.add_parser(
        "examples",
        help="list the files that ship with coevo (example tasks, experiments, a sample database)",
        formatter_class=fmt,
        description=(
            "Every file that ships with coevo, with its installed path and what it holds: the\n"
            "example tasks (coevo check, coevo play), the experiment files (coevo run NAME runs\n"
            "one by name) and a sample SQLite database (coevo mine). --copy NAME DIR puts an\n"
            "editable copy of one in DIR (made if missing), never over a file unless --force."
        ),
        epilog=(
            "examples:\n  coevo examples\n  coevo examples --copy examples .\n"
            "  coevo examples --copy quickstart my-experiments && coevo run my-experiments/quickstart.toml"
        ),
    )
    examples.add_argument(
        "--copy",
        nargs=2,
        metavar=("NAME", "DIR"),
        help="copy the bundled file NAME (e.g. quickstart, examples, shop) into DIR",
    )
    examples.add_argument(
        "--force", action="store_true", help="with --copy: overwrite a file of the same name"
    )
    examples.add_argument(
        "--json", action="store_true", help="a JSON array of {name, kind, path, description}"
    )
    examples.set_defaults(func=cmd_examples)
