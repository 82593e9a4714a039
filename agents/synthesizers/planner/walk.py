"""The walk: a plan's start row and foreign-key hops followed through the initial state.

Following a plan gives the rows it reaches, the reference solution's look-ups,
the phrase naming the target row, and the SQL expression that finds the
target's key again in a verifier; a pick that does not single out its row
raises :class:`~coevo.agents.synthesizers.planner.plan.Unfit`. A task's
features are measured on its walk (:func:`features_of`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from coevo.agents.synthesizers.catalog import Catalog, Hop, quote, sql_literal
from coevo.agents.synthesizers.planner.database import PlanningDb
from coevo.agents.synthesizers.planner.plan import BULK_SIZE, Pick, Plan, Unfit, slots
from coevo.arena.difficulty import difficulty
from coevo.arena.spec import ToolCall

__all__ = ["Walk", "extended", "features_of", "follow"]


def _tq(name: str) -> str:
    """A quoted identifier to embed in an expression that is later filled with ``{db}``."""
    return quote(name).replace("{", "{{").replace("}", "}}")


def _template_literal(value: Any) -> str:
    """An SQL literal to embed in an expression that is later filled with ``{db}``."""
    return sql_literal(value).replace("{", "{{").replace("}", "}}")


def _filter_sql(hop: Hop, pick: Pick) -> tuple[str, Any]:
    """The pick's filter as SQL over the listed table, with its value."""
    assert pick.filter is not None
    filt = hop.filters[pick.filter]
    value = filt.value if filt.value is not None else pick.value
    return f"({filt.column}) IS {_template_literal(value)}", value


def _filter_words(hop: Hop, pick: Pick) -> tuple[str, str]:
    """The filter's phrase, as (before the noun, after the noun)."""
    if pick.filter is None:
        return "", ""
    filt = hop.filters[pick.filter]
    value = filt.value if filt.value is not None else pick.value
    words = filt.words.format(value=value)
    return ("", " " + words) if filt.after else (words + " ", "")


@dataclass
class Walk:
    """A plan followed through the initial state (built by :func:`follow`, grown by :func:`extended`).

    Attributes:
        phrase: the rows reached, in words ("the most recent order of Ada Ode (ada@ex.io)").
        expr: SQL giving the key of the row reached, with ``{db}`` before each
            table name (empty after a pick of every row: see :attr:`every_exprs`).
        table: the table of the rows reached.
        rows: the rows reached (one, or several after a pick of every row).
        calls: the reference solution's look-ups so far.
        distractors: rows the agent is shown and must tell apart from the ones it wants.
        result_rows: rows the look-ups return in all.
        aggregates: comparisons the agent must make (ranking a list).
        every_exprs: after a pick of every row, one key expression per row reached.
        visited: (table, key) of every row the walk has been on.
    """

    phrase: str
    expr: str
    table: str
    rows: list[dict[str, Any]]
    calls: list[ToolCall]
    distractors: int = 0
    result_rows: int = 0
    aggregates: int = 0
    every_exprs: list[str] = field(default_factory=list)
    visited: set[tuple[str, Any]] = field(default_factory=set)

    def enter(self, table: str, rows: list[dict[str, Any]], key: str) -> None:
        """Move to ``rows`` of ``table``; a walk never comes back to a row it has been on."""
        keys = {(table, r.get(key)) for r in rows}
        if keys & self.visited:
            raise Unfit("the walk comes back to a row it has been on")
        self.visited |= keys
        self.rows = rows
        self.table = table


def follow(plan: Plan, catalog: Catalog, db: PlanningDb) -> Walk:
    """The walk of ``plan``: its anchor row, then each of its hops in order.

    Raises:
        Unfit: the plan does not walk through this world (the anchor names no
            single row, a pick is not unique, a hop does not start where the
            walk is, ...).
    """
    if not 0 <= plan.anchor < len(catalog.anchors):
        raise Unfit(f"anchor {plan.anchor} is not in the catalog")
    anchor = catalog.anchors[plan.anchor]
    table, key = anchor.table, db.key(anchor.table)
    row = db.row(table, plan.row)
    if row is None:
        raise Unfit(f"{table} has no row with key {plan.row!r}")
    value = row.get(anchor.column)
    if value is None or value == "":
        raise Unfit(f"the anchor row has no {anchor.column}")
    conditions = [f"{_tq(anchor.column)} IS {_template_literal(value)}"]
    for column in anchor.disambiguate:
        if row.get(column) is None:
            raise Unfit(f"the anchor row has no {column} to tell it apart")
        conditions.append(f"{_tq(column)} IS {_template_literal(row[column])}")
    where = " AND ".join(conditions)
    if db.value(f"SELECT count(*) FROM {quote(table)} WHERE {where.format(db='')}") != 1:
        raise Unfit("the anchor's description fits more than one row")
    same_name = db.value(f"SELECT count(*) FROM {quote(table)} WHERE {conditions[0].format(db='')}")
    if not db.shows(anchor.tool, {anchor.param: value}, key, row[key]):
        raise Unfit(f"{anchor.tool} does not show the row the task starts from")
    walk = Walk(
        phrase=anchor.phrase.format_map(slots(row)),
        expr=f"(SELECT {_tq(key)} FROM {{db}}{_tq(table)} WHERE {where})",
        table=table,
        rows=[row],
        calls=[ToolCall(anchor.tool, {anchor.param: db.coerce(anchor.tool, anchor.param, value)})],
        distractors=same_name - 1,
        result_rows=same_name,
        visited={(table, row[key])},
    )
    if len(plan.picks) != len(plan.hops):
        raise Unfit("the plan has a pick for each hop only when their counts match")
    for i, (index, pick) in enumerate(zip(plan.hops, plan.picks, strict=True)):
        _step(walk, catalog, index, pick, db, last=i == len(plan.hops) - 1)
    return walk


def _step(
    walk: Walk, catalog: Catalog, index: int, pick: Pick | None, db: PlanningDb, *, last: bool
) -> None:
    """Take one hop of a walk (in place)."""
    if not 0 <= index < len(catalog.hops):
        raise Unfit(f"hop {index} is not in the catalog")
    hop = catalog.hops[index]
    if hop.source != walk.table or len(walk.rows) != 1:
        raise Unfit(f"hop {hop.tool} does not start at {walk.table}")
    if hop.down:
        if pick is None:
            raise Unfit("a down hop needs a pick")
        if pick.every and not last:
            raise Unfit("only the last hop may pick every row")
        _down(walk, hop, pick, db)
    else:
        _up(walk, hop, db)


def extended(
    walk: Walk, catalog: Catalog, index: int, pick: Pick | None, db: PlanningDb, *, last: bool
) -> Walk:
    """A copy of ``walk`` one hop further (the original is left as it was).

    Args:
        walk: the walk so far.
        catalog: the catalog the plan indexes.
        index: the hop's index in the catalog.
        pick: how a down hop picks its row(s) (``None`` for an up hop).
        db: the planning database of the world.
        last: whether this is the plan's last hop (only the last may pick every row).

    Raises:
        Unfit: the hop cannot be taken from here, or its pick is not unique.
    """
    longer = replace(
        walk,
        rows=list(walk.rows),
        calls=list(walk.calls),
        every_exprs=list(walk.every_exprs),
        visited=set(walk.visited),
    )
    _step(longer, catalog, index, pick, db, last=last)
    return longer


def _down(walk: Walk, hop: Hop, pick: Pick, db: PlanningDb) -> None:
    source = walk.rows[0]
    parent = source[db.key(hop.source)]
    listed = db.children(hop, parent)
    if not listed:
        raise Unfit(f"no {hop.plural} for this {hop.source} row")
    if len(listed) > hop.limit:
        raise Unfit(f"{len(listed)} {hop.plural} is more than {hop.tool} shows")
    conditions = [f"{_tq(hop.fk)} IS {walk.expr}"]
    where_local = ""
    if pick.filter is not None:
        if not 0 <= pick.filter < len(hop.filters):
            raise Unfit("the pick's filter is not in the catalog")
        clause, _ = _filter_sql(hop, pick)
        conditions.append(clause)
        where_local = f"AND {clause.format(db='')}"
    candidates = db.children(hop, parent, where_local)
    key = db.key(hop.target)
    before, after = _filter_words(hop, pick)
    if pick.every:
        low, high = BULK_SIZE
        if not low <= len(candidates) <= high:
            raise Unfit(f"{len(candidates)} matching {hop.plural}, not {low}–{high}")
        base = " AND ".join(conditions)
        walk.every_exprs = [
            f"(SELECT {_tq(key)} FROM {{db}}{_tq(hop.target)} WHERE {base} "
            f"ORDER BY {_tq(key)} LIMIT 1 OFFSET {n})"
            for n in range(len(candidates))
        ]
        walk.phrase = f"every {before}{hop.noun}{after} {hop.of} {walk.phrase}"
        walk.enter(hop.target, candidates, key)
        walk.expr = ""
        walk.distractors += len(listed) - len(candidates)  # listed rows the agent must skip
    elif pick.order is not None:
        if not 0 <= pick.order < len(hop.orders):
            raise Unfit("the pick's order is not in the catalog")
        order = hop.orders[pick.order]
        direction = "DESC" if pick.highest else "ASC"
        ranked = db.rows(
            f"SELECT {quote(key)}, ({order.expr.format(db='')}) FROM {quote(hop.target)} "
            f"WHERE {quote(hop.fk)} IS ? {where_local} AND ({order.expr.format(db='')}) IS NOT NULL "
            f"ORDER BY 2 {direction} LIMIT 2",
            (parent,),
        )
        if not ranked:
            raise Unfit(f"no {hop.plural} with a value to rank by")
        if len(ranked) == 2 and ranked[0][1] == ranked[1][1]:
            raise Unfit(
                f"two {hop.plural} tie for {order.highest if pick.highest else order.lowest}"
            )
        superlative = order.highest if pick.highest else order.lowest
        conditions.append(f"({order.expr}) IS NOT NULL")
        walk.expr = (
            f"(SELECT {_tq(key)} FROM {{db}}{_tq(hop.target)} WHERE {' AND '.join(conditions)} "
            f"ORDER BY ({order.expr}) {direction} LIMIT 1)"
        )
        walk.enter(hop.target, [r for r in candidates if r[key] == ranked[0][0]], key)
        walk.phrase = f"the {superlative} {before}{hop.noun}{after} {hop.of} {walk.phrase}"
        ranked_rows = db.value(
            f"SELECT count(*) FROM {quote(hop.target)} "
            f"WHERE {quote(hop.fk)} IS ? {where_local} AND ({order.expr.format(db='')}) IS NOT NULL",
            (parent,),
        )
        walk.distractors += ranked_rows - 1  # the rows compared with the one picked
        if ranked_rows > 1:  # ranking a single row asks for no comparison
            walk.aggregates += 1
    else:
        if len(candidates) != 1:
            raise Unfit(f"{len(candidates)} {hop.plural} match where exactly one must")
        walk.expr = (
            f"(SELECT {_tq(key)} FROM {{db}}{_tq(hop.target)} WHERE {' AND '.join(conditions)})"
        )
        walk.enter(hop.target, candidates, key)
        walk.phrase = f"the {before}{hop.noun}{after} {hop.of} {walk.phrase}"
    walk.result_rows += len(listed)
    walk.calls.append(ToolCall(hop.tool, {hop.param: db.coerce(hop.tool, hop.param, parent)}))


def _up(walk: Walk, hop: Hop, db: PlanningDb) -> None:
    source = walk.rows[0]
    reference = source.get(hop.fk)
    if reference is None:
        raise Unfit(f"this {hop.source} row has no {hop.fk}")
    row = db.row(hop.target, reference)
    if row is None:
        raise Unfit(f"{hop.fk} = {reference!r} references no {hop.target} row")
    walk.expr = (
        f"(SELECT {_tq(hop.fk)} FROM {{db}}{_tq(hop.source)} "
        f"WHERE {_tq(db.key(hop.source))} IS {walk.expr})"
    )
    walk.enter(hop.target, [row], db.key(hop.target))
    walk.phrase = f"the {hop.noun} {hop.of} {walk.phrase}"
    walk.result_rows += 1
    walk.calls.append(ToolCall(hop.tool, {hop.param: db.coerce(hop.tool, hop.param, reference)}))


def features_of(walk: Walk, family: str) -> dict[str, float]:
    """A task's features, known once its walk is followed and its family chosen."""
    writes = 0 if family == "question" else len(walk.rows) if family == "bulk" else 1
    features: dict[str, float] = {
        "difficulty": 0.0,
        "steps": len(walk.calls) + writes + 1,
        "hops": len(walk.calls),
        "writes": writes,
        "distractors": walk.distractors,
        "branching": 1 if family == "conditional" else 0,
        "result_rows": walk.result_rows,
        "aggregates": walk.aggregates,
        "question": 1 if family == "question" else 0,
    }
    features["difficulty"] = difficulty(features)
    return features
