"""The plan data: task families, the :class:`Plan` of a task, difficulty targets, phrase slots.

A :class:`Plan` is a task's structure as data: which row the instruction
names, which foreign keys the agent must walk (and how each step picks its
row, a :class:`Pick`), and what it must do at the end. A :class:`Target` is
what a generator aims for: feature ranges and the families to draw from.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from coevo.arena.difficulty import LEVELS, TASK_FEATURES
from coevo.arena.errors import CoevoError

__all__ = [
    "BULK_SIZE",
    "FAMILIES",
    "FAMILY_LEVELS",
    "FEATURE_NAMES",
    "LEVEL_FAMILIES",
    "Pick",
    "Plan",
    "Target",
    "Unfit",
    "slot",
    "slots",
]

FAMILIES: Final = ("question", "action", "conditional", "bulk")
"""Task families: answer a question, act on one row, act on a condition, act on every matching row."""

FEATURE_NAMES: Final = TASK_FEATURES
"""Features every generated task carries (all measured on the task itself; see :mod:`coevo.arena.difficulty`)."""

FAMILY_LEVELS: Final[Mapping[str, tuple[int, ...]]] = {
    "question": (1, 2, 3, 4, 5),
    "action": (1, 2, 3, 4, 5),
    "bulk": (2, 3, 4, 5),
    "conditional": (3, 4, 5),
}
"""The levels each family spans: a conditional task has at least four steps and a branch, so it starts at 3."""

LEVEL_FAMILIES: Final[Mapping[int, tuple[str, ...]]] = {
    level: tuple(f for f in FAMILIES if level in FAMILY_LEVELS[f]) for level in LEVELS
}
"""The families a level draws from when the request names none."""

BULK_SIZE: Final = (2, 4)
"""How many rows the last pick of a bulk task takes: at least, at most."""


class Unfit(CoevoError):
    """A plan cannot be realised in this world (ambiguous pick, failed precondition, ...)."""


@dataclass(frozen=True)
class Pick:
    """How a down hop picks its row(s) from the listed rows.

    Attributes:
        filter: index into the hop's filters, or ``None``.
        value: the filter's value when the filter leaves it open.
        order: index into the hop's orders, or ``None`` (then exactly one row may remain).
        highest: take the highest value of the order (else the lowest).
        every: take every remaining row (bulk tasks, last hop only).
    """

    filter: int | None = None
    value: Any = None
    order: int | None = None
    highest: bool = True
    every: bool = False


@dataclass(frozen=True)
class Plan:
    """A task's structure: start row, foreign-key walk, goal.

    Attributes:
        family: one of :data:`FAMILIES`.
        anchor: index into the catalog's anchors.
        row: the key of the anchor row.
        hops: indices into the catalog's hops, in walking order.
        picks: for each hop, its :class:`Pick` (``None`` for an up hop).
        goal: an attribute index (question) or action indices (one, or first
            choice then fallback for a conditional task).
        choices: the values the instruction states for the actions' choices.
    """

    family: str
    anchor: int
    row: Any
    hops: tuple[int, ...] = ()
    picks: tuple[Pick | None, ...] = ()
    goal: tuple[int, ...] = ()
    choices: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON-ready data (kept in a task's ``provenance``)."""
        data = asdict(self)
        data["hops"] = list(self.hops)
        data["goal"] = list(self.goal)
        data["picks"] = [None if p is None else asdict(p) for p in self.picks]
        data["choices"] = dict(self.choices)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Plan:
        """The plan stored by :meth:`to_json`."""
        return cls(
            family=data["family"],
            anchor=int(data["anchor"]),
            row=data["row"],
            hops=tuple(int(h) for h in data.get("hops", ())),
            picks=tuple(None if p is None else Pick(**p) for p in data.get("picks", ())),
            goal=tuple(int(g) for g in data.get("goal", ())),
            choices=dict(data.get("choices") or {}),
        )


@dataclass(frozen=True)
class Target:
    """What a generator should aim for: feature ranges (inclusive) and the families to use.

    Attributes:
        ranges: feature name → (low, high); missing features are free.
        families: the families to draw from.
    """

    ranges: Mapping[str, tuple[float, float]]
    families: tuple[str, ...]

    @classmethod
    def of(
        cls,
        level: int | None = None,
        features: Mapping[str, tuple[float | None, float | None]] | None = None,
        families: Sequence[str] | None = None,
    ) -> Target:
        """The target for a level (1–5) and/or explicit feature ranges (which win).

        Raises:
            ValueError: an unknown level or family, or a range whose low end is above its high end.
        """
        if level is not None and level not in LEVELS:
            raise ValueError(f"level {level} is not one of {sorted(LEVELS)}")
        ranges: dict[str, tuple[float, float]] = dict(LEVELS[level]) if level else {}
        for name, (low, high) in (features or {}).items():
            lo = float("-inf") if low is None else float(low)
            hi = float("inf") if high is None else float(high)
            if lo > hi:
                raise ValueError(f"features.{name}: low {low} is above high {high}")
            ranges[name] = (lo, hi)
        chosen = tuple(families) if families else LEVEL_FAMILIES[level] if level else FAMILIES
        unknown = [f for f in chosen if f not in FAMILIES]
        if unknown:
            raise ValueError(
                f"unknown task family {unknown[0]!r}; choose from {', '.join(FAMILIES)}"
            )
        if level is not None:
            chosen = tuple(f for f in chosen if level in FAMILY_LEVELS[f])
            if not chosen:
                spans = "; ".join(f"{f}: {min(FAMILY_LEVELS[f])}–5" for f in families or ())
                raise ValueError(f"no family asked for reaches level {level} ({spans})")
        return cls(ranges=ranges, families=chosen)

    def admits(self, features: Mapping[str, float]) -> bool:
        """Whether measured features lie in every range."""
        return all(lo <= features.get(name, 0) <= hi for name, (lo, hi) in self.ranges.items())

    def bounds(self, name: str, default: tuple[int, int]) -> tuple[int, int]:
        """A feature's range clipped to ``default`` (for drawing integers); may be empty (low > high)."""
        lo, hi = self.ranges.get(name, default)
        lo_i = max(default[0], math.ceil(lo)) if lo != float("-inf") else default[0]
        hi_i = min(default[1], math.floor(hi)) if hi != float("inf") else default[1]
        return lo_i, hi_i


@functools.lru_cache(maxsize=4096)
def slot(name: str) -> str:
    """A column name as a format-string field (anything but letters, digits and ``_`` becomes ``_``)."""
    return re.sub(r"\W", "_", name, flags=re.ASCII) or "_"


def slots(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row's values by column name and by :func:`slot` name, for filling phrases."""
    filled = dict(row)
    for name, value in row.items():
        filled.setdefault(slot(name), value)
    return filled
