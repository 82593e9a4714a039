"""``uniform``: fresh tasks every generation, levels and domains drawn uniformly (domain randomisation).

This module is the template a new curriculum copies: its settings (here only
the ones every curriculum takes), the class, and nothing else. A plugin
registers its class through the ``coevo.curricula`` entry points (see
``docs/curricula.md``); a built-in is listed in :mod:`coevo.curricula.registry`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import ClassVar

from coevo.arena.spec import TaskSpec
from coevo.curricula.base import Curriculum, CurriculumConfig

__all__ = ["Uniform", "UniformConfig"]


class UniformConfig(CurriculumConfig):
    """``uniform`` takes only the settings every curriculum takes."""


class Uniform(Curriculum):
    """Fresh tasks every generation, levels and domains drawn uniformly; nothing is replayed."""

    name: ClassVar[str] = "uniform"
    Config: ClassVar[type[CurriculumConfig]] = UniformConfig

    def more(self, gen: int, n: int, played: Collection[str]) -> list[TaskSpec]:
        """Dynamic sampling's further tasks: ones never played, the newest admitted first, else by id; no preference by success estimate (as DAPO draws from its data)."""
        if n <= 0:
            return []
        unplayed = [t for t, s in self.stats.items() if s.last_played < 0 and t not in played]
        unplayed.sort(key=lambda t: (-self.stats[t].admitted, t))
        return [self.tasks[t] for t in unplayed[:n]]

    def forget(self) -> None:
        """Drop every task once it is played: a uniform curriculum never replays."""
        # a uniform curriculum never replays: keep only what the next plan needs
        played = [k for k, s in self.stats.items() if s.last_played >= 0 and k not in self.fresh]
        for key in played:
            del self.stats[key]
            self.tasks.pop(key, None)
