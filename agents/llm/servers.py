"""A role's servers: each one's state at run time, how a URL is shown, and what the servers serve.

* :class:`Server`: one endpoint's slots, whether it ever answered, and until
  when it rests (the client's retry policy reads and writes it);
* :func:`backoff`, :func:`shown`, :func:`where`: the wait before a retry, and
  a base URL as messages show it (never its credentials);
* :class:`ServedModels`: the calls that change or check which models the
  servers serve, made outside any batch's event loop: a trainer's LoRA
  adapter loaded (vLLM's ``/v1/load_lora_adapter``), an old one unloaded
  (``/v1/unload_lora_adapter``), an announced model checked. A base of
  :class:`~coevo.agents.llm.client.LLMClient`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from coevo.agents.llm import openai_api
from coevo.agents.llm.turns import LLMCallError, LLMConfigError, Transient, Unreachable

__all__ = ["ServedModels", "Server", "backoff", "shown", "where"]

T = TypeVar("T")


def backoff(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, ...) when the server did not say: 0.5 s doubling, at most 8."""
    return min(0.5 * 2 ** (attempt - 1), 8.0)


def shown(url: str) -> str:
    """A base URL as messages show it: without the user and password it may hold."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return parts._replace(netloc=netloc).geturl()


def where(url: str) -> str:
    """``host:port`` of a base URL, without any credentials it holds (for messages)."""
    parts = urlsplit(url)
    host = parts.hostname or url
    return f"{host}:{parts.port}" if parts.port else host


@dataclass
class Server:
    """One endpoint at run time: its slots, whether it ever answered, and until when it rests."""

    url: str
    limit: int
    in_flight: int = 0
    reached: bool = False
    resting_until: float = 0.0
    failures: int = 0  # calls in a row that got no answer from it
    refusing_since: float | None = None  # when a server that had answered began to refuse
    sdk: Any = None

    def answered(self) -> None:
        """The server answered (a completion or an error status): it is up, and its failures are over."""
        self.reached = True
        self.failures = 0
        self.refusing_since = None


class ServedModels:
    """Load, unload and check the models a role's servers serve (a base of :class:`~coevo.agents.llm.client.LLMClient`).

    Attributes:
        provider: ``openai`` or ``anthropic``.
        owner: what the client works for, for messages.
        servers: the role's servers.
        model: the model the calls name.
        timeout: seconds per request.
        max_retries: retries of a call whose server answers a status worth retrying.
        reconnect: seconds to wait for a server that refuses connections.
    """

    provider: str
    owner: str
    servers: list[Server]
    model: str | None
    timeout: float
    max_retries: int
    reconnect: float

    def _key(self) -> str:
        raise NotImplementedError  # the client's: read from the environment at each use

    def redact(self, text: str) -> str:
        """``text`` without secrets (the client's)."""
        raise NotImplementedError

    def load_adapter(self, name: str, path: str) -> bool:
        """Have every server load the LoRA adapter at ``path`` as the model ``name``; calls name it from now on.

        A server that has it already (a resumed run asks again) is fine, if it
        loaded it from ``path``: a name two versions share would play the wrong weights.
        A server that does not answer is asked again (``max_retries``, with backoff).

        Returns:
            True when a server loaded it now; False when every server had it already
            (loaded by an earlier process, or by an operator).

        Raises:
            LLMConfigError: not an OpenAI-compatible provider, or a server refused, could
                not be reached, or holds another adapter of that name (naming the server).
        """
        if self.provider != "openai":
            raise LLMConfigError(
                f"{self.owner}: only an OpenAI-compatible server (vLLM) loads LoRA adapters; "
                "announce a model name instead"
            )
        loaded = False
        for server in self.servers:
            now, roots = self._on(
                server,
                f"did not load the LoRA adapter {name!r} from {path}",
                lambda url: (
                    openai_api.load_lora_adapter(
                        url, self._key(), min(self.timeout, 60.0), name, path
                    ),
                    openai_api.model_roots(url, self._key(), min(self.timeout, 10.0)),
                ),
            )
            loaded = loaded or now
            if name not in roots:
                raise LLMConfigError(
                    f"{self.owner}: the server at {shown(server.url)} accepted the LoRA adapter "
                    f"{name!r} but does not list it; it serves: {', '.join(roots)}"
                )
            if roots[name] not in (None, path):
                raise LLMConfigError(
                    f"{self.owner}: the server at {shown(server.url)} has an adapter named {name!r} "
                    f"loaded from {roots[name]}, not {path}: give each policy version a name of its "
                    "own (a trainer names them after its run), or unload the old one"
                )
        self.model = name
        return loaded

    def unload_adapter(self, name: str) -> bool:
        """Have every server unload the LoRA adapter ``name`` (vLLM's ``/unload_lora_adapter``).

        For a trainer's old policy that no rollout will play again. Each server is asked
        once, with no retries (the caller asks again later); every server is asked even
        when one fails.

        Returns:
            True when a server unloaded it now; False when none held it.

        Raises:
            LLMConfigError: not an OpenAI-compatible provider, or a server refused or could
                not be reached (naming each; the others have unloaded it).
        """
        if self.provider != "openai":
            raise LLMConfigError(
                f"{self.owner}: only an OpenAI-compatible server (vLLM) unloads LoRA adapters"
            )
        unloaded = False
        problems = []
        for server in self.servers:
            try:
                unloaded = (
                    openai_api.unload_lora_adapter(
                        server.url, self._key(), min(self.timeout, 60.0), name
                    )
                    or unloaded
                )
            except (LLMCallError, Transient, Unreachable) as exc:
                problems.append(f"the server at {shown(server.url)}: {exc}")
        if problems:
            raise LLMConfigError(
                self.redact(
                    f"{self.owner}: the LoRA adapter {name!r} was not unloaded from "
                    + "; ".join(problems)
                )
            )
        return unloaded

    def check_served(self, name: str) -> None:
        """Check that every server serves the model ``name`` (a trainer's announced policy).

        Raises:
            LLMConfigError: a server does not list it, or could not be reached (naming both).
        """
        if self.provider != "openai":
            return  # the Messages API lists no models to check against
        for server in self.servers:
            served = self._on(
                server,
                "did not list its models",
                lambda url: openai_api.models_now(url, self._key(), min(self.timeout, 10.0)),
            )
            if name not in served:
                raise LLMConfigError(
                    f"{self.owner}: the server at {shown(server.url)} does not serve the model "
                    f"{name!r} the trainer announced; it serves: {', '.join(served)}"
                )

    def _on(self, server: Server, doing: str, call: Callable[[str], T]) -> T:
        """``call(server.url)``, asked again while the server does not answer.

        An error status is retried ``max_retries`` times with backoff; a server that
        refuses connections (restarting, as vLLM does to load new weights) is waited
        for up to ``reconnect`` seconds.
        """
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                return call(server.url)
            except Unreachable as exc:
                problem: Exception = exc
                if time.monotonic() - started >= self.reconnect and attempt >= self.max_retries:
                    break
            except Transient as exc:
                problem = exc
                if attempt >= self.max_retries:
                    break
            except LLMCallError as exc:
                problem = exc
                break
            time.sleep(backoff(attempt))
            attempt += 1
        # a 404 of the route itself ("Not Found"), not of an adapter's folder the server cannot find
        route_missing = isinstance(problem, LLMCallError) and (
            problem.status == 405
            or (problem.status == 404 and "adapter" not in str(problem).lower())
        )
        hint = (
            " (does it serve adapters? start vLLM with --enable-lora and "
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True)"
            if route_missing
            else ""
        )
        raise LLMConfigError(
            self.redact(f"{self.owner}: the server at {shown(server.url)} {doing}: {problem}{hint}")
        ) from None
