"""``claude``: a Solver that is Claude itself, a multi-turn tool-use agent over a world's tools.

Each task is a conversation: the system text and the instruction, the
world's tools (and ``submit``) as Anthropic tool definitions. Claude's
``tool_use`` blocks are made in the world; each result goes back as a
``tool_result`` (``is_error`` when the call failed, with the error the
world wrote for the agent). The episode ends at ``submit``, at the step
budget, or when Claude stops calling tools (reward 0: it never submitted).

A call that fails after the SDK's retries ends that episode as a recorded
failure (reward 0, the reason in it); the other episodes of the batch go on.
``learn`` records nothing and changes nothing: the weights are Anthropic's.
Episodes are as deterministic as the model behind the API.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from coevo.agents.claude.client import ClaudeCallError, ClaudeClient
from coevo.agents.protocols import LearnStats
from coevo.arena.errors import SpecError
from coevo.arena.gamelog.rows import UsageRow
from coevo.arena.outcomes import Episode, failed_episode
from coevo.arena.rendering import SYSTEM, tool_definitions
from coevo.arena.spec import SUBMIT, TaskSpec, ToolCall, WorldSpec
from coevo.arena.world import World

__all__ = ["ClaudeSolver"]


class ClaudeSolver:
    """Claude as a Solver (see the module docstring).

    Args:
        model: the model name.
        max_steps: tool calls per episode, ``submit`` included.
        max_tokens: the output budget per turn.
        concurrency: episodes' calls in flight at most.
        timeout: seconds per request.
        max_retries: the SDK's retries.
        http_client: an ``httpx2.AsyncClient`` (tests pass a mock transport).
    """

    kind = "solver"
    name = "claude"

    def __init__(
        self,
        model: str = "claude-sonnet-5",
        *,
        max_steps: int = 16,
        max_tokens: int = 1024,
        concurrency: int = 8,
        timeout: float = 60.0,
        max_retries: int = 4,
        http_client: Any = None,
    ):
        self.client = ClaudeClient(
            model=model,
            max_tokens=max_tokens,
            concurrency=concurrency,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
        )
        self.max_steps = max_steps

    def policy_version(self) -> str:
        """How its episodes are signed: ``claude`` (the weights behind the API are not versioned here)."""
        return self.name

    def attempt(self, tasks: Sequence[TaskSpec], seed: int) -> list[Episode]:
        """One episode per task, in order (the batch's conversations run concurrently)."""
        return asyncio.run(self._batch(list(tasks), seed))

    async def _batch(self, tasks: list[TaskSpec], seed: int) -> list[Episode]:
        return list(await asyncio.gather(*(self._episode(t, seed) for t in tasks)))

    async def _episode(self, task: TaskSpec, seed: int) -> Episode:
        if not isinstance(task.world, WorldSpec):
            return failed_episode(task, seed, "the task's world is not inline", self.name)
        try:
            world = World(task.world)
        except SpecError as exc:
            return failed_episode(
                task, seed, f"the world could not be built: {exc.summary()}", self.name
            )
        with world:
            tools = tool_definitions(task.world)
            messages: list[dict[str, Any]] = [{"role": "user", "content": task.instruction}]
            calls: list[ToolCall] = []
            world.reset(task, max_steps=self.max_steps)
            try:
                while len(calls) < self.max_steps:
                    message = await self.client.create(
                        role="solver",
                        task=task.task_id,
                        system=SYSTEM,
                        messages=messages,
                        tools=tools,
                    )
                    content = [block.model_dump(exclude_none=True) for block in message.content]
                    messages.append({"role": "assistant", "content": content})
                    uses = [b for b in message.content if b.type == "tool_use"]
                    if not uses:
                        break  # stopped without submitting: reward 0
                    results = []
                    for use in uses:
                        call = ToolCall(use.name, dict(use.input or {}))
                        calls.append(call)
                        obs = world.step(call)
                        text = obs.text() if obs.ok else (obs.error or "the call failed")
                        result: dict[str, Any] = {
                            "type": "tool_result",
                            "tool_use_id": use.id,
                            "content": text,
                        }
                        if not obs.ok:
                            result["is_error"] = True
                        results.append(result)
                        if call.tool == SUBMIT or obs.done:
                            break
                    if calls[-1].tool == SUBMIT or world.done:
                        break
                    messages.append({"role": "user", "content": results})
            except ClaudeCallError as exc:
                return failed_episode(task, seed, str(exc), self.name)
            return world.run(task, calls, max_steps=self.max_steps, solver=self.name, seed=seed)

    def drain_usage(self) -> list[UsageRow]:
        """What this role spent on the API since the last call, per task; then forgotten."""
        return self.client.drain()

    def learn(self, episodes: Sequence[Episode]) -> LearnStats:
        """Nothing to learn here (the weights are Anthropic's); the tokens spent so far in ``extra``."""
        used = self.client.total("solver")
        return LearnStats(
            episodes=len(episodes),
            updates=0,
            extra={
                "input_tokens": used.input_tokens,
                "output_tokens": used.output_tokens,
                "dollars": used.dollars,
            },
        )
