"""Serve coevo tasks as an OpenEnv environment, with OpenEnv's own server (``pip install 'coevo[openenv]'``).

One WebSocket session (``/ws``) is one agent; one episode is one task of the
served file. The wire contract is OpenEnv's tool-calling one (its
``MCPToolClient`` and ``GenericEnvClient`` speak it):

* ``reset(task_id=..., index=..., seed=...)`` picks a task (by id, by position
  in the file, by ``Random(seed)``, else the next one in file order, counted
  across sessions); an argument of the wrong type or of another name fails
  the reset with a :class:`~coevo.arena.errors.RecordError` that names it.
  The observation holds its ``task_id``, the ``instruction``
  (coevo's system text and the task's instruction, as :func:`~coevo.arena.rendering.prompt`
  makes it) and the world's ``tools``, ``submit`` last; reward 0.
* ``step(CallToolAction(tool_name, arguments))`` calls one tool. ``result`` is
  the text an agent reads (rows as JSON, a row count, or ``error: ...``:
  a failed call is an observation, never an exception); reward 0 until
  ``submit``, whose observation is ``done`` with the verifier's reward (0 or 1)
  and its ``reason``. So the sum of a session's rewards is the task's reward.
  Running out of steps ends the episode with reward 0. ``ListToolsAction``
  lists the tools.
* ``state`` is the episode id, the step count, the task and world ids and ``done``.

Tasks are data: the server serves the accepted tasks of a run directory (a
snapshot of its live pool, read when the server starts), an export or a file
of ``coevo.task/1`` records (:mod:`~coevo.run.interfaces.sources`), all
validated before it listens; no code of a task is run. Each session plays
clones of the worlds (:meth:`World.clone`), so sessions never share a
database; it keeps the clones of the few worlds it played last
(``worlds_per_session``), so a long session over many worlds holds a
bounded number of databases. HTTP ``/reset`` and ``/step`` build a fresh
environment per request (OpenEnv's design) and so cannot play an episode:
use the WebSocket. ``docs/openenv.md`` has the whole story.
"""

from __future__ import annotations

import argparse
import itertools
import random
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from difflib import get_close_matches
from pathlib import Path
from typing import Any, Final

import uvicorn
from coevo.arena.errors import RecordError, RegistryError
from coevo.arena.rendering import prompt
from coevo.arena.spec import TaskSpec, ToolCall, WorldSpec
from coevo.arena.world import World
from coevo.run.interfaces.sources import accepted_tasks
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_types import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Tool,
)
from openenv.core.env_server.types import Observation, State

__all__ = [
    "RESET_ARGUMENTS",
    "WORLDS_PER_SESSION",
    "CoevoEnvironment",
    "EpisodeStart",
    "TaskPool",
    "ToolResult",
    "create_openenv_app",
    "main",
]

RESET_ARGUMENTS: Final = ("task_id", "index", "seed", "episode_id")
"""The arguments ``reset`` takes; any other name fails the reset (a typo never plays another task)."""

WORLDS_PER_SESSION: Final = 4
"""World clones a session keeps by default: those of the worlds it played last."""


class EpisodeStart(Observation):
    """The observation of ``reset``: the task, its instruction and its world's tools (``submit`` last)."""

    task_id: str
    instruction: str
    tools: list[Tool]


class ToolResult(CallToolObservation):
    """The observation of a tool call: ``result`` is the text an agent reads; ``reason`` explains a final reward."""

    reason: str | None = None

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """The fields that are set: OpenEnv's ``MCPToolClient`` reads an observation by the keys present."""
        kwargs.setdefault("exclude_none", True)
        return super().model_dump(**kwargs)


def _checked(name: str, value: Any, kind: type, what: str) -> None:
    """Nothing if ``value`` is None or of ``kind`` (a bool is no integer); else a RecordError naming the argument."""
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return
    raise RecordError(f"reset: {name} must be {what}, not {type(value).__name__} {value!r}")


def _worlds_per_session(keep: int) -> int:
    if keep < 1:
        raise ValueError(
            f"worlds_per_session must be at least 1 (the world being played), got {keep}"
        )
    return keep


def _tools(world: World) -> list[Tool]:
    return [
        Tool(name=d["name"], description=d["description"], input_schema=d["input_schema"])
        for d in world.tool_definitions()
    ]


class TaskPool:
    """The served tasks, validated once; each world is built once and cloned for every session.

    Args:
        tasks: the tasks, in the order ``index`` and the default cycle use.
        worlds: world records by id, for tasks that name their world by id.

    Raises:
        RecordError: no tasks, or a task names a world that ``worlds`` does not hold.
        SpecError: a world or a task breaks a rule of the format.
    """

    def __init__(self, tasks: Sequence[TaskSpec], worlds: Mapping[str, WorldSpec] | None = None):
        if not tasks:
            raise RecordError(
                "no tasks to serve: give a file with at least one coevo.task/1 record"
            )
        worlds = dict(worlds or {})
        self.tasks = list(tasks)
        self.templates: dict[str, World] = {}
        for task in self.tasks:
            spec = task.world if isinstance(task.world, WorldSpec) else worlds.get(task.world)
            if spec is None:
                raise RecordError(
                    f"task {task.task_id} names world {task.world}, which the file does not define: "
                    "put the world record in the file before the task"
                )
            if task.world_id not in self.templates:
                self.templates[task.world_id] = World(spec)
            self.templates[task.world_id].prepare(task)
        self.by_id = {task.task_id: task for task in self.tasks}
        only = next(iter(self.templates.values())) if len(self.templates) == 1 else None
        self.shared_tools = _tools(only) if only else []  # what list_tools says before any reset
        self._cycle = itertools.count()

    @classmethod
    def from_source(cls, source: str | Path) -> TaskPool:
        """The accepted tasks of a run directory (its live pool, as committed now), an export or a file of records.

        Only tasks the Judge accepted are served (:func:`~coevo.run.interfaces.sources.accepted_tasks`).
        """
        return cls(accepted_tasks(str(source)))

    def pick(self, task_id: str | None, index: int | None, seed: int | None) -> TaskSpec:
        """The task ``reset`` asked for: by id, by index, by ``Random(seed)``, else the next in file order.

        Raises:
            RecordError: an argument of the wrong type (naming it).
            RegistryError: no served task has ``task_id``, or ``index`` is out of range.
        """
        last = len(self.tasks) - 1
        _checked("task_id", task_id, str, "the task_id of a served task (a string)")
        _checked("index", index, int, f"an integer from 0 to {last}")
        _checked("seed", seed, int, "an integer")
        if task_id is not None:
            if task_id not in self.by_id:
                raise RegistryError(
                    f"no served task has id {task_id!r}: reset with the task_id of a served "
                    f"task, or with an index from 0 to {len(self.tasks) - 1}"
                )
            return self.by_id[task_id]
        if index is not None:
            if not 0 <= index < len(self.tasks):
                raise RegistryError(f"index {index} is out of range: 0 to {len(self.tasks) - 1}")
            return self.tasks[index]
        if seed is not None:
            return random.Random(seed).choice(self.tasks)
        return self.tasks[next(self._cycle) % len(self.tasks)]


class CoevoEnvironment(Environment):
    """One OpenEnv session: episodes of the pool's tasks, on this session's own world clones.

    Args:
        pool: the served tasks.
        worlds_per_session: clones kept at most, those of the worlds played
            last; the least recently played is closed first (playing it
            again clones it anew).

    Raises:
        ValueError: ``worlds_per_session`` is below 1.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, pool: TaskPool, worlds_per_session: int = WORLDS_PER_SESSION):
        super().__init__()
        self._pool = pool
        self._keep = _worlds_per_session(worlds_per_session)
        self._clones: OrderedDict[str, World] = OrderedDict()  # least recently played first
        self._world: World | None = None
        self._episode_id: str | None = None

    @property
    def held(self) -> tuple[str, ...]:
        """The ids of the worlds this session holds a clone of, least recently played first."""
        return tuple(self._clones)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        index: int | None = None,
        **kwargs: Any,
    ) -> EpisodeStart:
        """Start an episode of the task asked for (see :meth:`TaskPool.pick`).

        ``**kwargs`` is there only to be refused: OpenEnv passes a reset
        every argument a client sent when the signature takes ``**kwargs``
        (and silently drops the others when it does not).

        Raises:
            RecordError: an argument of another name than :data:`RESET_ARGUMENTS`,
                or of the wrong type (naming it).
            RegistryError: no served task has ``task_id``, or ``index`` is out of range.
        """
        if kwargs:
            unknown = sorted(kwargs)
            hints = [
                f"{name} (did you mean {close[0]}?)" if close else name
                for name in unknown
                for close in [get_close_matches(name, RESET_ARGUMENTS, n=1)]
            ]
            raise RecordError(
                f"reset got {', '.join(hints)}, which it does not take: "
                f"it takes {', '.join(RESET_ARGUMENTS)}"
            )
        _checked("episode_id", episode_id, str, "a string")
        task = self._pool.pick(task_id, index, seed)
        world = self._clones.pop(task.world_id, None)
        if world is None:
            world = self._pool.templates[task.world_id].clone()
        self._clones[task.world_id] = world  # the most recently played last
        while len(self._clones) > self._keep:
            _, oldest = self._clones.popitem(last=False)
            oldest.close()
        world.reset(task)
        self._world = world
        self._episode_id = episode_id or uuid.uuid4().hex
        return EpisodeStart(
            task_id=task.task_id, instruction=prompt(task), tools=_tools(world), reward=0.0
        )

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        """Call one tool (``CallToolAction``) or list the tools (``ListToolsAction``)."""
        world = self._world
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=_tools(world) if world else self._pool.shared_tools)
        if not isinstance(action, CallToolAction):
            raise TypeError(f"a coevo episode takes call_tool or list_tools, not {action!r}")
        if world is None or world.done:
            where = "no episode has started" if world is None else "the episode is over"
            return ToolResult(
                tool_name=action.tool_name,
                result=f"error: {where}: call reset() to start one",
                done=world is not None,
                reward=0.0,
            )
        obs = world.step(ToolCall(action.tool_name, dict(action.arguments)))
        reward = obs.reward
        return ToolResult(
            tool_name=action.tool_name,
            result=obs.text(),
            done=obs.done,
            reward=float(reward.value) if reward else 0.0,
            reason=reward.reason if reward else None,
        )

    @property
    def state(self) -> State:
        """The episode id and step count, with the task and world ids and whether it is over."""
        world = self._world
        task = world.task if world else None
        return State(
            episode_id=self._episode_id,
            step_count=world.steps if world else 0,
            task_id=task.task_id if task else None,
            world_id=world.id if world else None,
            done=world.done if world else True,
        )

    def close(self) -> None:
        """Close this session's world clones."""
        for world in self._clones.values():
            world.close()
        self._clones.clear()
        self._world = None


def create_openenv_app(
    pool: TaskPool, *, max_sessions: int = 16, worlds_per_session: int = WORLDS_PER_SESSION
) -> Any:
    """The FastAPI app OpenEnv's ``create_app`` makes for ``pool`` (``/ws``, ``/reset``, ``/step``, ``/state``, ``/schema``, ``/health``).

    Args:
        pool: the tasks to serve.
        max_sessions: WebSocket sessions at once.
        worlds_per_session: world clones each session keeps at most (those it played last).

    Raises:
        ValueError: ``worlds_per_session`` is below 1.
    """
    _worlds_per_session(worlds_per_session)  # refused before the server listens, not per session
    return create_app(
        lambda: CoevoEnvironment(pool, worlds_per_session),
        CallToolAction,
        ToolResult,
        env_name="coevo",
        max_concurrent_envs=max_sessions,
    )


def _within(low: int, high: int) -> Any:
    """An argparse type: a whole number from ``low`` to ``high`` (a refused one said briefly, never echoed whole)."""

    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"
            raise argparse.ArgumentTypeError(f"{shown!r} is not a whole number") from None
        if not low <= value <= high:
            shown = text if len(text) <= 40 else f"a {len(text)}-digit number"
            raise argparse.ArgumentTypeError(f"{shown}: give a number from {low} to {high:,}")
        return value

    return whole


def main(argv: Sequence[str] | None = None) -> None:
    """Serve tasks: ``python -m coevo.run.interfaces.openenv_server SOURCE --port 8000``."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("source", help="a run directory, an export, or a file of task records")
    parser.add_argument("--host", default="127.0.0.1", help="0.0.0.0 to serve other machines")
    parser.add_argument("--port", type=_within(0, 65535), default=8000, help="0: a free one")
    parser.add_argument(
        "--max-sessions", type=_within(1, 4096), default=16, help="WebSocket sessions at once"
    )
    parser.add_argument(
        "--worlds-per-session",
        type=_within(1, 4096),
        default=WORLDS_PER_SESSION,
        help="world clones a session keeps (those it played last)",
    )
    args = parser.parse_args(argv)
    app = create_openenv_app(
        TaskPool.from_source(args.source),
        max_sessions=args.max_sessions,
        worlds_per_session=args.worlds_per_session,
    )
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
