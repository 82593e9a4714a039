"""Reading and writing records: .jsonl line by line (a bad line never stops the rest), .json documents."""

from __future__ import annotations

import io
import json
import os
import tracemalloc

import pytest
from coevo.arena import (
    BadRecord,
    Record,
    RecordError,
    TaskSpec,
    WorldSpec,
    dump_record,
    iter_records,
    load_records,
    parse_record,
    records,
    write_records,
)
from coevo.arena.records import MAX_LINE_BYTES, iter_lines
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.factories import EXAMPLES, mini_task, mini_world


def records_of(text: str, fmt: str = "jsonl") -> list[Record | BadRecord]:
    return list(iter_records(io.BytesIO(text.encode("utf-8")), format=fmt))


def test_examples_load_with_worlds_referenced_by_id():
    """The example file holds world records, then tasks that name their world by id."""
    tasks, worlds = load_records(EXAMPLES)
    assert len(worlds) == 3 and len(tasks) >= 4
    assert all(isinstance(t.world, str) and t.world in worlds for t in tasks)


def test_bad_lines_are_reported_with_their_line_numbers_and_the_rest_is_read():
    """Malformed JSON, wrong types and unknown formats become BadRecords; good lines around them still parse."""
    good = json.dumps(mini_task())
    lines = [
        good,
        "",
        "{not json",
        json.dumps({"format": "coevo.task/1", "world": 5}),
        json.dumps({"format": "coevo.task/9"}),
        json.dumps([1, 2]),
        '{"format": "coevo.world/1", "domain": "x", "domain": "y"}',
        '{"format": "coevo.task/1", "x": NaN}',
        json.dumps({"instruction": "no format"}),
        good,
    ]
    items = records_of("\n".join(lines))
    assert [i.line for i in items] == [1, 3, 4, 5, 6, 7, 8, 9, 10]
    kinds = [type(i).__name__ for i in items]
    assert kinds == ["Record", *["BadRecord"] * 7, "Record"]
    errors = [i.error for i in items if isinstance(i, BadRecord)]
    assert "malformed JSON" in errors[0]
    assert "world" in errors[1] and "instruction" in errors[1]
    assert "unknown format 'coevo.task/9'" in errors[2]
    assert "a record is a JSON object, got array" in errors[3]
    assert "duplicate key 'domain'" in errors[4]
    assert "NaN is not valid JSON" in errors[5]
    assert 'missing "format"' in errors[6]
    assert items[5].kind == "world"  # the duplicate-key line says it is a world


def test_non_utf8_line_is_a_bad_record():
    """A line that is not UTF-8 is named; the next line is read."""
    data = b"\xff\xfe{}\n" + json.dumps(mini_task()).encode()
    items = list(iter_records(io.BytesIO(data), format="jsonl"))
    assert isinstance(items[0], BadRecord) and "not UTF-8" in items[0].error
    assert isinstance(items[1], Record)


def test_json_document_with_an_array_reports_each_records_line():
    """A .json array of records gives each record the line it starts on."""
    world = json.dumps(mini_world(), indent=2)
    task = json.dumps(mini_task(), indent=2)
    text = "[\n" + world + ",\n" + task + "\n]\n"
    items = records_of(text, "json")
    assert [i.kind for i in items] == ["world", "task"]
    assert items[0].line == 2 and items[1].line == 3 + world.count("\n")
    assert [i.line for i in records_of(json.dumps(mini_task()), "json")] == [1]
    broken = records_of(
        "[" + json.dumps(mini_world()) + " " + json.dumps(mini_world()) + "]", "json"
    )
    assert isinstance(broken[-1], BadRecord) and "expected ','" in broken[-1].error


def test_write_then_read_keeps_ids(tmp_path, examples):
    """Records written by write_records read back with the same ids, which are written out."""
    tasks, worlds = examples
    path = tmp_path / "out.jsonl"
    assert write_records(path, [*worlds.values(), *tasks]) == len(worlds) + len(tasks)
    first = json.loads(path.read_text().splitlines()[0])
    assert first["id"] == next(iter(worlds))
    again_tasks, again_worlds = load_records(path)
    assert [t.task_id for t in again_tasks] == [t.task_id for t in tasks]
    assert list(again_worlds) == list(worlds)
    pretty = tmp_path / "out.json"
    write_records(pretty, tasks[:1])
    assert pretty.read_text().startswith("[\n  {")
    assert [t.task_id for t in load_records(pretty)[0]] == [tasks[0].task_id]


def test_load_records_raises_record_error_with_the_line():
    """load_records is strict: the first bad record raises RecordError naming its line."""
    data = (json.dumps(mini_task()) + "\n{oops\n").encode()
    try:
        load_records(io.BytesIO(data))
    except RecordError as exc:
        assert exc.line == 2 and "line 2" in str(exc)
    else:
        raise AssertionError("expected RecordError")


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
record_like = st.fixed_dictionaries(
    {"format": st.sampled_from(["coevo.task/1", "coevo.world/1"])},
    optional={
        "world": json_values | st.just(mini_world()),
        "instruction": json_values,
        "verifier": json_values | st.just({"checks": [], "frame": {}}),
        "solution": json_values | st.just([{"tool": "submit"}]),
        "domain": json_values,
        "now": json_values,
        "schema": json_values,
        "data": json_values | st.just({"t": {"columns": ["a"], "rows": [[{"$base64": "!!"}]]}}),
        "tools": json_values,
        "features": json_values,
        "id": json_values,
    },
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(json_values, record_like))
def test_arbitrary_json_never_crashes_the_reader(obj):
    """Any JSON value either parses into a record or raises RecordError, nothing else."""
    try:
        spec = parse_record(obj)
    except RecordError as exc:
        assert exc.message
    else:
        assert isinstance(spec, (TaskSpec, WorldSpec))
        dump_record(spec)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_iter_records(data):
    """Any bytes read as JSON lines or as a JSON document yield records or BadRecords."""
    for fmt in ("jsonl", "json"):
        for item in iter_records(io.BytesIO(data), format=fmt):
            assert isinstance(item, (Record, BadRecord))


def test_deeply_nested_json_is_a_bad_record():
    """Nesting deep enough to exhaust the parser is reported, not raised."""
    items = records_of("[" * 100_000 + "]" * 100_000)
    assert isinstance(items[0], BadRecord)


def test_unpaired_surrogate_is_a_bad_record_not_a_crash():
    """A lone \\ud800 escape cannot be hashed or stored: the line is reported, the others still read."""
    bad = json.dumps(mini_task()).replace("Close the open", "Close \\ud800 the open")
    items = records_of(bad + "\n" + json.dumps(mini_task()))
    assert (
        isinstance(items[0], BadRecord)
        and "surrogate" in items[0].error
        and "instruction" in items[0].error
    )
    assert isinstance(items[1], Record)


class Trickle(io.RawIOBase):
    """A binary stream of ``head``, then ``zeros`` NUL bytes (made on demand), then ``tail``.

    Each read returns at most ``step`` bytes, so records straddle reads.
    """

    def __init__(self, head: bytes = b"", zeros: int = 0, tail: bytes = b"", step: int = 1 << 20):
        self._parts = [head, zeros, tail]
        self._step = step

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        want = self._step if size is None or size < 0 else min(size, self._step)
        while self._parts:
            part = self._parts[0]
            if isinstance(part, int):
                if part > 0:
                    n = min(want, part)
                    self._parts[0] = part - n
                    return bytes(n)
            elif part:
                self._parts[0] = part[want:]
                return part[:want]
            self._parts.pop(0)
        return b""


def peak_allocated(read) -> tuple[object, int]:
    """What ``read()`` returns, and the most memory Python held at once while it ran."""
    tracemalloc.start()
    try:
        result = read()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_line_over_the_limit_is_reported_and_skipped_without_being_held():
    """A 64 MiB line between two good records: both are read, the long line is one BadRecord naming the limit, and it is never held in memory."""
    good = json.dumps(mini_task()).encode()
    stream = Trickle(good + b"\nxx", zeros=64 << 20, tail=b"\n" + good + b"\n")
    items, peak = peak_allocated(lambda: list(iter_records(stream, max_line_bytes=1 << 20)))
    assert [(type(i).__name__, i.line) for i in items] == [
        ("Record", 1),
        ("BadRecord", 2),
        ("Record", 3),
    ]
    assert "longer than 1048576 bytes (1 MiB)" in items[1].error
    assert "--max-line-bytes" in items[1].error and "max_line_bytes=" in items[1].error
    assert peak < 8 << 20, f"reading held {peak} bytes at once; the long line must be dropped"


def test_input_with_no_newline_is_one_error_and_reading_ends():
    """Bytes without a newline (e.g. from /dev/zero) give one BadRecord for line 1, then the end."""
    stream = Trickle(zeros=32 << 20)
    items, peak = peak_allocated(lambda: list(iter_records(stream, max_line_bytes=1 << 20)))
    assert len(items) == 1 and isinstance(items[0], BadRecord) and items[0].line == 1
    assert peak < 8 << 20


def test_the_default_line_limit_is_16_mib():
    """The stated default: a line of 16 MiB is read, one byte more is reported."""
    assert MAX_LINE_BYTES == 16 * 1024 * 1024
    items = list(iter_records(Trickle(b'"', zeros=MAX_LINE_BYTES - 2, tail=b'"\n')))
    assert "longer than" not in items[0].error
    over = list(iter_records(Trickle(b'"', zeros=MAX_LINE_BYTES - 1, tail=b'"\n')))
    assert "longer than 16777216 bytes (16 MiB)" in over[0].error


def test_a_run_of_blank_lines_is_passed_over_at_once_its_lines_counted():
    """A million newlines (and blank lines of spaces) before a record: the reader's line loop sees one line, numbered after them all."""
    data = b"\n" * 1_000_000 + b" \t\r\n" * 1000 + b"{}\n" + b"\n" * 10
    seen = list(records._lines(Trickle(data, step=1 << 20), MAX_LINE_BYTES))
    assert seen == [(1_001_001, b"{}")]
    assert [item.line for item in iter_records(io.BytesIO(data))] == [1_001_001]


def test_iter_lines_stops_at_a_long_or_undecodable_line_saying_what_to_do():
    """iter_lines yields each non-blank line numbered; a line over the limit or not UTF-8 is a RecordError naming it, with the caller's fix."""
    lines = iter_lines(
        io.BytesIO(b'\n{"a": 1}\n\n' + b"x" * 40 + b"\n"), max_line_bytes=20, fix="shorten it"
    )
    assert next(lines) == (2, '{"a": 1}')
    with pytest.raises(
        RecordError, match=r"^line 4: the line is longer than 20 bytes.*; shorten it$"
    ):
        next(lines)
    with pytest.raises(RecordError, match=r"^line 1: not UTF-8"):
        list(iter_lines(io.BytesIO(b"\xff\n")))


def test_a_json_document_over_the_limit_is_reported_and_not_read():
    """A .json document larger than max_document_bytes is one BadRecord on line 1, read no further than the limit."""
    stream = Trickle(b"[", zeros=64 << 20)
    items, peak = peak_allocated(
        lambda: list(iter_records(stream, format="json", max_document_bytes=1 << 20))
    )
    assert len(items) == 1 and items[0].line == 1
    assert "larger than 1048576 bytes (1 MiB)" in items[0].error
    assert "--max-document-bytes" in items[0].error
    assert peak < 8 << 20
    fits = records_of(json.dumps(mini_task()), "json")
    assert isinstance(fits[0], Record)


def test_limits_can_be_raised_and_must_be_positive():
    """max_line_bytes lets a long record through; a limit below 1 is a RecordError."""
    good = json.dumps(mini_task()).encode()
    assert isinstance(next(iter_records(io.BytesIO(good), max_line_bytes=len(good))), Record)
    assert isinstance(next(iter_records(io.BytesIO(good), max_line_bytes=len(good) - 1)), BadRecord)
    with pytest.raises(RecordError, match="max_line_bytes must be a positive number"):
        iter_records(io.BytesIO(good), max_line_bytes=0)


def test_paths_that_are_not_regular_files_are_refused_before_reading(tmp_path):
    """A device, a directory or a FIFO is 'not a regular file' (never 'no such file'); a missing path is 'no such file'."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, what in [
        ("/dev/zero", "a character device"),
        (tmp_path, "a directory"),
        (fifo, "a FIFO"),
    ]:
        with pytest.raises(RecordError) as caught:
            iter_records(path)  # raised on the call, before anything is read
        assert f"{path} is not a regular file (it is {what})" in str(caught.value)
        assert "no such file" not in str(caught.value)
        with pytest.raises(RecordError, match="not a regular file"):
            load_records(path)
    with pytest.raises(RecordError, match=r"^no such file: .*missing\.jsonl$"):
        iter_records(tmp_path / "missing.jsonl")


def test_a_regular_file_is_read_as_a_stream(tmp_path):
    """A .jsonl path with an over-long line reads the records around it."""
    good = json.dumps(mini_task())
    path = tmp_path / "tasks.jsonl"
    path.write_text(good + "\n" + "x" * 5000 + "\n\n" + good)
    items = list(iter_records(path, max_line_bytes=len(good)))
    assert [(type(i).__name__, i.line) for i in items] == [
        ("Record", 1),
        ("BadRecord", 2),
        ("Record", 4),
    ]


_pieces = st.one_of(
    st.binary(max_size=40),
    st.sampled_from(
        [
            b"\n",
            b"\r\n",
            b" \t",
            b"\xff\xfe",
            b"\xed\xa0\x80",
            b"\xef\xbb\xbf",
            b"[" * 5000,
            b'{"a":' * 3000,
            b"{}",
            json.dumps(mini_task()).encode(),
            json.dumps(mini_world()).encode(),
        ]
    ),
)


@settings(max_examples=100, deadline=None)
@given(
    data=st.lists(_pieces, max_size=12).map(b"".join),
    limit=st.sampled_from([MAX_LINE_BYTES, 1, 17, 300, 4000]),
    step=st.integers(min_value=1, max_value=64) | st.just(1 << 20),
)
def test_any_bytes_give_one_item_per_non_blank_line(data, limit, step):
    """Any bytes, read in any chunks: iter_records never raises and yields one item per non-blank (or over-long) line, in order."""
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    expected = [
        number
        for number, line in enumerate(body.split(b"\n"), start=1)
        if line.strip() or len(line) > limit
    ]
    items = list(iter_records(Trickle(data, step=step), format="jsonl", max_line_bytes=limit))
    assert [item.line for item in items] == expected
    assert all(isinstance(item, (Record, BadRecord)) for item in items)
    document = iter_records(Trickle(data, step=step), format="json", max_document_bytes=limit)
    assert all(isinstance(item, (Record, BadRecord)) for item in document)
