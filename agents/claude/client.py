"""The client of the ``claude*`` roles: :class:`~coevo.agents.llm.client.LLMClient` with Anthropic as the provider.

Kept for older imports and for code that makes a Claude client by hand;
everything it does is :mod:`coevo.agents.llm.client`'s.
"""

from __future__ import annotations

from typing import Any

from coevo.agents.llm.client import PRICES, LLMClient, Usage
from coevo.agents.llm.turns import LLMCallError, LLMConfigError
from coevo.arena.secrets import redact as redact_secrets

__all__ = ["PRICES", "ClaudeCallError", "ClaudeClient", "ClaudeConfigError", "Usage", "redact"]

ClaudeCallError = LLMCallError
"""A call failed after the retries, or its answer was unusable."""
ClaudeConfigError = LLMConfigError
"""The Claude roles cannot start (no API key, a bad setting)."""


def redact(text: str) -> str:
    """``text`` without secrets (the one rule: :func:`coevo.arena.secrets.redact`), for anything that may be logged."""
    return redact_secrets(text)


class ClaudeClient(LLMClient):
    """An :class:`~coevo.agents.llm.client.LLMClient` for Anthropic's Messages API.

    Args:
        model: the model name.
        max_tokens: the output budget per call.
        concurrency: calls in flight at most.
        timeout: seconds per request.
        max_retries: retries of a failed call.
        http_client: an ``httpx2.AsyncClient`` (tests pass one with a mock transport).
        prices: dollars per million tokens by model-name prefix (default :data:`PRICES`).

    Raises:
        ClaudeConfigError: ``ANTHROPIC_API_KEY`` is not set.
    """

    def __init__(
        self,
        model: str = "claude-sonnet-5",
        *,
        max_tokens: int = 2048,
        concurrency: int = 8,
        timeout: float = 60.0,
        max_retries: int = 4,
        http_client: Any = None,
        prices: dict[str, tuple[float, float]] | None = None,
    ):
        super().__init__(
            "anthropic",
            model,
            max_tokens=max_tokens,
            concurrency=concurrency,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
            prices=prices,
            owner="the Claude roles",
        )
