"""The structured actions an agent can take in a world, with every argument copied from what it has seen.

An action is a tool call whose argument values are *pointers*: a value taken
from the instruction (a quoted string, an email, a code, a number, a name),
from a cell of an earlier observation, or from the parameter's ``enum``; or
``submit`` with an answer taken from an observation. Nothing is invented, so
an agent acting in this space can only do what a careful person could do
from the same text. The search Judge explores this space; the learning
Solver scores it.

Each candidate carries *where its values came from* (:class:`Source`), the
role features a policy can learn from (the parameter's name against the
source column's name, how recent the observation is), never the values
themselves.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from itertools import product
from typing import Any, Final

from coevo.arena.outcomes import Observation
from coevo.arena.spec import SUBMIT, ToolCall, WorldSpec

__all__ = ["Action", "ActionSpace", "Choice", "Source", "instruction_values"]

_QUOTED: Final = re.compile(r"'([^']{1,120})'|\"([^\"]{1,120})\"")
_EMAIL: Final = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_CODE: Final = re.compile(
    r"\b(?=[A-Za-z0-9-]*\d)(?=[A-Za-z0-9-]*[A-Za-z])[A-Za-z0-9][A-Za-z0-9-]{2,}\b"
)
_NUMBER: Final = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?!\w|\.\d)")
_NAME: Final = re.compile(r"\b[A-Z][\w'’-]+(?:\s+(?:[A-Z][\w'’-]+|(?:van|de|der|da|von)\b))*")
_PHRASE: Final = re.compile(
    r"\b[A-Z][\w'’-]*(?:,?\s+(?!(?:to|from|with|and|in|on|for|of|by|at|the)\b)[a-z0-9][\w'’%-]*){1,5}"
)
_CAPS: Final = re.compile(r"\b[A-Z]{4,}\b")
_STOP: Final = frozenset(
    [
        "What",
        "Cancel",
        "Open",
        "Set",
        "Move",
        "Report",
        "Record",
        "Remove",
        "Change",
        "Request",
        "Add",
        "Delete",
        "Put",
        "Answer",
        "If",
        "The",
        "A",
        "An",
        "Charge",
        "Raise",
        "Approve",
        "Escalate",
        "Credit",
        "Check",
        "Appeal",
        "Mark",
    ]
)


@dataclass(frozen=True)
class Source:
    """Where one argument value came from.

    Attributes:
        origin: ``"instruction"``, ``"observation"`` or ``"enum"``.
        column: the observation column the value was in (None otherwise).
        age: how many observations ago (0: the latest), for observation values.
        kind: for instruction values, what it looked like (quoted, email, code, number, name).
        tool: for observation values, the tool whose result showed it.
        row: for observation values, the row it was in; for instruction values,
            the order in which the instruction states them.
    """

    origin: str
    column: str | None = None
    age: int = 0
    kind: str | None = None
    tool: str | None = None
    row: int = 0


@dataclass(frozen=True)
class Choice:
    """One tool to call and, for each parameter it takes, the values on offer (best first).

    The factored form of the space: a policy picks a choice, then a value per
    parameter; :meth:`ActionSpace.actions` is the product of the values. The
    values are ranked on first use, so a policy pays only for the tool it picks.
    """

    tool: str
    effect: str
    params: tuple[str, ...]
    schemas: tuple[Mapping[str, Any], ...] = field(repr=False, compare=False)
    _rank: Callable[[], tuple[tuple[tuple[Any, Source], ...], ...]] = field(
        repr=False, compare=False
    )

    @cached_property
    def values(self) -> tuple[tuple[tuple[Any, Source], ...], ...]:
        """Per parameter, the ``(value, source)`` pairs on offer, best first."""
        return self._rank()


def _signature(schema: Mapping[str, Any]) -> Any:
    """What decides which values fit a schema (parameters with equal signatures share a pool)."""
    return repr(sorted((k, v) for k, v in schema.items() if k not in _ANNOTATIONS))


_ANNOTATIONS: Final = frozenset(["description", "title", "format", "examples", "default"])


class _Seen:
    """The values one step can use, pooled by parameter schema so that each cell is type-checked once."""

    def __init__(
        self,
        instruction: str,
        observations: Sequence[Observation],
        stated: Sequence[tuple[Any, str]] | None = None,
        cells: dict[int, tuple[Observation, dict[Any, list[tuple[str, int, Any]]]]] | None = None,
    ):
        self.stated = instruction_values(instruction) if stated is None else stated
        self.said = instruction.lower()
        self.observations = observations
        self._pools: dict[Any, list[tuple[int, int, int, Any, Source]]] = {}
        self._cells = {} if cells is None else cells

    def pool(
        self, schema: Mapping[str, Any], key: Any = None
    ) -> list[tuple[int, int, int, Any, Source]]:
        """Every value fitting ``schema``: ``(priority, -age, -position, value, source)``, in offer order.

        ``key``: the schema's :func:`_signature`, when the caller has it.
        """
        key = _signature(schema) if key is None else key
        found = self._pools.get(key)
        if found is not None:
            return found
        enum = schema.get("enum") or ()
        pool: list[tuple[int, int, int, Any, Source]] = []
        for value in enum:
            said = isinstance(value, str) and value.lower() in self.said
            pool.append(
                (5 if said else 1, 0, 0, value, Source("enum", kind="said" if said else None))
            )
        for order, (value, kind) in enumerate(self.stated):
            if kind == "number" and schema.get("type") == "string":
                value, kind = str(value), "code"  # a number written in the text, given as text
            if _fits(value, schema):
                pool.append((2, 0, -order, value, Source("instruction", kind=kind, row=order)))
        for age, obs in enumerate(reversed(self.observations)):
            if not obs.ok or not obs.columns:
                continue
            for column, row_index, value in self._fitting(obs, schema, key):
                source = Source("observation", column, age, tool=obs.tool, row=row_index)
                pool.append((3, -age, -row_index, value, source))
        self._pools[key] = pool
        return pool

    def _fitting(
        self, obs: Observation, schema: Mapping[str, Any], key: Any
    ) -> list[tuple[str, int, Any]]:
        """The cells of ``obs`` that fit ``schema``, ``(column, row, value)``: checked once per episode, not per step."""
        held = self._cells.get(id(obs))
        if held is None or held[0] is not obs:
            if len(self._cells) >= 4096:  # a search's many states: keep the memory bounded
                self._cells.clear()
            held = self._cells[id(obs)] = (obs, {})
        found = held[1].get(key)
        if found is None:
            found = held[1][key] = [
                (column, row_index, row[column_index])
                for column_index, column in enumerate(obs.columns or ())
                for row_index, row in enumerate(obs.rows or ())
                if _fits(row[column_index], schema)
            ]
        return found

    def ranked(
        self, params: tuple[str, ...], schemas: tuple[Mapping[str, Any], ...], limit: int
    ) -> tuple[tuple[tuple[Any, Source], ...], ...]:
        """Per parameter, the best ``limit`` distinct values (a matching column's values first)."""
        return tuple(self._ranked(p, s, limit) for p, s in zip(params, schemas, strict=True))

    def _ranked(
        self, param: str, schema: Mapping[str, Any], limit: int
    ) -> tuple[tuple[Any, Source], ...]:
        scored = [
            (
                (priority + _affinity(param, source.column), age, position),
                value,
                source,
            )
            for priority, age, position, value, source in self.pool(schema)
        ]
        scored.sort(key=lambda item: item[0], reverse=True)  # stable: ties keep offer order
        out: list[tuple[Any, Source]] = []
        taken: set[Any] = set()
        for _, value, source in scored:
            key = (type(value).__name__, value)
            if key in taken:
                continue
            taken.add(key)
            out.append((value, source))
            if len(out) >= limit:
                break
        return tuple(out)


@dataclass(frozen=True)
class Action:
    """A candidate tool call and where each argument came from."""

    call: ToolCall
    sources: Mapping[str, Source] = field(default_factory=dict)


def instruction_values(instruction: str) -> list[tuple[Any, str]]:
    """The values an instruction states, each with what it looked like (first occurrence order)."""
    found: list[tuple[Any, str]] = []
    seen: set[Any] = set()

    def add(value: Any, kind: str) -> None:
        if value not in seen and value != "":
            seen.add(value)
            found.append((value, kind))

    for match in _QUOTED.finditer(instruction):
        add(match.group(1) or match.group(2), "quoted")
    for match in _EMAIL.finditer(instruction):
        add(match.group(0), "email")
    for match in _CODE.finditer(instruction):
        if "@" not in match.group(0) and not _NUMBER.fullmatch(match.group(0)):
            add(match.group(0), "code")
    for match in _NUMBER.finditer(instruction):
        text = match.group(0)
        add(float(text) if "." in text else int(text), "number")
    for match in _CAPS.finditer(instruction):
        add(match.group(0), "code")
    for match in _NAME.finditer(instruction):
        words = [w for w in match.group(0).split() if w not in _STOP]
        if words:
            add(" ".join(words), "name")
    for match in _PHRASE.finditer(instruction):
        if match.group(0).split()[0] not in _STOP:
            add(match.group(0), "name")
    return found


def _fits_type(value: Any, kind: Any) -> bool:
    if isinstance(kind, list):
        return any(_fits_type(value, k) for k in kind)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    return False


def _fits(value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether the tool would accept ``value`` for a parameter of ``schema`` (type, enum, bounds, lengths).

    Values the arguments check would refuse are never offered: the schema is
    visible to any agent, so trying them teaches nothing.
    """
    if "enum" in schema:
        return value in schema["enum"]
    if "const" in schema:
        return bool(value == schema["const"])
    if not _fits_type(value, schema.get("type")):
        return False
    if isinstance(value, str):
        return (
            int(schema.get("minLength", 0))
            <= len(value)
            <= int(schema.get("maxLength", len(value)))
        )
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        above, below = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        return (
            (low is None or value >= low)
            and (high is None or value <= high)
            and (above is None or value > above)
            and (below is None or value < below)
        )
    return True


def _affinity(param: str, column: str | None) -> int:
    """How well a source column's name matches a parameter's (higher is better)."""
    if column is None:
        return 0
    p, c = param.lower(), column.lower()
    if p == c:
        return 3
    if c == "id" and p.endswith("_id"):
        return 2
    if p.endswith(c) or c.endswith(p):
        return 1
    return 0


class ActionSpace:
    """Every pointer-style action in one world, for a given instruction and the observations so far.

    Args:
        world: the world record (its tools and their parameter schemas).
        per_parameter: the most candidate values kept per parameter, best first.
        per_tool: the most calls kept per tool.
    """

    def __init__(self, world: WorldSpec, *, per_parameter: int = 12, per_tool: int = 40):
        self.world = world
        self.per_parameter = per_parameter
        self.per_tool = per_tool
        self.tools = list(world.tools)
        self._shapes: list[
            tuple[str, str, tuple[str, ...], tuple[Mapping[str, Any], ...], tuple[Any, ...]]
        ] = []
        for tool in self.tools:
            properties = tool.parameters.get("properties") or {}
            required = list(tool.parameters.get("required") or [])
            # a tool with no required parameter takes one of its optional ones (find by A or B)
            for names in [required] if required else [[p] for p in properties]:
                schemas = tuple(properties.get(p) or {} for p in names)
                keys = tuple(_signature(schema) for schema in schemas)
                self._shapes.append((tool.name, tool.effect, tuple(names), schemas, keys))
        self._stated: tuple[str, list[tuple[Any, str]]] | None = None
        self._cells: dict[int, tuple[Observation, dict[Any, list[tuple[str, int, Any]]]]] = {}

    def choices(self, instruction: str, observations: Sequence[Observation]) -> list[Choice]:
        """The tools that can be called now (not ``submit``); each choice's values are ranked on first use.

        A tool with no required parameter is offered once per optional
        parameter (find by A, or by B); a tool some parameter of which has no
        value on offer is left out.
        """
        if self._stated is None or self._stated[0] != instruction:
            self._stated = (instruction, instruction_values(instruction))
            self._cells.clear()
        seen = _Seen(instruction, observations, self._stated[1], self._cells)
        out: list[Choice] = []
        for tool, effect, names, schemas, keys in self._shapes:
            if all(seen.pool(schema, key) for schema, key in zip(schemas, keys, strict=True)):
                rank = partial(seen.ranked, names, schemas, self.per_parameter)
                out.append(Choice(tool, effect, names, schemas, _rank=rank))
        return out

    def actions(self, instruction: str, observations: Sequence[Observation]) -> Iterator[Action]:
        """The tool calls available now (not ``submit``; see :meth:`answers`), at most ``per_tool`` per choice."""
        for choice in self.choices(instruction, observations):
            for count, combination in enumerate(product(*choice.values)):
                if count >= self.per_tool:
                    break
                arguments = {p: v for p, (v, _) in zip(choice.params, combination, strict=True)}
                sources = {p: src for p, (_, src) in zip(choice.params, combination, strict=True)}
                yield Action(ToolCall(choice.tool, arguments), sources)

    def sourced_answers(
        self, observations: Sequence[Observation], limit: int = 60
    ) -> list[tuple[str | None, Source | None]]:
        """Like :meth:`answers`, with where each answer came from (None for no answer)."""
        out: list[tuple[str | None, Source | None]] = [(None, None)]
        seen: set[str] = set()
        for age, obs in enumerate(reversed(observations)):
            for row_index, row in enumerate(obs.rows or ()):
                for column, cell in zip(obs.columns or (), row, strict=False):
                    if isinstance(cell, (str, int, float)) and not isinstance(cell, bool):
                        text = str(cell)
                        if text not in seen:
                            seen.add(text)
                            source = Source(
                                "observation", column, age, tool=obs.tool, row=row_index
                            )
                            out.append((text, source))
                            if len(out) > limit:
                                return out
        return out

    def answers(self, observations: Sequence[Observation], limit: int = 60) -> list[str | None]:
        """Answers a ``submit`` can give: none, then cells of the latest observations (as text)."""
        return [answer for answer, _ in self.sourced_answers(observations, limit)]

    def submit(self, answer: str | None) -> ToolCall:
        """The ``submit`` call for ``answer``."""
        return ToolCall(SUBMIT, {} if answer is None else {"answer": answer})
