"""Where a τ²-bench checkout keeps a domain's files, and how they are read: inside the checkout only, bounded.

What a domain's files hold becomes what the agent, the LLM API and MCP
clients see, so a file is read only if it resolves inside the checkout (or
the data and code roots given): a link that points out, a device, a FIFO, a
file over :data:`~coevo.arena.bounded.MAX_IMPORT_FILE_BYTES` or nested deeper
than :data:`~coevo.arena.bounded.MAX_IMPORT_DEPTH` is refused, naming the file
(:mod:`coevo.arena.bounded`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from coevo.arena import bounded
from coevo.arena.bounded import load_document, read_inside
from coevo.arena.errors import RecordError

__all__ = ["LAYOUTS", "first", "load", "roots_of", "text", "there"]


def text(path: Path, roots: Sequence[Path]) -> str:
    """A text file of the checkout, read only if it resolves inside ``roots`` (:func:`~coevo.arena.bounded.read_inside`)."""
    try:
        return read_inside(path, roots, limit=bounded.MAX_IMPORT_FILE_BYTES).decode("utf-8")
    except UnicodeDecodeError as error:
        raise RecordError(f"{path} is not UTF-8 text: {error}") from None
    except OSError as error:  # FileRefusedError too: a link out, a device, a FIFO, too big
        raise RecordError(str(error)) from None


def load(path: Path, roots: Sequence[Path] | None = None) -> Any:
    """A JSON or TOML file of the checkout, parsed (:func:`~coevo.arena.bounded.load_document`)."""
    if not os.path.lexists(path) or path.is_dir():
        raise RecordError(f"no file {path}")
    try:
        return load_document(path, roots or [Path(os.path.realpath(path.parent))])
    except (OSError, ValueError) as error:  # a link out, a device, too big or deep, not JSON/TOML
        raise RecordError(str(error)) from error


# (data root, code root) under the path given: a checkout, a site-packages, the tau2 package itself
LAYOUTS: Final = (
    ("data/tau2/domains", "src/tau2/domains"),
    ("tau2/data/tau2/domains", "tau2/domains"),
    ("data/tau2/domains", "domains"),
)


def roots_of(root: Path, domain: str, data: Path | None, code: Path | None) -> tuple[Path, Path]:
    """The data and code directories of ``domain``."""
    data = data or next((root / d for d, _ in LAYOUTS if (root / d).is_dir()), None)
    pairs = [(root / d, root / c) for d, c in LAYOUTS]
    code = code or next((c for d, c in pairs if d.is_dir() and c.is_dir()), None)
    code = code or next((c for _, c in pairs if c.is_dir()), None)
    if data is None:
        raise RecordError(
            f"no data/tau2/domains under {root}: pass the root of a τ²-bench checkout, the "
            "site-packages of an installed tau2, or data_root= (the directory holding the domains' data)"
        )
    if code is None:
        raise RecordError(
            f"no src/tau2/domains (nor tau2/domains) under {root}: pass the root of a τ²-bench "
            "checkout, or code_root= (the directory holding each domain's tools.py)"
        )
    if not (data / domain).is_dir():
        known = sorted(p.name for p in data.iterdir() if p.is_dir()) if data.is_dir() else []
        raise RecordError(f"no domain {domain!r} in {data}: its domains are {known}")
    return data / domain, code / domain


def there(path: Path) -> bool:
    """Whether a file is there, not a folder (a link, even dangling, is there: the reading refuses it)."""
    return os.path.lexists(path) and not path.is_dir()


def first(directory: Path, names: Sequence[str], root: Path | None = None) -> Path | None:
    """The first of ``names`` that is a file in ``directory``; with ``root``, one must be."""
    found = next((directory / n for n in names if there(directory / n)), None)
    if found is None and root is not None:
        where = directory.relative_to(root) if directory.is_relative_to(root) else directory
        raise RecordError(
            f"no {where}/{' or '.join(names)} under {root}: "
            "pass the root of a τ²-bench checkout (or data_root= and code_root=)"
        )
    return found
