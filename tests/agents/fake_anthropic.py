"""A local fake of the Messages API (the only fake allowed: no network here), behind httpx2's MockTransport.

``FakeMessages(policy)`` answers each POST /v1/messages with what
``policy(body)`` returns: a message dict (``message(...)`` builds a realistic
one, with usage), an ``(status, headers, body)`` tuple for errors, or an
``httpx2.Response`` as it is (``html_page()``: a proxy's 200 page that is not
JSON). Every request body is recorded in ``requests`` so tests can inspect
what was sent. ``closed_port_url()`` is a loopback address nothing listens
on: a base URL whose every connection is refused.
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


def html_page(status: int = 200) -> httpx2.Response:
    """A response that is an HTML page, not the API's JSON (a captive portal or a proxy's error page)."""
    body = b"<html><head><title>Gateway</title></head><body><h1>Welcome</h1></body></html>"
    return httpx2.Response(status, content=body, headers={"content-type": "text/html"})


def closed_port_url() -> str:
    """``http://127.0.0.1:PORT`` where nothing listens (the port was bound, then let go)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


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
        if isinstance(answer, httpx2.Response):
            return answer
        if isinstance(answer, tuple):
            status, headers, payload = answer
            return httpx2.Response(status, headers=headers, json=payload)
        return httpx2.Response(200, json=answer)

    def client(self) -> httpx2.AsyncClient:
        """An async HTTP client whose requests this fake answers."""
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self))


def heuristic_agent(body: dict[str, Any]) -> dict[str, Any]:
    """A plausible (not clever) agent for end-to-end runs: look up by a value the instruction states, then answer.

    Turn 1 calls the first tool one of whose required string parameters can
    take an email or a quoted value from the instruction; the next turn
    submits the first cell of the last tool result (or nothing).
    """
    import re

    instruction = body["messages"][0]["content"]
    turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if turns == 0:
        values = re.findall(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", instruction) + re.findall(
            r"'([^']+)'", instruction
        )
        for tool in body["tools"]:
            required = tool["input_schema"].get("required") or []
            props = tool["input_schema"].get("properties") or {}
            if len(required) == 1 and props.get(required[0], {}).get("type") == "string" and values:
                return message(
                    tool_use(tool["name"], {required[0]: values[0]}, "Let me look that up."),
                    "tool_use",
                )
    last = body["messages"][-1]["content"]
    text = last[0]["content"] if isinstance(last, list) and last else ""
    cells = re.findall(r"[A-Za-z0-9@._-]{2,}", text)
    answer = {"answer": cells[1]} if len(cells) > 1 else {}
    return message(tool_use("submit", answer, "Done."), "tool_use")


class LoopbackServer:
    """The fake on a real loopback HTTP port, for processes that cannot share a mock transport (Ray actors).

    Use as a context manager; ``url`` is what ``ANTHROPIC_BASE_URL`` should be.
    """

    def __init__(self, policy: Callable[[dict[str, Any]], Any]):
        import http.server
        import threading

        fake = FakeMessages(policy)
        self.fake = fake

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                request = httpx2.Request(
                    "POST", f"http://fake{self.path}", content=self.rfile.read(length)
                )
                response = fake(request)
                body = response.content
                self.send_response(response.status_code)
                for key, value in response.headers.items():
                    if key.lower() not in ("content-length", "transfer-encoding"):
                        self.send_header(key, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> LoopbackServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
