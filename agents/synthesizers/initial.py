"""The initial state of a world as a plain SQLite connection, for planning queries.

Task generators read a world's seed rows (to pick rows, check that a pick is
unique, compute an answer); they never write, and they never run agent SQL,
so a plain in-memory connection without the runtime's guard is enough; the
date functions see the world's fixed clock, as they do in the runtime.
"""

from __future__ import annotations

import re
import sqlite3

from coevo.agents.synthesizers.catalog import quote
from coevo.arena.spec import Blob, WorldSpec
from coevo.arena.sqlguard import _install_clock

__all__ = ["initial_state"]

_VIEW_OR_TRIGGER = re.compile(
    r"\s*(?:--[^\n]*\n\s*|/\*.*?\*/\s*)*CREATE\s+(?:TEMP(?:ORARY)?\s+)?(?:VIEW|TRIGGER)\b",
    re.IGNORECASE | re.DOTALL,
)


def initial_state(world: WorldSpec) -> sqlite3.Connection:
    """A new in-memory database holding ``world``'s schema and seed rows.

    Tables and indexes are made first, then the rows go in, then views and
    triggers (as the runtime builds a world), so no trigger fires on seed rows.
    """
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    # date('now') and friends see the world's fixed clock here too, as in the runtime
    _install_clock(conn, world.now)
    later = [s for s in world.schema_sql if _VIEW_OR_TRIGGER.match(s)]
    for statement in world.schema_sql:
        if not _VIEW_OR_TRIGGER.match(statement):
            conn.execute(statement)
    for table, data in world.data.items():
        if not data.rows:
            continue
        columns = ", ".join(quote(c) for c in data.columns)
        marks = ", ".join("?" for _ in data.columns)
        conn.executemany(
            f"INSERT INTO {quote(table)} ({columns}) VALUES ({marks})",
            ([c.data if isinstance(c, Blob) else c for c in row] for row in data.rows),
        )
    for statement in later:
        conn.execute(statement)
    conn.commit()
    return conn
