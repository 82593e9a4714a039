"""Tasks over code worlds (``coevo.codetask/1``) and the Judge's checks on them, by comparing states.

A code task's reward compares the state an agent leaves with the state the
reference solution leaves from the same initial state, key by key
(:func:`~coevo.arena.codeworld.state_diff`), not by a hash: two solutions
that make the same changes in another order, or with reads in between,
earn the same. Paths listed in the verifier's ``ignore`` are left out of
the comparison; every string in ``communicate`` must appear in what the
agent said (case-insensitive, commas in the agent's text ignored, as
τ²-bench does).

Imported benchmark tasks are the documented exception to coevo's
reference-blind verifier rule: their verifier *is* the benchmark's (the
state its gold actions reach), recorded in ``provenance``.

The checks (:func:`assess_code_task`) are the SQL Judge's, on states:

| check | holds when |
|---|---|
| valid | the record parses; every call of the solution names a tool of the world with arguments its schema accepts |
| oracle | every call of the solution succeeds, and replaying it earns 1 |
| noop | a trajectory with no calls (and nothing said) earns 0 |
| unsolved | the initial state differs from the solution's final state, or the agent must say something (tasks that ask for nothing fail here and in noop) |
| partial | every prefix of the solution that stops before its last write earns 0 |
| determinism | two replays of the solution reach the same state, each call returning the same result |
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import jsonschema
from coevo.arena.bounded import MAX_FILE_BYTES, read_regular
from coevo.arena.codeworld import CodeWorlds, CodeWorldSpec, replay, spec_error, state_diff
from coevo.arena.errors import CommandError, FileRefusedError, RecordError, SpecError
from coevo.arena.ids import canonical_json
from coevo.arena.outcomes import CheckResult, Verdict
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

__all__ = [
    "CODETASK_FORMAT",
    "RESPOND",
    "CodeCall",
    "CodeTaskSpec",
    "StateVerifier",
    "assess_code_task",
    "code_records",
    "code_reward",
    "code_tasks_from",
    "code_tasks_of",
    "read_code_tasks",
    "static_problems",
]

CODETASK_FORMAT: Final = "coevo.codetask/1"
CHECKS: Final = ("valid", "oracle", "noop", "unsolved", "partial", "determinism")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CodeCall(_Model):
    """One tool call of a reference solution."""

    tool: StrictStr
    arguments: dict[str, Any] = Field(default_factory=dict)


class StateVerifier(_Model):
    """The reward: the final state equals the reference's (less ``ignore``), and ``communicate`` was said."""

    kind: Literal["state"] = "state"
    ignore: list[StrictStr] = Field(
        default_factory=list,
        description="Diff paths left out ($.orders[0].updated_at): a prefix drops all below it.",
    )
    communicate: list[StrictStr] = Field(default_factory=list)


class CodeTaskSpec(_Model):
    """A ``coevo.codetask/1`` record: an instruction over a code world, its verifier and reference solution."""

    format: Literal["coevo.codetask/1"] = CODETASK_FORMAT
    id: StrictStr | None = None
    world: CodeWorldSpec
    instruction: StrictStr = Field(description="What the agent is asked (or the user's opening).")
    verifier: StateVerifier = Field(default_factory=StateVerifier)
    solution: list[CodeCall]
    user_scenario: dict[str, Any] | None = Field(
        default=None, description="For a user simulator: who the user is and what they want."
    )
    provenance: dict[StrictStr, Any] = Field(default_factory=dict)

    @classmethod
    def read(cls, data: Any) -> CodeTaskSpec:
        """A record from JSON data, or a :class:`SpecError` saying what is wrong and where."""
        try:
            task = cls.model_validate(data)
        except ValidationError as exc:
            raise spec_error(exc, CODETASK_FORMAT) from None
        if task.id is not None and task.id != task.task_id:
            raise SpecError(
                f"code task: its id {task.id} is not the hash of its content ({task.task_id}); "
                "drop the id to have it computed"
            )
        return task

    @property
    def task_id(self) -> str:
        """``sha256:`` + the digest of the format, the world's id, the instruction, the verifier and the solution.

        The solution is part of it (unlike a SQL task's id): the reward is
        the state the solution reaches, so two tasks that differ only there
        reward different things.
        """
        body = {
            "format": self.format,
            "world": self.world.world_id,
            "instruction": self.instruction,
            "verifier": self.verifier.model_dump(mode="json"),
            "solution": [c.model_dump(mode="json") for c in self.solution],
        }
        return "sha256:" + hashlib.sha256(canonical_json(body).encode()).hexdigest()


def _ignored(line: str, ignore: Sequence[str]) -> bool:
    path = line.split(": ", 1)[0]
    return any(path == p or path.startswith((p + ".", p + "[")) for p in ignore)


def code_reward(
    task: CodeTaskSpec,
    expected: Mapping[str, Any],
    final: Mapping[str, Any] | None,
    said: Iterable[str] = (),
    failed: str | None = None,
) -> tuple[int, str]:
    """``(reward, reason)`` of a final state against the reference's, and what the agent said."""
    if failed is not None or final is None:
        return 0, f"the episode failed: {failed}"
    diff = [
        line
        for line in state_diff(expected, final, limit=10_000)
        if not _ignored(line, task.verifier.ignore)
    ]
    if diff:
        more = f" (and {len(diff) - 3} more)" if len(diff) > 3 else ""
        return 0, "the state differs from the reference's: " + "; ".join(diff[:3]) + more
    text = " ".join(said).lower().replace(",", "")
    unsaid = [s for s in task.verifier.communicate if s.lower() not in text]
    if unsaid:
        return 0, f"the agent did not say {unsaid}"
    return 1, "the state equals the reference's" + (
        " and everything to communicate was said" if task.verifier.communicate else ""
    )


RESPOND: Final = "respond"
"""A solution step that is not a tool call: what the agent says (``{"answer": text}``)."""


def _calls(calls: Iterable[CodeCall]) -> list[tuple[str, dict[str, Any]]]:
    return [(c.tool, c.arguments) for c in calls if c.tool != RESPOND]


def assess_code_task(
    task: CodeTaskSpec, worlds: CodeWorlds, states: dict[str, Any] | None = None
) -> Verdict:
    """Every check of the module's table on ``task``, each with its reason; only a failed ``valid`` stops the rest.

    ``states``, when given, receives the states compared: ``"initial"`` (as
    the runtime holds it) and ``"reference"`` (the solution's final state).
    """
    checks: dict[str, CheckResult] = {}
    problems = static_problems(task)
    checks["valid"] = CheckResult(
        passed=not problems,
        reason="; ".join(problems) or "the record and its solution are well formed",
    )
    if problems:
        for name in CHECKS[1:]:
            checks[name] = CheckResult(passed=None, reason="not run: the task is not valid")
        return Verdict(
            task_id=task.task_id, world_id=task.world.world_id, accepted=False, checks=checks
        )
    world = task.world
    gold, observations, failed = replay(worlds, world, _calls(task.solution))
    said = [str(c.arguments.get("answer", "")) for c in task.solution if c.tool == RESPOND]
    broken = [o for o in observations if not o.ok]
    if failed is not None or gold is None:
        checks["oracle"] = CheckResult(
            passed=False, reason=f"the reference solution's episode failed: {failed}"
        )
        for name in CHECKS[2:]:
            checks[name] = CheckResult(
                passed=None, reason="not run: the reference solution could not be played"
            )
        return Verdict(task_id=task.task_id, world_id=world.world_id, accepted=False, checks=checks)
    if broken:
        first = broken[0]
        checks["oracle"] = CheckResult(
            passed=False,
            reason=f"call {first.step} of the reference solution ({first.tool}) fails: {first.error}",
        )
    else:
        reward, reason = code_reward(task, gold, gold, said)
        checks["oracle"] = CheckResult(passed=reward == 1, reason=reason)
    nothing, _ = worlds.initial_state(world)
    reward, reason = code_reward(task, gold, nothing, ())
    checks["noop"] = CheckResult(
        passed=reward == 0,
        reason="doing nothing earns 0: " + reason
        if reward == 0
        else "doing nothing earns 1: " + reason,
    )
    diff = [
        line
        for line in state_diff(gold, nothing or {}, limit=10_000)
        if not _ignored(line, task.verifier.ignore)
    ]
    if states is not None:
        states.update(initial=nothing, reference=gold)
    if diff:
        unsolved = (
            f"the initial state differs from the reference's final state in {len(diff)} place(s)"
        )
    elif task.verifier.communicate:
        unsolved = (
            "the task asks for no change of state, but for saying "
            f"{task.verifier.communicate}, which the initial state does not"
        )
    else:
        unsolved = "the initial state already equals the reference's final state: the task asks for nothing"
    checks["unsolved"] = CheckResult(
        passed=bool(diff or task.verifier.communicate), reason=unsolved
    )
    checks["partial"] = _check_partial(task, worlds, gold)
    again, observations_again, failed_again = replay(worlds, world, _calls(task.solution))
    results = [(o.ok, o.result, o.error) for o in observations]
    results_again = [(o.ok, o.result, o.error) for o in observations_again]
    if failed_again is not None or again is None:
        checks["determinism"] = CheckResult(
            passed=False, reason=f"the second replay failed: {failed_again}"
        )
    elif moved := [
        line for line in state_diff(gold, again) if not _ignored(line, task.verifier.ignore)
    ]:
        checks["determinism"] = CheckResult(
            passed=False, reason="two replays reach different states: " + "; ".join(moved[:3])
        )
    elif results != results_again:
        step = next(
            i for i, (a, b) in enumerate(zip(results, results_again, strict=True)) if a != b
        )
        checks["determinism"] = CheckResult(
            passed=False, reason=f"call {step + 1} returned something else the second time"
        )
    else:
        checks["determinism"] = CheckResult(
            passed=True, reason="two replays reach the same state, call by call"
        )
    accepted = all(c.passed is not False for c in checks.values())
    return Verdict(task_id=task.task_id, world_id=world.world_id, accepted=accepted, checks=checks)


def _check_partial(task: CodeTaskSpec, worlds: CodeWorlds, gold: Mapping[str, Any]) -> CheckResult:
    effects = {t.name: t.effect for t in task.world.tools}
    writes = [i for i, c in enumerate(task.solution) if effects.get(c.tool) == "write"]
    if not writes:
        return CheckResult(
            passed=True, reason="the solution writes nothing: no partial solution to try"
        )
    said = [str(c.arguments.get("answer", "")) for c in task.solution if c.tool == RESPOND]
    for k in range(writes[-1] + 1):
        if k and effects.get(task.solution[k - 1].tool) != "write":
            continue  # a prefix ending in a read reaches the same state as the shorter one
        state, _, failed = replay(worlds, task.world, _calls(task.solution[:k]))
        reward, _ = code_reward(task, gold, state, said, failed)
        if reward == 1:
            return CheckResult(
                passed=False,
                reason=f"the first {k} of {len(task.solution)} calls already earn 1: the verifier "
                "cannot tell this partial solution from the full one",
            )
    return CheckResult(
        passed=True,
        reason=f"every prefix before the last write earns 0 ({writes[-1] + 1} tried at most)",
    )


def static_problems(task: CodeTaskSpec) -> list[str]:
    """What breaks the ``valid`` check: calls naming no tool of the world, or with arguments its schema refuses."""
    problems = []
    for i, call in enumerate(task.solution, 1):
        tool = task.world.tool(call.tool)
        if tool is None:
            if call.tool != RESPOND:
                problems.append(
                    f"call {i} of the solution names no tool of the world: {call.tool!r}"
                )
            continue
        errors = list(jsonschema.Draft202012Validator(tool.parameters).iter_errors(call.arguments))
        if errors:
            problems.append(
                f"call {i} of the solution ({call.tool}) has bad arguments: {errors[0].message}"
            )
    return problems


def read_code_tasks(path: str | Path) -> list[CodeTaskSpec]:
    """The code tasks of a JSON-lines file (what ``coevo import`` writes: world records, then tasks naming them by id).

    Raises:
        CommandError: the file cannot be read.
        RecordError: a line is not JSON.
        SpecError: a record breaks the format, or names a world not defined above it (naming the line).
    """
    try:  # a link the user made is followed; a device, a FIFO or a file over the limit is not read
        data = read_regular(Path(path).resolve(), limit=MAX_FILE_BYTES, what=str(path))
        lines = data.decode("utf-8").splitlines()
    except FileRefusedError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise CommandError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    return code_tasks_of(lines, str(path))


def code_records(tasks: Iterable[CodeTaskSpec]) -> list[dict[str, Any]]:
    """Every world record once (in first-use order), then every task naming its world by id: what :func:`read_code_tasks` reads."""
    worlds: dict[str, dict[str, Any]] = {}
    records = []
    for task in tasks:
        world_id = task.world.world_id
        if world_id not in worlds:
            worlds[world_id] = task.world.model_dump(mode="json") | {"id": world_id}
        record = task.model_dump(mode="json", exclude={"world"})
        records.append(record | {"id": task.task_id, "world": world_id})
    return [*worlds.values(), *records]


def code_tasks_of(lines: Iterable[str], label: str) -> list[CodeTaskSpec]:
    """The code tasks of JSON lines (see :func:`read_code_tasks`); ``label`` names them in messages."""
    return code_tasks_from(enumerate(lines, 1), label)


def code_tasks_from(numbered: Iterable[tuple[int, str]], label: str) -> list[CodeTaskSpec]:
    """The code tasks of JSON lines given with their line numbers (a stream: :func:`~coevo.arena.records.iter_lines`)."""
    path = label
    worlds: dict[str, CodeWorldSpec] = {}
    tasks = []
    for number, line in numbered:
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            hint = (
                " (a file of JSON lines, as `coevo import` writes, is expected)"
                if number == 1
                else ""
            )
            raise RecordError(f"{path}:{number}: not JSON ({exc.msg}){hint}") from None
        kind = data.get("format") if isinstance(data, dict) else None
        try:
            if kind == "coevo.codeworld/1":
                world = CodeWorldSpec.read(data)
                worlds[world.world_id] = world
            elif kind == CODETASK_FORMAT:
                ref = data.get("world")
                if isinstance(ref, str):
                    if ref not in worlds:
                        raise SpecError(f"names the world {ref}, not defined above it")
                    data = {**data, "world": worlds[ref].model_dump(mode="json")}
                tasks.append(CodeTaskSpec.read(data))
            else:
                raise SpecError(
                    f"not a code world or code task record (format {kind!r}): "
                    "this file is read as what `coevo import` writes"
                )
        except SpecError as exc:
            raise SpecError(f"{path}:{number}: {exc}") from None
    return tasks
