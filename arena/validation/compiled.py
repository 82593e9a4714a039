"""The compiled records: what validation hands the runtime once a world or task passes.

A :class:`CompiledWorld` holds the built database and its tools, a
:class:`CompiledTask` the verifier checks and the frame, each entry of
which names a :class:`TableInfo`.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from coevo.arena.arguments import Binder
from coevo.arena.limits import Limits
from coevo.arena.spec import TaskSpec, WorldSpec
from coevo.arena.sqlguard import Guard, fold

__all__ = [
    "CompiledCheck",
    "CompiledTask",
    "CompiledTool",
    "CompiledWorld",
    "FrameEntry",
    "TableInfo",
]


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
