"""``target-band``: tasks the World model predicts in a band, around a frontier level that follows the Solver.

It asks for tasks at the frontier level and one above, keeps those the World
model predicts in ``band`` (default 0.3–0.7), and moves the frontier up when
the Solver's predicted success on it passes the band (down when far below).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from coevo.arena.difficulty import task_level
from coevo.arena.spec import TaskSpec
from coevo.curricula.base import Curriculum, CurriculumConfig, GenerationPlan
from pydantic import Field, model_validator

__all__ = ["TargetBand", "TargetBandConfig"]


class TargetBandConfig(CurriculumConfig):
    """The settings of ``target-band``.

    Attributes:
        band: the predicted success range wanted, two numbers 0 ≤ low < high ≤ 1.
        start_level: the frontier's first level.
    """

    band: tuple[float, float] = (0.3, 0.7)
    start_level: int = Field(default=1, ge=1, le=5)

    @model_validator(mode="after")
    def _band_is_a_range(self) -> TargetBandConfig:
        low, high = self.band
        if not 0 <= low < high <= 1:
            raise ValueError(f"band must be two numbers 0 ≤ low < high ≤ 1, not {list(self.band)}")
        return self


class TargetBand(Curriculum):
    """Tasks the World model predicts in a band, around a frontier level that follows the Solver."""

    name: ClassVar[str] = "target-band"
    Config: ClassVar[type[CurriculumConfig]] = TargetBandConfig
    config: TargetBandConfig

    def __init__(self, config: CurriculumConfig, seed: int):
        super().__init__(config, seed)
        levels = sorted(self.config.levels)
        self.level = min(max(self.config.start_level, levels[0]), levels[-1])

    def plan(self, gen: int) -> GenerationPlan:
        """Proposals at the frontier and one level above (twice as many: the band keeps a part)."""
        levels = [lv for lv in (self.level, self.level + 1) if lv in self.config.levels] or [
            self.level
        ]
        need = math.ceil(self.config.tasks_per_gen * self.config.oversample * 2)
        return GenerationPlan(self.spread(gen, need, levels))

    def batch(self, gen: int) -> list[TaskSpec]:
        """Fresh tasks closest to the band's middle first; replayed in-band tasks fill up."""
        low, high = self.config.band
        middle = (low + high) / 2

        def distance(task_id: str) -> tuple[float, str]:
            stats = self.stats[task_id]
            p = stats.success if stats.success is not None else stats.predicted
            return (abs((p if p is not None else middle) - middle), task_id)

        new: list[str] = sorted(self.fresh, key=distance)[: self.config.tasks_per_gen]
        self.fresh: list[str] = []
        room = self.config.tasks_per_gen - len(new)
        played = [
            t
            for t, s in self.stats.items()
            if s.last_played >= 0
            and s.success is not None
            and low <= s.success <= high
            and t not in new
        ]
        replay = sorted(played, key=distance)[:room]
        return [self.tasks[t] for t in [*new, *replay]]

    def admit(self, gen: int, tasks: Sequence[TaskSpec], predicted: Sequence[float]) -> None:
        """Admit, then move the frontier by the World model's predictions for this generation's tasks.

        Up when the frontier's tasks are predicted above the band on average
        (too easy now); down when they are predicted below half its low end
        (clearly too hard: a level just reached is predicted low until the
        Solver has played it, and should not be left at once).
        """
        super().admit(gen, tasks, predicted)
        here = [
            float(p)
            for task, p in zip(tasks, predicted, strict=True)
            if task_level(task) == self.level
        ]
        if len(here) < 4:
            return
        low, high = self.config.band
        mean = float(np.mean(here))
        if mean > high and self.level + 1 in self.config.levels:
            self.level += 1
        elif mean < low / 2 and self.level - 1 in self.config.levels:
            self.level -= 1

    def forget(self) -> None:
        """Keep the fresh tasks and those whose success is in the band (for replay); drop the rest."""
        # keep in-band tasks for replay, the rest is in the log
        low, high = self.config.band
        keep = {
            t
            for t, s in self.stats.items()
            if t in self.fresh or s.success is None or low <= s.success <= high
        }
        for key in [k for k in self.stats if k not in keep]:
            del self.stats[key]
            self.tasks.pop(key, None)

    def frontier(self) -> float | None:
        """The frontier level."""
        return float(self.level)

    def extra_state(self) -> dict[str, Any]:
        """The frontier level."""
        return {"level": self.level}

    def load_extra_state(self, extra: dict[str, Any]) -> None:
        """Restore the frontier level."""
        self.level = int(extra.get("level", self.level))
