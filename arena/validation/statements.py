"""What every untrusted statement is checked for: refused actions, errors, forbidden calls.

A tool's statement, a verifier check, a frame condition and the code a
schema runs implicitly are all compiled with ``EXPLAIN`` under the
recording authorizer; the :class:`~coevo.arena.sqlguard.StatementFacts` it
gathers are judged here, and each problem carries the fix for the action
SQLite refused.
"""

from __future__ import annotations

from typing import Any

from coevo.arena.errors import Problem
from coevo.arena.sqlguard import FORBIDDEN_FUNCTIONS, StatementFacts, fold
from coevo.arena.validation.problems import shorten

__all__ = ["FIX_BY_ACTION", "fix_for", "refusal", "statement_problems"]


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


def refusal(facts: StatementFacts) -> str | None:
    """Why the guard refused a statement, naming each refused action (the first four), or None."""
    denied = _denied_by_weight(facts)
    if not denied:
        return None
    seen: list[str] = []
    for action in denied:
        text = action.describe()
        if text not in seen:
            seen.append(text)
    return "; ".join(seen[:4])


FIX_BY_ACTION = {
    "FUNCTION": "worlds are deterministic: compute the value from the world's data, or use the world clock ('now')",
    "READ": "use only the world's own tables and views",
    "PRAGMA": "PRAGMA is not allowed; read the world's tables instead",
    "ATTACH": "a world is one database; ATTACH/DETACH are not allowed",
    "DETACH": "a world is one database; ATTACH/DETACH are not allowed",
    "TRANSACTION": "each tool already runs as one transaction; remove BEGIN/COMMIT/ROLLBACK",
    "SAVEPOINT": "each tool already runs as one transaction; remove SAVEPOINT/RELEASE",
}
"""The fix to suggest when the authorizer refuses an action, by the action's name."""


def fix_for(facts: StatementFacts, default: str) -> str:
    """The fix for the most telling action the guard refused in a statement.

    Args:
        facts: what compiling the statement recorded.
        default: the fix when no refused action has a more specific one.
    """
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
        if action.action in FIX_BY_ACTION:
            return FIX_BY_ACTION[action.action]
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


def statement_problems(facts: StatementFacts, path: str, *, what: str, fix: str) -> list[Problem]:
    """Problems every untrusted statement can have: refused actions, errors, forbidden calls.

    Args:
        facts: what compiling the statement recorded.
        path: where the statement is in the record, e.g. ``world.tools[0].sql[1]``.
        what: what the statement is, to start the message (``statement``, ``check``, ...).
        fix: the fix for a statement that does not compile.
    """
    problems: list[Problem] = []
    refused = refusal(facts)
    shown = shorten(facts.sql)
    if refused:
        problems.append(Problem(path, f"{what} {shown!r} {refused}", fix_for(facts, fix)))
    elif facts.error:
        problems.append(Problem(path, f"{what} {shown!r} does not compile: {facts.error}", fix))
    forbidden = facts.disallowed_functions
    if forbidden and not refused:
        problems.append(
            Problem(
                path,
                f"{what} {shown!r} calls {', '.join(f + '()' for f in forbidden)} (perhaps in a column default)",
                FIX_BY_ACTION["FUNCTION"],
            )
        )
    for reason in facts.unbounded_calls:
        problems.append(
            Problem(
                path,
                f"{what} {shown!r} is refused: {reason}",
                "see docs/security.md for the functions worlds may call and why",
            )
        )
    if "Vacuum" in facts.opcodes:
        problems.append(Problem(path, f"{what} {shown!r} runs VACUUM", "VACUUM is not allowed"))
    return problems
