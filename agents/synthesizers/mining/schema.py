"""Reading any SQLite database's schema into a foreign-key graph (declared and inferred links).

Real databases are messy: composite primary keys, tables without keys,
``WITHOUT ROWID`` tables, virtual tables and their shadow tables, identifiers
with spaces or mixed case, foreign keys nobody declared. :func:`read_schema`
reads what is there; :func:`infer_links` adds the links naming conventions
imply (``CustomerId`` → ``Customer.CustomerId``, ``customer_id`` →
``customers.id``) when the data agrees; :class:`SchemaGraph` holds both as a
networkx multigraph (child → parent).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

import networkx as nx
from coevo.agents.synthesizers.catalog import quote

__all__ = ["Column", "Link", "SchemaGraph", "Table", "infer_links", "read_schema", "words"]

_WRITE = re.compile(
    r"(?:INSERT\s+(?:OR\s+\w+\s+)?INTO|UPDATE(?:\s+OR\s+\w+)?|DELETE\s+FROM)\s+"
    r"(\"(?:[^\"]|\"\")+\"|`[^`]+`|\[[^\]]+\]|[A-Za-z_][\w$]*)",
    re.IGNORECASE,
)

_REFERENCE = re.compile(r"(.+?)[_\s]?(id|ID|Id|code|Code|CODE|key|Key|no|No|number|Number)")
"""A column name that may reference another table: ``CustomerId``, ``customer_id``, ``genre_code``."""

INFERRED_MATCH: float = 0.8
"""Share of a column's non-null values that must exist in the parent key for an inferred link."""


@dataclass(frozen=True)
class Column:
    """One column as ``PRAGMA table_xinfo`` reports it.

    Attributes:
        name: the column name.
        type: the declared type ("" when none).
        notnull: declared NOT NULL.
        default: the default expression's SQL text, or None.
        pk: position in the primary key (0 when not part of it).
        generated: a generated (computed) column, which rows cannot set.
    """

    name: str
    type: str
    notnull: bool
    default: str | None
    pk: int
    generated: bool

    @property
    def affinity(self) -> str:
        """SQLite's type affinity for the declared type (INTEGER, TEXT, BLOB, REAL or NUMERIC)."""
        t = self.type.upper()
        if "INT" in t:
            return "INTEGER"
        if any(x in t for x in ("CHAR", "CLOB", "TEXT")):
            return "TEXT"
        if "BLOB" in t or not t:
            return "BLOB"
        if any(x in t for x in ("REAL", "FLOA", "DOUB")):
            return "REAL"
        return "NUMERIC"


@dataclass(frozen=True)
class Table:
    """One ordinary table.

    Attributes:
        name: the table name, as declared.
        sql: its CREATE TABLE statement.
        columns: its columns, in order.
        without_rowid: a WITHOUT ROWID table.
        rows: how many rows it holds.
        unique: column sets with a UNIQUE constraint or index (the primary key included).
    """

    name: str
    sql: str
    columns: tuple[Column, ...]
    without_rowid: bool
    rows: int
    unique: tuple[tuple[str, ...], ...] = ()

    @property
    def primary_key(self) -> tuple[str, ...]:
        """The primary-key columns in key order (empty when none is declared)."""
        return tuple(c.name for c in sorted((c for c in self.columns if c.pk), key=lambda c: c.pk))

    @property
    def key(self) -> str | None:
        """The one column tools use as the key: a one-column primary key, else the rowid, else None."""
        if len(self.primary_key) == 1:
            return self.primary_key[0]
        if self.without_rowid or any(c.name.lower() == "rowid" for c in self.columns):
            return None
        return "rowid"

    def column(self, name: str) -> Column | None:
        """The column called ``name`` (case-insensitive, as SQLite resolves names)."""
        return next((c for c in self.columns if c.name.lower() == name.lower()), None)

    @property
    def insertable(self) -> tuple[str, ...]:
        """The columns a row may set (generated columns excluded)."""
        return tuple(c.name for c in self.columns if not c.generated)


@dataclass(frozen=True)
class Link:
    """A foreign key from ``child.child_columns`` to ``parent.parent_columns``.

    Attributes:
        child: the referencing table.
        child_columns: the referencing columns.
        parent: the referenced table.
        parent_columns: the referenced columns.
        declared: declared in the schema (else inferred from names and data).
    """

    child: str
    child_columns: tuple[str, ...]
    parent: str
    parent_columns: tuple[str, ...]
    declared: bool = True


@dataclass
class SchemaGraph:
    """A database's tables, views, triggers and indexes, and the links between tables.

    Attributes:
        tables: ordinary tables by name (virtual tables and their shadow tables left out).
        links: declared and inferred foreign keys.
        views: ``(name, sql)`` of each view.
        triggers: ``(name, sql, table)`` of each trigger.
        indexes: ``(name, sql)`` of each explicitly created index.
        skipped: tables left out, with why.
    """

    tables: dict[str, Table]
    links: list[Link] = field(default_factory=list)
    views: list[tuple[str, str]] = field(default_factory=list)
    triggers: list[tuple[str, str, str]] = field(default_factory=list)
    indexes: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @cached_property
    def graph(self) -> nx.MultiDiGraph:
        """Tables as nodes, one edge child → parent per link (edge attribute ``link``)."""
        graph = nx.MultiDiGraph()
        graph.add_nodes_from(sorted(self.tables))
        for link in self.links:
            graph.add_edge(link.child, link.parent, link=link)
        return graph

    def parents_first(self) -> list[str]:
        """Tables ordered so that referenced tables come before the tables referencing them.

        Cycles (self-references, mutual references) are broken by name order.
        """
        condensed = nx.condensation(nx.DiGraph(self.graph))
        order: list[str] = []
        for component in reversed(list(nx.lexicographical_topological_sort(condensed, key=str))):
            order.extend(sorted(condensed.nodes[component]["members"]))
        return order

    def written_by_triggers(self, table: str) -> set[str]:
        """Tables that triggers on ``table`` may write (read from the trigger bodies)."""
        written: set[str] = set()
        by_fold = {name.lower(): name for name in self.tables}
        for _, sql, on in self.triggers:
            if on.lower() != table.lower():
                continue
            body = sql[sql.upper().find("BEGIN") :] if "BEGIN" in sql.upper() else sql
            for match in _WRITE.finditer(body):
                name = match.group(1).strip('"`[]').replace('""', '"')
                if name.lower() in by_fold:
                    written.add(by_fold[name.lower()])
        return written

    @property
    def rows(self) -> int:
        """Rows in all tables."""
        return sum(t.rows for t in self.tables.values())


def words(name: str) -> str:
    """An identifier as lower-case words: ``InvoiceLine`` → ``invoice line``, ``order_items`` → ``order items``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|[_\s]+", " ", name)
    return " ".join(spaced.lower().split())


def _norm(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "", name.lower())


def read_schema(conn: sqlite3.Connection) -> SchemaGraph:
    """The schema of ``conn``'s main database, with its declared foreign keys (no inference)."""
    entries = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
        "ORDER BY rowid"
    ).fetchall()
    virtual = [
        name
        for kind, name, _, sql in entries
        if kind == "table" and (sql or "").upper().startswith("CREATE VIRTUAL")
    ]
    schema = SchemaGraph(tables={})
    for kind, name, _table, sql in entries:
        if kind == "table":
            if name in virtual:
                schema.skipped.append(
                    f"{name}: a virtual table (its module may not exist where the world runs)"
                )
                continue
            if any(name.startswith(v + "_") for v in virtual):
                schema.skipped.append(f"{name}: a shadow table of a virtual table")
                continue
            if name.lower().startswith("coevo_"):
                schema.skipped.append(f"{name}: the coevo_ prefix is reserved")
                continue
            schema.tables[name] = _read_table(conn, name, sql)
        elif kind == "view" and sql:
            schema.views.append((name, sql))
        elif kind == "trigger" and sql:
            schema.triggers.append((name, sql, _table))
        elif kind == "index" and sql:
            schema.indexes.append((name, sql))
    by_fold = {name.lower(): name for name in schema.tables}
    for name in schema.tables:
        groups: dict[int, list[tuple[int, str, str, str | None]]] = {}
        for row in conn.execute(f"PRAGMA foreign_key_list({quote(name)})"):
            fk_id, seq, parent, child_col, parent_col = row[0], row[1], row[2], row[3], row[4]
            groups.setdefault(fk_id, []).append((seq, parent, child_col, parent_col))
        for _, parts in sorted(groups.items()):
            parts.sort()
            parent = by_fold.get(parts[0][1].lower())
            if parent is None:
                schema.skipped.append(
                    f"{name}: a foreign key references {parts[0][1]!r}, which is not a table here"
                )
                continue
            child_cols = tuple(p[2] for p in parts)
            parent_cols = (
                tuple(p[3] for p in parts)
                if all(p[3] for p in parts)
                else schema.tables[parent].primary_key
            )
            if len(parent_cols) != len(child_cols):
                continue
            schema.links.append(Link(name, child_cols, parent, tuple(str(c) for c in parent_cols)))
    return schema


def _read_table(conn: sqlite3.Connection, name: str, sql: str) -> Table:
    columns = tuple(
        Column(
            name=r[1],
            type=r[2] or "",
            notnull=bool(r[3]),
            default=r[4],
            pk=int(r[5]),
            generated=int(r[6]) in (2, 3),
        )
        for r in conn.execute(f"PRAGMA table_xinfo({quote(name)})")
        if int(r[6]) != 1  # hidden columns of virtual tables
    )
    unique: list[tuple[str, ...]] = []
    for index in conn.execute(f"PRAGMA index_list({quote(name)})").fetchall():
        if index[2] and not index[4]:  # unique, not partial
            cols = tuple(r[2] for r in conn.execute(f"PRAGMA index_info({quote(index[1])})"))
            if cols and all(cols):
                unique.append(cols)
    rows = int(conn.execute(f"SELECT count(*) FROM {quote(name)}").fetchone()[0])
    without_rowid = bool(re.search(r"\)\s*WITHOUT\s+ROWID\s*(?:,|;|$)", sql or "", re.IGNORECASE))
    table = Table(name, sql, columns, without_rowid, rows)
    pk = table.primary_key
    if pk and pk not in unique:
        unique.insert(0, pk)
    return Table(name, sql, columns, without_rowid, rows, tuple(unique))


def _parent_candidates(base: str, tables: Iterable[Table]) -> list[Table]:
    stem = _norm(base)
    forms = {stem, stem + "s", stem + "es"}
    if stem.endswith("y"):
        forms.add(stem[:-1] + "ies")
    return [t for t in tables if _norm(t.name) in forms]


def infer_links(conn: sqlite3.Connection, schema: SchemaGraph) -> list[Link]:
    """Links implied by column names and confirmed by the data; added to ``schema.links``.

    A column ``<base>Id`` / ``<base>_id`` / ``<base>_code`` (not already a
    declared foreign key, not its table's whole primary key) links to a table
    named ``<base>`` (or its plural) whose one-column key is called ``id``,
    the suffix (``code``), ``<base><suffix>`` or the column's own name, when
    at least :data:`INFERRED_MATCH` of the column's non-null values exist in
    that key.
    """
    declared = {(link.child, c.lower()) for link in schema.links for c in link.child_columns}
    found: list[Link] = []
    for table in schema.tables.values():
        for column in table.columns:
            match = _REFERENCE.fullmatch(column.name)
            if not match or (table.name, column.name.lower()) in declared:
                continue
            if table.primary_key == (column.name,):
                continue
            base = match.group(1)
            for parent in _parent_candidates(base, schema.tables.values()):
                if len(parent.primary_key) != 1:
                    continue
                key = parent.primary_key[0]
                suffix = _norm(match.group(2))
                if _norm(key) not in {"id", suffix, _norm(base) + suffix, _norm(column.name)}:
                    continue
                if parent.name == table.name and key == column.name:
                    continue
                total, present = conn.execute(
                    f"SELECT count(*), ifnull(sum(EXISTS (SELECT 1 FROM {quote(parent.name)} AS p "
                    f"WHERE p.{quote(key)} = c.{quote(column.name)})), 0) FROM {quote(table.name)} AS c "
                    f"WHERE c.{quote(column.name)} IS NOT NULL"
                ).fetchone()
                if total and present / total >= INFERRED_MATCH:
                    found.append(
                        Link(table.name, (column.name,), parent.name, (key,), declared=False)
                    )
                    break
    schema.links.extend(found)
    schema.__dict__.pop("graph", None)
    return found
