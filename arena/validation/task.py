"""Compile a task against its compiled world: its fields, verifier checks, frame and solution.

:func:`compile_task` returns a :class:`CompiledTask` ready to verify
episodes, or raises :class:`SpecError` naming every problem.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from coevo.arena.errors import Problem, SpecError
from coevo.arena.spec import SUBMIT, WORLD_ID_PATTERN, TaskSpec, ToolCall
from coevo.arena.sqlguard import explain
from coevo.arena.validation.compiled import CompiledCheck, CompiledTask, CompiledWorld
from coevo.arena.validation.frame import compile_frame
from coevo.arena.validation.problems import (
    did_you_mean,
    id_mismatch_problem,
    shorten,
    unencodable_problems,
)
from coevo.arena.validation.statements import statement_problems

__all__ = ["compile_task"]


def compile_task(task: TaskSpec, world: CompiledWorld) -> CompiledTask:
    """Validate a task against its compiled world: verifier checks, frame and solution.

    Raises:
        SpecError: naming every problem found.
    """
    problems: list[Problem] = unencodable_problems(
        task.model_copy(update={"world": task.world_id}), "task"
    )
    if problems:
        raise SpecError(problems)
    if task.world_id != world.id:
        problems.append(
            Problem(
                "world",
                f"the task's world is {task.world_id}, not {world.id}",
                "run the task on its own world",
            )
        )
        raise SpecError(problems)
    if task.id is not None and task.id != task.task_id:
        problems.append(id_mismatch_problem("id", task.id, task.task_id))
    if not task.instruction.strip():
        problems.append(Problem("instruction", "is empty", "say what the user wants"))
    if task.lineage.parent is not None and not re.match(WORLD_ID_PATTERN, task.lineage.parent):
        problems.append(
            Problem(
                "lineage.parent",
                f"{task.lineage.parent!r} is not a task id",
                "use the parent's 'sha256:...' id",
            )
        )
    checks = _compile_checks(task, world, problems)
    frame = compile_frame(world, task.verifier.frame, problems)
    _check_solution(world, task.solution, problems)
    if problems:
        raise SpecError(problems)
    warnings: list[str] = []
    answer_step = task.solution[-1].arguments.get("answer") if task.solution else None
    if answer_step is not None and not any(c.uses_answer for c in checks):
        warnings.append("the solution submits an answer but no check reads :answer")
    return CompiledTask(
        spec=task, id=task.task_id, checks=tuple(checks), frame=frame, warnings=tuple(warnings)
    )


def _compile_checks(
    task: TaskSpec, world: CompiledWorld, problems: list[Problem]
) -> list[CompiledCheck]:
    """Compile the verifier's checks, each one read-only SELECT using at most ``:answer``."""
    checks: list[CompiledCheck] = []
    if not task.verifier.checks:
        problems.append(
            Problem(
                "verifier.checks",
                "is empty",
                "add at least one check (a SELECT returning 1 when the goal is met)",
            )
        )
    seen: set[str] = set()
    for i, check in enumerate(task.verifier.checks):
        path = f"verifier.checks[{i}]"
        if not check.name.strip():
            problems.append(
                Problem(f"{path}.name", "is empty", "name the check after what it verifies")
            )
        if check.name in seen:
            problems.append(
                Problem(
                    f"{path}.name", f"{check.name!r} is used twice", "give every check its own name"
                )
            )
        seen.add(check.name)
        facts = explain(world.conn, world.guard, check.sql)
        found = statement_problems(
            facts, f"{path}.sql", what="check", fix="write one read-only SELECT"
        )
        if not found:
            if facts.writes:
                found.append(
                    Problem(
                        f"{path}.sql",
                        f"check {shorten(check.sql)!r} writes {facts.writes[0].arg1}",
                        "a check is one read-only SELECT",
                    )
                )
            if "ResultRow" not in facts.opcodes:
                found.append(
                    Problem(
                        f"{path}.sql",
                        f"check {shorten(check.sql)!r} returns no rows",
                        "a check is a SELECT",
                    )
                )
            for param in facts.parameters:
                if param != ":answer":
                    found.append(
                        Problem(
                            f"{path}.sql",
                            f"check {shorten(check.sql)!r} uses parameter {param!r}",
                            "the only parameter a check may use is :answer",
                        )
                    )
            temp = sorted({a.db for a in facts.actions if a.db not in (None, "main", "initial")})
            if temp:
                found.append(
                    Problem(
                        f"{path}.sql",
                        f"check reaches schema(s) {temp}",
                        "use main (final state) and initial",
                    )
                )
        if found:
            problems.extend(found)
            continue
        checks.append(CompiledCheck(check.name, check.sql, ":answer" in facts.parameters))
    return checks


def _check_solution(
    world: CompiledWorld, solution: Sequence[ToolCall], problems: list[Problem]
) -> None:
    """Check the reference solution: known tools, arguments that bind, submit once and last."""
    if not solution:
        problems.append(Problem("solution", "is empty", "end the reference solution with submit"))
        return
    last = len(solution) - 1
    for i, call in enumerate(solution):
        path = f"solution[{i}]"
        if call.tool == SUBMIT:
            if i != last:
                problems.append(
                    Problem(
                        path,
                        "submit comes before the last step",
                        "submit exactly once, as the last step",
                    )
                )
            extra = sorted(set(call.arguments) - {"answer"})
            if extra:
                problems.append(
                    Problem(
                        f"{path}.arguments",
                        f"submit takes only 'answer', got {extra}",
                        "pass submit({'answer': ...}) or submit({})",
                    )
                )
            answer = call.arguments.get("answer")
            if answer is not None and not isinstance(answer, str):
                problems.append(
                    Problem(
                        f"{path}.arguments.answer",
                        f"must be a string, got {answer!r}",
                        "pass the answer as text",
                    )
                )
            continue
        tool = world.tools.get(call.tool)
        if tool is None:
            problems.append(
                Problem(
                    f"{path}.tool",
                    f"no tool {call.tool!r} in the world{did_you_mean(call.tool, list(world.tools))}",
                    f"tools: {', '.join(world.tools)}, submit",
                )
            )
            continue
        _, error = tool.binder.bind(call.arguments)
        if error:
            problems.append(
                Problem(
                    f"{path}.arguments", error, "fix the arguments to match the tool's parameters"
                )
            )
    if solution[last].tool != SUBMIT:
        problems.append(
            Problem(
                f"solution[{last}]",
                f"the last step is {solution[last].tool!r}, not submit",
                "end the solution with submit",
            )
        )
