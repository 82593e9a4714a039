"""A local fake of the Messages API (the only fake allowed: no network here), behind httpx2's MockTransport.

``FakeMessages(policy)`` answers each POST /v1/messages with what
``policy(body)`` returns: a message dict (``message(...)`` builds a realistic
one, with usage), or an ``(status, headers, body)`` tuple for errors. Every
request body is recorded in ``requests`` so tests can inspect what was sent.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import httpx2

_ids = itertools.count(1)


def message(
    content: list[dict[str, Any]],
    stop_reason: str = "end_turn",
    *,
    usage: tuple[int, int, int, int] = (120, 40, 0, 0),
    model: str = "claude-sonnet-5",
) -> dict[str, Any]:
    """A Messages API response body: content blocks, stop reason, usage (input, output, cache write, cache read)."""
    return {
        "id": f"msg_{next(_ids):024d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage[0],
            "output_tokens": usage[1],
            "cache_creation_input_tokens": usage[2],
            "cache_read_input_tokens": usage[3],
        },
    }


def tool_use(name: str, arguments: dict[str, Any], text: str | None = None) -> list[dict[str, Any]]:
    """Content blocks of a turn that calls one tool (with a sentence of reasoning first, as Claude does)."""
    blocks: list[dict[str, Any]] = []
    if text:
        blocks.append({"type": "text", "text": text})
    blocks.append(
        {"type": "tool_use", "id": f"toolu_{next(_ids):020d}", "name": name, "input": arguments}
    )
    return blocks


def error(
    status: int, kind: str, text: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], dict[str, Any]]:
    """An API error response, shaped like the real ones."""
    return status, headers or {}, {"type": "error", "error": {"type": kind, "message": text}}


class FakeMessages:
    """The fake server: a policy per request, every request recorded."""

    def __init__(self, policy: Callable[[dict[str, Any]], Any]):
        self.policy = policy
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path.endswith("/v1/messages"), request.url
        body = json.loads(request.content)
        self.requests.append(body)
        answer = self.policy(body)
        if isinstance(answer, tuple):
            status, headers, payload = answer
            return httpx2.Response(status, headers=headers, json=payload)
        return httpx2.Response(200, json=answer)

    def client(self) -> httpx2.AsyncClient:
        """An async HTTP client whose requests this fake answers."""
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self))
