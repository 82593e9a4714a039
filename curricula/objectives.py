"""Proposer objectives: what a Synthesizer is paid for each task it proposed (self-play's reward).

After each generation the arena scores every proposal with the objective the
experiment's ``[proposer]`` table names, from the Solver's observed success
``p̂`` on it (the mean of its training rewards that generation):

=================== ======================== ==========================================
objective           reward of an accepted,    paid for
                    played task
=================== ======================== ==========================================
``learnability``    ``4 p̂ (1 − p̂)``          tasks at the Solver's frontier: ``p(1−p)``,
                                             the variance of a binary reward, scaled
                                             to 1 at ½ (verifiers' proposer–solver)
``r-zero``          ``1 − 2 |p̂ − ½|``        R-Zero's uncertainty reward
``absolute-zero``   ``1 − p̂`` if 0 < p̂ < 1   Absolute Zero: the harder the better, as
                    else 0                   long as the Solver sometimes succeeds
=================== ======================== ==========================================

The formulas are the replay scorers of :mod:`coevo.curricula.scorers` (one
owner). Around the objective:

* a **rejected** task earns ``−reject_penalty``: a proposer is not paid for
  tasks the Judge throws out;
* a task accepted but not played this generation (the curriculum did not
  pick it) earns nothing either way: nothing was observed, so its reward is
  None (null in the ``proposals`` table) and a learner is not given it;
* ``novelty × novelty_weight`` is added to an accepted task's reward (the
  novelty archive's distance to the tasks proposed before it,
  :mod:`coevo.arena.novelty`): R-Zero's repetition penalty and OMNI-EPIC's
  interestingness, as one bonus;
* **reward hacking guard**: a task sits at ``p̂ ≈ ½`` also when it is flaky or
  ambiguous, which every objective above pays best. So a task the Judge
  found nondeterministic or ambiguous earns ``−(reject_penalty +
  flaky_penalty)``, and an accepted task on which two Solver attempts that
  made exactly the same calls (the same states) earned different rewards
  earns its objective less ``flaky_penalty``. Both are counted in the
  ``proposals`` table's ``flaky`` column and the run's summary.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Final, Literal

from coevo.agents.protocols import ProposalFeedback
from coevo.arena.outcomes import Episode, Verdict
from coevo.arena.settings import StrictNumbers
from coevo.arena.spec import TaskSpec
from coevo.curricula.scorers import SCORERS
from pydantic import ConfigDict, Field

__all__ = [
    "FLAKY_CHECKS",
    "OBJECTIVES",
    "ProposerConfig",
    "disagreement",
    "proposal_feedback",
    "proposer_reward",
]

OBJECTIVES: Final = ("learnability", "r-zero", "absolute-zero")
"""The proposer objectives by the name ``[proposer] objective`` takes."""

FLAKY_CHECKS: Final = ("determinism", "ambiguity")
"""The Judge's checks whose failure marks a task flaky (not merely rejected)."""


class ProposerConfig(StrictNumbers):
    """``[proposer]``: what a Synthesizer is paid for its proposals (read by a Synthesizer that learns).

    Attributes:
        objective: ``learnability`` (default), ``r-zero`` or ``absolute-zero``.
        reject_penalty: what a rejected proposal costs (its reward is minus this).
        flaky_penalty: what a flaky or ambiguous proposal costs on top (see the module).
        novelty_weight: the weight of the novelty bonus (0: none).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    objective: Literal["learnability", "r-zero", "absolute-zero"] = "learnability"
    reject_penalty: float = Field(default=0.5, ge=0.0, le=10.0)
    flaky_penalty: float = Field(default=1.0, ge=0.0, le=10.0)
    novelty_weight: float = Field(default=0.0, ge=0.0, le=10.0)


def proposer_reward(
    config: ProposerConfig,
    *,
    accepted: bool,
    p: float | None,
    novelty: float = 0.0,
    flaky: bool = False,
) -> float:
    """The reward of one proposal (see the module for the rule).

    Args:
        config: the ``[proposer]`` table.
        accepted: whether the Judge accepted it.
        p: the Solver's observed success on it (None: not played, scored 0).
        novelty: its novelty in [0, 1].
        flaky: whether it was found flaky or ambiguous.
    """
    if not accepted:
        return -config.reject_penalty - (config.flaky_penalty if flaky else 0.0)
    paid = SCORERS[config.objective](p) if p is not None else 0.0
    paid += config.novelty_weight * novelty
    return paid - (config.flaky_penalty if flaky else 0.0)


def _calls_key(episode: Episode) -> str:
    return json.dumps([[c.tool, c.arguments] for c in episode.calls], sort_keys=True, default=str)


def disagreement(episodes: Sequence[Episode]) -> str | None:
    """Why the episodes of one task say its reward is flaky, or None.

    Attempts that made exactly the same calls went through the same states,
    so a sound verifier gives them the same reward; if it did not, the
    reward depends on something other than what the Solver did.
    """
    by_calls: dict[str, set[int]] = defaultdict(set)
    for episode in episodes:
        by_calls[_calls_key(episode)].add(int(episode.reward.value))
    split = sum(len(rewards) > 1 for rewards in by_calls.values())
    if not split:
        return None
    return (
        f"attempts with the same calls earned different rewards ({split} of "
        f"{len(by_calls)} distinct call sequences)"
    )


def proposal_feedback(
    config: ProposerConfig,
    gen: int,
    tasks: Sequence[TaskSpec],
    verdicts: Sequence[Verdict],
    episodes: Sequence[Episode],
    *,
    novelties: Sequence[float],
) -> list[ProposalFeedback]:
    """The feedback of every proposal of generation ``gen``, in order.

    Args:
        config: the ``[proposer]`` table.
        gen: the generation.
        tasks: the proposed tasks (as judged).
        verdicts: their verdicts, in order.
        episodes: the generation's training episodes the Solver played (failures left out).
        novelties: each task's novelty, in order.
    """
    played: dict[str, list[Episode]] = defaultdict(list)
    for episode in episodes:
        played[episode.task_id].append(episode)
    out = []
    for task, verdict, novelty in zip(tasks, verdicts, novelties, strict=True):
        mine = played.get(task.task_id, [])
        outcomes = [int(e.reward.value) for e in mine]
        p_hat = sum(outcomes) / len(outcomes) if outcomes else None
        failed = sorted(verdict.failed)
        judged_flaky = [name for name in FLAKY_CHECKS if name in verdict.failed]
        flaky = (
            f"the Judge's {' and '.join(judged_flaky)} check failed"
            if judged_flaky
            else disagreement(mine)
        )
        paid = not verdict.accepted or p_hat is not None
        out.append(
            ProposalFeedback(
                task_id=task.task_id,
                gen=gen,
                accepted=verdict.accepted,
                failed=failed,
                outcomes=outcomes,
                p_hat=p_hat,
                flaky=flaky,
                novelty=float(novelty),
                reward=proposer_reward(
                    config,
                    accepted=verdict.accepted,
                    p=p_hat,
                    novelty=float(novelty),
                    flaky=flaky is not None,
                )
                if paid
                else None,
                objective=config.objective,
                features={k: float(v) for k, v in (task.features or {}).items()},
                provenance=dict(task.provenance or {}),
            )
        )
    return out
