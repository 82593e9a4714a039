"""Worlds whose tools are code from an installed package (``coevo.codeworld/1``), run in a sandboxed worker.

A SQL world carries its tools as data (statements SQLite checks). Some
worlds worth training on are code: τ²-bench's airline and retail domains
are Python toolkits over a JSON database. A code world's record is still
data only: it *names* a runtime — an installed, trusted package's domain,
registered under the ``coevo.runtimes`` entry-point group or given by the
program — and holds the initial state (JSON) and the tools' JSON Schemas.
No code is ever read from a record.

The tools run in the worker processes of a
:class:`~coevo.arena.workers.WorkerPool` behind a
:class:`~coevo.arena.sandbox.Sandbox` (no network, its own uid, Landlock,
CPU, memory and process limits). Each episode lives in one worker, built
from the world's serialized initial state (sent to a worker once); the
parent keeps the calls and what each returned. Three things can go wrong,
each kept apart:

- a tool raises: the call returns an error the agent sees (``ok=False``),
  and the episode goes on;
- a call hits a limit the worker survives (its CPU time, ``MemoryError``):
  the same, with the limit named;
- the worker dies or overruns the wall clock: it is restarted, and the
  episode is *failed* (:attr:`CodeEpisode.failed` says why); a failed
  episode's reward is 0 with that reason.

A runtime is any object with three methods, looked up by name in the
worker (:class:`Runtime`). :class:`FunctionRuntime` turns a mapping of
plain functions over a ``dict`` state into one.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Final, Literal, Protocol

import jsonschema
from coevo.arena.errors import SpecError
from coevo.arena.ids import canonical_json
from coevo.arena.limits import DEFAULT_LIMITS
from coevo.arena.oversize import arguments_problem, cut_text, result_problem, state_problem
from coevo.arena.sandbox import Sandbox
from coevo.arena.workers import Crashed, Done, Overrun, WorkerPool
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

__all__ = [
    "CODEWORLD_FORMAT",
    "RUNTIME_GROUP",
    "CodeEpisode",
    "CodeObservation",
    "CodeTool",
    "CodeWorldSpec",
    "CodeWorlds",
    "FunctionRuntime",
    "Runtime",
    "installed_runtimes",
    "state_diff",
]

CODEWORLD_FORMAT: Final = "coevo.codeworld/1"
RUNTIME_GROUP: Final = "coevo.runtimes"
"""The entry-point group under which installed packages register code-world runtimes (``name = "pkg.mod:object"``)."""

_HANDLER: Final = "coevo.arena.codeworld:job"
_MAX_ANSWER_BYTES: Final = DEFAULT_LIMITS.max_state_bytes + (1 << 20)
"""The largest answer the parent reads from a worker: a state at its limit, with room for the frame.

The worker checks every result and state against its limit before sending;
this holds if tool code writes on the worker's pipe itself.
"""
DEFAULT_SANDBOX: Final = Sandbox()
"""Every layer this machine can give, with the default limits."""


def spec_error(exc: ValidationError, record: str) -> SpecError:
    """A pydantic error as a :class:`SpecError`: every problem with where it is, one per line."""
    lines = [
        f"{'.'.join(str(p) for p in e['loc']) or 'record'}: "
        f"{str(e['msg']).removeprefix('Value error, record: ')}"
        for e in exc.errors()
    ]
    return SpecError(f"not a {record} record:\n" + "\n".join(f"  - {line}" for line in lines))


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class CodeTool(_Model):
    """One tool of a code world, as the agent sees it."""

    name: StrictStr = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    description: StrictStr
    parameters: dict[str, Any] = Field(description="JSON Schema of the arguments (an object).")
    effect: Literal["read", "write"] = Field(description="Whether the tool may change the state.")
    side: Literal["agent", "user"] = Field(
        default="agent", description="Who calls it: the agent, or a simulated user (τ²'s phone)."
    )


class CodeWorldSpec(_Model):
    """A ``coevo.codeworld/1`` record: a runtime's domain, its initial state and its tools."""

    format: Literal["coevo.codeworld/1"] = CODEWORLD_FORMAT
    id: StrictStr | None = Field(
        default=None, description="sha256 id; computed when absent, checked when given."
    )
    runtime: StrictStr = Field(
        description="A registered runtime (`coevo runtimes`), never a module path."
    )
    domain: StrictStr
    state: dict[str, Any] = Field(description="The initial state, JSON (the domain's database).")
    tools: list[CodeTool] = Field(min_length=1)
    system: StrictStr = Field(default="", description="Text the agent sees first (a policy).")

    def model_post_init(self, context: Any) -> None:
        """Check the tools' names are distinct, their schemas are JSON Schemas, and a given id."""
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names) or "submit" in names:
            raise SpecError(
                f"code world {self.domain!r}: tool names must be distinct and not 'submit', got {names}"
            )
        for tool in self.tools:
            try:
                jsonschema.Draft202012Validator.check_schema(tool.parameters)
            except jsonschema.SchemaError as exc:
                raise SpecError(
                    f"code world {self.domain!r}, tool {tool.name!r}: its parameters are not a "
                    f"JSON Schema ({exc.message})"
                ) from None
            if tool.parameters.get("type") != "object":
                raise SpecError(
                    f"code world {self.domain!r}, tool {tool.name!r}: parameters must be an "
                    f'object schema ({{"type": "object", ...}})'
                )
        if self.id is not None and self.id != self.world_id:
            raise SpecError(
                f"code world {self.domain!r}: its id {self.id} is not the hash of its content "
                f"({self.world_id}); drop the id to have it computed"
            )

    @classmethod
    def read(cls, data: Any) -> CodeWorldSpec:
        """A record from JSON data, or a :class:`SpecError` listing what is wrong and where."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise spec_error(exc, CODEWORLD_FORMAT) from None

    @property
    def world_id(self) -> str:
        """``sha256:`` + the hex digest of the record's canonical JSON, id left out."""
        body = self.model_dump(mode="json", exclude={"id"})
        return "sha256:" + hashlib.sha256(canonical_json(body).encode()).hexdigest()

    def tool(self, name: str) -> CodeTool | None:
        """The tool called ``name``, if any."""
        return next((t for t in self.tools if t.name == name), None)


class Runtime(Protocol):
    """What a code-world runtime does inside a worker: build a state, call a tool on it, dump it."""

    def load(self, domain: str, state: dict[str, Any]) -> Any:
        """A live environment of ``domain`` from a JSON state (the caller's copy: it may be kept)."""

    def call(self, env: Any, tool: str, arguments: dict[str, Any]) -> Any:
        """Run ``tool``; returns JSON data, or raises (the message goes to the agent)."""

    def dump(self, env: Any) -> dict[str, Any]:
        """The environment's state as JSON."""


@dataclass(frozen=True)
class FunctionRuntime:
    """A runtime from plain functions ``tool(state, **arguments)`` that read and change a ``dict`` state."""

    tools: Mapping[str, Callable[..., Any]]

    def load(self, domain: str, state: dict[str, Any]) -> dict[str, Any]:
        """The state itself (already the worker's own copy)."""
        return state

    def call(self, env: dict[str, Any], tool: str, arguments: dict[str, Any]) -> Any:
        """Call the function named ``tool``."""
        function = self.tools.get(tool)
        if function is None:
            raise KeyError(f"no tool {tool!r} in this domain")
        return function(env, **arguments)

    def dump(self, env: dict[str, Any]) -> dict[str, Any]:
        """The state."""
        return env


def installed_runtimes() -> dict[str, str]:
    """Runtimes installed packages register under ``coevo.runtimes``: name to ``"module:object"``."""
    return {ep.name: ep.value for ep in metadata.entry_points(group=RUNTIME_GROUP)}


# ---- in the worker ------------------------------------------------------------------------

_runtimes: dict[str, Runtime] = {}
_initial: dict[str, str] = {}  # world id → its initial state as JSON text (this worker's)
_episodes: dict[str, tuple[Runtime, Any]] = {}
_KEEP_WORLDS: Final = 16


def _runtime(target: str) -> Runtime:
    found = _runtimes.get(target)
    if found is None:
        module, _, name = target.partition(":")
        found = getattr(importlib.import_module(module), name)
        if isinstance(found, type):
            found = found()
        _runtimes[target] = found
    return found


def _jsonable(value: Any) -> Any:
    """A tool's result as JSON data (pydantic models by their dump, other objects as text)."""
    return json.loads(_json_text(value))


def _json_text(value: Any) -> str:
    """``value`` as JSON text (ASCII: its length is its size in bytes)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json")
    return json.dumps(value, default=str)


def _call(runtime: Runtime, env: Any, message: dict[str, Any]) -> dict[str, Any]:
    """A tool call in the worker: its result, or the error the agent sees.

    A result over ``max_result_bytes`` (and a tool's error message, cut to that
    size) never crosses the pipe: the agent reads why instead, as from a SQL
    world's cap.
    """
    tool = message["tool"]
    limit = DEFAULT_LIMITS.max_result_bytes
    try:
        result = runtime.call(env, tool, message["arguments"])
    except Exception as exc:  # the tool's own error: the agent sees it
        return {"ok": False, "error": cut_text(f"{type(exc).__name__}: {exc}", limit)}
    if isinstance(result, (str, bytes)) and len(result) > limit:  # said without copying it
        return {"ok": False, "error": result_problem(tool, len(result) + 2)}
    text = _json_text(result)
    problem = result_problem(tool, len(text))
    if problem is not None:
        return {"ok": False, "error": problem}
    return {"ok": True, "result": json.loads(text)}


def job(message: dict[str, Any]) -> dict[str, Any]:
    """One operation on an episode kept in this worker: ``open``, ``call``, ``state`` or ``close``.

    A tool that raises (``Exception``) gives ``{"ok": false, "error": ...}``;
    a limit the sandbox raises as a ``BaseException`` (CPU time) propagates
    and the pool reports it as the job failing.
    """
    op, key = message["op"], message["episode"]
    if op == "open":
        if "state" in message:
            if len(_initial) >= _KEEP_WORLDS:
                _initial.pop(next(iter(_initial)))
            _initial[message["world"]] = json.dumps(message["state"])  # loads is 4× a deepcopy
        if message["world"] not in _initial:  # let go of to make room: the parent sends it again
            return {"ok": False, "missing_world": True}
        try:
            runtime = _runtime(message["runtime"])
            state = json.loads(_initial[message["world"]])
            _episodes[key] = (runtime, runtime.load(message["domain"], state))
        except Exception as exc:  # no such package, a state the domain's model refuses
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"ok": True}
    if op == "close":
        _episodes.pop(key, None)
        return {"ok": True}
    if op == "lost" or key not in _episodes:  # the parent's worker was restarted since it began
        return {"ok": False, "lost": True}
    runtime, env = _episodes[key]
    if op == "state":
        return _state(runtime, env)
    return _call(runtime, env, message)


def _state(runtime: Runtime, env: Any) -> dict[str, Any]:
    """The episode's state, or why it is not sent: over ``max_state_bytes`` it never crosses the pipe."""
    try:
        text = _json_text(runtime.dump(env))
    except MemoryError:  # larger than this worker can even write out
        limit = DEFAULT_LIMITS.max_state_bytes
        return {
            "ok": False,
            "error": "its state could not be written out in its worker's memory (MemoryError); "
            f"a code world's state may have at most {limit:,} bytes of JSON (Limits.max_state_bytes)",
        }
    problem = state_problem(len(text))
    if problem is not None:
        return {"ok": False, "error": problem}
    return {"ok": True, "state": json.loads(text)}


# ---- in the parent ------------------------------------------------------------------------


@dataclass(frozen=True)
class CodeObservation:
    """What one call returned: its result, or an error the agent sees."""

    step: int
    tool: str
    ok: bool
    result: Any = None
    error: str | None = None


@dataclass
class CodeEpisode:
    """One episode of a code world, kept in one worker of a :class:`CodeWorlds` pool."""

    world: CodeWorldSpec
    key: str
    slot: int
    owner: CodeWorlds = field(repr=False)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    observations: list[CodeObservation] = field(default_factory=list)
    failed: str | None = None
    """Why the episode cannot go on (its worker died or overran), or None."""

    def step(self, tool: str, arguments: Mapping[str, Any] | None = None) -> CodeObservation:
        """Call ``tool``; arguments are checked against its schema before any code runs."""
        arguments = dict(arguments or {})
        step = len(self.calls) + 1
        self.calls.append((tool, arguments))
        spec = self.world.tool(tool)
        if self.failed is not None:
            obs = CodeObservation(step, tool, False, error=f"the episode failed: {self.failed}")
        elif spec is None:
            known = ", ".join(t.name for t in self.world.tools)
            obs = CodeObservation(step, tool, False, error=f"no tool {tool!r}; the tools: {known}")
        else:
            problem = arguments_problem(tool, arguments) or _argument_problem(spec, arguments)
            if problem is not None:
                obs = CodeObservation(step, tool, False, error=problem)
            else:
                answer = self.owner._send(
                    self, {"op": "call", "tool": tool, "arguments": arguments}
                )
                if answer is None:
                    obs = CodeObservation(
                        step, tool, False, error=f"the episode failed: {self.failed}"
                    )
                elif answer.get("ok"):
                    obs = CodeObservation(step, tool, True, result=answer.get("result"))
                else:
                    obs = CodeObservation(step, tool, False, error=str(answer.get("error")))
        self.observations.append(obs)
        return obs

    def state(self) -> dict[str, Any] | None:
        """The state now (None if the episode failed; a state over ``max_state_bytes`` fails it, saying so)."""
        if self.failed is not None:
            return None
        answer = self.owner._send(self, {"op": "state"})
        if answer is None:
            return None
        if not answer.get("ok"):
            self.close()  # what cannot be read cannot be scored: free it in the worker
            self.failed = str(answer.get("error"))
            return None
        state: dict[str, Any] = answer["state"]
        return state

    def close(self) -> None:
        """Free the episode's state in its worker."""
        if self.failed is None:
            self.owner._send(self, {"op": "close"})
            self.failed = "closed"


_VALIDATORS: dict[str, jsonschema.Draft202012Validator] = {}


def _argument_problem(tool: CodeTool, arguments: dict[str, Any]) -> str | None:
    key = canonical_json(tool.parameters)
    validator = _VALIDATORS.get(key)
    if validator is None:
        if len(_VALIDATORS) >= 4096:
            _VALIDATORS.clear()
        validator = _VALIDATORS[key] = jsonschema.Draft202012Validator(tool.parameters)
    if validator.is_valid(arguments):
        return None
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
    if not errors:
        return None
    where = "/".join(str(p) for p in errors[0].path)
    return f"bad arguments for {tool.name}: {errors[0].message}" + (
        f" (at {where})" if where else ""
    )


class CodeWorlds:
    """Episodes of code worlds, their tools run in a pool of sandboxed workers.

    Args:
        runtimes: runtime names the program allows besides the installed
            ones (``coevo.runtimes``), to ``"module:object"`` (importable in
            the workers: from an installed package or one of ``paths``).
        workers: worker processes (episodes are spread over them).
        seconds: the wall-clock allowance of one call.
        sandbox: the workers' sandbox (None: plain processes; only for code
            you wrote yourself).
        paths: folders put on the workers' import path.
    """

    def __init__(
        self,
        *,
        runtimes: Mapping[str, str] | None = None,
        workers: int = 1,
        seconds: float = 10.0,
        sandbox: Sandbox | None = DEFAULT_SANDBOX,
        paths: Sequence[str] = (),
    ):
        self.runtimes = {**installed_runtimes(), **(runtimes or {})}
        # one pool of one worker per slot, each with its own lock: episodes in different
        # workers run their calls at the same time (threads, or an async caller's to_thread)
        self.pools = [
            WorkerPool(
                _HANDLER,
                workers=1,
                seconds=seconds,
                sandbox=sandbox,
                paths=paths,
                max_answer_bytes=_MAX_ANSWER_BYTES,
            )
            for _ in range(max(1, workers))
        ]
        self._slots = [threading.Lock() for _ in self.pools]
        self._ids = itertools.count()
        self._lock = threading.RLock()
        self._initial: dict[str, tuple[dict[str, Any] | None, str | None]] = {}

    @property
    def restarts(self) -> int:
        """Workers restarted (found dead or killed after overrunning) since the pools started."""
        return sum(p.restarts for p in self.pools)

    @property
    def isolation_missing(self) -> dict[str, str]:
        """The isolation layers this machine cannot give the workers' sandbox, each with how to get it."""
        return self.pools[0].isolation_missing

    def episode(self, world: CodeWorldSpec) -> CodeEpisode:
        """A new episode from ``world``'s initial state (a failed one if the worker cannot build it)."""
        target = self.runtimes.get(world.runtime)
        if target is None:
            known = ", ".join(sorted(self.runtimes)) or "none"
            raise SpecError(
                f"code world {world.domain!r} names the runtime {world.runtime!r}, which is not "
                f"installed (installed: {known}); install the package that provides it"
            )
        with self._lock:
            n = next(self._ids)
        episode = CodeEpisode(world, f"ep{n}", n % len(self.pools), self)
        opening = {
            "op": "open",
            "runtime": target,
            "domain": world.domain,
            "world": world.world_id,
            "state": world.state,
        }
        answer = self._send(episode, opening)
        if answer is not None and answer.get("missing_world"):
            answer = self._send(episode, {**opening, "resend": True})
        if answer is not None and not answer.get("ok"):
            episode.failed = f"the world could not be built: {answer.get('error')}"
        return episode

    def initial_state(self, world: CodeWorldSpec) -> tuple[dict[str, Any] | None, str | None]:
        """``(state, why it failed)`` of a fresh episode: the record's state as the runtime holds it.

        A runtime may fill in defaults (a database model's optional fields),
        so a final state is compared with this, never with the raw record.
        Kept for the last few worlds.
        """
        found = self._initial.get(world.world_id)
        if found is None:
            state, _, failed = replay(self, world, [])
            found = (state, failed)
            if len(self._initial) >= 4:
                self._initial.pop(next(iter(self._initial)))
            self._initial[world.world_id] = found
        return found

    def _send(self, episode: CodeEpisode, message: dict[str, Any]) -> dict[str, Any] | None:
        """One job in the episode's worker; None (and the episode failed) if the worker was lost."""
        message = {**message, "episode": episode.key}
        world_key, episode_key = f"world:{message.get('world')}", f"episode:{episode.key}"

        def prepare(job: dict[str, Any], holds: set[str]) -> dict[str, Any]:
            if job["op"] == "open":
                if world_key in holds and not job.get("resend"):
                    job = {k: v for k, v in job.items() if k != "state"}
                holds.update((world_key, episode_key))
            elif episode_key not in holds:  # this worker was restarted since the episode began
                return {"op": "lost", "episode": episode.key}
            elif job["op"] == "close":
                holds.discard(episode_key)
            return job

        with self._slots[episode.slot]:  # one job at a time per worker
            (outcome,) = self.pools[episode.slot].run([message], prepare=prepare)
        if isinstance(outcome, Done):
            if outcome.result.get("lost"):
                episode.failed = "its worker was restarted and the episode's state was lost"
                return None
            return outcome.result
        if isinstance(outcome, Overrun):
            episode.failed = f"a call ran past {outcome.seconds:g} s; its worker was restarted"
        elif isinstance(outcome, Crashed) and outcome.detail.startswith("the job failed"):
            if message["op"] == "call":  # a limit the worker survived: the call's error
                return {"ok": False, "error": outcome.detail.removeprefix("the job failed: ")}
            else:
                episode.failed = outcome.detail
        else:
            episode.failed = f"{outcome.detail}; the worker was restarted"
        return None

    def close(self) -> None:
        """Stop the workers."""
        for pool in self.pools:
            pool.close()

    def __enter__(self) -> CodeWorlds:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def state_diff(expected: Any, actual: Any, path: str = "", limit: int = 20) -> list[str]:
    """Where two JSON states differ, as ``path: expected != actual`` lines (at most ``limit``).

    Objects compare by key, whatever their order; lists by position; numbers
    by value (``1 == 1.0``). Equal states give an empty list.
    """
    out: list[str] = []
    _diff(expected, actual, path or "$", out, limit)
    return out


def _diff(a: Any, b: Any, path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in b:
                out.append(f"{path}.{key}: missing")
            elif key not in a:
                out.append(f"{path}.{key}: not expected")
            else:
                _diff(a[key], b[key], f"{path}.{key}", out, limit)
            if len(out) >= limit:
                return
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items expected, {len(b)} found")
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}[{i}]", out, limit)
    elif a != b or isinstance(a, bool) != isinstance(b, bool):
        out.append(f"{path}: {_short(a)} expected, {_short(b)} found")


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def domain_code_fails(
    worlds: Iterable[CodeWorldSpec], *, paths: Sequence[str], seconds: float
) -> tuple[CodeWorldSpec, str] | None:
    """The first of ``worlds`` whose initial state the domain's code cannot build, with why; None when all can.

    The probe a benchmark's pool and a code eval suite both run before
    anything starts: one sandboxed worker with ``paths`` on its import path.
    """
    with CodeWorlds(workers=1, seconds=seconds, paths=paths) as probe:
        for world in worlds:
            state, why = probe.initial_state(world)
            if state is None:
                return world, str(why)
    return None


def replay(
    worlds: CodeWorlds, world: CodeWorldSpec, calls: Iterable[tuple[str, Mapping[str, Any]]]
) -> tuple[dict[str, Any] | None, list[CodeObservation], str | None]:
    """Play ``calls`` in a fresh episode: ``(final state, observations, why it failed or None)``."""
    episode = worlds.episode(world)
    try:
        for tool, arguments in calls:
            episode.step(tool, arguments)
        state = episode.state()
        return state, list(episode.observations), episode.failed
    finally:
        episode.close()
