"""The world runtime: build a world once, reset it in microseconds, step it with tool calls.

>>> world = World(task.world)                     # builds, validates, snapshots  # doctest: +SKIP
>>> obs = world.reset(task)                         # doctest: +SKIP
>>> obs = world.step(ToolCall("find_customer", {"email": "ada@ex.io"}))  # doctest: +SKIP
>>> obs = world.step(ToolCall("submit"))            # doctest: +SKIP
>>> obs.reward.value                                # doctest: +SKIP

A tool failure is an observation (``ok=False`` with an ``error`` written for
the agent), never an exception: unknown tool, bad arguments, a constraint,
a foreign key, the VM budget, the value-size limit, the heap limit. The
only exceptions are for the program driving the world: a task that is not
valid (:class:`~coevo.arena.errors.SpecError`) and stepping an episode that
has not started or has ended (:class:`~coevo.arena.errors.EpisodeError`).

A world is not thread-safe: use it from one thread at a time.
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from difflib import get_close_matches
from typing import Any, cast

from coevo.arena.errors import EpisodeError
from coevo.arena.limits import DEFAULT_LIMITS, Limits
from coevo.arena.outcomes import Episode, Observation, Reward
from coevo.arena.rendering import tool_definitions
from coevo.arena.spec import SUBMIT, TaskSpec, ToolCall, WorldSpec
from coevo.arena.validation import (
    CompiledTask,
    CompiledTool,
    CompiledWorld,
    clone_world,
    compile_task,
    compile_world,
)
from coevo.arena.verifier import evaluate

__all__ = ["World", "WorldPool", "verify"]

_SIZED = (str, bytes)


class _DeferredForeignKey(Exception):
    """A write left a deferred foreign key broken."""


def _image(data: bytes) -> sqlite3.Connection:
    """A bare connection holding a database image, used only as a backup source."""
    image = sqlite3.connect(":memory:", check_same_thread=False)
    image.deserialize(data)
    return image


def _as_call(call: Any) -> ToolCall:
    if isinstance(call, ToolCall):
        return call
    if isinstance(call, Mapping) and "tool" in call:
        return ToolCall(call["tool"], call.get("arguments", {}))
    raise TypeError(
        f"a step takes a ToolCall or {{'tool': ..., 'arguments': {{...}}}}, got {type(call).__name__}"
    )


class World:
    """One SQLite world: built and validated once, reset by restoring its bytes.

    Args:
        spec: the world record (a :class:`WorldSpec` or its JSON dict).
        limits: budgets and caps for tool calls and verification.

    Raises:
        SpecError: the world breaks a rule of the format (every problem is named).
    """

    def __init__(self, spec: WorldSpec | Mapping[str, Any], *, limits: Limits = DEFAULT_LIMITS):
        if not isinstance(spec, WorldSpec):
            spec = WorldSpec.model_validate(spec)
        self._adopt_world(compile_world(spec, limits))

    def clone(self) -> World:
        """Another instance of this world, for an episode beside this one's (nothing validated again).

        It starts from the initial state and shares this world's compiled tasks;
        building it costs a small fraction of :class:`World` from a record.
        """
        twin = object.__new__(World)
        twin._adopt_world(clone_world(self._w))
        twin._tasks = self._tasks  # compiling a task is deterministic: one cache for every build
        return twin

    def _adopt_world(self, compiled: CompiledWorld) -> None:
        limits = compiled.limits
        self._w = compiled
        self._conn = self._w.conn
        self._guard = self._w.guard
        self._limits = limits
        self._tools: dict[str, CompiledTool] = self._w.tools
        self._columns: dict[str, tuple[str, ...]] = {}  # result columns by statement
        self._tasks: dict[str, CompiledTask] = {}
        self._task: CompiledTask | None = None
        self._steps = 0
        self._max_steps = limits.max_steps
        self._done = True
        self._submitted = False
        self._tracked = True
        self._base_is_initial = True  # the committed database is the initial state
        self._writes: list[
            tuple[CompiledTool, dict[str, Any]]
        ] = []  # this episode's successful writes

    # -- properties ---------------------------------------------------------------
    @property
    def id(self) -> str:
        """The world's id."""
        return self._w.id

    @property
    def spec(self) -> WorldSpec:
        """The world record."""
        return self._w.spec

    @property
    def limits(self) -> Limits:
        """The budgets in force."""
        return self._limits

    @property
    def warnings(self) -> list[str]:
        """What the build noticed that does not invalidate the world (e.g. foreign-key violations in the seed rows)."""
        return list(self._w.warnings)

    @property
    def compiled(self) -> CompiledWorld:
        """The compiled world (connection, tables, tools), for the verifier and the Judge."""
        return self._w

    @property
    def task(self) -> TaskSpec | None:
        """The task of the current episode."""
        return self._task.spec if self._task else None

    @property
    def steps(self) -> int:
        """Tool calls made in the current episode."""
        return self._steps

    @property
    def done(self) -> bool:
        """Whether the current episode is over (or none has started)."""
        return self._done

    def tool_definitions(self) -> list[dict[str, Any]]:
        """The tools as function definitions (``name``, ``description``, ``input_schema``), ``submit`` last.

        This is the shape the Anthropic Messages API takes; OpenAI's
        ``function`` tools take the same fields under ``parameters``.
        """
        return tool_definitions(self._w.spec)

    # -- tasks --------------------------------------------------------------------
    def prepare(self, task: TaskSpec) -> CompiledTask:
        """Validate ``task`` against this world (cached by task id).

        Raises:
            SpecError: the task breaks a rule of the format.
        """
        key = task.task_id
        compiled = self._tasks.get(key)
        # The id covers world, instruction and verifier; what else compiling checks (the given
        # id, the solution, the lineage) must match too, or a record reuses another's verdict.
        if compiled is None or (
            compiled.spec is not task
            and (compiled.spec.id, compiled.spec.solution, compiled.spec.lineage)
            != (task.id, task.solution, task.lineage)
        ):
            compiled = compile_task(task, self._w)
            self._tasks[key] = compiled
        return compiled

    def adopt(self, compiled: CompiledTask) -> None:
        """Use a task compiled by another build of this same world (compiling is deterministic).

        Raises:
            ValueError: ``compiled`` belongs to another world.
        """
        if compiled.spec.world_id != self.id:
            raise ValueError(
                f"task {compiled.id} is for world {compiled.spec.world_id}, not {self.id}"
            )
        self._tasks[compiled.id] = compiled

    # -- episodes -----------------------------------------------------------------
    def restore(self, state: bytes | None = None) -> None:
        """Put the database back in its initial state (or in ``state``, a :meth:`snapshot`).

        An episode runs inside one transaction; a reset rolls it back, which
        costs in proportion to what the episode changed and keeps every
        prepared statement valid. (Restoring bytes with ``deserialize`` would
        replace main's schema, which SQLite 3.40's table-valued functions such
        as json_each keep a pointer to: a use-after-free.) Loading another
        ``state`` copies it in with the backup API; it is verified by comparing
        whole tables, since the change log does not describe it.
        """
        conn = self._conn
        with self._guard.trust():
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if state is not None:
                image = _image(state)
                image.backup(conn)
                image.close()
                self._base_is_initial = False
            elif not self._base_is_initial:
                image = _image(self._w.initial)
                image.backup(conn)
                image.close()
                self._base_is_initial = True
            conn.execute("BEGIN")
        self._writes = []
        self._tracked = state is None

    def reset(self, task: TaskSpec, *, max_steps: int | None = None) -> Observation:
        """Start an episode of ``task`` on the initial state.

        Args:
            task: a task of this world.
            max_steps: tool calls allowed, ``submit`` included (default: the limits').

        Raises:
            SpecError: the task is not valid for this world.
        """
        compiled = self.prepare(task)
        self.restore()
        self._task = compiled
        self._steps = 0
        self._max_steps = max_steps if max_steps is not None else self._limits.max_steps
        if self._max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {self._max_steps}")
        self._done = False
        self._submitted = False
        return Observation(step=0)

    def step(self, call: ToolCall | Mapping[str, Any]) -> Observation:
        """Call one tool (or ``submit``) and observe the result.

        ``call`` is a :class:`ToolCall` or a mapping ``{"tool": ..., "arguments": {...}}``.

        Raises:
            EpisodeError: no episode is running (call :meth:`reset` first).
        """
        if self._done:
            if self._task is None:
                raise EpisodeError("no episode has started: call reset(task) before step()")
            raise EpisodeError(
                f"the episode is over after {self._steps} step(s); call reset(task) to start another"
            )
        tool_call = cast(ToolCall, call) if call.__class__ is ToolCall else _as_call(call)
        self._steps += 1
        step = self._steps
        name = tool_call.tool
        if name == SUBMIT:
            return self._submit(step, tool_call.arguments)
        tool = self._tools.get(name) if name.__class__ is str else None
        if tool is None:
            obs = Observation(step=step, tool=name, ok=False, error=self._unknown_tool(name))
        else:
            binds, error = tool.binder.bind(tool_call.arguments)
            if error is not None:
                obs = Observation(step=step, tool=name, ok=False, error=error)
            else:
                obs = self._run_tool(tool, binds, step)
        return self._spend_step(obs)

    def _unknown_tool(self, name: Any) -> str:
        options = [*self._tools, SUBMIT]
        hint = get_close_matches(str(name), options, n=1)
        suggestion = f" (did you mean '{hint[0]}'?)" if hint else ""
        return f"unknown tool {name!r}{suggestion}; tools: {', '.join(options)}"

    def _run_tool(self, tool: CompiledTool, binds: dict[str, Any], step: int) -> Observation:
        conn, guard, limits = self._conn, self._guard, self._limits
        statements = tool.statements
        writes = tool.effect == "write"
        guard.budget(limits.vm_instructions, limits.max_call_seconds)
        guard.read_only = not writes
        cursor = None
        try:
            if writes:
                guard.trusted = True
                conn.execute("SAVEPOINT coevo_call")
                guard.trusted = False
            for sql in statements[:-1]:
                conn.execute(sql, binds).close()
            last = statements[-1]
            cursor = conn.execute(last, binds)
            description = cursor.description
            if description is None:
                columns = None
                rows = None
                rowcount: int | None = cursor.rowcount
                truncated = False
            else:
                columns = self._columns.get(last)
                if columns is None:
                    columns = self._columns[last] = tuple(d[0] for d in description)
                rows, truncated = self._fetch(cursor)
                rowcount = None
            cursor.close()
            cursor = None
            if writes:
                guard.trusted = True
                if self._w.deferred_foreign_keys:
                    self._check_deferred_foreign_keys()
                conn.execute("RELEASE coevo_call")
                guard.trusted = False
                self._writes.append((tool, binds))
        except (sqlite3.Error, OverflowError, MemoryError, ValueError, _DeferredForeignKey) as exc:
            if cursor is not None:
                cursor.close()
            if writes:
                self._undo_call()
            return Observation(
                step=step, tool=tool.name, ok=False, error=self._explain_error(tool, exc)
            )
        finally:
            guard.read_only = False
            guard.trusted = False
        return Observation(
            step=step,
            tool=tool.name,
            columns=columns,
            rows=rows,
            rowcount=rowcount,
            truncated=truncated,
        )

    def _check_deferred_foreign_keys(self) -> None:
        """Deferred foreign keys are checked at COMMIT, which an episode never reaches: check now."""
        if self._conn.execute("PRAGMA main.foreign_key_check").fetchone() is not None:
            raise _DeferredForeignKey("FOREIGN KEY constraint failed (deferred)")

    def _undo_call(self) -> None:
        """Undo a failed write call; if it rolled back the whole episode, replay the episode's writes."""
        conn, guard = self._conn, self._guard
        guard.trusted = True
        guard.unlimited()
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK TO coevo_call")
                conn.execute("RELEASE coevo_call")
                return
            # RAISE(ROLLBACK) or OR ROLLBACK ended the episode's transaction; the
            # successful calls before this one are deterministic: make them again.
            conn.execute("BEGIN")
            for tool, binds in self._writes:
                guard.read_only = False
                for sql in tool.statements:
                    conn.execute(sql, binds).close()
        finally:
            guard.trusted = False

    def _fetch(self, cursor: sqlite3.Cursor) -> tuple[list[Any], bool]:
        """Rows up to the row and byte caps, one at a time, so memory stays bounded by the caps."""
        max_rows, max_bytes = self._limits.max_rows, self._limits.max_result_bytes
        rows: list[Any] = []
        size = 0
        fetch = cursor.fetchone
        while (row := fetch()) is not None:
            for value in row:
                size += len(value) if value.__class__ in _SIZED else 8
            if size > max_bytes or len(rows) == max_rows:
                return rows, True
            rows.append(row)
        return rows, False

    def _explain_error(self, tool: CompiledTool, exc: BaseException) -> str:
        limits = self._limits
        text = str(exc)
        if isinstance(exc, MemoryError):
            reason = "ran out of memory (SQLite's heap limit); narrow the query"
        elif isinstance(exc, OverflowError):
            reason = f"a value is out of range ({text})"
        elif "interrupted" in text:
            reason = (
                "stopped after "
                + self._guard.stop_reason(
                    f"its budget of {limits.vm_instructions:,} SQLite VM instructions",
                    limits.max_call_seconds,
                )
                + "; narrow the query"
            )
        elif "database or disk is full" in text:
            reason = f"the world would grow past {limits.max_world_bytes:,} bytes (the size limit)"
        elif "too big" in text:
            reason = f"a value would exceed {limits.max_value_bytes:,} bytes (the size limit)"
        elif "user-defined function raised exception" in text:
            reason = (
                "a function refused its arguments (a non-deterministic function, or text "
                "that is not UTF-8)"
            )
        elif "not authorized" in text:
            reason = "refused by the authorizer (the statement does something tools may not)"
        else:
            reason = text or type(exc).__name__
        changed = "; nothing was changed" if tool.effect == "write" else ""
        return f"{tool.name} failed: {reason}{changed}"

    def _submit(self, step: int, arguments: Any) -> Observation:
        if not isinstance(arguments, Mapping):
            return self._spend_step(
                Observation(
                    step=step,
                    tool=SUBMIT,
                    ok=False,
                    error="submit: arguments must be a JSON object",
                )
            )
        extra = [k for k in arguments if k != "answer"]
        answer = arguments.get("answer")
        if extra:
            error = f"submit: unknown argument(s) {extra}; submit takes only 'answer'"
        elif answer is not None and not isinstance(answer, str):
            error = f"submit: 'answer' must be a string, got {answer!r}"
        else:
            error = None
        if error:
            return self._spend_step(Observation(step=step, tool=SUBMIT, ok=False, error=error))
        self._done = True
        self._submitted = True
        assert self._task is not None
        reward = evaluate(self._w, self._task, answer, submitted=True, tracked=self._tracked)
        return Observation(step=step, tool=SUBMIT, done=True, reward=reward)

    def _spend_step(self, obs: Observation) -> Observation:
        """``obs``, or ``obs`` ending the episode with reward 0 if that was the last step allowed."""
        if self._steps >= self._max_steps:
            self._done = True
            reward = Reward(
                value=0,
                submitted=False,
                reason=f"the step budget of {self._max_steps} calls ran out before submit",
            )
            return replace(obs, done=True, reward=reward)
        return obs

    # -- verification ---------------------------------------------------------------
    def verify(self, answer: str | None = None) -> Reward:
        """The reward if the current episode submitted ``answer`` now (the episode goes on)."""
        if self._task is None:
            raise EpisodeError("no task: call reset(task) first")
        return evaluate(self._w, self._task, answer, submitted=True, tracked=self._tracked)

    def verify_whole(self, answer: str | None = None) -> Reward:
        """Like :meth:`verify`, but comparing whole tables instead of the rows the change log names.

        Every table the episode's successful write calls can change (by
        compiling their statements: triggers and foreign-key actions included)
        is compared in full; no other table can have changed in an episode of
        tool calls (reads cannot write, and a failed call is rolled back).
        """
        if self._task is None:
            raise EpisodeError("no task: call reset(task) first")
        writable = None
        if self._tracked:
            writable = frozenset(name for tool, _ in self._writes for name in tool.writes)
        return evaluate(
            self._w, self._task, answer, submitted=True, tracked=False, writable=writable
        )

    def verify_state(self, task: TaskSpec, state: bytes, answer: str | None = None) -> Reward:
        """The reward of ``task`` for a final ``state`` (bytes from :meth:`snapshot`).

        Whole tables are compared, since how the state was reached is unknown.
        The world is left in ``state``; the current episode ends.
        """
        compiled = self.prepare(task)
        self.restore(state)
        self._task = compiled
        self._done = True
        return evaluate(self._w, compiled, answer, submitted=True, tracked=False)

    def snapshot(self) -> bytes:
        """The current database (``main``) as bytes."""
        with self._guard.trust():
            return self._conn.serialize()

    def run(
        self,
        task: TaskSpec,
        calls: Iterable[ToolCall],
        *,
        max_steps: int | None = None,
        solver: str | None = None,
        seed: int | None = None,
        episode_id: str | None = None,
    ) -> Episode:
        """Reset, make ``calls`` in order until the episode ends, and return the episode.

        Calls after the episode ends are not made. If the calls run out
        before ``submit``, the reward is 0.
        """
        self.reset(task, max_steps=max_steps)
        made: list[ToolCall] = []
        observations: list[Observation] = []
        for call in calls:
            if self._done:
                break
            observations.append(self.step(call))
            made.append(call)
        return self.episode(made, observations, solver=solver, seed=seed, episode_id=episode_id)

    def refuse(self, call: ToolCall, error: str) -> Observation:
        """Record a call that could not be made as written (its arguments are no JSON object): a failed step.

        It spends a step like any failed call, so a model that keeps writing
        malformed calls runs out of steps.

        Raises:
            EpisodeError: no episode is running.
        """
        if self._done:
            raise EpisodeError("no episode is running: call reset(task) first")
        self._steps += 1
        return self._spend_step(
            Observation(step=self._steps, tool=call.tool, ok=False, error=error)
        )

    def episode(
        self,
        made: Sequence[ToolCall],
        observations: Sequence[Observation],
        *,
        solver: str | None = None,
        seed: int | None = None,
        episode_id: str | None = None,
        unfinished: str = "the calls ended without submit",
    ) -> Episode:
        """The episode of the calls made since :meth:`reset` and what each returned; the episode is over.

        The reward is the last observation's when it ended the episode, else 0
        with ``unfinished`` as the reason.
        """
        last = observations[-1] if observations else None
        if last is not None and last.done and last.reward is not None:
            reward = last.reward
        else:
            reward = Reward(value=0, submitted=False, reason=unfinished)
        truncated = bool(last is not None and last.done and not self._submitted)
        self._done = True
        assert self._task is not None
        return Episode(
            task_id=self._task.id,
            world_id=self.id,
            calls=list(made),
            observations=list(observations),
            reward=reward,
            truncated=truncated,
            episode_id=episode_id,
            solver=solver,
            seed=seed,
        )

    def close(self) -> None:
        """Release the SQLite connection."""
        if self._conn.in_transaction:
            with self._guard.trust():
                self._conn.execute("ROLLBACK")
        self._conn.close()

    def __enter__(self) -> World:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def verify(
    task: TaskSpec,
    final_state: bytes | World,
    answer: str | None = None,
    *,
    world: WorldSpec | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Reward:
    """The binary reward of ``task`` for a final state, with per-check and frame detail.

    Args:
        task: the task.
        final_state: a :class:`World` whose current episode is ``task``
            (verified as it stands), or database bytes (``World.snapshot()``).
        answer: the submitted answer (``:answer``), or None.
        world: the task's world record, when the task refers to it by id.
        limits: budgets for the world built to verify bytes.
    """
    if isinstance(final_state, World):
        if final_state.task is None or final_state.task.task_id != task.task_id:
            raise ValueError(
                "the world's current episode is not this task; pass its snapshot() bytes instead"
            )
        return final_state.verify(answer)
    spec = task.world if isinstance(task.world, WorldSpec) else world
    if spec is None:
        raise ValueError(f"the task refers to world {task.world}; pass world=<its WorldSpec>")
    with World(spec, limits=limits) as built:
        return built.verify_state(task, final_state, answer)


class WorldPool:
    """Built worlds for concurrent episodes: each world validated once, then cloned; idle ones kept.

    Building a world from its record (validating every statement with
    SQLite) costs tens of milliseconds, more than all of coevo's own work
    for a model call, and a batch plays many episodes of few worlds at once.
    Concurrent episodes each need a world of their own: the first build of a
    world is kept as its template, each episode takes an idle clone or a new
    one (:meth:`World.clone`, a small fraction of a build), and gives it back
    after. At most ``keep`` templates and ``keep`` idle clones stay built
    (the least recently used go first); ``keep = 0`` builds a world per
    episode and keeps nothing.

    Args:
        keep: worlds kept built at most, of each sort.
    """

    def __init__(self, keep: int = 256):
        self.keep = keep
        self._templates: OrderedDict[str, World] = OrderedDict()
        self._idle: OrderedDict[int, World] = OrderedDict()
        self._ticket = 0

    def take(self, spec: WorldSpec) -> World:
        """A world of ``spec`` for one episode (reset it before playing).

        Raises:
            SpecError: the world does not build.
        """
        if self.keep == 0:
            return World(spec)
        wanted = spec.world_id
        for ticket, world in self._idle.items():
            if world.id == wanted:
                del self._idle[ticket]
                return world
        template = self._templates.get(wanted)
        if template is None:
            template = self._templates[wanted] = World(spec)
            self._trim(self._templates)
        else:
            self._templates.move_to_end(wanted)
        return template.clone()

    def give_back(self, world: World) -> None:
        """Keep ``world`` for a later episode of its world (or close it, with ``keep = 0``)."""
        self._ticket += 1
        self._idle[self._ticket] = world
        self._trim(self._idle)

    def _trim(self, kept: OrderedDict[Any, World]) -> None:
        while len(kept) > self.keep:
            _, oldest = kept.popitem(last=False)
            oldest.close()
