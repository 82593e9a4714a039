"""``ladder``: one level at a time, and the next once the Solver's success on this one passes a bar.

A curriculum plugin in one file: its settings (a subclass of
``CurriculumConfig`` with the keys it adds), the class (a subclass of
``Curriculum`` overriding what it does differently), and everything its
choices depend on in its state (here, the current level), so that a resumed
run, or one rebuilt from the game log, makes the same choices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from coevo.curricula.base import Curriculum, CurriculumConfig, GenerationPlan
from pydantic import Field

__all__ = ["Ladder", "LadderConfig"]


class LadderConfig(CurriculumConfig):
    """The settings of ``ladder`` (besides those every curriculum takes).

    Attributes:
        promote: the training success on the current level that moves the ladder up.
    """

    promote: float = Field(default=0.8, gt=0.0, le=1.0)


class Ladder(Curriculum):
    """Fresh tasks of one level; the next level once the last generation's success passes ``promote``."""

    name: ClassVar[str] = "ladder"
    Config: ClassVar[type[CurriculumConfig]] = LadderConfig
    config: LadderConfig

    def __init__(self, config: CurriculumConfig, seed: int):
        super().__init__(config, seed)
        self.level = min(self.config.levels)

    def plan(self, gen: int) -> GenerationPlan:
        """Proposals at the current level only."""
        need = round(self.config.tasks_per_gen * self.config.oversample)
        return GenerationPlan(self.spread(gen, need, [self.level]))

    def observe(self, gen: int, task_ids: Sequence[str], rewards: Sequence[int]) -> None:
        """Record the outcomes; climb when this generation's success passes the bar.

        The arena plans a generation ahead (the plan for ``gen + 1`` is made
        before ``gen`` is played), so the new level is asked for from ``gen + 2``.
        """
        super().observe(gen, task_ids, rewards)
        higher = [lv for lv in self.config.levels if lv > self.level]
        if rewards and sum(rewards) / len(rewards) >= self.config.promote and higher:
            self.level = min(higher)

    def frontier(self) -> float | None:
        """The current level."""
        return float(self.level)

    def forget(self) -> None:
        """Drop every task once it is trained on: nothing is replayed."""
        # nothing is replayed: keep only the tasks not yet trained on
        for key in [k for k in self.stats if k not in self.fresh]:
            del self.stats[key]
            self.tasks.pop(key, None)

    def extra_state(self) -> dict[str, Any]:
        """The current level (everything else the ladder's choices depend on is in the base state)."""
        return {"level": self.level}

    def load_extra_state(self, extra: dict[str, Any]) -> None:
        """Restore the current level."""
        self.level = int(extra["level"])
