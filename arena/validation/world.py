"""Compile a world: check the record's fields, build its database and vet every statement.

:func:`compile_world` builds the database (tables and indexes, then seed
rows with foreign keys off, then views and triggers), compiles every tool
statement, and returns a :class:`CompiledWorld` ready to run — or raises
:class:`SpecError` naming every problem.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from datetime import datetime

from coevo.arena.errors import Problem, SpecError
from coevo.arena.limits import Limits
from coevo.arena.spec import SUBMIT, WorldSpec
from coevo.arena.sqlguard import TRACKING_PREFIX, fold, open_world_connection
from coevo.arena.validation.compiled import CompiledWorld
from coevo.arena.validation.data import foreign_key_warnings, load_data
from coevo.arena.validation.problems import id_mismatch_problem, unencodable_problems
from coevo.arena.validation.schema import (
    check_reserved_columns,
    check_schema_code,
    create_schema,
    install_tracking,
    run_schema_statement,
    table_info,
)
from coevo.arena.validation.tools import compile_tools

__all__ = ["clone_world", "compile_world"]

_TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_NOW = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?$")
_DEFERRED = re.compile(r"\bINITIALLY\s+DEFERRED\b", re.I)


def _check_world_fields(spec: WorldSpec) -> list[Problem]:
    """Check what needs no database: text, id, domain, clock and the tools' names and descriptions."""
    problems: list[Problem] = unencodable_problems(spec, "world")
    if problems:
        raise SpecError(problems)
    if spec.id is not None and spec.id != spec.world_id:
        problems.append(id_mismatch_problem("world.id", spec.id, spec.world_id))
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
        created, late = create_schema(conn, guard, spec, problems)
        with guard.trust():
            objects = conn.execute("SELECT type, name FROM main.sqlite_master").fetchall()
            tables = {
                fold(name): table_info(conn, name)
                for kind, name in objects
                if kind == "table" and not fold(name).startswith(("sqlite_", TRACKING_PREFIX))
            }
        check_reserved_columns(tables, created, problems)
        views: set[str] = set()
        # Column defaults and CHECKs run for every seed row: vet them before loading any.
        before = len(problems)
        check_schema_code(conn, guard, tables, views, created, problems)
        if len(problems) > before:
            raise SpecError(problems)
        with guard.trust():
            load_data(conn, spec, tables, views, problems)
        # Views and triggers come after the rows, so seeding fires no trigger.
        for i, kind, sql in late:
            run_schema_statement(conn, guard, i, kind, sql, created, problems)
        with guard.trust():
            objects = conn.execute("SELECT type, name FROM main.sqlite_master").fetchall()
        views = {fold(name) for kind, name in objects if kind == "view"}
        if not tables and not problems:
            problems.append(
                Problem("world.schema", "creates no table", "declare at least one CREATE TABLE")
            )
        with guard.trust():
            warnings.extend(foreign_key_warnings(conn, tables))
            conn.execute("PRAGMA foreign_keys = ON")
        guard.known = frozenset(tables) | frozenset(views)
        check_schema_code(conn, guard, tables, views, created, problems)
        tools = compile_tools(conn, guard, spec, problems, warnings)
        if problems:
            raise SpecError(problems)
        tracked = install_tracking(conn, guard, tables)
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


def clone_world(compiled: CompiledWorld) -> CompiledWorld:
    """Another build of a world that :func:`compile_world` validated, from its initial bytes.

    Nothing is validated again (the world passed, and its bytes are the
    result): a new guarded connection takes the initial state by SQLite's
    backup API, with the same tools, tables and tracking. It costs a small
    fraction of a build, for concurrent episodes of one world.
    """
    spec = compiled.spec
    conn, guard = open_world_connection(
        spec.now if _NOW.match(spec.now) else "2000-01-01 00:00:00", compiled.limits
    )
    try:
        with guard.trust():
            image = sqlite3.connect(":memory:")
            image.deserialize(compiled.initial)
            image.backup(conn)
            image.close()
            # the table-valued functions declare themselves again on the new schema, trusted
            conn.execute("SELECT * FROM json_each('[]')").fetchall()
            conn.execute("SELECT * FROM json_tree('[]')").fetchall()
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("ATTACH ':memory:' AS initial")
            conn.deserialize(compiled.initial, name="initial")
        guard.known = compiled.guard.known
    except BaseException:
        conn.close()
        raise
    return dataclasses.replace(compiled, conn=conn, guard=guard, warnings=list(compiled.warnings))
