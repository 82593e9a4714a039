"""What crosses the boundary between the LLM roles and a provider: settings, one request, one turn, the failures.

The roles speak one conversation format whatever the provider: OpenAI Chat
Completions messages (``{"role": "system" | "user" | "assistant" | "tool",
...}``, an assistant's ``tool_calls`` with their arguments as JSON text, a
``tool`` message per call answered) and OpenAI function tools. It is the
format trainers read, so a rollout is recorded as it was played. Each
provider adapter (:mod:`~coevo.agents.llm.anthropic_api`,
:mod:`~coevo.agents.llm.openai_api`) translates a :class:`Request` into its
API and the answer back into a :class:`Turn`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Final

from coevo.arena.errors import CoevoError
from coevo.arena.trajectory import TurnTokens
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ERROR_PREFIX",
    "ContextLengthError",
    "Endpoint",
    "LLMCallError",
    "LLMConfigError",
    "Request",
    "Sampling",
    "TokenRequest",
    "ToolCallRequest",
    "Transient",
    "Turn",
    "Unreachable",
    "parse_arguments",
    "retry_after",
    "root_cause",
    "status_failure",
]

ERROR_PREFIX: Final = "error: "
"""How a tool message that reports a failed call begins (as :meth:`Observation.text` writes it)."""


class LLMConfigError(CoevoError):
    """An LLM role cannot start (no key, a server that cannot be reached, a model it does not serve)."""


class LLMCallError(CoevoError):
    """A call failed after the retries, or its answer was unusable; the role records it as a failure.

    Attributes:
        status: the HTTP status the server answered, when it answered one.
    """

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class ContextLengthError(LLMCallError):
    """The conversation no longer fits the model's context: the episode ends there, unsubmitted."""


class Transient(Exception):
    """A status worth retrying (408, 409, 429, 5xx, 529), with the server's ``retry-after`` in seconds."""

    def __init__(self, status: int, message: str, retry_after: float | None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class Unreachable(Exception):
    """No answer came back: the connection was refused or dropped, or the request timed out."""

    def __init__(self, message: str, *, timeout: bool = False):
        super().__init__(message)
        self.timeout = timeout


def status_failure(
    api: str, status: int, message: str, *, retry_after: float | None, too_long: bool
) -> Exception:
    """What an error status from ``api`` means to the client, the same for every provider.

    408, 409, 429 and every 5xx (529 too) are :class:`Transient`; a 400 for a
    conversation ``too_long`` for the model is a :class:`ContextLengthError`;
    any other status is an :class:`LLMCallError` that keeps it.
    """
    if status in (408, 409, 429) or status >= 500:
        return Transient(status, message, retry_after)
    if status == 400 and too_long:
        return ContextLengthError(f"{api} answered 400: {message}")
    return LLMCallError(f"{api} answered {status}: {message}", status)


def retry_after(headers: Any) -> float | None:
    """The server's ``retry-after-ms`` or ``retry-after`` in seconds, when it sent a number (not a date)."""
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name) if headers is not None else None
        if value is None:
            continue
        try:
            return float(value) * scale
        except ValueError:
            continue  # an HTTP date: back off by our own schedule
    return None


def root_cause(exc: BaseException) -> str:
    """What went wrong underneath an SDK connection error ("connection refused", "name not known").

    The SDKs say only "Connection error."; the operating system's error at the
    bottom of the chain of causes says which.
    """
    seen: BaseException | None = exc
    deepest = str(exc)
    for _ in range(12):  # a chain is a handful of wrappers deep; never loop on a cycle
        seen = seen.__cause__ or seen.__context__ if seen is not None else None
        if seen is None:
            break
        if isinstance(seen, ConnectionError) and seen.errno:
            return os.strerror(seen.errno).lower()  # asyncio's own strerror hides "refused"
        if isinstance(seen, OSError) and seen.errno is not None:
            return (seen.strerror or str(seen)).lower()
        deepest = str(seen) or deepest
    return deepest


class Sampling(BaseModel):
    """Sampling parameters sent with every call.

    To an OpenAI-compatible server other than OpenAI's own (vLLM, SGLang,
    ...) an unset parameter goes out as its neutral value
    (:data:`~coevo.agents.llm.openai_api.NEUTRAL_SAMPLING`: temperature 1,
    top_p 1, top_k −1, min_p 0, repetition_penalty 1, no penalties), never
    left to the server's defaults; OpenAI's own API and Anthropic's get only
    what is set. ``top_k``, ``min_p`` and ``repetition_penalty`` are not in
    the OpenAI API: they go in the request body as vLLM and SGLang read them
    (OpenAI itself refuses them); Anthropic takes ``top_k`` natively and
    ignores the other two, and ``seed``, ``presence_penalty`` and
    ``frequency_penalty``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, gt=0, description="output tokens per call")
    seed: int | None = None
    stop: list[str] | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None

    def recorded(self, max_tokens: int) -> dict[str, Any]:
        """The parameters set, with the output budget actually used.

        A trajectory records what its calls sent instead
        (:meth:`~coevo.agents.llm.client.LLMClient.recorded_sampling`): the neutral
        values filled in and ``extra_body``'s word taken.
        """
        return {**self.model_dump(exclude_none=True), "max_tokens": max_tokens}


class Endpoint(BaseModel):
    """One server a role may call, and how many calls it may have in flight there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(description="e.g. http://gpu1:8000/v1")
    concurrency: int | None = Field(
        default=None, gt=0, description="calls in flight at most (default: the role's concurrency)"
    )


@dataclass(frozen=True)
class Request:
    """One call: the conversation so far (system first), the tools, and what is asked for.

    Attributes:
        model: the model (or adapter) name.
        messages: the conversation, in the Chat Completions format, the system message first.
        tools: OpenAI function tools (``{"type": "function", "function": {...}}``).
        tool_choice: ``"auto"``, ``"required"``, or ``{"type": "function", "function": {"name": N}}``.
        max_tokens: the output budget of this call.
        sampling: the sampling parameters.
        token_ids: ask the server for token ids and log-probabilities (vLLM, SGLang).
        extra_body: more fields for the request body, as the server reads them
            (``chat_template_kwargs``, ``min_tokens``, ...; openai only).
        keep_stop: the answer's text keeps the stop string that ended it (vLLM's
            ``include_stop_str_in_output``; not sent to OpenAI's own API), so the text and
            the token ids sampled agree.
    """

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: str | dict[str, Any] | None = None
    max_tokens: int = 1024
    sampling: Sampling = field(default_factory=Sampling)
    token_ids: bool = False
    extra_body: dict[str, Any] = field(default_factory=dict)
    keep_stop: bool = False


@dataclass(frozen=True)
class TokenRequest:
    """One call with the prompt as token ids (token in, token out: ``/v1/completions`` of vLLM, SGLang).

    Attributes:
        model: the model (or adapter) name.
        prompt_ids: the whole prompt, as the model is to see it.
        max_tokens: the output budget of this call.
        sampling: the sampling parameters.
        extra_body: more fields for the request body, as the server reads them.
        keep_stop: the completion's text keeps the stop string that ended it
            (``include_stop_str_in_output``), as its token ids do.
    """

    model: str
    prompt_ids: list[int]
    max_tokens: int = 1024
    sampling: Sampling = field(default_factory=Sampling)
    extra_body: dict[str, Any] = field(default_factory=dict)
    keep_stop: bool = False


@dataclass(frozen=True)
class ToolCallRequest:
    """One tool call the model asked for.

    Attributes:
        id: the call's id (the ``tool`` message answering it quotes it).
        name: the tool's name.
        raw: the arguments exactly as the model wrote them.
        arguments: the arguments parsed (None when ``raw`` is not a JSON object).
        error: why ``raw`` could not be parsed, written for the model.
    """

    id: str
    name: str
    raw: str
    arguments: dict[str, Any] | None
    error: str | None = None


def parse_arguments(raw: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """A tool call's arguments from the model's text, or None and why not (empty text is ``{}``)."""
    if raw is None or not raw.strip() or raw.strip() == "null":
        return {}, None  # vLLM reads no arguments, and null, as none
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, f"the arguments are not valid JSON ({exc.msg} at character {exc.pos})"
    except (ValueError, RecursionError):  # nested beyond what a parser follows, a number too long
        return None, "the arguments are not valid JSON (nested too deep or too long)"
    if not isinstance(value, dict):
        return None, f"the arguments must be a JSON object, not {type(value).__name__}"
    return value, None


@dataclass(frozen=True)
class Turn:
    """The model's answer to one request.

    Attributes:
        message: the assistant message as it goes back into the conversation (Chat Completions format).
        text: its text (None when it only called tools).
        tool_calls: the tool calls it asked for, in order.
        finish: ``stop``, ``tool_calls``, ``length`` (cut at the output budget) or the server's own word.
        model: the model that answered, as the server names it.
        input_tokens: prompt tokens, when the server reported usage.
        output_tokens: completion tokens, when the server reported usage.
        cache_write_tokens: prompt tokens written to a prompt cache (Anthropic).
        cache_read_tokens: prompt tokens read from a prompt cache (Anthropic).
        prompt_ids: the prompt's token ids, when the server returned them.
        completion_ids: the completion's token ids, when the server returned them.
        logprobs: the log-probability of each completion token, when the server returned them.
        logprobs_refused: why the log-probs the server returned were left out (one was NaN,
            infinite or out of range: :func:`~coevo.arena.trajectory.is_logprob`); None when
            they were kept, or none came.
    """

    message: dict[str, Any]
    text: str | None
    tool_calls: list[ToolCallRequest]
    finish: str
    model: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None
    logprobs: list[float] | None = None
    logprobs_refused: str | None = None

    def tokens(self) -> TurnTokens:
        """The turn as a trajectory keeps it: its finish, usage, token ids and log-probs."""
        return TurnTokens(
            finish=self.finish,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            prompt_ids=self.prompt_ids,
            completion_ids=self.completion_ids,
            logprobs=self.logprobs,
        )
