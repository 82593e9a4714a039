"""Curriculum strategies: what to ask the Synthesizer for, and which tasks the Solver trains on, each generation.

The arena drives a curriculum through four calls per generation ``g``::

    plan = curriculum.plan(g)              # proposal requests (and mutations) for the Synthesizer
    curriculum.admit(g, tasks, predicted)  # the accepted tasks, with the World model's P(success)
    tasks = curriculum.batch(g)            # distinct tasks to train on (the arena plays each k times)
    curriculum.observe(g, played, rewards) # the outcomes, to rescore

All randomness comes from ``numpy.random.default_rng([seed, g, ...])``, so a
curriculum resumed from its :meth:`Curriculum.state` (or rebuilt from the
game log by replaying ``admit``/``observe``) makes the same choices.

=============== ===================================================================
``uniform``     fresh tasks each generation, levels and domains drawn uniformly
                (domain randomisation); no replay
``plr``         Prioritized Level Replay: a buffer of played tasks scored by a
                scorer (:mod:`~coevo.curricula.scorers`), replayed with
                probability ``replay_prob`` once ``min_fill`` tasks are in it, by
                rank-temperature sampling mixed with staleness
``accel``       PLR, plus mutations of the highest-scoring tasks through the
                synthesis operators (harder children of tasks mostly solved,
                easier children of tasks mostly failed)
``target-band`` asks for tasks around a frontier level, keeps those the World
                model predicts in ``band`` (default 0.3–0.7), and moves the
                frontier up when the Solver's success on it passes the band
=============== ===================================================================
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
from coevo.agents.protocols import ProposalRequest
from coevo.arena.difficulty import task_level
from coevo.arena.spec import TaskSpec
from coevo.curricula.scorers import scorer_named
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ACCEL",
    "CURRICULA",
    "PLR",
    "Curriculum",
    "CurriculumConfig",
    "GenerationPlan",
    "Mutation",
    "TargetBand",
    "TaskStats",
    "Uniform",
    "make_curriculum",
    "task_level",
]

_HARDER = ("add_hop", "add_distractor", "add_condition")
_EASIER = ("drop_step", "drop_condition", "swap_target")


class CurriculumConfig(BaseModel):
    """The ``[curriculum]`` table of an experiment file.

    Attributes:
        name: ``uniform``, ``plr``, ``accel`` or ``target-band``.
        tasks_per_gen: distinct tasks trained on per generation.
        levels: the levels fresh tasks are drawn from (uniform, plr, accel), or
            the range the frontier moves in (target-band).
        domains: the domains to draw from (None: every domain the synthesizer has).
        oversample: proposals asked for per task needed (rejections and the band need spares).
        replay_prob: (plr, accel) the share of a batch replayed from the buffer.
        buffer_size: (plr, accel) tasks kept in the buffer (the lowest scores leave first).
        min_fill: (plr, accel) tasks in the buffer before any replay.
        temperature: (plr, accel) rank temperature β: weight ∝ (1 / rank)^(1/β).
        staleness: (plr, accel) the weight of staleness in the replay distribution.
        scorer: (plr, accel) ``learnability``, ``absolute-zero`` or ``r-zero``.
        window: outcomes per task kept for its success estimate.
        mutations: (accel) share of the fresh slots filled by mutations instead.
        band: (target-band) the predicted success range wanted.
        start_level: (target-band) the frontier's first level.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Literal["uniform", "plr", "accel", "target-band"] = "uniform"
    tasks_per_gen: int = Field(default=32, ge=1)
    levels: list[int] = Field(default_factory=lambda: [1, 2, 3], min_length=1)
    domains: list[str] | None = None
    oversample: float = Field(default=1.5, ge=1.0)
    replay_prob: float = Field(default=0.5, ge=0.0, le=1.0)
    buffer_size: int = Field(default=256, ge=1)
    min_fill: int = Field(default=32, ge=0)
    temperature: float = Field(default=0.3, gt=0.0)
    staleness: float = Field(default=0.3, ge=0.0, le=1.0)
    scorer: Literal["learnability", "absolute-zero", "r-zero"] = "learnability"
    window: int = Field(default=16, ge=1)
    mutations: float = Field(default=0.5, ge=0.0, le=1.0)
    band: tuple[float, float] = (0.3, 0.7)
    start_level: int = Field(default=1, ge=1, le=5)


@dataclass(frozen=True)
class Mutation:
    """A child to make from an accepted task: ``parent`` task id, an operator name, the seed."""

    parent: str
    operator: str
    seed: int


@dataclass(frozen=True)
class GenerationPlan:
    """What a generation asks the Synthesizer for: proposal requests and mutations."""

    requests: list[ProposalRequest]
    mutations: list[Mutation] = field(default_factory=list)


@dataclass
class TaskStats:
    """What a curriculum knows of one task.

    Attributes:
        level: its difficulty level.
        outcomes: its latest rewards (at most ``window``).
        plays: episodes played in all.
        last_played: the generation it was last played in (-1: never).
        admitted: the generation it was accepted in.
        predicted: the World model's P(success) when it was admitted.
        score: its replay score (plr, accel).
    """

    level: int | None
    outcomes: list[int] = field(default_factory=list)
    plays: int = 0
    last_played: int = -1
    admitted: int = 0
    predicted: float | None = None
    score: float = 0.0

    @property
    def success(self) -> float | None:
        """The success estimate: the mean of the kept outcomes (None before any)."""
        return sum(self.outcomes) / len(self.outcomes) if self.outcomes else None


class Curriculum:
    """The state every curriculum keeps: the accepted tasks and their statistics.

    Args:
        config: the ``[curriculum]`` table.
        seed: the run's seed.
    """

    name = "curriculum"

    def __init__(self, config: CurriculumConfig, seed: int):
        self.config = config
        self.seed = seed
        self.tasks: dict[str, TaskSpec] = {}
        self.stats: dict[str, TaskStats] = {}
        self.fresh: list[str] = []  # admitted, not yet put in a batch

    # ---- the arena's calls --------------------------------------------------------------

    def plan(self, gen: int) -> GenerationPlan:
        """The proposals (and mutations) generation ``gen`` asks for."""
        need = math.ceil(self.fresh_slots(gen) * self.config.oversample)
        return GenerationPlan(self._spread(gen, need, self.config.levels))

    def admit(self, gen: int, tasks: Sequence[TaskSpec], predicted: Sequence[float]) -> None:
        """Accepted tasks of generation ``gen``, with the World model's predictions."""
        for task, p in zip(tasks, predicted, strict=True):
            if task.task_id in self.stats:
                continue
            self.tasks[task.task_id] = task
            self.stats[task.task_id] = TaskStats(
                level=task_level(task), admitted=gen, predicted=float(p)
            )
            self.fresh.append(task.task_id)

    def batch(self, gen: int) -> list[TaskSpec]:
        """The distinct tasks generation ``gen`` trains on."""
        chosen = self.fresh[: self.config.tasks_per_gen]
        self.fresh = []
        return [self.tasks[t] for t in chosen]

    def observe(self, gen: int, task_ids: Sequence[str], rewards: Sequence[int]) -> None:
        """The rewards of generation ``gen``'s training episodes (task id per episode)."""
        for task_id, reward in zip(task_ids, rewards, strict=True):
            stats = self.stats.get(task_id)
            if stats is None:
                continue
            stats.outcomes.append(int(reward))
            del stats.outcomes[: -self.config.window]
            stats.plays += 1
            stats.last_played = gen
        self._rescore()
        self._forget()

    # ---- shared helpers -----------------------------------------------------------------

    def fresh_slots(self, gen: int) -> int:
        """How many fresh tasks generation ``gen`` needs."""
        return self.config.tasks_per_gen

    def frontier(self) -> float | None:
        """The level the curriculum is working at (the mean level of recent batches)."""
        return None

    def _rng(self, gen: int, purpose: str) -> np.random.Generator:
        return np.random.default_rng([self.seed, gen, sum(map(ord, purpose)), len(purpose)])

    def _spread(self, gen: int, n: int, levels: Sequence[int]) -> list[ProposalRequest]:
        """``n`` proposals spread over ``levels`` (drawn uniformly), one request per level."""
        if n <= 0:
            return []
        rng = self._rng(gen, "levels")
        counts = np.bincount(rng.integers(0, len(levels), size=n), minlength=len(levels))
        return [
            ProposalRequest(
                n=int(count),
                seed=int(self._rng(gen, f"request:{level}").integers(0, 2**31)),
                level=level,
                domains=self.config.domains,
            )
            for level, count in zip(levels, counts, strict=True)
            if count
        ]

    def _rescore(self) -> None:
        return None

    def _forget(self) -> None:
        return None

    # ---- state --------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Everything needed to go on (task ids and statistics; the task records are in the log)."""
        return {
            "name": self.name,
            "stats": {k: asdict(v) for k, v in self.stats.items()},
            "fresh": list(self.fresh),
            "extra": self._extra(),
        }

    def load(self, state: dict[str, Any], tasks: dict[str, TaskSpec]) -> None:
        """Restore :meth:`state`; ``tasks``: the task records by id (from the game log).

        Raises:
            ValueError: the state is of another curriculum, or names a task not in ``tasks``.
        """
        if state.get("name") != self.name:
            raise ValueError(
                f"the checkpoint holds a {state.get('name')!r} curriculum, not {self.name!r}"
            )
        missing = [t for t in state["stats"] if t not in tasks]
        if missing:
            raise ValueError(
                f"{len(missing)} tasks of the curriculum are not in the log, e.g. {missing[0]}"
            )
        self.stats = {k: TaskStats(**v) for k, v in state["stats"].items()}
        self.tasks = {k: tasks[k] for k in self.stats}
        self.fresh = list(state["fresh"])
        self._load_extra(state.get("extra") or {})

    def _extra(self) -> dict[str, Any]:
        return {}

    def _load_extra(self, extra: dict[str, Any]) -> None:
        return None


class Uniform(Curriculum):
    """Fresh tasks every generation, levels and domains drawn uniformly (domain randomisation)."""

    name = "uniform"

    def _forget(self) -> None:
        # a uniform curriculum never replays: keep only what the next plan needs
        played = [k for k, s in self.stats.items() if s.last_played >= 0 and k not in self.fresh]
        for key in played:
            del self.stats[key]
            self.tasks.pop(key, None)


class PLR(Curriculum):
    """Prioritized Level Replay over accepted tasks (see the module docstring)."""

    name = "plr"

    def __init__(self, config: CurriculumConfig, seed: int):
        super().__init__(config, seed)
        self.score = scorer_named(config.scorer)
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
            picks = self._rng(gen, "replay").choice(
                len(self.buffer), size=replay, replace=False, p=p
            )
            chosen = [self.buffer[i] for i in sorted(int(i) for i in picks)]
        fresh = self.fresh[: self.config.tasks_per_gen - len(chosen)]
        self.fresh = []
        return [self.tasks[t] for t in [*chosen, *fresh]]

    def _rescore(self) -> None:
        for task_id, stats in self.stats.items():
            p = stats.success
            stats.score = 0.0 if p is None else self.score(p)
            if stats.plays and task_id not in self.buffer:
                self.buffer.append(task_id)

    def _forget(self) -> None:
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

    def _extra(self) -> dict[str, Any]:
        return {"buffer": list(self.buffer)}

    def _load_extra(self, extra: dict[str, Any]) -> None:
        self.buffer = list(extra.get("buffer", []))

    def frontier(self) -> float | None:
        """The mean level of the buffer's tasks with the highest scores."""
        top = sorted(self.buffer, key=lambda t: -self.stats[t].score)[:16]
        levels = [lv for t in top if (lv := self.stats[t].level) is not None]
        return float(np.mean(levels)) if levels else None


class ACCEL(PLR):
    """PLR whose fresh slots are partly filled by mutations of high-scoring tasks."""

    name = "accel"

    def plan(self, gen: int) -> GenerationPlan:
        """Fresh proposals for part of the slots, mutations of the best buffer tasks for the rest."""
        slots = self.fresh_slots(gen)
        candidates = sorted(
            (t for t in self.buffer if self.stats[t].score > 0),
            key=lambda t: (-self.stats[t].score, t),
        )
        n_mut = min(len(candidates), round(self.config.mutations * slots))
        rng = self._rng(gen, "mutate")
        mutations = []
        for i, parent in enumerate(candidates[:n_mut]):
            p = self.stats[parent].success or 0.0
            ops = _HARDER if p >= 0.5 else _EASIER
            for j in range(math.ceil(self.config.oversample)):
                op = ops[int(rng.integers(0, len(ops)))]
                mutations.append(Mutation(parent, op, seed=gen * 10_000 + i * 10 + j))
        need = math.ceil((slots - n_mut) * self.config.oversample)
        return GenerationPlan(self._spread(gen, need, self.config.levels), mutations)


class TargetBand(Curriculum):
    """Tasks the World model predicts in a band, around a frontier level that follows the Solver."""

    name = "target-band"

    def __init__(self, config: CurriculumConfig, seed: int):
        super().__init__(config, seed)
        low, high = config.band
        if not 0 <= low < high <= 1:
            raise ValueError(f"band must be two numbers 0 ≤ low < high ≤ 1, not {config.band}")
        levels = sorted(config.levels)
        self.level = min(max(config.start_level, levels[0]), levels[-1])

    def plan(self, gen: int) -> GenerationPlan:
        """Proposals at the frontier and one level above (twice as many: the band keeps a part)."""
        levels = [lv for lv in (self.level, self.level + 1) if lv in self.config.levels] or [
            self.level
        ]
        need = math.ceil(self.config.tasks_per_gen * self.config.oversample * 2)
        return GenerationPlan(self._spread(gen, need, levels))

    def batch(self, gen: int) -> list[TaskSpec]:
        """Fresh tasks closest to the band's middle first; replayed in-band tasks fill up."""
        low, high = self.config.band
        middle = (low + high) / 2

        def distance(task_id: str) -> tuple[float, str]:
            stats = self.stats[task_id]
            p = stats.success if stats.success is not None else stats.predicted
            return (abs((p if p is not None else middle) - middle), task_id)

        fresh = sorted(self.fresh, key=distance)[: self.config.tasks_per_gen]
        self.fresh = []
        room = self.config.tasks_per_gen - len(fresh)
        played = [
            t
            for t, s in self.stats.items()
            if s.last_played >= 0
            and s.success is not None
            and low <= s.success <= high
            and t not in fresh
        ]
        replay = sorted(played, key=distance)[:room]
        return [self.tasks[t] for t in [*fresh, *replay]]

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

    def _forget(self) -> None:
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

    def _extra(self) -> dict[str, Any]:
        return {"level": self.level}

    def _load_extra(self, extra: dict[str, Any]) -> None:
        self.level = int(extra.get("level", self.level))


CURRICULA: dict[str, type[Curriculum]] = {
    "uniform": Uniform,
    "plr": PLR,
    "accel": ACCEL,
    "target-band": TargetBand,
}
"""Curriculum classes by name."""


def make_curriculum(config: CurriculumConfig, seed: int) -> Curriculum:
    """The curriculum ``config.name`` names."""
    return CURRICULA[config.name](config, seed)
