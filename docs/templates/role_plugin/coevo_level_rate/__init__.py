"""A coevo role plugin: a World model that predicts success from the success rate at a task's level.

coevo finds the role through the entry point in this package's ``pyproject.toml``
(group ``coevo.roles``), so an experiment file names it with no change to coevo::

    [world_model]
    name = "level-rate"
    config = { prior = 0.5, prior_weight = 2.0 }

To make your own role, copy this package, rename it (the distribution, the
package and the entry point) and replace the model. Keep the habits it shows:
batches in and out, one result per item in order, the same results for the
same inputs, and state saved as data.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from coevo.arena import Episode, TaskSpec
from coevo.arena.difficulty import LEVELS, difficulty, level_of
from coevo.arena.state import pack_state, unpack_state

__all__ = ["STATE_VERSION", "LevelRateModel"]

STATE_VERSION = 1
"""The layout of this role's saved state: bump it when ``get_state`` changes, and keep reading old ones."""


class LevelRateModel:
    """P(success) = the smoothed success rate so far on tasks of the same difficulty level.

    A task's level is read off its features on coevo's difficulty scale
    (:func:`coevo.arena.difficulty.level_of`), so a task never attempted gets
    a prediction. The model is *Stateful*: :meth:`get_state` and
    :meth:`set_state` save and load it as ``coevo.state/1`` data (JSON and
    numpy arrays, never a pickle), so the arena checkpoints it and a resumed
    run continues from it.

    Args:
        prior: the prediction at a level with no outcomes yet.
        prior_weight: how many episodes the prior counts as.
    """

    kind = "world model"

    def __init__(self, prior: float = 0.5, prior_weight: float = 2.0):
        if not 0.0 <= prior <= 1.0 or prior_weight <= 0:
            raise ValueError(
                f"prior must be in [0, 1] and prior_weight above 0, not {prior} and {prior_weight}"
            )
        self.prior = prior
        self.prior_weight = prior_weight
        self.successes = np.zeros(len(LEVELS) + 1)  # indexed by level; 0 is unused
        self.episodes = np.zeros(len(LEVELS) + 1)
        self.levels: dict[str, int] = {}  # task id -> level, for the outcomes still to come

    def predict(self, tasks: Sequence[TaskSpec]) -> list[float]:
        """P(the Solver succeeds) per task, in order: its level's smoothed success rate."""
        out = []
        for task in tasks:
            level = level_of(difficulty(task.features))
            self.levels[task.task_id] = level
            seen = self.successes[level] + self.prior * self.prior_weight
            out.append(float(seen / (self.episodes[level] + self.prior_weight)))
        return out

    def update(self, episodes: Sequence[Episode]) -> None:
        """Count each episode's reward at its task's level (episodes of tasks never predicted are skipped)."""
        for episode in episodes:
            level = self.levels.get(episode.task_id)
            if level is not None:
                self.successes[level] += episode.reward.value
                self.episodes[level] += 1

    def get_state(self) -> bytes:
        """The counts and the task levels, as ``coevo.state/1`` bytes."""
        return pack_state(
            "level-rate",
            STATE_VERSION,
            {"levels": self.levels},
            {"successes": self.successes, "episodes": self.episodes},
        )

    def set_state(self, state: bytes) -> None:
        """Load what :meth:`get_state` returned.

        Raises:
            StateError: the bytes are not a ``level-rate`` state of a version this code reads.
        """
        saved = unpack_state(state, role="level-rate", versions={STATE_VERSION})
        self.levels = {str(task): int(level) for task, level in saved.meta["levels"].items()}
        self.successes = saved.arrays["successes"]
        self.episodes = saved.arrays["episodes"]
