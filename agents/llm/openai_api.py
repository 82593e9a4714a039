"""The Chat Completions API (the ``openai`` SDK): OpenAI itself, vLLM, SGLang, Ollama, any compatible server.

A :class:`~coevo.agents.llm.turns.Request` goes out as the API takes it;
``top_k``, ``min_p`` and ``repetition_penalty`` and, when asked,
``return_token_ids`` go in the request body where vLLM and SGLang read them.
The answer comes back as a :class:`~coevo.agents.llm.turns.Turn`: the
assistant message as it goes back into the conversation, its tool calls
with their arguments parsed (or why they could not be), the finish reason,
the usage when the server reported it, and the token ids and log-probs in
vLLM's shape (``prompt_token_ids`` beside the choices, ``token_ids`` in a
choice, ``logprobs.content[i].logprob``; a token written ``token_id:N`` is
read as N). The SDK's own retries are off: the client's retry policy
(:mod:`~coevo.agents.llm.client`) sees every failure, as a
:class:`~coevo.agents.llm.turns.Transient` status, an
:class:`~coevo.agents.llm.turns.Unreachable` server, or an
:class:`~coevo.agents.llm.turns.LLMCallError` not worth retrying.
"""

from __future__ import annotations

import re
from typing import Any, Final

import openai
from coevo.agents.llm.turns import (
    ContextLengthError,
    LLMCallError,
    Request,
    ToolCallRequest,
    Transient,
    Turn,
    Unreachable,
    parse_arguments,
    root_cause,
)
from openai.types.chat import ChatCompletion

__all__ = ["API", "DEFAULT_BASE_URL", "complete", "list_models", "make_sdk", "models_now"]

API: Final = "the OpenAI-compatible server"
DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"

_EXTRA: Final = ("top_k", "min_p", "repetition_penalty")
_NATIVE: Final = ("temperature", "top_p", "seed", "stop", "presence_penalty", "frequency_penalty")
_CONTEXT: Final = re.compile(r"context length|maximum context|context window|too many tokens", re.I)
_TOKEN_ID: Final = re.compile(r"token_id:(\d+)")


def make_sdk(base_url: str, key: str, timeout: float, http_client: Any = None) -> Any:
    """An ``AsyncOpenAI`` for one server, with the SDK's retries off (the client retries)."""
    return openai.AsyncOpenAI(
        base_url=base_url, api_key=key, max_retries=0, timeout=timeout, http_client=http_client
    )


def _retry_after(headers: Any) -> float | None:
    """The server's ``retry-after-ms`` or ``retry-after`` (seconds), when it sent a number."""
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name) if headers is not None else None
        if value is None:
            continue
        try:
            return float(value) * scale
        except ValueError:
            continue  # an HTTP date: back off by our own schedule
    return None


def _status_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return exc.message


def _failure(exc: Exception) -> Exception:
    """The client's view of an SDK error."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = _status_message(exc)
        if status in (408, 409, 429) or status >= 500:
            return Transient(status, message, _retry_after(exc.response.headers))
        if status == 400 and _CONTEXT.search(message):
            return ContextLengthError(f"{API} answered 400: {message}")
        return LLMCallError(f"{API} answered {status}: {message}", status)
    if isinstance(exc, openai.APITimeoutError):
        return Unreachable("the request timed out", timeout=True)
    if isinstance(exc, openai.APIConnectionError):
        return Unreachable(root_cause(exc))
    return LLMCallError(f"{API} answered with a malformed response: {type(exc).__name__}: {exc}")


def _body(request: Request) -> dict[str, Any]:
    messages = [{k: v for k, v in m.items() if k != "reasoning_content"} for m in request.messages]
    body: dict[str, Any] = {
        "model": request.model,
        "messages": messages,
        "max_tokens": request.max_tokens,
    }
    if request.tools:
        body["tools"] = request.tools
    if request.tool_choice is not None:
        body["tool_choice"] = request.tool_choice
    sampling = request.sampling
    body.update({k: v for k in _NATIVE if (v := getattr(sampling, k)) is not None})
    extra = {k: v for k in _EXTRA if (v := getattr(sampling, k)) is not None}
    if request.token_ids:
        body["logprobs"] = True
        extra["return_token_ids"] = True
    if extra:
        body["extra_body"] = extra
    return body


def _ints(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return list(value)
    return None


def _turn(completion: Any) -> Turn:
    if not isinstance(completion, ChatCompletion):
        body = " ".join(str(completion).split())[:80]
        raise LLMCallError(f"{API} answered with a malformed response: not a completion: {body!r}")
    if not completion.choices:
        raise LLMCallError(f"{API} answered with a malformed response: no choices")
    choice = completion.choices[0]
    message = choice.message
    calls = []
    for n, call in enumerate(message.tool_calls or []):
        function = getattr(call, "function", None)
        if function is None:
            continue  # a custom (non-function) tool call: coevo offers none
        arguments, error = parse_arguments(function.arguments)
        calls.append(
            ToolCallRequest(
                id=call.id or f"call_{n}",
                name=function.name or "",
                raw=function.arguments or "",
                arguments=arguments,
                error=error,
            )
        )
    said: dict[str, Any] = {"role": "assistant", "content": message.content}
    if calls:
        said["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw}}
            for c in calls
        ]
    reasoning = (message.model_extra or {}).get("reasoning_content")
    if reasoning:
        said["reasoning_content"] = reasoning
    logprobs = None
    tokens: list[int] | None = None
    content = choice.logprobs.content if choice.logprobs is not None else None
    if content:
        logprobs = [float(t.logprob) for t in content]
        parsed = [_TOKEN_ID.fullmatch(t.token or "") for t in content]
        if all(parsed):
            tokens = [int(m.group(1)) for m in parsed if m is not None]
    completion_ids = _ints((choice.model_extra or {}).get("token_ids")) or tokens
    usage = completion.usage
    return Turn(
        message=said,
        text=message.content,
        tool_calls=calls,
        finish=choice.finish_reason or ("tool_calls" if calls else "stop"),
        model=completion.model or "",
        input_tokens=usage.prompt_tokens if usage is not None else None,
        output_tokens=usage.completion_tokens if usage is not None else None,
        prompt_ids=_ints((completion.model_extra or {}).get("prompt_token_ids")),
        completion_ids=completion_ids,
        logprobs=logprobs,
    )


async def complete(sdk: Any, request: Request) -> Turn:
    """One Chat Completions call.

    Raises:
        Transient: a status worth retrying.
        Unreachable: no answer came back.
        ContextLengthError: the conversation no longer fits the model.
        LLMCallError: any other error status (``.status`` set), or a malformed answer.
    """
    try:
        completion = await sdk.chat.completions.create(**_body(request))
    except (openai.APIError, ValueError) as exc:
        # `from None`: the SDK's errors carry the request, whose headers hold the key
        raise _failure(exc) from None
    return _turn(completion)


async def list_models(sdk: Any) -> list[str]:
    """The models the server serves (``GET /models``), in its order."""
    try:
        page = await sdk.models.list()
    except (openai.APIError, ValueError) as exc:
        raise _failure(exc) from None
    return [m.id for m in page.data]


def models_now(base_url: str, key: str, timeout: float) -> list[str]:
    """:func:`list_models` without an event loop (start-up checks)."""
    with openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=timeout) as sdk:
        try:
            return [m.id for m in sdk.models.list().data]
        except (openai.APIError, ValueError) as exc:
            raise _failure(exc) from None
