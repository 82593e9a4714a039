"""``plr``: Prioritized Level Replay over accepted tasks.

A buffer of played tasks, each scored by a scorer (:mod:`~coevo.curricula.scorers`)
from its success estimate, is replayed with probability ``replay_prob`` once
``min_fill`` tasks are in it, by rank-temperature sampling mixed with staleness
(Jiang et al., 2021); the rest of each batch is fresh tasks, levels drawn uniformly.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from coevo.arena.spec import TaskSpec
from coevo.curricula.base import Curriculum, CurriculumConfig
from coevo.curricula.scorers import scorer_named
from pydantic import Field

__all__ = ["PLR", "PLRConfig"]


class PLRConfig(CurriculumConfig):
    """The settings of ``plr`` (and ``accel``).

    Attributes:
        replay_prob: the share of a batch replayed from the buffer.
        buffer_size: tasks kept in the buffer (the lowest scores leave first), at most a million.
        min_fill: tasks in the buffer before any replay, at most a million.
        temperature: rank temperature β: weight ∝ (1 / rank)^(1/β).
        staleness: the weight of staleness in the replay distribution.
        scorer: ``learnability``, ``absolute-zero`` or ``r-zero``.
    """

    replay_prob: float = Field(default=0.5, ge=0.0, le=1.0)
    buffer_size: int = Field(default=256, ge=1, le=1_000_000)
    min_fill: int = Field(default=32, ge=0, le=1_000_000)
    temperature: float = Field(default=0.3, gt=0.0)
    staleness: float = Field(default=0.3, ge=0.0, le=1.0)
    scorer: Literal["learnability", "absolute-zero", "r-zero"] = "learnability"


class PLR(Curriculum):
    """Prioritized Level Replay over accepted tasks (see the module docstring)."""

    name: ClassVar[str] = "plr"
    Config: ClassVar[type[CurriculumConfig]] = PLRConfig
    config: PLRConfig

    def __init__(self, config: CurriculumConfig, seed: int):
        super().__init__(config, seed)
        self.score = scorer_named(self.config.scorer)
        self.buffer: list[str] = []  # played tasks eligible for replay

    def replay_slots(self, gen: int) -> int:
        """How many of generation ``gen``'s tasks are replayed (0 until ``min_fill``)."""
        if len(self.buffer) < max(1, self.config.min_fill):
            return 0
        return min(len(self.buffer), round(self.config.replay_prob * self.config.tasks_per_gen))

    def fresh_slots(self, gen: int) -> int:
        """The tasks generation ``gen`` does not replay."""
        return self.config.tasks_per_gen - self.replay_slots(gen)

    def replay_distribution(self, gen: int) -> np.ndarray:
        """P(replay) over :attr:`buffer`: rank-temperature scores mixed with staleness."""
        scores = np.array([self.stats[t].score for t in self.buffer], dtype=float)
        # equal scores share a rank (1 + how many score strictly higher)
        ordered = np.sort(scores)
        ranks = 1.0 + (len(scores) - np.searchsorted(ordered, scores, side="right"))
        by_score = (1.0 / ranks) ** (1.0 / self.config.temperature)
        by_score /= by_score.sum()
        stale = np.array([gen - self.stats[t].last_played for t in self.buffer], dtype=float)
        by_age = stale / stale.sum() if stale.sum() > 0 else np.full(len(stale), 1 / len(stale))
        rho = self.config.staleness
        return np.asarray((1 - rho) * by_score + rho * by_age)

    def batch(self, gen: int) -> list[TaskSpec]:
        """Replayed tasks (sampled without replacement) plus fresh ones."""
        replay = self.replay_slots(gen)
        chosen: list[str] = []
        if replay:
            p = self.replay_distribution(gen)
            picks = self.rng(gen, "replay").choice(
                len(self.buffer), size=replay, replace=False, p=p
            )
            chosen = [self.buffer[i] for i in sorted(int(i) for i in picks)]
        new: list[str] = self.fresh[: self.config.tasks_per_gen - len(chosen)]
        self.fresh: list[str] = []
        return [self.tasks[t] for t in [*chosen, *new]]

    def rescore(self) -> None:
        """Score every task by its success estimate; a task played once joins the replay buffer."""
        for task_id, stats in self.stats.items():
            p = stats.success
            stats.score = 0.0 if p is None else self.score(p)
            if stats.plays and task_id not in self.buffer:
                self.buffer.append(task_id)

    def forget(self) -> None:
        """Keep the ``buffer_size`` best-scoring buffer tasks (and the fresh ones); drop the rest."""
        if len(self.buffer) > self.config.buffer_size:
            keep = sorted(
                self.buffer, key=lambda t: (-self.stats[t].score, -self.stats[t].last_played, t)
            )
            dropped = set(keep[self.config.buffer_size :])
            self.buffer = [t for t in self.buffer if t not in dropped]
        kept = set(self.buffer) | set(self.fresh)
        for key in [k for k in self.stats if k not in kept]:
            del self.stats[key]
            self.tasks.pop(key, None)

    def extra_state(self) -> dict[str, Any]:
        """The replay buffer, in order."""
        return {"buffer": list(self.buffer)}

    def load_extra_state(self, extra: dict[str, Any]) -> None:
        """Restore the replay buffer."""
        self.buffer = list(extra.get("buffer", []))

    def frontier(self) -> float | None:
        """The mean level of the buffer's tasks with the highest scores."""
        top = sorted(self.buffer, key=lambda t: -self.stats[t].score)[:16]
        levels = [lv for t in top if (lv := self.stats[t].level) is not None]
        return float(np.mean(levels)) if levels else None
