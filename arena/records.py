"""Reading and writing world and task records: ``.json`` and ``.jsonl``.

A ``.jsonl`` file holds one record per line: world records
(``"format": "coevo.world/1"``) and task records (``"format":
"coevo.task/1"``). A task may carry its world inline or name it by id; the
world record must then come earlier in the same file (or be known to the
caller, e.g. from a game log). A ``.json`` file holds one record or a list
of records.

Reading never stops at a bad record: :func:`iter_records` yields a
:class:`BadRecord` (with its line number and what is wrong) and goes on.
"""

from __future__ import annotations

import json
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
    "BadRecord",
    "Record",
    "dump_record",
    "iter_records",
    "json_schema",
    "load_records",
    "parse_record",
    "write_records",
]


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


def iter_records(
    source: str | Path | BinaryIO, *, format: str | None = None
) -> Iterator[Record | BadRecord]:
    """Read records from a file path (``-`` for standard input) or a binary stream.

    ``.jsonl`` (or ``format="jsonl"``) is read line by line: every non-blank
    line is one record, and a bad line does not stop the others. Anything
    else is read as one JSON document (an object or an array of objects).

    Yields:
        A :class:`Record` or a :class:`BadRecord` per record, in order.
    """
    if isinstance(source, (str, Path)):
        name = str(source)
        if name == "-":
            data = sys.stdin.buffer.read()
            fmt = format or "jsonl"
        else:
            data = Path(source).read_bytes()
            fmt = format or ("jsonl" if name.endswith(".jsonl") else "json")
    else:
        data = source.read()
        fmt = format or "jsonl"
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if fmt == "jsonl":
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield BadRecord(
                    number, "task", f"not UTF-8 text ({exc.reason} at byte {exc.start})"
                )
                continue
            yield _parse_text(text, number)
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        yield BadRecord(1, "task", f"not UTF-8 text ({exc.reason} at byte {exc.start})")
        return
    if not text.strip():
        return
    yield from _json_document(text)


def load_records(source: str | Path | BinaryIO) -> tuple[list[TaskSpec], dict[str, WorldSpec]]:
    """Read every task and world record, failing on the first bad one.

    Returns:
        The tasks in file order, and the world records by id.

    Raises:
        RecordError: a record could not be read (with its line number).
    """
    tasks: list[TaskSpec] = []
    worlds: dict[str, WorldSpec] = {}
    for item in iter_records(source):
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
