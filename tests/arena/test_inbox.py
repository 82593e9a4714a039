"""The inbox: rollouts come back into a run as Parquet parts, written atomically, read only after every row is checked."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from coevo.arena.gamelog import LogError, RunDir
from coevo.arena.gamelog.inbox import (
    INBOX,
    INBOX_SCHEMA,
    InboxRollout,
    batch_part_id,
    inbox_markdown,
    list_parts,
    read_part,
    write_part,
)
from coevo.arena.spec import ToolCall

ROOT = Path(__file__).resolve().parents[2]
TASK = "sha256:" + "ab" * 32


def _row(n: int = 0, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "rollout": n,
        "task_id": TASK,
        "calls": json.dumps(
            [
                {"tool": "find_customer", "arguments": {"email": "ada@ex.io"}},
                {"tool": "submit", "arguments": {}},
            ]
        ),
        "reward": 1.0,
        "messages": json.dumps([{"role": "user", "content": "hi"}]),
        "tools": json.dumps([{"type": "function", "function": {"name": "submit"}}]),
        "policy_version": "qwen-step-3",
        "model": "qwen",
        "source": "verifiers",
        "rollout_id": f"trace-{n}",
        "turn_prompt_ids": [[1, 2, 3]],
        "turn_completion_ids": [[4, 5]],
        "turn_logprobs": [[-0.5, -0.25]],
    }
    row.update(changes)
    return row


@pytest.mark.parametrize("where", ["local", "mock"])
def test_a_part_is_read_back_as_written(tmp_path, where: str) -> None:
    """write_part then read_part gives the same rollouts, on a local disk and on another pyarrow filesystem."""
    run = RunDir(str(tmp_path / "run") if where == "local" else "mock:///runs/inbox")
    rows = [
        _row(0),
        _row(
            1,
            reward=0.0,
            messages=None,
            turn_prompt_ids=None,
            turn_completion_ids=None,
            turn_logprobs=None,
        ),
    ]
    assert write_part(run, "batch-1", rows) == f"{INBOX}/batch-1.parquet"
    assert list_parts(run) == ["batch-1"]
    back = read_part(run, "batch-1")
    assert [r.cells() for r in back] == [InboxRollout.model_validate(r).cells() for r in rows]
    assert back[0].tool_calls == [
        ToolCall("find_customer", {"email": "ada@ex.io"}),
        ToolCall("submit", {}),
    ]
    assert back[1].messages is None and back[1].turn_completion_ids is None


def test_parts_are_listed_in_name_order_and_unfinished_ones_are_ignored(tmp_path) -> None:
    """list_parts sorts the *.parquet parts; temporary (`.`) and `_` names and other files are not parts."""
    run = tmp_path / "run"
    for part in ("b", "a", "c-2"):
        write_part(str(run), part, [_row()])
    inbox = run / INBOX
    for stray in (".a.parquet.1234", ".d.parquet", "_SUCCESS", "_e.parquet", "notes.txt"):
        (inbox / stray).write_bytes(b"")
    assert list_parts(str(run)) == ["a", "b", "c-2"]
    assert sorted(p.name for p in inbox.iterdir() if p.name.startswith(".a")) == [
        ".a.parquet.1234"
    ], "write_part leaves no temporary file behind"
    assert list_parts(str(tmp_path / "none")) == []


def test_writing_is_atomic_a_failed_write_leaves_nothing(tmp_path, monkeypatch) -> None:
    """A write that fails before its rename leaves neither the part nor its temporary file."""
    run = RunDir(str(tmp_path / "run"))

    class FullDisk:
        """The run's filesystem, except that the rename fails."""

        def __init__(self, fs: Any):
            self.fs = fs

        def __getattr__(self, name: str) -> Any:
            return getattr(self.fs, name)

        def move(self, *_: Any) -> None:
            raise OSError("disk full")

    monkeypatch.setattr(RunDir, "fs", property(lambda self: FullDisk(self._resolved[0])))
    with pytest.raises(OSError, match="disk full"):
        write_part(run, "lost", [_row()])
    assert list((tmp_path / "run" / INBOX).iterdir()) == []


def test_writing_a_part_again_replaces_it() -> None:
    """A part id names one batch: writing it again replaces the part rather than adding rows."""
    run = RunDir("mock:///runs/again")
    write_part(run, "p", [_row(0), _row(1)])
    write_part(run, "p", [_row(0)])
    assert [r.rollout for r in read_part(run, "p")] == [0]


def test_batch_part_ids_sort_by_time_and_name_the_batch() -> None:
    """The same batch gets the same id; another batch or a later one gets another, later ids sort after."""
    start = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    first = batch_part_id("verifiers", ["t1", "t2"], start)
    assert first == batch_part_id("verifiers", ["t1", "t2"], start)
    assert first != batch_part_id("verifiers", ["t1", "t3"], start)
    assert first.startswith("verifiers-20260501T120000000000Z-")
    assert batch_part_id("verifiers", ["t0"], start + timedelta(seconds=1)) > first


@pytest.mark.parametrize(
    ("change", "column"),
    [
        ({"task_id": "t1"}, "task_id"),
        ({"calls": "not json"}, "calls"),
        ({"calls": json.dumps({"tool": "submit"})}, "calls"),
        ({"calls": json.dumps([{"tool": "submit"}])}, "calls"),
        ({"calls": json.dumps([{"tool": "submit", "arguments": [1]}])}, "calls"),
        ({"calls": json.dumps([{"tool": "", "arguments": {}}])}, "calls"),
        ({"reward": 2.0}, "reward"),
        ({"reward": float("nan")}, "reward"),
        ({"messages": json.dumps([{"content": "no role"}])}, "messages"),
        ({"tools": json.dumps(["submit"])}, "tools"),
        ({"source": ""}, "source"),
        ({"source": "Bad Source"}, "source"),
        ({"turn_logprobs": [[-0.5]]}, "turn 0"),
        ({"turn_logprobs": [[-0.5, float("nan")]]}, "turn 0: a log-probability of nan"),
        ({"turn_logprobs": [[float("-inf"), -0.5]]}, "turn 0: a log-probability of -inf"),
        ({"turn_logprobs": [[-9999.0, -0.5]]}, "turn 0: a log-probability of -9999"),
        ({"turn_logprobs": [[-0.5, 0.7]]}, "turn 0: a log-probability of 0.7"),
        ({"turn_completion_ids": None}, "come together"),
        ({"turn_prompt_ids": [[1], [2]]}, "turn_prompt_ids has 2 turns"),
        ({"rollout": 3}, "numbered 0, 1, 2"),
    ],
)
def test_a_malformed_row_is_refused_naming_the_part_row_and_column(
    tmp_path, change: dict[str, Any], column: str
) -> None:
    """A bad row is a LogError naming the part, the row and what is wrong, both when written and when read."""
    run = str(tmp_path / "run")
    rows = [_row(0), _row(1, **change)]
    with pytest.raises(LogError, match=f"inbox part 'p': row 1: .*{column}"):
        write_part(run, "p", rows)
    # a producer that does not use write_part: the reader checks every row all the same
    (tmp_path / "run" / INBOX).mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.Table.from_pylist(rows, schema=INBOX_SCHEMA), tmp_path / "run" / INBOX / "p.parquet"
    )
    with pytest.raises(LogError, match=f"inbox part 'p' .*row 1: .*{column}"):
        read_part(run, "p")


def _raw_part(tmp_path: Path, table: pa.Table | bytes) -> str:
    inbox = tmp_path / "run" / INBOX
    inbox.mkdir(parents=True)
    if isinstance(table, bytes):
        (inbox / "p.parquet").write_bytes(table)
    else:
        pq.write_table(table, inbox / "p.parquet")
    return str(tmp_path / "run")


def test_a_part_that_is_not_parquet_is_refused(tmp_path) -> None:
    """Bytes that are not Parquet (a pickle, say) are never interpreted: the part is named and refused."""
    run = _raw_part(tmp_path, b"\x80\x04\x95 not parquet at all")
    with pytest.raises(
        LogError, match=r"inbox part 'p' \(inbox/p.parquet .*cannot be read as Parquet"
    ):
        read_part(run, "p")


def test_a_part_with_other_columns_is_refused(tmp_path) -> None:
    """Unknown columns, missing required columns and columns of the wrong type name the column."""
    row = _row()
    table = pa.Table.from_pylist([{**row, "code": "import os"}])
    with pytest.raises(LogError, match=r"unknown column\(s\) \['code'\]"):
        read_part(_raw_part(tmp_path / "a", table), "p")
    table = pa.Table.from_pylist([{k: v for k, v in row.items() if k != "calls"}])
    with pytest.raises(LogError, match=r"missing column\(s\) \['calls'\]"):
        read_part(_raw_part(tmp_path / "b", table), "p")
    table = pa.Table.from_pylist([{**row, "turn_prompt_ids": "1 2 3"}])
    with pytest.raises(LogError, match="column 'turn_prompt_ids' is string"):
        read_part(_raw_part(tmp_path / "c", table), "p")


def test_a_column_that_may_be_null_may_be_missing(tmp_path) -> None:
    """A part from a producer that writes fewer of the optional columns reads them as null."""
    required = [f.name for f in INBOX_SCHEMA if not f.nullable]
    table = pa.Table.from_pylist([{k: v for k, v in _row().items() if k in required}])
    (rollout,) = read_part(_raw_part(tmp_path, table), "p")
    assert rollout.messages is None and rollout.turn_logprobs is None
    assert rollout.reward == 1.0


def test_bad_part_ids_empty_parts_and_missing_parts_are_refused(tmp_path) -> None:
    """Part ids are names, never paths; a part holds at least one row; a missing part says what is there."""
    run = str(tmp_path / "run")
    for bad in ("../escape", "a/b", ".hidden", "", "x" * 200):
        with pytest.raises(LogError, match="is not an inbox part id"):
            write_part(run, bad, [_row()])
        with pytest.raises(LogError, match="is not an inbox part id"):
            read_part(run, bad)
    with pytest.raises(LogError, match="no rows"):
        write_part(run, "empty", [])
    write_part(run, "there", [_row()])
    with pytest.raises(LogError, match=r"no such part; the inbox holds \['there'\]"):
        read_part(run, "elsewhere")


def test_the_docs_hold_the_inbox_columns() -> None:
    """docs/verifiers.md contains inbox_markdown() verbatim, so the page cannot drift from InboxRollout."""
    page = (ROOT / "docs" / "verifiers.md").read_text()
    assert inbox_markdown() in page, (
        "docs/verifiers.md is out of date: paste in the output of "
        "coevo.arena.gamelog.inbox.inbox_markdown() under 'The inbox'"
    )
