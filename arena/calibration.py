"""Calibration of probabilities against binary outcomes: Brier score, reliability table, ECE.

World models are judged by these (the loop's ``brier`` column, ``coevo
analyze``'s calibration), so they live below every role and every reader.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["brier", "expected_calibration_error", "reliability"]


def brier(predictions: Sequence[float], outcomes: Sequence[float]) -> float:
    """Mean squared error of probabilities against 0/1 outcomes (lower is better)."""
    p, y = np.asarray(predictions, dtype=float), np.asarray(outcomes, dtype=float)
    return float(np.mean((p - y) ** 2))


def reliability(
    predictions: Sequence[float], outcomes: Sequence[float], bins: int = 10
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


def expected_calibration_error(
    predictions: Sequence[float], outcomes: Sequence[float], bins: int = 10
) -> float:
    """The count-weighted mean gap between predicted and observed success over probability bins."""
    total = len(predictions)
    if not total:
        return 0.0
    return (
        sum(n * abs(mean_p - rate) for mean_p, rate, n in reliability(predictions, outcomes, bins))
        / total
    )
