"""A task's frame: which rows and columns of which tables an episode may change.

Each entry maps a table to a row condition (an expression over that
table's own columns), to a condition and the columns that may change, or
to ``"*"``; every table the frame does not list must stay unchanged.
"""

from __future__ import annotations

from typing import Any

from coevo.arena.errors import Problem
from coevo.arena.sqlguard import explain, fold, quote_ident
from coevo.arena.validation.compiled import CompiledWorld, FrameEntry
from coevo.arena.validation.problems import did_you_mean, shorten, unknown_column_problem
from coevo.arena.validation.statements import statement_problems

__all__ = ["compile_frame"]


def compile_frame(
    world: CompiledWorld, frame: dict[str, Any], problems: list[Problem]
) -> dict[str, FrameEntry]:
    """Check a task's frame against its world and make an entry for every table.

    Args:
        world: the compiled world the task runs on.
        frame: ``verifier.frame``: table name to ``"*"``, a row condition, or
            a condition with the columns that may change.
        problems: where problems found are added.

    Returns:
        Lower-cased table name to its :class:`FrameEntry`, for every table of
        the world (``unchanged`` for those the frame does not list).
    """
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
                        f"no table {table_name!r} in the world{did_you_mean(table_name, names)}",
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
        found = statement_problems(
            facts, cpath, what="condition", fix="write an expression over the table's columns"
        )
        if not found:
            if facts.selects != 1:
                found.append(
                    Problem(
                        cpath,
                        f"{shorten(condition)!r} holds a subquery",
                        "use only the table's own columns",
                    )
                )
            others = sorted({a.arg1 or "" for a in facts.reads if fold(a.arg1 or "") != key})
            if others:
                found.append(
                    Problem(
                        cpath,
                        f"{shorten(condition)!r} reads {', '.join(others)}",
                        "use only the table's own columns",
                    )
                )
            if facts.parameters:
                found.append(
                    Problem(
                        cpath,
                        f"{shorten(condition)!r} uses parameters",
                        "a frame condition has no parameters",
                    )
                )
            if facts.writes:
                found.append(
                    Problem(cpath, f"{shorten(condition)!r} writes", "a frame condition only reads")
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
                    unknown_column_problem(
                        f"{path}.columns[{j}]", info, column, f"columns: {', '.join(info.columns)}"
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
