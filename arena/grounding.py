"""The ``grounded`` check: nothing in the reference solution may have to be guessed.

Every argument value of the solution (the submitted answer included) must
appear in the instruction, in an earlier observation of the same run, or in
the parameter's JSON Schema ``enum``/``const``. Matching rules:

* a string is grounded when it occurs, ignoring case, in the instruction or
  in a text value (or column name) of an earlier observation, or when it is
  a number that is grounded;
* a number is grounded when it equals a number in an earlier observation
  (a cell, a row count) or a number written with digits in the instruction
  or in an earlier text value;
* booleans, null and the empty string are grounded (they carry no
  information to guess).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from coevo.arena.outcomes import Observation
from coevo.arena.spec import SUBMIT, TaskSpec, ToolCall, WorldSpec

__all__ = ["GroundingPool", "ungrounded_arguments"]

_NUMBER = re.compile(r"(?:(?<![\w.-])-)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def _numbers_in(text: str) -> set[float]:
    """Numbers written with digits (``96,000`` and ``96000`` alike; ``$12.50`` as 12.5)."""
    found: set[float] = set()
    for match in _NUMBER.finditer(text):
        token = match.group(0)
        found.add(float(token.replace(",", "")))
        if "," in token:  # "3,4" may also be a list of two numbers
            found.update(float(part) for part in token.split(",") if part.strip("-"))
    return found


class GroundingPool:
    """What an agent has seen so far: the instruction, then each observation."""

    def __init__(self, instruction: str):
        self._texts: list[str] = [instruction.lower()]
        self._numbers: set[float] = _numbers_in(instruction)

    def add(self, obs: Observation) -> None:
        """Add what one observation showed."""
        if obs.rowcount is not None:
            self._numbers.add(float(obs.rowcount))
        if obs.columns:
            self._texts.append("\n".join(c.lower() for c in obs.columns))
        for row in obs.rows or ():
            for value in row:
                if isinstance(value, bool):
                    continue
                if isinstance(value, (int, float)):
                    if math.isfinite(value):
                        self._numbers.add(float(value))
                elif isinstance(value, str):
                    self._texts.append(value.lower())
                    self._numbers |= _numbers_in(value)

    def holds(self, value: Any) -> bool:
        """Whether ``value`` is grounded in what was seen."""
        if value is None or isinstance(value, bool) or value == "":
            return True
        if isinstance(value, (int, float)):
            return float(value) in self._numbers
        if isinstance(value, str):
            lowered = value.lower()
            if any(lowered in text for text in self._texts):
                return True
            try:
                return float(value) in self._numbers
            except ValueError:
                return False
        return False


def _enum_of(world: WorldSpec, tool: str, parameter: str) -> list[Any]:
    for spec in world.tools:
        if spec.name == tool:
            properties = spec.parameters.get("properties") or {}
            prop = properties.get(parameter) if isinstance(properties, Mapping) else None
            if isinstance(prop, Mapping):
                values = list(prop.get("enum") or [])
                if "const" in prop:
                    values.append(prop["const"])
                return values
    return []


def ungrounded_arguments(
    task: TaskSpec, world: WorldSpec, observations: Sequence[Observation]
) -> list[str]:
    """Every argument value of the solution that was not visible before its call.

    Args:
        task: the task (its instruction and solution).
        world: the task's world (for parameter enums).
        observations: what each step of the solution returned, in order.

    Returns:
        One message per ungrounded value, naming the step, the argument and the value.
    """
    pool = GroundingPool(task.instruction)
    problems: list[str] = []
    calls: Sequence[ToolCall] = task.solution
    for i, call in enumerate(calls):
        for name, value in call.arguments.items():
            if pool.holds(value):
                continue
            if call.tool != SUBMIT and any(
                (v == value and type(v) is type(value))
                or (isinstance(v, (int, float)) and not isinstance(v, bool) and v == value)
                for v in _enum_of(world, call.tool, name)
            ):
                continue
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            problems.append(
                f"solution[{i}] {call.tool}({name}={shown}): the value appears in neither the "
                f"instruction nor an earlier observation{'' if call.tool == SUBMIT else ' nor the parameter enum'}"
            )
        if i < len(observations):
            pool.add(observations[i])
    return problems
