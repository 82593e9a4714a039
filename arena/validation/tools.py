"""The world's tools: compile each statement and check it against the tool's declaration.

Every statement is compiled with ``EXPLAIN`` under the recording
authorizer; its named parameters must be declared in the tool's JSON
Schema, it may reach only the world (``main``), and a ``read`` tool may
not write.
"""

from __future__ import annotations

import sqlite3

from coevo.arena.arguments import compile_parameters
from coevo.arena.errors import Problem
from coevo.arena.spec import WorldSpec
from coevo.arena.sqlguard import Guard, StatementFacts, explain, fold
from coevo.arena.validation.compiled import CompiledTool
from coevo.arena.validation.problems import shorten
from coevo.arena.validation.statements import statement_problems

__all__ = ["compile_tools"]


def compile_tools(
    conn: sqlite3.Connection,
    guard: Guard,
    spec: WorldSpec,
    problems: list[Problem],
    warnings: list[str],
) -> dict[str, CompiledTool]:
    """Compile every tool of a world: its parameters' binder, its statements and what they write.

    Args:
        conn: the world's connection, built.
        guard: its authorizer, knowing the world's tables and views.
        spec: the world record.
        problems: where problems found are added.
        warnings: where things worth knowing are added (unused parameters,
            a ``write`` tool that never writes).

    Returns:
        Tool name to :class:`CompiledTool`, for the tools without problems.
    """
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
            found = statement_problems(facts, spath, what="statement", fix="fix the SQL")
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
    """The rules a compiled tool statement must keep: named, declared parameters, main only, effect."""
    problems: list[Problem] = []
    shown = shorten(facts.sql)
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
