"""Goals: which goals a family has on a table, and a goal's action made concrete in SQL.

An :class:`~coevo.agents.synthesizers.catalog.Action`'s precondition, check
and frame are templates; this module fills them for one target row (see
:func:`fill_template`) and turns the action into the reference solution's
tool call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from coevo.agents.synthesizers.catalog import Action, Catalog, quote, sql_literal
from coevo.agents.synthesizers.planner.database import PlanningDb
from coevo.arena.spec import ToolCall

__all__ = ["action_call", "fill_template", "frame_of", "goal_options", "holds", "merge_frames"]


def goal_options(catalog: Catalog, family: str, table: str) -> list[tuple[int, ...]]:
    """Every goal a task of ``family`` can have on a row of ``table``, in catalog order.

    A goal is what :attr:`~coevo.agents.synthesizers.planner.plan.Plan.goal`
    holds: ``(attribute index,)`` for a question, ``(action index,)`` for an
    action or bulk task (bulk: only actions that may be done to every row at
    once), ``(first choice, fallback)`` action indices for a conditional task.
    """
    if family == "question":
        return [(i,) for i, a in enumerate(catalog.attributes) if a.table == table]
    if family == "action":
        return [(i,) for i, a in enumerate(catalog.actions) if a.table == table]
    if family == "bulk":
        return [(i,) for i, a in enumerate(catalog.actions) if a.table == table and a.bulk]
    index = {id(a): i for i, a in enumerate(catalog.actions)}
    return [(index[id(a)], index[id(b)]) for a, b in catalog.branch_pairs(table)]


def holds(db: PlanningDb, action: Action, table: str, key: Any, choices: Mapping[str, Any]) -> bool:
    """Whether ``action``'s precondition holds, in the initial state, on the row of ``table`` keyed ``key``."""
    condition = fill_template(action.when, target="", key=key, choices=choices, db="", row={})
    return bool(
        db.value(
            f"SELECT ({condition}) FROM {quote(table)} WHERE {quote(db.key(table))} IS ?", (key,)
        )
    )


def action_call(
    action: Action, row: Mapping[str, Any], key: Any, choices: Mapping[str, Any], db: PlanningDb
) -> ToolCall:
    """The reference solution's call doing ``action`` on ``row`` (whose key is ``key``).

    Raises:
        ValueError: an argument source of the action is not ``key``, ``col:NAME`` or ``choice:NAME``.
    """
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


def fill_template(
    template: str,
    *,
    target: str,
    key: Any,
    choices: Mapping[str, Any],
    db: str,
    row: Mapping[str, Any],
    reader: PlanningDb | None = None,
) -> str:
    """An action's SQL template filled for one target row (see :class:`~coevo.agents.synthesizers.catalog.Action`).

    Args:
        template: the template (a precondition, check or frame rule).
        target: SQL for the target's key, with ``{db}`` before each table name.
        key: the target's key.
        choices: the values the instruction states, by choice name.
        db: the schema prefix of the initial state (``""`` or ``"initial."``).
        row: the target row (``{row[col]}``).
        reader: the planning database, for ``{last[table]}``.
    """
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

    def __init__(self, reader: PlanningDb | None):
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


def frame_of(
    action: Action,
    key: Any,
    choices: Mapping[str, Any],
    row: Mapping[str, Any],
    reader: PlanningDb | None = None,
) -> dict[str, Any]:
    """The frame (table → rule) of what doing ``action`` on the row keyed ``key`` may change."""
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
            frame[table] = rule if rule == "*" else fill_template(rule, **fill)
        else:
            frame[table] = {
                "where": fill_template(rule["where"], **fill),
                "columns": list(rule["columns"]),
            }
    return frame


def merge_frames(frames: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
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
