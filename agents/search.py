"""A bounded search solver over the :class:`~coevo.agents.action_space.ActionSpace`: proof that a task is solvable.

It never sees the reference solution or the verifier's SQL: it only calls
tools with values it has seen and asks the world's reward whether a
``submit`` now would earn 1 (as any rollout would learn at the end), reading
nothing but the reward's value.

**Ranking.** The calls on offer in a state are ranked by where their
arguments came from and by what the instruction says:

* a key just looked up feeding the parameter it names (``customer_id`` from
  a customer's ``id``), or a key by another name no tool takes
  (``manager_id``, most of all when the instruction says "manager");
* an instruction value of the kind the parameter wants (an email for
  ``email``, a quoted reason for ``reason``, "4%" for ``percent``), an enum
  value the instruction says, a date it writes;
* a row that matches the instruction (its text cells occur in it: the
  namesake with the right job title, the orders with the status asked for)
  before the rows that do not, and among equals the rows at either end of
  the listing or of one of its columns ("the cheapest", "the latest");
* a tool whose name the instruction says ("cancel ... appointment").

**Search.** Best-first on a cost: one per call, plus one for every sibling
ranked before it *that came to something* (a read that showed new rows, a
write that went through); a call that fails or finds nothing costs its
younger siblings nothing. So a deep walk along well-ranked calls is tried
before a shallow one along poorly ranked calls. A request looks things up,
then acts, so a look-up after a write costs three more and a second write of
another kind one more. A state's calls are ranked only when its first child
is due (most states never are).

**Writes.** A state is the initial database plus its successful writes
(reads change nothing): a state is restored by replaying its writes only, its
observations are kept, and the reward is asked only when the state changed.
A write that went through on one row of a listing suggests the same write on
the listing's other rows ("cancel every booked appointment"): the rows that
match the instruction as well as the first are offered next, all at once,
then each other row alone.

The search is deterministic: the same task gives the same calls.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Final

from coevo.agents.action_space import ActionSpace, Choice, Source, instruction_values
from coevo.arena.outcomes import Observation
from coevo.arena.spec import TaskSpec, ToolCall
from coevo.arena.world import World

__all__ = ["SearchResult", "search_solve"]


@dataclass(frozen=True)
class SearchResult:
    """The outcome of a search.

    Attributes:
        solved: a sequence of calls earning reward 1 was found.
        calls: that sequence, ``submit`` included (None when unsolved).
        spent: tool calls executed, replays included.
        budget: the budget of tool calls it had.
    """

    solved: bool
    calls: list[ToolCall] | None
    spent: int
    budget: int

    @property
    def reason(self) -> str:
        """One line for a verdict."""
        if self.solved and self.calls is not None:
            return f"a search that never saw the solution earned 1 in {len(self.calls)} calls ({self.spent} tried)"
        unproven = f"unproven: no reward-1 sequence within a budget of {self.budget} tool calls"
        if self.spent < self.budget:
            return f"{unproven} (every call on offer was tried after {self.spent})"
        return unproven


def search_solve(
    task: TaskSpec,
    world: World,
    *,
    budget: int = 5000,
    max_depth: int = 10,
    branching: int = 12,
) -> SearchResult:
    """Search for calls that earn reward 1 on ``task`` without its reference solution.

    Deterministic: the same task gives the same result.

    Args:
        task: the task (its instruction and world; the solution and verifier are not read).
        world: the task's built world (its episode is reset; left in some state of the search).
        budget: the most tool calls to execute (replays of a state's writes included).
        max_depth: the longest call sequence tried (``submit`` not counted).
        branching: reads per state that may come to something, best first (writes: three times as many).
    """
    search = _Search(task, world, budget, max_depth, branching)
    calls = search.run()
    return SearchResult(calls is not None, calls, search.spent, budget)


# --------------------------------------------------------------------------- ranking

_KIND_PARAMS: Final = {
    "email": ("email",),
    "name": ("name", "title"),
    "code": ("number", "code", "sku", "locator", "ticket", "mrn"),
    "date": ("date", "day", "_at", "_on", "time", "when"),
}
"""Parameter name fragments that say an instruction value of a kind is meant for them."""

_DATE: Final = re.compile(r"(?<![\w-])\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?(?![\w-])")
"""Dates and date-times written in the instruction (the ActionSpace reads them as numbers)."""

_PLAIN_WORDS: Final = frozenset(["get", "list", "find", "search", "by", "id"])
"""Words of tool and column names that say nothing about which one the instruction wants."""


def _stem(word: str) -> str:
    word = word.lower()
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


class _Mentions:
    """Which words of a tool's or a column's name the instruction mentions."""

    def __init__(self, instruction: str):
        self.words = sorted({_stem(w) for w in re.findall(r"[A-Za-z]+", instruction)})
        self._cache: dict[str, float] = {}

    def share(self, name: str) -> float:
        """The share of the name's words the instruction mentions (0 when it has none that count)."""
        hit = self._cache.get(name)
        if hit is None:
            parts = [_stem(w) for w in re.split(r"[^A-Za-z]+", name) if len(w) >= 3]
            parts = [w for w in parts if w not in _PLAIN_WORDS]
            # a prefix is a mention too: "confirmed" mentions confirm, "cancellation" cancel
            said = sum(1 for w in parts if any(i.startswith(w) for i in self.words))
            hit = self._cache[name] = said / len(parts) if parts else 0.0
        return hit


def _comparable(value: Any) -> tuple[int, float, str] | None:
    """A cell as a sort key: a number, a numeric text or a date-like text; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return (0, float(value), "")
    if isinstance(value, str) and value[:1].isdigit():
        try:
            return (0, float(value), "")
        except ValueError:
            return (1, 0.0, value)  # a date or a time: ISO text sorts as it reads
    return None


@dataclass
class _Relevance:
    """How well each row of each observation matches the instruction (cached per observation).

    A row's *gap* is how many fewer of its text cells the instruction
    mentions than the best row's: the namesake with another job title, the
    order with another status. Its *edge* is how far it sits, among the rows
    as relevant as it is, from either end of the listing or of the order of
    one of its columns: a pick by an extreme value ("the earliest booked
    appointment", "the cheapest order") is at one end of one of them.
    """

    instruction: str
    _cache: dict[int, tuple[Observation, list[int], list[int]]] = field(default_factory=dict)

    def gap(self, obs: Observation, row: int) -> int:
        """How many fewer mentions the row has than the best row of its observation."""
        gaps = self._rows(obs)[0]
        return gaps[row] if row < len(gaps) else 0

    def edge(self, obs: Observation, row: int) -> int:
        """How far the row is from an end, among the rows as relevant as it is."""
        edges = self._rows(obs)[1]
        return edges[row] if row < len(edges) else 0

    def penalty(self, obs: Observation, row: int) -> float:
        """What the row's gap and edge take off a value read from it."""
        gaps, edges = self._rows(obs)
        return 2.0 * gaps[row] + 0.01 * edges[row] if row < len(gaps) else 0.0

    def _rows(self, obs: Observation) -> tuple[list[int], list[int]]:
        hit = self._cache.get(id(obs))
        if hit is not None and hit[0] is obs:
            return hit[1], hit[2]
        rows = obs.rows or []
        scores = [self._mentions(row) for row in rows]
        best = max(scores, default=0)
        gaps = [best - score for score in scores]
        edges = [0] * len(rows)
        for score in sorted(set(scores)):
            group = [r for r, s in enumerate(scores) if s == score]
            for position, r in enumerate(group):
                edges[r] = min(position, len(group) - 1 - position)
            for column in range(len(obs.columns or ())):
                values = [_comparable(rows[r][column]) for r in group]
                keys = [v for v in values if v is not None]
                if len(keys) < len(values):
                    continue  # a column of names or blanks says nothing of extremes
                ordered = sorted(range(len(group)), key=keys.__getitem__)
                for position, i in enumerate(ordered):
                    far = min(position, len(group) - 1 - position)
                    edges[group[i]] = min(edges[group[i]], far)
        self._cache[id(obs)] = (obs, gaps, edges)  # the observation is kept: its id is not reused
        return gaps, edges

    def _mentions(self, row: Sequence[Any]) -> int:
        """How many distinct text cells of the row the instruction says, as whole words."""
        cells = {c.lower() for c in row if isinstance(c, str) and len(c) >= 3}
        return sum(1 for c in cells if self._says(c))

    def _says(self, text: str) -> bool:
        if text not in self.instruction:
            return False
        return re.search(rf"(?<![\w-]){re.escape(text)}(?![\w-])", self.instruction) is not None


def _names(key: str, tool: str) -> bool:
    """Whether a tool's rows are the entity a key names (order_id: list_orders; po_id: purchase_order)."""
    entity = key.removesuffix("_id")
    words = tool.lower().split("_")
    initials = {a[:1] + b[:1] for a, b in pairwise(words)}
    return entity[:5] in tool.lower() or entity in initials


@dataclass(frozen=True)
class _Origin:
    """Where a write's row came from: parameter ``param`` took column ``column`` of observation ``index``."""

    param: str
    index: int
    column: str


@dataclass(frozen=True)
class _Candidate:
    """A call on offer in a state, with its score (higher first)."""

    score: float
    call: ToolCall
    effect: str
    origin: _Origin | None = None


class _Offer:
    """The calls on offer in a state, scored: the ActionSpace's choices, plus dates the instruction writes."""

    def __init__(self, task: TaskSpec, space: ActionSpace):
        self.instruction = task.instruction
        self.said = task.instruction.lower()
        self.space = space
        self.relevance = _Relevance(self.said)
        self.mentions = _Mentions(task.instruction)
        self.dates = list(dict.fromkeys(m.group(0) for m in _DATE.finditer(task.instruction)))
        self.undated = _DATE.sub(" ", task.instruction)
        # the first kind each stated value was read as (the space keeps one source per value)
        self.stated = {
            (type(v), v): kind for v, kind in reversed(instruction_values(task.instruction))
        }
        self.keys = {
            p.lower()
            for tool in space.tools
            for p in (tool.parameters.get("properties") or {})
            if p.lower().endswith("_id")
        }
        self._links: dict[tuple[str, str, str, bool], float] = {}
        self._statements: dict[tuple[str, str, Any], float] = {}

    def candidates(self, observations: Sequence[Observation], limit: int) -> list[_Candidate]:
        """The calls on offer, best first (ties keep the ActionSpace's order), at most ``limit`` per tool."""
        # per observation, how many listings came after it (a write's row count is no listing)
        ages = [0] * len(observations)
        later = 0
        for index in range(len(observations) - 1, -1, -1):
            ages[index] = later
            later += 1 if observations[index].columns else 0
        out: list[_Candidate] = []
        for choice in self.space.choices(self.instruction, observations):
            out.extend(self._calls(choice, observations, ages, limit))
        out.sort(key=lambda c: c.score, reverse=True)
        return out

    def _calls(
        self, choice: Choice, observations: Sequence[Observation], ages: list[int], limit: int
    ) -> list[_Candidate]:
        per_param: list[list[tuple[float, int, Any, Source | None]]] = []
        for param, schema, values in zip(choice.params, choice.schemas, choice.values, strict=True):
            name = param.lower()
            scored = [
                (self._value(name, value, source, observations, ages), i, value, source)
                for i, (value, source) in enumerate(values)
            ]
            if schema.get("type") == "string" and "enum" not in schema:
                hint = any(h in name for h in _KIND_PARAMS["date"])
                for date in self.dates:
                    if (
                        int(schema.get("minLength", 0))
                        <= len(date)
                        <= int(schema.get("maxLength", len(date)))
                    ):
                        scored.append((5.0 if hint else 1.0, len(scored), date, None))
            scored.sort(key=lambda item: (-item[0], item[1]))
            per_param.append(scored[:limit])
        bonus = 1.5 * self.mentions.share(choice.tool)
        out: list[_Candidate] = []
        for combination in _best_combinations([[v[0] for v in vs] for vs in per_param], limit):
            picked = [per_param[j][i] for j, i in enumerate(combination)]
            arguments = {p: v[2] for p, v in zip(choice.params, picked, strict=True)}
            score = sum(v[0] for v in picked) / max(1, len(picked)) + bonus
            origin = None
            for param, (_, _, _, source) in zip(choice.params, picked, strict=True):
                if source is not None and source.origin == "observation" and source.column:
                    origin = _Origin(param, len(observations) - 1 - source.age, source.column)
                    break
            out.append(_Candidate(score, ToolCall(choice.tool, arguments), choice.effect, origin))
        return out

    def _value(
        self,
        name: str,
        value: Any,
        source: Source,
        observations: Sequence[Observation],
        ages: list[int],
    ) -> float:
        """How plausible ``value`` is for parameter ``name``, given where it came from (higher first)."""
        if source.origin == "observation":
            index = len(observations) - 1 - source.age
            column = (source.column or "").lower()
            link = self._link(name, column, source.tool or "", isinstance(value, int))
            score = link - ages[index] - self.relevance.penalty(observations[index], source.row)
            # a cell equal to a stated value was stated too
            kind = self.stated.get((type(value), value))
            return score if kind is None else max(score, self._stated(name, value, kind))
        if source.origin == "instruction":
            return self._stated(name, value, source.kind or "")
        if source.kind == "said" or (isinstance(value, str) and self._says(value)):
            return 5.0
        return 0.0

    def _says(self, value: str) -> bool:
        """Whether the instruction says an enum value written as a code ("on hold" for on_hold)."""
        spoken = re.sub(r"[_\s]+", " ", value).strip().lower()
        return len(spoken) >= 3 and spoken in self.said

    def _link(self, name: str, column: str, tool: str, integer: bool) -> float:
        """How well an observed column feeds a parameter, whatever the row."""
        key = (name, column, tool, integer)
        hit = self._links.get(key)
        if hit is not None:
            return hit
        is_key = name.endswith("_id")
        keyed = column == name or (column == "id" and _names(name, tool))
        # manager_id, head_id: a key no tool takes by that name, so another entity's by another name
        alias = column.endswith("_id") and column not in self.keys
        if integer and is_key and keyed:
            link = 5.0  # following a key just seen: the walk itself
        elif integer and is_key and alias:
            link = 4.0 + self.mentions.share(column)  # "the line manager of": manager_id
        elif integer and is_key:
            link = 2.0  # one entity's key for another's (a department id as an employee id)
        else:
            link = 1.0  # echoing a quantity or a text back: rarely new information
        self._links[key] = link
        return link

    def _stated(self, name: str, value: Any, kind: str) -> float:
        """How plausible an instruction value of ``kind`` is for parameter ``name``."""
        key = (name, kind, value)
        hit = self._statements.get(key)
        if hit is None:
            hit = self._statements[key] = self._statement(name, value, kind)
        return hit

    def _statement(self, name: str, value: Any, kind: str) -> float:
        text = str(value)
        if kind in ("number", "code") and text not in self.undated:
            return 0.5  # a piece of a date ("born 1945-10-15" is no year 1945)
        if kind == "code" and text.isdigit() and len(text) < 4:
            return 1.0  # a small number is an amount, not a code ("by 5%")
        wanted = [k for k, hints in _KIND_PARAMS.items() if any(h in name for h in hints)]
        if kind in wanted:
            return 5.0
        if wanted:
            # a parameter that wants an email (a name, a code) takes other text last
            return 3.0 if kind == "quoted" else 1.5
        if kind == "quoted":
            return 5.0
        # an amount the instruction states ("by 4%", "2500 miles") for a parameter that is no key
        return 4.0 if kind == "number" and not name.endswith("_id") else 2.0


def _best_combinations(scores: list[list[float]], limit: int) -> list[tuple[int, ...]]:
    """Index tuples into ``scores`` (each list best first) of the ``limit`` highest sums, best first."""
    if any(not s for s in scores):
        return []
    first = (0,) * len(scores)
    heap = [(-sum(s[0] for s in scores), first)]
    queued = {first}
    out: list[tuple[int, ...]] = []
    while heap and len(out) < limit:
        total, combination = heapq.heappop(heap)
        out.append(combination)
        for j, i in enumerate(combination):
            if i + 1 < len(scores[j]):
                step = (*combination[:j], i + 1, *combination[j + 1 :])
                if step not in queued:
                    queued.add(step)
                    heapq.heappush(heap, (total + scores[j][i] - scores[j][i + 1], step))
    return out


# --------------------------------------------------------------------------- search


def _key(calls: Sequence[ToolCall]) -> frozenset[tuple[str, str]]:
    """Which calls were made, whatever their order (reads commute; so do most writes)."""
    return frozenset((c.tool, repr(sorted(c.arguments.items()))) for c in calls)


@dataclass(frozen=True)
class _Node:
    """A state of the search: calls made (each succeeded), what they showed, and the call(s) to make next."""

    calls: tuple[ToolCall, ...] = ()
    observations: tuple[Observation, ...] = ()
    writes: tuple[ToolCall, ...] = ()
    pending: tuple[ToolCall, ...] = ()
    origin: _Origin | None = None
    effect: str = "read"

    def then(self, pending: tuple[ToolCall, ...], effect: str, origin: _Origin | None) -> _Node:
        """A child: this state with ``pending`` to make next."""
        return _Node(self.calls, self.observations, self.writes, pending, origin, effect)


@dataclass
class _Chain:
    """The children of one state of one kind (reads, writes, or a write's other rows), best first.

    A child is queued only when the one before it has been tried, at that
    one's cost plus ``step`` if it came to something; at most ``limit`` may.
    """

    children: list[_Node]
    step: float
    limit: int
    alive: int = 0


@dataclass(frozen=True)
class _Try:
    """A frontier entry: make ``node``'s pending calls (it is child ``index`` of ``chain``)."""

    node: _Node
    chain: _Chain | None = None
    index: int = 0


@dataclass(frozen=True)
class _Grow:
    """A frontier entry: rank the calls on offer at ``node`` (reached at ``cost``) and queue the best."""

    node: _Node
    cost: float


@dataclass
class _Search:
    """One search: the world, the budget, the frontier."""

    task: TaskSpec
    world: World
    budget: int
    max_depth: int
    branching: int
    spent: int = 0
    _counter: int = 0
    _state: tuple[ToolCall, ...] | None = None
    _frontier: list[tuple[float, int, _Try | _Grow]] = field(default_factory=list)
    _seen: set[frozenset[tuple[str, str]]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.space = ActionSpace(self.world.spec, per_parameter=10_000, per_tool=10_000)
        self.offer = _Offer(self.task, self.space)
        # a question wants an answer from what was looked up last; a request wants none
        self.asks = "?" in self.task.instruction

    def run(self) -> list[ToolCall] | None:
        """The calls (``submit`` included) of the first reward-1 sequence found, or None."""
        self._push(0.0, _Node(), None, 0)
        while self._frontier and self.spent < self.budget:
            cost, _, entry = heapq.heappop(self._frontier)
            if isinstance(entry, _Grow):
                self._grow(entry.cost, entry.node)
                continue
            alive, found = self._try(cost, entry.node)
            if found is not None:
                return found
            chain = entry.chain
            if chain is not None:
                chain.alive += alive
                if chain.alive < chain.limit:
                    self._push_from(chain, entry.index + 1, cost + (chain.step if alive else 0.0))
        return None

    def _queue(self, cost: float, entry: _Try | _Grow) -> None:
        self._counter += 1  # ties go first in, first out: deterministic
        heapq.heappush(self._frontier, (cost, self._counter, entry))

    def _push(self, cost: float, node: _Node, chain: _Chain | None, index: int) -> bool:
        """Queue ``node`` unless the same calls were queued before; whether it was queued."""
        key = _key([*node.calls, *node.pending])
        if key in self._seen:
            return False
        self._seen.add(key)
        self._queue(cost, _Try(node, chain, index))
        return True

    def _push_from(self, chain: _Chain, index: int, cost: float) -> None:
        """Queue the first child of ``chain`` from ``index`` on whose calls are new."""
        while index < len(chain.children):
            if self._push(cost, chain.children[index], chain, index):
                return
            index += 1

    def _restore(self, writes: tuple[ToolCall, ...]) -> None:
        """Put the world in the initial state plus ``writes`` (nothing to do when it is there)."""
        if self._state == writes:
            return
        self.world.reset(self.task, max_steps=self.budget + self.max_depth + 2)
        for call in writes:
            self.world.step(call)
            self.spent += 1
        self._state = writes

    def _try(self, cost: float, node: _Node) -> tuple[bool, list[ToolCall] | None]:
        """Make the node's pending calls and ask the reward: (came to something, the solution if found)."""
        self._restore(node.writes)
        calls, observations, writes = list(node.calls), list(node.observations), node.writes
        for call in node.pending:
            obs = self.world.step(call)
            self.spent += 1
            if not obs.ok:
                continue  # a failed call changes nothing (a bulk write skips the rows it refuses)
            if node.effect == "read" and (
                not obs.rows
                or any(o.rows == obs.rows and o.columns == obs.columns for o in observations)
            ):
                return False, None  # an empty look-up, or one seen already, leads nowhere new
            calls.append(call)
            observations.append(obs)
            if node.effect == "write":
                writes = (*writes, call)
                self._state = writes
        if node.pending and len(calls) == len(node.calls):
            return False, None
        answers: list[str | None] = []
        if node.effect == "write" or not node.pending:
            answers.append(None)  # the state changed (or is the initial one)
        if self.asks and node.effect == "read" and observations:
            answers += [a for a in self.space.answers(observations[-1:]) if a is not None]
        for answer in answers:
            if self.world.verify(answer).value == 1:
                return True, [*calls, self.space.submit(answer)]
        if len(calls) < self.max_depth:
            here = _Node(tuple(calls), tuple(observations), writes)
            if node.effect == "write" and node.origin is not None and len(node.pending) == 1:
                self._queue_other_rows(cost, here, node.pending[0], node.origin)
            self._queue(cost + 1.0 + self._after(here) / 3, _Grow(here, cost))
        return True, None

    @staticmethod
    def _after(here: _Node) -> float:
        # a request looks things up, then acts: a look-up after a write, or a second write of
        # another kind, is rarely what it wants (and a wrong write would copy the whole tree)
        return 3.0 if here.writes else 0.0

    def _grow(self, cost: float, here: _Node) -> None:
        """Rank the calls on offer at ``here`` (reached at ``cost``); queue the best read and write."""
        reads: list[_Node] = []
        writes: list[_Node] = []
        cap = self.branching * 6
        for candidate in self.offer.candidates(here.observations, cap):
            group = reads if candidate.effect == "read" else writes
            if len(group) < cap:
                origin = candidate.origin if candidate.effect == "write" else None
                group.append(here.then((candidate.call,), candidate.effect, origin))
        after = self._after(here)
        self._push_from(_Chain(reads, 1.0, self.branching), 0, cost + 1.0 + after)
        self._push_from(_Chain(writes, 1.0, self.branching * 3), 0, cost + 1.0 + after / 3)

    def _queue_other_rows(self, cost: float, here: _Node, write: ToolCall, origin: _Origin) -> None:
        """Offer ``write`` again on the other rows of the listing its row came from (bulk tasks).

        First every row that matches the instruction as well as the written
        one, at once; then each other row alone, the best matching first.
        """
        obs = here.observations[origin.index]
        if not obs.columns or origin.column not in obs.columns:
            return
        column = obs.columns.index(origin.column)
        rows = obs.rows or []
        value = write.arguments.get(origin.param)
        first = next((r for r, row in enumerate(rows) if row[column] == value), None)
        if first is None:
            return
        done = {repr(c.arguments.get(origin.param)) for c in here.writes if c.tool == write.tool}
        relevance = self.offer.relevance
        others = [r for r, row in enumerate(rows) if repr(row[column]) not in done]
        others.sort(key=lambda r: (relevance.gap(obs, r), relevance.edge(obs, r), r))
        alike = [r for r in others if relevance.gap(obs, r) == relevance.gap(obs, first)]
        children: list[_Node] = []
        if len(alike) > 1:
            room = self.max_depth - len(here.calls)
            batch = tuple(_with(write, origin.param, rows[r][column]) for r in alike[:room])
            children.append(here.then(batch, "write", origin))
        for r in others[: self.branching * 2]:
            children.append(
                here.then((_with(write, origin.param, rows[r][column]),), "write", origin)
            )
        self._push_from(_Chain(children, 1.0, self.branching * 2), 0, cost + 0.5)


def _with(call: ToolCall, param: str, value: Any) -> ToolCall:
    return ToolCall(call.tool, {**call.arguments, param: value})
