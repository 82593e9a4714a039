"""The sampler: tasks drawn in one world for a :class:`~coevo.agents.synthesizers.planner.plan.Target`.

:class:`TaskSampler` walks goal-directed from a drawn anchor row, drawing a
pick for each down hop (the helpers below), then a goal that applies to the
rows reached, and realises the plan; a draw that does not fit is redrawn.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any, Final

from coevo.agents.synthesizers.catalog import Catalog, Filter, Hop, quote
from coevo.agents.synthesizers.planner.database import PlanningDb
from coevo.agents.synthesizers.planner.goals import goal_options, holds
from coevo.agents.synthesizers.planner.plan import BULK_SIZE, Pick, Plan, Target, Unfit
from coevo.agents.synthesizers.planner.realization import realize
from coevo.agents.synthesizers.planner.walk import Walk, extended, features_of, follow
from coevo.arena.spec import TaskSpec, WorldSpec

__all__ = ["TaskSampler"]


def _draw_choices(
    rng: random.Random, catalog: Catalog, goal: tuple[int, ...], family: str
) -> dict[str, Any]:
    if family == "question":
        return {}
    choices: dict[str, Any] = {}
    for g in goal:
        for name, values in catalog.actions[g].choices.items():
            choices.setdefault(name, rng.choice(values))
    return choices


def _filter_value(db: PlanningDb, hop: Hop, filt: Filter, row: Mapping[str, Any]) -> Any:
    """The value a filter's column has on ``row`` (computed by SQL for an expression)."""
    value = _column_value(row, filt.column)
    if value is None and filt.column.strip('"') not in row:
        key = db.key(hop.target)
        value = db.value(
            f"SELECT ({filt.column.format(db='')}) FROM {quote(hop.target)} WHERE {quote(key)} IS ?",
            (row.get(key),),
        )
    return value


def _draw_pick(
    rng: random.Random,
    hop: Hop,
    listed: list[dict[str, Any]],
    db: PlanningDb,
    *,
    every: bool,
    unfiltered: bool,
    filter_share: float = 0.6,
    order_share: float | None = None,
) -> Pick:
    """A pick for a down hop, drawn so that it usually singles out one row.

    ``unfiltered``: state no condition on the rows (the last hop of a
    conditional task, where a stated status would give the branch away).
    ``filter_share``: how often a hop with filters states one. ``order_share``:
    how often a hop with orders picks by an extreme value; ``None`` (the
    default) ranks whenever more than one row is listed, and 30% of the time
    when only one is.
    """
    if every:
        return _draw_every(rng, hop, listed, db)
    intended = rng.choice(listed)
    filter_index: int | None = None
    value: Any = None
    if hop.filters and not unfiltered and rng.random() < filter_share:
        filter_index = rng.randrange(len(hop.filters))
        filt = hop.filters[filter_index]
        seen = _filter_value(db, hop, filt, intended)
        value = None if filt.value is not None else seen
        if seen is None or (filt.value is not None and seen != filt.value):
            filter_index, value = None, None  # a condition the intended row does not meet
    if order_share is None:
        ranked = bool(hop.orders) and (len(listed) > 1 or rng.random() < 0.3)
    else:
        ranked = bool(hop.orders) and rng.random() < order_share
    order_index = rng.randrange(len(hop.orders)) if ranked else None
    return Pick(filter=filter_index, value=value, order=order_index, highest=rng.random() < 0.6)


def _draw_every(rng: random.Random, hop: Hop, listed: list[dict[str, Any]], db: PlanningDb) -> Pick:
    """A pick of every row matching a stated condition, drawn so that 2–4 rows match."""
    low, high = BULK_SIZE
    options: list[Pick] = []
    for index, filt in enumerate(hop.filters):
        if filt.value is not None:
            count = sum(1 for r in listed if _filter_value(db, hop, filt, r) == filt.value)
            if low <= count <= high:
                options.append(Pick(filter=index, every=True))
            continue
        counts: dict[Any, int] = {}
        for r in listed:
            v = _filter_value(db, hop, filt, r)
            if v is not None:
                counts[v] = counts.get(v, 0) + 1
        options += [
            Pick(filter=index, value=v, every=True)
            for v, n in sorted(counts.items(), key=lambda kv: repr(kv[0]))
            if low <= n <= high
        ]
    if low <= len(listed) <= high and (not options or rng.random() < 0.25):
        return Pick(every=True)
    return rng.choice(options) if options else Pick(every=True)


def _column_value(row: Mapping[str, Any], column: str) -> Any:
    bare = column.strip('"').replace('""', '"')
    return row.get(bare, row.get(column))


class TaskSampler:
    """Draws tasks in one world for a :class:`Target` (family, level, feature ranges).

    Walks are goal-directed: a hop is only taken when the walk can still end,
    at the chosen depth, on a table where the family has a goal; a draw that
    still does not fit (an ambiguous pick, a failed precondition, features
    outside the target) is redrawn.

    Args:
        catalog: the world's catalog.
        conn: the world's initial state (see :func:`~coevo.agents.synthesizers.initial.initial_state`).
        world: the world record the tasks refer to.
    """

    MAX_DEPTH: Final = 5
    """The most hops a drawn walk takes."""

    def __init__(self, catalog: Catalog, conn: sqlite3.Connection, world: WorldSpec):
        self.catalog = catalog
        self.conn = conn
        self.world = world
        self.db = PlanningDb(conn, catalog, world)
        self._reach: dict[str, list[set[str]]] = {}
        self._goal_cache: dict[tuple[str, str], list[tuple[int, ...]]] = {}
        self._goal_tables: dict[str, set[str]] = {}
        self._reachable: dict[tuple[Any, ...], list[str]] = {}
        self._depth_cache: dict[tuple[Any, ...], list[int]] = {}

    def _applicable_goal(
        self,
        rng: random.Random,
        family: str,
        table: str,
        goals: list[tuple[int, ...]],
        walk: Walk,
    ) -> tuple[tuple[int, ...] | None, dict[str, Any]]:
        """A goal whose actions' preconditions hold on the rows the walk reached, with its choices.

        Goals are tried in a seeded order, so every goal of the table gets its
        turn instead of the ones that apply most often crowding the rest out.
        """
        order = list(goals)
        rng.shuffle(order)
        key = self.db.key(table)
        for goal in order:
            choices = _draw_choices(rng, self.catalog, goal, family)
            if family == "question":
                return goal, choices
            applies = [
                [holds(self.db, self.catalog.actions[g], table, row[key], choices) for g in goal]
                for row in walk.rows
            ]
            if family == "conditional":
                if sum(applies[0]) == 1:
                    return goal, choices
            elif all(a[0] for a in applies):
                return goal, choices
        return None, {}

    def _reachable_goal_tables(self, family: str, target: Target) -> list[str]:
        """The tables with ``family`` goals that a walk of a wanted length reaches from an anchor."""
        key = (family, tuple(sorted(target.ranges.items())))
        if key not in self._reachable:
            self._reachable[key] = [
                table
                for table in sorted(self._tables_with_goals(family))
                if any(
                    self.db.keys_of(a.table) and self._depths(family, a.table, target, table)
                    for a in self.catalog.anchors
                )
            ]
        return self._reachable[key]

    def _tables_with_goals(self, family: str) -> set[str]:
        if family not in self._goal_tables:
            self._goal_tables[family] = _goal_tables(self.catalog, family)
        return self._goal_tables[family]

    def _goals(self, family: str, table: str) -> list[tuple[int, ...]]:
        key = (family, table)
        if key not in self._goal_cache:
            self._goal_cache[key] = goal_options(self.catalog, family, table)
        return self._goal_cache[key]

    def reach(self, family: str, goal_table: str | None = None) -> list[set[str]]:
        """For each depth d, the tables from which a walk of d hops can end at a goal of ``family``.

        With ``goal_table``, walks that end at that table only.
        """
        cache = family if goal_table is None else f"{family}\0{goal_table}"
        if cache not in self._reach:
            goal_tables = self._tables_with_goals(family)
            if goal_table is not None:
                goal_tables = goal_tables & {goal_table}
            levels: list[set[str]] = [set() if family == "bulk" else set(goal_tables)]
            for depth in range(1, self.MAX_DEPTH + 1):
                found = set()
                for hop in self.catalog.hops:
                    if depth == 1 and family == "bulk":
                        if hop.down and hop.target in goal_tables:
                            found.add(hop.source)
                    elif hop.target in levels[depth - 1]:
                        found.add(hop.source)
                levels.append(found)
            self._reach[cache] = levels
        return self._reach[cache]

    def _depths(self, family: str, table: str, target: Target, goal_table: str | None) -> list[int]:
        key = (family, table, goal_table, tuple(sorted(target.ranges.items())))
        if key not in self._depth_cache:
            self._depth_cache[key] = self._walk_depths(family, table, target, goal_table)
        return self._depth_cache[key]

    def _walk_depths(
        self, family: str, table: str, target: Target, goal_table: str | None
    ) -> list[int]:
        low, high = target.bounds("hops", (1, self.MAX_DEPTH + 1))
        reach = self.reach(family, goal_table)
        depths = [d for d in range(max(low - 1, 0), min(high, len(reach))) if table in reach[d]]
        if "difficulty" in target.ranges:
            lo, hi = target.ranges["difficulty"]
            # a rough guess of the difficulty a walk of depth d gives; draws are checked anyway
            extra = {"question": 0.0, "action": 1.0, "conditional": 3.0, "bulk": 2.0}[family]
            near = [d for d in depths if lo - 2 <= 2.5 + 1.5 * d + extra <= hi + 2]
            depths = near or depths
        return depths

    def _next_hop(
        self,
        rng: random.Random,
        family: str,
        table: str,
        row: Mapping[str, Any],
        remaining: int,
        previous: Hop | None,
        taken: Sequence[int],
        goal_table: str | None,
    ) -> int | None:
        reach = self.reach(family, goal_table)
        options = [
            i
            for i, h in enumerate(self.catalog.hops)
            # "the manager of the manager" reads fine; a third time does not
            if taken.count(i) < 2
            if h.source == table
            # down then straight back up returns to the same row; up then down reaches siblings
            and not (
                previous
                and previous.down
                and not h.down
                and h.target == previous.source
                and h.fk == previous.fk
            )
            and (
                (
                    h.down
                    and (
                        h.target == goal_table
                        if goal_table
                        else h.target in self._tables_with_goals(family)
                    )
                )
                if family == "bulk" and remaining == 1
                else h.target in reach[remaining - 1]
            )
        ]
        rng.shuffle(options)
        for index in options:
            hop = self.catalog.hops[index]
            if hop.down:
                if self.db.value(
                    f"SELECT EXISTS (SELECT 1 FROM {quote(hop.target)} WHERE {quote(hop.fk)} IS ?)",
                    (row[self.db.key(table)],),
                ):
                    return index
            elif row.get(hop.fk) is not None:
                return index
        return None

    def sample(
        self,
        rng: random.Random,
        target: Target,
        *,
        attempts: int = 400,
        provenance: Mapping[str, Any] | None = None,
        filter_share: float = 0.6,
        order_share: float | None = None,
    ) -> TaskSpec:
        """A task drawn for ``target``.

        Args:
            rng: the draws' randomness.
            target: the families and feature ranges to meet.
            attempts: draws before giving up.
            provenance: kept in the task's provenance (with its plan).
            filter_share: how often a down hop with filters states one (0: never, 1: always).
            order_share: how often a down hop with orders picks by an extreme value
                ("the most recent"); ``None``: whenever more than one row is listed.
                Both knobs' defaults draw exactly as before they existed.

        Raises:
            Unfit: no task meeting the target was found in ``attempts`` draws;
                the message names the target and the commonest misses.
        """
        catalog, db = self.catalog, self.db
        reasons: dict[str, int] = {}

        def miss(reason: str) -> None:
            reasons[reason] = reasons.get(reason, 0) + 1

        wants_distractors = target.ranges.get("distractors", (0, 0))[0] > 0 or (
            target.ranges.get("difficulty", (0, 0))[0] >= 5
        )
        families = list(target.families)
        rng.shuffle(families)
        for attempt in range(attempts):
            # one family at a time, so a family that is easy to draw does not crowd out the others
            family = families[attempt * len(families) // attempts]
            # half the draws choose the table the task ends at first, so every table's goals
            # get their share (short walks to the start table's own goals are the easiest to
            # draw and would dominate); the other half walk to whichever goal they reach
            # (cheaper: more draws succeed)
            goal_tables = self._reachable_goal_tables(family, target)
            if not goal_tables:
                miss(f"no {family} walk of the wanted length")
                continue
            goal_table = rng.choice(goal_tables) if rng.random() < 0.5 else None
            anchors = [
                i
                for i, a in enumerate(catalog.anchors)
                if db.keys_of(a.table) and self._depths(family, a.table, target, goal_table)
            ]
            if not anchors:
                miss(f"no {family} walk of the wanted length")
                continue
            twins = [i for i in anchors if not catalog.anchors[i].unique]
            anchor_index = rng.choice(
                twins if twins and wants_distractors and rng.random() < 0.7 else anchors
            )
            anchor = catalog.anchors[anchor_index]
            row_key = rng.choice(db.keys_of(anchor.table))
            depth = rng.choice(self._depths(family, anchor.table, target, goal_table))
            hops: list[int] = []
            picks: list[Pick | None] = []
            table = anchor.table
            row: Mapping[str, Any] = db.row(table, row_key) or {}
            previous: Hop | None = None
            failed = None
            try:
                walk = follow(Plan(family, anchor_index, row_key), catalog, db)
            except Unfit as exc:
                miss(str(exc).split(" (")[0])
                continue
            for step in range(depth):
                index = self._next_hop(
                    rng, family, table, row, depth - step, previous, hops, goal_table
                )
                if index is None:
                    failed = "dead end"
                    break
                hop = catalog.hops[index]
                pick: Pick | None = None
                if hop.down:
                    listed = db.children(hop, row[db.key(table)])
                    last = step == depth - 1
                    pick = _draw_pick(
                        rng,
                        hop,
                        listed,
                        db,
                        every=family == "bulk" and last,
                        unfiltered=family == "conditional" and last,
                        filter_share=filter_share,
                        order_share=order_share,
                    )
                hops.append(index)
                picks.append(pick)
                try:
                    walk = extended(walk, catalog, index, pick, db, last=step == depth - 1)
                except Unfit as exc:
                    failed = str(exc).split(" (")[0]
                    break
                row = walk.rows[0]
                table = hop.target
                previous = hop
            if failed:
                miss(failed)
                continue
            goals = self._goals(family, table)
            if not goals:
                miss(f"no {family} goal on {table}")
                continue
            if not target.admits(features_of(walk, family)):
                miss("features outside the target")
                continue
            goal, choices = self._applicable_goal(rng, family, table, goals, walk)
            if goal is None:
                miss(f"no {family} goal applies to the rows reached")
                continue
            plan = Plan(
                family=family,
                anchor=anchor_index,
                row=row_key,
                hops=tuple(hops),
                picks=tuple(picks),
                goal=goal,
                choices=choices,
            )
            try:
                task = realize(
                    plan,
                    catalog,
                    self.conn,
                    self.world,
                    provenance=provenance,
                    db=db,
                    walk=walk,
                )
            except Unfit as exc:
                miss(str(exc).split(" (")[0])
                continue
            return task  # its features are the ones admitted above (same walk, same family)
        common = ", ".join(
            f"{r} ({n})" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:3]
        )
        raise Unfit(
            f"no {'/'.join(target.families)} task meeting {dict(target.ranges)} found in {attempts} "
            f"draws in {self.world.domain} (commonest misses: {common or 'none'}); relax the target "
            "or choose another domain"
        )


def _goal_tables(catalog: Catalog, family: str) -> set[str]:
    return {t for t in catalog.keys if goal_options(catalog, family, t)}
