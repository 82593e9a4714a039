"""The design policy: one categorical distribution per choice point, each a softmax over logits.

A *design* is one value per choice point (:data:`CHOICE_POINTS`). Every point
is a softmax over logits kept in a numpy array, mixed with a little uniform
exploration so that no option's probability ever falls to zero:

    π(a) = (1 − ε) · softmax(θ / T)_a + ε / |offered|

over the options *offered* at that draw (the others are masked out: the
hops a world's walks can reach, the families that reach the hops drawn, the
writes a family makes, a request's domains and families). The points are
independent but for these masks. :meth:`DesignPolicy.credit` adds one term
of REINFORCE's gradient, ``advantage · ∇ log π(chosen)``, for a point, and
:meth:`DesignPolicy.apply` takes an Adam step. Logits stay within
±:data:`MAX_LOGIT`, so every option keeps a share a changed Solver can bring
back (at the defaults, at least 1.4% for one of five hops).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from coevo.agents.synthesizers.planner import FAMILIES

__all__ = [
    "ADAM",
    "ADAM_FLOOR",
    "CHOICE_POINTS",
    "DECAY",
    "MAX_LOGIT",
    "SWITCH",
    "ChoicePoint",
    "DesignPolicy",
]

SWITCH: Final = ("no", "yes")
"""The options of a yes/no choice point."""

CHOICE_POINTS: Final = (
    "domain",
    "hops",
    "family",
    "writes",
    "filters",
    "superlatives",
    "distractors",
)
"""The choice points of a design, in the order they are drawn (what an earlier one drew narrows a later one's options)."""

ADAM: Final = (0.5, 0.9)
"""Adam's decay rates (β1, β2): short memories, so the policy turns as soon as the Solver's frontier moves."""

ADAM_FLOOR: Final = 0.02
"""Adam's ε, large on purpose: a gradient much smaller than this (rewards that say nothing) moves the logits little."""

DECAY: Final = 0.05
"""The share of every logit forgotten at each update: a choice no reward speaks for drifts back to uniform."""

MAX_LOGIT: Final = 2.0
"""Logits are clipped to ±this: a near-certain choice has almost no gradient, and could not be unlearnt."""


@dataclass(frozen=True)
class ChoicePoint:
    """One choice point and its options.

    Attributes:
        name: the point's name (one of :data:`CHOICE_POINTS`).
        options: its options, as they appear in a design (strings or ints).
    """

    name: str
    options: tuple[Any, ...]

    def index(self, value: Any) -> int | None:
        """The index of ``value`` among the options (None when it is not one; ``True`` is not ``1``)."""
        for i, option in enumerate(self.options):
            if option == value and type(option) is type(value):
                return i
        return None


def _softmax(scores: np.ndarray) -> np.ndarray:
    z = np.exp(scores - scores.max())
    return z / z.sum()


class DesignPolicy:
    """The logits of every choice point, how to draw from them and how to credit a draw.

    Args:
        worlds: the worlds the ``domain`` point chooses among.
        epsilon: the uniform share mixed into every draw (exploration that never dies out).
        temperature: the softmax temperature.
    """

    def __init__(self, worlds: Sequence[str], *, epsilon: float = 0.05, temperature: float = 1.0):
        if not 0 <= epsilon < 1:
            raise ValueError(f"epsilon must be in [0, 1), not {epsilon}")
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, not {temperature}")
        self.points: dict[str, ChoicePoint] = {
            "domain": ChoicePoint("domain", tuple(worlds)),
            "hops": ChoicePoint("hops", (1, 2, 3, 4, 5)),
            "family": ChoicePoint("family", tuple(FAMILIES)),
            "writes": ChoicePoint("writes", (0, 1, 2, 3, 4)),
            "filters": ChoicePoint("filters", SWITCH),
            "superlatives": ChoicePoint("superlatives", SWITCH),
            "distractors": ChoicePoint("distractors", SWITCH),
        }
        self.epsilon = epsilon
        self.temperature = temperature
        self.logits: dict[str, np.ndarray] = self.zeros()
        self.moments: dict[str, np.ndarray] = self.zeros()
        self.squares: dict[str, np.ndarray] = self.zeros()
        self.steps = 0

    def zeros(self) -> dict[str, np.ndarray]:
        """Zeros shaped like the logits, one array per choice point (a gradient to add to)."""
        return {
            name: np.zeros(len(point.options), dtype=np.float64)
            for name, point in self.points.items()
        }

    def probabilities(self, name: str, offered: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(π over the offered options, given by index, and its softmax part σ) for a draw of ``name``."""
        sigma = _softmax(self.logits[name][list(offered)] / self.temperature)
        return (1 - self.epsilon) * sigma + self.epsilon / len(offered), sigma

    def draw(self, rng: random.Random, name: str, offered: Sequence[Any]) -> Any:
        """One option of ``name`` among ``offered`` (values), with one ``rng.random()`` (none when one is offered).

        Raises:
            ValueError: a value offered that is not one of the point's options.
        """
        point = self.points[name]
        indices = []
        for value in offered:
            index = point.index(value)
            if index is None:
                raise ValueError(f"{value!r} is not an option of {name} ({list(point.options)})")
            indices.append(index)
        if len(indices) == 1:
            return offered[0]
        pi, _ = self.probabilities(name, indices)
        u, total = rng.random(), 0.0
        for value, p in zip(offered, pi, strict=True):
            total += float(p)
            if u < total:
                return value
        return offered[-1]  # u fell into the last rounding error

    def credit(
        self,
        gradient: Mapping[str, np.ndarray],
        name: str,
        offered: Sequence[Any],
        chosen: Any,
        advantage: float,
    ) -> bool:
        """Add ``advantage · ∇_θ log π(chosen)`` for one draw of ``name`` to ``gradient`` (in place).

        Returns False (and adds nothing) when the draw cannot be credited: a
        value that is not an option, or only one option offered.
        """
        point = self.points[name]
        indices = [point.index(v) for v in offered]
        at = point.index(chosen)
        if len(indices) < 2 or at is None or at not in indices or None in indices:
            return False
        clean = [int(i) for i in indices if i is not None]
        pi, sigma = self.probabilities(name, clean)
        k = clean.index(at)
        # ∇ log π_k for the mixture: (1 − ε) σ_k / π_k · (onehot_k − σ) / T
        scale = advantage * (1 - self.epsilon) * sigma[k] / pi[k] / self.temperature
        step = -scale * sigma
        step[k] += scale
        gradient[name][clean] += step
        return True

    def apply(self, gradient: Mapping[str, np.ndarray], lr: float) -> None:
        """Take an Adam ascent step of size ``lr``, after forgetting :data:`DECAY` of every logit (then clipped to ±:data:`MAX_LOGIT`).

        Adam's scaling matters here: a nearly certain choice has a tiny
        softmax gradient, and without it the policy would hardly leave a band
        the Solver has since mastered.
        """
        self.steps += 1
        b1, b2 = ADAM
        for name, grad in gradient.items():
            m = self.moments[name] = b1 * self.moments[name] + (1 - b1) * grad
            v = self.squares[name] = b2 * self.squares[name] + (1 - b2) * grad**2
            m_hat, v_hat = m / (1 - b1**self.steps), v / (1 - b2**self.steps)
            step = lr * m_hat / (np.sqrt(v_hat) + ADAM_FLOOR)
            kept = (1 - DECAY) * self.logits[name]
            self.logits[name] = np.clip(kept + step, -MAX_LOGIT, MAX_LOGIT)

    def marginal(self, name: str) -> np.ndarray:
        """The probabilities of every option of ``name`` when every option is offered."""
        return self.probabilities(name, range(len(self.points[name].options)))[0]

    def distribution(self) -> dict[str, dict[str, float]]:
        """Each choice point's probabilities by option (as text), before any mask."""
        return {
            name: {
                str(option): round(float(p), 6)
                for option, p in zip(point.options, self.marginal(name), strict=True)
            }
            for name, point in self.points.items()
        }

    def entropy(self) -> float:
        """The mean entropy (in nats) of the choice points' unmasked distributions."""
        values = [
            -sum(float(p) * math.log(float(p)) for p in self.marginal(name) if p > 0)
            for name in self.points
        ]
        return sum(values) / len(values)
