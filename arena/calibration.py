"""Calibration and discrimination of probabilities against binary outcomes: Brier score, reliability table, ECE, AUC.

Calibration asks whether a predicted 0.7 comes true seven times in ten;
discrimination (:func:`auc`) whether the tasks predicted likelier are the
ones solved, whatever the scale. A model that predicts every task's base
rate is perfectly calibrated and has an AUC of 0.5. World models are judged by these (the loop's ``brier`` column, ``coevo
analyze``'s calibration), so they live below every role and every reader.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "FRONTIER",
    "auc",
    "brier",
    "expected_calibration_error",
    "frontier_mask",
    "prediction_figures",
    "reliability",
]

Values = Sequence[float] | np.ndarray
"""Probabilities or outcomes: a sequence of numbers or a 1-d array."""

FRONTIER: tuple[float, float] = (0.2, 0.8)
"""A task is at the frontier when its observed success lies in this band (inclusive)."""


def brier(predictions: Values, outcomes: Values) -> float:
    """Mean squared error of probabilities against 0/1 outcomes (lower is better)."""
    p, y = np.asarray(predictions, dtype=float), np.asarray(outcomes, dtype=float)
    return float(np.mean((p - y) ** 2))


def reliability(
    predictions: Values, outcomes: Values, bins: int = 10
) -> list[tuple[float, float, int]]:
    """Per probability bin: (mean prediction, observed success rate, count); empty bins left out."""
    p, y = np.asarray(predictions, dtype=float), np.asarray(outcomes, dtype=float)
    index = np.minimum((p * bins).astype(int), bins - 1)
    rows = []
    for b in range(bins):
        mask = index == b
        if mask.any():
            rows.append((float(p[mask].mean()), float(y[mask].mean()), int(mask.sum())))
    return rows


def expected_calibration_error(predictions: Values, outcomes: Values, bins: int = 10) -> float:
    """The count-weighted mean gap between predicted and observed success over probability bins."""
    total = len(predictions)
    if not total:
        return 0.0
    return (
        sum(n * abs(mean_p - rate) for mean_p, rate, n in reliability(predictions, outcomes, bins))
        / total
    )


def auc(predictions: Values, outcomes: Values) -> float | None:
    """ROC AUC: the probability that a random success was predicted above a random failure (ties: half).

    Computed from ranks (Mann–Whitney U with mid-ranks for ties), O(n log n).
    An outcome counts as a success when it is at least 0.5 (rewards are 0 or 1).

    Returns:
        The AUC in [0, 1]; None when the outcomes are all successes or all failures
        (nothing to rank).
    """
    p, y = np.asarray(predictions, dtype=float), np.asarray(outcomes, dtype=float) >= 0.5
    positives = int(y.sum())
    negatives = len(y) - positives
    if positives == 0 or negatives == 0:
        return None
    order = np.argsort(p, kind="mergesort")
    ranked = p[order]
    # mid-ranks: every member of a run of equal predictions gets the run's mean rank (1-based)
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
    ends = np.r_[starts[1:], len(ranked)]
    mid = (starts + ends + 1) / 2.0
    ranks = np.empty(len(p))
    ranks[order] = np.repeat(mid, ends - starts)
    u = ranks[y].sum() - positives * (positives + 1) / 2.0
    return float(u / (positives * negatives))


def frontier_mask(
    task_ids: Sequence[Any] | np.ndarray,
    outcomes: Values,
    band: tuple[float, float] = FRONTIER,
) -> np.ndarray:
    """Per outcome: whether its task's observed success (the mean of its outcomes here) lies in ``band``.

    ``task_ids`` are any keys naming the task of each outcome (ids, or integer codes).
    """
    ids = np.asarray(task_ids)
    y = np.asarray(outcomes, dtype=float)
    if not len(ids):
        return np.zeros(0, dtype=bool)
    _, index = np.unique(ids, return_inverse=True)
    rate = np.bincount(index, weights=y) / np.bincount(index)
    return (rate[index] >= band[0]) & (rate[index] <= band[1])


def prediction_figures(
    predictions: Values, outcomes: Values, task_ids: Sequence[Any] | np.ndarray
) -> dict[str, Any]:
    """A World model's figures on some outcomes of the tasks it predicted.

    Returns:
        ``brier``, ``ece``, ``auc`` (None when nothing to rank), ``auc_frontier``
        (the AUC over the outcomes of tasks whose observed success lies in
        :data:`FRONTIER`; None when those hold no success or no failure),
        ``episodes`` and ``frontier_episodes``.
    """
    p, y = np.asarray(predictions, dtype=float), np.asarray(outcomes, dtype=float)
    at = frontier_mask(task_ids, y)
    return {
        "brier": brier(p, y) if len(p) else None,
        "ece": expected_calibration_error(p, y) if len(p) else None,
        "auc": auc(p, y),
        "auc_frontier": auc(p[at], y[at]),
        "episodes": len(p),
        "frontier_episodes": int(at.sum()),
    }
