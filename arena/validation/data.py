"""The world's seed rows: load them table by table, naming every row that cannot go in.

Rows go in with foreign keys off (real databases hold rows that violate
them); such rows are reported as warnings, not problems.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from coevo.arena.errors import Problem
from coevo.arena.spec import Blob, WorldSpec
from coevo.arena.sqlguard import fold, quote_ident
from coevo.arena.validation.compiled import TableInfo
from coevo.arena.validation.problems import did_you_mean, shorten, unknown_column_problem

__all__ = ["foreign_key_warnings", "load_data"]

_MAX_ROW_PROBLEMS = 20
_MAX_WARNED_ROWIDS = 8


def load_data(
    conn: sqlite3.Connection,
    spec: WorldSpec,
    tables: dict[str, TableInfo],
    views: set[str],
    problems: list[Problem],
) -> None:
    """Insert ``world.data``'s rows, each table in one go, else naming the failing rows.

    Args:
        conn: the world's connection, its tables and indexes created.
        spec: the world record.
        tables: the world's tables, by lower-cased name.
        views: the lower-cased view names (a view takes no rows).
        problems: where problems found are added (at most 20 row problems a table).
    """
    for table_name, table_data in spec.data.items():
        path = f"world.data.{table_name}"
        info = tables.get(fold(table_name))
        if info is None:
            if fold(table_name) in views:
                problems.append(
                    Problem(path, f"{table_name!r} is a view", "put the rows in its base tables")
                )
            else:
                problems.append(
                    Problem(
                        path,
                        f"no table {table_name!r} in the schema{did_you_mean(table_name, [t.name for t in tables.values()])}",
                        "create the table in schema or fix the name",
                    )
                )
            continue
        columns: list[str] = []
        bad = False
        for j, column in enumerate(table_data.columns):
            real = info.column(column)
            if real is None:
                problems.append(
                    unknown_column_problem(
                        f"{path}.columns[{j}]",
                        info,
                        column,
                        f"columns of {info.name}: {', '.join(info.columns)}",
                    )
                )
                bad = True
            elif real not in info.insertable:
                problems.append(
                    Problem(
                        f"{path}.columns[{j}]",
                        f"{real!r} is a generated column",
                        "leave it out; SQLite computes it",
                    )
                )
                bad = True
            elif real in columns:
                problems.append(
                    Problem(
                        f"{path}.columns[{j}]",
                        f"column {real!r} is listed twice",
                        "list each column once",
                    )
                )
                bad = True
            columns.append(real or column)
        if bad:
            continue
        width = len(columns)
        rows: list[tuple[Any, ...]] = []
        for r, row in enumerate(table_data.rows):
            if len(row) != width:
                if len([p for p in problems if p.path.startswith(path)]) < _MAX_ROW_PROBLEMS:
                    problems.append(
                        Problem(
                            f"{path}.rows[{r}]",
                            f"has {len(row)} values for {width} columns ({', '.join(columns)})",
                            "give one value per column, null for none",
                        )
                    )
                bad = True
                continue
            rows.append(tuple(v.data if isinstance(v, Blob) else v for v in row))
        if bad:
            continue
        sql = (
            f"INSERT INTO main.{quote_ident(info.name)} ({', '.join(quote_ident(c) for c in columns)}) "
            f"VALUES ({', '.join('?' * width)})"
        )
        conn.execute("SAVEPOINT coevo_load")
        try:
            conn.executemany(sql, rows)
            conn.execute("RELEASE coevo_load")
            continue
        except (sqlite3.Error, OverflowError, MemoryError) as exc:
            if conn.in_transaction:  # SQLITE_FULL may have rolled the whole savepoint back
                conn.execute("ROLLBACK TO coevo_load")
                conn.execute("RELEASE coevo_load")
            first_error = exc
        if _too_large(first_error):
            limit = (
                conn.execute("PRAGMA max_page_count").fetchone()[0]
                * conn.execute("PRAGMA page_size").fetchone()[0]
            )
            problems.append(
                Problem(
                    path,
                    f"the rows ({len(rows):,}, with their column defaults) would make the world "
                    f"larger than {limit:,} bytes (Limits.max_world_bytes)",
                    "seed fewer or smaller rows (or lower a column DEFAULT such as zeroblob())",
                )
            )
            return
        # Find every failing row (up to a cap) to name them.
        found = 0
        for r, values in enumerate(rows):
            try:
                conn.execute(sql, values)
            except (sqlite3.Error, OverflowError) as exc:
                found += 1
                if found <= _MAX_ROW_PROBLEMS:
                    problems.append(
                        Problem(
                            f"{path}.rows[{r}]",
                            f"{shorten(repr(list(values)), 60)} cannot be inserted: {exc}",
                            "fix the row or the table's constraints",
                        )
                    )
        if not found:
            problems.append(
                Problem(path, f"rows cannot be inserted: {first_error}", "fix the rows")
            )


def _too_large(exc: BaseException) -> bool:
    """Whether loading failed because the world outgrew its page count or SQLite's heap."""
    return (
        isinstance(exc, MemoryError)
        or "database or disk is full" in str(exc)
        or ("out of memory" in str(exc))
    )


def foreign_key_warnings(conn: sqlite3.Connection, tables: dict[str, TableInfo]) -> list[str]:
    """One warning per table and parent for seed rows that violate a foreign key.

    Args:
        conn: the world's connection, its seed rows in.
        tables: the world's tables, by lower-cased name.
    """
    try:
        rows = conn.execute("PRAGMA main.foreign_key_check").fetchall()
    except sqlite3.Error as exc:
        return [f"foreign keys could not be checked: {exc}"]
    groups: dict[tuple[str, str], list[Any]] = {}
    for table, rowid, parent, _ in rows:
        groups.setdefault((table, parent), []).append(rowid)
    warnings = []
    for (table, parent), rowids in groups.items():
        shown = ", ".join(str(r) for r in rowids[:_MAX_WARNED_ROWIDS])
        more = ", ..." if len(rowids) > _MAX_WARNED_ROWIDS else ""
        warnings.append(
            f"world.data.{table}: {len(rowids)} seed row(s) violate the foreign key to {parent} "
            f"(rowid {shown}{more}); tool calls enforce foreign keys, so writes touching them may fail"
        )
    return warnings
