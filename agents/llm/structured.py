"""Structured output: a call whose answer must be a pydantic model, through a forced tool.

:meth:`~coevo.agents.llm.client.LLMClient.structured` is this module's
:func:`structured`: the model's JSON Schema is the parameters of a tool the
call must make; a JSON object written as text is taken too (servers that
cannot force a tool, the text protocol); an answer that is cut off, names
another tool or does not validate is sent back with the exact problem
(``repairs`` times) before the call fails.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from coevo.agents.llm.turns import ERROR_PREFIX, LLMCallError, Turn
from pydantic import BaseModel, ValidationError

if TYPE_CHECKING:
    from coevo.agents.llm.client import LLMClient

__all__ = ["structured"]

Model = TypeVar("Model", bound=BaseModel)


async def structured(
    client: LLMClient,
    model: type[Model],
    *,
    role: str,
    task: str,
    system: str,
    messages: Sequence[dict[str, Any]],
    name: str | None = None,
    repairs: int = 1,
    record: Callable[[list[dict[str, Any]], list[dict[str, Any]], Turn], None] | None = None,
) -> Model:
    """A call whose answer must be ``model``: a forced tool with the model's JSON Schema.

    ``record(new_messages, tools, turn)``, when given, is called after every
    turn (each repair too) with the messages the conversation gained before
    it (the system message and ``messages`` for the first, the feedback for
    a repair), the tool offered and the turn: a caller keeps its rollout so.

    Raises:
        LLMCallError: the call failed, or after ``repairs`` answers sent back with
            their problem the answer was still cut off, named another tool, was
            text that is no JSON object, or did not validate; the message holds the
            exact problem, ready to be fed back for a retry.
    """
    tool = name or model.__name__.lower()
    tools = [
        {
            "type": "function",
            "function": {
                "name": tool,
                "description": model.__doc__ or tool,
                "parameters": model.model_json_schema(),
            },
        }
    ]
    conversation = list(messages)
    gained = [{"role": "system", "content": system}, *conversation]
    for attempt in range(repairs + 1):
        turn = await client.create(
            role=role,
            task=task,
            system=system,
            messages=conversation,
            tools=tools,
            tool_choice={"type": "function", "function": {"name": tool}},
        )
        if record is not None:
            record(gained, tools, turn)
        try:
            return _answer(client, model, tool, turn)
        except LLMCallError as exc:
            if attempt == repairs:
                raise
            gained = _feedback(turn, f"{exc}; call {tool} again")
            conversation += [turn.message, *gained]
    raise AssertionError("unreachable")  # the loop returns or raises


def _answer(client: LLMClient, model: type[Model], tool: str, turn: Turn) -> Model:
    calls = turn.tool_calls
    if turn.finish == "length" and not (calls and calls[0].arguments is not None):
        raise LLMCallError(
            f"the answer was cut off at max_tokens ({client.max_tokens}) before {tool} was complete"
        )
    if not calls:
        payload = _json_in(turn.text or "")
        if payload is None:
            raise LLMCallError(f"the answer called no tool; it must call {tool}")
    elif calls[0].name != tool:
        raise LLMCallError(f"the answer called {calls[0].name!r}; it must call {tool!r}")
    elif calls[0].arguments is None:
        raise LLMCallError(f"the {tool} input is not JSON: {calls[0].error}")
    else:
        payload = calls[0].arguments
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise LLMCallError(f"the {tool} input does not validate: {exc}") from exc


def _feedback(turn: Turn, problem: str) -> list[dict[str, Any]]:
    """Messages that answer ``turn`` with ``problem``: a tool error per call it made, or a user message."""
    if turn.tool_calls:
        return [
            {"role": "tool", "tool_call_id": c.id, "content": ERROR_PREFIX + problem}
            for c in turn.tool_calls
        ]
    return [{"role": "user", "content": problem}]


def _json_in(text: str) -> dict[str, Any] | None:
    """The JSON object a text answer holds (whole, or between its first ``{`` and last ``}``)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
