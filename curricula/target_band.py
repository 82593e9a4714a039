"""``target-band``: tasks the World model predicts in a band, around a frontier level that follows the Solver.

It asks for tasks at the frontier level and one above, keeps those the World
model predicts in ``band`` (default 0.3–0.7), and trains a share
(``explore``) of each batch on tasks above the frontier. The frontier cannot
stall: it moves on what the Solver did (its observed success per level over
the last ``window_outcomes`` training episodes), not only on predictions:

* **up** when the Solver's predicted or observed success at the frontier
  passes the band (mastered), or when it has stayed ``patience`` generations,
  is solved at least ``band[0]`` of the time, and the level above is solved
  at least half that often (learnable: the exploration share measures it);
* **down** when, ``patience`` generations after the frontier got there, the
  predicted or observed success at it is below half the band's low end (the
  Solver cannot learn it yet; a level just reached is predicted low until
  the Solver has played it, and is not left at once); after moving down it
  stays ``patience`` generations before it tries the level above again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from coevo.arena.difficulty import task_level
from coevo.arena.novelty import signature
from coevo.arena.spec import TaskSpec
from coevo.curricula.base import Curriculum, CurriculumConfig, GenerationPlan
from pydantic import Field, model_validator

__all__ = ["TargetBand", "TargetBandConfig"]


class TargetBandConfig(CurriculumConfig):
    """The settings of ``target-band``.

    Attributes:
        band: the predicted success range wanted, two numbers 0 ≤ low < high ≤ 1.
        start_level: the frontier's first level.
        explore: the share of each batch given to fresh tasks above the frontier.
        patience: generations at a level before its observed success alone may move the frontier.
        window_outcomes: training outcomes kept per level for its observed success.
        distinct: train on tasks of distinct signatures first (:mod:`coevo.arena.novelty`):
            a fresh task shaped like one already chosen comes after every other.
        observed: move the frontier on observed success too, with ``patience`` (false: on
            the World model's predictions alone, at once: how coevo before self-play moved
            it, and how a run recorded then is read, with ``explore = 0`` and
            ``distinct = false``).
    """

    band: tuple[float, float] = (0.3, 0.7)
    start_level: int = Field(default=1, ge=1, le=5)
    explore: float = Field(default=0.25, ge=0.0, le=1.0)
    patience: int = Field(default=5, ge=1, le=1000)
    window_outcomes: int = Field(default=96, ge=8, le=100_000)
    distinct: bool = True
    observed: bool = True

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
        self.moved_at = 0  # the generation the frontier reached its level
        self.backed_off = False  # it got there by moving down
        self.outcomes: dict[int, list[int]] = {}  # level → its latest training outcomes

    def plan(self, gen: int) -> GenerationPlan:
        """Proposals at the frontier and one level above (twice as many: the band keeps a part)."""
        levels = [lv for lv in (self.level, self.level + 1) if lv in self.config.levels] or [
            self.level
        ]
        need = self.proposals_for(2 * self.config.tasks_per_gen)
        return GenerationPlan(self.spread(gen, need, levels))

    def aim(self) -> float:
        """The band's middle: tasks are trained on (and dynamic sampling's rounds drawn) nearest it first."""
        low, high = self.config.band
        return (low + high) / 2

    def batch(self, gen: int) -> list[TaskSpec]:
        """Fresh tasks closest to the band's middle first; replayed in-band tasks fill up."""
        low, high = self.config.band
        distance = self.distance
        size = self.config.tasks_per_gen
        above = [t for t in self.fresh if (self.stats[t].level or 0) > self.level]
        explore = self._distinct(sorted(above, key=distance))[
            : math.ceil(self.config.explore * size)
        ]
        chosen = set(explore)
        rest = self._distinct(sorted((t for t in self.fresh if t not in chosen), key=distance))
        new: list[str] = [*explore, *rest][:size]
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

    def _distinct(self, order: list[str]) -> list[str]:
        """``order`` with each repeat of an earlier task's signature moved to the end (R-Zero's repetition penalty)."""
        if not self.config.distinct:
            return order
        seen: set[str] = set()
        first: list[str] = []
        repeats: list[str] = []
        for task_id in order:
            key = signature(self.tasks[task_id]).key()
            (repeats if key in seen else first).append(task_id)
            seen.add(key)
        return first + repeats

    def admit(self, gen: int, tasks: Sequence[TaskSpec], predicted: Sequence[float]) -> None:
        """Admit, then move the frontier by the World model's predictions for this generation's tasks.

        Up when the frontier's tasks are predicted above the band on average
        (too easy now); down when, ``patience`` generations after the frontier
        got there, they are predicted below half its low end (clearly too hard:
        a level just reached is predicted low until the Solver has played it).
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
        if mean > high:
            self._move(gen, +1)
        elif mean < low / 2 and (
            not self.config.observed or gen - self.moved_at >= self.config.patience
        ):
            self._move(gen, -1)

    def observe(self, gen: int, task_ids: Sequence[str], rewards: Sequence[int]) -> None:
        """Rescore, keep each level's observed success, and move the frontier on it (see the module)."""
        levels = [self.stats[t].level if t in self.stats else None for t in task_ids]
        super().observe(gen, task_ids, rewards)
        for level, reward in zip(levels, rewards, strict=True):
            if level is not None:
                kept = self.outcomes.setdefault(level, [])
                kept.append(int(reward))
                del kept[: -self.config.window_outcomes]
        low, high = self.config.band
        here, above = self.observed(self.level), self.observed(self.level + 1)
        if here is None or not self.config.observed:
            return
        settled = gen - self.moved_at >= self.config.patience
        if here > high or (settled and here >= low and above is not None and above >= low / 2):
            self._move(gen, +1)
        elif settled and here < low / 2:
            self._move(gen, -1)

    def observed(self, level: int) -> float | None:
        """The Solver's observed success at ``level`` (None: too few outcomes there yet)."""
        kept = self.outcomes.get(level, [])
        return sum(kept) / len(kept) if len(kept) >= min(32, self.config.window_outcomes) else None

    def _move(self, gen: int, step: int) -> None:
        if self.config.observed and self.backed_off and gen - self.moved_at < self.config.patience:
            return  # just moved back: stay `patience` generations before trying above again
        if self.level + step in self.config.levels:
            self.backed_off = step < 0
            self.level += step
            self.moved_at = gen

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
        """The frontier level, when it got there, and each level's latest outcomes."""
        return {
            "level": self.level,
            "moved_at": self.moved_at,
            "backed_off": self.backed_off,
            "outcomes": {str(k): v for k, v in sorted(self.outcomes.items())},
        }

    def load_extra_state(self, extra: dict[str, Any]) -> None:
        """Restore :meth:`extra_state`."""
        self.level = int(extra.get("level", self.level))
        self.moved_at = int(extra.get("moved_at", 0))
        self.backed_off = bool(extra.get("backed_off", False))
        self.outcomes = {int(k): list(v) for k, v in (extra.get("outcomes") or {}).items()}
