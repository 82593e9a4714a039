"""The planning database: read queries against a world's initial state, each answer kept.

The planner, the sampler and the mutation operators ask the same questions
of a world many times over (a table's keys, a row, a parent's children, a
tool's answer); since the initial state never changes, a
:class:`PlanningDb` keeps every answer.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from coevo.agents.synthesizers.catalog import Catalog, Hop, quote
from coevo.arena.spec import WorldSpec

__all__ = ["PlanningDb"]


class PlanningDb:
    """Read queries against a world's initial state (a plain SQLite connection), each answer kept.

    Args:
        conn: the world's initial state (see
            :func:`~coevo.agents.synthesizers.initial.initial_state`); its
            row factory is set to :class:`sqlite3.Row`.
        catalog: the world's catalog (it names each table's key column).
        world: the world record, whose tools :meth:`shows` and :meth:`coerce`
            consult; without it, every tool is taken as unknown.
    """

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
        """The column tools use as ``table``'s key (``rowid`` for a table without a one-column key)."""
        return self.catalog.keys[table]

    def columns(self, table: str) -> str:
        """``*``, with the rowid first when the table's key is its rowid (tables without a one-column key)."""
        return "rowid AS rowid, *" if self.key(table) == "rowid" else "*"

    def row(self, table: str, key: Any) -> dict[str, Any] | None:
        """The row of ``table`` whose key is ``key``, by column name; ``None`` when there is none."""
        cached = (table, key)
        if cached not in self._rows:
            found = self.conn.execute(
                f"SELECT {self.columns(table)} FROM {quote(table)} WHERE {quote(self.key(table))} IS ?",
                (key,),
            ).fetchone()
            self._rows[cached] = dict(found) if found is not None else None
        return self._rows[cached]

    def keys_of(self, table: str) -> list[Any]:
        """The keys of every row of ``table`` (NULL keys left out), in ascending order."""
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
        """The first column of the first row ``sql`` returns; ``None`` when it returns no row."""
        cached = (sql, tuple(params))
        if cached not in self._values:
            found = self.conn.execute(sql, cached[1]).fetchone()
            self._values[cached] = None if found is None else found[0]
        return self._values[cached]

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row ``sql`` returns, as tuples."""
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
        """The rows a down hop lists for the parent key ``parent``, in key order.

        ``where``: an extra condition over the listed table, starting with ``AND``.
        """
        cached = (hop.target, hop.fk, parent, where)
        if cached not in self._children:
            key = quote(self.key(hop.target))
            sql = (
                f"SELECT {self.columns(hop.target)} FROM {quote(hop.target)} "
                f"WHERE {quote(hop.fk)} IS ? {where} ORDER BY {key}"
            )
            self._children[cached] = [dict(r) for r in self.conn.execute(sql, (parent,))]
        return self._children[cached]
