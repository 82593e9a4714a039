"""One agent conversation with a model, played token in, token out where the server allows.

A :class:`Dialogue` holds an episode's conversation (Chat Completions
messages, as every trajectory records them) and samples the model's next turn.
With the client's ``token_prompts`` off it sends the messages (the chat path).
On, it keeps the episode as the tokens the model saw and sampled, as
vLLM/verl/SkyRL agent loops do:

1. the first prompt is the conversation rendered by the served model's chat
   template (the server's ``/tokenize``), with the tools described natively or
   in the text protocol;
2. each turn is sampled from ``/v1/completions`` with that prompt as token
   ids: the completion comes back as the ids sampled and their log-probs;
3. the next prompt is the previous prompt, the completion's ids as sampled,
   and the tokens of what came since (the tool results, a reminder), rendered
   by the template: the tokens the template puts after an assistant turn's
   text, found as the common suffix of that conversation rendered after two
   one-token assistant turns (``x`` and ``y``), so they never depend on how
   the sampled text would tokenize again. When the completion ended with the
   template's end-of-turn token, that token is not added twice; a completion
   cut at ``max_tokens`` is closed by it (a token the model did not sample:
   its loss-mask entry is 0).

So every prompt begins with the previous prompt and completion, token for
token: the trajectory is laid out ``interleaved`` exactly as sampled, never
re-rendered. The model's calls are read from the text it sampled, in the
Hermes format (:mod:`~coevo.agents.llm.text_tools`): the text protocol's, or
a native template's that writes them so (Qwen, Hermes); the client's
:meth:`~coevo.agents.llm.client.LLMClient.connect` turns token prompts on only
where that holds.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any, Final

from coevo.agents.llm import openai_api
from coevo.agents.llm.client import LLMClient
from coevo.agents.llm.text_tools import CALL_OPEN, opened_with, text_messages, with_text_calls
from coevo.agents.llm.turns import LLMCallError, TokenRequest, Turn

__all__ = ["Dialogue", "closing_tokens"]

_PROBES: Final = ("x", "y")
"""Two one-token assistant texts: what follows them in both renderings follows any assistant turn."""


def closing_tokens(first: Sequence[int], second: Sequence[int]) -> list[int]:
    """The common suffix of two renderings that differ only in one assistant turn's text."""
    n = 0
    limit = min(len(first), len(second))
    while n < limit and first[-1 - n] == second[-1 - n]:
        n += 1
    if n == limit:
        raise LLMCallError(
            "the chat template rendered two different assistant turns alike: token in, token out "
            "cannot find what follows a turn (set token_prompts = false)"
        )
    return list(first[len(first) - n :])


class Dialogue:
    """An agent conversation (see the module docstring).

    Args:
        client: the client (its ``token_prompts`` chooses the path).
        role: who spends the calls (``solver``).
        task: what they are spent on (the task id).
        messages: the conversation so far (system first); the dialogue appends to this list.
        tools: the tools offered (OpenAI function tools).
        seed: the calls' sampling seed (None: the server's choice).
        tool_choice: ``auto``, or ``required``: every turn must call a tool (natively, the
            API's ``tool_choice``; in the text protocol, every turn opens with the call's tag,
            a token the model does not sample).

    Attributes:
        messages: the conversation, in the Chat Completions format.
        turns: the model's turns, in order.
    """

    def __init__(
        self,
        client: LLMClient,
        *,
        role: str,
        task: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        seed: int | None,
        tool_choice: str = "auto",
    ):
        self.client = client
        self.tool_choice = tool_choice
        self.role = role
        self.task = task
        self.messages = messages
        self.tools = tools
        self.seed = seed
        self.turns: list[Turn] = []
        self._ids: list[int] | None = None  # the episode's tokens so far (token prompts)
        self._covered = 0  # how many messages those tokens hold

    async def turn(self) -> Turn:
        """Sample the model's next turn and append its message to the conversation.

        Raises:
            ContextLengthError: the conversation no longer fits the model.
            LLMCallError: the call failed after the retries, or the answer is unusable.
        """
        if self.client.token_prompts:
            turn = await self._token_turn()
        else:
            turn = await self.client.create(
                role=self.role,
                task=self.task,
                messages=self.messages,
                tools=self.tools,
                tool_choice=None if self.tool_choice == "auto" else self.tool_choice,
                seed=self.seed,
            )
        self.turns.append(turn)
        self.messages.append(turn.message)
        self._covered = len(self.messages)
        return turn

    # ---- token in, token out --------------------------------------------------------------

    def _rendered(
        self, messages: list[dict[str, Any]], tools: bool
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """The messages as the template is given them, and the tools it is to describe."""
        if self.client.protocol == "text":
            return text_messages(messages, self.tools if tools else None), None
        return messages, (self.tools if tools and self.tools else None)

    async def _render(self, messages: list[dict[str, Any]], tools: bool) -> list[int]:
        client = self.client
        assert client.model is not None
        sent, described = self._rendered(messages, tools)
        kwargs = client.extra_body.get("chat_template_kwargs")

        def send(connection: Any) -> Any:
            return openai_api.tokenize_chat(
                connection, client.model or "", sent, tools=described, template_kwargs=kwargs
            )

        rendered: list[int] = await client.call(
            send, role=self.role, task=self.task, model_call=False
        )
        return rendered

    async def _text_ids(self, text: str) -> list[int]:
        """``text``'s tokens, as the server's tokenizer reads it (asked once per client)."""
        client = self.client
        if text not in client.text_ids:

            def send(connection: Any) -> Any:
                return openai_api.tokenize_text(connection, client.model or "", text)

            client.text_ids[text] = await client.call(
                send, role=self.role, task=self.task, model_call=False
            )
        return client.text_ids[text]

    async def _between(self, since: list[dict[str, Any]]) -> list[int]:
        """The tokens after the last turn's text: its close, the messages since, the next turn's header."""
        last = self.turns[-1]
        renders = await asyncio.gather(
            *(
                self._render(
                    [
                        {"role": "user", "content": "."},
                        {"role": "assistant", "content": probe},
                        *since,
                    ],
                    tools=False,
                )
                for probe in _PROBES
            )
        )
        between = closing_tokens(*renders)
        sampled = last.completion_ids or []
        if last.finish != "length" and sampled and sampled[-1] == between[0]:
            between = between[1:]  # the model sampled the end of its turn itself
        return between

    async def _token_turn(self) -> Turn:
        client = self.client
        assert client.model is not None
        if self._ids is None:
            prompt = await self._render(self.messages, tools=True)
        else:
            prompt = self._ids + await self._between(self.messages[self._covered :])
        opening = self.client.protocol == "text" and self.tool_choice == "required"
        if opening:
            prompt = prompt + await self._text_ids(CALL_OPEN)
        text = self.client.protocol == "text"
        request = TokenRequest(
            model=client.model,
            prompt_ids=prompt,
            max_tokens=client.max_tokens,
            sampling=client.request_sampling(text_calls=text, seed=self.seed),
            extra_body=client.extra_body,
            keep_stop=text,
        )

        def send(connection: Any) -> Any:
            return openai_api.complete_tokens(connection, request)

        turn: Turn = await client.call(send, role=self.role, task=self.task)
        self._ids = prompt + (turn.completion_ids or [])
        if opening:
            turn = opened_with(turn, CALL_OPEN)
        turn = with_text_calls(turn, f"call_{len(self.turns)}_")
        if turn.tool_calls and turn.finish == "stop":
            turn = dataclasses.replace(turn, finish="tool_calls")
        return turn
