"""An example curriculum plugin: the tasks the World model finds easiest first, up to a ceiling level."""

from __future__ import annotations

from typing import ClassVar

from coevo.arena import TaskSpec
from coevo.curricula.base import Curriculum, CurriculumConfig, GenerationPlan
from pydantic import Field


class EasyFirstConfig(CurriculumConfig):
    """The settings of ``example-easy-first``.

    Attributes:
        ceiling: the highest level asked for.
    """

    ceiling: int = Field(default=3, ge=1, le=5)


class EasyFirst(Curriculum):
    """Fresh tasks up to ``ceiling``, the ones predicted easiest first."""

    name: ClassVar[str] = "example-easy-first"
    Config: ClassVar[type[CurriculumConfig]] = EasyFirstConfig
    config: EasyFirstConfig

    def plan(self, gen: int) -> GenerationPlan:
        """Proposals spread over the configured levels at or below the ceiling."""
        levels = [lv for lv in self.config.levels if lv <= self.config.ceiling] or [1]
        return GenerationPlan(self.spread(gen, self.config.tasks_per_gen * 2, levels))

    def batch(self, gen: int) -> list[TaskSpec]:
        """This generation's fresh tasks, highest predicted success first."""
        ranked = sorted(self.fresh, key=lambda t: (-(self.stats[t].predicted or 0.0), t))
        self.fresh = []
        return [self.tasks[t] for t in ranked[: self.config.tasks_per_gen]]
