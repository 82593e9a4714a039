"""The initial state of a world as a plain SQLite connection, for planning queries.

Task generators read a world's seed rows (to pick rows, check that a pick is
unique, compute an answer); they never write, and they never run agent SQL,
so a plain in-memory connection without the runtime's guard is enough. The
views and triggers of the schema are left out: plans read tables only.
"""

from __future__ import annotations

import sqlite3

from coevo.agents.synthesizers.catalog import quote
from coevo.arena.spec import Blob, WorldSpec

__all__ = ["initial_state"]


def initial_state(world: WorldSpec) -> sqlite3.Connection:
    """A new in-memory database holding ``world``'s tables and seed rows."""
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    for statement in world.schema_sql:
        head = " ".join(statement.split()[:4]).upper()
        if "VIEW" in head or "TRIGGER" in head:
            continue
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
    conn.commit()
    return conn
