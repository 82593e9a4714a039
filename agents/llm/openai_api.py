"""The OpenAI-compatible wire format: OpenAI itself, vLLM, SGLang, Ollama, any compatible server.

coevo speaks it itself (``aiohttp`` for the calls of a batch, ``httpx2`` for
the start-up checks), not through the ``openai`` SDK: the SDK's cost per
call changes several-fold between its major versions (``verifiers`` pins
``openai<3``), and token-in/token-out needs endpoints the SDK does not know
(``/tokenize``, ``/v1/completions`` with a token-id prompt). This module
writes the bodies and reads the answers; :mod:`~coevo.agents.llm.openai_http`
carries them (one server's connections, and what coevo trusts of them).

* :func:`complete`: ``POST /chat/completions``. A
  :class:`~coevo.agents.llm.turns.Request` goes out as the API takes it;
  ``top_k``, ``min_p`` and ``repetition_penalty`` and, when asked,
  ``return_token_ids`` go in the request body where vLLM and SGLang read
  them. Every sampling parameter goes out pinned (:func:`sent_sampling`):
  to any server but OpenAI's own, what the role left unset is sent as its
  neutral value, so a server's defaults (vLLM's ``--generation-config
  auto`` reads ``top_p``, ``top_k``, ``repetition_penalty`` and even
  ``temperature`` from the model's ``generation_config.json``) never
  change the distribution a rollout was sampled from. The answer is read from its JSON (pydantic's reader) as a
  :class:`~coevo.agents.llm.turns.Turn`: the assistant message as it goes
  back into the conversation, its tool calls with their arguments parsed
  (or why they could not be), the finish reason, the usage when the server
  reported it, and the token ids and log-probs as vLLM and SGLang return
  them on ``"return_token_ids": true`` (the prompt's ``prompt_token_ids``
  beside the choices for vLLM, in the choice for SGLang; the completion's
  ``token_ids`` in the choice; ``logprobs.content[i].logprob``; a token
  written ``token_id:N`` is read as N).
* :func:`complete_tokens`: ``POST /completions`` with the prompt as a list
  of token ids (token in, token out: vLLM, SGLang); the completion's text,
  ids and log-probs come back.
* :func:`tokenize_chat`: ``POST /tokenize`` (vLLM's, at the server's root):
  a conversation rendered by the served model's chat template, as token ids.
* :func:`models_now`, :func:`model_roots`, :func:`load_lora_adapter`: the
  start-up checks and a trainer's adapters (no event loop).

What a server sends is not trusted: :mod:`~coevo.agents.llm.openai_http`
reads each answer within a size limit and follows no redirect off the
server; a log-prob that is no log-probability (NaN, an infinity, vLLM's
``-9999`` floor: :func:`~coevo.arena.trajectory.is_logprob`) leaves the
turn without its log-probs, as from a server that returned none.

Every failure reaches the client's retry policy
(:mod:`~coevo.agents.llm.client`) as a
:class:`~coevo.agents.llm.turns.Transient` status, an
:class:`~coevo.agents.llm.turns.Unreachable` server, or an
:class:`~coevo.agents.llm.turns.LLMCallError` not worth retrying; no
error carries the request (its headers hold the key).
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections.abc import Mapping
from typing import Any, Final

from coevo.agents.llm.openai_http import (
    API,
    Connection,
    ask_now,
    is_openai_itself,
    malformed,
    post_now,
    server_root,
    status_error,
)
from coevo.agents.llm.turns import (
    LLMCallError,
    Request,
    Sampling,
    TokenRequest,
    ToolCallRequest,
    Turn,
    parse_arguments,
)
from coevo.arena.trajectory import LOGPROB_CEILING, LOGPROB_FLOOR, is_logprob
from pydantic_core import from_json

__all__ = [
    "API",
    "DEFAULT_BASE_URL",
    "NEUTRAL_SAMPLING",
    "Connection",
    "complete",
    "complete_tokens",
    "detokenize_now",
    "is_openai_itself",
    "load_lora_adapter",
    "make_sdk",
    "model_roots",
    "models_now",
    "sent_sampling",
    "server_root",
    "tokenize_chat",
    "tokenize_chat_now",
    "tokenize_text",
    "unload_lora_adapter",
]

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
_EXTRA: Final = ("top_k", "min_p", "repetition_penalty")
_NATIVE: Final = ("temperature", "top_p", "seed", "stop", "presence_penalty", "frequency_penalty")

NEUTRAL_SAMPLING: Final[dict[str, float | int]] = {
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": -1,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
}
"""What a request to any server but OpenAI's own sends for each sampling parameter the role left unset.

Each value leaves the model's distribution as it is: softmax of the logits,
nothing truncated or penalised (vLLM and SGLang both read ``top_k = -1`` as
"every token"; vLLM 0.32 takes 0 too, SGLang does not). Sent explicitly
because a server's own defaults need not be these: vLLM's default
``--generation-config auto`` takes them from the model's
``generation_config.json`` (Qwen2.5-Instruct: top_p 0.8, top_k 20,
repetition_penalty 1.05, temperature 0.7)."""

_RECORDED: Final = (*NEUTRAL_SAMPLING, "seed", "stop", "max_tokens")
"""The request-body fields a trajectory's ``sampling`` records (``extra_body`` may override any)."""
_TOKEN_ID: Final = re.compile(r"token_id:(\d+)")


def make_sdk(
    base_url: str, key: str, timeout: float, http_client: Any = None, limit: int = 64
) -> Connection:
    """A :class:`Connection` to one server (what the client keeps per server and event loop)."""
    return Connection(base_url, key, timeout, http_client, limit)


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


def _sampling_fields(sampling: Sampling, openai_itself: bool) -> dict[str, Any]:
    """The sampling fields of a request body, before ``extra_body`` (see :func:`sent_sampling`)."""
    if openai_itself:  # only what the role set: OpenAI's reasoning models refuse even defaults
        return {k: v for k in (*_NATIVE, *_EXTRA) if (v := getattr(sampling, k)) is not None}
    fields: dict[str, Any] = {
        k: v if (v := getattr(sampling, k)) is not None else NEUTRAL_SAMPLING[k]
        for k in NEUTRAL_SAMPLING
    }
    fields.update({k: v for k in ("seed", "stop") if (v := getattr(sampling, k)) is not None})
    return fields


def sent_sampling(
    sampling: Sampling,
    extra_body: Mapping[str, Any] | None = None,
    *,
    openai_itself: bool = False,
) -> dict[str, Any]:
    """The sampling parameters a request with these settings sends, as a trajectory records them.

    To any server but OpenAI's own, every parameter of :data:`NEUTRAL_SAMPLING`
    goes out: the value the role set, else the neutral one. OpenAI's own API
    gets only what the role set. ``extra_body`` is the user's last word: a
    sampling field it holds is sent (and recorded) as it says.

    Args:
        sampling: the role's sampling parameters (``max_tokens`` is the request's own).
        extra_body: the role's ``extra_body``.
        openai_itself: the server is OpenAI's own API.
    """
    sent = _sampling_fields(sampling, openai_itself)
    sent.update({k: v for k, v in (extra_body or {}).items() if k in _RECORDED})
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
    # the body as sent: fields the OpenAI API lacks (top_k, ...) sit beside the others
    body.update(_sampling_fields(request.sampling, openai_itself))
    if request.token_ids:
        body["logprobs"] = True
        body["return_token_ids"] = True
    if request.keep_stop and not openai_itself:
        body["include_stop_str_in_output"] = True  # vLLM's: the text ends with the stop string
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


def _scores(values: list[Any]) -> tuple[list[float] | None, str | None]:
    """A completion's log-probs, or None and why they are left out: one is no log-probability (:func:`is_logprob`).

    Raises:
        TypeError, ValueError: a value is no number (the answer is malformed).
    """
    read = [float(v) for v in values]
    # in C: a NaN or an infinity makes the sum one; then min and max compare truly
    if read and not (
        math.isfinite(sum(read)) and min(read) >= LOGPROB_FLOOR and max(read) <= LOGPROB_CEILING
    ):
        n, value = next((n, v) for n, v in enumerate(read) if not is_logprob(v))
        return None, (
            f"completion token {n}'s log-prob is {value!r}, no log-probability "
            f"(NaN, an infinity, above {LOGPROB_CEILING:g} or below {LOGPROB_FLOOR:g})"
        )
    return read, None


def _turn(raw: bytes) -> Turn:
    """The answer's JSON, read as vLLM and OpenAI write it (a malformed one is an LLMCallError)."""
    try:
        completion = from_json(raw)  # pydantic's JSON reader: several times json.loads's speed
    except (ValueError, RecursionError):
        body = " ".join(raw[:200].decode("utf-8", "replace").split())[:80]
        raise malformed(f"not a completion: {body!r}") from None
    try:
        return _read(completion)
    except LLMCallError:
        raise
    except (
        Exception
    ) as exc:  # any shape the reader did not expect is the server's fault, not a crash
        raise malformed(f"{type(exc).__name__}: {exc}") from None


def _text(content: Any) -> str | None:
    """A message's content as text: a string, or the text parts of a list of parts joined."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "".join(p for p in parts if isinstance(p, str))
    raise malformed(f"the content is a {type(content).__name__}, not text")


def _read(completion: dict[str, Any]) -> Turn:
    if not isinstance(completion, dict):
        raise malformed(f"not a completion: {str(completion)[:80]!r}")
    choices = completion.get("choices")
    if not choices:
        error = completion.get("error")
        why = error.get("message", error) if isinstance(error, dict) else error
        raise malformed(f"no choices, the error {str(why)[:200]!r}" if error else "no choices")
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
    logprobs = refused = None
    completion_ids = _ints(choice.get("token_ids"))
    scored = (choice.get("logprobs") or {}).get("content")
    if scored:
        logprobs, refused = _scores([t["logprob"] for t in scored])
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
        logprobs_refused=refused,
    )


async def complete(connection: Connection, request: Request) -> Turn:
    """One Chat Completions call.

    Raises:
        Transient: a status worth retrying.
        Unreachable: no answer came back.
        ContextLengthError: the conversation no longer fits the model.
        LLMCallError: any other error status (``.status`` set), or a malformed answer.
    """
    body = _body(request, connection.openai_itself)
    raw = await connection.post(f"{connection.base_url}/chat/completions", body)
    return _turn(raw)


def _completion_body(request: TokenRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": request.model,
        "prompt": request.prompt_ids,
        "max_tokens": request.max_tokens,
        "logprobs": 0,  # the sampled token's log-probability, no alternatives
        "return_token_ids": True,
    }
    body.update(_sampling_fields(request.sampling, openai_itself=False))  # vLLM, SGLang
    if request.keep_stop:
        body["include_stop_str_in_output"] = True
    # the chat template's settings were used to render the prompt; a completion takes none
    body.update({k: v for k, v in request.extra_body.items() if k != "chat_template_kwargs"})
    return body


def _token_turn(raw: bytes, sent: list[int]) -> Turn:
    """A ``/completions`` answer to a token prompt as a turn (no tool calls read yet: the caller's protocol reads them)."""
    try:
        completion = from_json(raw)
    except (ValueError, RecursionError):
        body = " ".join(raw[:200].decode("utf-8", "replace").split())[:80]
        raise malformed(f"not a completion: {body!r}") from None
    try:
        choice = completion["choices"][0]
        text = choice.get("text")
        if not isinstance(text, str):
            raise TypeError("the choice has no text")
        ids = _ints(choice.get("token_ids"))
        scored = (choice.get("logprobs") or {}).get("token_logprobs")
        logprobs, refused = _scores(scored) if isinstance(scored, list) else (None, None)
        echoed = _ints(choice.get("prompt_token_ids") or completion.get("prompt_token_ids"))
        usage = completion.get("usage") or {}
        given, taken = usage.get("prompt_tokens"), usage.get("completion_tokens")
        finish = str(choice.get("finish_reason") or "stop")
        model = str(completion.get("model") or "")
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        error = completion.get("error") if isinstance(completion, dict) else None
        why = error.get("message", error) if isinstance(error, dict) else error
        raise malformed(
            f"the error {str(why)[:200]!r}" if error else f"{type(exc).__name__}: {exc}"
        ) from None
    if ids is None:
        raise LLMCallError(
            f"{API} returned no token ids for a token prompt (token_prompts needs vLLM or SGLang "
            "with return_token_ids; set token_prompts = false for this server)"
        )
    if echoed is not None and echoed != sent:
        raise LLMCallError(
            f"{API} changed the prompt's tokens ({len(sent)} sent, {len(echoed)} it saw): "
            "token in, token out needs the prompt taken as given"
        )
    if logprobs is not None and len(logprobs) != len(ids):
        logprobs = None
    return Turn(
        message={"role": "assistant", "content": text},
        text=text,
        tool_calls=[],
        finish=finish,
        model=model,
        input_tokens=given if isinstance(given, int) else None,
        output_tokens=taken if isinstance(taken, int) else None,
        prompt_ids=list(sent),
        completion_ids=ids,
        logprobs=logprobs,
        logprobs_refused=refused,
    )


async def complete_tokens(connection: Connection, request: TokenRequest) -> Turn:
    """One ``/completions`` call whose prompt is token ids (token in, token out).

    The turn's ``prompt_ids`` are the ids sent, its ``completion_ids`` and
    ``logprobs`` the server's; its tool calls are left to the caller, which
    knows the protocol the model writes them in.

    Raises:
        Transient: a status worth retrying.
        Unreachable: no answer came back.
        ContextLengthError: the prompt and the output budget exceed the model's context.
        LLMCallError: any other error status, a malformed answer, or no token ids in it.
    """
    raw = await connection.post(f"{connection.base_url}/completions", _completion_body(request))
    return _token_turn(raw, request.prompt_ids)


def _tokenize_body(
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    generation: bool,
    template_kwargs: dict[str, Any] | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [_sent(m) for m in messages],
        "add_generation_prompt": generation,
        "add_special_tokens": False,  # the template writes every special token it wants
    }
    if tools:
        body["tools"] = tools
    if template_kwargs:
        body["chat_template_kwargs"] = template_kwargs
    return body


def _tokens(raw: bytes) -> list[int]:
    try:
        tokens = _ints(json.loads(raw).get("tokens"))
    except (ValueError, AttributeError, RecursionError):
        tokens = None
    if tokens is None:
        raise malformed("the /tokenize answer holds no list of tokens")
    return tokens


async def tokenize_chat(
    connection: Connection,
    model: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    generation: bool = True,
    template_kwargs: dict[str, Any] | None = None,
) -> list[int]:
    """``messages`` rendered by the served model's chat template, as token ids (vLLM's ``POST /tokenize``).

    Args:
        connection: the server.
        model: the model whose template renders them.
        messages: the conversation (Chat Completions format).
        tools: the tools the template is to describe (None: none).
        generation: end with the assistant's turn header (``add_generation_prompt``).
        template_kwargs: the template's own settings (``chat_template_kwargs``).

    Raises:
        Transient, Unreachable, LLMCallError: as :func:`complete`.
    """
    body = _tokenize_body(model, messages, tools, generation, template_kwargs)
    return _tokens(await connection.post(f"{connection.root}/tokenize", body))


async def tokenize_text(connection: Connection, model: str, text: str) -> list[int]:
    """``text`` as the served model's tokenizer reads it, with no special tokens added (``POST /tokenize``)."""
    body = {"model": model, "prompt": text, "add_special_tokens": False}
    return _tokens(await connection.post(f"{connection.root}/tokenize", body))


def tokenize_chat_now(
    base_url: str,
    key: str,
    timeout: float,
    model: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    generation: bool = True,
    template_kwargs: dict[str, Any] | None = None,
) -> list[int]:
    """:func:`tokenize_chat` without an event loop (start-up checks)."""
    body = _tokenize_body(model, messages, tools, generation, template_kwargs)
    return _tokens(post_now(base_url, key, timeout, f"{server_root(base_url)}/tokenize", body))


def detokenize_now(base_url: str, key: str, timeout: float, model: str, tokens: list[int]) -> str:
    """The text of ``tokens`` (vLLM's ``POST /detokenize``; start-up checks)."""
    raw = post_now(
        base_url,
        key,
        timeout,
        f"{server_root(base_url)}/detokenize",
        {"model": model, "tokens": tokens},
    )
    try:
        text = json.loads(raw).get("prompt")
    except (ValueError, AttributeError, RecursionError):
        text = None
    if not isinstance(text, str):
        raise malformed("the /detokenize answer holds no text")
    return text


def _get_models(base_url: str, key: str, timeout: float) -> list[dict[str, Any]]:
    """``GET /models``: the model objects the server lists, in its order."""
    answer = ask_now(base_url, key, timeout, "GET", "/models")
    if answer.status >= 400:
        raise status_error(answer)
    try:
        listed = json.loads(answer.raw)["data"]
        if not isinstance(listed, list) or not all(
            isinstance(m, dict) and isinstance(m.get("id"), str) for m in listed
        ):
            raise TypeError("data is not a list of models with ids")
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise malformed(f"GET /models answered no list of models ({exc})") from None
    return listed


def models_now(base_url: str, key: str, timeout: float) -> list[str]:
    """The models the server serves (``GET /models``), in its order (start-up checks, no event loop)."""
    return [m["id"] for m in _get_models(base_url, key, timeout)]


def model_roots(base_url: str, key: str, timeout: float) -> dict[str, str | None]:
    """Each model the server serves → its ``root`` (vLLM: a LoRA adapter's folder, a model's name; None if unsaid)."""
    return {
        m["id"]: (m.get("root") if isinstance(m.get("root"), str) else None)
        for m in _get_models(base_url, key, timeout)
    }


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
    answer = ask_now(
        base_url, key, timeout, "POST", "/load_lora_adapter", {"lora_name": name, "lora_path": path}
    )
    if answer.status >= 400:
        failure = status_error(answer)
        if answer.status == 400 and "already been loaded" in str(failure):
            return False
        raise failure
    return True


def unload_lora_adapter(base_url: str, key: str, timeout: float, name: str) -> bool:
    """Ask a vLLM server to unload the LoRA adapter ``name`` (``POST /unload_lora_adapter``).

    vLLM then no longer serves or lists it. The server must run with
    ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``.

    Returns:
        True when the server unloaded it now, False when it holds no adapter of that name
        (404: unloaded before, or the server restarted since it was loaded).

    Raises:
        Transient: a status worth retrying.
        LLMCallError: the server refused (its message).
        Unreachable: it could not be reached.
    """
    answer = ask_now(base_url, key, timeout, "POST", "/unload_lora_adapter", {"lora_name": name})
    if answer.status == 404 and b"cannot be found" in answer.raw:
        return False
    if answer.status >= 400:
        raise status_error(answer)
    return True
