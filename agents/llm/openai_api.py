"""The Chat Completions API (the ``openai`` SDK): OpenAI itself, vLLM, SGLang, Ollama, any compatible server.

A :class:`~coevo.agents.llm.turns.Request` goes out as the API takes it;
``top_k``, ``min_p`` and ``repetition_penalty`` and, when asked,
``return_token_ids`` go in the request body where vLLM and SGLang read them.
The request goes through the SDK's ``post`` (its HTTP, authentication and
errors) as the JSON body the API takes, and the answer is read from its
JSON, not through the SDK's typed models, which cost more per call than the
rest of an episode. It comes back as a :class:`~coevo.agents.llm.turns.Turn`: the
assistant message as it goes back into the conversation, its tool calls
with their arguments parsed (or why they could not be), the finish reason,
the usage when the server reported it, and the token ids and log-probs as
vLLM and SGLang return them on ``"return_token_ids": true`` (the prompt's
``prompt_token_ids`` beside the choices for vLLM, in the choice for SGLang;
the completion's ``token_ids`` in the choice; ``logprobs.content[i].logprob``;
a token written ``token_id:N`` is read as N). The SDK's own retries are off: the client's retry policy
(:mod:`~coevo.agents.llm.client`) sees every failure, as a
:class:`~coevo.agents.llm.turns.Transient` status, an
:class:`~coevo.agents.llm.turns.Unreachable` server, or an
:class:`~coevo.agents.llm.turns.LLMCallError` not worth retrying.
"""

from __future__ import annotations

import json
import re
from array import array
from typing import Any, Final
from urllib.parse import urlsplit

import openai
from coevo.agents.llm.turns import (
    LLMCallError,
    Request,
    ToolCallRequest,
    Turn,
    Unreachable,
    parse_arguments,
    retry_after,
    root_cause,
    status_failure,
)
from pydantic_core import from_json

__all__ = [
    "API",
    "DEFAULT_BASE_URL",
    "complete",
    "is_openai_itself",
    "load_lora_adapter",
    "make_sdk",
    "model_roots",
    "models_now",
]

API: Final = "the OpenAI-compatible server"
DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"

_EXTRA: Final = ("top_k", "min_p", "repetition_penalty")
_NATIVE: Final = ("temperature", "top_p", "seed", "stop", "presence_penalty", "frequency_penalty")
_CONTEXT: Final = re.compile(r"context length|maximum context|context window|too many tokens", re.I)
_TOKEN_ID: Final = re.compile(r"token_id:(\d+)")


def is_openai_itself(base_url: str) -> bool:
    """Whether ``base_url`` is OpenAI's own API (no token ids; ``max_completion_tokens``)."""
    return urlsplit(base_url).hostname == "api.openai.com"


def make_sdk(base_url: str, key: str, timeout: float, http_client: Any = None) -> Any:
    """An ``AsyncOpenAI`` for one server, with the SDK's retries off (the client retries)."""
    return openai.AsyncOpenAI(
        base_url=base_url, api_key=key, max_retries=0, timeout=timeout, http_client=http_client
    )


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
        message = _status_message(exc)
        return status_failure(
            API,
            exc.status_code,
            message,
            retry_after=retry_after(exc.response.headers),
            too_long=bool(_CONTEXT.search(message)),
        )
    if isinstance(exc, openai.APITimeoutError):
        return Unreachable("the request timed out", timeout=True)
    if isinstance(exc, openai.APIConnectionError):
        return Unreachable(root_cause(exc))
    return LLMCallError(f"{API} answered with a malformed response: {type(exc).__name__}: {exc}")


def _an_object(text: Any) -> bool:
    """Whether ``text`` is the JSON of an object, as a server that parses earlier calls needs."""
    try:
        return isinstance(json.loads(text), dict)
    except (TypeError, ValueError, RecursionError):
        return False


def _sent(message: dict[str, Any]) -> dict[str, Any]:
    """A message as it goes back to the server.

    Its reasoning is left out, arguments that are no JSON object become ``{}``
    (servers parse the calls of earlier turns and refuse the request
    otherwise; the tool error the model saw says what was wrong), and an
    assistant turn with neither text nor calls says so in an empty text.
    """
    if message["role"] != "assistant":
        return message
    sent = {k: v for k, v in message.items() if k != "reasoning_content"}
    calls = sent.get("tool_calls")
    if calls:
        sent["tool_calls"] = [
            c
            if _an_object(c["function"]["arguments"])
            else {**c, "function": {**c["function"], "arguments": "{}"}}
            for c in calls
        ]
    elif sent.get("content") is None:
        sent["content"] = ""
    return sent


def _body(request: Request, openai_itself: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": request.model,
        "messages": [_sent(m) for m in request.messages],
    }
    # OpenAI's own API wants max_completion_tokens (its reasoning models refuse max_tokens);
    # vLLM, SGLang and Ollama read max_tokens
    budget = "max_completion_tokens" if openai_itself else "max_tokens"
    body[budget] = request.max_tokens
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
    body.update(extra)  # the body as sent: fields the OpenAI API lacks sit beside the others
    body.update(request.extra_body)  # the role's own, last: the user knows their server
    return body


def _ints(value: Any) -> list[int] | None:
    """``value`` as a list of token ids, or None when it is not one (checked in C: thousands per call)."""
    if not isinstance(value, list):
        return None
    try:
        return array("q", value).tolist()
    except (TypeError, OverflowError):
        return None


def _malformed(why: str) -> LLMCallError:
    return LLMCallError(f"{API} answered with a malformed response: {why}")


def _turn(raw: bytes) -> Turn:
    """The answer's JSON, read as vLLM and OpenAI write it (a malformed one is an LLMCallError)."""
    try:
        completion = from_json(raw)  # pydantic's JSON reader: several times json.loads's speed
    except (ValueError, RecursionError):
        body = " ".join(raw[:200].decode("utf-8", "replace").split())[:80]
        raise _malformed(f"not a completion: {body!r}") from None
    try:
        return _read(completion)
    except LLMCallError:
        raise
    except (
        Exception
    ) as exc:  # any shape the reader did not expect is the server's fault, not a crash
        raise _malformed(f"{type(exc).__name__}: {exc}") from None


def _text(content: Any) -> str | None:
    """A message's content as text: a string, or the text parts of a list of parts joined."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "".join(p for p in parts if isinstance(p, str))
    raise _malformed(f"the content is a {type(content).__name__}, not text")


def _read(completion: dict[str, Any]) -> Turn:
    if not isinstance(completion, dict):
        raise _malformed(f"not a completion: {str(completion)[:80]!r}")
    choices = completion.get("choices")
    if not choices:
        error = completion.get("error")
        why = error.get("message", error) if isinstance(error, dict) else error
        raise _malformed(f"no choices, the error {str(why)[:200]!r}" if error else "no choices")
    choice = choices[0]
    message = choice["message"]
    content = _text(message.get("content"))
    calls = []
    for n, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function")
        if not isinstance(function, dict):
            continue  # a custom (non-function) tool call: coevo offers none
        written = function.get("arguments")
        written = written if isinstance(written, str) else json.dumps(written)
        arguments, error = parse_arguments(written)
        calls.append(
            ToolCallRequest(
                id=str(call.get("id") or f"call_{n}"),
                name=str(function.get("name") or ""),
                raw=written or "",
                arguments=arguments,
                error=error,
            )
        )
    said: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        said["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw}}
            for c in calls
        ]
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if reasoning:
        said["reasoning_content"] = reasoning
    logprobs = None
    completion_ids = _ints(choice.get("token_ids"))
    scored = (choice.get("logprobs") or {}).get("content")
    if scored:
        logprobs = [float(t["logprob"]) for t in scored]
        if completion_ids is None:  # no ids beside the log-probs: tokens written `token_id:N`?
            parsed = [_TOKEN_ID.fullmatch(str(t.get("token") or "")) for t in scored]
            if all(parsed):
                completion_ids = [int(m.group(1)) for m in parsed if m is not None]
    usage = completion.get("usage") or {}
    given, taken = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return Turn(
        message=said,
        text=content,
        tool_calls=calls,
        finish=choice.get("finish_reason") or ("tool_calls" if calls else "stop"),
        model=str(completion.get("model") or ""),
        input_tokens=given if isinstance(given, int) else None,
        output_tokens=taken if isinstance(taken, int) else None,
        # vLLM puts the prompt's ids beside the choices, SGLang in the choice
        prompt_ids=_ints(completion.get("prompt_token_ids") or choice.get("prompt_token_ids")),
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
        # the SDK's HTTP, auth and errors, without its per-request transform and typed parse:
        # at hundreds of calls a second those cost more than everything else coevo does
        itself = is_openai_itself(str(sdk.base_url))
        raw = await sdk.post("/chat/completions", body=_body(request, itself), cast_to=bytes)
    except (openai.APIError, ValueError) as exc:
        # `from None`: the SDK's errors carry the request, whose headers hold the key
        raise _failure(exc) from None
    return _turn(raw)


def models_now(base_url: str, key: str, timeout: float) -> list[str]:
    """The models the server serves (``GET /models``), in its order (start-up checks, no event loop)."""
    with openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=timeout) as sdk:
        try:
            return [m.id for m in sdk.models.list().data]
        except (openai.APIError, ValueError) as exc:
            raise _failure(exc) from None


def model_roots(base_url: str, key: str, timeout: float) -> dict[str, str | None]:
    """Each model the server serves → its ``root`` (vLLM: a LoRA adapter's folder, a model's name; None if unsaid)."""
    with openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=timeout) as sdk:
        try:
            return {m.id: getattr(m, "root", None) for m in sdk.models.list().data}
        except (openai.APIError, ValueError) as exc:
            raise _failure(exc) from None


def load_lora_adapter(base_url: str, key: str, timeout: float, name: str, path: str) -> bool:
    """Ask a vLLM server to load the LoRA adapter at ``path`` as the model ``name`` (``POST /load_lora_adapter``).

    vLLM serves it at once under ``name`` (``/v1/models`` lists it). The
    server must run with ``--enable-lora`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``.

    Returns:
        True when the server loaded it now, False when it had it already (a resumed run asks again).

    Raises:
        LLMCallError: the server refused (its message; a 404 means it has no adapter endpoint).
        Unreachable: it could not be reached.
    """
    with openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=timeout) as sdk:
        try:
            sdk.post(
                "/load_lora_adapter", body={"lora_name": name, "lora_path": path}, cast_to=bytes
            )
        except openai.APIStatusError as exc:
            if exc.status_code == 400 and "already been loaded" in _status_message(exc):
                return False
            raise _failure(exc) from None
        except (openai.APIError, ValueError) as exc:
            raise _failure(exc) from None
    return True
