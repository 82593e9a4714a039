"""Abilities and difficulties fitted to a run's episodes: a Rasch (one-parameter IRT) model.

``P(success | solver version v, task t) = sigmoid(theta_v − b_t)``, fitted by
penalised maximum likelihood to every episode in the log (train and eval):
alternating Newton steps on the abilities and the difficulties, each a
vectorised count over the episodes, with a ridge penalty that keeps a task
played a few times near the mean and anchors the scale (mean difficulty 0).

It reads the ``episodes`` table only. The run's own World model may be a
different model altogether (or none); this is the analyst's view of the same
outcomes, the same for every run, and cheap (a million episodes in well under
a second).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["fit_rasch"]


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))


def fit_rasch(episodes: pa.Table, *, l2: float = 0.1, rounds: int = 30) -> dict[str, Any]:
    """Abilities per solver version and difficulties per task from ``episodes`` (solver, task_id, reward).

    Args:
        episodes: the log's ``episodes`` table (or any table with those three columns).
        l2: the ridge penalty on every parameter (a prior of mean 0).
        rounds: alternating Newton rounds.

    Returns:
        ``{"abilities": {version: theta}, "difficulties": {task_id: b}, "episodes": n}``.
    """
    if episodes.num_rows == 0:
        return {"abilities": {}, "difficulties": {}, "episodes": 0}
    solvers = episodes.column("solver").fill_null("solver").dictionary_encode().combine_chunks()
    tasks = episodes.column("task_id").dictionary_encode().combine_chunks()
    v = np.asarray(solvers.indices, dtype=np.int64)
    t = np.asarray(tasks.indices, dtype=np.int64)
    y = np.asarray(episodes.column("reward").fill_null(0), dtype=float)
    n_v, n_t = len(solvers.dictionary), len(tasks.dictionary)
    theta, b = np.zeros(n_v), np.zeros(n_t)
    for _ in range(rounds):
        p = _sigmoid(theta[v] - b[t])
        w = p * (1.0 - p)
        theta += (np.bincount(v, y - p, n_v) - l2 * theta) / (np.bincount(v, w, n_v) + l2)
        p = _sigmoid(theta[v] - b[t])
        w = p * (1.0 - p)
        b -= (np.bincount(t, y - p, n_t) + l2 * b) / (np.bincount(t, w, n_t) + l2)
        shift = b.mean()  # the scale is only defined up to a shift: mean difficulty 0
        b -= shift
        theta -= shift
    return {
        "abilities": dict(
            zip(solvers.dictionary.to_pylist(), (float(x) for x in theta), strict=True)
        ),
        "difficulties": dict(zip(tasks.dictionary.to_pylist(), (float(x) for x in b), strict=True)),
        "episodes": int(episodes.num_rows),
    }
