"""Task scores for level replay: how much a Solver can still learn from a task, from its success rate.

Each scorer maps the success estimate ``p`` of a task (from its episodes in
the log) to a score in [0, 1]; higher is replayed sooner.

=================== ==================== ==============================================
name                score                why
=================== ==================== ==============================================
``learnability``    ``4 p (1 − p)``      the variance of a binary reward: a task always
                                         solved or never solved gives no gradient
                                         (policy gradient with a group baseline)
``absolute-zero``   ``1 − p`` if 0<p<1   Absolute Zero's proposer reward: the harder the
                    else 0               better, as long as it is sometimes solved
``r-zero``          ``2 min(p, 1 − p)``  R-Zero's uncertainty reward: peaks at p = 0.5
=================== ==================== ==============================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

__all__ = ["SCORERS", "absolute_zero", "learnability", "r_zero", "scorer_named"]


def learnability(p: float) -> float:
    """``4 p (1 − p)``: 1 at p = 0.5, 0 for tasks always or never solved."""
    return 4.0 * p * (1.0 - p)


def absolute_zero(p: float) -> float:
    """``1 − p`` for tasks solved sometimes (0 < p < 1), else 0."""
    return 1.0 - p if 0.0 < p < 1.0 else 0.0


def r_zero(p: float) -> float:
    """``2 min(p, 1 − p)``: 1 at p = 0.5, falling linearly to 0 at either end."""
    return 2.0 * min(p, 1.0 - p)


SCORERS: Final[dict[str, Callable[[float], float]]] = {
    "learnability": learnability,
    "absolute-zero": absolute_zero,
    "r-zero": r_zero,
}
"""Scorers by the name an experiment file uses."""


def scorer_named(name: str) -> Callable[[float], float]:
    """The scorer called ``name``.

    Raises:
        KeyError: no such scorer; the message lists them.
    """
    if name not in SCORERS:
        raise KeyError(f"unknown scorer {name!r}; choose from {', '.join(SCORERS)}")
    return SCORERS[name]
