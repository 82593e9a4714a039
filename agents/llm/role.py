"""What every LLM role shares: the settings that choose its provider, servers, model and sampling, and its client.

Every LLM role (``llm-*`` and ``claude*``) takes these settings in the
``config`` of its experiment table, beside its own:

==================  ================================================================
``provider``        ``openai`` (any Chat Completions server) or ``anthropic``;
                    ``llm-*`` roles default to openai, ``claude*`` to anthropic
``model``           the model or LoRA adapter name; unset: the server's first
                    (openai), ``claude-sonnet-5`` (anthropic)
``base_url``        a server, or a list of servers; unset: ``OPENAI_BASE_URL``
                    or ``ANTHROPIC_BASE_URL``, else the provider's public API
``endpoints``       ``[{base_url, concurrency}]``: servers with their own limits
``api_key_env``     the *name* of the variable holding the key (never the key)
``concurrency``     calls in flight at most per server (64 openai, 8 anthropic)
``sampling``        ``{temperature, top_p, max_tokens, seed, stop, top_k, ...}``
``max_tokens``      the output budget per call (``sampling.max_tokens`` wins)
``timeout``         seconds per request
``max_retries``     retries of a failed call
``reconnect``       seconds to wait for a server that is restarting
``give_up_after``   seconds of nothing but error answers (429, 5xx, 529) after
                    which the role's calls fail at once (30)
``token_ids``       ask for token ids and log-probs (``auto``, true, false)
``tool_protocol``   ``native`` function calling, ``text`` (tools in the system
                    text, calls in ``<tool_call>`` tags), ``auto`` (text when the
                    server's chat template ignores tools)
``token_prompts``   token in, token out for agent conversations (``auto``:
                    when the server renders chat templates: vLLM, SGLang)
``extra_body``      more request-body fields (``chat_template_kwargs``, ...; openai)
``policy_version``  how the policy is named in the log (default: the model)
==================  ================================================================

See :mod:`coevo.agents.llm.client` for what the client does with them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal

from coevo.agents.llm.client import LLMClient
from coevo.agents.llm.openai_api import sent_sampling
from coevo.agents.llm.turns import Endpoint, Sampling
from coevo.arena.gamelog.rows import UsageRow

__all__ = ["LLMRole"]

_CLIENT_SETTINGS: Final = (
    "model",
    "provider",
    "base_url",
    "endpoints",
    "api_key_env",
    "concurrency",
    "sampling",
    "max_tokens",
    "timeout",
    "max_retries",
    "reconnect",
    "give_up_after",
    "token_ids",
    "tool_protocol",
    "token_prompts",
    "extra_body",
    "http_client",
)


class LLMRole:
    """The base of the LLM roles: builds and checks the client from the shared settings.

    Args:
        model: the model (or adapter) name; None: the server's first model (openai),
            ``claude-sonnet-5`` (anthropic).
        provider: ``openai`` or ``anthropic`` (None: the role's own default).
        base_url: a server's base URL, or a list of them.
        endpoints: servers each with its own concurrency limit (instead of ``base_url``).
        api_key_env: the variable that holds the key (default: ``OPENAI_API_KEY`` or ``ANTHROPIC_API_KEY``).
        concurrency: calls in flight at most per server (None: 64 for openai, 8 for anthropic).
        sampling: sampling parameters for every call.
        max_tokens: the output budget per call (None: the role's default).
        timeout: seconds per request.
        max_retries: retries of a failed call.
        reconnect: seconds to wait for a server that answered before and now refuses connections.
        give_up_after: seconds in which every request was answered with an error status
            (an outage, an overload) after which the role gives up: its calls fail at once.
        token_ids: ask the server for token ids and log-probs (``auto``: unless it is OpenAI's own API).
        tool_protocol: how tools reach the model: ``native``, ``text`` (the text protocol of
            :mod:`~coevo.agents.llm.text_tools`) or ``auto`` (text when the server shows its
            chat template ignores tools).
        token_prompts: token in, token out for agent conversations: ``auto`` (when the server
            renders chat templates and coevo reads the model's calls), true (required), false.
        extra_body: more fields for every request body, as the server reads them (openai only),
            e.g. ``{chat_template_kwargs = {enable_thinking = false}}`` for Qwen3 on vLLM.
        policy_version: how the policy is named in the log (default: the model's name).
        http_client: a client to send every request through: an ``aiohttp.ClientSession`` (openai), an ``httpx2.AsyncClient`` (anthropic; tests pass a mock transport).

    Raises:
        LLMConfigError: the key's variable is unset, a server cannot be reached, or it
            does not serve the model (the message names the role, the URL and the model).
    """

    kind: ClassVar[str]
    name: ClassVar[str]
    settings_from_bases: ClassVar[bool] = True  # a role's **client are these settings
    default_provider: ClassVar[str] = "openai"
    default_max_tokens: ClassVar[int] = 1024

    def __init__(
        self,
        model: str | None = None,
        *,
        provider: Literal["openai", "anthropic"] | None = None,
        base_url: str | list[str] | None = None,
        endpoints: list[Endpoint] | None = None,
        api_key_env: str | None = None,
        concurrency: int | None = None,
        sampling: Sampling | None = None,
        max_tokens: int | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
        reconnect: float = 60.0,
        give_up_after: float = 30.0,
        token_ids: bool | Literal["auto"] = "auto",
        tool_protocol: Literal["auto", "native", "text"] = "auto",
        token_prompts: bool | Literal["auto"] = "auto",
        extra_body: dict[str, Any] | None = None,
        policy_version: str | None = None,
        http_client: Any = None,
    ):
        self.client = self._client(
            model,
            provider=provider,
            base_url=base_url,
            endpoints=endpoints,
            api_key_env=api_key_env,
            concurrency=concurrency,
            sampling=sampling,
            max_tokens=max_tokens,
            timeout=timeout,
            max_retries=max_retries,
            reconnect=reconnect,
            give_up_after=give_up_after,
            token_ids=token_ids,
            tool_protocol=tool_protocol,
            token_prompts=token_prompts,
            extra_body=extra_body,
            http_client=http_client,
        )
        self.client.connect()
        self.version = policy_version or self.client.model or self.name

    @classmethod
    def _client(
        cls,
        model: str | None,
        *,
        provider: str | None,
        concurrency: int | None,
        max_tokens: int | None,
        **settings: Any,
    ) -> LLMClient:
        chosen = provider or cls.default_provider
        return LLMClient(
            chosen,
            model,
            concurrency=concurrency or (64 if chosen == "openai" else 8),
            max_tokens=max_tokens or cls.default_max_tokens,
            owner=f"the {cls.kind} {cls.name!r}",
            **settings,
        )

    @classmethod
    def preflight(cls, settings: Any) -> None:
        """Check, before a run starts, that the key is set and the servers answer and serve the model.

        Raises:
            LLMConfigError: naming the role, the URL and the model.
        """
        given = {k: getattr(settings, k) for k in _CLIENT_SETTINGS}
        cls._client(given.pop("model"), **given).connect()

    @classmethod
    def load_adapter(cls, settings: Any, name: str, path: str) -> bool:
        """Have the servers these settings name load the LoRA adapter at ``path`` as ``name`` (a trainer's new policy).

        Returns:
            True when a server loaded it now; False when every one had it already.

        Raises:
            LLMConfigError: a server refused or could not be reached (naming it).
        """
        given = {k: getattr(settings, k) for k in _CLIENT_SETTINGS}
        return cls._client(given.pop("model"), **given).load_adapter(name, path)

    @classmethod
    def unload_adapter(cls, settings: Any, name: str) -> bool:
        """Have the servers these settings name unload the LoRA adapter ``name`` (a trainer's old policy).

        Returns:
            True when a server unloaded it now; False when none held it.

        Raises:
            LLMConfigError: a server refused or could not be reached (naming it).
        """
        given = {k: getattr(settings, k) for k in _CLIENT_SETTINGS}
        return cls._client(given.pop("model"), **given).unload_adapter(name)

    @classmethod
    def sent_sampling(cls, settings: Any) -> dict[str, Any]:
        """The sampling parameters the role's calls send to an OpenAI-compatible server (not OpenAI's own).

        The neutral values filled in and ``extra_body``'s word taken
        (:func:`~coevo.agents.llm.openai_api.sent_sampling`); what a trainer checks
        before a run starts. Needs no key and no server.
        """
        sampling = settings.sampling
        if not isinstance(sampling, Sampling):
            sampling = Sampling(**(sampling or {}))
        return sent_sampling(sampling, settings.extra_body)

    @classmethod
    def check_served(cls, settings: Any, name: str) -> None:
        """Check that the servers these settings name serve the model ``name`` (a trainer's new policy).

        Raises:
            LLMConfigError: a server does not list it (naming it and what it serves).
        """
        given = {k: getattr(settings, k) for k in _CLIENT_SETTINGS}
        given.pop("model")
        cls._client(name, **given).check_served(name)

    def drain_usage(self) -> list[UsageRow]:
        """What this role spent since the last call, per task; then forgotten."""
        return self.client.drain()
