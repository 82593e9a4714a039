"""``llm-synth`` (and ``claude-synth``): a model invents tool-use worlds and tasks, stage by stage, with a reference-blind verifier.

Each stage is one call with structured output (a forced tool
whose ``input_schema`` is the stage's pydantic model):

1. **scenario**: a realistic professional domain and a user's need;
2. **world**: schema, seed rows and tools (named, parameterised SQL), built
   and validated by the arena (a world that does not build is sent back
   with the exact errors);
3. **task**: the instruction and the reference solution;
4. **verifier**: in a fresh context that sees the instruction, the schema
   and a summary of the initial state, *never the reference solution*.

The assembled ``coevo.task/1`` record then goes through the Judge's
mechanical checks; a failing check is fed back to the stage that owns it
(to the verifier without anything of the reference solution: the kind of
problem and its own check names only) (the verifier for ``unsolved``/``partial``/``noop`` and
for an ``oracle`` whose end state the checks or the frame refused; the task
for a solution that does not run or is not ``grounded``), up to ``retries``
times. Every attempt
and why it failed is kept in :attr:`LLMSynthesizer.attempts` (the arena
logs it as events).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, ClassVar

from coevo.agents.llm.role import LLMRole
from coevo.agents.llm.turns import LLMCallError
from coevo.agents.protocols import ProposalRequest
from coevo.arena.errors import SpecError
from coevo.arena.judge import WorldCache, assess_task
from coevo.arena.spec import TaskSpec, WorldSpec
from pydantic import BaseModel, Field, ValidationError

__all__ = ["LLMSynthesizer", "Scenario", "TaskDraft", "VerifierDraft", "WorldDraft"]

SYSTEM = (
    "You design realistic, executable tool-use tasks for training AI agents: SQLite-backed worlds "
    "with hidden state that an agent must discover through tools. Follow the formats exactly."
)


class Scenario(BaseModel):
    """A professional setting and what a user needs done in it."""

    domain: str = Field(description="a short lower-case domain name, e.g. 'dental clinic'")
    setting: str = Field(description="who works here and with what records")
    need: str = Field(description="what a user asks the agent to do")


class ToolDraft(BaseModel):
    """A tool: named, parameterised SQL (``:name`` parameters declared in ``parameters``)."""

    name: str
    description: str
    parameters: dict[str, Any]
    sql: list[str]
    effect: str = Field(description="read or write")


class TableDraft(BaseModel):
    """Seed rows of one table."""

    columns: list[str]
    rows: list[list[Any]]


class WorldDraft(BaseModel):
    """A world: CREATE statements, seed rows per table, and tools."""

    schema_sql: list[str] = Field(description="CREATE TABLE/INDEX/VIEW/TRIGGER statements")
    data: dict[str, TableDraft]
    tools: list[ToolDraft]


class Call(BaseModel):
    """One tool call of a reference solution."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class TaskDraft(BaseModel):
    """The instruction and its reference solution (ending with ``submit``)."""

    instruction: str
    solution: list[Call]


class Check(BaseModel):
    """One verifier check: a read-only SELECT returning one non-zero number when the goal holds."""

    name: str
    sql: str


class VerifierDraft(BaseModel):
    """Checks over the final state (``main``) and the initial state (``initial``), and the frame."""

    checks: list[Check]
    frame: dict[str, Any]


_VERIFIER_CHECKS = frozenset(["unsolved", "noop", "partial", "determinism"])


def _owner(check: str, reason: str) -> str:
    """The stage a failed Judge check is sent back to: the verifier's, or the task's."""
    if check in _VERIFIER_CHECKS:
        return "verifier"
    text = reason.lower()
    if check == "oracle" and ("check" in text or "frame" in text):
        return "verifier"  # the solution ran; the verifier did not accept its end state
    if check == "valid" and ("verifier" in text or "check" in text or "frame" in text):
        return "verifier"
    return "task"


_BLIND = {
    "unsolved": "your state checks already pass on the initial state: they must fail until the work is done",
    "noop": "submitting at once, with no work done, passes your checks: they must require the change",
    "partial": "doing only part of the work, stopping before the last change, already passes your checks",
    "determinism": "your checks gave different results on the same state: use only deterministic SQL",
    "oracle": "a correct execution of the instruction fails your checks or changes rows your frame does not allow",
}


def _blind(check: str, reason: str) -> str:
    """Feedback for the verifier stage that says what is wrong without anything of the reference solution.

    The Judge's own reasons name the solution's steps and rows; the verifier
    must stay reference-blind, so only the problem's kind and the verifier's
    own check names (from ``reason``, which quotes them) go back.
    """
    text = _BLIND.get(check)
    if text is None:
        return f"{check}: {reason}"  # validation of the verifier itself: its own SQL, nothing else
    named = sorted({name for name in re.findall(r"check '([^']+)'", reason)})
    return f"{check}: {text}" + (f" (checks: {', '.join(named)})" if named else "")


def _state_summary(world: WorldSpec) -> str:
    lines = []
    for table, data in world.data.items():
        rows = list(data.rows)
        lines.append(
            f"{table} ({len(rows)} rows; columns {', '.join(data.columns)}): first rows {json.dumps(rows[:3], default=str)}"
        )
    return "\n".join(lines)


class LLMSynthesizer(LLMRole):
    """A model as the Synthesizer (see the module docstring).

    Args:
        model: the model (or adapter) name (see :class:`~coevo.agents.llm.role.LLMRole`
            for the settings every LLM role takes).
        retries: attempts per stage after the first, with the errors fed back.
        now: the worlds' fixed clock.
        **client: the settings every LLM role takes (``max_tokens`` defaults to 8192: worlds are long).
    """

    kind = "synthesizer"
    name: ClassVar[str] = "llm-synth"
    default_max_tokens: ClassVar[int] = 8192

    def __init__(
        self,
        model: str | None = None,
        *,
        retries: int = 2,
        now: str = "2026-11-29T12:00:00",
        **client: Any,
    ):
        super().__init__(model, **client)
        self.retries = retries
        self.now = now
        self.attempts: list[dict[str, Any]] = []

    def drain_attempts(self) -> list[dict[str, Any]]:
        """Every stage attempt since the last call (proposal, stage, attempt, error); then forgotten."""
        out = list(self.attempts)
        self.attempts.clear()
        return out

    def propose(self, request: ProposalRequest) -> list[TaskSpec]:
        """Up to ``request.n`` tasks that passed the mechanical checks (every attempt is added to :attr:`attempts`).

        Raises:
            LLMCallError: no task was made and a proposal ended on a failed call (the
                API unreachable, an error status, a malformed answer): the request failed,
                it did not merely come back empty. The last call error is the message.
        """
        made = self.client.run(self._all(request))
        tasks = [t for t in made if isinstance(t, TaskSpec)]
        failed = [e for e in made if isinstance(e, LLMCallError)]
        if failed and not tasks:
            raise LLMCallError(
                f"the calls of {len(failed)} of {request.n} proposals failed, the last: {failed[-1]}"
            )
        return tasks

    async def _all(self, request: ProposalRequest) -> list[TaskSpec | LLMCallError | None]:
        return list(await asyncio.gather(*(self._one(request, i) for i in range(request.n))))

    async def _stage(
        self, model: type[BaseModel], stage: str, label: str, prompt: str, feedback: list[str]
    ) -> Any:
        messages = [{"role": "user", "content": prompt}]
        if feedback:
            messages[0]["content"] += "\n\nYour previous answer was rejected:\n- " + "\n- ".join(
                feedback
            )
        return await self.client.structured(
            model, role="synthesizer", task=label, system=SYSTEM, messages=messages, name=stage
        )

    def _record(self, label: str, stage: str, attempt: int, error: str | None) -> None:
        self.attempts.append(
            {"proposal": label, "stage": stage, "attempt": attempt, "error": error}
        )

    async def _one(self, request: ProposalRequest, index: int) -> TaskSpec | LLMCallError | None:
        """The proposal's task; None when the Judge's checks still failed; the error when a call failed."""
        label = f"{request.seed}:{index}"
        level = f" at difficulty level {request.level} of 5" if request.level else ""
        try:
            scenario = await self._stage(
                Scenario,
                "scenario",
                label,
                f"Invent a realistic professional scenario for a tool-use task{level}"
                + (
                    f" in one of these domains: {', '.join(request.domains)}"
                    if request.domains
                    else ""
                )
                + f". Variation seed: {label}.",
                [],
            )
            self._record(label, "scenario", 0, None)
            world = await self._world(scenario, label)
            if world is None:
                return None
            feedback: list[str] = []
            verifier_feedback: list[str] = []
            draft: TaskDraft | None = None
            for attempt in range(self.retries + 1):
                if draft is None or feedback:
                    draft = await self._stage(
                        TaskDraft,
                        "task",
                        label,
                        "World tools:\n"
                        + json.dumps([t.model_dump(mode="json") for t in world.tools], default=str)
                        + f"\n\nState:\n{_state_summary(world)}\n\nNeed: {scenario.need}\n"
                        "Write an instruction that states what a user knows (names, emails, codes; never "
                        "internal ids) and its reference solution: tool calls ending with submit.",
                        feedback,
                    )
                # the verifier's context: instruction, schema, state summary — never the solution
                verifier = await self._stage(
                    VerifierDraft,
                    "verifier",
                    label,
                    f"Instruction: {draft.instruction}\n\nSchema:\n"
                    + "\n".join(world.schema_sql)
                    + f"\n\nInitial state:\n{_state_summary(world)}\n\n"
                    "Write checks (read-only SELECTs over the final state `main`, the initial state "
                    "`initial` and :answer) that hold exactly when the instruction was carried out, "
                    "and the frame (what may change).",
                    verifier_feedback,
                )
                task, problems = self._assemble(world, draft, verifier)
                if not problems:
                    self._record(label, "judge", attempt, None)
                    return task
                self._record(
                    label, "judge", attempt, "; ".join(f"{k}: {v}" for k, v in problems.items())
                )
                feedback = [f"{k}: {v}" for k, v in problems.items() if _owner(k, v) == "task"]
                verifier_feedback = [
                    _blind(k, v) for k, v in problems.items() if _owner(k, v) == "verifier"
                ]
            return None
        except LLMCallError as exc:
            self._record(label, "call", 0, str(exc))
            return exc

    async def _world(self, scenario: Scenario, label: str) -> WorldSpec | None:
        feedback: list[str] = []
        for attempt in range(self.retries + 1):
            draft = await self._stage(
                WorldDraft,
                "world",
                label,
                f"Scenario: {scenario.model_dump_json()}\nDesign the SQLite world: a normalised schema with "
                "foreign keys, 20-200 seed rows, and 6-15 tools (look-ups by what a user knows, lists, "
                "updates with their preconditions in SQL).",
                feedback,
            )
            try:
                spec = WorldSpec.model_validate(
                    {
                        "format": "coevo.world/1",
                        "domain": scenario.domain,
                        "now": self.now,
                        "schema": draft.schema_sql,
                        "data": {t: d.model_dump() for t, d in draft.data.items()},
                        "tools": [t.model_dump() for t in draft.tools],
                    }
                )
                WorldCache().world(spec)  # builds and validates every statement
            except (ValidationError, SpecError) as exc:
                why = exc.summary() if isinstance(exc, SpecError) else str(exc)
                self._record(label, "world", attempt, why)
                feedback = [why]
                continue
            self._record(label, "world", attempt, None)
            return spec
        return None

    def _assemble(
        self, world: WorldSpec, draft: TaskDraft, verifier: VerifierDraft
    ) -> tuple[TaskSpec | None, dict[str, str]]:
        try:
            task = TaskSpec.model_validate(
                {
                    "format": "coevo.task/1",
                    "world": world.model_dump(mode="json", by_alias=True, exclude_none=True),
                    "instruction": draft.instruction,
                    "verifier": verifier.model_dump(),
                    "solution": [c.model_dump() for c in draft.solution],
                    "provenance": {"synthesizer": self.name, "model": self.version},
                }
            )
        except ValidationError as exc:
            return None, {"valid": str(exc)}
        verdict = assess_task(task, WorldCache())
        problems = {
            name: check.reason for name, check in verdict.checks.items() if check.passed is False
        }
        return (task if verdict.accepted else None), problems
