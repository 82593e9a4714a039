"""``llm-judge`` (and ``claude-judge``): the mechanical checks, then a model proves solvability and reviews the instruction.

For each task that passes the mechanical checks:

* **solvable**: the model attempts it ``k`` times as a Solver would
  (:func:`~coevo.agents.llm.solver.play`), never seeing the solution or the
  verifier; it passes when one
  attempt earns 1, and stays ``null`` (unproven, with how many attempts were
  made) otherwise;
* **ambiguity**: a separate call, in a fresh context that sees the
  instruction and the tools (never the solution or the verifier), asks
  whether the instruction has two readings that lead to different correct
  end states; a task with two such readings is rejected, the readings in the
  reason.

A task whose review call failed after the retries, or every one of whose
``k`` attempts ended on a failed call, was not judged: its verdict is a
failed one (rejected, ``the judge failed: ...``), which the arena counts as
a role failure; the batch goes on. An attempt that ran and earned 0 is not
a failure: it leaves ``solvable`` unproven (``null``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any, ClassVar

from coevo.agents.judges import MechanicalJudge
from coevo.agents.llm.role import LLMRole
from coevo.agents.llm.solver import WorldPool, play
from coevo.agents.llm.turns import LLMCallError
from coevo.arena.outcomes import FAILED_PREFIX, CheckResult, Verdict, failed_verdict
from coevo.arena.spec import TaskSpec, WorldSpec
from pydantic import BaseModel, Field

__all__ = ["AmbiguityReview", "LLMJudge"]

REVIEW_SYSTEM = (
    "You review task instructions for an agent that works through the tools listed. "
    "Decide whether the instruction can be read in two ways that lead to different correct end "
    "states of the system (or different correct answers). Do not solve the task. Minor wording "
    "issues that any careful reader resolves the same way are not ambiguities."
)


class AmbiguityReview(BaseModel):
    """The reviewer's verdict on one instruction."""

    ambiguous: bool = Field(description="true if two readings lead to different correct end states")
    readings: list[str] = Field(
        default_factory=list, description="the two readings, when ambiguous"
    )
    reason: str = Field(description="one sentence saying why")


class LLMJudge(LLMRole):
    """Mechanical checks, then solvability by ``k`` attempts of the model and an ambiguity review.

    Args:
        k: attempts per task for solvability.
        model: the model (or adapter) name (see :class:`~coevo.agents.llm.role.LLMRole`
            for the settings every LLM role takes).
        max_steps: tool calls per attempt.
        **client: the settings every LLM role takes.
    """

    kind = "judge"
    name: ClassVar[str] = "llm-judge"

    def __init__(self, k: int = 2, model: str | None = None, *, max_steps: int = 16, **client: Any):
        super().__init__(model, **client)
        self.k = k
        self.max_steps = max_steps
        self.mechanical = MechanicalJudge()
        self.worlds = WorldPool()

    def assess(self, tasks: Sequence[TaskSpec]) -> list[Verdict]:
        """One verdict per task, in order."""
        verdicts = self.mechanical.assess(tasks)
        ready = [i for i, v in enumerate(verdicts) if v.accepted]
        if not ready:
            return verdicts
        batch = [tasks[i] for i in ready for _ in range(self.k)]
        episodes, reviews = self.client.run(self._both(batch, [tasks[i] for i in ready]))
        out = list(verdicts)
        for n, i in enumerate(ready):
            mine = episodes[n * self.k : (n + 1) * self.k]
            solved = sum(e.reward.value for e in mine)
            failures = [e.failure for e in mine if e.failure]
            review = reviews[n]
            if isinstance(review, str) or len(failures) == self.k:
                why = review if isinstance(review, str) else failures[-1][len(FAILED_PREFIX) :]
                out[i] = failed_verdict(tasks[i], f"its calls failed: {why}")
                continue
            if solved:
                solvable = CheckResult(
                    passed=True, reason=f"the model earned 1 in {solved} of {self.k} attempts"
                )
            elif failures:
                solvable = CheckResult(passed=None, reason=f"unproven: {failures[0]}")
            else:
                solvable = CheckResult(
                    passed=None, reason=f"unproven: the model earned 0 in {self.k} attempts"
                )
            if review.ambiguous:
                readings = " | ".join(review.readings[:2])
                ambiguity = CheckResult(
                    passed=False, reason=f"ambiguous: {review.reason} ({readings})"
                )
            else:
                ambiguity = CheckResult(passed=True, reason=review.reason)
            checks = {**out[i].checks, "solvable": solvable, "ambiguity": ambiguity}
            out[i] = out[i].model_copy(
                update={"checks": checks, "accepted": ambiguity.passed is not False}
            )
        return out

    async def _both(
        self, batch: list[TaskSpec], tasks: list[TaskSpec]
    ) -> tuple[list[Any], list[AmbiguityReview | str]]:
        """The attempts and the reviews, concurrently, in one event loop."""
        attempts = asyncio.gather(
            *(
                play(
                    self.client,
                    t,
                    seed=0,
                    version=self.version,
                    max_steps=self.max_steps,
                    worlds=self.worlds,
                    index=i,
                )
                for i, t in enumerate(batch)
            )
        )
        episodes, reviews = await asyncio.gather(attempts, self._reviews(tasks))
        return list(episodes), reviews

    async def _reviews(self, tasks: list[TaskSpec]) -> list[AmbiguityReview | str]:
        async def one(task: TaskSpec) -> AmbiguityReview | str:
            world = task.world if isinstance(task.world, WorldSpec) else None
            tools = [
                {"name": t.name, "description": t.description, "parameters": t.parameters}
                for t in (world.tools if world else [])
            ]
            prompt = f"Instruction:\n{task.instruction}\n\nTools the agent has:\n{json.dumps(tools, indent=1)}"
            try:
                return await self.client.structured(
                    AmbiguityReview,
                    role="judge",
                    task=task.task_id,
                    system=REVIEW_SYSTEM,
                    messages=[{"role": "user", "content": prompt}],
                    name="review",
                )
            except LLMCallError as exc:
                return str(exc)

        return list(await asyncio.gather(*(one(t) for t in tasks)))
