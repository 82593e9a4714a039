"""Anthropic's Messages API (the ``anthropic`` SDK), behind the same requests and turns as every provider.

The conversation arrives in the Chat Completions format
(:mod:`~coevo.agents.llm.turns`) and goes out as the Messages API takes it:

* the system message as a cached text block (prompt caching);
* an assistant's text and ``tool_calls`` as ``text`` and ``tool_use`` blocks;
* the ``tool`` messages answering one turn as one user message of
  ``tool_result`` blocks, with ``is_error`` when the content reports a
  failed call (it begins ``error: ``, as every failed observation does);
* a conversation the agent opens (a benchmark run's greeting) behind a
  user turn :data:`OPENING`, as the API begins with the user;
* function tools as ``{name, description, input_schema}``; a named
  ``tool_choice`` as ``{"type": "tool", "name": N}``, ``required`` as ``any``.

The answer's blocks come back as one assistant message, ``stop_reason`` as
the finish (``tool_use`` → ``tool_calls``, ``max_tokens`` → ``length``,
``end_turn`` → ``stop``), and the usage with its cache tokens. The SDK's
own retries are off: the client's retry policy sees every failure.
"""

from __future__ import annotations

import json
from typing import Any, Final

import anthropic
from coevo.agents.llm.turns import (
    ERROR_PREFIX,
    LLMCallError,
    Request,
    ToolCallRequest,
    Turn,
    Unreachable,
    retry_after,
    root_cause,
    status_failure,
)

__all__ = ["API", "DEFAULT_BASE_URL", "complete", "make_sdk", "to_messages"]

API: Final = "the Messages API"
DEFAULT_BASE_URL: Final = "https://api.anthropic.com"

_FINISH: Final = {"tool_use": "tool_calls", "max_tokens": "length", "end_turn": "stop"}


def make_sdk(
    base_url: str, key: str, timeout: float, http_client: Any = None, limit: int = 8
) -> Any:
    """An ``AsyncAnthropic`` for one server, with the SDK's retries off (the client retries).

    ``limit`` (the calls in flight) is the client's to keep: the SDK's own pool is large enough.
    """
    return anthropic.AsyncAnthropic(
        base_url=base_url, api_key=key, max_retries=0, timeout=timeout, http_client=http_client
    )


OPENING: Final = "(The conversation begins.)"
"""The user turn put before a conversation the agent opens (the Messages API begins with the user)."""


def to_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages (no system message) as Messages API messages."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m["role"]
        if role == "user":
            out.append({"role": "user", "content": m["content"]})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if isinstance(m.get("content"), str) and m["content"].strip():
                blocks.append({"type": "text", "text": m["content"]})  # the API refuses blank text
            for call in m.get("tool_calls") or []:
                function = call["function"]
                try:
                    given = json.loads(function["arguments"] or "{}")
                except json.JSONDecodeError:
                    given = {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": function["name"],
                        "input": given if isinstance(given, dict) else {},
                    }
                )
            # a turn that said nothing at all still needs a block, and a non-blank one
            out.append(
                {
                    "role": "assistant",
                    "content": blocks or [{"type": "text", "text": "(no answer)"}],
                }
            )
        elif role == "tool":
            content = str(m["content"])
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": content,
            }
            if content.startswith(ERROR_PREFIX):
                result["is_error"] = True
            previous = out[-1] if out else None
            if (
                previous is not None
                and previous["role"] == "user"
                and isinstance(previous["content"], list)
            ):
                previous["content"].append(result)
            else:
                out.append({"role": "user", "content": [result]})
    if (
        out and out[0]["role"] == "assistant"
    ):  # the API wants a user turn first (a greeting agent's)
        out.insert(0, {"role": "user", "content": OPENING})
    return out


def _tool_choice(choice: str | dict[str, Any] | None) -> dict[str, Any] | None:
    if choice is None:
        return None
    if isinstance(choice, dict):
        return {"type": "tool", "name": choice["function"]["name"]}
    return {"type": {"required": "any"}.get(choice, choice)}


def _body(request: Request) -> dict[str, Any]:
    system = [m for m in request.messages if m["role"] == "system"]
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": to_messages([m for m in request.messages if m["role"] != "system"]),
    }
    if system:
        body["system"] = [
            {"type": "text", "text": system[0]["content"], "cache_control": {"type": "ephemeral"}}
        ]
    if request.tools:
        body["tools"] = [
            {
                "name": t["function"]["name"],
                "description": t["function"].get("description", ""),
                "input_schema": t["function"]["parameters"],
            }
            for t in request.tools
        ]
    choice = _tool_choice(request.tool_choice)
    if choice is not None:
        body["tool_choice"] = choice
    sampling = request.sampling
    for name in ("temperature", "top_p", "top_k"):
        if (value := getattr(sampling, name)) is not None:
            body[name] = value
    if sampling.stop:
        body["stop_sequences"] = list(sampling.stop)
    return body


def _failure(exc: Exception) -> Exception:
    if isinstance(exc, anthropic.APIStatusError):
        return status_failure(
            API,
            exc.status_code,
            exc.message,
            retry_after=retry_after(exc.response.headers),
            too_long="prompt is too long" in exc.message,
        )
    if isinstance(exc, anthropic.APITimeoutError):
        return Unreachable("the request timed out", timeout=True)
    if isinstance(exc, anthropic.APIConnectionError):
        return Unreachable(root_cause(exc))
    return LLMCallError(f"{API} answered with a malformed response: {type(exc).__name__}: {exc}")


def _turn(message: Any) -> Turn:
    if not isinstance(message, anthropic.types.Message):
        body = " ".join(str(message).split())[:80]
        raise LLMCallError(f"{API} answered with a malformed response: not a message: {body!r}")
    texts = [b.text for b in message.content if b.type == "text"]
    calls = [
        ToolCallRequest(
            id=b.id,
            name=b.name,
            raw=json.dumps(b.input),
            arguments=b.input if isinstance(b.input, dict) else None,
            error=None if isinstance(b.input, dict) else "the arguments must be a JSON object",
        )
        for b in message.content
        if b.type == "tool_use"
    ]
    text = "\n".join(texts) if texts else None
    said: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        said["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw}}
            for c in calls
        ]
    used = message.usage
    return Turn(
        message=said,
        text=text,
        tool_calls=calls,
        finish=_FINISH.get(message.stop_reason or "", message.stop_reason or "stop"),
        model=str(message.model or ""),
        input_tokens=int(used.input_tokens),
        output_tokens=int(used.output_tokens),
        cache_write_tokens=int(getattr(used, "cache_creation_input_tokens", 0) or 0),
        cache_read_tokens=int(getattr(used, "cache_read_input_tokens", 0) or 0),
    )


async def complete(sdk: Any, request: Request) -> Turn:
    """One Messages API call (see :func:`coevo.agents.llm.openai_api.complete` for what it raises)."""
    try:
        message = await sdk.messages.create(**_body(request))
    except (anthropic.APIError, ValueError) as exc:
        # `from None`: the SDK's errors carry the request, whose headers hold the key
        raise _failure(exc) from None
    try:
        return _turn(message)
    except LLMCallError:
        raise
    except (
        Exception
    ) as exc:  # any shape the reader did not expect is the server's fault, not a crash
        raise LLMCallError(
            f"{API} answered with a malformed response: {type(exc).__name__}: {exc}"
        ) from None
