"""What comes out of running a world: observations, rewards, episodes and verdicts.

:class:`Observation` is built on every step, so it is a frozen, slotted
dataclass (cheap to make); pydantic validates and serialises it inside an
:class:`Episode`. The rest are frozen pydantic models.

JSON encoding: a BLOB value in rows is written ``{"$base64": "..."}``, as in
seed data.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Annotated, Any, Literal

from coevo.arena.spec import TaskSpec, ToolCall, WorldSpec
from coevo.arena.trajectory import Trajectory
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer

__all__ = [
    "FAILED_PREFIX",
    "JUDGE_FAILED_PREFIX",
    "CheckOutcome",
    "CheckResult",
    "Episode",
    "FrameViolation",
    "Observation",
    "Reward",
    "Verdict",
    "decode_value",
    "encode_value",
    "failed_episode",
    "failed_verdict",
]


def encode_value(value: Any) -> Any:
    """A SQLite value as JSON: bytes become ``{"$base64": ...}``, everything else is kept."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$base64": base64.b64encode(bytes(value)).decode("ascii")}
    return value


def decode_value(value: Any) -> Any:
    """The inverse of :func:`encode_value`."""
    if isinstance(value, dict) and set(value) == {"$base64"}:
        return base64.b64decode(value["$base64"])
    return value


def _encode_rows(rows: Sequence[Sequence[Any]] | None) -> list[list[Any]] | None:
    if rows is None:
        return None
    return [[encode_value(v) for v in row] for row in rows]


def _decode_rows(rows: Any) -> Any:
    if rows is None:
        return None
    return [tuple(decode_value(v) for v in row) for row in rows]


Rows = Annotated[
    list[tuple[Any, ...]] | None,
    BeforeValidator(_decode_rows),
    PlainSerializer(_encode_rows, when_used="json"),
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CheckOutcome(_Model):
    """The result of one verifier check on one final state."""

    name: str
    passed: bool
    reason: str


class FrameViolation(_Model):
    """One row outside the frame: added, removed, or changed in columns the frame does not allow.

    Attributes:
        table: the table.
        change: ``added`` (in the final state only), ``removed`` (in the
            initial state only) or ``changed`` (same key, other values).
        row: the row's values (the final ones, or the initial ones for ``removed``).
        columns: for ``changed``, the columns that changed outside the frame.
        count: how many identical rows this entry stands for.
    """

    table: str
    change: Literal["added", "removed", "changed"]
    row: dict[str, Any]
    columns: list[str] = Field(default_factory=list)
    count: int = 1

    def describe(self) -> str:
        """E.g. ``orders: changed row {'id': 17, ...} in column(s) total``."""
        cells = ", ".join(
            f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in self.row.items()
        )
        times = f" ×{self.count}" if self.count > 1 else ""
        if self.change == "changed":
            return f"{self.table}: row ({cells}) changed in {', '.join(self.columns)}{times}"
        return f"{self.table}: row ({cells}) {self.change}{times}"


class Reward(_Model):
    """The binary reward of one episode, with the reason for it.

    Attributes:
        value: 1 when the episode submitted, every check passed and the frame holds; else 0.
        submitted: whether the episode ended with ``submit``.
        answer: the submitted answer (None when absent).
        checks: every check's outcome, in verifier order (empty when not submitted).
        frame_ok: whether every row outside the frame is unchanged.
        violations: rows outside the frame (at most a few per table; see ``violation_count``).
        violation_count: the number of rows outside the frame in all.
        frame_errors: tables whose comparison failed (e.g. over budget); the frame then does not hold.
        reason: one line saying why the reward is what it is.
    """

    value: Literal[0, 1]
    submitted: bool
    answer: str | None = None
    checks: list[CheckOutcome] = Field(default_factory=list)
    frame_ok: bool = True
    violations: list[FrameViolation] = Field(default_factory=list)
    violation_count: int = 0
    frame_errors: list[str] = Field(default_factory=list)
    reason: str

    @property
    def failed_checks(self) -> list[CheckOutcome]:
        """The checks that did not pass."""
        return [c for c in self.checks if not c.passed]

    def detail(self) -> str:
        """A multi-line explanation: every failed check and every row outside the frame."""
        lines = [f"reward {self.value}: {self.reason}"]
        lines += [f"  check {c.name!r} failed: {c.reason}" for c in self.failed_checks]
        lines += [f"  outside the frame: {v.describe()}" for v in self.violations]
        lines += [f"  {error}" for error in self.frame_errors]
        shown = sum(v.count for v in self.violations)
        if self.violation_count > shown:
            lines.append(f"  ... and {self.violation_count - shown} more rows outside the frame")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Observation:
    """What the agent sees after a step (or after ``reset``).

    Attributes:
        step: tool calls made so far in this episode (0 after reset).
        tool: the tool just called (None after reset).
        ok: False when the call failed; :attr:`error` says why.
        columns: column names of the returned rows, for a tool that returns rows.
        rows: the returned rows (capped; see :attr:`truncated`).
        rowcount: rows changed, for a tool whose last statement returns no rows.
        error: why the call failed (unknown tool, bad arguments, SQL error,
            budget exhausted), written for the agent.
        truncated: the result had more rows or bytes than the caps and was cut.
        done: the episode is over (submitted, or the step budget is spent).
        reward: the reward, once done.
    """

    step: int
    tool: str | None = None
    ok: bool = True
    columns: tuple[str, ...] | None = None
    rows: Rows = None
    rowcount: int | None = None
    error: str | None = None
    truncated: bool = False
    done: bool = False
    reward: Reward | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> Observation:
        """A deep copy, field by field: what ``copy.deepcopy`` makes, about twice as fast.

        (Its generic path for a slots dataclass goes through ``__reduce_ex__``;
        the in-process hosts, :mod:`coevo.run.actors.inprocess`, copy every episode.)
        """
        return Observation(*(copy.deepcopy(getattr(self, f.name), memo) for f in fields(self)))

    def to_json(self) -> dict[str, Any]:
        """The observation as a JSON-ready dict (BLOBs as ``{"$base64": ...}``)."""
        return {
            "step": self.step,
            "tool": self.tool,
            "ok": self.ok,
            "columns": list(self.columns) if self.columns is not None else None,
            "rows": _encode_rows(self.rows),
            "rowcount": self.rowcount,
            "error": self.error,
            "truncated": self.truncated,
            "done": self.done,
            "reward": self.reward.model_dump(mode="json") if self.reward else None,
        }

    def text(self) -> str:
        """The observation as an agent would read it: JSON rows, a row count, or the error."""
        if not self.ok:
            return f"error: {self.error}"
        if self.tool == "submit":
            return "submitted"
        if self.tool is None:
            return "reset: the episode has started"
        if self.columns is not None:
            body = json.dumps(
                {"columns": list(self.columns), "rows": _encode_rows(self.rows)},
                ensure_ascii=False,
                default=str,
            )
            if self.truncated:
                body += f"\n(truncated: only the first {len(self.rows or [])} rows are shown)"
            return body
        if self.rowcount is not None:
            return json.dumps({"rowcount": self.rowcount})
        return "ok"


class Episode(_Model):
    """One attempt at a task: the calls, what each returned, and the reward.

    Attributes:
        task_id: the task attempted.
        world_id: its world.
        calls: every tool call, in order.
        observations: one per call, aligned with :attr:`calls`.
        reward: the reward (0 when the episode never submitted).
        truncated: the step budget ran out before ``submit``.
        episode_id: a deterministic id, when the caller gives one.
        solver: who made the calls (``"reference"`` for a task's own solution).
        seed: the seed the solver used.
        trajectory: for an LLM episode, the conversation, sampling and tokens a trainer needs.
    """

    task_id: str
    world_id: str
    calls: list[ToolCall]
    observations: list[Observation]
    reward: Reward
    truncated: bool = False
    episode_id: str | None = None
    solver: str | None = None
    seed: int | None = None
    trajectory: Trajectory | None = None

    @property
    def success(self) -> bool:
        """Whether the reward is 1."""
        return self.reward.value == 1

    @property
    def failure(self) -> str | None:
        """Why the Solver could not play the task at all (None: it played it, whatever it earned)."""
        reason = self.reward.reason
        return reason if reason.startswith(FAILED_PREFIX) else None


FAILED_PREFIX = "the solver failed: "
"""How the reason of an episode the Solver could not play begins (the loop counts these as failures)."""


def failed_episode(task: TaskSpec, seed: int, why: str, solver: str) -> Episode:
    """A reward-0 episode recording that the Solver could not play ``task``, and why."""
    world_id = task.world.world_id if isinstance(task.world, WorldSpec) else str(task.world)
    return Episode(
        task_id=task.task_id,
        world_id=world_id,
        calls=[],
        observations=[],
        reward=Reward(value=0, submitted=False, reason=FAILED_PREFIX + why),
        solver=solver,
        seed=seed,
    )


JUDGE_FAILED_PREFIX = "the judge failed: "
"""How the error of a verdict the Judge could not give begins (the loop counts these as failures)."""


def failed_verdict(task: TaskSpec, why: str) -> Verdict:
    """A rejected verdict recording that the Judge could not assess ``task``, and why."""
    reason = JUDGE_FAILED_PREFIX + why
    return Verdict(
        task_id=task.task_id,
        world_id=task.world_id,
        accepted=False,
        checks={"judge": CheckResult(passed=False, reason=reason)},
        error=reason,
    )


class CheckResult(_Model):
    """The outcome of one Judge check: passed, failed, or not run (None)."""

    passed: bool | None
    reason: str


class Verdict(_Model):
    """The Judge's verdict on one task: every check with its reason.

    Attributes:
        task_id: the task (None when the record could not be read).
        world_id: its world (None when unknown).
        accepted: the task may enter a curriculum: ``valid`` passed and no
            check that ran failed.
        checks: check name to result, in the order they are defined.
        error: why the record could not be read at all, else None.
        warnings: things worth knowing that do not reject the task.
        solve_calls: tool calls the solvability search spent before it earned 1
            (replays included; a difficulty signal); None when no search ran or
            it did not succeed.
    """

    task_id: str | None
    world_id: str | None = None
    accepted: bool
    checks: dict[str, CheckResult]
    error: str | None = None
    warnings: list[str] = Field(default_factory=list)
    solve_calls: int | None = None

    @property
    def failed(self) -> dict[str, CheckResult]:
        """The checks that failed."""
        return {k: v for k, v in self.checks.items() if v.passed is False}
