"""Discrimination of a World model's probabilities: the ROC AUC, computed from ranks."""

from __future__ import annotations

import itertools

import numpy as np
from coevo.arena.calibration import auc
from hypothesis import given
from hypothesis import strategies as st


def _pairwise(p: list[float], y: list[int]) -> float:
    """The AUC by its definition: over every (success, failure) pair, 1 when ranked right, a half when tied."""
    wins = [
        1.0 if a > b else 0.5 if a == b else 0.0
        for (a, ya), (b, yb) in itertools.product(zip(p, y, strict=True), repeat=2)
        if ya == 1 and yb == 0
    ]
    return sum(wins) / len(wins)


def test_auc_counts_pairs_ranked_right_and_ties_as_half() -> None:
    """A success above a failure counts 1, a tie a half: 3 pairs, one right, one tied, one wrong."""
    assert auc([0.9, 0.5, 0.5, 0.1], [1, 1, 0, 0]) == 0.875
    assert auc([0.2, 0.8, 0.5], [1, 0, 1]) == _pairwise([0.2, 0.8, 0.5], [1, 0, 1]) == 0.0
    assert auc([0.3, 0.3], [1, 0]) == 0.5


def test_auc_is_none_when_there_is_nothing_to_rank() -> None:
    """All successes, all failures or no outcomes: no pair to rank, so no AUC (not 0.5)."""
    assert auc([0.1, 0.9], [1, 1]) is None
    assert auc([0.1, 0.9], [0, 0]) is None
    assert auc([], []) is None


_cases = st.lists(
    st.tuples(st.integers(0, 100).map(lambda k: k / 100), st.integers(0, 1)),
    min_size=2,
    max_size=40,
).filter(lambda rows: 0 < sum(y for _, y in rows) < len(rows))


@given(_cases)
def test_auc_properties(rows: list[tuple[float, int]]) -> None:
    """AUC agrees with the pairwise definition; perfect ranking 1, reversed 0, constant 0.5; monotone-invariant."""
    p = [x for x, _ in rows]
    y = [o for _, o in rows]
    assert abs(auc(p, y) - _pairwise(p, y)) < 1e-12
    assert auc([float(o) for o in y], y) == 1.0
    assert auc([1.0 - o for o in y], y) == 0.0
    assert auc([0.4] * len(y), y) == 0.5
    squashed = list(np.log1p(np.asarray(p)) * 3.0 - 7.0)  # strictly increasing
    assert abs(auc(squashed, y) - auc(p, y)) < 1e-12
    flipped = [1.0 - x for x in p]  # strictly decreasing: the AUC mirrors
    assert abs(auc(flipped, y) - (1.0 - auc(p, y))) < 1e-12
