"""Reading and writing records: .jsonl line by line (a bad line never stops the rest), .json documents."""

from __future__ import annotations

import io
import json

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
    write_records,
)
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
