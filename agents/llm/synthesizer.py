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
mechanical checks, run as the Judge runs them: in a worker process
(:class:`~coevo.arena.isolation.IsolatedJudge`) under the Judge's budgets
(``limits``) and wall clock per task (``task_seconds``), as each world is
built and validated in stage 2, so no draft's SQL runs unbounded in the
Synthesizer's process; a failing check is fed back to the stage that owns it
(to the verifier without anything of the reference solution: the kind of
problem and its own check names only) (the verifier for ``unsolved``/``partial``/``noop`` and
for an ``oracle`` whose end state the checks or the frame refused; the task
for a solution that does not run or is not ``grounded``), up to ``retries``
times. Every attempt
and why it failed is kept in :attr:`LLMSynthesizer.attempts` (the arena
logs it as events).

With ``self_play = true`` the Synthesizer is the trained policy in the
proposer's role (one served model proposes and solves; ``docs/self-play.md``):

* every call a proposal made (each stage, each retry, each repair) is a turn
  of one :class:`~coevo.arena.trajectory.Trajectory`, its messages the
  calls' conversations one after the other (each fresh context begins with
  its system message), with token ids when the server returns them; the
  trajectory of each task proposed is handed over by
  :meth:`LLMSynthesizer.drain_trajectories` (the arena puts it in the
  training batch as a ``proposer`` row);
* a proposal whose checks still fail after the retries is not dropped: its
  last draft goes to the Judge, whose rejection is the proposer's penalty
  (a draft that is not even a task record is dropped);
* it plays each policy a trainer announces (``set_state``), as the Solver does.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, ClassVar

from coevo.agents.llm.client import LLMClient
from coevo.agents.llm.policy import policy_state, read_policy_state
from coevo.agents.llm.role import LLMRole
from coevo.agents.llm.turns import LLMCallError, Turn
from coevo.agents.protocols import ProposalRequest
from coevo.arena.errors import SpecError
from coevo.arena.isolation import DEFAULT_TASK_SECONDS, IsolatedJudge
from coevo.arena.limits import DEFAULT_LIMITS, Limits
from coevo.arena.spec import TaskSpec, WorldSpec
from coevo.arena.trajectory import Trajectory
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


class _Rollout:
    """The calls one proposal made, as one rollout: what each call's conversation gained, then its answer."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.tools: dict[str, dict[str, Any]] = {}
        self.turns: list[Turn] = []
        self.repairs = 0

    def add(self, gained: list[dict[str, Any]], tools: list[dict[str, Any]], turn: Turn) -> None:
        """One call's turn (the client's ``record`` hook): a fresh context starts with its system message."""
        self.repairs += bool(gained) and gained[0].get("role") != "system"
        self.messages += [*gained, turn.message]
        for tool in tools:
            self.tools.setdefault(tool["function"]["name"], tool)
        self.turns.append(turn)

    def trajectory(self, client: LLMClient, version: str) -> Trajectory:
        """The rollout as a trainer reads it (turns of separate conversations: per-turn token ids)."""
        answered = [t.model for t in self.turns if t.model]
        return Trajectory(
            messages=self.messages,
            tools=list(self.tools.values()),
            sampling=client.recorded_sampling(text_calls=client.protocol == "text"),
            policy_version=version,
            provider=client.provider,
            model=answered[-1] if answered else client.model or "",
            turns=[t.tokens() for t in self.turns],
            bad_steps=self.repairs,
        )


class LLMSynthesizer(LLMRole):
    """A model as the Synthesizer (see the module docstring).

    Args:
        model: the model (or adapter) name (see :class:`~coevo.agents.llm.role.LLMRole`
            for the settings every LLM role takes).
        retries: attempts per stage after the first, with the errors fed back.
        now: the worlds' fixed clock.
        self_play: the Synthesizer is the trained policy as the proposer: it keeps the rollout
            of each task it proposes (:meth:`drain_trajectories`), hands the Judge its drafts
            whose checks still fail, and plays each policy a trainer announces (the module docstring).
        limits: the budgets its drafts' worlds are built and checked under (the Judge's default).
        task_seconds: the wall clock one draft's checks, or one world's build, may take in the
            checking worker before it is killed and the draft rejected, saying so (the Judge's default).
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
        self_play: bool = False,
        limits: Limits = DEFAULT_LIMITS,
        task_seconds: float = DEFAULT_TASK_SECONDS,
        **client: Any,
    ):
        super().__init__(model, **client)
        self.retries = retries
        self.now = now
        self.self_play = self_play
        self.limits = limits
        self.task_seconds = task_seconds
        self._checker: IsolatedJudge | None = None  # started at the first check
        self.attempts: list[dict[str, Any]] = []
        self.trajectories: list[tuple[str, Trajectory]] = []

    def _judge(self) -> IsolatedJudge:
        """The worker process its drafts are built and checked in, as the Judge checks them."""
        if self._checker is None:
            self._checker = IsolatedJudge(self.limits, seconds=self.task_seconds)
        return self._checker

    def drain_attempts(self) -> list[dict[str, Any]]:
        """Every stage attempt since the last call (proposal, stage, attempt, error); then forgotten."""
        out = list(self.attempts)
        self.attempts.clear()
        return out

    def drain_trajectories(self) -> list[tuple[str, Trajectory]]:
        """``(task id, rollout)`` of each task proposed since the last call, in proposal order; then forgotten.

        Only with ``self_play``: otherwise the Synthesizer keeps no rollouts (it is not the trained policy).
        """
        out = list(self.trajectories)
        self.trajectories.clear()
        return out

    def get_state(self) -> bytes:
        """The policy it plays: the model's name and how its rollouts are signed (an LLM policy state)."""
        return policy_state(self.client.model or "", self.version)

    def set_state(self, state: bytes) -> None:
        """Play the policy ``state`` names from the next proposal on, with ``self_play`` (a trainer's new version).

        Without ``self_play`` the Synthesizer is not the trained policy: the state is
        checked, and its own model stays.

        Raises:
            StateError: not an LLM policy state.
        """
        model, version = read_policy_state(state)
        if not self.self_play:
            return
        if model:
            self.client.model = model
        self.version = version

    def propose(self, request: ProposalRequest) -> list[TaskSpec]:
        """Up to ``request.n`` tasks that passed the mechanical checks (every attempt is added to :attr:`attempts`).

        Raises:
            LLMCallError: no task was made and a proposal ended on a failed call (the
                API unreachable, an error status, a malformed answer): the request failed,
                it did not merely come back empty. The last call error is the message.
        """
        made = self.client.run(self._all(request))
        tasks = [t for t, _ in made if isinstance(t, TaskSpec)]
        if self.self_play:
            self.trajectories += [
                (t.task_id, rollout.trajectory(self.client, self.version))
                for t, rollout in made
                if isinstance(t, TaskSpec)
            ]
        failed = [e for e, _ in made if isinstance(e, LLMCallError)]
        if failed and not tasks:
            raise LLMCallError(
                f"the calls of {len(failed)} of {request.n} proposals failed, the last: {failed[-1]}"
            )
        return tasks

    async def _all(
        self, request: ProposalRequest
    ) -> list[tuple[TaskSpec | LLMCallError | None, _Rollout]]:
        return list(await asyncio.gather(*(self._one(request, i) for i in range(request.n))))

    async def _stage(
        self,
        model: type[BaseModel],
        stage: str,
        label: str,
        prompt: str,
        feedback: list[str],
        rollout: _Rollout,
    ) -> Any:
        messages = [{"role": "user", "content": prompt}]
        if feedback:
            messages[0]["content"] += "\n\nYour previous answer was rejected:\n- " + "\n- ".join(
                feedback
            )
        return await self.client.structured(
            model,
            role="synthesizer",
            task=label,
            system=SYSTEM,
            messages=messages,
            name=stage,
            record=rollout.add if self.self_play else None,
        )

    def _record(self, label: str, stage: str, attempt: int, error: str | None) -> None:
        self.attempts.append(
            {"proposal": label, "stage": stage, "attempt": attempt, "error": error}
        )

    async def _one(
        self, request: ProposalRequest, index: int
    ) -> tuple[TaskSpec | LLMCallError | None, _Rollout]:
        """The proposal's task (None when the Judge's checks still failed; the error when a call failed) and its rollout.

        With ``self_play`` a task whose checks still fail is returned all the same:
        the Judge rejects it, and the rejection is the proposer's penalty.
        """
        label = f"{request.seed}:{index}"
        level = f" at difficulty level {request.level} of 5" if request.level else ""
        rollout = _Rollout()
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
                rollout,
            )
            self._record(label, "scenario", 0, None)
            world, built = await self._world(scenario, label, rollout)
            if world is None:
                return None, rollout
            feedback: list[str] = []
            verifier_feedback: list[str] = []
            draft: TaskDraft | None = None
            task: TaskSpec | None = None
            # a world that does not build fails every check: feedback on the task would not help
            for attempt in range(self.retries + 1 if built else 1):
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
                        rollout,
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
                    rollout,
                )
                task, problems = self._assemble(world, draft, verifier)
                if not problems:
                    self._record(label, "judge", attempt, None)
                    return task, rollout
                self._record(
                    label, "judge", attempt, "; ".join(f"{k}: {v}" for k, v in problems.items())
                )
                feedback = [f"{k}: {v}" for k, v in problems.items() if _owner(k, v) == "task"]
                verifier_feedback = [
                    _blind(k, v) for k, v in problems.items() if _owner(k, v) == "verifier"
                ]
            # self-play: the last draft goes to the Judge, whose rejection is the proposer's penalty
            return (task if self.self_play else None), rollout
        except LLMCallError as exc:
            self._record(label, "call", 0, str(exc))
            return exc, rollout

    async def _world(
        self, scenario: Scenario, label: str, rollout: _Rollout
    ) -> tuple[WorldSpec | None, bool]:
        """The world and whether it built; with ``self_play``, the last one that is a world record even if it does not build."""
        feedback: list[str] = []
        last: WorldSpec | None = None
        for attempt in range(self.retries + 1):
            draft = await self._stage(
                WorldDraft,
                "world",
                label,
                f"Scenario: {scenario.model_dump_json()}\nDesign the SQLite world: a normalised schema with "
                "foreign keys, 20-200 seed rows, and 6-15 tools (look-ups by what a user knows, lists, "
                "updates with their preconditions in SQL).",
                feedback,
                rollout,
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
            except (ValidationError, SpecError) as exc:
                why = exc.summary() if isinstance(exc, SpecError) else str(exc)
            else:
                last = spec
                built = self._judge().check_world(spec)  # every statement, in the worker
                why = None if built.passed else built.reason
            if why is not None:
                self._record(label, "world", attempt, why)
                feedback = [why]
                continue
            self._record(label, "world", attempt, None)
            return spec, True
        return (last if self.self_play else None), False

    def _assemble(
        self, world: WorldSpec, draft: TaskDraft, verifier: VerifierDraft
    ) -> tuple[TaskSpec | None, dict[str, str]]:
        """The task (None when it is not a task record) and the mechanical checks it failed."""
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
        (verdict,) = self._judge().assess([task])
        problems = {
            name: check.reason for name, check in verdict.checks.items() if check.passed is False
        }
        if not verdict.accepted and not problems:
            problems["judge"] = "the mechanical checks did not accept it"
        return task, problems
