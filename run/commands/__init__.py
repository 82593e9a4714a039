"""The ``coevo`` subcommands, one module per group; :mod:`coevo.run.cli` puts them together.

Each module has ``add_commands(sub, fmt)``, which adds its subcommands with
their help and examples, and one function per subcommand that takes the
parsed arguments and returns the exit status. A command that cannot do what
was asked raises :class:`~coevo.arena.errors.CommandError` (or any
:class:`~coevo.arena.errors.CoevoError`); the command line's one error
boundary prints the message and exits with the status. Heavy modules (Ray,
the roles, the analysis) are imported inside the command that needs them,
so ``coevo check`` never pays for ``import ray``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Final

from coevo.arena.errors import CommandError
from coevo.run.driver.stopping import EXIT_TERMINATED

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_REJECTED",
    "EXIT_ROLE_FAILED",
    "EXIT_TERMINATED",
    "EXIT_TRAINER_TIMEOUT",
    "EXIT_UNREADABLE",
    "local_ray_auth",
    "out_folder",
]

EXIT_OK: Final = 0
"""Everything asked for was done."""
EXIT_REJECTED: Final = 1
"""The input was read, and some of it was rejected (a task the Judge refused)."""
EXIT_UNREADABLE: Final = 2
"""The input or the command could not be used (a missing file, malformed JSON, a bad option)."""
EXIT_ROLE_FAILED: Final = 3
"""A run went through, but a role's calls never once returned without failure (an API outage, a broken role)."""
EXIT_TRAINER_TIMEOUT: Final = 4
"""A run with a ``[trainer]`` stopped because the trainer announced no policy in time: what was committed stays; ``coevo resume`` continues."""
EXIT_INTERRUPTED: Final = 130
"""Ctrl-C (128 + SIGINT, as shells report it): what was committed stays; ``coevo resume`` continues a run."""


def local_ray_auth(address: str | None) -> None:
    """A Ray this command starts keeps token authentication, chosen explicitly (before Ray is imported).

    Ray 2.60 enables token authentication for a new local cluster and warns
    that it did; saying so in ``RAY_AUTH_MODE`` keeps the protection without
    the warning. A cluster to join (``address``), the user's own
    ``RAY_AUTH_MODE``, or a process that has imported Ray already (Ray reads
    the mode once, at import) is left alone.
    """
    if not address and "ray" not in sys.modules:
        os.environ.setdefault("RAY_AUTH_MODE", "token")


def out_folder(value: str, flag: str = "--out") -> Path:
    """``value`` as the local folder a command writes (new or existing), checked before anything heavy is imported.

    Raises:
        CommandError: it is a file, a file stands on the way to it, or it holds a NUL character.
    """
    if "\x00" in value:
        raise CommandError(f"{flag} {value!r}: a path cannot hold a NUL character")
    path = Path(value)
    for place in (path, *path.parents):
        if place.exists() or place.is_symlink():
            if not place.is_dir():
                where = "is a file" if place == path else f"is under {place}, a file"
                raise CommandError(f"{flag} {value} {where}: give a folder")
            break
    return path
