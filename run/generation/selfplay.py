"""The driver's part of self-play: what each proposal earned, the novelty archive, and the run's watch.

After a generation's rollouts, :class:`ProposalScoring` scores every task
proposed for it — the Judge's verdict, the Solver's observed success, its
novelty against the archive of earlier proposals — with the experiment's
``[proposer]`` objective (:mod:`coevo.curricula.objectives`). The result is
the generation's ``proposals`` rows and, for a Synthesizer that learns
(:class:`~coevo.agents.protocols.Learns`), the feedback its ``learn`` gets.

:class:`Watch` reads each generation's eval success and pool diversity and
says when the run has stalled (``plateau``: eval flat for ``[watch]
plateau`` evaluations) or its pool is collapsing (``collapse``: diversity
fallen below ``[watch] collapse`` of its best); the loop writes these as
events and counts them in the summary.

The archive is rebuilt from the log on resume and the watch keeps its state
in the checkpoint, so a resumed run scores and watches exactly as an
uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from coevo.agents.protocols import ProposalFeedback
from coevo.arena.difficulty import task_level
from coevo.arena.gamelog import ProposalRow
from coevo.arena.novelty import NoveltyArchive, diversity
from coevo.arena.outcomes import Episode, Verdict
from coevo.arena.settings import StrictNumbers
from coevo.arena.spec import TaskSpec, WorldSpec
from coevo.curricula.objectives import ProposerConfig, proposal_feedback
from pydantic import ConfigDict, Field

__all__ = ["ProposalScoring", "Scored", "Watch", "WatchConfig"]


@dataclass
class Scored:
    """One generation's proposals, scored.

    Attributes:
        rows: the ``proposals`` rows, one per proposed task.
        feedback: what the Synthesizer's own (fresh) proposals earned, for ``learn`` (those
            accepted but not played earned nothing and are left out).
        reward: the mean proposer reward of the proposals paid (None: none was).
        diversity: the accepted tasks' diversity (None: fewer than two).
        flaky: proposals whose reward was not trusted.
    """

    rows: list[ProposalRow] = field(default_factory=list)
    feedback: list[ProposalFeedback] = field(default_factory=list)
    reward: float | None = None
    diversity: float | None = None
    flaky: int = 0


def _family(task: TaskSpec) -> str | None:
    plan = (task.provenance or {}).get("plan")
    family = plan.get("family") if isinstance(plan, Mapping) else None
    return family if isinstance(family, str) else None


class ProposalScoring:
    """Scores each generation's proposals and keeps the novelty archive (the driver owns one).

    Args:
        config: the ``[proposer]`` table.
    """

    def __init__(self, config: ProposerConfig):
        self.config = config
        self.archive = NoveltyArchive()

    def score(
        self,
        gen: int,
        tasks: Sequence[TaskSpec],
        verdicts: Sequence[Verdict],
        sources: Sequence[str],
        *,
        proposers: Mapping[str, str],
        predicted: Mapping[str, float],
        episodes: Sequence[Episode],
    ) -> Scored:
        """Score generation ``gen``'s proposals, then add the accepted ones to the archive.

        Args:
            gen: the generation.
            tasks: the proposals as judged (distinct, in request order).
            verdicts: their verdicts, in order.
            sources: ``fresh`` or ``mutation``, in order.
            proposers: who proposed each source (``fresh`` → the Synthesizer's version).
            predicted: the World model's P(success) of the accepted tasks, by id.
            episodes: the generation's training episodes the Solver played.
        """
        novelties = self.archive.novelties(list(tasks)) if tasks else []
        feedback = proposal_feedback(
            self.config, gen, tasks, verdicts, episodes, novelties=novelties
        )
        self.archive.add([t for t, v in zip(tasks, verdicts, strict=True) if v.accepted])
        rows = [
            ProposalRow(
                task_id=f.task_id,
                proposer=proposers.get(source, source),
                accepted=f.accepted,
                p_hat=f.p_hat,
                plays=len(f.outcomes),
                predicted=predicted.get(f.task_id),
                proposer_reward=f.reward,
                novelty=f.novelty,
                flaky=f.flaky,
                objective=f.objective,
                level=task_level(task),
                family=_family(task),
                domain=task.world.domain if isinstance(task.world, WorldSpec) else None,
            )
            for f, task, source in zip(feedback, tasks, sources, strict=True)
        ]
        accepted = [t for t, v in zip(tasks, verdicts, strict=True) if v.accepted]
        paid = [f.reward for f in feedback if f.reward is not None]
        return Scored(
            rows=rows,
            feedback=[
                f
                for f, s in zip(feedback, sources, strict=True)
                if s == "fresh" and f.reward is not None
            ],
            reward=sum(paid) / len(paid) if paid else None,
            diversity=diversity(accepted) if len(accepted) > 1 else None,
            flaky=sum(f.flaky is not None for f in feedback),
        )

    def rebuild(self, accepted: Sequence[TaskSpec]) -> None:
        """The archive again, from every accepted proposal in the order the log holds them.

        The archive is what :meth:`score` added, the oldest evicted first, so
        it is rebuilt from the log rather than kept in every checkpoint (a few
        megabytes each).
        """
        self.archive = NoveltyArchive()
        self.archive.add(accepted)


class WatchConfig(StrictNumbers):
    """``[watch]``: when a run counts as stalled or collapsing (events ``plateau`` and ``collapse``).

    Attributes:
        plateau: evaluations in a row whose eval success stays within ``flat`` of each other.
        flat: the spread (max − min) of eval success that counts as flat.
        collapse: pool diversity below this share of its best (a mean over ``window`` generations).
        window: generations averaged for the diversity watch.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    plateau: int = Field(default=5, ge=2, le=1000)
    flat: float = Field(default=0.05, ge=0.0, le=1.0)
    collapse: float = Field(default=0.6, gt=0.0, lt=1.0)
    window: int = Field(default=3, ge=1, le=1000)


class Watch:
    """Detects a plateau of eval success and a collapse of pool diversity, once per episode of each.

    Args:
        config: the ``[watch]`` table.
    """

    def __init__(self, config: WatchConfig):
        self.config = config
        self.evals: list[tuple[int, float]] = []
        self.diversity: list[float] = []
        self.best = 0.0
        self.flat = False
        self.collapsed = False

    def observe(
        self, gen: int, eval_success: float | None, diversity: float | None
    ) -> list[tuple[str, dict[str, Any]]]:
        """The events generation ``gen`` raises: ``(name, fields)`` (each fires when it starts)."""
        events: list[tuple[str, dict[str, Any]]] = []
        config = self.config
        if eval_success is not None:
            self.evals.append((gen, eval_success))
            recent = self.evals[-config.plateau :]
            values = [v for _, v in recent]
            flat = len(recent) == config.plateau and max(values) - min(values) <= config.flat
            if flat and not self.flat:
                events.append(
                    (
                        "plateau",
                        {
                            "gen": gen,
                            "since": recent[0][0],
                            "eval_success": round(sum(values) / len(values), 4),
                            "evaluations": config.plateau,
                        },
                    )
                )
            self.flat = flat
            del self.evals[: -config.plateau]
        if diversity is not None:
            self.diversity.append(diversity)
            recent_d = self.diversity[-config.window :]
            mean = sum(recent_d) / len(recent_d)
            if len(recent_d) == config.window:
                self.best = max(self.best, mean)
            collapsed = len(recent_d) == config.window and mean < config.collapse * self.best
            if collapsed and not self.collapsed:
                events.append(
                    (
                        "collapse",
                        {
                            "gen": gen,
                            "diversity": round(mean, 4),
                            "best": round(self.best, 4),
                            "share": round(mean / self.best, 4),
                        },
                    )
                )
            self.collapsed = collapsed
            del self.diversity[: -config.window]
        return events

    def state(self) -> dict[str, Any]:
        """What the watch remembers, as JSON."""
        return {
            "evals": [list(e) for e in self.evals],
            "diversity": list(self.diversity),
            "best": self.best,
            "flat": self.flat,
            "collapsed": self.collapsed,
        }

    def load(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state`."""
        self.evals = [(int(g), float(v)) for g, v in state.get("evals", [])]
        self.diversity = [float(v) for v in state.get("diversity", [])]
        self.best = float(state.get("best", 0.0))
        self.flat = bool(state.get("flat", False))
        self.collapsed = bool(state.get("collapsed", False))
