"""What a generation is made of while it runs: its report, its phases' results, its clock.

The loop (:mod:`coevo.run.loop`) fills a :class:`Generation` phase by
phase and makes the game log's rows from it; :class:`GenerationReport` and
:class:`RunSummary` are what a run shows and returns. In self-play the
proposer's rollouts go with the proposals (:meth:`Generation.keep_proposed`,
:meth:`Generation.proposer_rows`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
from coevo.agents.protocols import LearnStats, ProposalRequest
from coevo.arena.gamelog import TrajectoryRow
from coevo.arena.gamelog.figures import informative
from coevo.arena.ids import episode_id
from coevo.arena.outcomes import Episode, Verdict
from coevo.arena.spec import TaskSpec
from coevo.arena.trajectory import Trajectory
from coevo.curricula.base import GenerationPlan, Mutation
from coevo.run.actors.pool import Calls
from coevo.run.driver.failures import RoleCalls, RoleTally
from coevo.run.generation.selfplay import Scored
from coevo.run.handoff.inbox import Ingested
from coevo.run.handoff.transports import Announcement

__all__ = [
    "Clock",
    "Generation",
    "GenerationReport",
    "Proposals",
    "RunSummary",
    "Submitted",
]


@dataclass
class GenerationReport:
    """What one generation did (the ``generations`` row plus display-only figures)."""

    gen: int
    row: dict[str, Any]
    seconds: float
    episodes_per_second: float
    top_rejections: list[tuple[str, int]] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    busy: dict[str, float] = field(default_factory=dict)
    """The share of the generation's wall time each actor spent in its role's calls."""
    tables: Mapping[str, pa.Table] = field(default_factory=dict)
    """The generation's tables as written, each with its ``gen`` column (as :meth:`GameLog.read`
    gives them back), for ``on_generation`` (the trackers, the summary) to measure without
    reading the log; the reports a :class:`RunSummary` keeps are without them."""


@dataclass
class RunSummary:
    """The end of a run: where its log is and what it did."""

    run_dir: str
    generations: int
    reports: list[GenerationReport]
    calls: dict[str, RoleCalls] = field(default_factory=dict)
    """Calls per role in this invocation (see :mod:`coevo.run.driver.failures`)."""
    failing: dict[str, list[int]] = field(default_factory=dict)
    """The generations in which every call of a role failed, by role."""
    halted: str | None = None
    """The role that stopped the run early, every call of it failed in ``run.stop_after_failing`` generations in a row."""
    adapter_unloads_failed: int = 0
    """Unloads of a trainer's old LoRA adapters that failed (a warning each: the server keeps them)."""

    @property
    def never_succeeded(self) -> dict[str, RoleCalls]:
        """The roles that were called and never once returned without failure."""
        return {role: calls for role, calls in self.calls.items() if calls.all_failed}


@dataclass(frozen=True)
class Submitted:
    """A generation's proposals in flight: what the loop's ``_submit`` sent and ``_collect`` gathers and judges."""

    gen: int
    proposals: Calls
    """One ``propose`` call per request of the plan."""
    mutations: Calls | None = None
    """One ``mutate`` call, when the plan mutates."""
    missing: int = 0
    """Mutations whose parent neither the curriculum nor the log holds (counted as failures)."""
    proposer: str = ""
    """Who proposes the fresh ones (the Synthesizer's version)."""


@dataclass
class Proposals:
    """A generation's judged proposals: tasks (distinct, in request order), their verdicts and sources."""

    tasks: list[TaskSpec]
    verdicts: list[Verdict]
    sources: list[str]
    failures: int
    calls: RoleTally = field(default_factory=RoleTally)
    proposer: str = ""  # who proposed the fresh ones (the Synthesizer's version)


@dataclass
class Generation:
    """What one generation did, filled phase by phase: everything its rows are made from."""

    gen: int
    proposals: Proposals
    accepted: list[TaskSpec] = field(default_factory=list)
    predicted: list[float] = field(default_factory=list)
    next_plan: GenerationPlan = field(default_factory=lambda: GenerationPlan([]))
    batch: list[TaskSpec] = field(default_factory=list)
    episodes: list[Episode] = field(default_factory=list)
    evals: list[Episode] = field(default_factory=list)
    suite_evals: dict[str, list[Episode]] = field(default_factory=dict)  # [[eval.suites]], by name
    stats: LearnStats = field(default_factory=lambda: LearnStats(episodes=0))
    version: str = ""
    learnt_from: str | None = None  # the version the learner's step started from; None: no step
    policy: Announcement | None = None  # with a trainer: the policy the rollouts used
    external: Ingested = field(default_factory=Ingested)  # rollouts from the inbox
    scored: Scored = field(default_factory=Scored)  # what the proposals earned (self-play)
    proposed: list[tuple[str, Trajectory]] = field(default_factory=list)  # the proposer's rollouts
    solving: float = 0.0
    failures: int = 0
    calls: RoleTally = field(default_factory=RoleTally)
    dynamic: bool = False  # dynamic sampling: the batch holds the informative groups only
    extra_tasks: int = 0  # tasks its further rounds played beyond the curriculum's batch

    def suite_episodes(self) -> list[Episode]:
        """The further suites' episodes (``[[eval.suites]]``), suite by suite."""
        return [e for played in self.suite_evals.values() for e in played]

    def groups(self) -> dict[str, list[float]]:
        """Each training task (in the order played) → the rewards of its episodes the Solver played."""
        out: dict[str, list[float]] = {t.task_id: [] for t in self.batch}
        for episode in self.episodes:
            if not episode.failure:
                out.setdefault(episode.task_id, []).append(float(episode.reward.value))
        return out

    def learnt_on(self) -> list[Episode]:
        """The training episodes the learner's step (and a trainer's batch) takes: those played; with dynamic sampling, of informative groups only."""
        played = [e for e in self.episodes if not e.failure]
        if not self.dynamic:
            return played
        kept = {task for task, rewards in self.groups().items() if informative(rewards)}
        return [e for e in played if e.task_id in kept]

    def paid_rollouts(self) -> int:
        """The proposer's rollouts of proposals that were paid: the batch's proposer rows."""
        paid = {r.task_id for r in self.scored.rows if r.proposer_reward is not None}
        return sum(task in paid for task, _ in self.proposed)

    def keep_proposed(self, drained: Sequence[tuple[str, Trajectory]]) -> None:
        """Keep the proposer's rollout of each task proposed for the generation (self-play), in the proposals' order.

        The Synthesizer actors' rollouts of other tasks (the eval suite's, proposed
        before generation 0) are left out. A task proposed more than once keeps one
        rollout, the same whichever actor made which: the least by its digest.
        """
        order = {t.task_id: i for i, t in enumerate(self.proposals.tasks)}
        kept: dict[str, tuple[str, Trajectory]] = {}
        for task_id, trajectory in drained:
            if task_id not in order:
                continue
            digest = hashlib.sha256(trajectory.model_dump_json().encode()).hexdigest()
            if task_id not in kept or digest < kept[task_id][0]:
                kept[task_id] = (digest, trajectory)
        self.proposed = [(t, kept[t][1]) for t in sorted(kept, key=order.__getitem__)]

    def proposer_rows(self, seed: int) -> list[TrajectoryRow]:
        """The ``trajectories`` rows (purpose ``propose``) of the proposer's rollouts; ids from ``seed``, the generation and the task."""
        proposals = self.proposals
        accepted = {
            t.task_id: v.accepted for t, v in zip(proposals.tasks, proposals.verdicts, strict=True)
        }
        return [
            TrajectoryRow.proposed(
                episode_id(seed, self.gen, "propose", task, prefix="prop-"),
                task,
                trajectory,
                accepted[task],
            )
            for task, trajectory in self.proposed
        ]


class Clock:
    """Wall time per phase of a generation (for the report and events only: never in the log)."""

    def __init__(self) -> None:
        self.started = self.last = time.perf_counter()
        self.phases: dict[str, float] = {}

    def lap(self, name: str) -> float:
        """End phase ``name`` now; returns its seconds."""
        now = time.perf_counter()
        seconds = now - self.last
        self.phases[name] = round(self.phases.get(name, 0.0) + seconds, 4)
        self.last = now
        return seconds

    def total(self) -> float:
        """Seconds since the generation started."""
        return time.perf_counter() - self.started


def plan_json(plan: GenerationPlan) -> dict[str, Any]:
    """A plan as JSON (the checkpoint keeps the next generation's)."""
    return {
        "requests": [r.model_dump(mode="json") for r in plan.requests],
        "mutations": [asdict(m) for m in plan.mutations],
    }


def plan_of(data: dict[str, Any]) -> GenerationPlan:
    """The plan :func:`plan_json` made."""
    return GenerationPlan(
        [ProposalRequest.model_validate(r) for r in data["requests"]],
        [Mutation(**m) for m in data["mutations"]],
    )
