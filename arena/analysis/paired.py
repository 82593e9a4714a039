"""Intervals for comparing runs: a paired bootstrap over seeds, and a binomial proportion's Wilson interval.

    diffs = [setup_auc[s] - uniform_auc[s] for s in seeds]
    mean, low, high = paired_bootstrap(diffs)      # a 95% interval on the mean difference
    low, high = wilson_interval(successes=230, n=480)

``paired_bootstrap`` takes per-seed differences between a setup and its
baseline run on the same seed (so what the seed fixes — the eval suite, the
first tasks — cancels), resamples the seeds with replacement and returns the
mean difference with the percentile interval of the resampled means. It is
deterministic by its ``seed``.

``wilson_interval`` is the Wilson score interval of a success rate: unlike
the normal approximation it stays inside [0, 1] and keeps its coverage near
0 and 1 and at small n, where a held-out suite's figure often is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["Z95", "paired_bootstrap", "wilson_interval"]

Z95 = 1.959963984540054
"""The standard normal quantile of a two-sided 95% interval."""


def paired_bootstrap(
    diffs: Sequence[float], n: int = 10_000, seed: int = 0, level: float = 0.95
) -> tuple[float, float, float]:
    """The mean of ``diffs`` and a percentile bootstrap interval on it.

    Args:
        diffs: one paired difference per seed (setup minus baseline on that seed).
        n: bootstrap resamples.
        seed: the resampling's seed (the same seed and diffs give the same interval).
        level: the interval's coverage.

    Returns:
        ``(mean, low, high)``; with one difference, the interval is that point.

    Raises:
        ValueError: no differences, a non-finite one, ``n`` below 1 or ``level`` outside (0, 1).
    """
    values = np.asarray(diffs, dtype=float)
    if values.size == 0:
        raise ValueError("paired_bootstrap needs at least one difference")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"paired_bootstrap needs finite differences, not {values.tolist()}")
    if n < 1:
        raise ValueError(f"n must be at least 1, not {n}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), not {level}")
    mean = float(values.mean())
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(n, values.size))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    # the percentile interval of a skewed sample can miss its own mean by a rounding error
    return mean, float(min(low, mean)), float(max(high, mean))


def wilson_interval(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a success rate: ``successes`` of ``n`` (95% by default).

    Raises:
        ValueError: ``n`` below 1, or ``successes`` outside [0, n].
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, not {n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, {n}], not {successes}")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # exact at the edges (0 of n has 0 as its low end) and never excluding p by a rounding error
    low = 0.0 if successes == 0 else min(p, centre - half)
    high = 1.0 if successes == n else max(p, centre + half)
    return max(0.0, low), min(1.0, high)
