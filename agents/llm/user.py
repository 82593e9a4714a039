"""``llm-user``: a model plays the user of a task with a user scenario (an imported τ²-bench task), on either backend.

The agent under test talks to a customer, not to a fixed instruction: the
customer knows things the agent must ask for, wants one thing and is
allowed to accept only what the scenario says. :class:`LLMUser` is that
customer. Its system text is :data:`GUIDELINES` and the task's scenario
(:func:`scenario_text`); the conversation is the agent's, seen from the
other side (the agent's messages are the user simulator's ``user`` turns,
its own earlier messages its ``assistant`` turns; tool calls and their
results are not shown to it). It ends the conversation by writing one of
:data:`STOP_TOKENS`.

The user simulator never sees the reference solution or the verifier, and
nothing it says is a reward: the reward is the world's final state and what
the agent said (:func:`coevo.arena.codetask.code_reward`). Its settings are
those of every LLM role (:mod:`coevo.agents.llm.role`): ``provider``
``openai`` (any Chat Completions server, vLLM) or ``anthropic``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from coevo.agents.llm.role import LLMRole

__all__ = ["GREETING", "GUIDELINES", "STOP_TOKENS", "LLMUser", "scenario_text"]

STOP_TOKENS: Final = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")
"""What the user simulator writes to end the conversation (as τ²-bench's user does)."""

GREETING: Final = "Hi! How can I help you today?"
"""The agent's first message, fixed (the benchmark's agent opens the same way)."""

GUIDELINES: Final = """\
You are playing a customer who contacts a support agent. Stay in that role for the \
whole conversation; you are not an assistant.

How to play:
- Follow the scenario below. Say only what a real customer would: one step at a time, \
in your own words, without copying the scenario's text.
- Give a piece of information only when the agent asks for it or when it is needed. \
Never make up information the scenario does not give you; if asked for something you \
do not know, say that you do not know it.
- Accept only what the scenario allows. Do not help the agent with its job.
- When what you wanted is done, or cannot be done, end the conversation by writing \
###STOP### alone on your last message. If the agent hands you over to a human, write \
###TRANSFER###. If the scenario gives you nothing to say about what the agent asks, \
write ###OUT-OF-SCOPE###.

The scenario:
"""


def scenario_text(scenario: Mapping[str, Any] | str | None, instruction: str = "") -> str:
    """The scenario as text for the user simulator: τ²-bench's ``persona`` and ``instructions``, or any mapping as labelled lines."""
    if scenario is None:
        return instruction
    if isinstance(scenario, str):
        return scenario
    lines: list[str] = []

    def add(label: str, value: Any) -> None:
        if value is None or value == "" or value == [] or value == {}:
            return
        if isinstance(value, Mapping):
            for key, inner in value.items():
                add(str(key).replace("_", " ").capitalize(), inner)
            return
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"{label}: {text}")

    for key, value in scenario.items():
        if key == "instructions" and isinstance(value, Mapping):
            add("", value)
        else:
            add(str(key).replace("_", " ").capitalize(), value)
    return "\n".join(line.removeprefix(": ") for line in lines) or instruction


def stopped(text: str | None) -> str | None:
    """The stop token ``text`` carries, or None."""
    if not text:
        return None
    return next((t for t in STOP_TOKENS if t in text), None)


class LLMUser(LLMRole):
    """A model playing a task's user (see the module docstring).

    Args:
        model: the model (see :class:`~coevo.agents.llm.role.LLMRole` for the settings every
            LLM role takes; ``provider`` chooses the backend).
        **client: the settings every LLM role takes.
    """

    kind: ClassVar[str] = "user simulator"
    name: ClassVar[str] = "llm-user"
    default_max_tokens: ClassVar[int] = 512

    def __init__(self, model: str | None = None, **client: Any):
        super().__init__(model, **client)

    async def reply(
        self,
        scenario: Mapping[str, Any] | str | None,
        conversation: Sequence[tuple[str, str]],
        *,
        task: str,
        seed: int | None = None,
    ) -> str:
        """The user's next message, given the conversation as ``(speaker, text)`` pairs (``agent`` or ``user``).

        Raises:
            LLMCallError: the call failed after the client's retries.
            ContextLengthError: the conversation outgrew the model.
        """
        messages = [
            {"role": "user" if speaker == "agent" else "assistant", "content": text}
            for speaker, text in conversation
        ]
        turn = await self.client.create(
            role="user",
            task=task,
            system=GUIDELINES + scenario_text(scenario),
            messages=messages,
            seed=seed,
        )
        return (turn.text or "").strip()
