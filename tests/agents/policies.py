"""Fixed baseline policies that really run in the world runtime (for world-model and difficulty tests).

``guess_rows``: calls the reference solution's tools in order but must find
the rows itself: every argument not stated in the instruction is copied from
a random row of the latest observation that shows such a value. With
``read=True`` (a stronger "version" of the same solver) it first narrows the
rows to those showing a word or value the instruction states (a city, a
status) before guessing.
"""

from __future__ import annotations

import random
from typing import Any

from coevo.agents.synthesizers.procedural.checking import stated_numbers
from coevo.arena import Episode, Observation, TaskSpec, ToolCall, World


def _where(observations: list[Observation], value: Any) -> tuple[int, int] | None:
    for index in range(len(observations) - 1, -1, -1):
        for row in observations[index].rows or ():
            for column, cell in enumerate(row):
                if cell == value or (isinstance(value, str) and str(cell) == value):
                    return index, column
    return None


def _mentioned(row: Any, instruction: str) -> bool:
    text = instruction.lower()
    return any(isinstance(cell, str) and len(cell) > 2 and cell.lower() in text for cell in row)


def guess_rows(
    world: World,
    task: TaskSpec,
    rng: random.Random | None,
    *,
    read: bool = False,
    solver: str = "guesser",
) -> Episode:
    """One episode of the row-guessing policy (see the module docstring); no ``rng``: always the first row."""
    calls: list[ToolCall] = []
    seen: list[Observation] = []
    world.reset(task)
    for call in task.solution:
        arguments: dict[str, Any] = {}
        for name, value in call.arguments.items():
            stated = (isinstance(value, str) and value.lower() in task.instruction.lower()) or (
                isinstance(value, int) and value in stated_numbers(task.instruction)
            )
            found = None if stated else _where(seen, value)
            if found is None:
                if stated or not seen or not isinstance(value, int) or isinstance(value, bool):
                    arguments[name] = value  # stated in the instruction (or a choice it gives)
                    continue
                cells = [c for r in seen[-1].rows or () for c in r if type(c) is type(value)]
                arguments[name] = (rng.choice(cells) if rng else cells[0]) if cells else -1
                continue
            index, column = found
            rows = list(seen[index].rows or [])
            if read:
                rows = [r for r in rows if _mentioned(r, task.instruction)] or rows
            picked = rows[rng.randrange(len(rows)) if rng else 0][column]
            arguments[name] = str(picked) if isinstance(value, str) else picked
        calls.append(ToolCall(call.tool, arguments))
        if call.tool != "submit":
            seen.append(world.step(calls[-1]))
    return world.run(task, calls, solver=solver)
