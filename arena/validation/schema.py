"""The world's schema: build it statement by statement, describe its tables, vet its code.

Tables and indexes are created first; views and triggers wait until the
seed rows are in (so seeding fires no trigger). What a schema runs
implicitly — views, triggers, column defaults — is compiled like a tool's
statement, and once the world is valid, tracking triggers are added so the
verifier compares only the rows an episode changed.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from coevo.arena.errors import Problem
from coevo.arena.spec import WorldSpec
from coevo.arena.sqlguard import TRACKING_PREFIX, Guard, explain, fold, quote_ident
from coevo.arena.validation.compiled import TableInfo
from coevo.arena.validation.problems import shorten
from coevo.arena.validation.statements import FIX_BY_ACTION, fix_for, refusal, statement_problems

__all__ = [
    "check_reserved_columns",
    "check_schema_code",
    "create_schema",
    "install_tracking",
    "run_schema_statement",
    "table_info",
]

_LEADING_COMMENTS = re.compile(r"^(\s+|--[^\n]*(\n|$)|/\*.*?\*/)*", re.S)
_CREATE = re.compile(
    r"^CREATE\s+(?:(TEMP|TEMPORARY)\s+)?(?:UNIQUE\s+)?(TABLE|INDEX|VIEW|TRIGGER|VIRTUAL\s+TABLE)\b",
    re.I,
)


def _strip_leading_comments(sql: str) -> str:
    return sql[_LEADING_COMMENTS.match(sql).end() :]  # type: ignore[union-attr]


def _schema_kind(sql: str) -> tuple[str | None, str | None]:
    """(``table``/``index``/``view``/``trigger``, problem) for a schema statement."""
    match = _CREATE.match(_strip_leading_comments(sql))
    if not match:
        return None, "is not a CREATE TABLE, INDEX, VIEW or TRIGGER statement"
    if match.group(1):
        return None, "creates a TEMP object, which would not be part of the world"
    kind = match.group(2).lower()
    if kind.startswith("virtual"):
        return None, "creates a virtual table; extensions differ between machines"
    return kind, None


def create_schema(
    conn: sqlite3.Connection, guard: Guard, spec: WorldSpec, problems: list[Problem]
) -> tuple[dict[str, int], list[tuple[int, str, str]]]:
    """Run the CREATE TABLE and CREATE INDEX statements; sort out the rest.

    Args:
        conn: the world's connection.
        guard: its authorizer.
        spec: the world record.
        problems: where problems found are added.

    Returns:
        Lower-cased name of each object created to the index of its
        statement, and the (index, kind, sql) of the views and triggers,
        which run after the seed rows are in.
    """
    created: dict[str, int] = {}
    late: list[tuple[int, str, str]] = []
    for i, sql in enumerate(spec.schema_sql):
        kind, problem = _schema_kind(sql)
        if problem or kind is None:
            problems.append(
                Problem(
                    f"world.schema[{i}]",
                    f"{shorten(sql)!r} {problem}",
                    "the schema holds CREATE TABLE/INDEX/VIEW/TRIGGER statements; rows go in data",
                )
            )
        elif kind in ("view", "trigger"):
            late.append((i, kind, sql))
        else:
            run_schema_statement(conn, guard, i, kind, sql, created, problems)
    return created, late


def run_schema_statement(
    conn: sqlite3.Connection,
    guard: Guard,
    i: int,
    kind: str,
    sql: str,
    created: dict[str, int],
    problems: list[Problem],
) -> None:
    """Run one schema statement under the recording authorizer and check what it created.

    Args:
        conn: the world's connection.
        guard: its authorizer, which records the statement's actions.
        i: the statement's index in ``world.schema``.
        kind: what it should create: ``table``, ``index``, ``view`` or ``trigger``.
        sql: the statement.
        created: lower-cased name of each object created to its statement's
            index; the new object is added.
        problems: where problems found are added.
    """
    path = f"world.schema[{i}]"
    records: list[Any] = []
    guard.record, guard.schema_phase = records, True
    try:
        conn.execute(sql)
        error = None
    except sqlite3.ProgrammingError as exc:
        error = "holds more than one SQL statement" if "one statement" in str(exc) else str(exc)
    except (sqlite3.Error, ValueError, OverflowError, MemoryError) as exc:
        error = str(exc) or type(exc).__name__
    finally:
        guard.record, guard.schema_phase = None, False
    denied = [a for a in records if not a.allowed]
    if denied:
        problems.append(
            Problem(
                path,
                f"{shorten(sql)!r} {denied[0].describe()}",
                "the schema may only CREATE tables, indexes, views and triggers",
            )
        )
        return
    if error:
        problems.append(Problem(path, f"{shorten(sql)!r} fails: {error}", "fix the statement"))
        return
    made = [a for a in records if a.action == f"CREATE_{kind.upper()}"]
    if not made:
        problems.append(
            Problem(path, f"{shorten(sql)!r} did not create a {kind}", "fix the statement")
        )
        return
    if kind == "table" and any(a.action == "SELECT" for a in records):
        problems.append(
            Problem(
                path,
                "CREATE TABLE ... AS SELECT is not supported",
                "declare the columns and put the rows in data",
            )
        )
    name = made[0].arg1 or ""
    if fold(name).startswith(TRACKING_PREFIX):
        problems.append(
            Problem(
                path,
                f"the name {name!r} starts with {TRACKING_PREFIX!r}, which coevo reserves",
                "rename the object",
            )
        )
    created[fold(name)] = i


def check_reserved_columns(
    tables: dict[str, TableInfo], created: dict[str, int], problems: list[Problem]
) -> None:
    """Add a problem for each column whose name starts with the prefix coevo's tracking reserves.

    Args:
        tables: the world's tables, by lower-cased name.
        created: lower-cased object name to the index of the statement that created it.
        problems: where problems found are added.
    """
    for key, info in tables.items():
        for column in info.columns:
            if fold(column).startswith(TRACKING_PREFIX):
                index = created.get(key)
                problems.append(
                    Problem(
                        f"world.schema[{index}]" if index is not None else "world.schema",
                        f"column {info.name}.{column} starts with {TRACKING_PREFIX!r}, which coevo reserves",
                        "rename the column",
                    )
                )


def table_info(conn: sqlite3.Connection, name: str) -> TableInfo:
    """Describe table ``name`` of the world: its columns, primary key and rowid.

    Args:
        conn: the world's connection, trusted by its guard.
        name: the table's name as declared.
    """
    info = conn.execute(f"PRAGMA main.table_xinfo({quote_ident(name)})").fetchall()
    columns = tuple(row[1] for row in info if row[6] != 1)
    insertable = tuple(row[1] for row in info if row[6] == 0)
    pk = tuple(row[1] for row in sorted((r for r in info if r[5] > 0), key=lambda r: r[5]))
    lowered = {fold(c) for c in columns}
    rowid = None
    for alias in ("rowid", "_rowid_", "oid"):
        if alias in lowered:
            continue
        try:
            conn.execute(f"SELECT {alias} FROM main.{quote_ident(name)} LIMIT 0").fetchall()
        except sqlite3.Error:
            break  # WITHOUT ROWID
        rowid = alias
        break
    declared = {row[1]: (row[2] or "").upper() for row in info}
    alias_column = pk if rowid and len(pk) == 1 and declared.get(pk[0]) == "INTEGER" else ()
    return TableInfo(
        name=name,
        columns=columns,
        insertable=insertable,
        primary_key=pk,
        rowid=rowid,
        rowid_alias=alias_column,
    )


def check_schema_code(
    conn: sqlite3.Connection,
    guard: Guard,
    tables: dict[str, TableInfo],
    views: set[str],
    created: dict[str, int],
    problems: list[Problem],
) -> None:
    """Compile what runs implicitly — views, triggers, column defaults — to vet it like a tool.

    Args:
        conn: the world's connection, its seed rows in.
        guard: its authorizer.
        tables: the world's tables, by lower-cased name.
        views: the lower-cased view names.
        created: lower-cased object name to the index of the statement that created it.
        problems: where problems found are added.
    """

    def where(name: str | None) -> str:
        index = created.get(fold(name or ""))
        return f"world.schema[{index}]" if index is not None else "world.schema"

    triggers: dict[str, list[str]] = {}
    with guard.trust():
        for name, table in conn.execute(
            "SELECT name, tbl_name FROM main.sqlite_master WHERE type = 'trigger'"
        ):
            triggers.setdefault(fold(table), []).append(name)
    for view in sorted(views):
        facts = explain(conn, guard, f"SELECT * FROM main.{quote_ident(view)}")
        for p in statement_problems(facts, where(view), what="view", fix="fix the view's SELECT"):
            problems.append(p)
    for info in tables.values():
        probes = [
            f"INSERT INTO main.{quote_ident(info.name)} DEFAULT VALUES",
            f"DELETE FROM main.{quote_ident(info.name)}",
        ]
        if info.insertable:
            assignments = ", ".join(f"{quote_ident(c)} = {quote_ident(c)}" for c in info.insertable)
            probes.append(f"UPDATE main.{quote_ident(info.name)} SET {assignments}")
        for probe in probes:
            facts = explain(conn, guard, probe)
            culprit = next((a.inner for a in facts.denied if a.inner), None)
            path = where(culprit or info.name)
            forbidden = facts.disallowed_functions
            refused = refusal(facts)
            if refused:
                problems.append(
                    Problem(
                        path,
                        f"writing {info.name} would run code that {refused}",
                        fix_for(facts, "fix the trigger"),
                    )
                )
                break
            if facts.error:
                fired = triggers.get(fold(info.name), [])
                problems.append(
                    Problem(
                        where(fired[0] if fired else info.name),
                        f"writing {info.name} does not compile"
                        + (f" (it fires trigger(s) {', '.join(fired)})" if fired else "")
                        + f": {facts.error}",
                        "fix the trigger (or foreign key) that runs when the table is written",
                    )
                )
                break
            if forbidden:
                problems.append(
                    Problem(
                        path,
                        f"writing {info.name} calls {', '.join(f + '()' for f in forbidden)} (a column default or trigger)",
                        FIX_BY_ACTION["FUNCTION"],
                    )
                )
                break
            if facts.unbounded_calls:
                problems.append(
                    Problem(
                        path,
                        f"writing {info.name} runs schema SQL (a default, CHECK, generated column, index or trigger) that is refused: {facts.unbounded_calls[0]}",
                        "see docs/security.md for the functions worlds may call and why",
                    )
                )
                break


def install_tracking(
    conn: sqlite3.Connection, guard: Guard, tables: dict[str, TableInfo]
) -> frozenset[str]:
    """Triggers that log which rows each table had inserted, updated or deleted.

    They live in the world's own schema (so a reset by ``deserialize``
    restores them with an empty log). The verifier then compares only the
    logged rows, and falls back to whole tables when the row counts do not
    add up (a REPLACE deletes rows without firing delete triggers). Tables
    without a rowid (WITHOUT ROWID) are always compared whole.

    Args:
        conn: the world's connection, valid and built.
        guard: its authorizer.
        tables: the world's tables, by lower-cased name.

    Returns:
        The lower-cased names of the tables tracked row by row.
    """
    tracked: set[str] = set()
    log = f"{TRACKING_PREFIX}changes"
    with guard.trust():
        conn.execute(f"CREATE TABLE main.{log}(tbl TEXT NOT NULL, rid INTEGER, op TEXT NOT NULL)")
        for n, (key, info) in enumerate(sorted(tables.items())):
            if info.rowid is None:
                continue
            table = quote_ident(info.name)
            literal = "'" + key.replace("'", "''") + "'"
            rid = info.rowid
            conn.execute(
                f"CREATE TRIGGER main.{TRACKING_PREFIX}i{n} AFTER INSERT ON {table} "
                f"BEGIN INSERT INTO {log} VALUES ({literal}, new.{rid}, 'i'); END"
            )
            conn.execute(
                f"CREATE TRIGGER main.{TRACKING_PREFIX}d{n} AFTER DELETE ON {table} "
                f"BEGIN INSERT INTO {log} VALUES ({literal}, old.{rid}, 'd'); END"
            )
            conn.execute(
                f"CREATE TRIGGER main.{TRACKING_PREFIX}u{n} AFTER UPDATE ON {table} "
                f"BEGIN INSERT INTO {log} VALUES ({literal}, old.{rid}, 'u'), ({literal}, new.{rid}, 'u'); END"
            )
            tracked.add(key)
    return frozenset(tracked)
