"""``llm-solver`` (and ``claude``): a model as the Solver, a multi-turn tool-use agent over a world's tools.

Each task is a conversation: the system text and the instruction, the
world's tools (and ``submit``) as function tools. Every tool call the model
asks for is made in the world, in order, and answered with a ``tool``
message (the rows, the row count, or ``error: ...`` when the call failed);
several calls in one turn (parallel tool calls) are made one after the
other. The episode ends at ``submit``, at the step budget, or when the
model stops calling tools. What real servers do is a recorded step, never a
role failure:

* arguments that are not a JSON object are a failed step the model sees as
  a tool error (the episode's call keeps the text as ``{"$raw": ...}``);
  arguments that miss a required parameter are refused by the world, also
  as a tool error;
* a turn with no tool call (text where a tool call was wanted, or an answer
  cut off at the output budget) is answered with a reminder to call a tool,
  at most ``nudges`` times; each such turn counts against ``max_steps``;
* a conversation that outgrows the model's context ends the episode,
  unsubmitted (reward 0).

A call that fails after the client's retries ends its episode as a recorded
failure (reward 0, the reason in it); the other episodes of the batch go on.

Every episode carries its :class:`~coevo.arena.trajectory.Trajectory`: the
whole conversation, the sampling parameters, the policy version and, when
the server returned them, each turn's token ids and log-probs. ``learn``
changes nothing: the weights are the server's (a trainer updates them; the
next issue's hand-off).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from coevo.agents.llm.client import LLMClient
from coevo.agents.llm.dialogue import Dialogue
from coevo.agents.llm.policy import POLICY_STATE, policy_state, read_policy_state
from coevo.agents.llm.role import LLMRole
from coevo.agents.llm.turns import ERROR_PREFIX, ContextLengthError, LLMCallError, Turn
from coevo.agents.protocols import LearnStats
from coevo.arena.errors import SpecError
from coevo.arena.outcomes import Episode, Observation, failed_episode
from coevo.arena.rendering import SYSTEM, openai_tools, tool_definitions
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import TaskSpec, ToolCall, WorldSpec
from coevo.arena.trajectory import Trajectory
from coevo.arena.world import World, WorldPool

__all__ = [
    "POLICY_STATE",
    "LLMSolver",
    "WorldPool",
    "conversation",
    "episode_sampling",
    "play",
    "policy_state",
    "read_policy_state",
]


def _nudge(turn: Turn, max_tokens: int) -> str:
    if turn.finish == "length":
        return (
            f"{ERROR_PREFIX}your answer was cut off at the output limit ({max_tokens} tokens) "
            "before it called a tool; answer with one tool call"
        )
    return (
        f"{ERROR_PREFIX}answer with a tool call: use the tools to carry out the request, "
        "and call submit when it is done"
    )


def episode_sampling(client: LLMClient, seed: int, index: int) -> tuple[int | None, dict[str, Any]]:
    """``(the seed the episode's calls carry, the sampling parameters it records)``.

    With ``sampling.seed`` set, every episode's calls carry a seed of their
    own, from ``seed``, ``index`` and it (the rollouts of a task differ; a
    rerun sends the same); unset, the server samples as it likes (seeded
    requests can take a slower path in vLLM). The recorded parameters are
    those the calls send (:meth:`~coevo.agents.llm.client.LLMClient.recorded_sampling`:
    to vLLM every parameter, pinned), with that seed (Anthropic takes none).
    """
    chosen = client.sampling.seed
    sampled = None if chosen is None else derive_seed(seed, index, "llm", chosen) % 2**31
    sent = client.recorded_sampling(text_calls=client.protocol == "text", seed=sampled)
    if client.provider != "openai":
        sent.pop("seed", None)
    return sampled, sent


def conversation(
    client: LLMClient,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    sent: dict[str, Any],
    version: str,
    turns: Sequence[Turn],
    bad: int,
) -> Trajectory:
    """An episode's conversation so far as its :class:`~coevo.arena.trajectory.Trajectory`."""
    answered = [t.model for t in turns if t.model]
    return Trajectory(
        messages=messages,
        tools=tools,
        sampling=sent,
        policy_version=version,
        provider=client.provider,
        model=answered[-1] if answered else client.model or "",
        turns=[t.tokens() for t in turns],
        bad_steps=bad,
    )


async def play(
    client: LLMClient,
    task: TaskSpec,
    *,
    seed: int,
    version: str,
    max_steps: int,
    nudges: int = 2,
    role: str = "solver",
    worlds: WorldPool | None = None,
    index: int = 0,
    tool_choice: str = "auto",
) -> Episode:
    """One episode of ``task`` played by the model behind ``client`` (see the module docstring).

    ``worlds`` lends a built world and takes it back (default: one built for this
    episode). With ``sampling.seed`` set, the episode's calls carry a seed
    derived from it, ``seed`` and the episode's ``index`` in its batch: the
    rollouts of one task differ, and a rerun sends the same seeds.
    """
    if not isinstance(task.world, WorldSpec):
        return failed_episode(task, seed, "the task's world is not inline", version)
    pool = worlds or WorldPool(keep=0)
    try:
        world = pool.take(task.world)
    except SpecError as exc:
        return failed_episode(task, seed, f"the world could not be built: {exc.summary()}", version)
    except Exception as exc:  # a fault of coevo's own: this episode fails, the batch goes on
        return failed_episode(task, seed, f"{type(exc).__name__}: {exc}", version)
    try:
        return await _play(
            client, task, world, seed, version, max_steps, nudges, role, index, tool_choice
        )
    finally:
        pool.give_back(world)


async def _play(
    client: LLMClient,
    task: TaskSpec,
    world: World,
    seed: int,
    version: str,
    max_steps: int,
    nudges: int,
    role: str,
    index: int,
    tool_choice: str = "auto",
) -> Episode:
    assert isinstance(task.world, WorldSpec)
    sampled, sent = episode_sampling(client, seed, index)
    tools = openai_tools(tool_definitions(task.world))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task.instruction},
    ]
    made: list[ToolCall] = []
    seen: list[Observation] = []
    dialogue = Dialogue(
        client,
        role=role,
        task=task.task_id,
        messages=messages,
        tools=tools,
        seed=sampled,
        tool_choice=tool_choice,
    )
    turns = dialogue.turns
    bad = reminded = 0
    unfinished = "the model stopped calling tools without submit"

    def trajectory() -> Trajectory:
        return conversation(client, messages, tools, sent, version, turns, bad)

    def failed(why: str) -> Episode:
        """The episode as a recorded failure, with the conversation so far."""
        episode = failed_episode(task, seed, why, version)
        return episode.model_copy(update={"trajectory": trajectory()})

    try:
        world.reset(task, max_steps=max_steps)
        while not world.done and len(made) + reminded < max_steps:
            turn = await dialogue.turn()
            if not turn.tool_calls:
                bad += 1
                if reminded == nudges:
                    break
                reminded += 1
                messages.append({"role": "user", "content": _nudge(turn, client.max_tokens)})
                continue
            bad += int(turn.finish == "length" or any(c.arguments is None for c in turn.tool_calls))
            for request in turn.tool_calls:
                if world.done:
                    break  # after submit, or the step budget: the rest are not made
                if request.arguments is None:
                    call = ToolCall(request.name, {"$raw": request.raw})
                    obs = world.refuse(
                        call,
                        f"{request.error}; call {request.name} again with a JSON object of its parameters",
                    )
                else:
                    call = ToolCall(request.name, request.arguments)
                    obs = world.step(call)
                made.append(call)
                seen.append(obs)
                messages.append({"role": "tool", "tool_call_id": request.id, "content": obs.text()})
        if not world.done and len(made) + reminded >= max_steps:
            unfinished = f"the step budget of {max_steps} ran out before submit"
    except ContextLengthError as exc:
        unfinished = f"the conversation outgrew the model's context: {exc}"
    except LLMCallError as exc:
        return failed(str(exc))
    except Exception as exc:  # a fault of coevo's own: this episode fails, the batch goes on
        return failed(client.redact(f"{type(exc).__name__}: {exc}"))
    try:
        episode = world.episode(made, seen, solver=version, seed=seed, unfinished=unfinished)
    except Exception as exc:  # likewise
        return failed(client.redact(f"{type(exc).__name__}: {exc}"))
    return episode.model_copy(update={"trajectory": trajectory()})


class LLMSolver(LLMRole):
    """A model as the Solver (see the module docstring).

    Args:
        model: the model (or adapter) name (see :class:`~coevo.agents.llm.role.LLMRole`
            for the settings every LLM role takes).
        max_steps: tool calls per episode, ``submit`` included (a turn with no tool call counts).
        nudges: reminders to call a tool after a turn with none, per episode.
        tool_choice: ``auto`` (the model may answer in text, and is reminded), or ``required``:
            every turn calls a tool (the API's ``tool_choice``; in the text protocol each turn
            opens with the ``<tool_call>`` tag, which small models need to call tools at all).
        **client: the settings every LLM role takes.
    """

    kind = "solver"
    name: ClassVar[str] = "llm-solver"

    def __init__(
        self,
        model: str | None = None,
        *,
        max_steps: int = 16,
        nudges: int = 2,
        tool_choice: Literal["auto", "required"] = "auto",
        **client: Any,
    ):
        super().__init__(model, **client)
        self.max_steps = max_steps
        self.nudges = nudges
        self.tool_choice = tool_choice
        self.worlds = WorldPool()

    def policy_version(self) -> str:
        """How its episodes are signed: ``policy_version`` if set, else the model's name."""
        return self.version

    def get_state(self) -> bytes:
        """The policy it plays: the model's name and how its episodes are signed (:func:`policy_state`)."""
        return policy_state(self.client.model or "", self.version)

    def set_state(self, state: bytes) -> None:
        """Play the policy ``state`` names from the next episode on (a trainer's new version).

        Raises:
            StateError: not an LLM Solver's state.
        """
        model, version = read_policy_state(state)
        if model:
            self.client.model = model
        self.version = version

    def attempt(self, tasks: Sequence[TaskSpec], seed: int) -> list[Episode]:
        """One episode per task, in order (the batch's conversations run concurrently)."""
        return self.client.run(self._batch(list(tasks), seed))

    async def _batch(self, tasks: list[TaskSpec], seed: int) -> list[Episode]:
        return list(
            await asyncio.gather(
                *(
                    play(
                        self.client,
                        t,
                        seed=seed,
                        version=self.version,
                        max_steps=self.max_steps,
                        nudges=self.nudges,
                        tool_choice=self.tool_choice,
                        worlds=self.worlds,
                        index=i,
                    )
                    for i, t in enumerate(tasks)
                )
            )
        )

    def learn(self, episodes: Sequence[Episode]) -> LearnStats:
        """Nothing to learn here (the weights are the server's); the tokens spent so far in ``extra``."""
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
