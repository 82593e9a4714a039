"""The difficulty scale: one number per task from its features, and five levels as bands of it.

Synthesizers measure a task's features (``steps``, ``branching``,
``distractors``, ``aggregates``, ...) on the realised task and record
``difficulty`` among them; curricula, the loop and analysis read a task's
level back with :func:`task_level`. Both sides use this module, so the scale
has one owner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from coevo.arena.spec import TaskSpec

__all__ = ["LEVELS", "TASK_FEATURES", "difficulty", "known_levels", "level_of", "task_level"]

TASK_FEATURES: Final = (
    "difficulty",
    "steps",
    "hops",
    "writes",
    "distractors",
    "branching",
    "result_rows",
    "aggregates",
    "question",
)
"""The features coevo's synthesizers measure on every task they make (``TaskSpec.features``)."""

LEVELS: Final[Mapping[int, Mapping[str, tuple[float, float]]]] = {
    1: {"difficulty": (0, 3.5)},
    2: {"difficulty": (4, 5)},
    3: {"difficulty": (5.5, 6.5)},
    4: {"difficulty": (7, 8)},
    5: {"difficulty": (8.5, float("inf"))},
}
"""Difficulty levels as ranges (inclusive) of the ``difficulty`` feature (see :func:`difficulty`)."""


def known_levels(levels: list[int]) -> list[int]:
    """``levels`` if each is one of :data:`LEVELS` (a setting's validator: ``curriculum.levels``, ``eval.levels``).

    Raises:
        ValueError: a level that is not one (the message gives the range).
    """
    if any(level not in LEVELS for level in levels):
        raise ValueError(f"every level must be one of {min(LEVELS)}–{max(LEVELS)}")
    return levels


def difficulty(features: Mapping[str, float]) -> float:
    """One number for how hard a task is, from its features (a multiple of 0.5).

    Every tool call counts 1; a branch the agent must decide counts 1.5 more;
    each look-alike row to rule out (up to 8) and each pick by an extreme
    value ("most recent") count 0.5. Levels are bands of this number, so a
    question with a long walk and a short conditional can both be level 4.
    """
    return (
        features.get("steps", 0)
        + 1.5 * features.get("branching", 0)
        + 0.5 * min(features.get("distractors", 0), 8)
        + 0.5 * features.get("aggregates", 0)
    )


def level_of(value: float) -> int:
    """The level whose band holds a difficulty ``value`` (the nearest end outside the bands)."""
    for level, ranges in LEVELS.items():
        low, high = ranges["difficulty"]
        if low <= value <= high:
            return level
    return max(LEVELS) if value > 8 else min(LEVELS)


def task_level(task: TaskSpec) -> int | None:
    """A task's level: from its measured ``difficulty`` feature, else its provenance's ``level``."""
    measured = (task.features or {}).get("difficulty")
    if isinstance(measured, (int, float)):
        return level_of(measured)
    level = (task.provenance or {}).get("level")
    return int(level) if isinstance(level, int) else None
