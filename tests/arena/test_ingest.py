"""The inbox ingested by the loop: rollouts a trainer drove are replayed, verified, logged once, and seen by the curriculum."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from coevo.arena.gamelog import GameLog
from coevo.arena.gamelog.inbox import write_part
from coevo.arena.spec import TaskSpec
from coevo.run.experiment import load_experiment
from coevo.run.ingest import MAX_CALLS, Inbox, known_tasks
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
