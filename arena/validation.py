"""Static validation: build a world with SQLite and check every statement against the format's rules.

:func:`compile_world` builds a world's database (tables and indexes, then
seed rows with foreign keys off, then views and triggers), compiles every
tool statement with ``EXPLAIN`` under the recording authorizer, and returns
a :class:`CompiledWorld` ready to run — or raises :class:`SpecError` naming
every problem. :func:`compile_task` does the same for a task's verifier,
frame and reference solution against a compiled world.

SQLite is the judge of what a statement does: the authorizer reports each
table, column and function it touches, the EXPLAIN listing its parameters
and the functions its program calls (column defaults included).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from difflib import get_close_matches
from typing import Any

from coevo.arena.arguments import Binder, compile_parameters
from coevo.arena.errors import Problem, SpecError
from coevo.arena.limits import Limits
from coevo.arena.records import find_unencodable
from coevo.arena.spec import (
    SUBMIT,
    WORLD_ID_PATTERN,
    Blob,
    TaskSpec,
    ToolCall,
    WorldSpec,
)
from coevo.arena.sqlguard import (
    FORBIDDEN_FUNCTIONS,
    TRACKING_PREFIX,
    Guard,
    StatementFacts,
    explain,
    fold,
    open_world_connection,
    quote_ident,
)

__all__ = [
    "CompiledCheck",
    "CompiledTask",
    "CompiledTool",
    "CompiledWorld",
    "FrameEntry",
    "TableInfo",
    "compile_task",
    "compile_world",
]

_TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_NOW = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?$")
_LEADING_COMMENTS = re.compile(r"^(\s+|--[^\n]*(\n|$)|/\*.*?\*/)*", re.S)
_CREATE = re.compile(
    r"^CREATE\s+(?:(TEMP|TEMPORARY)\s+)?(?:UNIQUE\s+)?(TABLE|INDEX|VIEW|TRIGGER|VIRTUAL\s+TABLE)\b",
    re.I,
)
_DEFERRED = re.compile(r"\bINITIALLY\s+DEFERRED\b", re.I)
_MAX_ROW_PROBLEMS = 20
_MAX_WARNED_ROWIDS = 8


@dataclass(frozen=True, slots=True)
class TableInfo:
    """A table of a built world.

    Attributes:
        name: the table's name as declared.
        columns: every column, generated ones included, in declaration order.
        insertable: the columns seed rows may set (not generated).
        primary_key: the primary-key columns in key order (empty when none).
        rowid: the name that reaches the table's rowid (``rowid``,
            ``_rowid_`` or ``oid``), or None for WITHOUT ROWID tables and
            tables whose columns shadow all three.
        rowid_alias: the INTEGER PRIMARY KEY column that is the rowid, if any.
    """

    name: str
    columns: tuple[str, ...]
    insertable: tuple[str, ...]
    primary_key: tuple[str, ...]
    rowid: str | None
    rowid_alias: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, ...]:
        """What rows are matched by: the rowid, or the primary key of a WITHOUT ROWID table.

        The rowid, not a declared primary key, because in a rowid table a
        primary key that is not INTEGER PRIMARY KEY may hold NULLs, which do
        not identify a row.
        """
        return (self.rowid,) if self.rowid else self.primary_key

    @property
    def fixed_columns(self) -> tuple[str, ...]:
        """Columns whose change moves a row to another key (INTEGER PRIMARY KEY, or a WITHOUT ROWID key)."""
        return self.rowid_alias if self.rowid else self.primary_key

    def column(self, name: str) -> str | None:
        """The declared spelling of column ``name`` (SQLite names are case-insensitive)."""
        folded = fold(name)
        return next((c for c in self.columns if fold(c) == folded), None)


@dataclass(frozen=True, slots=True)
class CompiledTool:
    """A tool ready to run: its statements, argument binder and what it may write.

    Attributes:
        name: the tool's name.
        effect: ``read`` or ``write``.
        statements: the SQL statements, in order.
        binder: validates arguments and makes the bind values.
        writes: tables the statements may change, triggers and foreign-key actions included.
    """

    name: str
    effect: str
    statements: tuple[str, ...]
    binder: Binder
    writes: frozenset[str]


@dataclass(eq=False)
class CompiledWorld:
    """A built, validated world: its connection, tables, tools and initial state.

    Attributes:
        spec: the world record.
        id: its id.
        conn: the SQLite connection holding the world (``main``) and its
            initial state (attached read-only as ``initial``).
        guard: the connection's authorizer and VM budget.
        tables: table name (lower-cased) to :class:`TableInfo`.
        views: lower-cased view names.
        tools: tool name to :class:`CompiledTool`.
        initial: the built database's bytes (the initial state).
        tracked: lower-cased tables whose changed rows are tracked row by row.
        deferred_foreign_keys: some foreign key is DEFERRABLE INITIALLY DEFERRED
            (checked after every write call, since an episode never commits).
        warnings: things worth knowing that do not make the world invalid.
    """

    spec: WorldSpec
    id: str
    conn: sqlite3.Connection
    guard: Guard
    limits: Limits
    tables: dict[str, TableInfo]
    views: frozenset[str]
    tools: dict[str, CompiledTool]
    initial: bytes
    tracked: frozenset[str]
    deferred_foreign_keys: bool = False
    warnings: list[str] = field(default_factory=list)

    def table(self, name: str) -> TableInfo | None:
        """The table called ``name`` (any case), or None."""
        return self.tables.get(fold(name))


@dataclass(frozen=True, slots=True)
class CompiledCheck:
    """A verifier check ready to run.

    Attributes:
        name: the check's name.
        sql: its SELECT.
        uses_answer: whether it reads ``:answer`` (else it is a *state check*).
    """

    name: str
    sql: str
    uses_answer: bool


@dataclass(frozen=True, slots=True)
class FrameEntry:
    """The frame rule for one table.

    Attributes:
        table: the table.
        kind: ``any`` (``"*"``), ``where`` (only matching rows may change),
            ``columns`` (only these columns of matching rows may change) or
            ``unchanged`` (not listed in the frame).
        where: the row condition for ``where`` and ``columns``.
        columns: the columns that may change, for ``columns``.
    """

    table: TableInfo
    kind: str
    where: str | None = None
    columns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CompiledTask:
    """A task validated against its compiled world.

    Attributes:
        spec: the task record.
        id: its id.
        checks: the verifier checks, in order.
        frame: lower-cased table name to its :class:`FrameEntry`, for every table.
        warnings: things worth knowing that do not make the task invalid.
    """

    spec: TaskSpec
    id: str
    checks: tuple[CompiledCheck, ...]
    frame: dict[str, FrameEntry]
    warnings: tuple[str, ...] = ()

    @property
    def state_checks(self) -> tuple[CompiledCheck, ...]:
        """Checks that do not use ``:answer``."""
        return tuple(c for c in self.checks if not c.uses_answer)

    @property
    def uses_answer(self) -> bool:
        """Whether any check reads ``:answer``."""
        return any(c.uses_answer for c in self.checks)


# -- helpers ----------------------------------------------------------------------


def _shorten(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _did_you_mean(name: str, options: Sequence[str]) -> str:
    hint = get_close_matches(name, list(options), n=1, cutoff=0.6)
    return f" (did you mean {hint[0]!r}?)" if hint else ""


def _denied_by_weight(facts: StatementFacts) -> list[Any]:
    """Refused actions, the telling ones first (a DROP before the sqlite_master write it implies)."""
    internal = ("READ", "INSERT", "UPDATE", "DELETE")
    return sorted(
        facts.denied,
        key=lambda a: (
            a.action in internal and (a.arg1 or "").lower().startswith("sqlite_"),
            a.action in internal,
        ),
    )


def _refusal(facts: StatementFacts) -> str | None:
    """Why the guard refused a statement, naming each refused action."""
    denied = _denied_by_weight(facts)
    if not denied:
        return None
    seen: list[str] = []
    for action in denied:
        text = action.describe()
        if text not in seen:
            seen.append(text)
    return "; ".join(seen[:4])


_FIX_BY_ACTION = {
    "FUNCTION": "worlds are deterministic: compute the value from the world's data, or use the world clock ('now')",
    "READ": "use only the world's own tables and views",
    "PRAGMA": "PRAGMA is not allowed; read the world's tables instead",
    "ATTACH": "a world is one database; ATTACH/DETACH are not allowed",
    "DETACH": "a world is one database; ATTACH/DETACH are not allowed",
    "TRANSACTION": "each tool already runs as one transaction; remove BEGIN/COMMIT/ROLLBACK",
    "SAVEPOINT": "each tool already runs as one transaction; remove SAVEPOINT/RELEASE",
}


def _fix_for(facts: StatementFacts, default: str) -> str:
    for action in _denied_by_weight(facts):
        if action.action == "FUNCTION" and (action.arg2 or "").lower() in (
            "load_extension",
            "fts3_tokenizer",
        ):
            return "extensions are not allowed: worlds use SQLite's built-in functions only"
        if action.action == "FUNCTION" and (action.arg2 or "").lower().startswith("sqlite_"):
            return "sqlite_* functions describe the SQLite build, which differs between machines"
        if action.action == "FUNCTION" and fold(action.arg2 or "") not in FORBIDDEN_FUNCTIONS:
            return "only SQLite's core built-in functions are allowed (extension functions such as FTS5's or R-Tree's differ between builds)"
        if action.action in _FIX_BY_ACTION:
            return _FIX_BY_ACTION[action.action]
        if action.action.startswith(("CREATE", "DROP", "ALTER")) or action.action in (
            "REINDEX",
            "ANALYZE",
        ):
            return "tools and checks cannot change the schema; put DDL in the world's schema"
        if action.action in ("INSERT", "UPDATE", "DELETE"):
            if (action.arg1 or "").lower().startswith("sqlite_"):
                return "tools and checks cannot change the schema; put DDL in the world's schema"
            return "write only to the world's own tables"
    return default


def _statement_problems(facts: StatementFacts, path: str, *, what: str, fix: str) -> list[Problem]:
    """Problems every untrusted statement can have: refused actions, errors, forbidden calls."""
    problems: list[Problem] = []
    refused = _refusal(facts)
    shown = _shorten(facts.sql)
    if refused:
        problems.append(Problem(path, f"{what} {shown!r} {refused}", _fix_for(facts, fix)))
    elif facts.error:
        problems.append(Problem(path, f"{what} {shown!r} does not compile: {facts.error}", fix))
    forbidden = facts.disallowed_functions
    if forbidden and not refused:
        problems.append(
            Problem(
                path,
                f"{what} {shown!r} calls {', '.join(f + '()' for f in forbidden)} (perhaps in a column default)",
                _FIX_BY_ACTION["FUNCTION"],
            )
        )
    if "Vacuum" in facts.opcodes:
        problems.append(Problem(path, f"{what} {shown!r} runs VACUUM", "VACUUM is not allowed"))
    return problems


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


# -- worlds -----------------------------------------------------------------------


def _unencodable(spec: WorldSpec | TaskSpec, root: str) -> list[Problem]:
    where = find_unencodable(spec.model_dump(mode="python", by_alias=True), root)
    if where is None:
        return []
    return [
        Problem(
            where, "holds an unpaired UTF-16 surrogate, which is not valid Unicode", "fix the text"
        )
    ]


def _check_world_fields(spec: WorldSpec) -> list[Problem]:
    problems: list[Problem] = _unencodable(spec, "world")
    if problems:
        raise SpecError(problems)
    if spec.id is not None and spec.id != spec.world_id:
        problems.append(
            Problem(
                "world.id",
                f"{spec.id!r} does not match the content's id {spec.world_id!r}",
                "remove the id (it is computed) or fix the record",
            )
        )
    if not spec.domain.strip():
        problems.append(
            Problem("world.domain", "is empty", "name the world's domain, e.g. 'retail'")
        )
    if not _NOW.match(spec.now):
        problems.append(
            Problem(
                "world.now",
                f"{spec.now!r} is not an ISO 8601 date-time without a time zone",
                "write e.g. '2026-11-29T12:00:00'",
            )
        )
    else:
        try:
            datetime.fromisoformat(spec.now)
        except ValueError as exc:
            problems.append(
                Problem("world.now", f"{spec.now!r}: {exc}", "write e.g. '2026-11-29T12:00:00'")
            )
    if not spec.schema_sql:
        problems.append(Problem("world.schema", "is empty", "declare at least one CREATE TABLE"))
    if not spec.tools:
        problems.append(Problem("world.tools", "is empty", "declare at least one tool"))
    names: dict[str, int] = {}
    for i, tool in enumerate(spec.tools):
        path = f"world.tools[{i}]"
        if not _TOOL_NAME.match(tool.name):
            problems.append(
                Problem(
                    f"{path}.name",
                    f"{tool.name!r} is not a valid tool name",
                    "use letters, digits and _ (not starting with a digit), at most 64",
                )
            )
        if tool.name == SUBMIT:
            problems.append(
                Problem(
                    f"{path}.name",
                    "'submit' is reserved: every world has it",
                    "rename the tool; the episode ends with the built-in submit(answer?)",
                )
            )
        if tool.name in names:
            problems.append(
                Problem(
                    f"{path}.name",
                    f"{tool.name!r} is already the name of tools[{names[tool.name]}]",
                    "give every tool its own name",
                )
            )
        names.setdefault(tool.name, i)
        if not tool.description.strip():
            problems.append(
                Problem(f"{path}.description", "is empty", "say what the tool does, for the agent")
            )
    return problems


def _create_schema(
    conn: sqlite3.Connection, guard: Guard, spec: WorldSpec, problems: list[Problem]
) -> tuple[dict[str, int], list[tuple[int, str, str]]]:
    """Run the CREATE TABLE and CREATE INDEX statements; sort out the rest.

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
                    f"{_shorten(sql)!r} {problem}",
                    "the schema holds CREATE TABLE/INDEX/VIEW/TRIGGER statements; rows go in data",
                )
            )
        elif kind in ("view", "trigger"):
            late.append((i, kind, sql))
        else:
            _run_schema_statement(conn, guard, i, kind, sql, created, problems)
    return created, late


def _run_schema_statement(
    conn: sqlite3.Connection,
    guard: Guard,
    i: int,
    kind: str,
    sql: str,
    created: dict[str, int],
    problems: list[Problem],
) -> None:
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
                f"{_shorten(sql)!r} {denied[0].describe()}",
                "the schema may only CREATE tables, indexes, views and triggers",
            )
        )
        return
    if error:
        problems.append(Problem(path, f"{_shorten(sql)!r} fails: {error}", "fix the statement"))
        return
    made = [a for a in records if a.action == f"CREATE_{kind.upper()}"]
    if not made:
        problems.append(
            Problem(path, f"{_shorten(sql)!r} did not create a {kind}", "fix the statement")
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


def _reserved_columns(
    tables: dict[str, TableInfo], created: dict[str, int], problems: list[Problem]
) -> None:
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


def _table_info(conn: sqlite3.Connection, name: str) -> TableInfo:
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


def _load_data(
    conn: sqlite3.Connection,
    spec: WorldSpec,
    tables: dict[str, TableInfo],
    views: set[str],
    problems: list[Problem],
) -> None:
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
                        f"no table {table_name!r} in the schema{_did_you_mean(table_name, [t.name for t in tables.values()])}",
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
                    Problem(
                        f"{path}.columns[{j}]",
                        f"{info.name} has no column {column!r}{_did_you_mean(column, info.columns)}",
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
        except (sqlite3.Error, OverflowError) as exc:
            conn.execute("ROLLBACK TO coevo_load")
            conn.execute("RELEASE coevo_load")
            first_error = exc
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
                            f"{_shorten(repr(list(values)), 60)} cannot be inserted: {exc}",
                            "fix the row or the table's constraints",
                        )
                    )
        if not found:
            problems.append(
                Problem(path, f"rows cannot be inserted: {first_error}", "fix the rows")
            )


def _foreign_key_warnings(conn: sqlite3.Connection, tables: dict[str, TableInfo]) -> list[str]:
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


def _check_schema_code(
    conn: sqlite3.Connection,
    guard: Guard,
    tables: dict[str, TableInfo],
    views: set[str],
    created: dict[str, int],
    problems: list[Problem],
) -> None:
    """Compile what runs implicitly — views, triggers, column defaults — to vet it like a tool."""

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
        for p in _statement_problems(facts, where(view), what="view", fix="fix the view's SELECT"):
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
            refused = _refusal(facts)
            if refused:
                problems.append(
                    Problem(
                        path,
                        f"writing {info.name} would run code that {refused}",
                        _fix_for(facts, "fix the trigger"),
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
                        _FIX_BY_ACTION["FUNCTION"],
                    )
                )
                break


def _compile_tools(
    conn: sqlite3.Connection,
    guard: Guard,
    spec: WorldSpec,
    problems: list[Problem],
    warnings: list[str],
) -> dict[str, CompiledTool]:
    tools: dict[str, CompiledTool] = {}
    for i, tool in enumerate(spec.tools):
        path = f"world.tools[{i}]"
        binder, param_problems = compile_parameters(
            tool.name, tool.parameters, f"{path}.parameters"
        )
        problems.extend(param_problems)
        properties = tool.parameters.get("properties")
        declared = (
            set(binder.names)
            if binder
            else set(properties)
            if isinstance(properties, dict)
            else set()
        )
        used: set[str] = set()
        writes: set[str] = set()
        ok = binder is not None
        for j, sql in enumerate(tool.sql):
            spath = f"{path}.sql[{j}]"
            facts = explain(conn, guard, sql)
            found = _statement_problems(facts, spath, what="statement", fix="fix the SQL")
            if not found:
                found = _tool_statement_rules(facts, spath, tool.effect, declared)
            if found:
                problems.extend(found)
                ok = False
                continue
            used.update(facts.names)
            writes.update(fold(a.arg1 or "") for a in facts.writes if a.db == "main")
        if not ok or binder is None:
            continue
        unused = [n for n in binder.names if n not in used]
        if unused:
            warnings.append(
                f"{path} ({tool.name}): parameter(s) {', '.join(unused)} are declared but no statement uses them"
            )
        if tool.effect == "write" and not writes:
            warnings.append(f"{path} ({tool.name}): effect is 'write' but no statement writes")
        tools[tool.name] = CompiledTool(
            name=tool.name,
            effect=tool.effect,
            statements=tuple(tool.sql),
            binder=binder,
            writes=frozenset(writes),
        )
    return tools


def _tool_statement_rules(
    facts: StatementFacts, path: str, effect: str, declared: set[str]
) -> list[Problem]:
    problems: list[Problem] = []
    shown = _shorten(facts.sql)
    for param in facts.parameters:
        if param == "?" or param[0] == "?":
            problems.append(
                Problem(
                    path, f"{shown!r} uses a positional parameter", "name every parameter :name"
                )
            )
        elif param[0] != ":":
            problems.append(
                Problem(path, f"{shown!r} writes parameter {param!r}", f"write it :{param[1:]}")
            )
        elif param[1:] not in declared:
            problems.append(
                Problem(
                    path,
                    f"{shown!r} uses undeclared parameter {param!r}",
                    f"declare '{param[1:]}' in parameters.properties or remove it from the SQL",
                )
            )
    other_db = sorted({a.db for a in facts.actions if a.db not in (None, "main")})
    if other_db:
        problems.append(
            Problem(
                path, f"{shown!r} reaches schema(s) {other_db}", "tools see only the world (main)"
            )
        )
    written = sorted({a.arg1 or "" for a in facts.writes if a.db == "main"})
    if effect == "read" and written:
        problems.append(
            Problem(
                path,
                f"{shown!r} writes {', '.join(written)} but the tool's effect is 'read'",
                "set effect to 'write', or make the statement a SELECT",
            )
        )
    if not facts.opcodes:
        problems.append(Problem(path, f"{shown!r} is empty", "write one SQL statement"))
    return problems


def _install_tracking(
    conn: sqlite3.Connection, guard: Guard, tables: dict[str, TableInfo]
) -> frozenset[str]:
    """Triggers that log which rows each table had inserted, updated or deleted.

    They live in the world's own schema (so a reset by ``deserialize``
    restores them with an empty log). The verifier then compares only the
    logged rows, and falls back to whole tables when the row counts do not
    add up (a REPLACE deletes rows without firing delete triggers). Tables
    without a rowid (WITHOUT ROWID) are always compared whole.
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


def compile_world(spec: WorldSpec, limits: Limits) -> CompiledWorld:
    """Build a world's database and validate every rule of ``coevo.world/1``.

    Raises:
        SpecError: naming every problem found (field, value, fix).
    """
    problems = _check_world_fields(spec)
    warnings: list[str] = []
    conn, guard = open_world_connection(
        spec.now if _NOW.match(spec.now) else "2000-01-01 00:00:00", limits
    )
    try:
        created, late = _create_schema(conn, guard, spec, problems)
        with guard.trust():
            objects = conn.execute("SELECT type, name FROM main.sqlite_master").fetchall()
            tables = {
                fold(name): _table_info(conn, name)
                for kind, name in objects
                if kind == "table" and not fold(name).startswith(("sqlite_", TRACKING_PREFIX))
            }
        _reserved_columns(tables, created, problems)
        views: set[str] = set()
        with guard.trust():
            _load_data(conn, spec, tables, views, problems)
        # Views and triggers come after the rows, so seeding fires no trigger.
        for i, kind, sql in late:
            _run_schema_statement(conn, guard, i, kind, sql, created, problems)
        with guard.trust():
            objects = conn.execute("SELECT type, name FROM main.sqlite_master").fetchall()
        views = {fold(name) for kind, name in objects if kind == "view"}
        if not tables and not problems:
            problems.append(
                Problem("world.schema", "creates no table", "declare at least one CREATE TABLE")
            )
        with guard.trust():
            warnings.extend(_foreign_key_warnings(conn, tables))
            conn.execute("PRAGMA foreign_keys = ON")
        guard.known = frozenset(tables) | frozenset(views)
        _check_schema_code(conn, guard, tables, views, created, problems)
        tools = _compile_tools(conn, guard, spec, problems, warnings)
        if problems:
            raise SpecError(problems)
        tracked = _install_tracking(conn, guard, tables)
        with guard.trust():
            deferred = any(
                _DEFERRED.search(sql or "")
                for (sql,) in conn.execute(
                    "SELECT sql FROM main.sqlite_master WHERE type = 'table'"
                )
            )
            initial = conn.serialize()
            conn.execute("ATTACH ':memory:' AS initial")
            conn.deserialize(initial, name="initial")
    except BaseException:
        conn.close()
        raise
    return CompiledWorld(
        spec=spec,
        id=spec.world_id,
        conn=conn,
        guard=guard,
        limits=limits,
        tables=tables,
        views=frozenset(views),
        tools=tools,
        initial=initial,
        tracked=tracked,
        deferred_foreign_keys=deferred,
        warnings=warnings,
    )


# -- tasks ------------------------------------------------------------------------


def _compile_frame(
    world: CompiledWorld, frame: dict[str, Any], problems: list[Problem]
) -> dict[str, FrameEntry]:
    entries: dict[str, FrameEntry] = {}
    for table_name, rule in frame.items():
        path = f"verifier.frame.{table_name}"
        info = world.table(table_name)
        if info is None:
            if fold(table_name) in world.views:
                problems.append(Problem(path, f"{table_name!r} is a view", "frame its base tables"))
            else:
                names = [t.name for t in world.tables.values()]
                problems.append(
                    Problem(
                        path,
                        f"no table {table_name!r} in the world{_did_you_mean(table_name, names)}",
                        f"tables: {', '.join(names)}",
                    )
                )
            continue
        key = fold(info.name)
        if key in entries:
            problems.append(
                Problem(path, f"table {info.name!r} is framed twice", "merge the two entries")
            )
            continue
        if isinstance(rule, str) and rule.strip() == "*":
            entries[key] = FrameEntry(info, "any")
            continue
        condition = rule if isinstance(rule, str) else rule.where
        cpath = path if isinstance(rule, str) else f"{path}.where"
        if not condition.strip():
            problems.append(
                Problem(
                    cpath,
                    "the row condition is empty",
                    'write a condition such as "id = 17", or "*"',
                )
            )
            continue
        facts = explain(
            world.conn,
            world.guard,
            f"SELECT 1 FROM main.{quote_ident(info.name)} WHERE (\n{condition}\n)",
        )
        found = _statement_problems(
            facts, cpath, what="condition", fix="write an expression over the table's columns"
        )
        if not found:
            if facts.selects != 1:
                found.append(
                    Problem(
                        cpath,
                        f"{_shorten(condition)!r} holds a subquery",
                        "use only the table's own columns",
                    )
                )
            others = sorted({a.arg1 or "" for a in facts.reads if fold(a.arg1 or "") != key})
            if others:
                found.append(
                    Problem(
                        cpath,
                        f"{_shorten(condition)!r} reads {', '.join(others)}",
                        "use only the table's own columns",
                    )
                )
            if facts.parameters:
                found.append(
                    Problem(
                        cpath,
                        f"{_shorten(condition)!r} uses parameters",
                        "a frame condition has no parameters",
                    )
                )
            if facts.writes:
                found.append(
                    Problem(
                        cpath, f"{_shorten(condition)!r} writes", "a frame condition only reads"
                    )
                )
        if found:
            problems.extend(found)
            continue
        if isinstance(rule, str):
            entries[key] = FrameEntry(info, "where", where=condition)
            continue
        columns: list[str] = []
        for j, column in enumerate(rule.columns):
            real = info.column(column)
            if real is None:
                problems.append(
                    Problem(
                        f"{path}.columns[{j}]",
                        f"{info.name} has no column {column!r}{_did_you_mean(column, info.columns)}",
                        f"columns: {', '.join(info.columns)}",
                    )
                )
            elif real in info.fixed_columns:
                problems.append(
                    Problem(
                        f"{path}.columns[{j}]",
                        f"{real!r} identifies {info.name}'s rows; rows are matched by it",
                        "use the condition form (a string) to allow key changes",
                    )
                )
            else:
                columns.append(real)
        if not info.key:
            problems.append(
                Problem(
                    path,
                    f"{info.name} has no primary key and no usable rowid, so rows cannot be matched",
                    "use the condition form (a string) for this table",
                )
            )
            continue
        if len(columns) == len(rule.columns):
            entries[key] = FrameEntry(info, "columns", where=condition, columns=tuple(columns))
    for key, info in world.tables.items():
        entries.setdefault(key, FrameEntry(info, "unchanged"))
    return entries


def _check_solution(
    world: CompiledWorld, solution: Sequence[ToolCall], problems: list[Problem]
) -> None:
    if not solution:
        problems.append(Problem("solution", "is empty", "end the reference solution with submit"))
        return
    last = len(solution) - 1
    for i, call in enumerate(solution):
        path = f"solution[{i}]"
        if call.tool == SUBMIT:
            if i != last:
                problems.append(
                    Problem(
                        path,
                        "submit comes before the last step",
                        "submit exactly once, as the last step",
                    )
                )
            extra = sorted(set(call.arguments) - {"answer"})
            if extra:
                problems.append(
                    Problem(
                        f"{path}.arguments",
                        f"submit takes only 'answer', got {extra}",
                        "pass submit({'answer': ...}) or submit({})",
                    )
                )
            answer = call.arguments.get("answer")
            if answer is not None and not isinstance(answer, str):
                problems.append(
                    Problem(
                        f"{path}.arguments.answer",
                        f"must be a string, got {answer!r}",
                        "pass the answer as text",
                    )
                )
            continue
        tool = world.tools.get(call.tool)
        if tool is None:
            problems.append(
                Problem(
                    f"{path}.tool",
                    f"no tool {call.tool!r} in the world{_did_you_mean(call.tool, list(world.tools))}",
                    f"tools: {', '.join(world.tools)}, submit",
                )
            )
            continue
        _, error = tool.binder.bind(call.arguments)
        if error:
            problems.append(
                Problem(
                    f"{path}.arguments", error, "fix the arguments to match the tool's parameters"
                )
            )
    if solution[last].tool != SUBMIT:
        problems.append(
            Problem(
                f"solution[{last}]",
                f"the last step is {solution[last].tool!r}, not submit",
                "end the solution with submit",
            )
        )


def compile_task(task: TaskSpec, world: CompiledWorld) -> CompiledTask:
    """Validate a task against its compiled world: verifier checks, frame and solution.

    Raises:
        SpecError: naming every problem found.
    """
    problems: list[Problem] = _unencodable(task.model_copy(update={"world": task.world_id}), "task")
    if problems:
        raise SpecError(problems)
    if task.world_id != world.id:
        problems.append(
            Problem(
                "world",
                f"the task's world is {task.world_id}, not {world.id}",
                "run the task on its own world",
            )
        )
        raise SpecError(problems)
    if task.id is not None and task.id != task.task_id:
        problems.append(
            Problem(
                "id",
                f"{task.id!r} does not match the content's id {task.task_id!r}",
                "remove the id (it is computed) or fix the record",
            )
        )
    if not task.instruction.strip():
        problems.append(Problem("instruction", "is empty", "say what the user wants"))
    if task.lineage.parent is not None and not re.match(WORLD_ID_PATTERN, task.lineage.parent):
        problems.append(
            Problem(
                "lineage.parent",
                f"{task.lineage.parent!r} is not a task id",
                "use the parent's 'sha256:...' id",
            )
        )
    checks: list[CompiledCheck] = []
    if not task.verifier.checks:
        problems.append(
            Problem(
                "verifier.checks",
                "is empty",
                "add at least one check (a SELECT returning 1 when the goal is met)",
            )
        )
    seen: set[str] = set()
    for i, check in enumerate(task.verifier.checks):
        path = f"verifier.checks[{i}]"
        if not check.name.strip():
            problems.append(
                Problem(f"{path}.name", "is empty", "name the check after what it verifies")
            )
        if check.name in seen:
            problems.append(
                Problem(
                    f"{path}.name", f"{check.name!r} is used twice", "give every check its own name"
                )
            )
        seen.add(check.name)
        facts = explain(world.conn, world.guard, check.sql)
        found = _statement_problems(
            facts, f"{path}.sql", what="check", fix="write one read-only SELECT"
        )
        if not found:
            if facts.writes:
                found.append(
                    Problem(
                        f"{path}.sql",
                        f"check {_shorten(check.sql)!r} writes {facts.writes[0].arg1}",
                        "a check is one read-only SELECT",
                    )
                )
            if "ResultRow" not in facts.opcodes:
                found.append(
                    Problem(
                        f"{path}.sql",
                        f"check {_shorten(check.sql)!r} returns no rows",
                        "a check is a SELECT",
                    )
                )
            for param in facts.parameters:
                if param != ":answer":
                    found.append(
                        Problem(
                            f"{path}.sql",
                            f"check {_shorten(check.sql)!r} uses parameter {param!r}",
                            "the only parameter a check may use is :answer",
                        )
                    )
            temp = sorted({a.db for a in facts.actions if a.db not in (None, "main", "initial")})
            if temp:
                found.append(
                    Problem(
                        f"{path}.sql",
                        f"check reaches schema(s) {temp}",
                        "use main (final state) and initial",
                    )
                )
        if found:
            problems.extend(found)
            continue
        checks.append(CompiledCheck(check.name, check.sql, ":answer" in facts.parameters))
    frame = _compile_frame(world, task.verifier.frame, problems)
    _check_solution(world, task.solution, problems)
    if problems:
        raise SpecError(problems)
    warnings: list[str] = []
    answer_step = task.solution[-1].arguments.get("answer") if task.solution else None
    if answer_step is not None and not any(c.uses_answer for c in checks):
        warnings.append("the solution submits an answer but no check reads :answer")
    return CompiledTask(
        spec=task, id=task.task_id, checks=tuple(checks), frame=frame, warnings=tuple(warnings)
    )
