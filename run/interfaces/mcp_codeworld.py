"""Serve a code task (``coevo.codetask/1``, e.g. an imported τ²-bench task) over MCP, its tools run in a sandbox.

:class:`CodeTaskServer` is :class:`~coevo.run.interfaces.mcp_server.TaskServer`
for a code world: the same transports, handshake-only sessions and
recording, with each session's episode kept in a sandboxed worker of a
:class:`~coevo.arena.codeworld.CodeWorlds` pool. The tools are the world's
agent tools and ``submit`` (``answer``: what the agent tells the user, which
is where a task's ``communicate`` strings must appear). ``submit`` scores the
episode with :func:`~coevo.arena.codetask.code_reward`: the state the
session left against the state the reference solution reaches, key by key.
The server's instructions are the world's system text (a policy) and the
task's instruction. A call, ``submit`` included, whose arguments are over
``Limits.max_value_bytes`` (1,000,000 bytes of JSON) is refused as a failed
step, as a SQL task's server refuses it, and recorded with each oversized
argument cut; a final state over ``Limits.max_state_bytes`` scores 0, the
reason naming that limit.

Recorded lines (``--record DIR``, ``episodes.jsonl``) are JSON objects:
``episode_id``, ``task_id``, ``solver``, ``calls`` (tool, arguments, ok,
result or error), ``said``, ``reward``, ``reason``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from coevo.arena.codetask import RESPOND, CodeTaskSpec, code_reward
from coevo.arena.codeworld import CodeEpisode, CodeObservation, CodeWorlds, replay
from coevo.arena.errors import CommandError
from coevo.arena.oversize import arguments_problem, cut_arguments
from coevo.run.interfaces.mcp_server import EpisodeRecorder, TaskServer, _text

__all__ = ["CodeSessionEpisode", "CodeTaskServer"]

_OVER = "the episode is over; start a new session to play again"
_SUBMIT = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "description": "What you tell the user, if anything."}
    },
    "additionalProperties": False,
}


@dataclass
class CodeSessionEpisode:
    """One MCP session's episode of a code task, its state in a sandboxed worker."""

    server: CodeTaskServer
    solver: str
    episode_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    calls: list[dict[str, Any]] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    outcome: dict[str, Any] | None = None
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    live: CodeEpisode = field(init=False)

    def __post_init__(self) -> None:
        self.live = self.server.worlds.episode(self.server.task.world)

    def play(self, name: str, arguments: Mapping[str, Any] | None) -> Any:
        """One call; ``submit``, or the last step of the budget, ends the episode with its reward."""
        if self.outcome is not None:
            return _text(
                f"error: {_OVER} (reward {self.outcome['reward']}: {self.outcome['reason']})",
                error=True,
                structured=self.outcome,
            )
        args = dict(arguments or {})
        too_big = arguments_problem(name, args)  # refused: recorded cut, with its size
        if name == "submit" and too_big is None:
            answer = args.get("answer")
            if answer is not None and not isinstance(answer, str):
                return _text("submit: answer must be a string", error=True)
            if answer:
                self.said.append(answer)
            outcome = self.finish(None)
            return _text(
                f"reward {outcome['reward']}: {outcome['reason']}\n({_OVER.split(';')[0]})",
                structured=outcome,
            )
        if name == "submit":  # a failed step, as a SQL task's world refuses it; the episode goes on
            obs = CodeObservation(len(self.calls) + 1, name, False, error=too_big)
        else:
            obs = self.live.step(name, args)
        self.calls.append(
            {
                "tool": name,
                "arguments": cut_arguments(args) if too_big else args,
                "ok": obs.ok,
                "result": obs.result,
                "error": obs.error,
            }
        )
        text = json.dumps(obs.result, ensure_ascii=False) if obs.ok else f"error: {obs.error}"
        if len(self.calls) >= self.server.max_steps:
            outcome = self.finish("the step budget ran out before submit")
            return _text(
                f"{text}\nreward 0: {outcome['reason']}", error=not obs.ok, structured=outcome
            )
        return _text(text, error=not obs.ok)

    def finish(self, unfinished: str | None = "the session ended without submit") -> dict[str, Any]:
        """Score and record the episode once; ``unfinished``: why it ended without submit (reward 0)."""
        if self.outcome is None:
            if unfinished is None:
                reward, reason = code_reward(
                    self.server.task,
                    self.server.gold,
                    self.live.state(),
                    self.said,
                    self.live.failed,
                )
            else:
                reward, reason = 0, unfinished
            self.outcome = {
                "done": True,
                "reward": reward,
                "reason": reason,
                "steps": len(self.calls),
                "episode_id": self.episode_id,
            }
            self.server.finished_code(self, self.outcome)
            self.live.close()
        return self.outcome

    async def aclose(self) -> None:
        """At the session's end: record an unfinished episode that made a call, and free its state."""
        async with self.lock:
            if self.outcome is None:
                if self.calls:
                    await anyio.to_thread.run_sync(self.finish)
                else:
                    await anyio.to_thread.run_sync(self.live.close)


class CodeTaskServer(TaskServer):
    """One code task served over MCP, each session an episode in a sandboxed worker.

    Args:
        task: the code task.
        worlds: the pool the episodes live in (its runtimes must include the world's).
        record: a folder to append every episode to, or None.
        max_steps: tool calls an episode may make before it ends with 0 (default 40).

    Raises:
        CommandError: the reference solution cannot be played (so there is nothing to score against).
    """

    def __init__(
        self,
        task: CodeTaskSpec,
        worlds: CodeWorlds,
        *,
        record: str | Path | None = None,
        max_steps: int | None = None,
    ):
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.task = task
        self.worlds = worlds
        self.max_steps = max_steps or 40
        calls = [(c.tool, c.arguments) for c in task.solution if c.tool != RESPOND]
        gold, _, failed = replay(worlds, task.world, calls)
        if gold is None:
            raise CommandError(
                f"task {task.task_id}: its reference solution could not be played ({failed})"
            )
        self.gold = gold
        system = task.world.system.strip()
        self.instructions = f"{system}\n\n{task.instruction}" if system else task.instruction
        self.tools = [
            types.Tool(name=t.name, description=t.description, input_schema=t.parameters)
            for t in task.world.tools
            if t.side == "agent"
        ] + [
            types.Tool(
                name="submit",
                description="End the episode (and say your last words to the user).",
                input_schema=_SUBMIT,
            )
        ]
        self.validators: dict[str, Any] = {}  # CodeEpisode checks arguments itself
        self.recorder = EpisodeRecorder(record) if record is not None else None
        self.sessions = 0
        self.finished_episodes: list[Any] = []  # SQL episodes: none here
        self.finished_outcomes: list[dict[str, Any]] = []
        """Outcomes of episodes that ended in this process, most recent last (the last 100)."""
        self.server = self._mcp_server()

    def _new_episode(self, solver: str) -> CodeSessionEpisode:
        return CodeSessionEpisode(self, solver)

    def finished_code(self, episode: CodeSessionEpisode, outcome: dict[str, Any]) -> None:
        """Keep and record an episode that has ended."""
        self.finished_outcomes = [*self.finished_outcomes[-99:], outcome]
        if self.recorder is not None:
            line = {
                "episode_id": episode.episode_id,
                "task_id": self.task.task_id,
                "solver": episode.solver,
                "calls": episode.calls,
                "said": episode.said,
                "reward": outcome["reward"],
                "reason": outcome["reason"],
            }
            self.recorder.write_line(json.dumps(line, ensure_ascii=False, default=str))
