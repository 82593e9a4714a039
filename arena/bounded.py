"""Bounded reads of the files coevo finds in a run directory, an inbox, a trainer folder or a corpus.

Such a folder may come from someone else (a run directory to analyse, a
trainer writing beside a run), so every file coevo reads from it is read the
same careful way, and the limits below are the one place they are set
(``docs/security.md``, "Size limits", lists them):

* regular files only: a symbolic link (``O_NOFOLLOW``), a device, a FIFO or
  a socket is refused without being read, and opening one never blocks;
  a file whose folder leads out of the directory it belongs to is refused too;
* a size limit, checked on the open file (``fstat``) before a byte is read,
  and the read itself stops one byte past the limit;
* a Parquet file's decompressed size is taken from its footer (the sum of its
  row groups' uncompressed sizes) and checked before any column is read; one
  read whole in memory (an inbox part, a training batch) is then read with its
  text columns dictionary-encoded, and their size once expanded is checked
  before they are;
* JSON nested deeper than Python's parser can follow is a ``ValueError``
  naming the file, never a ``RecursionError``;
* a benchmark checkout's files (``coevo import tau2``) are read only when
  they resolve inside the checkout (:func:`read_inside`), nested at most
  :data:`MAX_IMPORT_DEPTH` levels (:func:`load_document`).

A refusal is a :class:`~coevo.arena.errors.FileRefusedError` naming the file,
what it is and the limit; it is an ``OSError``, so a caller that already
treats an unreadable file as damage does the same with a refused one.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from coevo.arena.errors import FileRefusedError

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_IMPORT_DEPTH",
    "MAX_IMPORT_FILE_BYTES",
    "MAX_INBOX_PART_BYTES",
    "MAX_JSON_BYTES",
    "MAX_PARQUET_UNCOMPRESSED_BYTES",
    "check_parquet_size",
    "inside",
    "kind_of",
    "load_document",
    "loads_json",
    "loads_toml",
    "nesting_depth",
    "open_regular",
    "read_inside",
    "read_parquet_bytes",
    "read_regular",
    "too_big",
]

MAX_JSON_BYTES: Final = 64 << 20
"""The largest JSON or JSON Lines file coevo reads from a run directory, an inbox, a trainer
folder or a corpus (``experiment.json``, manifests, ``state.json``, announcements, journals): 64 MiB."""

MAX_FILE_BYTES: Final = 1 << 30
"""The largest other file read whole (a checkpoint's role state, a Parquet part or batch): 1 GiB."""

MAX_PARQUET_UNCOMPRESSED_BYTES: Final = 1 << 30
"""The most one Parquet file (a game-log or corpus part, a training batch) may hold once
decompressed, by its footer: 1 GiB. A 7 KB file of zstd can hold gigabytes."""

MAX_IMPORT_FILE_BYTES: Final = 64 << 20
"""The largest file of a benchmark checkout ``coevo import`` reads (``tasks.json``, ``db.json`` or
``db.toml``, ``policy.md``, ``tools.py``): 64 MiB (τ²-bench's biggest is a few MB)."""

MAX_IMPORT_DEPTH: Final = 100
"""How deep an imported JSON or TOML file may nest (τ²-bench's data nests a few levels)."""

MAX_INBOX_PART_BYTES: Final = 256 << 20
"""The most one inbox part may hold decompressed and decoded: 256 MiB (a bigger batch is
several parts; :func:`~coevo.arena.gamelog.inbox.write_part` refuses to write more)."""

_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)


def kind_of(mode: int) -> str:
    """What a file of this ``st_mode`` is, for a message (``a directory``, ``a FIFO``, ...)."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"


def inside(path: str | Path, root: str | Path) -> bool:
    """Whether ``path``'s folder, every link in it followed, is ``root`` or under it (``root`` resolved)."""
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    base = os.path.realpath(root)
    return folder == base or folder.startswith(base.rstrip(os.sep) + os.sep)


def open_regular(path: str | Path, *, limit: int | None, what: str | None = None) -> int:
    """``path`` opened for reading, as a file descriptor, once it is known to be a regular file within ``limit`` bytes.

    A symbolic link is not followed and a FIFO does not block: both are refused.

    Args:
        path: the file.
        limit: its largest size in bytes (None: any size).
        what: how a message names the file (default: its path).

    Raises:
        FileRefusedError: a link, not a regular file, or bigger than ``limit``.
        OSError: it cannot be opened (no such file, no permission).
    """
    name = what or str(path)
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileRefusedError(
                f"{name} is a symbolic link; coevo reads only regular files here, and follows no "
                "link: put the file itself there"
            ) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefusedError(
                f"{name} is {kind_of(info.st_mode)}, not a regular file; coevo reads only regular "
                "files here: put the file itself there"
            )
        if limit is not None and info.st_size > limit:
            raise FileRefusedError(too_big(name, info.st_size, limit))
    except BaseException:
        os.close(fd)
        raise
    return fd


def too_big(name: str, size: int, limit: int) -> str:
    """The message for a file of ``size`` bytes over its ``limit``."""
    return (
        f"{name} is {_size(size)} ({size} bytes), more than coevo reads from such a file "
        f"({_size(limit)}); see 'Size limits' in docs/security.md"
    )


def read_regular(path: str | Path, *, limit: int, what: str | None = None) -> bytes:
    """A regular file's bytes, read whole, refused (unread) if it is a link, not a regular file, or over ``limit``.

    Raises:
        FileRefusedError: as :func:`open_regular`, or the file grew past ``limit`` while read.
        OSError: it cannot be read.
    """
    fd = open_regular(path, limit=limit, what=what)
    with os.fdopen(fd, "rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise FileRefusedError(too_big(what or str(path), len(data), limit))
    return data


def read_inside(path: str | Path, roots: Sequence[Path], *, limit: int) -> bytes:
    """A file read as :func:`read_regular` does, once it resolves inside one of ``roots`` (resolved folders).

    A link that stays inside is followed; one that points out is refused, naming the file and
    where it points (what such a file holds may be shown to an agent, an LLM API, MCP clients).

    Raises:
        FileRefusedError: it points out of ``roots``, or as :func:`read_regular`.
        OSError: it cannot be read.
    """
    resolved = Path(os.path.realpath(path))
    if not any(resolved == r or resolved.is_relative_to(r) for r in roots):
        raise FileRefusedError(
            f"{path} points out of the checkout (to {resolved}); coevo reads only files inside "
            f"{' or '.join(str(r) for r in roots)}: replace the link with the file itself"
        )
    return read_regular(resolved, limit=limit, what=str(path))


def nesting_depth(value: Any, stop: int = MAX_IMPORT_DEPTH) -> int:
    """How deep parsed JSON or TOML nests (a scalar: 0), counted without recursion; counting stops past ``stop``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        )
        if children is None:
            continue
        deepest = max(deepest, level)
        if level > stop:
            break
        stack.extend((child, level + 1) for child in children)
    return deepest


def load_document(path: Path, roots: Sequence[Path], limit: int = MAX_IMPORT_FILE_BYTES) -> Any:
    """A JSON file (TOML for ``.toml``) parsed, read as :func:`read_inside` does, nested at most :data:`MAX_IMPORT_DEPTH`.

    Raises:
        FileRefusedError: it points out of ``roots``, is not a regular file, or is over ``limit``.
        ValueError: not UTF-8, not valid JSON or TOML, or nested too deep (naming the file).
        OSError: it cannot be read.
    """
    text = read_inside(path, roots, limit=limit).decode("utf-8")
    kind = "TOML" if path.suffix == ".toml" else "JSON"
    try:
        value = tomllib.loads(text) if kind == "TOML" else json.loads(text)
        deep = nesting_depth(value) > MAX_IMPORT_DEPTH
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{path} is not valid {kind}: {error}") from error
    except RecursionError:
        deep = True
    if deep:
        raise ValueError(
            f"{path} is nested more than {MAX_IMPORT_DEPTH} levels deep (a benchmark's data "
            "nests a few levels): it is not such a file"
        )
    return value


def loads_json(data: bytes | str, what: str) -> Any:
    """JSON text parsed; nesting too deep for the parser is a ``ValueError`` naming ``what``, not a ``RecursionError``.

    Raises:
        ValueError: not JSON (``json.JSONDecodeError``), or nested too deep.
    """
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError(
            f"{what} is nested too deep to read (deeper than Python's parser follows)"
        ) from None


def loads_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads``, with an integer too long to convert said as a TOML error.

    Python refuses to convert an integer of more than 4,300 digits (a guard
    against quadratic time) with a bare ``ValueError`` that advises
    ``sys.set_int_max_str_digits``; here it is a :class:`ValueError` that says
    what is wrong with the text. ``tomllib.TOMLDecodeError`` is a
    ``ValueError`` too: a caller catches ``ValueError`` for both.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        raise
    except (
        ValueError
    ) as exc:  # int(): "Exceeds the limit (4300 digits) for integer string conversion"
        if "integer string conversion" not in str(exc):
            raise
        raise ValueError(
            f"an integer of more than {sys.get_int_max_str_digits()} digits: no setting "
            "takes a number that long"
        ) from None


def check_parquet_size(
    source: Any,
    what: str,
    *,
    limit: int | None = None,
) -> pq.FileMetaData:
    """A Parquet file's footer, once its row groups' uncompressed sizes are known to fit in ``limit``.

    Only the footer is read; no column is decompressed.

    Args:
        source: the file (a path, a ``NativeFile``, a buffer).
        what: how a message names the file.
        limit: the most it may hold decompressed (default :data:`MAX_PARQUET_UNCOMPRESSED_BYTES`).

    Raises:
        FileRefusedError: it holds more than ``limit`` once decompressed.
        pa.ArrowException, OSError: it is not Parquet.
    """
    limit = MAX_PARQUET_UNCOMPRESSED_BYTES if limit is None else limit
    metadata = pq.read_metadata(source)
    total = 0
    for i in range(metadata.num_row_groups):
        group = metadata.row_group(i)
        # the column chunks' own figures, not only the group's: a writer fills in both
        chunks = sum(group.column(c).total_uncompressed_size for c in range(group.num_columns))
        total += max(group.total_byte_size, chunks)
    if total > limit:
        raise FileRefusedError(
            f"{what} holds {_size(total)} ({total} bytes) once decompressed, by its Parquet "
            f"footer, more than coevo reads from one file ({_size(limit)}); it was not read "
            "(see 'Size limits' in docs/security.md)"
        )
    return metadata


def read_parquet_bytes(data: bytes, what: str, *, limit: int | None = None) -> pa.Table:
    """A Parquet file held in memory, read within ``limit`` bytes decompressed and decoded.

    Two checks, both before the table is built whole: the footer's
    uncompressed sizes (nothing decompressed yet), then the size the text
    and binary columns take once their dictionaries are expanded (they are
    read dictionary-encoded first: five rows may share one 100 MB value
    that the footer counts once).

    Raises:
        FileRefusedError: it holds more than ``limit`` once decompressed or decoded.
        pa.ArrowException, OSError: it is not Parquet.
    """
    limit = MAX_PARQUET_UNCOMPRESSED_BYTES if limit is None else limit
    metadata = check_parquet_size(pa.BufferReader(data), what, limit=limit)
    schema = metadata.schema.to_arrow_schema()
    texts = [
        f.name
        for f in schema
        if pa.types.is_string(f.type)
        or pa.types.is_large_string(f.type)
        or pa.types.is_binary(f.type)
        or pa.types.is_large_binary(f.type)
    ]
    table = pq.read_table(pa.BufferReader(data), read_dictionary=texts)
    decoded = 0
    for column in table.columns:
        for chunk in column.chunks:
            if pa.types.is_dictionary(chunk.type):
                lengths = pc.binary_length(chunk.dictionary).take(chunk.indices)
                decoded += (pc.sum(lengths).as_py() or 0) + 8 * len(chunk)
            else:
                decoded += chunk.nbytes
    if decoded > limit:
        raise FileRefusedError(
            f"{what} holds {_size(decoded)} ({decoded} bytes) once its values are decoded, more "
            f"than coevo reads from one file ({_size(limit)}); it was not read whole "
            "(see 'Size limits' in docs/security.md)"
        )
    return table.cast(schema) if texts else table
