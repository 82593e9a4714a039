"""A bounded search solver over the :class:`~coevo.agents.action_space.ActionSpace`: proof that a task is solvable.

It never sees the reference solution or the verifier's SQL: it only calls
tools with values it has seen and asks the world's reward whether a
``submit`` now would earn 1 (as any rollout would learn at the end). States
are explored best-first by depth, children ranked by how well their
arguments' sources fit (a parameter fed from the latest observation's
matching column first), at most ``branching`` children per state, until a
budget of tool calls is spent.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from coevo.agents.action_space import Action, ActionSpace
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
        return f"unproven: no reward-1 sequence within a budget of {self.budget} tool calls"


_KIND_PARAMS = {
    "email": ("email",),
    "name": ("name", "title"),
    "code": ("number", "code", "sku", "locator", "ticket"),
}


def _score(action: Action) -> float:
    """How plausible an action is from where its arguments came from (higher first)."""
    total = 0.0
    for param, source in action.sources.items():
        value = action.call.arguments.get(param)
        if source.origin == "observation":
            column = (source.column or "").lower()
            entity = param.lower().removesuffix("_id")[:5]
            keyed = column == param.lower() or (
                column == "id" and param.endswith("_id") and entity in (source.tool or "").lower()
            )
            linked = param.endswith("_id") and (column == "id" or column.endswith("_id"))
            if isinstance(value, int) and keyed:
                total += 5 - source.age  # following a key just seen: the walk itself
            elif isinstance(value, int) and linked:
                total += 4 - source.age  # a key by another name (manager_id for an employee)
            elif isinstance(value, int):
                total += 2 - source.age
            else:
                total += 1  # echoing a text value back: rarely new information
        elif source.origin == "instruction":
            hints = _KIND_PARAMS.get(source.kind or "", ())
            total += 5 if any(h in param.lower() for h in hints) or source.kind == "quoted" else 2
        else:
            total += 5 if source.kind == "said" else 0
    return total / max(1, len(action.sources))


def search_solve(
    task: TaskSpec,
    world: World,
    *,
    budget: int = 5000,
    max_depth: int = 8,
    branching: int = 8,
) -> SearchResult:
    """Search for calls that earn reward 1 on ``task`` without its reference solution.

    Args:
        task: the task (its instruction and world; the solution is not read).
        world: the task's built world.
        budget: the most tool calls to execute (replays of a state's calls included).
        max_depth: the longest call sequence tried (``submit`` not counted).
        branching: children kept per state, best first.
    """
    spec = world.spec
    space = ActionSpace(spec)
    # a question wants an answer from what was looked up last; a request wants none
    asks = "?" in task.instruction
    effects = {t.name: t.effect for t in spec.tools}
    spent = 0
    counter = 0
    heap: list[tuple[int, float, int, list[ToolCall]]] = [(0, 0.0, 0, [])]
    seen: set[tuple[tuple[str, str], ...]] = set()
    while heap and spent < budget:
        depth, _, _, calls = heapq.heappop(heap)
        world.reset(task, max_steps=max_depth + 2)
        observations: list[Observation] = []
        dead = False
        for call in calls:
            obs = world.step(call)
            spent += 1
            if not obs.ok:
                dead = True
                break
            observations.append(obs)
        if dead:
            continue
        answers = space.answers(observations[-1:]) if asks else [None]
        for answer in answers:
            if world.verify(answer).value == 1:
                return SearchResult(True, [*calls, space.submit(answer)], spent, budget)
        if len(calls) >= max_depth:
            continue
        last = observations[-1] if observations else None
        if last is not None and last.rows is not None and not last.rows:
            continue  # an empty look-up leads nowhere
        children = sorted(space.actions(task.instruction, observations), key=_score, reverse=True)
        # a write is checked as soon as it is made, so many more of them are worth trying
        # (which of the listed rows to act on is exactly what a prover must find out)
        room = {"read": branching, "write": branching * 3}
        for action in children:
            effect = effects.get(action.call.tool, "read")
            if room[effect] <= 0:
                continue
            key = tuple(
                sorted(
                    (f"{c.tool}", repr(sorted(c.arguments.items()))) for c in [*calls, action.call]
                )
            )
            if action.call in calls or key in seen:
                continue
            seen.add(key)
            counter += 1
            heapq.heappush(heap, (depth + 1, -_score(action), counter, [*calls, action.call]))
            room[effect] -= 1
    return SearchResult(False, None, spent, budget)
