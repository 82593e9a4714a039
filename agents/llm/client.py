"""The plumbing every LLM role shares, whatever the provider: servers, limits, retries, accounting, structured output.

One :class:`LLMClient` per role instance:

* **Provider and servers.** ``provider`` is ``anthropic`` or ``openai``
  (any Chat Completions server). ``base_url`` is one server or a list of
  them, or ``endpoints`` lists servers each with its own concurrency limit;
  with neither, the provider's variable (``OPENAI_BASE_URL``,
  ``ANTHROPIC_BASE_URL``) or its public API. A call goes to the least busy
  server with a free slot that is not resting after a failure.
* **The key** is read from the environment variable the settings name
  (``api_key_env``; the provider's own by default), never from a file. It is
  never stored on the client, logged or put in a record; error texts are
  redacted.
* **Start-up** (:meth:`LLMClient.connect`, openai only): every server must
  answer ``GET /models`` and serve the model; with no model named, the
  first one the first server lists is used (a vLLM server serves one).
* **Retries** are the client's own (the SDKs' are off), the same for both
  providers: 408, 409, 429 and 5xx (529 too) are retried up to
  ``max_retries`` times, after the server's ``retry-after`` when it sent
  one, else with exponential backoff (0.5 s doubling, at most 8 s); a
  server that rests after a failure takes no calls until it is due, and the
  other servers take them. A server that answered before and now refuses
  connections is restarting: its calls wait for it (or go to another
  server) for up to ``reconnect`` seconds. A server never reached fails
  after ``max_retries``; ``retry-after`` is obeyed for 60 s at most. After
  ``give_up_after`` seconds of nothing but error answers the client gives
  up (:mod:`~coevo.agents.llm.breaker`). Other statuses are not retried: 401 and 403 name
  the key's variable, 400 for a conversation longer than the model's
  context ends the episode (:class:`ContextLengthError`), and a 400 that
  refuses ``return_token_ids`` turns token capture off and tries again.
* **Accounting.** Every call's tokens (and for Anthropic its cache tokens
  and dollars, at :data:`PRICES`) are added up per role and task; a server
  that sends no ``usage`` is counted by its token ids when it returned them,
  and an answer whose log-probs were left out as no log-probabilities
  (:mod:`~coevo.agents.llm.openai_api`) is counted (``refused_logprobs``).
* **Structured output** (:meth:`LLMClient.structured`): a forced tool whose
  parameters are a pydantic model's JSON Schema; a JSON object written as
  text is taken too (servers that cannot force a tool); an answer that is
  cut off, names another tool or does not validate is sent back with the
  exact problem (``repairs`` times) before the call fails.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from coevo.agents.llm import anthropic_api, openai_api
from coevo.agents.llm.breaker import Breaker
from coevo.agents.llm.environment import BASE_URL_VARIABLES, PROVIDERS, key_variable
from coevo.agents.llm.servers import ServedModels, Server, backoff, shown, where
from coevo.agents.llm.structured import structured
from coevo.agents.llm.template import Template, probe
from coevo.agents.llm.text_tools import (
    CALL_CLOSE,
    CALL_OPEN,
    forced_tool,
    opened_with,
    text_messages,
    with_text_calls,
)
from coevo.agents.llm.turns import (
    ContextLengthError,
    Endpoint,
    LLMCallError,
    LLMConfigError,
    Request,
    Sampling,
    Transient,
    Turn,
    Unreachable,
)
from coevo.arena.errors import ConfigError
from coevo.arena.gamelog.rows import UsageRow
from coevo.arena.secrets import redact
from pydantic import BaseModel

__all__ = ["PRICES", "LLMClient", "Usage", "backoff", "shown", "where"]

PRICES: Final[dict[str, tuple[float, float]]] = {
    # dollars per million tokens: (input, output); cache writes cost 1.25× input, reads 0.1×
    "claude-opus": (15.0, 75.0),
    "claude-sonnet": (3.0, 15.0),
    "claude-haiku": (1.0, 5.0),
}
"""Default Anthropic prices by model family (the longest matching prefix of the model name wins).

Check them against Anthropic's price list and pass ``prices`` to override;
an unknown Claude model is priced as Sonnet. Other providers are priced only
when ``prices`` names their models (a self-hosted model costs no dollars)."""

Model = TypeVar("Model", bound=BaseModel)
T = TypeVar("T")

_APIS: Final = {"anthropic": anthropic_api, "openai": openai_api}


@dataclass
class Usage:
    """Tokens and dollars, added up.

    Attributes:
        calls: calls that returned.
        input_tokens: uncached input tokens.
        output_tokens: output tokens.
        cache_write_tokens: input tokens written to the prompt cache.
        cache_read_tokens: input tokens read from the prompt cache.
        dollars: their cost at the prices.
        retries: requests made again after an error status or no answer (a rate limit,
            a restarting server).
        failed_calls: calls that failed after the retries.
        refused_logprobs: answers whose log-probs were left out, as no log-probabilities
            (NaN, an infinity, vLLM's -9999 floor): their turns have none.
    """

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    dollars: float = 0.0
    retries: int = 0
    failed_calls: int = 0
    refused_logprobs: int = 0

    def add(self, other: Usage) -> None:
        """Add ``other`` to this."""
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.dollars += other.dollars
        self.retries += other.retries
        self.failed_calls += other.failed_calls
        self.refused_logprobs += other.refused_logprobs


_TOKEN_REFUSAL: Final = re.compile(r"return_token_ids|logprobs", re.I)


class LLMClient(ServedModels):
    """One client for an LLM role (see the module docstring).

    Args:
        provider: ``anthropic`` or ``openai``.
        model: the model (or LoRA adapter) name; None: ``claude-sonnet-5`` for
            anthropic, the first model the server lists for openai.
        base_url: a server's base URL (``http://host:8000/v1``) or a list of them.
        endpoints: servers each with its own concurrency (instead of ``base_url``).
        api_key_env: the variable holding the key (default: the provider's own).
        concurrency: calls in flight at most per server (unless its endpoint says).
        sampling: sampling parameters for every call.
        max_tokens: the output budget per call (``sampling.max_tokens`` wins).
        timeout: seconds per request.
        max_retries: retries of a failed call (a restarting server is waited for instead).
        reconnect: seconds to wait for a server that answered before and now refuses connections.
        give_up_after: seconds of nothing but error answers after which every call fails at
            once (see the module docstring).
        token_ids: ask for token ids and log-probs (``auto``: yes for openai except
            api.openai.com, and no more once a server refuses them).
        tool_protocol: how tools reach the model: ``native`` (the API's function
            calling), ``text`` (described in the system text, calls written in tags:
            :mod:`~coevo.agents.llm.text_tools`), ``auto`` (text when the server shows
            its chat template ignores tools; openai only).
        token_prompts: token in, token out for agent conversations
            (:class:`~coevo.agents.llm.dialogue.Dialogue`): each turn's prompt is the
            previous prompt, the sampled ids and the rendered messages since, sent as
            token ids (``auto``: when the server renders chat templates, vLLM and SGLang,
            and coevo can read the model's calls from its text).
        extra_body: more fields for every request body, as the server reads them
            (e.g. ``{"chat_template_kwargs": {"enable_thinking": false}}``; openai only).
        owner: what the client works for, for messages (``the solver 'llm-solver'``).
        http_client: a client to send every request through: an ``aiohttp.ClientSession`` (openai), an ``httpx2.AsyncClient`` (anthropic; tests pass a mock transport).
        prices: dollars per million tokens by model-name prefix.

    Raises:
        LLMConfigError: an unknown provider, no servers, or the key's variable is not set.
    """

    def __init__(
        self,
        provider: str = "anthropic",
        model: str | None = None,
        *,
        base_url: str | Sequence[str] | None = None,
        endpoints: Sequence[Endpoint | dict[str, Any]] | None = None,
        api_key_env: str | None = None,
        concurrency: int = 8,
        sampling: Sampling | dict[str, Any] | None = None,
        max_tokens: int = 1024,
        timeout: float = 60.0,
        max_retries: int = 4,
        reconnect: float = 60.0,
        give_up_after: float = 30.0,
        token_ids: bool | Literal["auto"] = "auto",
        tool_protocol: Literal["auto", "native", "text"] = "auto",
        token_prompts: bool | Literal["auto"] = "auto",
        extra_body: dict[str, Any] | None = None,
        owner: str = "an LLM role",
        http_client: Any = None,
        prices: dict[str, tuple[float, float]] | None = None,
    ):
        if provider not in PROVIDERS:
            raise LLMConfigError(
                f"{owner}: unknown provider {provider!r}; providers: {', '.join(PROVIDERS)}"
            )
        self.provider = provider
        self.extra_body = dict(extra_body or {})
        if self.extra_body and provider != "openai":
            raise LLMConfigError(f"{owner}: extra_body is for the openai provider only")
        self.api = _APIS[provider]
        self.owner = owner
        try:
            self.key_variable = key_variable(provider, api_key_env)
        except ConfigError as exc:
            raise LLMConfigError(f"{owner}: {exc}") from None
        key = os.environ.get(self.key_variable)
        if not key:
            raise LLMConfigError(
                f"{owner} needs an API key: set {self.key_variable} in the environment "
                "(any value for a server that checks none; "
                "or use the offline roles: procedural, linear-pg, search, irt)"
            )
        if key != key.strip() or any(ord(c) < 32 or ord(c) == 127 for c in key):
            # an HTTP header cannot carry it, and the error saying so would quote it
            raise LLMConfigError(
                f"{owner}: {self.key_variable} holds spaces or control characters around or in "
                "the key (a line ending copied with it?); set it to the key alone"
            )
        self.model = model or ("claude-sonnet-5" if provider == "anthropic" else None)
        self.sampling = sampling if isinstance(sampling, Sampling) else Sampling(**(sampling or {}))
        self.max_tokens = self.sampling.max_tokens or max_tokens
        self.timeout = timeout
        self.max_retries = max_retries
        self.reconnect = reconnect
        self.breaker = Breaker(give_up_after)
        self.http_client = http_client
        self.prices = dict(PRICES if provider == "anthropic" and prices is None else prices or {})
        self.servers = self._servers(base_url, endpoints, concurrency)
        if provider != "openai" and (tool_protocol == "text" or token_prompts is True):
            raise LLMConfigError(
                f"{owner}: tool_protocol = 'text' and token_prompts = true are for the openai "
                "provider (an OpenAI-compatible server)"
            )
        self.tool_protocol = tool_protocol
        self.token_prompts_setting = token_prompts
        self.protocol: Literal["native", "text"] = "text" if tool_protocol == "text" else "native"
        """The protocol in use (``auto`` is settled by :meth:`connect`)."""
        self.token_prompts = False
        """Whether agent conversations go token in, token out (settled by :meth:`connect`)."""
        self.template: Template | None = None
        """What the server showed of its chat template (openai, after :meth:`connect`)."""
        self.text_ids: dict[str, list[int]] = {}
        """Texts the server has tokenized for token prompts (a required call's opening tag)."""
        self.token_ids = (
            token_ids
            if token_ids != "auto"
            else provider == "openai"
            and not any(openai_api.is_openai_itself(s.url) for s in self.servers)
        )
        self.openai_itself = provider == "openai" and any(
            openai_api.is_openai_itself(s.url) for s in self.servers
        )
        """Whether the servers are OpenAI's own API (sent only the sampling parameters set)."""
        self.usage: dict[tuple[str, str], Usage] = defaultdict(Usage)
        self._loop: asyncio.AbstractEventLoop | None = None
        # calls waiting for a slot, oldest first
        self._waiting: deque[asyncio.Future[None]] = deque()

    def _servers(
        self,
        base_url: str | Sequence[str] | None,
        endpoints: Sequence[Endpoint | dict[str, Any]] | None,
        concurrency: int,
    ) -> list[Server]:
        self._defaulted = False  # the provider's public API, for want of any address
        if endpoints and base_url:
            raise LLMConfigError(f"{self.owner}: give base_url or endpoints, not both")
        if endpoints:
            parsed = [e if isinstance(e, Endpoint) else Endpoint(**e) for e in endpoints]
            return [Server(e.base_url.rstrip("/"), e.concurrency or concurrency) for e in parsed]
        urls = [base_url] if isinstance(base_url, str) else list(base_url or [])
        if not urls:
            given = os.environ.get(BASE_URL_VARIABLES[self.provider])
            self._defaulted = not given
            urls = [given or self.api.DEFAULT_BASE_URL]
        return [Server(url.rstrip("/"), concurrency) for url in urls]

    # ---- sampling -----------------------------------------------------------------------

    def request_sampling(self, *, text_calls: bool, seed: int | None = None) -> Sampling:
        """A call's sampling parameters: the role's, with the call's ``seed``, and ending at a text call's closing tag.

        Args:
            text_calls: the call speaks the text protocol: generation stops at
                ``</tool_call>`` (one call per turn; nothing the model writes after its
                call, such as an imagined result, is sampled into the trained tokens).
            seed: the call's seed (None: ``sampling.seed``).
        """
        update: dict[str, Any] = {}
        if seed is not None:
            update["seed"] = seed
        if text_calls and CALL_CLOSE not in (self.sampling.stop or []):
            update["stop"] = [*(self.sampling.stop or []), CALL_CLOSE]
        return self.sampling.model_copy(update=update) if update else self.sampling

    def recorded_sampling(self, *, text_calls: bool, seed: int | None = None) -> dict[str, Any]:
        """What a trajectory records of its calls' sampling: the parameters as sent, with the output budget.

        For an OpenAI-compatible server the neutral values filled in and ``extra_body``'s
        word taken (:func:`~coevo.agents.llm.openai_api.sent_sampling`), so a trainer
        reads from the record the distribution each rollout was sampled from; for
        Anthropic, the parameters set.

        Args:
            text_calls: the calls speak the text protocol (:meth:`request_sampling`).
            seed: the calls' seed (None: ``sampling.seed``).
        """
        sampling = self.request_sampling(text_calls=text_calls, seed=seed)
        if self.provider == "openai":
            sent = openai_api.sent_sampling(
                sampling, self.extra_body, openai_itself=self.openai_itself
            )
        else:
            sent = sampling.model_dump(exclude_none=True, exclude={"max_tokens"})
        return {"max_tokens": self.max_tokens, **sent}

    # ---- the key, and what may be logged ------------------------------------------------

    def _key(self) -> str:
        key = os.environ.get(self.key_variable)
        if not key:
            raise LLMCallError(f"{self.key_variable} is no longer set in the environment")
        return key

    def redact(self, text: str) -> str:
        """``text`` without secrets (:func:`coevo.arena.secrets.redact`, the key's variable counted), for anything logged or recorded.

        A key shorter than 8 characters is taken for a placeholder and left alone.
        """
        return redact(text)

    # ---- start-up -----------------------------------------------------------------------

    def connect(self) -> str | None:
        """Check every server and settle the model (openai; anthropic checks nothing here).

        Returns:
            The model the calls will name.

        Raises:
            LLMConfigError: a server cannot be reached, refuses the key, lists no
                model, or does not serve the one named (the message names both).
        """
        if self.provider != "openai":
            return self.model
        for server in self.servers:
            try:
                served = openai_api.models_now(server.url, self._key(), min(self.timeout, 10.0))
            except Unreachable as exc:
                variable = BASE_URL_VARIABLES["openai"]
                where_from = (
                    f"no base_url is set and neither is {variable}, so the public API was tried"
                    if self._defaulted
                    else f"set by the role's base_url or endpoints, or {variable}"
                )
                raise LLMConfigError(
                    self.redact(
                        f"{self.owner}: the server at {shown(server.url)} could not be reached "
                        f"({exc}); is it running? ({where_from})"
                    )
                ) from None
            except (LLMCallError, Transient) as exc:
                status = exc.status if isinstance(exc, LLMCallError) else None
                hint = (
                    f" (check the key in {self.key_variable})"
                    if status in (401, 403)
                    else " (is it an OpenAI-compatible server? Its base URL usually ends in /v1)"
                    if status == 404
                    else ""
                )
                raise LLMConfigError(
                    self.redact(
                        f"{self.owner}: the server at {shown(server.url)} did not list its models: {exc}{hint}"
                    )
                ) from None
            server.answered()
            if not served:
                raise LLMConfigError(
                    f"{self.owner}: the server at {shown(server.url)} serves no model"
                )
            if self.model is None:
                self.model = served[0]
            elif self.model not in served:
                raise LLMConfigError(
                    f"{self.owner}: the server at {shown(server.url)} does not serve the model "
                    f"{self.model!r}; it serves: {', '.join(served)}"
                )
        self._settle_protocol()
        return self.model

    def _settle_protocol(self) -> None:
        """Settle ``auto`` for the tool protocol and token prompts from what the first server shows."""
        if self.template is not None:
            return
        first = self.servers[0]
        wanted_tokens = self.token_prompts_setting
        if openai_api.is_openai_itself(first.url) or (
            self.tool_protocol != "auto" and wanted_tokens is False
        ):
            self.template = Template(renders=False, note="not asked")
        else:
            assert self.model is not None
            self.template = probe(
                first.url,
                self._key(),
                min(self.timeout, 10.0),
                self.model,
                self.extra_body.get("chat_template_kwargs"),
            )
        template = self.template
        if self.tool_protocol == "auto":
            self.protocol = "native" if template.describes_tools or not template.renders else "text"
        readable = self.protocol == "text" or template.hermes_calls
        if wanted_tokens is True and not (template.renders and readable):
            why = (
                template.note or "it renders no chat template on request"
                if not template.renders
                else "its chat template writes tool calls in a format coevo does not read "
                "(the Hermes format, <tool_call>{...}</tool_call>); set tool_protocol = 'text'"
            )
            raise LLMConfigError(
                f"{self.owner}: token_prompts = true needs a server that renders the chat "
                f"template (vLLM, SGLang) and calls coevo can read; the server at "
                f"{shown(first.url)} cannot: {why}"
            )
        self.token_prompts = bool(wanted_tokens) and template.renders and readable

    # ---- servers and slots --------------------------------------------------------------

    def _bind(self) -> None:
        """The slots and SDK clients of the running event loop (each batch runs in its own)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            self._waiting.clear()
            for server in self.servers:
                server.in_flight = 0
                server.sdk = self.api.make_sdk(
                    server.url, self._key(), self.timeout, self.http_client, server.limit
                )

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` (the role's calls for one batch) in an event loop of its own, then close its connections.

        A role's methods are synchronous (Ray calls them one batch at a time);
        each batch's calls run concurrently in this loop, and the SDK clients
        of the loop are closed before it ends (a client given as
        ``http_client`` is the caller's to close).
        """

        async def whole() -> T:
            try:
                return await work
            finally:
                await self.release()

        return asyncio.run(whole())

    async def release(self) -> None:
        """Close the running loop's SDK clients (a client also used inside another client's :meth:`run` calls this before that loop ends)."""
        for server in self.servers:
            if server.sdk is not None and self.http_client is None:
                await server.sdk.close()
            server.sdk = None
        self._loop = None

    async def _acquire(self) -> Server:
        """A slot on the least busy server that is not resting (waiting, oldest first, for one)."""
        self._bind()
        while True:
            now = time.monotonic()
            free = [s for s in self.servers if s.in_flight < s.limit]
            awake = [s for s in free if s.resting_until <= now]
            if awake:
                server = min(awake, key=lambda s: s.in_flight / s.limit)
                server.in_flight += 1
                return server
            due = min((s.resting_until for s in free), default=None)
            woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.append(woken)
            try:
                await asyncio.wait_for(asyncio.shield(woken), None if due is None else due - now)
            except TimeoutError:
                pass  # a server's rest is over: look again
            except BaseException:
                if woken.done():
                    self._wake()  # woken, then cancelled: the freed slot goes to the next in line
                raise
            finally:
                if not woken.done():
                    woken.cancel()

    def _release(self, server: Server, rest: float = 0.0) -> None:
        """Give the slot back (the server resting ``rest`` seconds) and wake the oldest waiting call."""
        server.in_flight -= 1
        if rest > 0:
            server.resting_until = max(server.resting_until, time.monotonic() + rest)
        self._wake()

    def _wake(self, *, every: bool = False) -> None:
        """Wake the oldest waiting call (or ``every`` one: the servers' rests were called off)."""
        while self._waiting:
            woken = self._waiting.popleft()
            if not woken.done():
                woken.set_result(None)
                if not every:
                    return

    # ---- calls --------------------------------------------------------------------------

    async def create(
        self,
        *,
        role: str,
        task: str,
        messages: Sequence[dict[str, Any]],
        system: str | None = None,
        tools: Sequence[dict[str, Any]] = (),
        tool_choice: str | dict[str, Any] | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> Turn:
        """One call, accounted to ``role`` and ``task``.

        Args:
            role: who spends it (``synthesizer``, ``solver``, ``judge``, ``world_model``).
            task: what it is spent on (a task id, or a label).
            messages: the conversation in the Chat Completions format.
            system: a system message to put first (or give it in ``messages``).
            tools: OpenAI function tools.
            tool_choice: ``auto``, ``required`` or a named function.
            max_tokens: this call's output budget (default: the client's).
            seed: this call's sampling seed (default: ``sampling.seed``).

        Raises:
            ContextLengthError: the conversation no longer fits the model.
            LLMCallError: the call failed after the retries, or the answer is unusable.
        """
        if self.model is None:
            self.connect()
        assert self.model is not None
        conversation = ([{"role": "system", "content": system}] if system else []) + list(messages)
        text = self.protocol == "text" and bool(tools)
        opened = text and tool_choice == "required"
        extra = self.extra_body
        if text:
            conversation = text_messages(conversation, tools, forced_tool(tool_choice))
        if opened:
            # a call is required: the assistant's turn begins with the call's tag, and the
            # model continues it (vLLM, SGLang)
            conversation = [*conversation, {"role": "assistant", "content": CALL_OPEN}]
            extra = {**extra, "continue_final_message": True, "add_generation_prompt": False}
        request = Request(
            model=self.model,
            messages=conversation,
            tools=[] if text else list(tools),
            tool_choice=None if text else tool_choice,
            max_tokens=max_tokens or self.max_tokens,
            sampling=self.request_sampling(text_calls=text, seed=seed),
            token_ids=bool(self.token_ids),
            extra_body=extra,
            keep_stop=text,
        )
        asked = [request]

        def send(sdk: Any) -> Awaitable[Turn]:
            return self.api.complete(sdk, asked[0])

        def refused(exc: LLMCallError) -> bool:
            """A server that refuses token ids: stop asking, and ask again without."""
            if not (asked[0].token_ids and exc.status == 400 and _TOKEN_REFUSAL.search(str(exc))):
                return False
            self.token_ids = False
            asked[0] = dataclasses.replace(asked[0], token_ids=False)
            return True

        turn = await self.call(send, role=role, task=task, again=refused)
        if opened:
            turn = opened_with(turn, CALL_OPEN)
        if text:
            turn = with_text_calls(turn, f"call_{sum(m['role'] == 'assistant' for m in messages)}_")
        return turn

    async def call(
        self,
        send: Callable[[Any], Awaitable[T]],
        *,
        role: str,
        task: str,
        again: Callable[[LLMCallError], bool] | None = None,
        model_call: bool = True,
    ) -> T:
        """``send(connection)`` on a free server under the client's retry policy, accounted to ``role`` and ``task``.

        Args:
            send: the request, given a server's connection.
            role: who spends it.
            task: what it is spent on.
            again: for an error status not worth retrying: whether to send again (having
                changed the request), instead of failing.
            model_call: the answer is a :class:`Turn` to account (False: a tokenize call).

        Raises:
            ContextLengthError: the conversation no longer fits the model.
            LLMCallError: the call failed after the retries, or the answer is unusable.
        """
        spent = self.usage[(role, task)]
        try:
            answer = await self._call(send, spent, again)
        except ContextLengthError:
            raise  # the conversation outgrew the model: not a failed call
        except LLMCallError:
            spent.failed_calls += model_call
            raise
        if model_call:
            assert isinstance(answer, Turn)
            self._account(role, task, answer)
        return answer

    async def _call(
        self,
        send: Callable[[Any], Awaitable[T]],
        spent: Usage,
        again: Callable[[LLMCallError], bool] | None,
    ) -> T:
        retries = 0
        while True:
            server = await self._acquire()
            if self.breaker.gave_up is not None:  # given up (while this call waited): no request
                self._release(server)
                self.breaker.check()
            rest = 0.0
            try:
                turn = await send(server.sdk)
            except Transient as exc:
                retries += 1
                server.answered()  # an error status is an answer: the server is up
                rest = self.breaker.rest(exc.retry_after, backoff(retries))
                what = f"{self.api.API} at {where(server.url)} answered {exc.status}: {exc}"
                if why := self.breaker.failed(rest, exc.retry_after, what, self.owner):
                    rest = 0.0
                    raise LLMCallError(self.redact(why)) from None
                if retries > self.max_retries:
                    raise LLMCallError(
                        self.redact(
                            f"{self.api.API} at {where(server.url)} answered {exc.status} "
                            f"after {self.max_retries} retries: {exc}"
                        )
                    ) from None
                spent.retries += 1
                continue
            except Unreachable as exc:
                retries += 1
                now = time.monotonic()
                server.failures += 1
                if server.reached and not exc.timeout and server.refusing_since is None:
                    server.refusing_since = now  # it answered before: restarting, so wait for it
                rest = backoff(server.failures)
                restarting = any(
                    s.refusing_since is not None and now - s.refusing_since < self.reconnect
                    for s in self.servers
                )
                if retries <= self.max_retries or restarting:
                    spent.retries += 1
                    continue  # this server again once it is due, or another one
                # this call gives up; the next ones try the failing servers at once (nothing is
                # left to wait for), while a rest a server asked for (retry-after) stands
                rest = 0.0
                for given_up in self.servers:
                    if given_up.failures:
                        given_up.resting_until = 0.0
                self._wake(every=True)
                waited = (
                    f"for {self.reconnect:g} s"
                    if server.refusing_since is not None
                    else f"after {self.max_retries} retries"
                )
                raise LLMCallError(
                    self.redact(
                        f"{self.api.API} at {where(server.url)} could not be reached {waited}: {exc}"
                    )
                ) from None
            except ContextLengthError:
                raise
            except LLMCallError as exc:
                status = exc.status
                if again is not None and again(exc):
                    spent.retries += 1
                    continue
                hint = f" (check the key in {self.key_variable})" if status in (401, 403) else ""
                raise LLMCallError(self.redact(f"{exc}{hint}"), status) from None
            finally:
                self._release(
                    server, rest
                )  # exactly once, whatever happened (a cancelled call too)
            server.answered()
            self.breaker.answered()
            return turn

    def _account(self, role: str, task: str, turn: Turn) -> None:
        read, written = turn.cache_read_tokens, turn.cache_write_tokens
        given = turn.input_tokens
        taken = turn.output_tokens
        if given is None:
            given = len(turn.prompt_ids) if turn.prompt_ids is not None else 0
        if taken is None:
            taken = len(turn.completion_ids) if turn.completion_ids is not None else 0
        price = self._price(turn.model or self.model or "")
        dollars = 0.0
        if price is not None:
            dollars = (
                given * price[0]
                + taken * price[1]
                + written * price[0] * 1.25
                + read * price[0] * 0.1
            ) / 1e6
        refused = int(turn.logprobs_refused is not None)
        self.usage[(role, task)].add(
            Usage(1, given, taken, written, read, dollars, refused_logprobs=refused)
        )

    def _price(self, model: str) -> tuple[float, float] | None:
        best = max((p for p in self.prices if model.startswith(p)), key=len, default=None)
        if best is not None:
            return self.prices[best]
        return (3.0, 15.0) if self.provider == "anthropic" else None

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

    # ---- structured output --------------------------------------------------------------

    async def structured(
        self,
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
        """A call whose answer must be ``model`` (:func:`coevo.agents.llm.structured.structured`)."""
        return await structured(
            self,
            model,
            role=role,
            task=task,
            system=system,
            messages=messages,
            name=name,
            repairs=repairs,
            record=record,
        )
