"""``uniform``: fresh tasks every generation, levels and domains drawn uniformly (domain randomisation).

This module is the template a new curriculum copies: its settings (here only
the ones every curriculum takes), the class, and nothing else. A plugin
registers its class through the ``coevo.curricula`` entry points (see
``docs/curricula.md``); a built-in is listed in :mod:`coevo.curricula.registry`.
"""

from __future__ import annotations

from typing import ClassVar

from coevo.curricula.base import Curriculum, CurriculumConfig

__all__ = ["Uniform", "UniformConfig"]


class UniformConfig(CurriculumConfig):
    """``uniform`` takes only the settings every curriculum takes."""


class Uniform(Curriculum):
    """Fresh tasks every generation, levels and domains drawn uniformly; nothing is replayed."""

    name: ClassVar[str] = "uniform"
    Config: ClassVar[type[CurriculumConfig]] = UniformConfig

    def forget(self) -> None:
        """Drop every task once it is played: a uniform curriculum never replays."""
        # a uniform curriculum never replays: keep only what the next plan needs
        played = [k for k, s in self.stats.items() if s.last_played >= 0 and k not in self.fresh]
        for key in played:
            del self.stats[key]
            self.tasks.pop(key, None)
