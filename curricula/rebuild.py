"""The curriculum rebuilt from the game log alone: the log *is* the curriculum.

:func:`curriculum_from_log` replays, generation by generation, what the arena
did to the curriculum — ``admit`` the accepted tasks with their logged
predictions, ``batch`` (and dynamic sampling's further rounds, ``more``),
``observe`` the training episodes — and checks that
each replayed batch is the batch the log says was trained on. The result
equals the state saved in the checkpoint, so a lost checkpoint costs nothing
but the time to replay.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from coevo.arena.errors import CoevoError
from coevo.arena.gamelog import GameLog, RunDir
from coevo.curricula.base import Curriculum
from coevo.curricula.dynamic import next_round
from coevo.curricula.registry import make_curriculum, recorded_curriculum

__all__ = ["curriculum_from_log"]


def _by_gen(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        out[row["gen"]].append(row)
    return out


def curriculum_from_log(run_dir: str, *, through: int | None = None) -> Curriculum:
    """The run's curriculum after generation ``through`` (default: the last committed), from the log.

    Raises:
        CoevoError: the run has no experiment record, or a replayed batch differs
            from the logged one (the log was not written by this curriculum).
    """
    run = RunDir(run_dir)
    if not run.exists("experiment.json"):
        raise CoevoError(run.no_run(run_dir))
    recorded = json.loads(run.read_bytes("experiment.json"))
    config = recorded_curriculum(recorded.get("curriculum", {}))
    seed = int(recorded.get("run", {}).get("seed", 0))
    log = GameLog(run)
    last = log.last_generation() if through is None else through
    tasks, _ = log.task_specs()
    task_rows = _by_gen(log.read("tasks").to_pylist())
    verdicts = _by_gen(log.read("verdicts").to_pylist())
    predictions = _by_gen(log.read("predictions").to_pylist())
    episodes = _by_gen(log.read("episodes").to_pylist())
    eval_ids = {r["task_id"] for rows in task_rows.values() for r in rows if r["source"] == "eval"}
    curriculum = make_curriculum(config, seed)
    for gen in range(last + 1):
        proposed = [r for r in task_rows.get(gen, []) if r["source"] != "eval"]
        accepted_ids = [
            t["task_id"]
            for t, v in zip(proposed, verdicts.get(gen, []), strict=True)
            if v["accepted"] and t["task_id"] not in eval_ids
        ]
        p = {r["task_id"]: r["p"] for r in predictions.get(gen, [])}
        curriculum.admit(gen, [tasks[t] for t in accepted_ids], [p[t] for t in accepted_ids])
        batch = [t.task_id for t in curriculum.batch(gen)]
        train = [e for e in episodes.get(gen, []) if e["purpose"] == "train"]
        logged = list(dict.fromkeys(e["task_id"] for e in train))
        # dynamic sampling: the further rounds, from the rewards the earlier ones earned
        groups: dict[str, list[float]] = {t: [] for t in logged}
        for e in train:
            if not e.get("failure"):
                groups[e["task_id"]].append(e["reward"])
        while batch == logged[: len(batch)] and (
            further := next_round(curriculum, gen, {t: groups[t] for t in batch})
        ):
            batch += [t.task_id for t in further]
        if batch != logged:
            raise CoevoError(
                f"generation {gen}: the replayed batch differs from the logged one; "
                f"the log of {run_dir} was not made by its recorded {config.name!r} curriculum"
            )
        # as the loop does: an episode the Solver could not play is observed by nobody
        played = [e for e in train if not e.get("failure")]
        curriculum.observe(gen, [e["task_id"] for e in played], [e["reward"] for e in played])
    return curriculum
