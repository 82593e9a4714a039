"""Serve one coevo task to any MCP client (Claude Code, an agent harness), with the official ``mcp`` SDK.

``coevo serve TASKS.jsonl --task ID`` (``docs/mcp.md``) runs a :class:`TaskServer`:

* **Tools**: the task's world's tools (names, descriptions and JSON Schemas
  from :meth:`World.tool_definitions`) and ``submit`` (``answer``: a string,
  for a task that asks a question), last.
* **Instruction**: the server's ``instructions`` (coevo's system text and the
  task's instruction, as :func:`~coevo.arena.rendering.prompt` makes it, which
  clients give the model), and the same text as the prompt ``task``.
* **A session is an episode.** Each MCP session (one client process over
  stdio; one ``mcp-session-id`` over streamable HTTP) plays its own clone of
  the world (:meth:`World.clone`), from the initial state; sessions never see
  each other's writes. The episode starts at the session's first tool call
  and ends at ``submit`` (scored by coevo's verifier: reward 0 or 1 and the
  reason, returned to the client), when the step budget runs out (reward 0),
  or when the session closes first (reward 0, "the session ended without
  submit"). Later calls get an error result: start a new session to play again.
* **Failures are results.** An unknown tool, arguments that break the tool's
  schema (checked with ``jsonschema``), a SQL error or a budget: each comes
  back as an ``is_error`` result the agent reads, and spends a step, as in
  every coevo episode; the server never crashes on a call.
* **Recording**: with ``record`` (a folder), every episode that made a call is
  appended to ``episodes.jsonl`` there, one :class:`~coevo.arena.outcomes.Episode`
  per line (calls, observations, reward and reason; ``solver`` is ``mcp:``
  and the client's name), readable with ``Episode.model_validate_json``.

The server speaks the handshake protocol versions only (``initialize``, a
stateful session): a client that asks for the sessionless 2026-07-28 era is
refused with ``UNSUPPORTED_PROTOCOL_VERSION`` and falls back (the SDK's
``Client`` in its default ``mode="auto"`` does), since a sessionless request
has no episode. Over stdio the server runs the SDK's handshake-only loop
(``serve_loop``), so the refused probe leaves the connection open for the
fallback ``initialize``; streamable HTTP's session manager does the same.
Per-session state lives on the SDK's ``Connection`` (``state`` and
``exit_stack``, unwound when the session ends), which the low-level request
context reaches only through ``ctx.session._connection`` in mcp 2.0 to 2.3.
"""

from __future__ import annotations

import fcntl
import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Final, cast

import anyio
import jsonschema
import mcp.types as types
import uvicorn
from coevo.arena.bounded import open_to_write
from coevo.arena.errors import CoevoError, CommandError
from coevo.arena.judge import WorldCache, assess_task
from coevo.arena.outcomes import Episode, Observation, Reward
from coevo.arena.oversize import arguments_problem, cut_arguments
from coevo.arena.records import load_records
from coevo.arena.rendering import prompt
from coevo.arena.spec import TaskSpec, ToolCall, WorldSpec
from coevo.arena.world import World
from coevo.run.interfaces.sources import accepted_tasks, source_kind
from mcp.server import Server, ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

__all__ = [
    "EPISODES_FILE",
    "PROMPT_NAME",
    "SERVER_NAME",
    "EpisodeRecorder",
    "SessionEpisode",
    "TaskServer",
    "load_task",
]

SERVER_NAME: Final = "coevo"
"""The name the server gives itself (clients prefix its tools with it, e.g. ``mcp__coevo__submit``)."""

PROMPT_NAME: Final = "task"
"""The prompt that holds the instruction (a slash command in Claude Code: ``/mcp__coevo__task``)."""

EPISODES_FILE: Final = "episodes.jsonl"
"""The file of the record folder that episodes are appended to, one JSON line each."""

_STATE_KEY: Final = "coevo.episode"
_OVER: Final = "the episode is over; start a new session to play again"


def _version() -> str:
    try:
        return metadata.version("coevo")
    except metadata.PackageNotFoundError:
        return "0"


# -- the task --------------------------------------------------------------------------


def _pick(tasks: Sequence[TaskSpec], wanted: str | None, source: str) -> TaskSpec:
    """The task ``wanted`` names: its id, the start of its id, or its number in the file (from 1)."""
    count = len(tasks)
    listing = "\n".join(f"  {i}. {t.task_id}" for i, t in enumerate(tasks[:10], start=1))
    more = f"\n  … and {count - 10} more" if count > 10 else ""
    how = (
        f"give --task the id of one of its {count} task(s), the start of an id, or a number "
        f"from 1 to {count}:\n{listing}{more}\n(`coevo check {source}` shows every task with its id)"
    )
    if wanted is None:
        if count == 1:
            return tasks[0]
        raise CommandError(f"{source} holds {count} tasks: {how}")
    if wanted.isdigit() and 1 <= int(wanted) <= count:
        return tasks[int(wanted) - 1]
    matches = [
        t for t in tasks if t.task_id.startswith(wanted) or t.task_id.startswith("sha256:" + wanted)
    ]
    exact = [t for t in matches if wanted in (t.task_id, t.task_id.removeprefix("sha256:"))]
    if len(exact) == 1 or len(matches) == 1:
        return (exact or matches)[0]
    if matches:
        raise CommandError(f"{len(matches)} task ids of {source} start with {wanted!r}: {how}")
    raise CommandError(f"no task of {source} has the id {wanted!r}: {how}")


def load_task(source: str | Path, task: str | None = None) -> TaskSpec:
    """The task to serve, its world inline, passed by the Judge.

    Args:
        source: a file of ``coevo.task/1`` and ``coevo.world/1`` records (only
            the task served is judged), a run directory (its live pool) or an
            export (:func:`~coevo.run.interfaces.sources.accepted_tasks`).
        task: its id, the start of its id, or its number in the source (from 1);
            None when the source holds one task.

    Raises:
        CommandError: no task matches (the message lists the ids; status 2),
            or the Judge rejects it (status 1).
        RecordError: a record of the file cannot be read (naming the line).
        CoevoError: the source cannot be read.
    """
    source = str(source)
    if source_kind(source) != "records":
        return _pick(accepted_tasks(source), task, source)
    tasks, worlds = load_records(source)
    if not tasks:
        raise CommandError(f"{source} holds no task record (coevo.task/1); nothing to serve")
    chosen = _pick(tasks, task, source)
    cache = WorldCache(specs=worlds)
    verdict = assess_task(chosen, cache)
    if not verdict.accepted:
        failed = ", ".join(
            f"{name} ({result.reason})"
            for name, result in verdict.checks.items()
            if result.passed is False
        )
        raise CommandError(
            f"task {chosen.task_id} of {source} is rejected by the Judge: "
            f"{failed or verdict.error}; only accepted tasks are served "
            f"(`coevo check {source}` shows every verdict)",
            1,
        )
    world = cache.spec_of(chosen)
    assert isinstance(world, WorldSpec)  # the Judge accepted it, so its world is there
    if isinstance(chosen.world, WorldSpec):
        return chosen
    return chosen.model_copy(update={"world": world})


# -- recording -------------------------------------------------------------------------


class EpisodeRecorder:
    """Appends finished episodes to ``DIR/episodes.jsonl``, one JSON line each.

    Each line is written with one ``write`` under an exclusive ``flock``, so
    several servers (one per stdio client) can share a folder.

    Args:
        folder: the record folder (made if missing).

    Raises:
        CommandError: the folder cannot be made, or is a file, or its episodes file is a link.
    """

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CommandError(f"--record {folder}: cannot make the folder: {exc}") from exc
        self.path = self.folder / EPISODES_FILE
        if self.path.is_symlink():  # said before serving; each write refuses one too
            raise CommandError(
                f"--record {folder}: {self.path} is a symbolic link; coevo appends through no "
                "link: remove it, or choose another folder"
            )

    def write(self, episode: Episode) -> None:
        """Append ``episode`` as one line."""
        self.write_line(episode.model_dump_json())

    def write_line(self, text: str) -> None:
        """Append one line of JSON text."""
        line = (text + "\n").encode()
        fd = open_to_write(self.path, self.folder, append=True)  # through no link
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, line)
        finally:
            os.close(fd)

    def read(self) -> list[Episode]:
        """Every episode recorded so far, in order."""
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as lines:
            return [Episode.model_validate_json(line) for line in lines if line.strip()]


# -- one session -----------------------------------------------------------------------


def _text(text: str, *, error: bool = False, structured: dict[str, Any] | None = None) -> Any:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        is_error=error,
        structured_content=structured,
    )


def _outcome(reward: Reward, steps: int, episode_id: str) -> dict[str, Any]:
    return {
        "done": True,
        "reward": reward.value,
        "reason": reward.reason,
        "submitted": reward.submitted,
        "steps": steps,
        "episode_id": episode_id,
    }


@dataclass
class SessionEpisode:
    """The episode of one MCP session: its own world clone, the calls made and what each returned.

    Not thread-safe: :class:`TaskServer` runs one call of a session at a time.
    """

    server: TaskServer
    solver: str
    world: World = field(init=False)
    episode_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    calls: list[ToolCall] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    episode: Episode | None = None
    lock: anyio.Lock = field(default_factory=anyio.Lock)

    def __post_init__(self) -> None:
        self.world = self.server.template.clone()
        self.world.reset(self.server.task, max_steps=self.server.max_steps)

    def play(self, name: str, arguments: Mapping[str, Any] | None) -> Any:
        """Make one call and return its ``CallToolResult``; ``submit`` or the last step ends the episode."""
        if self.episode is not None:
            reward = self.episode.reward
            return _text(
                f"error: {_OVER} (reward {reward.value}: {reward.reason})",
                error=True,
                structured=_outcome(reward, len(self.calls), self.episode_id),
            )
        args = dict(arguments or {})
        call = ToolCall(name, args)
        validator = self.server.validators.get(name)
        too_big = arguments_problem(name, args)
        problem = None
        if too_big is None and validator is not None:
            problem = jsonschema.exceptions.best_match(validator.iter_errors(args))
        if (
            too_big is not None
        ):  # refused, and recorded cut (with its size): a record line stays small
            call = ToolCall(name, cut_arguments(args))
            obs = self.world.refuse(call, too_big)
        elif problem is not None:
            where = ".".join(str(p) for p in problem.absolute_path)
            at = f" at {where}" if where else ""
            obs = self.world.refuse(call, f"{name}: invalid arguments{at}: {problem.message}")
        else:
            obs = self.world.step(call)  # an unknown tool is a failed step too, with a hint
        self.calls.append(call)
        self.observations.append(obs)
        if not obs.done:
            return _text(obs.text(), error=not obs.ok)
        episode = self.finish()
        reward = episode.reward
        text = reward.detail() if obs.ok else f"{obs.text()}\n{reward.detail()}"
        return _text(
            f"{text}\n({_OVER.split(';')[0]})",
            error=not obs.ok,
            structured=_outcome(reward, len(self.calls), self.episode_id),
        )

    def finish(self, unfinished: str = "the session ended without submit") -> Episode:
        """The episode, made (and recorded) once: at its end, or when the session closes first."""
        if self.episode is None:
            self.episode = self.world.episode(
                self.calls,
                self.observations,
                solver=self.solver,
                episode_id=self.episode_id,
                unfinished=unfinished,
            )
            self.server.finished(self.episode)
        return self.episode

    async def aclose(self) -> None:
        """At the session's end: record an unfinished episode that made a call, then close the world."""
        async with self.lock:
            if self.calls and self.episode is None:
                self.finish()
            self.world.close()


class _HandshakeOnly:
    """Server middleware refusing the sessionless protocol era, so every client gets a stateful session."""

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and ctx.request_id is not None:
            raise MCPError(
                UNSUPPORTED_PROTOCOL_VERSION,
                "a coevo episode needs a stateful session: connect with initialize "
                f"(protocol {', '.join(HANDSHAKE_PROTOCOL_VERSIONS)})",
                {"supported": list(HANDSHAKE_PROTOCOL_VERSIONS), "requested": ctx.protocol_version},
            )
        return await call_next(ctx)


# -- the server ------------------------------------------------------------------------


class TaskServer:
    """One task served over MCP: each session an episode on its own world clone.

    Args:
        task: the task, its world inline (:func:`load_task` gives one).
        record: a folder to append every episode to (``episodes.jsonl``), or None.
        max_steps: tool calls an episode may make, ``submit`` included
            (default: the world's limits, 40).

    Raises:
        SpecError: the task or its world breaks a rule of the format.
        CommandError: ``record`` cannot be made.
        ValueError: ``max_steps`` is below 1.
    """

    def __init__(
        self, task: TaskSpec, *, record: str | Path | None = None, max_steps: int | None = None
    ):
        if not isinstance(task.world, WorldSpec):
            raise CoevoError(
                f"task {task.task_id} names world {task.world}: serve a task with its world inline "
                "(load_task gives one)"
            )
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.task = task
        self.max_steps = max_steps
        self.template = World(task.world)
        self.template.prepare(task)
        self.instructions = prompt(task)
        self.tools = [
            types.Tool(name=d["name"], description=d["description"], input_schema=d["input_schema"])
            for d in self.template.tool_definitions()
        ]
        self.validators = {
            d["name"]: jsonschema.validators.validator_for(d["input_schema"])(d["input_schema"])
            for d in self.template.tool_definitions()
        }
        self.recorder = EpisodeRecorder(record) if record is not None else None
        self.sessions = 0
        """Sessions that have started an episode, since the server started."""
        self.finished_episodes: list[Episode] = []
        """Episodes that ended in this process, most recent last (the last 100)."""
        self.server = self._mcp_server()

    def _mcp_server(self) -> Server[Any]:
        """The SDK's server with this object's handlers, refusing sessionless requests."""
        server: Server[Any] = Server(
            SERVER_NAME,
            version=_version(),
            instructions=self.instructions,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
        )
        server.middleware.insert(0, _HandshakeOnly())
        return server

    def finished(self, episode: Episode) -> None:
        """Keep and record an episode that has ended."""
        self.finished_episodes = [*self.finished_episodes[-99:], episode]
        if self.recorder is not None:
            self.recorder.write(episode)

    # -- handlers ------------------------------------------------------------------------
    def _episode(self, ctx: ServerRequestContext[Any, Any]) -> SessionEpisode:
        """The session's episode, started at its first call and closed when the session ends."""
        conn = cast(Connection, ctx.session._connection)  # the SDK's per-connection state
        episode = conn.state.get(_STATE_KEY)
        if episode is None:
            params = ctx.session.client_params
            client = params.client_info.name if params is not None else None
            episode = self._new_episode(f"mcp:{client}" if client else "mcp")
            conn.state[_STATE_KEY] = episode
            conn.exit_stack.push_async_callback(episode.aclose)
            self.sessions += 1
        return cast(SessionEpisode, episode)

    def _new_episode(self, solver: str) -> Any:
        """A session's episode (a subclass serving another kind of world makes its own)."""
        return SessionEpisode(self, solver)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> Any:
        episode = self._episode(ctx)
        async with episode.lock:  # a world is used by one thread at a time
            return await anyio.to_thread.run_sync(episode.play, params.name, params.arguments)

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name=PROMPT_NAME,
                    description="the task to do with this server's tools (its instruction)",
                )
            ]
        )

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        if params.name != PROMPT_NAME:
            raise MCPError(
                types.INVALID_PARAMS,
                f"no prompt {params.name!r}: the one prompt is {PROMPT_NAME!r}",
            )
        return types.GetPromptResult(
            description=f"coevo task {self.task.task_id}",
            messages=[
                types.PromptMessage(
                    role="user", content=types.TextContent(type="text", text=self.instructions)
                )
            ],
        )

    # -- transports ----------------------------------------------------------------------
    async def run_stdio(self) -> None:
        """Serve one client over standard input and output until it closes them."""
        options = self.server.create_initialization_options()
        async with stdio_server() as (read, write), self.server.lifespan(self.server) as state:
            # The handshake-only loop (``Server.run`` would let a ``server/discover`` probe lock the
            # connection into the sessionless era, where the fallback ``initialize`` is refused).
            await serve_loop(self.server, read, write, lifespan_state=state, init_options=options)

    def http_app(self, host: str = "127.0.0.1") -> Any:
        """A Starlette app serving streamable HTTP at ``/mcp``, stateful (one episode per ``mcp-session-id``).

        Make a new app for each start: its session manager runs once. On a
        loopback ``host`` the SDK refuses other Host and Origin headers (DNS rebinding).
        """
        return self.server.streamable_http_app(host=host)

    def http_server(
        self, host: str = "127.0.0.1", port: int = 0
    ) -> tuple[uvicorn.Server, socket.socket]:
        """A uvicorn server for :meth:`http_app` and its bound socket (``port`` 0: a free port).

        Start it with ``await server.serve(sockets=[sock])``; the port is ``sock.getsockname()[1]``.

        Raises:
            CommandError: the address cannot be bound.
        """
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            raise CommandError(f"cannot listen on {host}:{port}: {exc}") from exc
        config = uvicorn.Config(self.http_app(host), log_level="warning", lifespan="on")
        return uvicorn.Server(config), sock

    async def run_http(
        self, host: str = "127.0.0.1", port: int = 0, *, announce: Any = None
    ) -> None:
        """Serve streamable HTTP on ``host:port`` until interrupted; ``announce(url)`` is called once listening."""
        server, sock = self.http_server(host, port)
        stopped = anyio.Event()

        async def serve() -> None:
            try:
                await server.serve(sockets=[sock])
            finally:
                stopped.set()

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(serve)
                while not server.started and not stopped.is_set():
                    await anyio.sleep(0.01)
                if server.started and announce is not None:
                    shown = f"[{host}]" if ":" in host else host
                    announce(f"http://{shown}:{sock.getsockname()[1]}/mcp")
        finally:
            sock.close()
