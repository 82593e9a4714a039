"""Mutation operators (ACCEL-style): a nearby harder or easier task made from an accepted one.

A task made by coevo keeps its :class:`~coevo.agents.synthesizers.planner.Plan`
in ``provenance["plan"]``; an operator edits the plan and realises it again in
the same world, so the child gets a fresh instruction, verifier (derived from
the goal, as always) and reference solution, and records where it came from
in ``lineage`` (``parent`` = the parent's task id, ``operator`` = the name).

=============== ========= ==================================================
operator        direction what it does
=============== ========= ==================================================
add_hop         harder    walk one foreign key further; the goal moves to the new row
add_distractor  harder    name the start row by a name it shares with others, or
                          rank a list instead of filtering it down to one row
add_condition   harder    turn an action into "do A; if it cannot be done, do B instead"
swap_target     same      the same task shape about another row of the same table
drop_step       easier    walk one foreign key less; the goal moves to the row before
drop_condition  easier    turn "do A; if it cannot be done, do B" into the one that applies
=============== ========= ==================================================

An operator that does not apply to a task (no hop to add, no twin to name)
raises :class:`~coevo.agents.synthesizers.planner.Unfit` saying why.
"""

from __future__ import annotations

import random
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from coevo.agents.synthesizers.catalog import Catalog
from coevo.agents.synthesizers.initial import initial_state
from coevo.agents.synthesizers.mining import catalog_of_world
from coevo.agents.synthesizers.planner import (
    Pick,
    Plan,
    PlanningDb,
    Unfit,
    goal_options,
    realize,
)
from coevo.agents.synthesizers.procedural.domains import DOMAINS
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import TaskSpec, WorldSpec

__all__ = ["OPERATORS", "Mutator", "Operator", "catalog_for"]


def catalog_for(world: WorldSpec, provenance: Mapping[str, Any]) -> Catalog:
    """The catalog tasks in ``world`` were planned with (a procedural domain's, or the miner's).

    Raises:
        Unfit: the task was not made by a coevo synthesizer that keeps plans.
    """
    maker = str(provenance.get("synthesizer", ""))
    if maker.startswith("procedural/") and world.domain in DOMAINS:
        return DOMAINS[world.domain].catalog
    if maker.startswith("miner"):
        return catalog_of_world(world)
    raise Unfit(
        f"the task was made by {maker or 'an unknown synthesizer'!r}, which keeps no plan; "
        "only tasks from coevo's procedural domains or miner can be mutated"
    )


@dataclass(frozen=True)
class Context:
    """What an operator may read: the catalog, a seeded rng, and the keys of a table's rows."""

    catalog: Catalog
    rng: random.Random
    keys: Callable[[str], list[Any]]


Candidates = Callable[[Plan, Context], Iterator[Plan]]


@dataclass(frozen=True)
class Operator:
    """A mutation operator: candidate plans near a parent's, tried in order until one realises.

    Attributes:
        name: the operator's name (``lineage.operator``).
        direction: ``"harder"``, ``"easier"`` or ``"same"``.
        candidates: parent plan, :class:`Context` → candidate child plans.
        description: one line for ``coevo mutate --help``.
        needs: what a task must offer for the operator to apply (said when it does not).
    """

    name: str
    direction: str
    candidates: Candidates
    description: str
    needs: str = ""


def _regoal(plan: Plan, catalog: Catalog, table: str, rng: random.Random) -> Iterator[Plan]:
    """``plan`` with each goal of its family on ``table`` (choices kept where they still apply)."""
    goals = goal_options(catalog, plan.family, table)
    rng.shuffle(goals)
    for goal in goals:
        choices: dict[str, Any] = {}
        for g in goal if plan.family != "question" else ():
            for name, values in catalog.actions[g].choices.items():
                kept = plan.choices.get(name)
                choices[name] = kept if kept in values else rng.choice(values)
        yield replace(plan, goal=goal, choices=choices)


def _end_table(plan: Plan, catalog: Catalog) -> str:
    return catalog.hops[plan.hops[-1]].target if plan.hops else catalog.anchors[plan.anchor].table


def _add_hop(plan: Plan, ctx: Context) -> Iterator[Plan]:
    catalog, rng = ctx.catalog, ctx.rng
    if plan.family == "bulk":
        return  # the last pick of a bulk task takes every row; nothing can follow it
    table = _end_table(plan, catalog)
    options = [i for i, h in enumerate(catalog.hops) if h.source == table]
    rng.shuffle(options)
    for index in options:
        hop = catalog.hops[index]
        picks: list[Pick | None] = [None]
        if hop.down:
            orders = [
                Pick(order=o, highest=h) for o in range(len(hop.orders)) for h in (True, False)
            ]
            rng.shuffle(orders)
            picks = [Pick(), *orders]
        for pick in picks:
            longer = replace(plan, hops=(*plan.hops, index), picks=(*plan.picks, pick))
            yield from _regoal(longer, catalog, hop.target, rng)


def _drop_step(plan: Plan, ctx: Context) -> Iterator[Plan]:
    catalog, rng = ctx.catalog, ctx.rng
    if not plan.hops:
        return
    shorter = replace(plan, hops=plan.hops[:-1], picks=plan.picks[:-1])
    if plan.family == "bulk":
        # the row before the last hop is a single row: act on it, not on "every" row
        shorter = replace(shorter, family="action")
    yield from _regoal(shorter, catalog, _end_table(shorter, catalog), rng)


def _add_distractor(plan: Plan, ctx: Context) -> Iterator[Plan]:
    catalog = ctx.catalog
    anchor = catalog.anchors[plan.anchor]
    if anchor.unique:
        for i, other in enumerate(catalog.anchors):
            if other.table == anchor.table and not other.unique:
                yield replace(plan, anchor=i)
    for n, pick in enumerate(plan.picks):
        if pick is None or pick.every:
            continue
        hop = catalog.hops[plan.hops[n]]
        if pick.filter is not None and pick.order is not None:
            yield replace(
                plan,
                picks=(
                    *plan.picks[:n],
                    replace(pick, filter=None, value=None),
                    *plan.picks[n + 1 :],
                ),
            )
        if pick.order is None and hop.orders:
            for o in range(len(hop.orders)):
                for highest in (True, False):
                    wider = replace(pick, order=o, highest=highest, filter=None, value=None)
                    yield replace(plan, picks=(*plan.picks[:n], wider, *plan.picks[n + 1 :]))


def _add_condition(plan: Plan, ctx: Context) -> Iterator[Plan]:
    catalog, rng = ctx.catalog, ctx.rng
    if plan.family != "action":
        return
    action = plan.goal[0]
    table = catalog.actions[action].table
    pairs = [pair for pair in goal_options(catalog, "conditional", table) if action in pair]
    rng.shuffle(pairs)
    for goal in pairs:
        choices = dict(plan.choices)
        for g in goal:
            for name, values in catalog.actions[g].choices.items():
                choices.setdefault(name, rng.choice(values))
        # a stated status on the last pick would give the branch away
        picks = list(plan.picks)
        if picks and picks[-1] is not None and picks[-1].filter is not None:
            picks[-1] = replace(picks[-1], filter=None, value=None)
        yield replace(plan, family="conditional", goal=goal, choices=choices, picks=tuple(picks))


def _drop_condition(plan: Plan, ctx: Context) -> Iterator[Plan]:
    if plan.family != "conditional":
        return
    for goal in plan.goal:  # only the branch that applies to the target realises
        yield replace(plan, family="action", goal=(goal,))


def _swap_target(plan: Plan, ctx: Context) -> Iterator[Plan]:
    table = ctx.catalog.anchors[plan.anchor].table
    others = [k for k in ctx.keys(table) if k != plan.row]
    ctx.rng.shuffle(others)
    for key in others[:200]:
        yield replace(plan, row=key)


OPERATORS: Final[Mapping[str, Operator]] = {
    op.name: op
    for op in (
        Operator(
            "add_hop",
            "harder",
            _add_hop,
            "walk one foreign key further; the goal moves to the new row",
            needs="a foreign key leading on from the last row to a row the same kind of goal can use (not after a bulk pick)",
        ),
        Operator(
            "add_distractor",
            "harder",
            _add_distractor,
            "name the start row by a shared name, or rank a list instead of filtering it to one row",
            needs="a start row named by a unique value that has a name-and-detail alternative, or a list pick without a ranking",
        ),
        Operator(
            "add_condition",
            "harder",
            _add_condition,
            "turn an action into 'do A; if it cannot be done, do B instead'",
            needs="an action on a table with a pair of actions that exclude each other (like cancel / open a return)",
        ),
        Operator(
            "swap_target",
            "same",
            _swap_target,
            "the same task shape about another row of the same table",
            needs="another row of the start table for which the same walk and goal work",
        ),
        Operator(
            "drop_step",
            "easier",
            _drop_step,
            "walk one foreign key less; the goal moves to the row before",
            needs="at least one foreign-key step, and a goal of the same family on the row before it",
        ),
        Operator(
            "drop_condition",
            "easier",
            _drop_condition,
            "turn 'do A; if it cannot be done, do B' into the one that applies",
            needs="a conditional task",
        ),
    )
}
"""Every mutation operator by name."""


class Mutator:
    """Applies mutation operators to tasks, keeping each world's initial state for reuse.

    Args:
        attempts: candidate plans tried per mutation before giving up.
    """

    def __init__(self, attempts: int = 200):
        self.attempts = attempts
        self._states: OrderedDict[str, sqlite3.Connection] = OrderedDict()

    def _state(self, world: WorldSpec) -> sqlite3.Connection:
        key = world.world_id
        if key not in self._states:
            self._states[key] = initial_state(world)
            while len(self._states) > 8:
                self._states.popitem(last=False)[1].close()
        self._states.move_to_end(key)
        return self._states[key]

    def mutate(
        self, task: TaskSpec, operator: str, *, seed: int, world: WorldSpec | None = None
    ) -> TaskSpec:
        """The child of ``task`` made by ``operator``.

        Args:
            task: an accepted task made by a coevo synthesizer (it keeps its plan).
            operator: a name in :data:`OPERATORS`.
            seed: the mutation's seed (same seed, same child).
            world: the task's world record when the task refers to it by id.

        Raises:
            KeyError: an unknown operator (the message lists them).
            Unfit: the operator does not apply to this task, or the task has no plan.
        """
        if operator not in OPERATORS:
            raise KeyError(
                f"unknown mutation operator {operator!r}; choose from {', '.join(OPERATORS)}"
            )
        spec = task.world if isinstance(task.world, WorldSpec) else world
        if spec is None or spec.world_id != task.world_id:
            raise Unfit(f"the task's world {task.world_id} is not given; pass its world record")
        if "plan" not in task.provenance:
            raise Unfit(
                "the task keeps no plan in provenance; only coevo-made tasks can be mutated"
            )
        plan = Plan.from_json(task.provenance["plan"])
        catalog = catalog_for(spec, task.provenance)
        conn = self._state(spec)
        rng = random.Random(derive_seed("mutate", operator, seed, task.task_id))
        op = OPERATORS[operator]
        db = PlanningDb(conn, catalog, spec)
        candidates = op.candidates(plan, Context(catalog, rng, db.keys_of))
        provenance = {k: v for k, v in task.provenance.items() if k != "plan"}
        provenance["mutation_seed"] = seed
        lineage = {"parent": task.task_id, "operator": operator}
        last = f"it needs {op.needs}"
        for n, candidate in enumerate(candidates):
            if n >= self.attempts:
                break
            try:
                child = realize(
                    candidate, catalog, conn, spec, provenance=provenance, lineage=lineage
                )
            except Unfit as exc:
                last = str(exc)
                continue
            if child.task_id == task.task_id or not _moves(op.direction, task, child):
                last = "the candidate was not " + op.direction
                continue
            return (
                child
                if isinstance(task.world, WorldSpec)
                else child.model_copy(update={"world": task.world_id})
            )
        raise Unfit(f"{operator} does not apply to this task ({last})")

    def close(self) -> None:
        """Close the kept initial states."""
        for conn in self._states.values():
            conn.close()
        self._states.clear()


def _moves(direction: str, parent: TaskSpec, child: TaskSpec) -> bool:
    """Whether the child is harder / easier than the parent, as the operator promises."""
    before, after = parent.features.get("difficulty", 0), child.features.get("difficulty", 0)
    if direction == "harder":
        return after > before
    if direction == "easier":
        return after < before
    return True
