"""What every curriculum is: the four calls the arena makes, the state it keeps, its settings.

The arena drives a curriculum through four calls per generation ``g``::

    curriculum.admit(g, tasks, predicted)  # the accepted tasks, with the World model's P(success)
    plan = curriculum.plan(g + 1)          # proposal requests (and mutations) for the next generation
    tasks = curriculum.batch(g)            # distinct tasks to train on (the arena plays each k times)
    curriculum.observe(g, played, rewards) # the outcomes, to rescore

With ``dynamic_sampling`` on, ``batch`` is the first round, and while too
few of the groups played are informative the arena asks for further rounds,
``curriculum.more(g, n, played)``, before ``observe`` (:mod:`coevo.curricula.dynamic`).

The plan for ``g + 1`` is made before ``g`` is played, so that synthesis and
judging overlap with solving (generation 0's plan is made at the start).
Besides these, :meth:`Curriculum.frontier` is read for the live table and
:meth:`Curriculum.state`/:meth:`Curriculum.load` for checkpoints (JSON). All
randomness comes from seeds derived from the run's (:func:`~coevo.arena.seeding.derive_seed`), so a
curriculum resumed from its state (or rebuilt from the game log by replaying
``admit``/``observe``) makes the same choices.

A curriculum is a subclass of :class:`Curriculum` with a settings class of its
own, a subclass of :class:`CurriculumConfig` (the ``[curriculum]`` table), as
its ``Config`` attribute; the registry (:mod:`coevo.curricula.registry`) finds
it by name. ``uniform.py`` is the template a new curriculum copies.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np
from coevo.agents.protocols import ProposalRequest
from coevo.arena.difficulty import known_levels, task_level
from coevo.arena.seeding import derive_seed
from coevo.arena.settings import StrictNumbers
from coevo.arena.spec import TaskSpec
from pydantic import ConfigDict, Field, field_validator

__all__ = [
    "Curriculum",
    "CurriculumConfig",
    "GenerationPlan",
    "Mutation",
    "TaskStats",
]


class CurriculumConfig(StrictNumbers):
    """The ``[curriculum]`` table of an experiment file: the settings every curriculum takes.

    A curriculum with settings of its own subclasses this; a key the chosen
    curriculum does not take is an error that names the key and the curriculum.

    Attributes:
        name: the curriculum (``coevo roles`` lists them: uniform, plr, accel, target-band, plugins).
        tasks_per_gen: distinct tasks trained on per generation, at most 100,000 (a
            generation plays each ``run.rollouts`` times; real runs take tens to thousands).
        levels: the levels fresh tasks are drawn from (or the range a frontier moves in).
        domains: the domains to draw from (None: every domain the synthesizer has).
        oversample: proposals asked for per task needed (rejections need spares), at most 100.
        window: outcomes per task kept for its success estimate, at most 100,000.
        dynamic_sampling: fill each generation's batch with informative groups (DAPO's
            dynamic sampling, :mod:`coevo.curricula.dynamic`): groups whose rewards are all
            equal are played and logged but not learnt from, and further rounds of tasks
            (:meth:`Curriculum.more`) are played until ``tasks_per_gen`` groups are
            informative or ``sampling_budget`` is spent. Needs ``run.rollouts`` ≥ 2.
        sampling_budget: with ``dynamic_sampling``, at most ``sampling_budget ×
            tasks_per_gen`` training tasks are played per generation; the plan asks for
            proposals for that many.

    Every number has an upper bound far above a real run's (docs/security.md, "Integer
    settings are bounded"): a subclass's settings have one too (a test holds every
    registered curriculum to it).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "uniform"
    tasks_per_gen: int = Field(default=32, ge=1, le=100_000)
    levels: list[int] = Field(default_factory=lambda: [1, 2, 3], min_length=1)
    domains: list[str] | None = None
    oversample: float = Field(default=1.5, ge=1.0, le=100.0)
    window: int = Field(default=16, ge=1, le=100_000)
    dynamic_sampling: bool = False
    sampling_budget: float = Field(default=2.0, ge=1.0, le=100.0)

    _levels_exist = field_validator("levels")(known_levels)


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

    Subclasses override :meth:`plan`, :meth:`batch`, :meth:`frontier` and the
    hooks :meth:`rescore`, :meth:`forget`, :meth:`more`, :meth:`aim`,
    :meth:`extra_state` and :meth:`load_extra_state` as they need;
    :meth:`spread`, :meth:`rng`, :meth:`proposals_for` and :meth:`distance`
    are theirs to use.

    Args:
        config: the ``[curriculum]`` table (an instance of :attr:`Config`).
        seed: the run's seed.
    """

    name: ClassVar[str] = "curriculum"
    """The name it is registered under (checkpoints record it)."""
    Config: ClassVar[type[CurriculumConfig]] = CurriculumConfig
    """Its settings: the ``[curriculum]`` keys it takes."""
    config: CurriculumConfig
    tasks: dict[str, TaskSpec]
    stats: dict[str, TaskStats]
    fresh: list[str]

    def __init__(self, config: CurriculumConfig, seed: int):
        # settings given as another CurriculumConfig (the base, say) are read into this one's
        self.config = (
            config
            if isinstance(config, self.Config)
            else self.Config.model_validate(config.model_dump())
        )
        self.seed = seed
        self.tasks = {}
        self.stats = {}
        self.fresh = []  # admitted, not yet put in a batch

    # ---- the arena's calls --------------------------------------------------------------

    def plan(self, gen: int) -> GenerationPlan:
        """The proposals (and mutations) generation ``gen`` asks for."""
        need = self.proposals_for(self.fresh_slots(gen))
        return GenerationPlan(self.spread(gen, need, self.config.levels))

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

    def more(self, gen: int, n: int, played: Collection[str]) -> list[TaskSpec]:
        """Up to ``n`` further distinct tasks for generation ``gen``, none of ``played`` (dynamic sampling's rounds).

        Called after :meth:`batch` and before :meth:`observe`, when the groups
        played so far left the batch short of informative ones
        (:mod:`coevo.curricula.dynamic`). By default: the tasks the curriculum
        holds (this generation's fresh tasks the batch left, and those it keeps
        for replay), those whose success estimate (:meth:`estimate`) is nearest
        :meth:`aim` first: the ranking ``target-band`` trains by, so a task
        predicted or observed near 0 or 1 comes last. It changes no state: what
        is played is told to :meth:`observe`.
        """
        if n <= 0:
            return []
        candidates = sorted((t for t in self.stats if t not in played), key=self.distance)
        return [self.tasks[t] for t in candidates[:n]]

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
        self.rescore()
        self.forget()

    # ---- shared helpers -----------------------------------------------------------------

    def fresh_slots(self, gen: int) -> int:
        """How many fresh tasks generation ``gen`` needs."""
        return self.config.tasks_per_gen

    def proposals_for(self, slots: int) -> int:
        """Proposals to ask for to fill ``slots`` fresh tasks: ``oversample`` each, times ``sampling_budget`` with dynamic sampling (its rounds need spares)."""
        scale = self.config.sampling_budget if self.config.dynamic_sampling else 1.0
        return math.ceil(slots * self.config.oversample * scale)

    def aim(self) -> float:
        """The success estimate the curriculum trains on first (``target-band``: its band's middle)."""
        return 0.5

    def estimate(self, task_id: str) -> float | None:
        """A task's success estimate: its observed success, else the World model's prediction (None: neither)."""
        stats = self.stats[task_id]
        return stats.success if stats.success is not None else stats.predicted

    def distance(self, task_id: str) -> tuple[float, str]:
        """How far a task's :meth:`estimate` is from :meth:`aim` (no estimate: 0), then its id: the key tasks are ranked by."""
        p = self.estimate(task_id)
        return (abs((p if p is not None else self.aim()) - self.aim()), task_id)

    def frontier(self) -> float | None:
        """The level the curriculum is working at (the mean level of recent batches)."""
        return None

    def rng(self, gen: int, purpose: str) -> np.random.Generator:
        """A generator for one of generation ``gen``'s random choices, named by ``purpose`` (seeded from the run's)."""
        return np.random.default_rng(derive_seed(self.seed, "curriculum", gen, purpose))

    def spread(self, gen: int, n: int, levels: Sequence[int]) -> list[ProposalRequest]:
        """``n`` proposals spread over ``levels`` (drawn uniformly), one request per level."""
        if n <= 0:
            return []
        rng = self.rng(gen, "levels")
        counts = np.bincount(rng.integers(0, len(levels), size=n), minlength=len(levels))
        return [
            ProposalRequest(
                n=int(count),
                seed=derive_seed(self.seed, "request", gen, level),
                level=level,
                domains=self.config.domains,
            )
            for level, count in zip(levels, counts, strict=True)
            if count
        ]

    def rescore(self) -> None:
        """After each ``observe``: update what the curriculum ranks tasks by (nothing by default)."""
        return None

    def forget(self) -> None:
        """After :meth:`rescore`: drop tasks the curriculum will not use again (they stay in the log)."""
        return None

    # ---- state --------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Everything needed to go on (task ids and statistics; the task records are in the log)."""
        return {
            "name": self.name,
            "stats": {k: asdict(v) for k, v in self.stats.items()},
            "fresh": list(self.fresh),
            "extra": self.extra_state(),
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
        self.load_extra_state(state.get("extra") or {})

    def extra_state(self) -> dict[str, Any]:
        """This curriculum's own part of :meth:`state` (JSON): everything else its choices depend on."""
        return {}

    def load_extra_state(self, extra: dict[str, Any]) -> None:
        """Restore what :meth:`extra_state` returned."""
        return None
