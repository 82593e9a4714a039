"""pass^k: the chance that *every one* of k independent trials of a task succeeds, averaged over tasks.

τ²-bench's measure of reliability. For a task played n times with c
successes, the unbiased estimate is C(c, k) / C(n, k); averaged over the
tasks it is pass^k, for k = 1 … n (pass^1 is the mean success). A run whose
tasks were played different numbers of times gives pass^k only up to the
fewest trials, each task's estimate from all its trials.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from math import comb
from typing import Any

import pyarrow as pa

__all__ = ["pass_hat_k", "pass_k_of_log", "pass_k_table"]


def pass_hat_k(successes: int, trials: int, k: int) -> float:
    """C(successes, k) / C(trials, k): the chance k trials drawn without replacement all succeed."""
    if not 0 <= successes <= trials or not 1 <= k <= trials:
        raise ValueError(
            f"pass^k needs 0 <= c <= n and 1 <= k <= n (c={successes}, n={trials}, k={k})"
        )
    return comb(successes, k) / comb(trials, k)


def pass_k_table(episodes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """pass^k over ``episodes`` (rows with ``task_id``, ``reward`` and optionally ``domain``), overall and per domain.

    Episodes the Solver could not play (a row whose ``failure`` is set) are
    left out and counted in ``failed``: a server outage is not the model's
    unreliability.

    Returns:
        ``{"tasks", "trials", "failed", "pass_k": {k: value}, "domains": {domain: {...}}}``,
        ``trials`` the fewest trials of any task (pass^k is given for k up to it).
    """
    per_task: dict[str, list[int]] = defaultdict(list)
    domain_of: dict[str, str | None] = {}
    failed = 0
    for row in episodes:
        if row.get("failure"):
            failed += 1
            continue
        per_task[row["task_id"]].append(int(row["reward"]))
        domain_of.setdefault(row["task_id"], row.get("domain"))

    def table(tasks: list[str]) -> dict[str, Any]:
        if not tasks:
            return {"tasks": 0, "trials": 0, "pass_k": {}}
        n = min(len(per_task[t]) for t in tasks)
        return {
            "tasks": len(tasks),
            "trials": n,
            "pass_k": {
                k: sum(pass_hat_k(sum(per_task[t]), len(per_task[t]), k) for t in tasks)
                / len(tasks)
                for k in range(1, n + 1)
            },
        }

    out = table(sorted(per_task))
    out["failed"] = failed
    domains = sorted({d for d in domain_of.values() if d is not None})
    out["domains"] = {d: table([t for t in per_task if domain_of[t] == d]) for d in domains}
    return out


def pass_k_of_log(episodes: pa.Table, evals: pa.Table) -> dict[str, Any]:
    """:func:`pass_k_table` of a benchmark run's log: its ``evals`` rows, an episode the Solver could not play (``episodes.failure``) left out."""
    failed = {
        r["episode_id"]
        for r in episodes.select(["episode_id", "failure"]).to_pylist()
        if r["failure"]
    }
    rows = evals.select(["task_id", "episode_id", "domain", "reward"]).to_pylist()
    return pass_k_table({**r, "failure": r["episode_id"] in failed} for r in rows)
