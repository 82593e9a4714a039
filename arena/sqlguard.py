"""The SQLite connection of a world: authorizer, VM budget, limits and the fixed clock.

Every world runs on one in-memory SQLite connection opened by
:func:`open_world_connection`. Three guards sit on it:

* an **authorizer** (:class:`Guard`), consulted by SQLite whenever it
  compiles a statement: no DDL, ATTACH, PRAGMA, transactions, internal
  ``sqlite_%`` tables or non-deterministic functions from untrusted SQL;
* a **budget of VM instructions** per call (a progress handler), which is
  deterministic, unlike a wall-clock deadline;
* **limits** on value size (``SQLITE_LIMIT_LENGTH``), a process-wide heap cap,
  and in-memory temporary storage.

:func:`explain` compiles a statement with ``EXPLAIN`` under a recording
authorizer: SQLite itself reports which tables, columns and functions a
statement touches and which parameters it has, without running it.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

from coevo.arena.limits import Limits, ensure_heap_limit
from coevo.arena.sqlfunctions import (
    FORMAT_FUNCTIONS,
    FUNCTION_POLICY,
    LIKE_PATTERN_BYTES,
    format_problem,
    install_linear_functions,
)

__all__ = [
    "FORBIDDEN_FUNCTIONS",
    "Action",
    "Guard",
    "StatementFacts",
    "TaskBudget",
    "explain",
    "fold",
    "is_forbidden_function",
    "open_world_connection",
    "quote_ident",
    "sqlite_now",
]

ACTION_NAMES: dict[int, str] = {
    value: name[len("SQLITE_") :]
    for name in [
        "SQLITE_CREATE_INDEX",
        "SQLITE_CREATE_TABLE",
        "SQLITE_CREATE_TEMP_INDEX",
        "SQLITE_CREATE_TEMP_TABLE",
        "SQLITE_CREATE_TEMP_TRIGGER",
        "SQLITE_CREATE_TEMP_VIEW",
        "SQLITE_CREATE_TRIGGER",
        "SQLITE_CREATE_VIEW",
        "SQLITE_DELETE",
        "SQLITE_DROP_INDEX",
        "SQLITE_DROP_TABLE",
        "SQLITE_DROP_TEMP_INDEX",
        "SQLITE_DROP_TEMP_TABLE",
        "SQLITE_DROP_TEMP_TRIGGER",
        "SQLITE_DROP_TEMP_VIEW",
        "SQLITE_DROP_TRIGGER",
        "SQLITE_DROP_VIEW",
        "SQLITE_INSERT",
        "SQLITE_PRAGMA",
        "SQLITE_READ",
        "SQLITE_SELECT",
        "SQLITE_TRANSACTION",
        "SQLITE_UPDATE",
        "SQLITE_ATTACH",
        "SQLITE_DETACH",
        "SQLITE_ALTER_TABLE",
        "SQLITE_REINDEX",
        "SQLITE_ANALYZE",
        "SQLITE_CREATE_VTABLE",
        "SQLITE_DROP_VTABLE",
        "SQLITE_FUNCTION",
        "SQLITE_SAVEPOINT",
        "SQLITE_RECURSIVE",
    ]
    if isinstance(value := getattr(sqlite3, name, None), int)
}

#: Functions whose result depends on something other than the world's state
#: (randomness, connection history, the SQLite build) or that reach outside it.
FORBIDDEN_FUNCTIONS = frozenset(
    {
        "random",
        "randomblob",
        "changes",
        "total_changes",
        "last_insert_rowid",
        "load_extension",
        "fts3_tokenizer",
        "sqlite_version",
        "sqlite_source_id",
        "sqlite_compileoption_get",
        "sqlite_compileoption_used",
        "sqlite_offset",
    }
)

#: Table-valued functions untrusted SQL may read; every other virtual table
#: (``pragma_*``, ``dbstat``, ...) exposes internals and is refused.
ALLOWED_TABLE_FUNCTIONS = frozenset({"json_each", "json_tree"})

#: Prefix of the table and triggers coevo adds to every world to log which rows
#: an episode changed (reserved: a world may not name its own objects so).
TRACKING_PREFIX = "coevo_"

_TICK = 100  # VM instructions between two progress-handler calls
_EXPLAIN_IDS = itertools.count()


_ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold(name: str) -> str:
    """``name`` case-folded as SQLite folds identifiers: ASCII letters only (``"Ä"`` and ``"ä"`` differ)."""
    return name.translate(_ASCII_FOLD)


def is_forbidden_function(name: str) -> bool:
    """Whether untrusted SQL may not call the function ``name``."""
    lowered = fold(name)
    return lowered in FORBIDDEN_FUNCTIONS or lowered.startswith("sqlite_")


def quote_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


class Action(NamedTuple):
    """One authorizer callback: what SQLite was about to do while compiling a statement.

    Attributes:
        action: the action code's name without ``SQLITE_`` (``READ``, ``INSERT``, ...).
        arg1: table, index, function or pragma name, depending on the action.
        arg2: column or function name, depending on the action.
        db: the schema (``main``, ``temp``, ``initial``) or None.
        inner: the trigger or view whose code caused the action, or None.
        allowed: whether the guard allowed it.
    """

    action: str
    arg1: str | None
    arg2: str | None
    db: str | None
    inner: str | None
    allowed: bool

    def describe(self) -> str:
        """A short human description, e.g. ``reads sqlite_master``."""
        a, x, y = self.action, self.arg1, self.arg2
        where = f" (inside {self.inner})" if self.inner else ""
        if a == "FUNCTION":
            return f"calls {y}(){where}"
        if a == "READ":
            return f"reads {x}{'.' + y if y else ''}{where}"
        if a in ("INSERT", "UPDATE", "DELETE"):
            if (x or "").lower() in ("sqlite_master", "sqlite_schema", "sqlite_temp_master"):
                if a == "UPDATE":  # how a built-in virtual table declares itself on first use
                    return f"touches the schema ({x}): DDL, or a built-in virtual table such as pragma_* or dbstat{where}"
                return f"changes the schema (DDL: it {a.lower()}s {x}){where}"
            return f"{a.lower()}s {x}{where}"
        if a == "PRAGMA":
            return f"runs PRAGMA {x}{where}"
        if a in ("ATTACH", "DETACH"):
            return f"{a.lower()}es a database{where}"
        if a in ("TRANSACTION", "SAVEPOINT"):
            return f"controls transactions ({x}){where}"
        if a.startswith(("CREATE", "DROP", "ALTER")) or a in ("REINDEX", "ANALYZE"):
            return f"runs DDL ({a.replace('_', ' ')} {x}){where}"
        return f"{a} {x or ''}{where}".strip()


class Guard:
    """The authorizer and VM budget of one world connection.

    The authorizer runs when SQLite compiles a statement; the verdict sticks
    to the prepared statement. Statements coevo issues itself are compiled
    with :attr:`trusted` set; everything else (tools, verifier checks, frame
    conditions) is compiled guarded.
    """

    __slots__ = (
        "allowed_functions",
        "deadline",
        "known",
        "max_ticks",
        "metered",
        "read_only",
        "record",
        "schema_phase",
        "stopped_by",
        "task",
        "ticks",
        "trusted",
    )

    def __init__(self) -> None:
        self.trusted = False
        self.read_only = False
        self.schema_phase = False
        self.record: list[Action] | None = None
        self.known: frozenset[str] | None = None  # lower-cased main tables and views
        self.ticks = 0
        self.max_ticks = 1 << 62
        self.deadline = float("inf")
        self.stopped_by = ""
        #: functions untrusted SQL may call (None: everything not forbidden)
        self.allowed_functions: frozenset[str] | None = None
        #: the budget of the task being judged, shared by all its checks and passes
        self.task: TaskBudget | None = None
        self.metered = False  # whether the running statement spends the task's budget

    def allows_function(self, name: str) -> bool:
        """Whether untrusted SQL may call ``name``: a built-in of SQLite's core, not a forbidden one."""
        folded = fold(name)
        if is_forbidden_function(folded):
            return False
        return self.allowed_functions is None or folded in self.allowed_functions

    # -- authorizer ---------------------------------------------------------------
    def authorize(
        self, code: int, arg1: str | None, arg2: str | None, db: str | None, inner: str | None
    ) -> int:
        """The SQLite authorizer callback."""
        allowed = self.trusted or self._allows(
            ACTION_NAMES.get(code, str(code)), arg1, arg2, db, inner
        )
        if self.record is not None:
            self.record.append(
                Action(ACTION_NAMES.get(code, str(code)), arg1, arg2, db, inner, allowed)
            )
        return sqlite3.SQLITE_OK if allowed else sqlite3.SQLITE_DENY

    def _allows(
        self, action: str, arg1: str | None, arg2: str | None, db: str | None, inner: str | None
    ) -> bool:
        if action in ("SELECT", "RECURSIVE"):
            return True
        if action == "FUNCTION":
            return self.allows_function(arg2 or "")
        table = fold(arg1 or "")
        internal = table.startswith("sqlite_")
        if action == "READ":
            if internal:
                return self.schema_phase
            if table.startswith(("pragma_", TRACKING_PREFIX)) or db == "temp":
                return False
            if db == "main" and self.known is not None:
                return table in self.known or table in ALLOWED_TABLE_FUNCTIONS
            return True
        if action in ("INSERT", "UPDATE", "DELETE"):
            if internal:
                return self.schema_phase
            if table.startswith(TRACKING_PREFIX):
                return (inner or "").startswith(TRACKING_PREFIX)
            return db == "main" and not self.read_only
        if action in ("CREATE_TABLE", "CREATE_INDEX", "CREATE_VIEW", "CREATE_TRIGGER"):
            return self.schema_phase and db == "main"
        if action == "REINDEX":  # CREATE INDEX fills the new index this way
            return self.schema_phase
        return False

    # -- VM budget ----------------------------------------------------------------
    def progress(self) -> int:
        """The progress handler: stop the statement once the budget (or the backstop) is spent."""
        self.ticks += 1
        if self.ticks > self.max_ticks:
            self.stopped_by = "budget"
            return 1
        task = self.task
        if task is not None and self.metered:
            task.left -= 1
            if task.left < 0:
                self.stopped_by = "task"
                task.stops.add("task")
                return 1
        if time.monotonic() > self.deadline:
            self.stopped_by = "time"
            if task is not None:
                task.stops.add("time")
            return 1
        return 0

    def budget(self, instructions: int, seconds: float = float("inf")) -> None:
        """Start a budget of ``instructions`` VM instructions (rounded up to 100s).

        ``seconds`` is a wall-clock backstop for statements that do megabytes of
        work per instruction (``replace`` on a 1 MB string); the instruction
        budget is the deterministic limit.
        """
        self.ticks = 0
        self.max_ticks = max(1, -(-instructions // _TICK))
        self.deadline = time.monotonic() + seconds
        self.stopped_by = ""
        self.metered = True

    def unlimited(self) -> None:
        """Lift the budget (for coevo's own statements)."""
        self.ticks = 0
        self.max_ticks = 1 << 62
        self.deadline = float("inf")
        self.metered = False

    def stop_reason(self, own: str, seconds: float) -> str:
        """Which limit stopped the last statement, as the end of "stopped after ...".

        Args:
            own: the statement's own budget, e.g. ``"the verifier budget of 50,000,000 VM instructions"``.
            seconds: the wall-clock backstop in force.
        """
        if self.stopped_by == "task" and self.task is not None:
            return (
                f"the task's budget of {self.task.total:,} VM instructions "
                "(all its checks and Judge passes together)"
            )
        if self.stopped_by == "time":
            return f"{seconds:g} seconds (the wall-clock backstop: too much work per SQLite instruction)"
        return own

    @contextmanager
    def trust(self) -> Iterator[None]:
        """Compile the statements inside as coevo's own: no authorizer limits, no budget."""
        saved = self.trusted, self.ticks, self.max_ticks, self.deadline, self.metered
        self.trusted = True
        self.unlimited()
        try:
            yield
        finally:
            self.trusted, self.ticks, self.max_ticks, self.deadline, self.metered = saved


class TaskBudget:
    """The VM instructions one task may spend in all its checks and Judge passes together.

    Attach it to the guards of the worlds judging the task (``guard.task``);
    every untrusted statement run under a budget then spends from it too, and
    once it is spent every statement stops at once (``stopped_by == "task"``).

    Args:
        instructions: the task's total, in VM instructions.

    Attributes:
        total: the total, in VM instructions.
        left: what is left, in units of 100 instructions.
        stops: which limits stopped a statement while judging the task
            (``"task"``, ``"time"``): a verdict reached under the wall-clock
            backstop says so, since it depends on the machine's load.
    """

    __slots__ = ("left", "stops", "total")

    def __init__(self, instructions: int):
        self.total = instructions
        self.left = -(-instructions // _TICK)
        self.stops: set[str] = set()

    @property
    def spent(self) -> int:
        """VM instructions spent so far (to the nearest 100)."""
        return (-(-self.total // _TICK) - max(self.left, 0)) * _TICK


def sqlite_now(now: str) -> str:
    """The world clock as SQLite writes a time: ``YYYY-MM-DD HH:MM:SS[.SSS]``."""
    return now.replace("T", " ", 1)


_ZONE_MODIFIERS = frozenset({"localtime", "utc"})
_TIME_ARG = {  # which argument of each date function is the time value
    "date": 0,
    "time": 0,
    "datetime": 0,
    "julianday": 0,
    "unixepoch": 0,
    "strftime": 1,
}


def _install_clock(conn: sqlite3.Connection, now: str) -> sqlite3.Connection:
    """Make every date function see ``now`` as the current time.

    SQLite reads the time from the operating system. The date functions
    are overridden by wrappers that replace a ``'now'`` time value (and a
    missing one) with the world's clock, then call SQLite's own function on
    a private connection, so results match SQLite's exactly.

    Returns:
        The private connection (coevo's linear string functions use it too).
    """
    helper = sqlite3.connect(":memory:", check_same_thread=False)
    fixed = sqlite_now(now)

    def make(name: str, position: int) -> Any:
        query_cache: dict[int, str] = {}

        def fn(*args: Any) -> Any:
            # SQLite reads a BLOB argument as text, so x'6e6f77' is 'now' too.
            values = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in args]
            if len(values) <= position:
                values.extend([None] * (position - len(values)))
                values.append(fixed)
            else:
                value = values[position]
                if isinstance(value, str) and value.strip().lower() == "now":
                    values[position] = fixed
                # The world clock has no time zone: 'localtime' and 'utc' would read the
                # machine's, so they are no-ops here.
                values = values[: position + 1] + [
                    v
                    for v in values[position + 1 :]
                    if not (isinstance(v, str) and v.strip().lower() in _ZONE_MODIFIERS)
                ]
            sql = query_cache.get(len(values))
            if sql is None:
                sql = f"SELECT {name}({','.join('?' * len(values))})"
                query_cache[len(values)] = sql
            return helper.execute(sql, values).fetchone()[0]

        return fn

    for name, position in _TIME_ARG.items():
        conn.create_function(name, -1, make(name, position), deterministic=True)
    date_part, _, time_part = fixed.partition(" ")
    time_part = time_part[:8]
    conn.create_function("current_date", 0, lambda: date_part, deterministic=True)
    conn.create_function("current_time", 0, lambda: time_part, deterministic=True)
    conn.create_function(
        "current_timestamp", 0, lambda: f"{date_part} {time_part}", deterministic=True
    )
    return helper


class _ForbiddenCall(Exception):
    pass


def _install_forbidden(conn: sqlite3.Connection) -> None:
    """Replace non-deterministic functions by ones that fail.

    The authorizer already refuses them in statements; a column DEFAULT is
    evaluated without asking it, so this is the last line of defence.
    """
    arities = {
        "random": 0,
        "randomblob": 1,
        "changes": 0,
        "total_changes": 0,
        "last_insert_rowid": 0,
        "sqlite_version": 0,
        "sqlite_source_id": 0,
    }

    def refuse(*_: Any) -> Any:
        raise _ForbiddenCall

    for name, arity in arities.items():
        conn.create_function(name, arity, refuse)


def _allowed_functions(conn: sqlite3.Connection) -> frozenset[str]:
    """The functions on coevo's allow-list that this SQLite build has (before coevo's overrides)."""
    try:
        rows = conn.execute("PRAGMA function_list").fetchall()
    except sqlite3.Error:  # SQLite < 3.30 or built without introspection pragmas
        return frozenset(FUNCTION_POLICY)
    core = {fold(name) for name, builtin, *_ in rows if builtin}
    return frozenset(
        core | set(_TIME_ARG) | {"current_date", "current_time", "current_timestamp"}
    ) & frozenset(FUNCTION_POLICY)


def open_world_connection(now: str, limits: Limits) -> tuple[sqlite3.Connection, Guard]:
    """An in-memory SQLite connection with coevo's guards, clock and limits installed.

    Foreign keys start *off* (seed rows are loaded first); the caller turns
    them on once the world is built.
    """
    ensure_heap_limit()
    conn = sqlite3.connect(
        ":memory:", isolation_level=None, check_same_thread=False, cached_statements=512
    )
    guard = Guard()
    guard.allowed_functions = _allowed_functions(conn)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limits.max_value_bytes)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, LIKE_PATTERN_BYTES)
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 1_000_000)
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 2)
    helper = _install_clock(conn, now)
    helper.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limits.max_value_bytes)
    install_linear_functions(conn, helper, limits.max_value_bytes)
    _install_forbidden(conn)
    conn.execute("PRAGMA temp_store = MEMORY")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {max(2, limits.max_world_bytes // page_size)}")
    conn.execute("PRAGMA foreign_keys = OFF")
    # Table-valued functions declare themselves on first use, which looks like
    # a write to sqlite_master; do that once here, trusted.
    conn.execute("SELECT * FROM json_each('[]')").fetchall()
    conn.execute("SELECT * FROM json_tree('[]')").fetchall()
    conn.set_authorizer(guard.authorize)
    conn.set_progress_handler(guard.progress, _TICK)
    return conn, guard


class _RecordingParams(dict):
    """A binding mapping that records which parameter names SQLite asks for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def __getitem__(self, key: str) -> None:
        if key not in self.asked:
            self.asked.append(key)
        return None


_FUNCTION_OPCODES = frozenset(
    {"Function", "PureFunc", "AggStep", "AggStep1", "AggFinal", "AggValue", "AggInverse"}
)
_P4_FUNCTION = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\(")


@dataclass(frozen=True, slots=True)
class StatementFacts:
    """What SQLite reported while compiling one statement (nothing was run).

    Attributes:
        sql: the statement.
        error: SQLite's refusal (syntax, unknown name, not authorised,
            several statements, positional parameters), or None.
        actions: every authorizer callback, in order.
        parameters: parameter names as written (``:email``, ``$x``, ``?``).
        functions: lower-cased names of every function the program calls,
            including those in column defaults, views and triggers.
        opcodes: the VDBE opcodes of the main program.
        disallowed_functions: the functions called that untrusted SQL may not call.
        unbounded_calls: calls whose cost could not be bounded, each with the
            reason (a ``printf`` format that is not a literal, or takes a width from
            an argument); see :mod:`coevo.arena.sqlfunctions`.
    """

    sql: str
    error: str | None
    actions: tuple[Action, ...]
    parameters: tuple[str, ...]
    functions: frozenset[str]
    opcodes: frozenset[str]
    disallowed_functions: tuple[str, ...] = ()
    unbounded_calls: tuple[str, ...] = ()

    @property
    def denied(self) -> list[Action]:
        """Actions the guard refused."""
        return [a for a in self.actions if not a.allowed]

    @property
    def writes(self) -> list[Action]:
        """INSERT/UPDATE/DELETE actions, triggers and foreign-key actions included."""
        return [a for a in self.actions if a.action in ("INSERT", "UPDATE", "DELETE")]

    @property
    def reads(self) -> list[Action]:
        """READ actions."""
        return [a for a in self.actions if a.action == "READ"]

    @property
    def selects(self) -> int:
        """How many SELECT cores the statement has (subqueries and compounds add one each)."""
        return sum(1 for a in self.actions if a.action == "SELECT")

    @property
    def names(self) -> tuple[str, ...]:
        """Parameter names without their prefix character."""
        return tuple(p[1:] for p in self.parameters if p and p[0] != "?")


def explain(conn: sqlite3.Connection, guard: Guard, sql: str) -> StatementFacts:
    """Compile ``sql`` with ``EXPLAIN`` under the guarded, recording authorizer.

    Nothing is executed: EXPLAIN only lists the compiled program. The
    result says which actions SQLite would take, which the guard refused,
    the parameters and the functions called.
    """
    actions: list[Action] = []
    params = _RecordingParams()
    before_record, before_trusted, before_read_only = guard.record, guard.trusted, guard.read_only
    guard.record, guard.trusted, guard.read_only = actions, False, False
    guard.unlimited()
    error: str | None = None
    program: list[tuple[Any, ...]] = []
    try:
        # A unique comment keeps the statement cache from handing back a statement
        # compiled earlier, which would skip the authorizer and record nothing.
        program = conn.execute(f"EXPLAIN /* coevo:{next(_EXPLAIN_IDS)} */ {sql}", params).fetchall()
    except sqlite3.ProgrammingError as exc:
        message = str(exc)
        if "one statement" in message:
            error = "holds more than one SQL statement"
        elif "has no name" in message:
            error = "uses a positional parameter (?); name every parameter (:name)"
        else:
            error = message
    except (sqlite3.Error, OverflowError, ValueError, MemoryError) as exc:
        error = str(exc) or type(exc).__name__
    finally:
        guard.record, guard.trusted, guard.read_only = (
            before_record,
            before_trusted,
            before_read_only,
        )
    opcodes = frozenset(str(row[1]) for row in program)
    variables: list[str] = []
    functions = {fold(a.arg2) for a in actions if a.action == "FUNCTION" and a.arg2}
    for row in program:
        opcode, p4 = row[1], row[5]
        if opcode == "Variable":
            name = p4 if isinstance(p4, str) else "?"
            if name not in variables:
                variables.append(name)
        elif opcode in _FUNCTION_OPCODES and isinstance(p4, str):
            match = _P4_FUNCTION.match(p4)
            if match:
                functions.add(fold(match.group(1)))
    # Parameters the optimiser dropped from the program still have names.
    for name in params.asked:
        if not any(v[1:] == name for v in variables):
            variables.append(":" + name)
    return StatementFacts(
        sql=sql,
        error=error,
        actions=tuple(actions),
        parameters=tuple(variables),
        functions=frozenset(functions),
        opcodes=opcodes,
        disallowed_functions=tuple(sorted(f for f in functions if not guard.allows_function(f))),
        unbounded_calls=_unbounded_calls(
            program, functions, conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
        ),
    )


def _unbounded_calls(
    program: list[tuple[Any, ...]], functions: set[str], max_value_bytes: int
) -> tuple[str, ...]:
    """Why the program's ``printf``/``format`` calls may not run (empty when all are bounded).

    A format must be a literal string. SQLite marks such an argument constant
    (bit 0 of the call's ``P1``) and loads it with one ``String8`` into the
    argument's register; anything else that writes that register (a
    parameter, a column, a concatenation, a function, a ``CASE``) makes the
    format unknown before the call runs, and the call is refused. A call in a
    trigger's sub-program is not in this listing: refused too, since its
    format cannot be seen. (A call SQLite never compiled, e.g. in the
    select list of an ``EXISTS``, never runs.)
    """
    if not functions & FORMAT_FUNCTIONS:
        return ()
    problems: list[str] = []
    seen: set[str] = set()
    for address, opcode, p1, p2, _p3, p4, *_ in program:
        if opcode not in ("Function", "PureFunc") or not isinstance(p4, str):
            continue
        match = _P4_FUNCTION.match(p4)
        name = fold(match.group(1)) if match else ""
        if name not in FORMAT_FUNCTIONS:
            continue
        seen.add(name)
        writers = [row for row in program if row[0] != address and _writes(row, p2)]
        literal = [row[5] for row in writers if row[1] == "String8"]
        if not (isinstance(p1, int) and p1 & 1) or len(writers) != 1 or len(literal) != 1:
            problems.append(
                f"{name}() with a format that is not a literal string (its widths cannot be "
                "checked before it runs); write the format in the statement"
            )
            continue
        problem = format_problem(name, str(literal[0]), max_value_bytes)
        if problem:
            problems.append(problem)
    if any(row[1] == "Program" for row in program):
        for name in sorted((functions & FORMAT_FUNCTIONS) - seen):
            problems.append(
                f"{name}() inside a trigger (its format cannot be checked there); compute the "
                "value in the statement that writes, or leave it out"
            )
    return tuple(dict.fromkeys(problems))


#: Opcodes that compute a value into the register in P2, and those that compute one into P3:
#: every way a constant expression (literals, parameters, functions of them) reaches a register.
_P2_WRITERS = frozenset(
    [
        "String8",
        "String",
        "Integer",
        "Int64",
        "Real",
        "Variable",
        "Blob",
        "Null",
        "SCopy",
        "Copy",
        "IntCopy",
        "Not",
        "BitNot",
        "Rowid",
        "RowData",
        "Sequence",
        "NewRowid",
    ]
)
_P3_WRITERS = frozenset(
    [
        "Function",
        "PureFunc",
        "Concat",
        "Add",
        "Subtract",
        "Multiply",
        "Divide",
        "Remainder",
        "BitAnd",
        "BitOr",
        "ShiftLeft",
        "ShiftRight",
        "Column",
        "AggValue",
    ]
)


def _writes(row: tuple[Any, ...], register: int) -> bool:
    """Whether the EXPLAIN row ``row`` writes ``register``."""
    opcode, p2, p3 = row[1], row[3], row[4]
    if opcode == "Null":  # registers P2..P3
        return bool(p2 <= register <= max(p2, p3))
    if opcode in _P2_WRITERS:
        return bool(p2 == register)
    return opcode in _P3_WRITERS and p3 == register
