"""The plumbing every Claude role shares: one ``AsyncAnthropic``, a concurrency limit, budgets and accounting.

* The API key comes only from the environment (``ANTHROPIC_API_KEY``); a
  missing key is an error at start-up that names the variable. The key is
  never stored on the client object's public state, logged or put in a
  record. ``ANTHROPIC_BASE_URL`` points the SDK at another server (a proxy,
  or the local fake the tests use).
* Retries with exponential backoff on 429, 529 and other 5xx, timeouts and
  connection errors, honouring ``retry-after``, are the SDK's own
  (``max_retries``); a call that still fails raises :class:`ClaudeCallError`
  with what happened, and the role turns it into a recorded failure.
* At most ``concurrency`` calls are in flight (an ``asyncio.Semaphore``).
* The static system text is sent as a cached block (prompt caching).
* Every call's usage (input, output, cache-write, cache-read tokens) and its
  cost in dollars are added up per role and per task (:attr:`ClaudeClient.usage`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import anthropic
from coevo.agents.claude.environment import KEY_VARIABLE
from coevo.arena.errors import CoevoError
from coevo.arena.gamelog.rows import UsageRow
from pydantic import BaseModel, ValidationError

__all__ = [
    "PRICES",
    "ClaudeCallError",
    "ClaudeClient",
    "ClaudeConfigError",
    "Usage",
    "redact",
]


PRICES: Final[dict[str, tuple[float, float]]] = {
    # dollars per million tokens: (input, output); cache writes cost 1.25× input, reads 0.1×
    "claude-opus": (15.0, 75.0),
    "claude-sonnet": (3.0, 15.0),
    "claude-haiku": (1.0, 5.0),
}
"""Default prices by model family (the longest matching prefix of the model name wins).

Check them against Anthropic's price list and pass ``prices`` to
:class:`ClaudeClient` to override; an unknown model is priced as Sonnet."""

Model = TypeVar("Model", bound=BaseModel)


class ClaudeConfigError(CoevoError):
    """The Claude roles cannot start (no API key, a bad setting); the message says what to set."""


class ClaudeCallError(CoevoError):
    """A Messages API call failed after the SDK's retries, or its answer was unusable."""


@dataclass
class Usage:
    """Tokens and dollars, added up.

    Attributes:
        calls: Messages API calls that returned.
        input_tokens: uncached input tokens.
        output_tokens: output tokens.
        cache_write_tokens: input tokens written to the prompt cache.
        cache_read_tokens: input tokens read from the prompt cache.
        dollars: their cost at :data:`PRICES`.
    """

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    dollars: float = 0.0

    def add(self, other: Usage) -> None:
        """Add ``other`` to this."""
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.dollars += other.dollars


def _price(model: str, prices: dict[str, tuple[float, float]]) -> tuple[float, float]:
    best = max((p for p in prices if model.startswith(p)), key=len, default=None)
    return prices[best] if best else (3.0, 15.0)


def redact(text: str) -> str:
    """``text`` with the API key (if set) replaced, for anything that may be logged."""
    key = os.environ.get(KEY_VARIABLE)
    return text.replace(key, "[redacted]") if key else text


def _root_cause(exc: BaseException) -> str:
    """What went wrong underneath an SDK connection error ("connection refused", "name not known").

    The SDK says only "Connection error."; the operating system's error at the
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


@dataclass
class ClaudeClient:
    """One Messages API client for the Claude roles.

    Args:
        model: the model name.
        max_tokens: the output budget per call.
        concurrency: calls in flight at most.
        timeout: seconds per request.
        max_retries: the SDK's retries (429, 529, 5xx, timeouts, connection errors).
        http_client: an ``httpx2.AsyncClient`` to use (tests pass one with a mock transport).
        prices: dollars per million tokens by model-name prefix (default :data:`PRICES`).

    Raises:
        ClaudeConfigError: ``ANTHROPIC_API_KEY`` is not set.
    """

    model: str = "claude-sonnet-5"
    max_tokens: int = 2048
    concurrency: int = 8
    timeout: float = 60.0
    max_retries: int = 4
    http_client: Any = None
    prices: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(PRICES))
    usage: dict[tuple[str, str], Usage] = field(default_factory=lambda: defaultdict(Usage))

    def __post_init__(self) -> None:
        if not os.environ.get(KEY_VARIABLE):
            raise ClaudeConfigError(
                f"the Claude roles need an API key: set {KEY_VARIABLE} in the environment "
                "(or use the offline roles: procedural, linear-pg, search, irt)"
            )
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._limit: asyncio.Semaphore | None = None

    def _sdk(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            # each batch runs in its own event loop: connections and the semaphore belong to one
            self._loop = loop
            self._client = anthropic.AsyncAnthropic(
                timeout=self.timeout,
                max_retries=self.max_retries,
                http_client=self.http_client,
            )
            self._limit = asyncio.Semaphore(self.concurrency)
        return self._client

    def drain(self) -> list[UsageRow]:
        """What was spent since the last call, one row per (role, task) in order; then forgotten."""
        rows = [
            UsageRow(role=role, task_id=task, **dataclasses.asdict(used))
            for (role, task), used in sorted(self.usage.items())
        ]
        self.usage.clear()
        return rows

    def total(self, role: str | None = None) -> Usage:
        """Usage added up over every task (of ``role``, or of every role)."""
        out = Usage()
        for (r, _), used in self.usage.items():
            if role is None or r == role:
                out.add(used)
        return out

    async def create(
        self,
        *,
        role: str,
        task: str,
        system: str,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] = (),
        tool_choice: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> Any:
        """One Messages API call (the system text cached), accounted to ``role`` and ``task``.

        Raises:
            ClaudeCallError: the call failed after the SDK's retries.
        """
        client = self._sdk()
        assert self._limit is not None
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens or self.max_tokens,
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            "messages": list(messages),
        }
        if tools:
            request["tools"] = list(tools)
        if tool_choice:
            request["tool_choice"] = tool_choice
        async with self._limit:
            try:
                message = await client.messages.create(**request)
            # `from None` below on purpose: the SDK's errors carry the whole request (its
            # headers hold the key), which must never reach a traceback; the message says what failed
            except anthropic.APIStatusError as exc:
                raise ClaudeCallError(
                    redact(
                        f"the Messages API answered {exc.status_code} after {self.max_retries} retries: {exc.message}"
                    )
                ) from None
            except (anthropic.APITimeoutError, anthropic.APIConnectionError) as exc:
                url = exc.request.url
                where = f"{url.host}:{url.port}" if url.port else url.host
                raise ClaudeCallError(
                    redact(
                        f"the Messages API at {where} could not be reached "
                        f"after {self.max_retries} retries: {type(exc).__name__}: {exc} "
                        f"({_root_cause(exc)})"
                    )
                ) from None
            except (anthropic.APIError, ValueError) as exc:
                # a body that is not the JSON of a message (cut off, malformed): the SDK cannot parse it
                raise ClaudeCallError(
                    redact(
                        f"the Messages API answered with a malformed response: {type(exc).__name__}: {exc}"
                    )
                ) from None
        if not isinstance(message, anthropic.types.Message):
            # a 200 that is not JSON (a proxy's HTML page): the SDK hands back the raw text
            body = " ".join(str(message).split())[:80]
            raise ClaudeCallError(
                redact(
                    f"the Messages API answered with a malformed response: not a message: {body!r}"
                )
            )
        self._account(role, task, message)
        return message

    def _account(self, role: str, task: str, message: Any) -> None:
        used = message.usage
        write = int(getattr(used, "cache_creation_input_tokens", 0) or 0)
        read = int(getattr(used, "cache_read_input_tokens", 0) or 0)
        prices = _price(str(message.model or self.model), self.prices)
        dollars = (
            used.input_tokens * prices[0]
            + used.output_tokens * prices[1]
            + write * prices[0] * 1.25
            + read * prices[0] * 0.1
        ) / 1e6
        self.usage[(role, task)].add(
            Usage(1, int(used.input_tokens), int(used.output_tokens), write, read, dollars)
        )

    async def structured(
        self,
        model: type[Model],
        *,
        role: str,
        task: str,
        system: str,
        messages: Sequence[dict[str, Any]],
        name: str | None = None,
    ) -> Model:
        """A call whose answer must be ``model``: a forced tool with the model's JSON Schema.

        Raises:
            ClaudeCallError: the call failed, was cut off (``max_tokens``), named another
                tool, or its input does not validate; the message holds the exact errors,
                ready to be fed back for a retry.
        """
        tool = name or model.__name__.lower()
        message = await self.create(
            role=role,
            task=task,
            system=system,
            messages=messages,
            tools=[
                {
                    "name": tool,
                    "description": model.__doc__ or tool,
                    "input_schema": model.model_json_schema(),
                }
            ],
            tool_choice={"type": "tool", "name": tool},
        )
        if message.stop_reason == "max_tokens":
            raise ClaudeCallError(
                f"the answer was cut off at max_tokens ({self.max_tokens}) before {tool} was complete"
            )
        calls = [b for b in message.content if getattr(b, "type", None) == "tool_use"]
        if not calls:
            raise ClaudeCallError(f"the answer called no tool; it must call {tool}")
        if calls[0].name != tool:
            raise ClaudeCallError(f"the answer called {calls[0].name!r}; it must call {tool!r}")
        payload = calls[0].input
        if isinstance(payload, str):
            try:
                payload = json.loads(payload)
            except json.JSONDecodeError as exc:
                raise ClaudeCallError(f"the {tool} input is not JSON: {exc}") from exc
        try:
            return model.model_validate(payload)
        except ValidationError as exc:
            raise ClaudeCallError(f"the {tool} input does not validate: {exc}") from exc
