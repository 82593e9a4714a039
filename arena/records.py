"""Reading and writing world and task records: ``.json`` and ``.jsonl``.

A ``.jsonl`` file holds one record per line: world records
(``"format": "coevo.world/1"``) and task records (``"format":
"coevo.task/1"``). A task may carry its world inline or name it by id; the
world record must then come earlier in the same file (or be known to the
caller, e.g. from a game log). A ``.json`` file holds one record or a list
of records.

Reading never stops at a bad record: :func:`iter_records` yields a
:class:`BadRecord` (with its line number and what is wrong) and goes on.

Input is read as a stream, in chunks, and never held whole: a line longer
than :data:`MAX_LINE_BYTES` is reported and skipped up to the next newline
without being kept, a run of blank lines is passed over a chunk at a time
(256 MiB of newlines is not 256 million lines to loop over), and a ``.json``
document larger than :data:`MAX_DOCUMENT_BYTES` is reported, not read. A path must name a
regular file (``-`` is standard input); a directory, a device such as
``/dev/zero`` or a FIFO is refused before anything is read.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

from coevo.arena.errors import RecordError
from coevo.arena.spec import TASK_FORMAT, WORLD_FORMAT, TaskSpec, WorldSpec
from pydantic import ValidationError
from pydantic.json_schema import models_json_schema

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_LINE_BYTES",
    "BadRecord",
    "Record",
    "collect_records",
    "dump_record",
    "iter_lines",
    "iter_records",
    "json_schema",
    "load_records",
    "parse_line",
    "parse_record",
    "write_records",
]


MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest line of JSON lines input, in bytes (16 MiB); a longer line is a :class:`BadRecord`."""

MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
"""The largest ``.json`` document, in bytes (64 MiB); a larger one is a :class:`BadRecord`, not read."""

_CHUNK_BYTES = 1024 * 1024
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class Record:
    """A record read from a file.

    Attributes:
        line: the 1-based line it starts on.
        kind: ``task`` or ``world``.
        spec: the parsed record.
    """

    line: int
    kind: Literal["task", "world"]
    spec: TaskSpec | WorldSpec


@dataclass(frozen=True, slots=True)
class BadRecord:
    """Input that could not be read as a record (malformed JSON, wrong shape or types).

    Attributes:
        line: the 1-based line it starts on.
        kind: ``task`` or ``world`` when the input said so (default ``task``).
        error: what is wrong, and where.
    """

    line: int
    kind: Literal["task", "world"]
    error: str


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r} in an object")
        result[key] = value
    return result


def _loads(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)


def _describe_validation(exc: ValidationError, limit: int = 6) -> str:
    parts = []
    for error in exc.errors(include_url=False)[:limit]:
        location = ".".join(str(p) for p in error["loc"]) or "record"
        value = repr(error.get("input"))
        shown = value if len(value) <= 50 else value[:47] + "..."
        parts.append(f"{location}: {error['msg']} (got {shown})")
    more = exc.error_count() - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


def _kind_of(obj: Any) -> Literal["task", "world"]:
    if isinstance(obj, dict) and obj.get("format") == WORLD_FORMAT:
        return "world"
    return "task"


def find_unencodable(obj: Any, path: str = "record") -> str | None:
    """The path of the first string (or key) that cannot be encoded as UTF-8, or None."""
    stack: list[tuple[Any, str]] = [(obj, path)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return where
        elif isinstance(value, dict):
            for key, item in value.items():
                try:
                    str(key).encode("utf-8")
                except UnicodeEncodeError:
                    return f"{where} (a key)"
                stack.append((item, f"{where}.{key}"))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(value))
    return None


def parse_record(obj: Any, *, line: int | None = None) -> TaskSpec | WorldSpec:
    """Turn a JSON value into a :class:`TaskSpec` or :class:`WorldSpec`.

    Raises:
        RecordError: the value is not a record of the right shape (the only
            exception this function raises, whatever the input).
    """
    kind = _kind_of(obj)
    if not isinstance(obj, dict):
        type_name = type(obj).__name__ if not isinstance(obj, list) else "array"
        raise RecordError(f"a record is a JSON object, got {type_name}", line=line, kind=kind)
    fmt = obj.get("format")
    if fmt is None:
        raise RecordError(
            f'missing "format": write "format": "{TASK_FORMAT}" or "{WORLD_FORMAT}"',
            line=line,
            kind=kind,
        )
    if fmt not in (TASK_FORMAT, WORLD_FORMAT):
        raise RecordError(
            f"unknown format {fmt!r}: this coevo reads {TASK_FORMAT} and {WORLD_FORMAT}",
            line=line,
            kind=kind,
        )
    bad_text = find_unencodable(obj)
    if bad_text is not None:
        raise RecordError(
            f"{bad_text}: text holds an unpaired UTF-16 surrogate (e.g. \\ud800), which is not valid "
            "Unicode; write the character itself or its surrogate pair",
            line=line,
            kind=kind,
        )
    model = WorldSpec if fmt == WORLD_FORMAT else TaskSpec
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise RecordError(_describe_validation(exc), line=line, kind=kind) from exc
    except (RecursionError, ValueError, TypeError) as exc:
        raise RecordError(f"cannot read the record: {exc}", line=line, kind=kind) from exc


def _guess_kind(text: str) -> Literal["task", "world"]:
    """The kind a line that is not valid JSON says it is, if it says."""
    return "world" if f'"{WORLD_FORMAT}"' in text and f'"{TASK_FORMAT}"' not in text else "task"


def parse_line(text: str, line: int) -> Record | BadRecord:
    """One line of JSON lines input (or a document) as a :class:`Record`, or a :class:`BadRecord` saying what is wrong.

    The JSON is read as :func:`iter_records` reads it: no ``NaN``, no
    duplicate key, nesting too deep for the parser a :class:`BadRecord`.
    """
    return _parse_text(text, line)


def _parse_text(text: str, line: int) -> Record | BadRecord:
    try:
        obj = _loads(text)
    except RecursionError:
        return BadRecord(line, _guess_kind(text), "malformed JSON: nested too deeply")
    except json.JSONDecodeError as exc:
        return BadRecord(
            line, _guess_kind(text), f"malformed JSON: {exc.msg} at column {exc.colno}"
        )
    except ValueError as exc:
        return BadRecord(line, _guess_kind(text), f"malformed JSON: {exc}")
    return _to_item(obj, line)


def _to_item(obj: Any, line: int) -> Record | BadRecord:
    """A parsed JSON value as a :class:`Record`, or a :class:`BadRecord` saying what is wrong."""
    try:
        spec = parse_record(obj, line=line)
    except RecordError as exc:
        return BadRecord(line, exc.kind or "task", exc.message)
    return Record(line, "world" if isinstance(spec, WorldSpec) else "task", spec)


def _json_document(text: str) -> Iterator[Record | BadRecord]:
    """Records of a ``.json`` document: one object, or an array of them (each with its start line)."""
    stripped = text.lstrip()
    offset = len(text) - len(stripped)
    if not stripped.startswith("["):
        yield _parse_text(text, text.count("\n", 0, offset) + 1)
        return
    decoder = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    position = offset + 1
    expect_value = True
    while True:
        while position < len(text) and text[position] in " \t\r\n":
            position += 1
        line = text.count("\n", 0, position) + 1
        if position >= len(text):
            yield BadRecord(line, "task", "malformed JSON: the array is not closed")
            return
        char = text[position]
        if char == "]":
            return
        if not expect_value:
            if char != ",":
                yield BadRecord(line, "task", "malformed JSON: expected ',' or ']' between records")
                return
            position += 1
            expect_value = True
            continue
        try:
            obj, end = decoder.raw_decode(text, position)
        except RecursionError:
            yield BadRecord(line, "task", "malformed JSON: nested too deeply")
            return
        except ValueError as exc:
            yield BadRecord(line, "task", f"malformed JSON: {getattr(exc, 'msg', exc)}")
            return
        yield _to_item(obj, line)
        position = end
        expect_value = False


def _size(n: int) -> str:
    """``n`` bytes in words, e.g. ``16777216 bytes (16 MiB)``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n} bytes ({n // scale} {unit})"
    return f"{n} bytes"


def _what_it_is(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a file")


def _unreadable(path: Path, exc: OSError) -> RecordError:
    if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        return RecordError(f"no such file: {path}")
    return RecordError(f"cannot read {path}: {exc.strerror or exc}")


def _check_regular(path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise RecordError(
            f"{path} is not a regular file (it is {_what_it_is(mode)}); records are read from a "
            ".jsonl or .json file, or from standard input with -"
        )


def _open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading, or a :class:`RecordError` if it is not a regular file."""
    # O_NONBLOCK: opening a FIFO that replaced the file since it was checked must not wait for a writer.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _unreadable(path, exc) from None
    try:
        _check_regular(path, os.fstat(fd).st_mode)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _chunks(stream: BinaryIO) -> Iterator[bytes]:
    """The stream's bytes in chunks of at most about a MiB, without a leading UTF-8 BOM."""
    read = getattr(stream, "read1", None) or stream.read
    head = b""
    ended = False
    while len(head) < len(_BOM) and not ended:
        chunk = read(_CHUNK_BYTES)
        ended = not chunk
        head += chunk or b""
    if head.startswith(_BOM):
        head = head[len(_BOM) :]
    if head:
        yield head
    # No read after the end: on a terminal a second read would wait for another Ctrl-D.
    while not ended and (chunk := read(_CHUNK_BYTES)):
        yield chunk


_BLANK = b" \t\r\n"


def _blank_run(chunk: bytes, start: int, limit: int) -> int:
    """Where the blank lines (spaces, tabs, carriage returns) from ``start`` of ``chunk`` end: past the last newline of the run (``start``: none).

    Each must be within ``limit`` (a longer one is reported, even blank). A
    chunk is at most :data:`_CHUNK_BYTES`, so under a limit that large every
    line in it is; under a smaller one, a pattern counts each line's bytes.
    """
    if limit < _CHUNK_BYTES:
        run = re.compile(rb"(?:[ \t\r]{0,%d}\n)+" % limit).match(chunk, start)
        return run.end() if run else start
    blank_to = len(chunk) - len(chunk[start:].lstrip(_BLANK))
    return chunk.rfind(b"\n", start, blank_to) + 1 or start


def _lines(stream: BinaryIO, limit: int) -> Iterator[tuple[int, bytes | None]]:
    """Each line's number and bytes (without the newline); ``None`` for a line longer than ``limit``.

    A long line is dropped as it is read, so at most ``limit`` bytes and one
    chunk are ever held, however long the line (or the input without a newline).
    Blank lines (whitespace) within ``limit`` are not yielded: a run of them is
    passed over in one step, counted.
    """
    number = 1
    pending = bytearray()
    skipping = False
    for chunk in _chunks(stream):
        start, size = 0, len(chunk)
        while start < size:
            if not pending and not skipping and chunk[start] in _BLANK:
                blank_to = _blank_run(chunk, start, limit)
                if blank_to > start:
                    number += chunk.count(b"\n", start, blank_to)
                    start = blank_to
                    continue
            end = chunk.find(b"\n", start)
            stop = size if end < 0 else end
            if not skipping:
                if len(pending) + stop - start > limit:
                    skipping = True
                    pending = bytearray()
                    yield number, None
                elif end < 0:
                    pending += chunk[start:stop]
                elif pending:
                    pending += chunk[start:stop]
                    yield number, bytes(pending)
                    pending = bytearray()
                else:
                    yield number, chunk[start:stop]
            if end < 0:
                break
            skipping = False
            number += 1
            start = end + 1
    if pending:
        yield number, bytes(pending)


def _bounded_read(stream: BinaryIO, limit: int) -> bytearray | None:
    """All of the stream, or ``None`` (having read no more than ``limit`` + a chunk) if it is longer."""
    data = bytearray()
    for chunk in _chunks(stream):
        if len(data) + len(chunk) > limit:
            return None
        data += chunk
    return data


def _not_utf8(line: int, exc: UnicodeDecodeError) -> BadRecord:
    return BadRecord(line, "task", f"not UTF-8 text ({exc.reason} at byte {exc.start})")


_RAISE_LINE_LIMIT = (
    "it is skipped up to the next newline. If the record is meant to be this large, raise the "
    "limit: --max-line-bytes on the command line, max_line_bytes= in Python"
)


def _too_long(max_line_bytes: int, fix: str) -> str:
    return (
        f"the line is longer than {_size(max_line_bytes)}, the most a record line may hold; {fix}"
    )


def iter_lines(
    stream: BinaryIO, *, max_line_bytes: int = MAX_LINE_BYTES, fix: str = _RAISE_LINE_LIMIT
) -> Iterator[tuple[int, str]]:
    """Each non-blank line of JSON lines input, with its 1-based number, read as :func:`iter_records` reads it.

    A stream of chunks: at most ``max_line_bytes`` and a chunk are held, and a
    run of blank lines is passed over at once. For a reader that keeps what it
    reads and stops at the first bad line (an eval suite's file); ``fix`` is
    what the message of a line over the limit says to do.

    Raises:
        RecordError: a line longer than ``max_line_bytes``, or not UTF-8 (naming the line).
    """
    _positive("max_line_bytes", max_line_bytes)
    for number, raw in _lines(stream, max_line_bytes):
        if raw is None:
            raise RecordError(_too_long(max_line_bytes, fix), line=number)
        if not raw.strip():
            continue
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordError(_not_utf8(number, exc).error, line=number) from None


def _json_lines(stream: BinaryIO, max_line_bytes: int) -> Iterator[Record | BadRecord]:
    for number, raw in _lines(stream, max_line_bytes):
        if raw is None:
            yield BadRecord(number, "task", _too_long(max_line_bytes, _RAISE_LINE_LIMIT))
            continue
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield _not_utf8(number, exc)
            continue
        yield _parse_text(text, number)


def _document(stream: BinaryIO, max_document_bytes: int) -> Iterator[Record | BadRecord]:
    data = _bounded_read(stream, max_document_bytes)
    if data is None:
        yield BadRecord(
            1,
            "task",
            f"the document is larger than {_size(max_document_bytes)}, the most a .json "
            "document may hold; write the records as JSON lines (.jsonl, one record per line), "
            "or raise the limit: --max-document-bytes on the command line, max_document_bytes= "
            "in Python",
        )
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        yield _not_utf8(1, exc)
        return
    del data
    if not text.strip():
        return
    yield from _json_document(text)


def _read_path(
    path: Path, fmt: str, max_line_bytes: int, max_document_bytes: int
) -> Iterator[Record | BadRecord]:
    with _open_regular(path) as stream:
        if fmt == "jsonl":
            yield from _json_lines(stream, max_line_bytes)
        else:
            yield from _document(stream, max_document_bytes)


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RecordError(f"{name} must be a positive number of bytes, got {value!r}")
    return value


def iter_records(
    source: str | Path | BinaryIO,
    *,
    format: str | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_document_bytes: int = MAX_DOCUMENT_BYTES,
) -> Iterator[Record | BadRecord]:
    """Read records from a file path (``-`` for standard input) or a binary stream, as a stream.

    ``.jsonl`` (or ``format="jsonl"``; standard input and streams by default)
    is read line by line: every non-blank line is one record, and a bad line
    does not stop the others. A line longer than ``max_line_bytes`` is a
    :class:`BadRecord` (even a blank one) and is skipped, unread, up to the
    next newline. Anything else is read as one JSON document (an object or
    an array of objects) of at most ``max_document_bytes``; a larger one is
    one :class:`BadRecord` on line 1.

    The path is checked when this is called, before anything is read.

    Args:
        source: a path, ``-``, or a binary stream (read, not closed).
        format: ``jsonl`` or ``json``; by default from the path's suffix.
        max_line_bytes: the longest line, in bytes (default :data:`MAX_LINE_BYTES`).
        max_document_bytes: the largest ``.json`` document (default :data:`MAX_DOCUMENT_BYTES`).

    Returns:
        A :class:`Record` or a :class:`BadRecord` per record, in order.

    Raises:
        RecordError: the path does not exist, is not a regular file (a
            directory, a device, a FIFO) or cannot be opened; or a limit is
            not a positive number.
    """
    _positive("max_line_bytes", max_line_bytes)
    _positive("max_document_bytes", max_document_bytes)
    if isinstance(source, (str, Path)) and str(source) != "-":
        path = Path(source)
        try:
            _check_regular(path, path.stat().st_mode)
        except OSError as exc:
            raise _unreadable(path, exc) from None  # the message carries the OS's reason
        fmt = format or ("jsonl" if path.name.endswith(".jsonl") else "json")
        return _read_path(path, fmt, max_line_bytes, max_document_bytes)
    stream = sys.stdin.buffer if isinstance(source, (str, Path)) else source
    if (format or "jsonl") == "jsonl":
        return _json_lines(stream, max_line_bytes)
    return _document(stream, max_document_bytes)


def load_records(
    source: str | Path | BinaryIO,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_document_bytes: int = MAX_DOCUMENT_BYTES,
) -> tuple[list[TaskSpec], dict[str, WorldSpec]]:
    """Read every task and world record, failing on the first bad one.

    Reads as :func:`iter_records` does, with the same limits.

    Returns:
        The tasks in file order, and the world records by id.

    Raises:
        RecordError: the source cannot be read, or a record could not be
            read (with its line number).
    """
    return collect_records(
        iter_records(source, max_line_bytes=max_line_bytes, max_document_bytes=max_document_bytes)
    )


def collect_records(
    records: Iterable[Record | BadRecord],
) -> tuple[list[TaskSpec], dict[str, WorldSpec]]:
    """The tasks in order and the world records by id, failing on the first bad record.

    Raises:
        RecordError: a record could not be read (with its line number).
    """
    tasks: list[TaskSpec] = []
    worlds: dict[str, WorldSpec] = {}
    for item in records:
        if isinstance(item, BadRecord):
            raise RecordError(item.error, line=item.line, kind=item.kind)
        if isinstance(item.spec, WorldSpec):
            worlds[item.spec.world_id] = item.spec
        else:
            tasks.append(item.spec)
    return tasks, worlds


def dump_record(spec: TaskSpec | WorldSpec) -> dict[str, Any]:
    """A record as JSON-ready data, with its ``id`` filled in."""
    data = spec.model_dump(mode="json", by_alias=True)
    data["id"] = spec.world_id if isinstance(spec, WorldSpec) else spec.task_id
    if isinstance(spec, TaskSpec) and isinstance(spec.world, WorldSpec):
        data["world"]["id"] = spec.world.world_id
    return data


def write_records(path: str | Path, specs: Iterable[TaskSpec | WorldSpec]) -> int:
    """Write records (ids filled in): JSON lines, or one indented JSON array for a ``.json`` path.

    Returns:
        How many records were written.
    """
    records = [dump_record(spec) for spec in specs]
    target = Path(path)
    with target.open("w", encoding="utf-8") as handle:
        if target.suffix == ".json":
            json.dump(records, handle, ensure_ascii=False, indent=2)
            handle.write("\n")
        else:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return len(records)


def json_schema(record: str = "all") -> dict[str, Any]:
    """The JSON Schema of the record formats (``task``, ``world`` or ``all``)."""
    top: dict[str, Any] = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    if record != "all":
        model = TaskSpec if record == "task" else WorldSpec
        return top | model.model_json_schema(by_alias=True)
    refs, schema = models_json_schema(
        [(TaskSpec, "validation"), (WorldSpec, "validation")], by_alias=True, title="coevo records"
    )
    top |= schema
    top["oneOf"] = [refs[(TaskSpec, "validation")], refs[(WorldSpec, "validation")]]
    return top
