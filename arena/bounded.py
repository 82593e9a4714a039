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
* a Parquet file's decompressed size and decoded size are taken from its
  footer (the row groups' uncompressed sizes; each column's values times
  their width once decoded, which run-length encoding does not shrink) and
  checked before any page is decoded; :func:`read_parquet` then decodes it a
  batch of rows at a time, text columns dictionary-encoded, counting the
  bytes decoded (a shared text value once per row) and stopping past the
  limit, so a footer that lies is refused too;
* JSON nested deeper than Python's parser can follow is a ``ValueError``
  naming the file, never a ``RecursionError``;
* a benchmark checkout's files (``coevo import tau2``) are read only when
  they resolve inside the checkout (:func:`read_inside`), nested at most
  :data:`MAX_IMPORT_DEPTH` levels (:func:`load_document`).

Writes into a folder coevo was given (a run directory, a corpus, an export,
a record folder) are held to the same rule about links: the folder named may
itself be a link, but nothing inside it is written through one
(:func:`open_to_write`, :func:`refuse_link_out`, :func:`links_under`).

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
from collections.abc import Iterator, Sequence
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
    "links_under",
    "load_document",
    "loads_json",
    "loads_toml",
    "nesting_depth",
    "open_regular",
    "open_to_write",
    "parquet_footer_sizes",
    "read_inside",
    "read_parquet",
    "read_parquet_bytes",
    "read_regular",
    "read_within",
    "refuse_link_out",
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
        data = read_within(stream, os.fstat(fd).st_size, limit)
    if len(data) > limit:
        raise FileRefusedError(too_big(what or str(path), len(data), limit))
    return data


_GROWTH_CHUNK: Final = 16 << 20
"""What :func:`read_within` asks for at a time past a file's size (a file that grows while read)."""


def read_within(stream: Any, size: int | None, limit: int) -> bytes:
    """A stream's bytes up to one past ``limit``, no more memory asked for than the file holds.

    A read of ``limit + 1`` bytes reserves that much at once (1 GiB for a
    100-byte checkpoint: a ``MemoryError`` under an address-space limit), so
    the first read asks for the file's ``size`` (``fstat``, or an object
    store's listing) and one byte more; a file that grew meanwhile is read on
    :data:`_GROWTH_CHUNK` at a time, still stopping one byte past ``limit``.

    Args:
        stream: a binary file object or a pyarrow input stream (``read(n)`` returns bytes).
        size: the file's size in bytes, if known.
        limit: the most the caller takes; more than this comes back as ``limit + 1`` bytes.
    """
    first = min(limit, size if size is not None else _GROWTH_CHUNK)
    data = bytes(stream.read(first + 1))
    if len(data) <= first:
        return data
    parts = [data]
    total = len(data)
    while total <= limit:
        chunk = bytes(stream.read(min(_GROWTH_CHUNK, limit + 1 - total)))
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
    return b"".join(parts)


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


def refuse_link_out(path: str | Path, root: str | Path, *, what: str | None = None) -> None:
    """Refuse to write ``path`` (a file or a folder to make) when its folder, links followed, leads out of ``root``.

    ``root`` is the folder the user named (followed if it is a link itself);
    a folder inside it that is a link out is never written through.

    Raises:
        FileRefusedError: a folder on the way to ``path`` is a link out of ``root``.
    """
    if not inside(path, root):
        raise FileRefusedError(
            f"{what or path} is in a folder that is a link out of {os.path.realpath(root)}; "
            "coevo writes through no link inside a folder it writes: remove the link (put the "
            "folder itself there), or choose another folder"
        )


def open_to_write(
    path: str | Path, root: str | Path, *, append: bool = False, what: str | None = None
) -> int:
    """``path`` opened for writing (made if missing; emptied unless ``append``), as a file descriptor.

    Opened only once it is known to lie inside ``root`` (:func:`refuse_link_out`),
    not to be a symbolic link itself (``O_NOFOLLOW``) and to be a regular
    file (a FIFO does not block: it is refused). A file is emptied only after
    these checks, so a refused one is left as it was.

    Args:
        path: the file.
        root: the folder it is written in, as the user named it.
        append: add to the end (else the file is emptied first).
        what: how a message names the file (default: its path).

    Raises:
        FileRefusedError: a link, not a regular file, or in a folder that is a link out of ``root``.
        OSError: it cannot be opened (no permission, no such folder).
    """
    name = what or str(path)
    refuse_link_out(path, root, what=name)
    flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _NONBLOCK | _CLOEXEC
    try:
        fd = os.open(path, flags | (os.O_APPEND if append else 0), 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileRefusedError(
                f"{name} is a symbolic link; coevo writes through no link inside a folder it "
                "writes: remove the link, or choose another folder"
            ) from None
        if exc.errno == errno.ENXIO:  # a FIFO no one reads
            raise FileRefusedError(
                f"{name} is a FIFO, not a regular file; coevo writes only regular files here: "
                "remove it, or choose another folder"
            ) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefusedError(
                f"{name} is {kind_of(info.st_mode)}, not a regular file; coevo writes only "
                "regular files here: remove it, or choose another folder"
            )
        if not append:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def links_under(root: str | Path) -> list[str]:
    """Every symbolic link under ``root`` (not followed), relative to it and sorted; ``root`` itself may be one.

    An empty list when ``root`` is not a folder. Said before a folder is
    written, so that a link planted in it stops the command before anything
    is written (the writes refuse links one by one anyway).
    """
    found: list[str] = []
    base = os.path.realpath(root)
    if not os.path.isdir(base):
        return found
    for folder, dirs, files in os.walk(base):  # os.walk follows no link into a folder
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                found.append(os.path.relpath(path, base))
    return sorted(found)


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
    """A Parquet file's footer, once what it says the file holds is known to fit in ``limit``.

    Only the footer is read; no page is decompressed or decoded. Two figures
    are checked: the row groups' uncompressed sizes, and the bytes the
    columns take once decoded (:func:`parquet_footer_sizes`: a run of
    ten million zeros is a few bytes of run-length encoding, uncompressed).

    Args:
        source: the file (a path, a ``NativeFile``, a buffer).
        what: how a message names the file.
        limit: the most it may hold decompressed and decoded (default
            :data:`MAX_PARQUET_UNCOMPRESSED_BYTES`).

    Raises:
        FileRefusedError: it holds more than ``limit`` once decompressed or decoded.
        pa.ArrowException, OSError: it is not Parquet.
    """
    limit = MAX_PARQUET_UNCOMPRESSED_BYTES if limit is None else limit
    metadata = pq.read_metadata(source)
    decompressed, decoded = parquet_footer_sizes(metadata)
    if decompressed > limit:
        raise FileRefusedError(
            f"{what} holds {_size(decompressed)} ({decompressed} bytes) once decompressed, by its "
            f"Parquet footer, more than coevo reads from one file ({_size(limit)}); it was not "
            "read (see 'Size limits' in docs/security.md)"
        )
    if decoded > limit:
        values = sum(
            metadata.row_group(g).column(c).num_values
            for g in range(metadata.num_row_groups)
            for c in range(metadata.num_columns)
        )
        raise FileRefusedError(
            f"{what} holds {_size(decoded)} ({decoded} bytes) once decoded, by its Parquet footer "
            f"({values} values), more than coevo reads from one file ({_size(limit)}); it was not "
            "read (see 'Size limits' in docs/security.md)"
        )
    return metadata


def parquet_footer_sizes(metadata: pq.FileMetaData) -> tuple[int, int]:
    """The bytes a Parquet file holds by its footer alone: (decompressed, decoded into Arrow).

    Decompressed: the row groups' uncompressed sizes. Decoded: each column
    chunk holds ``num_values`` values (nulls and empty lists included; at
    least its row group's ``num_rows``), each as wide as its Arrow type once
    decoded (a string or binary value: an 8-byte offset, plus the chunk's
    uncompressed size for the bytes themselves), and each list above the
    column adds an offset per list (one per row for the outermost).
    Encodings do not shrink the decoded figure: ten million zeros count
    80 MB, however few bytes of run-length encoding hold them. A text value
    many rows share is counted once here (its dictionary page holds it
    once); :func:`read_parquet` counts it for every row.

    Raises:
        pa.ArrowInvalid: the file's Arrow schema does not match its columns.
    """
    leaves = _leaves(metadata)
    decompressed = decoded = 0
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        chunks = [group.column(c) for c in range(group.num_columns)]
        # the column chunks' own figures, not only the group's: a writer fills in both
        decompressed += max(group.total_byte_size, sum(c.total_uncompressed_size for c in chunks))
        rows = group.num_rows
        for chunk, (type_, offsets) in zip(chunks, leaves, strict=True):
            values = max(chunk.num_values, rows)
            decoded += values * _width(type_)
            decoded += sum(w * (rows if k == 0 else values) for k, w in enumerate(offsets))
            if _fixed_width(type_) is None:
                decoded += chunk.total_uncompressed_size
    return decompressed, decoded


_BATCH_ROWS: Final = 4096
"""Rows :func:`read_parquet` decodes at a time: past its limit, it stops within one such batch."""


def read_parquet(
    source: Any,
    what: str,
    *,
    limit: int | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """A Parquet file read within ``limit`` bytes decompressed and decoded.

    Checked before any page is decoded: the footer (:func:`check_parquet_size`,
    decompressed size and decoded size). Then the file is decoded a batch of
    rows at a time, text and binary columns dictionary-encoded, and the
    bytes decoded are added up as they come (a text value counted once per
    row that holds it: five rows may share one 100 MB value that the
    dictionary page holds once); the read stops as soon as they pass
    ``limit``. So a file whose footer lies is refused too, having taken
    about ``limit`` and one batch of memory (one row's list, or one page,
    is decoded whole).

    Args:
        source: the file (a path, a ``NativeFile``, a seekable file object, a buffer).
        what: how a message names the file.
        limit: the most it may hold decompressed and decoded (default
            :data:`MAX_PARQUET_UNCOMPRESSED_BYTES`).
        columns: only these columns, those of them the file has (default: all).

    Returns:
        The table, with the file's schema (its metadata included).

    Raises:
        FileRefusedError: it holds more than ``limit`` once decompressed or decoded.
        pa.ArrowException, OSError: it is not Parquet.
    """
    limit = MAX_PARQUET_UNCOMPRESSED_BYTES if limit is None else limit
    metadata = check_parquet_size(source, what, limit=limit)
    file = pq.ParquetFile(source, metadata=metadata, read_dictionary=_text_columns(metadata))
    schema = metadata.schema.to_arrow_schema()
    names = [n for n in schema.names if columns is None or n in columns]
    wanted = pa.schema([schema.field(n) for n in names], metadata=schema.metadata)
    batches, decoded, rows = [], 0, 0
    for batch in _batches(file, names):
        decoded += sum(_decoded_size(column) for column in batch.columns)
        rows += batch.num_rows
        if decoded > limit:
            raise FileRefusedError(
                f"{what} holds {_size(decoded)} ({decoded} bytes) once its values are decoded "
                f"(in its first {rows} of {metadata.num_rows} rows), more than coevo reads from "
                f"one file ({_size(limit)}); it was not read whole (see 'Size limits' in "
                "docs/security.md)"
            )
        # expanded at once: each batch carries the whole dictionary read so far
        batches.append(batch.cast(wanted))
    return pa.Table.from_batches(batches, schema=wanted)


def _text_columns(metadata: pq.FileMetaData) -> list[str]:
    """The paths of a file's string and binary columns: read dictionary-encoded, their values are counted before they are expanded."""
    return [
        metadata.schema.column(c).path
        for c, (type_, _) in enumerate(_leaves(metadata))
        if pa.types.is_string(type_)
        or pa.types.is_large_string(type_)
        or pa.types.is_binary(type_)
        or pa.types.is_large_binary(type_)
    ]


def _batches(file: pq.ParquetFile, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """A file's rows, :data:`_BATCH_ROWS` at a time, a row group after another.

    One row group at a time: Arrow cannot carry a nested column's dictionary
    from one group to the next. No thread pool: most files are small, and a
    big one is decoded a batch at a time anyway.
    """
    for group in range(file.num_row_groups):
        yield from file.iter_batches(
            batch_size=_BATCH_ROWS, row_groups=[group], columns=columns, use_threads=False
        )


def read_parquet_bytes(data: bytes, what: str, *, limit: int | None = None) -> pa.Table:
    """A Parquet file held in memory, read as :func:`read_parquet` does (within ``limit`` bytes decoded).

    Raises:
        FileRefusedError: it holds more than ``limit`` once decompressed or decoded.
        pa.ArrowException, OSError: it is not Parquet.
    """
    return read_parquet(pa.BufferReader(data), what, limit=limit)


def _leaves(metadata: pq.FileMetaData) -> list[tuple[pa.DataType, tuple[int, ...]]]:
    """Each column chunk's Arrow type and the offset width of each list above it, in column order."""
    leaves: list[tuple[pa.DataType, tuple[int, ...]]] = []
    stack: list[tuple[pa.DataType, tuple[int, ...]]] = [
        (f.type, ()) for f in reversed(metadata.schema.to_arrow_schema())
    ]
    while stack:
        type_, offsets = stack.pop()
        if isinstance(type_, pa.ExtensionType):
            stack.append((type_.storage_type, offsets))
        elif pa.types.is_dictionary(type_):
            stack.append((type_.value_type, offsets))
        elif pa.types.is_struct(type_):
            stack += [(type_.field(i).type, offsets) for i in reversed(range(type_.num_fields))]
        elif pa.types.is_map(type_):
            stack += [(type_.item_type, (*offsets, 4)), (type_.key_type, (*offsets, 4))]
        elif pa.types.is_list(type_) or pa.types.is_large_list(type_):
            stack.append((type_.value_type, (*offsets, 8 if pa.types.is_large_list(type_) else 4)))
        elif pa.types.is_fixed_size_list(type_):
            stack.append((type_.value_type, (*offsets, 0)))
        else:
            leaves.append((type_, offsets))
    if len(leaves) != metadata.num_columns:
        raise pa.ArrowInvalid(
            f"its Arrow schema has {len(leaves)} leaf columns, its Parquet schema {metadata.num_columns}"
        )
    return leaves


def _fixed_width(type_: pa.DataType) -> int | None:
    """Bytes one value of a fixed-width Arrow type takes (a boolean: 1); None for a type of variable width."""
    try:
        return max(1, type_.bit_width // 8)
    except ValueError:
        return None


def _width(type_: pa.DataType) -> int:
    """Bytes one value of an Arrow type takes decoded: its width, or a variable-width value's offset (a view: 16)."""
    if pa.types.is_string_view(type_) or pa.types.is_binary_view(type_):
        return 16
    return _fixed_width(type_) or 8


def _decoded_size(array: pa.Array) -> int:
    """Bytes an array takes decoded, each dictionary expanded: a value counted once per row that holds it."""
    type_ = array.type
    if pa.types.is_dictionary(type_):
        values = array.dictionary
        if _fixed_width(values.type) is not None:
            return len(array) * (_width(values.type) + 8)
        lengths = pc.binary_length(values).take(array.indices)
        return (pc.sum(lengths).as_py() or 0) + 8 * len(array)
    if pa.types.is_struct(type_):
        return sum(_decoded_size(field) for field in array.flatten())
    if pa.types.is_map(type_):
        return 8 * len(array) + _decoded_size(array.keys) + _decoded_size(array.items)
    if (
        pa.types.is_list(type_)
        or pa.types.is_large_list(type_)
        or pa.types.is_fixed_size_list(type_)
    ):
        return 8 * len(array) + _decoded_size(array.flatten())
    return array.nbytes
