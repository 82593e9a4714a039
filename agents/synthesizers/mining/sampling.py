"""Sampling a large database into a world of manageable size, keeping foreign keys walkable.

Tables are visited parents first. A small table is kept whole; a large one
keeps (a seeded sample of) the rows that reference rows already kept, so a
walk from a kept customer finds their invoices; every kept row then pulls in
the rows it references (upward closure), so look-ups along kept foreign keys
never dead-end. Rows that violated a foreign key in the source still do.
"""

from __future__ import annotations

import math
import random
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from coevo.agents.synthesizers.catalog import quote
from coevo.agents.synthesizers.mining.schema import SchemaGraph, Table
from coevo.arena.seeding import derive_seed

__all__ = ["Sample", "sample_rows"]

CHUNK = 500
GROUP_ROWS = 12
"""The most rows of one parent's children a sample keeps."""


@dataclass
class Sample:
    """The rows kept per table (insertable columns, in source order) and what was changed on the way.

    Attributes:
        rows: table → kept rows, as tuples over :attr:`columns`.
        columns: table → the insertable columns.
        notes: values that had to be changed (non-finite numbers, undecodable text).
    """

    rows: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _identity(table: Table) -> list[str]:
    return ["rowid"] if not table.without_rowid else list(table.primary_key)


def _chunks(values: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(values), CHUNK):
        yield values[start : start + CHUNK]


class _Picker:
    def __init__(self, conn: sqlite3.Connection, schema: SchemaGraph):
        self.conn = conn
        self.schema = schema
        self.kept: dict[str, set[tuple[Any, ...]]] = {name: set() for name in schema.tables}

    def identities(
        self, table: Table, where: str = "1", params: Sequence[Any] = ()
    ) -> list[tuple[Any, ...]]:
        ident = ", ".join(quote(c) if c != "rowid" else "rowid" for c in _identity(table))
        return [
            tuple(r)
            for r in self.conn.execute(
                f"SELECT {ident} FROM {quote(table.name)} WHERE {where} ORDER BY {ident}",
                tuple(params),
            )
        ]

    def referencing(
        self, table: Table, columns: Sequence[str], values: Sequence[tuple[Any, ...]]
    ) -> list[tuple[Any, ...]]:
        """Identities of ``table`` rows whose ``columns`` hold one of ``values``."""
        found: list[tuple[Any, ...]] = []
        target = ", ".join(quote(c) for c in columns)
        for chunk in _chunks(sorted(values, key=repr)):
            if len(columns) == 1:
                marks = ", ".join("?" for _ in chunk)
                found += self.identities(table, f"{target} IN ({marks})", [v[0] for v in chunk])
            else:
                rows = ", ".join("(" + ", ".join("?" for _ in columns) + ")" for _ in chunk)
                found += self.identities(
                    table, f"({target}) IN (VALUES {rows})", [x for v in chunk for x in v]
                )
        return found

    def grouped(
        self, table: Table, columns: Sequence[str], values: Sequence[tuple[Any, ...]]
    ) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
        """(identity, referenced value) of every ``table`` row whose ``columns`` hold one of ``values``."""
        ident = _identity(table)
        id_sql = ", ".join(quote(c) if c != "rowid" else "rowid" for c in ident)
        target = ", ".join(quote(c) for c in columns)
        found: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []
        for chunk in _chunks(list(values)):
            rows = ", ".join("(" + ", ".join("?" for _ in columns) + ")" for _ in chunk)
            for r in self.conn.execute(
                f"SELECT {id_sql}, {target} FROM {quote(table.name)} WHERE ({target}) IN (VALUES {rows}) "
                f"ORDER BY {id_sql}",
                [x for v in chunk for x in v],
            ):
                found.append((tuple(r[: len(ident)]), tuple(r[len(ident) :])))
        return found

    def column_values(
        self, table: Table, columns: Sequence[str], kept: set[tuple[Any, ...]]
    ) -> set[tuple[Any, ...]]:
        """The values of ``columns`` in the kept rows of ``table`` (rows with a NULL part left out)."""
        ident = _identity(table)
        select = ", ".join(quote(c) for c in columns)
        values: set[tuple[Any, ...]] = set()
        keys = sorted(kept, key=repr)
        id_sql = ", ".join(quote(c) if c != "rowid" else "rowid" for c in ident)
        for chunk in _chunks(keys):
            rows = ", ".join("(" + ", ".join("?" for _ in ident) + ")" for _ in chunk)
            for r in self.conn.execute(
                f"SELECT {select} FROM {quote(table.name)} WHERE ({id_sql}) IN (VALUES {rows})",
                [x for k in chunk for x in k],
            ):
                if all(v is not None for v in r):
                    values.add(tuple(r))
        return values


def sample_rows(
    conn: sqlite3.Connection,
    schema: SchemaGraph,
    *,
    seed: int,
    per_table: int = 120,
    rounds: int = 8,
) -> Sample:
    """The rows to keep from each table of ``conn`` (read only; nothing is written).

    Args:
        conn: the source database.
        schema: its schema, with the links to keep walkable.
        seed: the sampling seed (same seed, same rows).
        per_table: rows drawn from a large table before the closure adds referenced rows.
        rounds: upward-closure rounds (cycles of references stop after this many).
    """
    rng = random.Random(derive_seed("mine", seed))
    picker = _Picker(conn, schema)
    for name in schema.parents_first():
        table = schema.tables[name]
        if table.rows <= per_table:
            picker.kept[name] = set(picker.identities(table))
            continue
        candidates: set[tuple[Any, ...]] = set()
        groups: dict[Any, list[tuple[Any, ...]]] = {}
        for link in schema.links:
            if link.child != name or link.parent == name or not picker.kept[link.parent]:
                continue
            parent = schema.tables[link.parent]
            values = picker.column_values(parent, link.parent_columns, picker.kept[link.parent])
            for identity, group in picker.grouped(
                table, link.child_columns, sorted(values, key=repr)
            ):
                candidates.add(identity)
                groups.setdefault((link.parent, group), []).append(identity)
        # Whole families, not scattered rows: a kept customer keeps several of their orders,
        # so "the most recent order of ..." ranks real lists (up to GROUP_ROWS rows each).
        chosen: list[tuple[Any, ...]] = []
        taken: set[tuple[Any, ...]] = set()
        for key in rng.sample(sorted(groups, key=repr), len(groups)):
            if len(chosen) >= per_table:
                break
            members = [m for m in groups[key] if m not in taken]
            for identity in rng.sample(members, min(GROUP_ROWS, len(members))):
                if len(chosen) < per_table:
                    chosen.append(identity)
                    taken.add(identity)
        if len(chosen) < per_table // 2:
            rest = [i for i in picker.identities(table) if i not in candidates]
            chosen += rng.sample(rest, min(per_table - len(chosen), len(rest)))
        picker.kept[name] = set(chosen)
    for _ in range(rounds):
        added = 0
        for link in schema.links:
            child, parent = schema.tables[link.child], schema.tables[link.parent]
            wanted = picker.column_values(child, link.child_columns, picker.kept[link.child])
            if not wanted:
                continue
            for identity in picker.referencing(
                parent, link.parent_columns, sorted(wanted, key=repr)
            ):
                if identity not in picker.kept[link.parent]:
                    picker.kept[link.parent].add(identity)
                    added += 1
        if not added:
            break
    sample = Sample()
    for name, table in schema.tables.items():
        sample.columns[name] = table.insertable
        sample.rows[name] = _fetch(conn, table, picker.kept[name], sample.notes)
    return sample


def _fetch(
    conn: sqlite3.Connection, table: Table, kept: set[tuple[Any, ...]], notes: list[str]
) -> list[tuple[Any, ...]]:
    ident = _identity(table)
    id_sql = ", ".join(quote(c) if c != "rowid" else "rowid" for c in ident)
    cols = ", ".join(quote(c) for c in table.insertable)
    rows: list[tuple[Any, ...]] = []
    keys = sorted(kept, key=repr)
    fetched: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []
    for chunk in _chunks(keys):
        marks = ", ".join("(" + ", ".join("?" for _ in ident) + ")" for _ in chunk)
        for r in conn.execute(
            f"SELECT {id_sql}, {cols} FROM {quote(table.name)} WHERE ({id_sql}) IN (VALUES {marks})",
            [x for k in chunk for x in k],
        ):
            fetched.append((tuple(r[: len(ident)]), tuple(r[len(ident) :])))
    fetched.sort(
        key=lambda pair: [(v is None, type(v).__name__, v if v is not None else 0) for v in pair[0]]
    )
    for _, values in fetched:
        clean = []
        for column, value in zip(table.insertable, values, strict=True):
            if isinstance(value, float) and not math.isfinite(value):
                notes.append(f"{table.name}.{column}: {value!r} has no JSON form; kept as NULL")
                value = None
            elif isinstance(value, str) and "\ufffd" in value:
                notes.append(f"{table.name}.{column}: text that was not valid UTF-8 was repaired")
            clean.append(value)
        rows.append(tuple(clean))
    return rows
