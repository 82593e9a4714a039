"""Task families over a :class:`~coevo.agents.synthesizers.catalog.Catalog`: plans, realisation, difficulty.

A :class:`Plan` is a task's structure as data: which row the instruction
names, which foreign keys the agent must walk (and how each step picks its
row: the only one, the one with a stated status, the most recent, every one
that matches), and what it must do at the end (answer a question, act, act
conditionally). :func:`realize` turns a plan into a ``coevo.task/1`` record
against a world's initial state:

* the **instruction** states the goal and how to recognise the rows, never a key;
* the **verifier** restates the goal in SQL over the ``initial`` schema (the
  target row is found by the same picks, as a subquery) and frames exactly the
  rows and columns the goal may change; it is derived from the plan and the
  initial state, never from running the solution;
* the **reference solution** makes the look-ups a careful agent would make,
  with every key copied from an earlier observation;
* the **features** are measured on the realised task.

:class:`TaskSampler` draws tasks for a family and a difficulty target;
mutation operators (:mod:`coevo.agents.synthesizers.mutation`) edit plans.
"""

from __future__ import annotations

import functools
import math
import random
import re
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final

from coevo.agents.synthesizers.catalog import Action, Catalog, Filter, Hop, quote, sql_literal
from coevo.arena.difficulty import LEVELS, difficulty
from coevo.arena.errors import CoevoError
from coevo.arena.spec import (
    SUBMIT,
    CheckSpec,
    FrameColumns,
    Lineage,
    TaskSpec,
    ToolCall,
    VerifierSpec,
    WorldSpec,
)

__all__ = [
    "FAMILIES",
    "FEATURE_NAMES",
    "Pick",
    "Plan",
    "Target",
    "TaskSampler",
    "Unfit",
    "realize",
]

FAMILIES: Final = ("question", "action", "conditional", "bulk")
"""Task families: answer a question, act on one row, act on a condition, act on every matching row."""

FEATURE_NAMES: Final = (
    "steps",
    "hops",
    "writes",
    "distractors",
    "branching",
    "result_rows",
    "aggregates",
    "question",
)
"""Features every generated task carries (all measured on the task itself)."""

FAMILY_LEVELS: Final[Mapping[str, tuple[int, ...]]] = {
    "question": (1, 2, 3, 4, 5),
    "action": (1, 2, 3, 4, 5),
    "bulk": (2, 3, 4, 5),
    "conditional": (3, 4, 5),
}
"""The levels each family spans: a conditional task has at least four steps and a branch, so it starts at 3."""

LEVEL_FAMILIES: Final[Mapping[int, tuple[str, ...]]] = {
    level: tuple(f for f in FAMILIES if level in FAMILY_LEVELS[f]) for level in LEVELS
}
"""The families a level draws from when the request names none."""

BULK_SIZE: Final = (2, 4)


class Unfit(CoevoError):
    """A plan cannot be realised in this world (ambiguous pick, failed precondition, ...)."""


@dataclass(frozen=True)
class Pick:
    """How a down hop picks its row(s) from the listed rows.

    Attributes:
        filter: index into the hop's filters, or ``None``.
        value: the filter's value when the filter leaves it open.
        order: index into the hop's orders, or ``None`` (then exactly one row may remain).
        highest: take the highest value of the order (else the lowest).
        every: take every remaining row (bulk tasks, last hop only).
    """

    filter: int | None = None
    value: Any = None
    order: int | None = None
    highest: bool = True
    every: bool = False


@dataclass(frozen=True)
class Plan:
    """A task's structure: start row, foreign-key walk, goal.

    Attributes:
        family: one of :data:`FAMILIES`.
        anchor: index into the catalog's anchors.
        row: the key of the anchor row.
        hops: indices into the catalog's hops, in walking order.
        picks: for each hop, its :class:`Pick` (``None`` for an up hop).
        goal: an attribute index (question) or action indices (one, or first
            choice then fallback for a conditional task).
        choices: the values the instruction states for the actions' choices.
    """

    family: str
    anchor: int
    row: Any
    hops: tuple[int, ...] = ()
    picks: tuple[Pick | None, ...] = ()
    goal: tuple[int, ...] = ()
    choices: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON-ready data (kept in a task's ``provenance``)."""
        data = asdict(self)
        data["hops"] = list(self.hops)
        data["goal"] = list(self.goal)
        data["picks"] = [None if p is None else asdict(p) for p in self.picks]
        data["choices"] = dict(self.choices)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Plan:
        """The plan stored by :meth:`to_json`."""
        return cls(
            family=data["family"],
            anchor=int(data["anchor"]),
            row=data["row"],
            hops=tuple(int(h) for h in data.get("hops", ())),
            picks=tuple(None if p is None else Pick(**p) for p in data.get("picks", ())),
            goal=tuple(int(g) for g in data.get("goal", ())),
            choices=dict(data.get("choices") or {}),
        )


@dataclass(frozen=True)
class Target:
    """What a generator should aim for: feature ranges (inclusive) and the families to use.

    Attributes:
        ranges: feature name → (low, high); missing features are free.
        families: the families to draw from.
    """

    ranges: Mapping[str, tuple[float, float]]
    families: tuple[str, ...]

    @classmethod
    def of(
        cls,
        level: int | None = None,
        features: Mapping[str, tuple[float | None, float | None]] | None = None,
        families: Sequence[str] | None = None,
    ) -> Target:
        """The target for a level (1–5) and/or explicit feature ranges (which win).

        Raises:
            ValueError: an unknown level or family, or a range whose low end is above its high end.
        """
        if level is not None and level not in LEVELS:
            raise ValueError(f"level {level} is not one of {sorted(LEVELS)}")
        ranges: dict[str, tuple[float, float]] = dict(LEVELS[level]) if level else {}
        for name, (low, high) in (features or {}).items():
            lo = float("-inf") if low is None else float(low)
            hi = float("inf") if high is None else float(high)
            if lo > hi:
                raise ValueError(f"features.{name}: low {low} is above high {high}")
            ranges[name] = (lo, hi)
        chosen = tuple(families) if families else LEVEL_FAMILIES[level] if level else FAMILIES
        unknown = [f for f in chosen if f not in FAMILIES]
        if unknown:
            raise ValueError(
                f"unknown task family {unknown[0]!r}; choose from {', '.join(FAMILIES)}"
            )
        if level is not None:
            chosen = tuple(f for f in chosen if level in FAMILY_LEVELS[f])
            if not chosen:
                spans = "; ".join(f"{f}: {min(FAMILY_LEVELS[f])}–5" for f in families or ())
                raise ValueError(f"no family asked for reaches level {level} ({spans})")
        return cls(ranges=ranges, families=chosen)

    def admits(self, features: Mapping[str, float]) -> bool:
        """Whether measured features lie in every range."""
        return all(lo <= features.get(name, 0) <= hi for name, (lo, hi) in self.ranges.items())

    def bounds(self, name: str, default: tuple[int, int]) -> tuple[int, int]:
        """A feature's range clipped to ``default`` (for drawing integers); may be empty (low > high)."""
        lo, hi = self.ranges.get(name, default)
        lo_i = max(default[0], math.ceil(lo)) if lo != float("-inf") else default[0]
        hi_i = min(default[1], math.floor(hi)) if hi != float("inf") else default[1]
        return lo_i, hi_i


# --------------------------------------------------------------------------- the walk


class _Db:
    """Read queries against a world's initial state (a plain SQLite connection)."""

    def __init__(self, conn: sqlite3.Connection, catalog: Catalog, world: WorldSpec | None = None):
        self.conn = conn
        self.conn.row_factory = sqlite3.Row
        self.catalog = catalog
        self.tools = {t.name: t for t in world.tools} if world is not None else {}
        self._keys: dict[str, list[Any]] = {}
        # the initial state never changes, so every answer can be kept
        self._rows: dict[tuple[str, Any], dict[str, Any] | None] = {}
        self._values: dict[tuple[str, tuple[Any, ...]], Any] = {}
        self._children: dict[tuple[str, str, Any, str], list[dict[str, Any]]] = {}

    def key(self, table: str) -> str:
        return self.catalog.keys[table]

    def columns(self, table: str) -> str:
        """``*``, with the rowid first when the table's key is its rowid (tables without a one-column key)."""
        return "rowid AS rowid, *" if self.key(table) == "rowid" else "*"

    def row(self, table: str, key: Any) -> dict[str, Any] | None:
        cached = (table, key)
        if cached not in self._rows:
            found = self.conn.execute(
                f"SELECT {self.columns(table)} FROM {quote(table)} WHERE {quote(self.key(table))} IS ?",
                (key,),
            ).fetchone()
            self._rows[cached] = dict(found) if found is not None else None
        return self._rows[cached]

    def keys_of(self, table: str) -> list[Any]:
        if table not in self._keys:
            self._keys[table] = [
                r[0]
                for r in self.conn.execute(
                    f"SELECT {quote(self.key(table))} FROM {quote(table)} "
                    f"WHERE {quote(self.key(table))} IS NOT NULL ORDER BY 1"
                )
            ]
        return self._keys[table]

    def value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        cached = (sql, tuple(params))
        if cached not in self._values:
            found = self.conn.execute(sql, cached[1]).fetchone()
            self._values[cached] = None if found is None else found[0]
        return self._values[cached]

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cached = ("rows:" + sql, tuple(params))
        if cached not in self._values:
            self._values[cached] = [tuple(r) for r in self.conn.execute(sql, cached[1])]
        result: list[tuple[Any, ...]] = self._values[cached]
        return result

    def shows(self, tool: str, arguments: Mapping[str, Any], column: str, value: Any) -> bool:
        """Whether calling read tool ``tool`` returns a row whose ``column`` holds ``value``.

        A search tool may cap its rows (``LIMIT 20``) or match more than the
        exact value (``LIKE``): the row a task starts from must be among what
        the agent is shown. True when the tool is unknown (nothing to check).
        """
        spec = self.tools.get(tool)
        if spec is None:
            return True
        properties = spec.parameters.get("properties") or {}
        binds: dict[str, Any] = {name: None for name in properties}
        binds.update({k: self.coerce(tool, k, v) for k, v in arguments.items()})
        cached = ("shows:" + tool + ":" + repr(sorted(binds.items())), ())
        if cached not in self._values:
            try:
                cursor = self.conn.execute(spec.sql[-1], binds)
                names = [d[0] for d in cursor.description or ()]
                self._values[cached] = (names, [tuple(r) for r in cursor.fetchall()])
            except sqlite3.Error:
                self._values[cached] = ([], [])
        names, rows = self._values[cached]
        if column not in names:
            return False
        at = names.index(column)
        return any(row[at] == value for row in rows)

    def coerce(self, tool: str, param: str, value: Any) -> Any:
        """``value`` as the tool's parameter type (a text key '34' for an integer parameter)."""
        spec = self.tools.get(tool)
        prop = ((spec.parameters.get("properties") or {}).get(param) if spec else None) or {}
        kind = prop.get("type") if isinstance(prop, Mapping) else None
        if kind == "string" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if kind == "integer" and isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
        return value

    def children(self, hop: Hop, parent: Any, where: str = "") -> list[dict[str, Any]]:
        cached = (hop.target, hop.fk, parent, where)
        if cached not in self._children:
            key = quote(self.key(hop.target))
            sql = (
                f"SELECT {self.columns(hop.target)} FROM {quote(hop.target)} "
                f"WHERE {quote(hop.fk)} IS ? {where} ORDER BY {key}"
            )
            self._children[cached] = [dict(r) for r in self.conn.execute(sql, (parent,))]
        return self._children[cached]


@functools.lru_cache(maxsize=4096)
def slot(name: str) -> str:
    """A column name as a format-string field (anything but letters, digits and ``_`` becomes ``_``)."""
    return re.sub(r"\W", "_", name, flags=re.ASCII) or "_"


def slots(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row's values by column name and by :func:`slot` name, for filling phrases."""
    filled = dict(row)
    for name, value in row.items():
        filled.setdefault(slot(name), value)
    return filled


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
class _Walk:
    """A plan followed through the initial state."""

    phrase: str
    expr: str  # SQL (over the initial schema) giving the current row's key
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


def _walk(plan: Plan, catalog: Catalog, db: _Db) -> _Walk:
    """Follow the plan's anchor and hops; raises :class:`Unfit` where a pick is not unique."""
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
    walk = _Walk(
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
    walk: _Walk, catalog: Catalog, index: int, pick: Pick | None, db: _Db, *, last: bool
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


def _extended(
    walk: _Walk, catalog: Catalog, index: int, pick: Pick | None, db: _Db, *, last: bool
) -> _Walk:
    """A copy of ``walk`` one hop further (the original is left as it was)."""
    longer = replace(
        walk,
        rows=list(walk.rows),
        calls=list(walk.calls),
        every_exprs=list(walk.every_exprs),
        visited=set(walk.visited),
    )
    _step(longer, catalog, index, pick, db, last=last)
    return longer


def _down(walk: _Walk, hop: Hop, pick: Pick, db: _Db) -> None:
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


def _up(walk: _Walk, hop: Hop, db: _Db) -> None:
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


# --------------------------------------------------------------------------- goals


def _holds(db: _Db, action: Action, table: str, key: Any, choices: Mapping[str, Any]) -> bool:
    condition = _format_sql(action.when, target="", key=key, choices=choices, db="", row={})
    return bool(
        db.value(
            f"SELECT ({condition}) FROM {quote(table)} WHERE {quote(db.key(table))} IS ?", (key,)
        )
    )


def _action_call(
    action: Action, row: Mapping[str, Any], key: Any, choices: Mapping[str, Any], db: _Db
) -> ToolCall:
    arguments: dict[str, Any] = {}
    for param, source in action.args.items():
        if source == "key":
            arguments[param] = key
        elif source.startswith("col:"):
            arguments[param] = row[source[4:]]
        elif source.startswith("choice:"):
            arguments[param] = choices[source[7:]]
        else:
            raise ValueError(
                f"action {action.name}: argument source {source!r} is not key, col:NAME or choice:NAME"
            )
    return ToolCall(action.tool, {k: db.coerce(action.tool, k, v) for k, v in arguments.items()})


def _format_sql(
    template: str,
    *,
    target: str,
    key: Any,
    choices: Mapping[str, Any],
    db: str,
    row: Mapping[str, Any],
    reader: _Db | None = None,
) -> str:
    """Fill an action's SQL template (see :class:`~coevo.agents.synthesizers.catalog.Action`)."""
    literals = {name: sql_literal(value) for name, value in choices.items()}
    return template.format(
        target=target.format(db=db),
        key=sql_literal(key),
        db=db,
        row=_Literals(row),
        last=_LastRowids(reader),
        **literals,
    )


class _LastRowids(dict[str, str]):
    """``{last[returns]}``: the largest rowid of a table in the initial state (0 when empty).

    A frame such as ``id > {last[returns]} AND order_id = {key}`` then allows
    only rows the episode added, not existing rows that happen to match.
    """

    def __init__(self, reader: _Db | None):
        super().__init__()
        self._reader = reader

    def __missing__(self, table: str) -> str:
        if self._reader is None:
            raise KeyError(f"{{last[{table}]}} needs the initial state")
        value = self._reader.value(f"SELECT ifnull(max(rowid), 0) FROM {quote(table)}")
        return sql_literal(value)


class _Literals(dict[str, str]):
    """A row whose values read as SQL literals (``{row[order_id]}`` in a template)."""

    def __init__(self, row: Mapping[str, Any]):
        super().__init__()
        self._row = row

    def __missing__(self, column: str) -> str:
        return sql_literal(self._row[column])


def _frame_of(
    action: Action,
    key: Any,
    choices: Mapping[str, Any],
    row: Mapping[str, Any],
    reader: _Db | None = None,
) -> dict[str, Any]:
    frame: dict[str, Any] = {}
    for table, rule in action.frame.items():
        fill = {
            "target": "",
            "key": key,
            "choices": choices,
            "db": "",
            "row": row,
            "reader": reader,
        }
        if isinstance(rule, str):
            frame[table] = rule if rule == "*" else _format_sql(rule, **fill)
        else:
            frame[table] = {
                "where": _format_sql(rule["where"], **fill),
                "columns": list(rule["columns"]),
            }
    return frame


def _merge_frames(frames: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One frame allowing what any of ``frames`` allows."""
    merged: dict[str, Any] = {}
    for frame in frames:
        for table, rule in frame.items():
            old = merged.get(table)
            if old is None:
                merged[table] = rule
            elif old == "*" or rule == "*":
                merged[table] = "*"
            elif isinstance(old, dict) and isinstance(rule, dict):
                columns = list(dict.fromkeys([*old["columns"], *rule["columns"]]))
                where = (
                    old["where"]
                    if old["where"] == rule["where"]
                    else f"({old['where']}) OR ({rule['where']})"
                )
                merged[table] = {"where": where, "columns": columns}
            else:
                left = old if isinstance(old, str) else old["where"]
                right = rule if isinstance(rule, str) else rule["where"]
                merged[table] = left if left == right else f"({left}) OR ({right})"
    return merged


def _quoted(choices: Mapping[str, Any]) -> dict[str, str]:
    """Choices as words (templates put quotes where the value is free text)."""
    return {name: str(value) for name, value in choices.items()}


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "?")) else ".")


@dataclass(frozen=True)
class Realized:
    """A plan made concrete: the task and the measured features."""

    task: TaskSpec
    features: dict[str, float]


def realize(
    plan: Plan,
    catalog: Catalog,
    conn: sqlite3.Connection,
    world: WorldSpec,
    *,
    provenance: Mapping[str, Any] | None = None,
    lineage: Mapping[str, Any] | None = None,
    db: _Db | None = None,
    walk: _Walk | None = None,
) -> TaskSpec:
    """The task ``plan`` describes in ``world`` (whose initial state ``conn`` holds).

    ``db``: a shared reader of the same initial state (its answers are kept between calls);
    ``walk``: the plan's walk when the caller has already followed it.

    Raises:
        Unfit: the plan does not describe one well-defined task in this world
            (a pick is ambiguous, a precondition does not hold, ...).
    """
    db = db if db is not None else _Db(conn, catalog, world)
    walk = walk if walk is not None else _walk(plan, catalog, db)
    table, key_column = walk.table, db.key(walk.table)
    checks: list[CheckSpec] = []
    frames: list[dict[str, Any]] = []
    calls = list(walk.calls)
    if plan.family == "question":
        if len(plan.goal) != 1 or not 0 <= plan.goal[0] < len(catalog.attributes):
            raise Unfit("a question needs one attribute")
        attribute = catalog.attributes[plan.goal[0]]
        if attribute.table != table or len(walk.rows) != 1:
            raise Unfit(f"attribute {attribute.phrase!r} is not about {table}")
        key = walk.rows[0][key_column]
        value = db.value(
            f"SELECT ({attribute.expr}) FROM {quote(table)} WHERE {quote(key_column)} IS ?", (key,)
        )
        if value is None or isinstance(value, bytes) or str(value).strip() == "":
            raise Unfit(f"{attribute.phrase} is empty for this row")
        answer = str(value)
        if re.search(rf"(?<!\w){re.escape(answer.lower())}(?!\w)", walk.phrase.lower()):
            raise Unfit("the instruction already states the answer")
        if not db.value(
            f"SELECT lower(trim(?)) = lower((SELECT {attribute.expr} FROM {quote(table)} "
            f"WHERE {quote(key_column)} IS ?))",
            (answer, key),
        ):
            raise Unfit(f"{attribute.phrase} cannot be written as text that SQL compares equal")
        if answer != answer.strip():
            raise Unfit("the answer has surrounding spaces")
        target = walk.expr.format(db="initial.")
        expected = (
            f"(SELECT {attribute.expr} FROM initial.{quote(table)} "
            f"WHERE {quote(key_column)} = {target})"
        )
        checks.append(CheckSpec(name="answer", sql=_answer_check(value, expected)))
        calls.append(ToolCall(SUBMIT, {"answer": answer}))
        instruction = _sentence(
            f"What is {attribute.phrase} of {walk.phrase}? Answer with the value {attribute.hint}"
        )
    elif plan.family in ("action", "bulk"):
        if len(plan.goal) != 1 or not 0 <= plan.goal[0] < len(catalog.actions):
            raise Unfit("an action task needs one action")
        action = catalog.actions[plan.goal[0]]
        if action.table != table:
            raise Unfit(f"action {action.name} does not act on {table}")
        if plan.family == "bulk" and not action.bulk:
            raise Unfit(f"{action.name} cannot be asked for every row at once")
        if (plan.family == "bulk") != bool(walk.every_exprs):
            raise Unfit("a bulk task ends with a pick of every row, and only a bulk task does")
        targets = walk.every_exprs or [walk.expr]
        for n, (row, expr) in enumerate(zip(walk.rows, targets, strict=True)):
            key = row[key_column]
            if not _holds(db, action, table, key, plan.choices):
                raise Unfit(f"{action.name} does not apply to this row (needs {action.when})")
            calls.append(_action_call(action, row, key, plan.choices, db))
            suffix = f"_{n + 1}" if len(targets) > 1 else ""
            checks.append(
                CheckSpec(
                    name=f"{action.name}{suffix}",
                    sql=_format_sql(
                        action.check,
                        target=expr,
                        key=key,
                        choices=plan.choices,
                        db="initial.",
                        row=row,
                    ),
                )
            )
            frames.append(_frame_of(action, key, plan.choices, row, db))
        instruction = _sentence(action.ask.format(target=walk.phrase, **_quoted(plan.choices)))
        calls.append(ToolCall(SUBMIT, {}))
    elif plan.family == "conditional":
        if len(plan.goal) != 2 or not all(0 <= g < len(catalog.actions) for g in plan.goal):
            raise Unfit("a conditional task needs a first-choice and a fallback action")
        first, fallback = (catalog.actions[g] for g in plan.goal)
        if first.table != table or fallback.table != table or len(walk.rows) != 1:
            raise Unfit("both actions of a conditional task act on the target's table")
        if not first.blocked or not fallback.instead:
            raise Unfit(f"{first.name} / {fallback.name} cannot be phrased as a condition")
        row = walk.rows[0]
        key = row[key_column]
        first_ok = _holds(db, first, table, key, plan.choices)
        fallback_ok = _holds(db, fallback, table, key, plan.choices)
        if first_ok == fallback_ok:
            raise Unfit("exactly one of the two actions must apply to the target")
        taken = first if first_ok else fallback
        calls.append(_action_call(taken, row, key, plan.choices, db))
        frames.append(_frame_of(taken, key, plan.choices, row, db))
        target = walk.expr.format(db="initial.")

        def check_of(action: Action) -> str:
            return _format_sql(
                action.check,
                target=walk.expr,
                key=key,
                choices=plan.choices,
                db="initial.",
                row=row,
            )

        condition = _format_sql(
            first.when, target=walk.expr, key=key, choices=plan.choices, db="initial.", row=row
        )
        checks.append(
            CheckSpec(
                name="done_as_asked",
                sql=(
                    f"SELECT CASE WHEN (SELECT ({condition}) FROM initial.{quote(table)} "
                    f"WHERE {quote(key_column)} = {target}) THEN ({check_of(first)}) "
                    f"ELSE ({check_of(fallback)}) END"
                ),
            )
        )
        words = _quoted(plan.choices)
        instruction = _sentence(
            f"{first.ask.format(target=walk.phrase, **words)}; "
            f"{first.blocked}, {fallback.instead.format(target='it', **words)}"
        )
        calls.append(ToolCall(SUBMIT, {}))
    else:
        raise Unfit(f"unknown family {plan.family!r}")
    features = _features(walk, plan.family)
    verifier = VerifierSpec(
        checks=checks,
        frame={
            t: FrameColumns(**r) if isinstance(r, dict) else r
            for t, r in _merge_frames(frames).items()
        },
    )
    return TaskSpec(
        world=world,
        instruction=instruction,
        verifier=verifier,
        solution=calls,
        features=features,
        lineage=Lineage(**(lineage or {})),
        provenance={**(provenance or {}), "plan": plan.to_json()},
    )


_DECIMAL: Final = re.compile(r"-?(?:0|[1-9]\d*)\.\d+")
"""Text that is a quantity written with a decimal point (money as the tools show it: ``123.45``)."""

# the submitted answer without spaces, a currency sign or thousands separators
_GIVEN: Final = "replace(replace(replace(trim(:answer), ' ', ''), '$', ''), ',', '')"


def _answer_check(value: Any, expected: str) -> str:
    """The check of a submitted answer against ``expected`` (SQL computing it from the initial state).

    ``value`` is the answer as stored (its type decides the comparison). Text
    compares ignoring case and surrounding spaces, so a code such as
    ``0417618938`` must be given as shown. A number (an INTEGER or REAL value,
    or text written as a decimal, like money ``123.45``) compares by value, so
    ``$1,234.50``, ``1234.5`` and ``1234.50`` are the same answer, while
    anything that is not one number (``"12 or 13"``, ``"-"``, ``""``, no
    answer) fails. Integers compare exactly, however large.
    """
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not numeric and not (isinstance(value, str) and _DECIMAL.fullmatch(value)):
        return f"SELECT lower(trim(:answer)) = lower({expected})"
    malformed = (
        f"{_GIVEN} NOT GLOB '*[0-9]*' OR {_GIVEN} GLOB '*[^0-9.-]*' "
        f"OR {_GIVEN} GLOB '*.*.*' OR {_GIVEN} GLOB '?*-*'"
    )
    if isinstance(value, int):
        equal = (
            f"CASE WHEN {_GIVEN} GLOB '*.*' THEN CAST({_GIVEN} AS REAL) = {expected} "
            f"ELSE CAST({_GIVEN} AS INTEGER) = {expected} END"
        )
    else:
        equal = f"CAST({_GIVEN} AS REAL) = CAST({expected} AS REAL)"
    return f"SELECT CASE WHEN {malformed} THEN 0 ELSE {equal} END"


def _features(walk: _Walk, family: str) -> dict[str, float]:
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


# --------------------------------------------------------------------------- sampling


def _goal_options(catalog: Catalog, family: str, table: str) -> list[tuple[int, ...]]:
    if family == "question":
        return [(i,) for i, a in enumerate(catalog.attributes) if a.table == table]
    if family == "action":
        return [(i,) for i, a in enumerate(catalog.actions) if a.table == table]
    if family == "bulk":
        return [(i,) for i, a in enumerate(catalog.actions) if a.table == table and a.bulk]
    index = {id(a): i for i, a in enumerate(catalog.actions)}
    return [(index[id(a)], index[id(b)]) for a, b in catalog.branch_pairs(table)]


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


def _filter_value(db: _Db, hop: Hop, filt: Filter, row: Mapping[str, Any]) -> Any:
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
    db: _Db,
    *,
    every: bool,
    unfiltered: bool,
) -> Pick:
    """A pick for a down hop, drawn so that it usually singles out one row.

    ``unfiltered``: state no condition on the rows (the last hop of a
    conditional task, where a stated status would give the branch away).
    """
    if every:
        return _draw_every(rng, hop, listed, db)
    intended = rng.choice(listed)
    filter_index: int | None = None
    value: Any = None
    if hop.filters and not unfiltered and rng.random() < 0.6:
        filter_index = rng.randrange(len(hop.filters))
        filt = hop.filters[filter_index]
        seen = _filter_value(db, hop, filt, intended)
        value = None if filt.value is not None else seen
        if seen is None or (filt.value is not None and seen != filt.value):
            filter_index, value = None, None  # a condition the intended row does not meet
    order_index = (
        rng.randrange(len(hop.orders))
        if hop.orders and (len(listed) > 1 or rng.random() < 0.3)
        else None
    )
    return Pick(filter=filter_index, value=value, order=order_index, highest=rng.random() < 0.6)


def _draw_every(rng: random.Random, hop: Hop, listed: list[dict[str, Any]], db: _Db) -> Pick:
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

    def __init__(self, catalog: Catalog, conn: sqlite3.Connection, world: WorldSpec):
        self.catalog = catalog
        self.conn = conn
        self.world = world
        self.db = _Db(conn, catalog, world)
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
        walk: _Walk,
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
            holds = [
                [_holds(self.db, self.catalog.actions[g], table, row[key], choices) for g in goal]
                for row in walk.rows
            ]
            if family == "conditional":
                if sum(holds[0]) == 1:
                    return goal, choices
            elif all(h[0] for h in holds):
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
            self._goal_cache[key] = _goal_options(self.catalog, family, table)
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
    ) -> TaskSpec:
        """A task drawn for ``target``.

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
                walk = _walk(Plan(family, anchor_index, row_key), catalog, db)
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
                    )
                hops.append(index)
                picks.append(pick)
                try:
                    walk = _extended(walk, catalog, index, pick, db, last=step == depth - 1)
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
            if not target.admits(_features(walk, family)):
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
    return {t for t in catalog.keys if _goal_options(catalog, family, t)}
