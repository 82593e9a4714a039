"""What every validator words the same way: statements shortened, names hinted at, bad text, ids.

The world's and the task's validators report through these, so a problem
reads alike wherever it was found.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import get_close_matches

from coevo.arena.errors import Problem
from coevo.arena.records import find_unencodable
from coevo.arena.spec import TaskSpec, WorldSpec
from coevo.arena.validation.compiled import TableInfo

__all__ = [
    "did_you_mean",
    "id_mismatch_problem",
    "shorten",
    "unencodable_problems",
    "unknown_column_problem",
]


def shorten(text: str, limit: int = 80) -> str:
    """``text`` on one line, cut to ``limit`` characters (ending in ``...``) for a message.

    Args:
        text: a SQL statement, condition or value to quote in a problem.
        limit: the most characters to keep.
    """
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def did_you_mean(name: str, options: Sequence[str]) -> str:
    """A `` (did you mean 'x'?)`` suffix naming the option closest to ``name``, or ``""``.

    Args:
        name: the name that was not found.
        options: the names that exist.
    """
    hint = get_close_matches(name, list(options), n=1, cutoff=0.6)
    return f" (did you mean {hint[0]!r}?)" if hint else ""


def unknown_column_problem(path: str, table: TableInfo, column: str, fix: str) -> Problem:
    """The problem for a column name that ``table`` does not have, with the closest one as a hint.

    Args:
        path: where the name is in the record.
        table: the table the name should be a column of.
        column: the name as written.
        fix: how to fix it (each caller lists the table's columns its own way).
    """
    return Problem(
        path,
        f"{table.name} has no column {column!r}{did_you_mean(column, table.columns)}",
        fix,
    )


def id_mismatch_problem(path: str, given: str, computed: str) -> Problem:
    """The problem for an id given in a record that is not the id of the record's content.

    Args:
        path: where the id is in the record (``world.id``, ``id``).
        given: the id as written.
        computed: the id of the content.
    """
    return Problem(
        path,
        f"{given!r} does not match the content's id {computed!r}",
        "remove the id (it is computed) or fix the record",
    )


def unencodable_problems(spec: WorldSpec | TaskSpec, root: str) -> list[Problem]:
    """The first text in a record that is not valid Unicode (an unpaired surrogate), if any.

    Args:
        spec: the world or task record.
        root: the path the problem's location starts with (``world`` or ``task``).

    Returns:
        One problem naming where the text is, or an empty list.
    """
    where = find_unencodable(spec.model_dump(mode="python", by_alias=True), root)
    if where is None:
        return []
    return [
        Problem(
            where, "holds an unpaired UTF-16 surrogate, which is not valid Unicode", "fix the text"
        )
    ]
