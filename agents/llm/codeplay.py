"""A model plays a code task (``coevo.codetask/1``, e.g. an imported τ²-bench task), talking to a user simulator.

The conversation is the benchmark's: the agent's system text is the
world's (the domain's policy); the agent opens with :data:`GREETING`; the
user simulator (:class:`~coevo.agents.llm.user.LLMUser`) answers from the
task's scenario; each agent turn either calls tools (made in the world's
sandboxed worker, in order, each answered with a ``tool`` message: the
result as JSON, or ``error: ...``) or speaks to the user, who answers. The
episode ends when the user writes a stop token, when the step budget runs
out (reward 0, as the benchmark scores a conversation cut short), or when
the episode fails (a call the client gave up on, a worker that died, a user
simulator that answered with nothing).

A task with no user scenario (a code task written by hand) needs no
simulator: its instruction is the user's only message, and the agent's
first answer without a tool call ends the episode.

The reward is :func:`~coevo.arena.codetask.code_reward`: the world's final
state against the state the reference solution reaches (``gold``, computed
once per task by the caller), key by key, and every ``communicate`` string
in what the agent said. Every episode carries the agent's side of the
conversation as its :class:`~coevo.arena.trajectory.Trajectory` (the
messages a trainer needs, token ids when the server returned them).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from coevo.agents.llm.client import LLMClient
from coevo.agents.llm.dialogue import Dialogue
from coevo.agents.llm.solver import conversation as as_trajectory
from coevo.agents.llm.solver import episode_sampling
from coevo.agents.llm.turns import ContextLengthError, LLMCallError
from coevo.agents.llm.user import GREETING, LLMUser, stopped
from coevo.arena.codetask import CodeTaskSpec, code_reward
from coevo.arena.codeworld import CodeWorlds
from coevo.arena.outcomes import FAILED_PREFIX, Episode, Observation, Reward
from coevo.arena.spec import ToolCall
from coevo.arena.trajectory import Trajectory

__all__ = ["code_tools", "play_code"]


def code_tools(task: CodeTaskSpec) -> list[dict[str, Any]]:
    """The agent's tools of ``task``'s world as OpenAI function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            },
        }
        for t in task.world.tools
        if t.side == "agent"
    ]


_SILENT = (
    "the user simulator answered with nothing (an empty message: its model's output could not "
    "be read as text); the episode is left out of pass^k"
)


def _result_text(result: Any) -> str:
    return json.dumps(result, ensure_ascii=False, default=str)


async def play_code(
    client: LLMClient,
    task: CodeTaskSpec,
    worlds: CodeWorlds,
    gold: Mapping[str, Any] | None,
    *,
    user: LLMUser | None,
    seed: int,
    version: str,
    max_steps: int,
    index: int = 0,
    episode_id: str | None = None,
) -> Episode:
    """One episode of ``task`` by the model behind ``client`` (see the module docstring).

    Args:
        client: the agent's client.
        task: the code task.
        worlds: the sandboxed pool its world runs in.
        gold: the state the reference solution reaches (None: it could not be played; the
            episode is recorded as failed).
        user: the user simulator (needed when the task has a user scenario).
        seed: the episode's seed (the calls' sampling seeds derive from it and ``index``).
        version: how the episode is signed.
        max_steps: tool calls and messages to the user, together, before the episode ends with 0.
        index: the episode's place in its batch.
        episode_id: its id in the game log.
    """
    world_id = task.world.world_id
    sampled, sent = episode_sampling(client, seed, index)
    tools = code_tools(task)
    simulated = task.user_scenario is not None
    messages: list[dict[str, Any]] = [{"role": "system", "content": task.world.system}]
    if simulated:
        messages.append({"role": "assistant", "content": GREETING})
    conversation: list[tuple[str, str]] = [("agent", GREETING)] if simulated else []
    dialogue = Dialogue(
        client, role="solver", task=task.task_id, messages=messages, tools=tools, seed=sampled
    )
    turns = dialogue.turns
    made: list[ToolCall] = []
    seen: list[Observation] = []
    said: list[str] = []
    bad = 0

    def trajectory() -> Trajectory:
        return as_trajectory(client, messages, tools, sent, version, turns, bad)

    def ended(value: int, reason: str, *, finished: bool) -> Episode:
        return Episode(
            task_id=task.task_id,
            world_id=world_id,
            calls=made,
            observations=seen,
            reward=Reward(
                value=1 if value == 1 else 0,
                submitted=finished,
                answer=said[-1] if said else None,
                reason=reason,
            ),
            truncated=not finished and reason.startswith("the step budget"),
            episode_id=episode_id,
            solver=version,
            seed=seed,
            trajectory=trajectory(),
        )

    if gold is None:
        return ended(
            0, FAILED_PREFIX + "the reference solution could not be played", finished=False
        )
    if simulated and user is None:
        return ended(
            0,
            FAILED_PREFIX + "the task has a user scenario and the run has no user simulator "
            "(set [benchmark.user])",
            finished=False,
        )
    live = await asyncio.to_thread(worlds.episode, task.world)
    try:
        steps = 0
        stop: str | None = None
        if simulated:
            assert user is not None
            opening = await user.reply(
                task.user_scenario, conversation, task=task.task_id, seed=sampled
            )
            if not opening:
                return ended(0, FAILED_PREFIX + _SILENT, finished=False)
            conversation.append(("user", opening))
            messages.append({"role": "user", "content": opening})
            stop = stopped(opening)
        else:
            messages.append({"role": "user", "content": task.instruction})
        while stop is None and live.failed is None:
            if steps >= max_steps:
                return ended(0, f"the step budget of {max_steps} ran out", finished=False)
            turn = await dialogue.turn()
            if turn.tool_calls:
                bad += int(any(c.arguments is None for c in turn.tool_calls))
                for request in turn.tool_calls:
                    steps += 1
                    if request.arguments is None:
                        call = ToolCall(request.name, {"$raw": request.raw})
                        text = (
                            f"error: {request.error}; call {request.name} again with a JSON object"
                        )
                        obs = Observation(
                            step=len(made) + 1, tool=request.name, ok=False, error=text
                        )
                    else:
                        call = ToolCall(request.name, request.arguments)
                        got = await asyncio.to_thread(live.step, request.name, request.arguments)
                        text = _result_text(got.result) if got.ok else f"error: {got.error}"
                        obs = Observation(
                            step=len(made) + 1, tool=request.name, ok=got.ok, error=got.error
                        )
                    made.append(call)
                    seen.append(obs)
                    messages.append({"role": "tool", "tool_call_id": request.id, "content": text})
                continue
            steps += 1
            words = (turn.text or "").strip()
            said.append(words)
            if not simulated:
                break
            assert user is not None
            conversation.append(("agent", words))
            answer = await user.reply(
                task.user_scenario, conversation, task=task.task_id, seed=sampled
            )
            if not answer:
                return ended(0, FAILED_PREFIX + _SILENT, finished=False)
            conversation.append(("user", answer))
            messages.append({"role": "user", "content": answer})
            stop = stopped(answer)
        if live.failed is not None:
            return ended(0, FAILED_PREFIX + live.failed, finished=False)
        final = await asyncio.to_thread(live.state)
        value, reason = code_reward(task, gold, final, said, live.failed)
        if stop is not None and stop != "###STOP###":
            reason = f"{reason} (the user ended with {stop})"
        return ended(value, reason, finished=True)
    except ContextLengthError as exc:
        return ended(0, f"the conversation outgrew the model's context: {exc}", finished=False)
    except LLMCallError as exc:
        return ended(0, FAILED_PREFIX + str(exc), finished=False)
    except Exception as exc:  # a fault of coevo's own: this episode fails, the batch goes on
        return ended(
            0, FAILED_PREFIX + client.redact(f"{type(exc).__name__}: {exc}"), finished=False
        )
    finally:
        await asyncio.to_thread(live.close)
