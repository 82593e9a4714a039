"""The inbox ingested by the loop: rollouts a trainer drove are replayed, verified, logged once, and seen by the curriculum."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from coevo.arena.errors import LogError
from coevo.arena.gamelog import GameLog
from coevo.arena.gamelog.inbox import INBOX_SCHEMA, InboxRollout, read_part, write_part
from coevo.arena.spec import TaskSpec
from coevo.run.experiment import load_experiment
from coevo.run.handoff.inbox import MAX_CALLS, READING, Inbox, known_tasks
from coevo.run.loop import resume_run, run_experiment

from tests.conftest import SMALL_RUN


def _accepted(log: GameLog) -> list[TaskSpec]:
    tasks, _ = log.task_specs()
    verdicts = log.read("verdicts", columns=["task_id", "accepted"]).to_pylist()
    sources = dict(
        zip(
            log.read("tasks", columns=["task_id"]).column(0).to_pylist(),
            log.read("tasks", columns=["source"]).column(0).to_pylist(),
            strict=True,
        )
    )
    return [
        tasks[v["task_id"]]
        for v in verdicts
        if v["accepted"] and sources.get(v["task_id"]) != "eval"
    ]


def _numbered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**row, "rollout": n} for n, row in enumerate(rows)]


def _eval_tasks(log: GameLog) -> list[TaskSpec]:
    tasks, _ = log.task_specs()
    listed = log.read("tasks", columns=["task_id", "source"]).to_pylist()
    return [tasks[t["task_id"]] for t in listed if t["source"] == "eval"]


def _rollout(task: TaskSpec, calls: list[dict[str, Any]], reward: float, **extra: Any) -> dict:
    return {
        "task_id": task.task_id,
        "calls": json.dumps(calls),
        "reward": reward,
        "source": "verifiers",
        "policy_version": "trainer-v7",
        **extra,
    }


def _solution(task: TaskSpec) -> list[dict[str, Any]]:
    return [{"tool": c.tool, "arguments": c.arguments} for c in task.solution]


SUBMIT = [{"tool": "submit", "arguments": {}}]


@pytest.fixture
def run_copy(finished_small_run, tmp_path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(finished_small_run, target)
    return target


def test_rollouts_are_replayed_and_scored_by_coevo_not_by_the_producer(run_copy) -> None:
    """The solution earns 1, a bare submit 0 (a producer that claimed 1 is counted as disagreeing), an unknown task is rejected, and each part is taken once."""
    log = GameLog(str(run_copy))
    first, second = _accepted(log)[:2]
    held_out = next(iter(_eval_tasks(log)))
    messages = json.dumps([{"role": "user", "content": first.instruction}])
    write_part(
        run_copy,
        "verifiers-a",
        _numbered(
            [
                _rollout(first, _solution(first), 1.0, messages=messages),
                _rollout(second, SUBMIT, 1.0),  # the producer is wrong
                _rollout(second, SUBMIT, 0.0),
                {**_rollout(first, SUBMIT, 0.0), "task_id": "sha256:" + "0" * 64},
                _rollout(held_out, _solution(held_out), 1.0),  # the eval suite is never trained on
                _rollout(first, SUBMIT * (MAX_CALLS + 1), 0.0),  # beyond any episode's budget
            ]
        ),
    )
    (run_copy / "inbox" / "verifiers-b.parquet").write_bytes(b"not parquet")
    events: list[tuple[str, dict]] = []
    inbox = Inbox(log, lambda name, **kw: events.append((name, kw)))
    taken = inbox.take(3, known_tasks({}, log=log))
    rows = {r.part_id: r for r in taken.rows}
    assert (rows["verifiers-a"].rollouts, rows["verifiers-a"].episodes) == (6, 3)
    assert (rows["verifiers-a"].rejected, rows["verifiers-a"].disagreed) == (3, 1)
    assert rows["verifiers-b"].error and rows["verifiers-b"].episodes == 0
    assert taken.failures == 4
    why = [kw["why"] for name, kw in events if name == "inbox_rollout_rejected"]
    assert sum("not an accepted training task" in w for w in why) == 2
    assert sum("more than an episode may make" in w for w in why) == 1
    assert [e.reward.value for e in taken.episodes] == [1, 0, 0]
    assert {e.solver for e in taken.episodes} == {"trainer-v7"}
    assert taken.episodes[0].trajectory is not None and taken.episodes[1].trajectory is None
    assert len({e.episode_id for e in taken.episodes}) == 3
    assert any(name == "inbox_rollout_rejected" for name, _ in events)
    assert inbox.take(3, known_tasks({}, log=log)).rows == []  # taken already


@pytest.mark.slow
def test_a_run_ingests_each_part_once_into_its_log_and_its_curriculum_across_a_crash(
    tmp_path,
) -> None:
    """A part written after generation 0 is in generation 1's log (purpose external) and the curriculum's plays; a crash after ingesting it, before the commit, ingests it again on resume, once."""
    toml = tmp_path / "tiny.toml"
    toml.write_text(SMALL_RUN)
    # plr keeps what it played (uniform forgets it): the trainer's outcomes have somewhere to go
    experiment = load_experiment(str(toml), ["run.generations=3", "curriculum.name=plr"])
    run_dir = tmp_path / "run"
    arenas: list[Any] = []
    written: list[str] = []

    def write_after_gen_0(report: Any) -> None:
        if report.gen == 0:
            task = _accepted(GameLog(str(run_dir)))[0]
            write_part(
                run_dir, "verifiers-0001", _numbered([_rollout(task, _solution(task), 1.0)] * 3)
            )
            written.append(task.task_id)

    class Crash(Exception):
        pass

    def crash_once_ingested(name: str, **fields: Any) -> None:
        if name == "inbox_ingested":
            raise Crash

    with pytest.raises(Crash):
        run_experiment(
            experiment, str(run_dir), on_generation=write_after_gen_0, events=crash_once_ingested
        )
    log = GameLog(str(run_dir))
    assert log.last_generation() == 0 and log.read("ingested").num_rows == 0
    seen: list[list[int]] = []

    def outcomes_after_gen_1(report: Any) -> None:
        if report.gen == 1:
            stats = arenas[0].curriculum.stats.get(written[0])
            seen.append([] if stats is None else list(stats.outcomes))

    resume_run(str(run_dir), on_start=arenas.append, on_generation=outcomes_after_gen_1)
    ingested = log.read("ingested").to_pylist()
    assert [(r["gen"], r["part_id"], r["episodes"]) for r in ingested] == [(1, "verifiers-0001", 3)]
    external = [e for e in log.read("episodes").to_pylist() if e["purpose"] == "external"]
    assert [(e["gen"], e["task_id"], e["reward"]) for e in external] == [(1, written[0], 1)] * 3
    own = [
        e["reward"]
        for e in log.read("episodes").to_pylist()
        if e["purpose"] == "train" and e["task_id"] == written[0] and e["gen"] <= 1
    ]
    assert sorted(seen[0]) == sorted([*own, 1, 1, 1])  # the Solver's outcomes and the trainer's


def _resume_with_more_generations(run_dir: Path, generations: int) -> Any:
    """``coevo resume RUN`` after raising ``run.generations`` in its experiment.json, as docs/verifiers.md says."""
    from tests.factories import run_cli

    record = json.loads((run_dir / "experiment.json").read_text())
    record["run"]["generations"] = generations
    (run_dir / "experiment.json").write_text(json.dumps(record))
    return run_cli("resume", str(run_dir))


def test_a_part_that_is_a_link_to_a_device_or_a_fifo_is_refused_unread_and_the_run_goes_on(
    run_copy,
) -> None:
    """`ln -s /dev/zero RUN/inbox/zero.parquet` and a FIFO in the inbox are refused at once, each named, counted where the user looks (the summary, the ingested table), and the run goes on to its last generation."""
    inbox = run_copy / "inbox"
    inbox.mkdir()
    (inbox / "zero.parquet").symlink_to("/dev/zero")
    os.mkfifo(inbox / "waiting.parquet")  # no writer: a read would block for ever
    task = _accepted(GameLog(str(run_copy)))[0]
    write_part(run_copy, "verifiers-good", _numbered([_rollout(task, _solution(task), 1.0)]))
    result = _resume_with_more_generations(run_copy, 4)
    assert result.returncode == 0, result.stderr
    log = GameLog(str(run_copy))
    assert log.last_generation() == 3
    rows = {r["part_id"]: r for r in log.read("ingested").to_pylist()}
    assert "is a symbolic link" in rows["zero"]["error"]
    assert "zero.parquet" in rows["zero"]["error"]
    assert "is a FIFO, not a regular file" in rows["waiting"]["error"]
    assert rows["verifiers-good"]["episodes"] == 1 and rows["verifiers-good"]["error"] is None
    summary = result.stdout + result.stderr
    assert "inbox: 1 external episode ingested, 2 rejected" in summary, summary


def _bomb(run_dir: Path, part_id: str, task: TaskSpec, contents: list[str]) -> Path:
    """An inbox part of a row per text, each text a `messages` of 4 MiB, in a few KB of zstd."""
    rows = _numbered([_rollout(task, SUBMIT, 0.0) for _ in contents])
    table = pa.Table.from_pylist(
        [
            {
                **InboxRollout.model_validate(r).cells(),
                "messages": json.dumps([{"role": "user", "content": c * (4 << 20)}]),
            }
            for r, c in zip(rows, contents, strict=True)
        ],
        schema=INBOX_SCHEMA,
    )
    (run_dir / "inbox").mkdir(exist_ok=True)
    part = run_dir / "inbox" / f"{part_id}.parquet"
    pq.write_table(table, part, compression="zstd", compression_level=19)
    assert part.stat().st_size < 64 << 10  # a few KB on disk
    return part


def test_a_part_that_decompresses_past_its_limit_is_refused_before_it_is_read(
    run_copy, monkeypatch
) -> None:
    """A few KB of zstd whose `messages` decompress to 20 MiB is refused, naming the part: by its Parquet footer before a column is decompressed, or, when five rows share one value the footer counts once, before the values are expanded; the run goes on."""
    from coevo.arena import bounded

    task = _accepted(GameLog(str(run_copy)))[0]
    _bomb(run_copy, "bomb", task, ["A", "B", "C", "D", "E"])  # five values: 20 MiB in the footer
    _bomb(run_copy, "echo", task, ["A"] * 5)  # one value five times: 4 MiB in the footer
    # the limit lowered for the test (8 MiB instead of 256 MiB): 5 × 4 MiB decoded is over it
    monkeypatch.setattr(bounded, "MAX_INBOX_PART_BYTES", 8 << 20)
    with pytest.raises(
        LogError,
        match=r"inbox part 'bomb' .* holds 20\.0 MiB .* once decompressed, by its Parquet footer",
    ):
        read_part(run_copy, "bomb")
    with pytest.raises(
        LogError, match=r"inbox part 'echo' .* holds 20\.0 MiB .* once its values are decoded"
    ):
        read_part(run_copy, "echo")
    result = _resume_with_more_generations(run_copy, 4)
    assert result.returncode == 0, result.stderr
    rows = {r["part_id"]: r for r in GameLog(str(run_copy)).read("ingested").to_pylist()}
    assert "once decompressed" in rows["bomb"]["error"]
    assert "once its values are decoded" in rows["echo"]["error"]
    assert rows["bomb"]["episodes"] == rows["echo"]["episodes"] == 0


def _zeros(run_dir: Path, part_id: str, task: TaskSpec, zeros: int) -> Path:
    """An inbox part of one rollout whose `turn_prompt_ids` is one turn of ``zeros`` zeros: a few KB, run-length encoded."""
    (row,) = _numbered([_rollout(task, SUBMIT, 0.0)])
    table = pa.Table.from_pylist([InboxRollout.model_validate(row).cells()], schema=INBOX_SCHEMA)
    turn = pa.ListArray.from_arrays([0, zeros], pa.array(np.zeros(zeros, dtype=np.int64)))
    column = INBOX_SCHEMA.get_field_index("turn_prompt_ids")
    table = table.set_column(
        column, INBOX_SCHEMA.field(column), pa.ListArray.from_arrays([0, 1], turn)
    )
    (run_dir / "inbox").mkdir(exist_ok=True)
    part = run_dir / "inbox" / f"{part_id}.parquet"
    pq.write_table(table, part)
    assert part.stat().st_size < 64 << 10  # a few KB on disk
    return part


def test_parts_of_encoded_zeros_or_that_killed_the_reader_are_set_aside_and_resume_goes_on(
    run_copy, monkeypatch
) -> None:
    """A part of a million zeros (a few KB, uncompressed too by its footer; 8 MB decoded) is refused before a page is decoded, and one the last run was killed reading (`inbox/_reading` names it) is set aside unread: each is named in its part's error, both are counted in the summary, and the next resume reads neither again."""
    from coevo.arena import bounded
    from coevo.run.handoff import inbox as ingest

    task = _accepted(GameLog(str(run_copy)))[0]
    _zeros(run_copy, "zeros", task, 1_000_000)
    write_part(run_copy, "killer", _numbered([_rollout(task, _solution(task), 1.0)]))
    (run_copy / READING).write_text("killer")  # what a driver killed while reading it leaves
    write_part(run_copy, "verifiers-good", _numbered([_rollout(task, _solution(task), 1.0)]))
    # the limit lowered for the test (1 MiB instead of 256 MiB): the zeros are 8 MB decoded
    monkeypatch.setattr(bounded, "MAX_INBOX_PART_BYTES", 1 << 20)
    result = _resume_with_more_generations(run_copy, 4)
    assert result.returncode == 0, result.stderr
    rows = {r["part_id"]: r for r in GameLog(str(run_copy)).read("ingested").to_pylist()}
    assert "inbox part 'zeros'" in rows["zeros"]["error"]
    assert "once decoded, by its Parquet footer" in rows["zeros"]["error"]
    assert "the last run was killed while reading it" in rows["killer"]["error"]
    assert rows["verifiers-good"]["episodes"] == 1 and rows["verifiers-good"]["error"] is None
    summary = result.stdout + result.stderr
    assert "inbox: 1 external episode ingested, 2 rejected" in summary, summary
    read: list[str] = []
    monkeypatch.setattr(ingest, "read_part", lambda run, part: read.append(part))
    again = _resume_with_more_generations(run_copy, 5)
    assert again.returncode == 0, again.stderr
    assert read == [] and GameLog(str(run_copy)).read("ingested").num_rows == 3


def test_the_part_being_read_is_named_until_its_read_ends(run_copy, monkeypatch) -> None:
    """While a part is read `inbox/_reading` names it (what a killed driver leaves behind); once the read ends, the part read or refused or the read interrupted (Ctrl-C), it is gone: only a kill sets a part aside."""
    from coevo.run.handoff import inbox as ingest

    log = GameLog(str(run_copy))
    task = _accepted(log)[0]
    for part in ("a", "b", "c"):
        write_part(run_copy, part, _numbered([_rollout(task, SUBMIT, 0.0)]))
    (run_copy / "inbox" / "b.parquet").write_bytes(b"not parquet")
    named: list[tuple[str, str]] = []

    def reading(run: Any, part: str) -> list[InboxRollout]:
        named.append((part, (run_copy / READING).read_text()))
        if part == "c":
            raise KeyboardInterrupt
        return read_part(run, part)

    monkeypatch.setattr(ingest, "read_part", reading)
    with pytest.raises(KeyboardInterrupt):
        Inbox(log).take(3, known_tasks({}, log=log))
    assert named == [("a", "a"), ("b", "b"), ("c", "c")]
    assert not (run_copy / READING).exists()
    assert Inbox(log).interrupted is None


def test_the_same_rollout_under_a_second_part_name_is_ingested_once(run_copy) -> None:
    """A part copied under another name brings no second episode: its rollouts are rejected as ingested before, in this generation and after a resume."""
    log = GameLog(str(run_copy))
    first, second = _accepted(log)[:2]
    rows = _numbered(
        [
            _rollout(first, _solution(first), 1.0),
            _rollout(first, _solution(first), 1.0),  # played twice alike: two episodes
            _rollout(second, SUBMIT, 0.0, rollout_id="trace-9"),
        ]
    )
    write_part(run_copy, "verifiers-a", rows)
    shutil.copy(
        run_copy / "inbox" / "verifiers-a.parquet", run_copy / "inbox" / "verifiers-b.parquet"
    )
    # the same trace again, with another conversation: known by its id
    write_part(
        run_copy,
        "verifiers-c",
        _numbered([_rollout(second, SUBMIT, 0.0, rollout_id="trace-9", model="m")]),
    )
    events: list[tuple[str, dict]] = []
    taken = Inbox(log, lambda name, **kw: events.append((name, kw))).take(
        3, known_tasks({}, log=log)
    )
    got = {r.part_id: (r.episodes, r.rejected) for r in taken.rows}
    assert got == {"verifiers-a": (3, 0), "verifiers-b": (0, 3), "verifiers-c": (0, 1)}
    assert len({e.episode_id for e in taken.episodes}) == 3
    why = [kw["why"] for name, kw in events if name == "inbox_rollout_rejected"]
    assert len(why) == 4 and all("ingested before" in w for w in why)
    # committed, then the copy comes again under a third name: still once
    result = _resume_with_more_generations(run_copy, 4)
    assert result.returncode == 0, result.stderr
    shutil.copy(
        run_copy / "inbox" / "verifiers-a.parquet", run_copy / "inbox" / "verifiers-d.parquet"
    )
    result = _resume_with_more_generations(run_copy, 5)
    assert result.returncode == 0, result.stderr
    ingested = {r["part_id"]: r for r in GameLog(str(run_copy)).read("ingested").to_pylist()}
    assert (ingested["verifiers-a"]["episodes"], ingested["verifiers-d"]["episodes"]) == (3, 0)
    assert ingested["verifiers-d"]["rejected"] == 3
    external = [
        e for e in GameLog(str(run_copy)).read("episodes").to_pylist() if e["purpose"] == "external"
    ]
    assert len(external) == 3
