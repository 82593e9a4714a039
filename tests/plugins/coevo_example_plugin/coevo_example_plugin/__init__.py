"""An example coevo plugin: a World model that predicts success from a task's difficulty band.

It is found by coevo through the entry point in this package's
``pyproject.toml`` (group ``coevo.roles``), so an experiment can name it
(``world_model = "example-band-model"``) with no change to coevo.
"""

from __future__ import annotations

from collections.abc import Sequence

from coevo.arena import Episode, TaskSpec


class BandMeanModel:
    """P(success) = the mean reward seen so far on tasks of the same difficulty band (a prior of 0.5)."""

    kind = "world model"

    def __init__(self, band_width: float = 2.0, prior: float = 0.5, prior_weight: float = 1.0):
        self.band_width = band_width
        self.prior = prior
        self.prior_weight = prior_weight
        self._sums: dict[int, float] = {}
        self._counts: dict[int, int] = {}
        self._bands: dict[str, int] = {}

    def _band(self, task: TaskSpec) -> int:
        return int(task.features.get("difficulty", len(task.solution)) // self.band_width)

    def predict(self, tasks: Sequence[TaskSpec]) -> list[float]:
        """The smoothed mean reward of each task's band."""
        out = []
        for task in tasks:
            band = self._band(task)
            self._bands[task.task_id] = band
            total = self._sums.get(band, 0.0) + self.prior * self.prior_weight
            count = self._counts.get(band, 0) + self.prior_weight
            out.append(total / count)
        return out

    def update(self, episodes: Sequence[Episode]) -> None:
        """Add each episode's reward to its task's band (tasks not predicted before go to band 0)."""
        for episode in episodes:
            band = self._bands.get(episode.task_id, 0)
            self._sums[band] = self._sums.get(band, 0.0) + episode.reward.value
            self._counts[band] = self._counts.get(band, 0) + 1
