"""The intervals benchmarks and ``coevo analyze`` report (coevo.arena.analysis.paired)."""

from __future__ import annotations

import math

import pytest
from coevo.arena.analysis.paired import paired_bootstrap, wilson_interval
from hypothesis import given, settings
from hypothesis import strategies as st

diffs = st.lists(
    st.floats(min_value=-1, max_value=1, allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(diffs, st.integers(min_value=0, max_value=2**32 - 1))
def test_interval_contains_the_mean_and_is_deterministic_by_seed(values, seed):
    """The interval holds the mean of the differences, and the same seed gives the same interval."""
    mean, low, high = paired_bootstrap(values, n=500, seed=seed)
    assert math.isclose(mean, sum(values) / len(values), abs_tol=1e-12)
    assert low <= mean <= high, "the interval must contain the mean"
    assert paired_bootstrap(values, n=500, seed=seed) == (mean, low, high)


@settings(max_examples=30, deadline=None)
@given(diffs.filter(lambda v: max(v) - min(v) > 0.01))
def test_interval_narrows_with_more_data(values):
    """The same spread of differences over four times as many seeds gives a narrower interval."""
    _, low, high = paired_bootstrap(values * 2, n=2000)
    _, low4, high4 = paired_bootstrap(values * 8, n=2000)
    assert high4 - low4 < high - low


def test_a_known_shift_is_found_and_no_shift_is_not():
    """Differences around +0.08 give an interval above zero; differences around 0 one that holds it."""
    shifted = [0.08 + 0.02 * ((i % 5) - 2) for i in range(12)]
    mean, low, high = paired_bootstrap(shifted)
    assert 0.07 < mean < 0.09 and low > 0
    _, low, high = paired_bootstrap([0.02 * ((i % 5) - 2) for i in range(12)])
    assert low < 0 < high


def test_one_difference_is_its_own_interval_and_bad_input_is_refused():
    """One seed gives a point; no seeds, a NaN or n = 0 are refused with what to fix."""
    assert paired_bootstrap([0.1]) == (0.1, 0.1, 0.1)
    for bad, kwargs in (([], {}), ([0.1, math.nan], {}), ([0.1], {"n": 0})):
        with pytest.raises(ValueError):
            paired_bootstrap(bad, **kwargs)


def test_wilson_interval_known_values():
    """Wilson's interval matches the textbook figure and stays inside [0, 1] at the edges."""
    low, high = wilson_interval(50, 100)
    assert math.isclose(low, 0.4038, abs_tol=1e-4) and math.isclose(high, 0.5962, abs_tol=1e-4)
    assert wilson_interval(0, 12)[0] == 0.0 and 0 < wilson_interval(0, 12)[1] < 0.3
    assert wilson_interval(12, 12)[1] == 1.0
    with pytest.raises(ValueError):
        wilson_interval(3, 0)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=5000), st.data())
def test_wilson_interval_holds_the_rate_and_narrows(n, data):
    """The interval contains the observed rate, and four times the episodes at that rate narrow it."""
    k = data.draw(st.integers(min_value=0, max_value=n))
    low, high = wilson_interval(k, n)
    assert 0 <= low <= k / n <= high <= 1
    low4, high4 = wilson_interval(4 * k, 4 * n)
    assert high4 - low4 < high - low
