"""The verifier: run a task's checks and frame on a final state and give the binary reward.

Checks run with the final state as ``main``, the initial state attached
read-only as ``initial`` and ``:answer`` bound (TEXT, or NULL when absent). A
check passes when it returns exactly one row with one column holding an
INTEGER or REAL that is not 0.

The frame says which rows may change; every table it does not list must be
unchanged. Rows are compared as values inside SQLite (multisets, ``IS``
equality, binary collation), so an equivalent solution is never punished
for its path. When the world tracked which rows the episode touched, only
those rows are compared — exact, because every write fires the tracking
triggers and a table whose row count does not add up (a REPLACE deletes
without firing them) is compared whole.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Literal

from coevo.arena.outcomes import CheckOutcome, FrameViolation, Reward, encode_value
from coevo.arena.sqlguard import TRACKING_PREFIX, quote_ident
from coevo.arena.validation import CompiledCheck, CompiledTask, CompiledWorld, FrameEntry, TableInfo

__all__ = ["evaluate", "frame_violations", "run_check"]

#: Rows outside the frame reported per table (the total is always counted).
REPORTED_ROWS_PER_TABLE = 20
_MAX_SHOWN_TEXT = 200


def _shown(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _MAX_SHOWN_TEXT:
        return value[:_MAX_SHOWN_TEXT] + f"... ({len(value)} characters)"
    if isinstance(value, (bytes, bytearray)) and len(value) > _MAX_SHOWN_TEXT:
        return {"$bytes": len(value)}
    return encode_value(value)


def run_check(world: CompiledWorld, check: CompiledCheck, answer: str | None) -> CheckOutcome:
    """Run one check on the world's current state (``main``) against ``initial``."""
    conn, guard = world.conn, world.guard
    budget = world.limits.verifier_vm_instructions
    guard.budget(budget, world.limits.max_call_seconds)
    guard.read_only = True
    cursor = None
    try:
        cursor = conn.execute(check.sql, {"answer": answer})
        rows = [row for row in (cursor.fetchone(), cursor.fetchone()) if row is not None]
        width = len(cursor.description or ())
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc):
            limit = guard.stop_reason(
                f"the verifier budget of {budget:,} VM instructions",
                world.limits.max_call_seconds,
            )
            return CheckOutcome(name=check.name, passed=False, reason=f"stopped after {limit}")
        return CheckOutcome(name=check.name, passed=False, reason=f"error: {exc}")
    except (sqlite3.Error, MemoryError, OverflowError, ValueError) as exc:
        return CheckOutcome(
            name=check.name, passed=False, reason=f"error: {exc or type(exc).__name__}"
        )
    finally:
        if cursor is not None:
            cursor.close()
        guard.read_only = False
        guard.unlimited()
    if not rows:
        return CheckOutcome(name=check.name, passed=False, reason="returned no row")
    if len(rows) > 1:
        return CheckOutcome(name=check.name, passed=False, reason="returned more than one row")
    if width != 1:
        return CheckOutcome(
            name=check.name, passed=False, reason=f"returned {width} columns, not 1"
        )
    value = rows[0][0]
    if value is None:
        return CheckOutcome(name=check.name, passed=False, reason="returned NULL")
    if isinstance(value, str):
        return CheckOutcome(
            name=check.name, passed=False, reason=f"returned text {value[:40]!r}, not a number"
        )
    if isinstance(value, bytes):
        return CheckOutcome(name=check.name, passed=False, reason="returned a BLOB, not a number")
    if value == 0:
        return CheckOutcome(name=check.name, passed=False, reason="returned 0")
    return CheckOutcome(name=check.name, passed=True, reason=f"returned {value!r}")


# -- frame ------------------------------------------------------------------------


Restriction = Literal["none", "tracked"] | tuple[int, ...]
"""Which rows a frame comparison looks at: all of them, those the change log names, or the
rowids listed (those whose values differ between the two states, found from the data itself)."""


def _restriction(info: TableInfo, key: str, restricted: Restriction | bool) -> str:
    if isinstance(restricted, tuple):
        # Rows equal in both states (same rowid, same values) appear in both multisets and
        # cancel out; leaving them out changes no difference and spares sorting whole tables.
        return f"{info.rowid} IN ({', '.join(str(int(r)) for r in restricted) or 'NULL'})"
    if not restricted or restricted == "none" or info.rowid is None:
        return "1"
    literal = "'" + key.replace("'", "''") + "'"
    return f"{info.rowid} IN (SELECT rid FROM main.{TRACKING_PREFIX}changes WHERE tbl = {literal})"


def _multiset_changes(
    conn: sqlite3.Connection, entry: FrameEntry, key: str, restricted: Restriction | bool
) -> tuple[list[FrameViolation], int]:
    """Rows whose multiplicity differs between initial and final (outside the condition, if any)."""
    info = entry.table
    table = quote_ident(info.name)
    columns = [quote_ident(c) for c in info.columns]
    projection = ", ".join(f"{c} COLLATE BINARY AS {c}" for c in columns)
    grouping = ", ".join(columns)
    outside = f"NOT ifnull((\n{entry.where}\n), 0)" if entry.kind == "where" else "1"
    restrict = _restriction(info, key, restricted)
    sql = (
        f"WITH f AS (SELECT {projection} FROM main.{table} WHERE {restrict} AND {outside}), "
        f"i AS (SELECT {projection} FROM initial.{table} WHERE {restrict} AND {outside}), "
        f"fc AS (SELECT {grouping}, count(*) AS coevo_n FROM f GROUP BY {grouping}), "
        f"ic AS (SELECT {grouping}, count(*) AS coevo_n FROM i GROUP BY {grouping}) "
        f"SELECT 'added', * FROM (SELECT * FROM fc EXCEPT SELECT * FROM ic) "
        f"UNION ALL SELECT 'removed', * FROM (SELECT * FROM ic EXCEPT SELECT * FROM fc)"
    )
    rows = conn.execute(sql).fetchall()
    width = len(info.columns)
    final_counts: dict[tuple[Any, ...], int] = {}
    initial_counts: dict[tuple[Any, ...], int] = {}
    for row in rows:
        values, count = tuple(row[1 : 1 + width]), row[1 + width]
        (final_counts if row[0] == "added" else initial_counts)[values] = count
    violations: list[FrameViolation] = []
    total = 0
    for values in list(final_counts) + [v for v in initial_counts if v not in final_counts]:
        diff = final_counts.get(values, 0) - initial_counts.get(values, 0)
        if diff == 0:
            continue
        total += abs(diff)
        if len(violations) < REPORTED_ROWS_PER_TABLE:
            violations.append(
                FrameViolation(
                    table=info.name,
                    change="added" if diff > 0 else "removed",
                    row={c: _shown(v) for c, v in zip(info.columns, values, strict=True)},
                    count=abs(diff),
                )
            )
    return violations, total


def _keyed_changes(
    conn: sqlite3.Connection, entry: FrameEntry, key: str, restricted: Restriction | bool
) -> tuple[list[FrameViolation], int]:
    """The ``columns`` form: rows matched by key; matching rows may change only the listed columns."""
    info = entry.table
    table = quote_ident(info.name)
    keys = info.key
    rowid_key = keys == (info.rowid,)
    restrict = _restriction(info, key, restricted)
    if rowid_key:
        join_i = f"f.{info.rowid} = i.coevo_rid"
        join_plain = f"f.{info.rowid} = i.{info.rowid}"
        i_select = f"SELECT {info.rowid} AS coevo_rid, *"
    else:
        join_i = " AND ".join(f"f.{quote_ident(k)} IS i.{quote_ident(k)}" for k in keys)
        join_plain = join_i
        i_select = "SELECT *"
    violations: list[FrameViolation] = []
    total = 0
    cols = ", ".join(quote_ident(c) for c in info.columns)
    for change, outer, inner in (("removed", "initial", "main"), ("added", "main", "initial")):
        alias_outer, alias_inner = ("i", "f") if outer == "initial" else ("f", "i")
        join = join_plain if rowid_key else join_i
        sql = (
            f"SELECT {cols} FROM {outer}.{table} AS {alias_outer} WHERE {restrict} AND NOT EXISTS "
            f"(SELECT 1 FROM {inner}.{table} AS {alias_inner} WHERE {join})"
        )
        for row in conn.execute(sql):
            total += 1
            if len(violations) < REPORTED_ROWS_PER_TABLE:
                violations.append(
                    FrameViolation(
                        table=info.name,
                        change=change,
                        row={c: _shown(v) for c, v in zip(info.columns, row, strict=True)},
                    )
                )
    differs = [
        f"(i.{quote_ident(c)} COLLATE BINARY IS NOT f.{quote_ident(c)})" for c in info.columns
    ]
    flags, any_change = ", ".join(differs), " OR ".join(differs)
    finals = ", ".join(f"f.{quote_ident(c)}" for c in info.columns)
    sql = (
        f"SELECT i.coevo_m, {flags}, {finals} FROM "
        f"({i_select}, ifnull((\n{entry.where}\n), 0) AS coevo_m FROM initial.{table} WHERE {restrict}) AS i "
        f"JOIN main.{table} AS f ON {join_i} WHERE {any_change}"
    )
    allowed = set(entry.columns)
    width = len(info.columns)
    for row in conn.execute(sql):
        matching = bool(row[0])
        changed = [c for c, flag in zip(info.columns, row[1 : 1 + width], strict=True) if flag]
        bad = [c for c in changed if c not in allowed] if matching else changed
        if not bad:
            continue
        total += 1
        if len(violations) < REPORTED_ROWS_PER_TABLE:
            violations.append(
                FrameViolation(
                    table=info.name,
                    change="changed",
                    row={c: _shown(v) for c, v in zip(info.columns, row[1 + width :], strict=True)},
                    columns=bad,
                )
            )
    return violations, total


MAX_LISTED_ROWIDS = 2_000
"""Above this many differing rows a whole-table comparison does not list them (SQL text stays small)."""


def _differing_rowids(conn: sqlite3.Connection, info: TableInfo) -> tuple[int, ...] | None:
    """The rowids whose rows differ between the states (added, removed or changed), or None.

    ``None`` when the table has no rowid (compare it whole). One pass joined on
    rowid tells an unchanged table (the common case) apart; only a changed
    table pays for listing its differing rows.
    """
    if info.rowid is None:
        return None
    table, rid = quote_ident(info.name), info.rowid
    same = " AND ".join(
        f"f.{quote_ident(c)} COLLATE BINARY IS i.{quote_ident(c)}" for c in info.columns
    )
    counts = conn.execute(
        f"SELECT (SELECT count(*) FROM main.{table}), (SELECT count(*) FROM initial.{table}), "
        f"(SELECT count(*) FROM main.{table} AS f JOIN initial.{table} AS i "
        f"ON i.{rid} = f.{rid} WHERE {same})"
    ).fetchone()
    if counts[0] == counts[1] == counts[2]:
        return ()
    if max(counts[0], counts[1]) - counts[2] > MAX_LISTED_ROWIDS:
        return None  # too many to list in the SQL text: compare the whole table
    rows = conn.execute(
        f"SELECT f.{rid} FROM main.{table} AS f LEFT JOIN initial.{table} AS i "
        f"ON i.{rid} = f.{rid} WHERE i.{rid} IS NULL OR NOT ({same}) "
        f"UNION SELECT i.{rid} FROM initial.{table} AS i WHERE NOT EXISTS "
        f"(SELECT 1 FROM main.{table} AS f WHERE f.{rid} = i.{rid})"
    ).fetchall()
    return tuple(sorted(r[0] for r in rows))


def _changed_tables(world: CompiledWorld) -> dict[str, int]:
    """Tables with tracked row events, and their net row-count change."""
    rows = world.conn.execute(
        f"SELECT tbl, sum(op = 'i') - sum(op = 'd') FROM main.{TRACKING_PREFIX}changes GROUP BY tbl"
    ).fetchall()
    return {table: net for table, net in rows}


def _count(conn: sqlite3.Connection, db: str, info: TableInfo) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {db}.{quote_ident(info.name)}").fetchone()[0])


def frame_violations(
    world: CompiledWorld,
    task: CompiledTask,
    *,
    tracked: bool,
    writable: frozenset[str] | None = None,
) -> tuple[list[FrameViolation], int, list[str]]:
    """Every row outside the task's frame, comparing ``main`` with ``initial``.

    Each table's comparison runs under the verifier's VM budget (a frame
    condition is untrusted SQL); a table that cannot be compared within it
    counts as outside the frame (fail closed).

    Args:
        world: the compiled world, in its final state.
        task: the compiled task.
        tracked: the tracking log is valid for this state (the state was
            reached by tool calls since the last reset), so untouched tables
            can be skipped and touched ones compared row by row.
        writable: when the state was reached by tool calls, the tables those
            calls can change at all (from compiling them: triggers and
            foreign-key actions included); other tables are not compared.
            ``None``: compare every table.

    Returns:
        Up to :data:`REPORTED_ROWS_PER_TABLE` violations per table, the
        total number of rows outside the frame, and the tables that could
        not be compared (with why).
    """
    conn, guard = world.conn, world.guard
    budget = world.limits.verifier_vm_instructions
    violations: list[FrameViolation] = []
    errors: list[str] = []
    total = 0
    with guard.trust():
        changed = _changed_tables(world) if tracked else {}
        for key, entry in task.frame.items():
            if entry.kind == "any" or (writable is not None and key not in writable):
                continue
            restricted: Restriction = "none"
            if tracked and key in world.tracked:
                if key not in changed:
                    continue
                info = entry.table
                if _count(conn, "main", info) == _count(conn, "initial", info) + changed[key]:
                    restricted = "tracked"
            compare = _keyed_changes if entry.kind == "columns" else _multiset_changes
            guard.budget(budget, world.limits.max_call_seconds)
            try:
                if restricted == "none":
                    differing = _differing_rowids(conn, entry.table)
                    if differing == ():
                        continue
                    if differing is not None:
                        restricted = differing
                found, count = compare(conn, entry, key, restricted)
            except (sqlite3.Error, MemoryError, OverflowError) as exc:
                text = str(exc)
                if "interrupted" in text:
                    text = "stopped after " + guard.stop_reason(
                        f"the verifier budget of {budget:,} VM instructions",
                        world.limits.max_call_seconds,
                    )
                errors.append(f"{entry.table.name}: the frame could not be checked ({text})")
                continue
            finally:
                guard.unlimited()
            violations.extend(found)
            total += count
    return violations, total, errors


def evaluate(
    world: CompiledWorld,
    task: CompiledTask,
    answer: str | None,
    *,
    submitted: bool,
    tracked: bool,
    writable: frozenset[str] | None = None,
) -> Reward:
    """The reward for the world's current state: all checks pass and the frame holds.

    Args:
        world: the compiled world, in the state to judge.
        task: the compiled task.
        answer: the submitted answer, bound to ``:answer``.
        submitted: whether the episode called submit; if not, the reward is 0
            and nothing is run.
        tracked: see :func:`frame_violations`.
        writable: see :func:`frame_violations`.
    """
    if not submitted:
        return Reward(value=0, submitted=False, answer=None, reason="the episode did not submit")
    outcomes: list[CheckOutcome] = []
    stopped = False
    for check in task.checks:
        if stopped:  # one check stopped by its budget: the reward is 0, the rest cost nothing
            outcomes.append(
                CheckOutcome(
                    name=check.name,
                    passed=False,
                    reason="not run: an earlier check was stopped by its budget",
                )
            )
            continue
        outcomes.append(run_check(world, check, answer))
        stopped = outcomes[-1].reason.startswith("stopped after")
    violations, total, errors = frame_violations(world, task, tracked=tracked, writable=writable)
    failed = [c for c in outcomes if not c.passed]
    frame_ok = total == 0 and not errors
    if not failed and frame_ok:
        reason = f"all {len(outcomes)} check(s) pass and the frame holds"
    else:
        parts = [f"check {c.name!r} failed ({c.reason})" for c in failed[:3]]
        if len(failed) > 3:
            parts.append(f"{len(failed) - 3} more checks failed")
        if total:
            parts.append(f"{total} row(s) outside the frame")
        parts.extend(errors)
        reason = "; ".join(parts)
    return Reward(
        value=1 if not failed and frame_ok else 0,
        submitted=True,
        answer=answer,
        checks=outcomes,
        frame_ok=frame_ok,
        violations=violations,
        violation_count=total,
        frame_errors=errors,
        reason=reason,
    )
