"""One OpenAI-compatible server over HTTP, and what coevo trusts of what it sends.

:class:`Connection` is one server's pool of connections (``aiohttp``, the
calls of a batch), the key in its ``Authorization`` header; :func:`ask_now`
and :func:`post_now` are one request without an event loop (``httpx2``: the
start-up checks, a trainer's adapters). :mod:`~coevo.agents.llm.openai_api`
writes the bodies and reads the answers.

What a server sends is not trusted (``docs/security.md``, "LLM servers"):

* an answer is read in pieces and refused once it passes
  :data:`MAX_RESPONSE_BYTES`, counted after decompression (a 1 MB gzip body
  can hold 1 GiB); a ``Content-Length`` past the limit is refused before
  the body is read, a smaller one is not taken at its word;
* a redirect is followed only within the origin (scheme, host, port) the
  request was sent to, at most :data:`MAX_REDIRECTS` times; one to another
  origin is an error naming where it pointed, and the prompt goes nowhere.

Every failure reaches the client's retry policy
(:mod:`~coevo.agents.llm.client`) as a
:class:`~coevo.agents.llm.turns.Transient` status, an
:class:`~coevo.agents.llm.turns.Unreachable` server, or an
:class:`~coevo.agents.llm.turns.LLMCallError` not worth retrying; no
error carries the request (its headers hold the key).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urljoin, urlsplit

import aiohttp
import httpx2
from coevo.agents.llm.turns import (
    LLMCallError,
    Unreachable,
    retry_after,
    root_cause,
    status_failure,
)
from pydantic_core import to_json

__all__ = [
    "API",
    "MAX_REDIRECTS",
    "MAX_RESPONSE_BYTES",
    "Answer",
    "Connection",
    "ask_now",
    "is_openai_itself",
    "malformed",
    "post_now",
    "server_root",
    "status_error",
]

API: Final = "the OpenAI-compatible server"
"""How messages name the server."""

MAX_RESPONSE_BYTES: Final = 64 * 2**20
"""The most bytes of one answer coevo reads (once decompressed); a longer answer fails its call.

A completion with its log-probs takes about 100 bytes a token (vLLM's
``logprobs.content`` entry, its ``bytes`` included), and the prompt's ids
about 7: a 32k-token completion of a 128k-token prompt is about 4 MB.
64 MiB leaves room for ``top_logprobs`` a user asks for in ``extra_body``,
while the calls in flight (``concurrency``, 64 by default) hold at most
4 GiB between them against a server that sends without end."""

MAX_REDIRECTS: Final = 10
"""Redirects within the server's origin followed for one request (as many as aiohttp follows)."""

_CONTEXT: Final = re.compile(r"context length|maximum context|context window|too many tokens", re.I)
_JSON: Final = "application/json"
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def is_openai_itself(base_url: str) -> bool:
    """Whether ``base_url`` is OpenAI's own API (no token ids; ``max_completion_tokens``)."""
    return urlsplit(base_url).hostname == "api.openai.com"


def server_root(base_url: str) -> str:
    """The server's root, where vLLM serves ``/tokenize`` (``http://h:8000/v1`` → ``http://h:8000``)."""
    return base_url.removesuffix("/").removesuffix("/v1")


def _headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Content-Type": _JSON, "Accept": _JSON}


def _message_of(status: int, body: bytes) -> str:
    """What an error answer says: its ``error.message`` (OpenAI, vLLM), ``detail`` (FastAPI), or its text."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict):
        inner = value.get("error", value.get("detail", value.get("message")))
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
        if inner is not None:
            return json.dumps(inner)[:500]
    text = " ".join(body[:500].decode("utf-8", "replace").split())
    return text or f"status {status}"


def status_error(answer: Answer) -> Exception:
    """The client's view of an error status."""
    message = _message_of(answer.status, answer.raw)
    return status_failure(
        API,
        answer.status,
        message,
        retry_after=retry_after(answer.headers),
        too_long=bool(_CONTEXT.search(message)),
    )


def _transport_error(exc: Exception) -> Exception:
    """The client's view of a request that got no answer (or could not be sent)."""
    if isinstance(exc, httpx2.TimeoutException):
        return Unreachable("the request timed out", timeout=True)
    if isinstance(exc, httpx2.TransportError):
        return Unreachable(root_cause(exc) or type(exc).__name__)
    return LLMCallError(f"{API} could not be asked: {type(exc).__name__}: {exc}")


class Connection:
    """One server's pool of HTTP connections (``aiohttp``), keeping ``limit`` of them alive.

    aiohttp spends about half the CPU per request of ``httpx2`` (whose pool
    looks at every connection for every request): at 64 rollouts in flight,
    1.2 ms of coevo's CPU per model call against 2.0
    (``benchmarks/bench_llm_rollouts.py``). The session is made in the event
    loop of the first request (each batch of a role runs in a loop of its own).

    Args:
        base_url: the server's base URL (``http://host:8000/v1``).
        key: the key, sent as ``Authorization: Bearer``.
        timeout: seconds per request.
        http_client: an ``aiohttp.ClientSession`` to use instead (the caller's to close).
        limit: connections kept open (the calls this server may have in flight).
    """

    def __init__(
        self,
        base_url: str,
        key: str,
        timeout: float,
        http_client: Any = None,
        limit: int = 64,
    ):
        self.base_url = base_url.rstrip("/")
        self.root = server_root(self.base_url)
        self.openai_itself = is_openai_itself(self.base_url)
        self.headers = _headers(key)
        self.owned = http_client is None
        self.timeout = timeout
        self.limit = limit
        self.http: Any = http_client

    async def post(self, url: str, body: dict[str, Any]) -> bytes:
        """POST ``body`` as JSON to ``url``; the answer's bytes.

        A redirect within the server's origin (scheme, host and port) is
        followed, as aiohttp follows one (a 307 or 308 sends the body again;
        a 303, or a 301 or 302 of a POST, asks with a GET); one to another
        origin is an error. The answer is read in pieces, at most
        :data:`MAX_RESPONSE_BYTES` of it once decompressed.

        Raises:
            Transient: a status worth retrying.
            Unreachable: no answer came back.
            LLMCallError: any other error status (``.status`` set), a redirect off the
                server's origin, or an answer longer than :data:`MAX_RESPONSE_BYTES`.
        """
        if self.http is None:
            self.http = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.limit),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            )
        method, asked = "POST", url
        data: bytes | None = to_json(body)
        try:
            for _ in range(MAX_REDIRECTS + 1):
                async with self.http.request(
                    method, asked, data=data, headers=self.headers, allow_redirects=False
                ) as response:
                    status, headers = response.status, response.headers
                    location = headers.get("Location") if status in _REDIRECTS else None
                    if location is None:
                        raw = await _read_within(response)
                        break
                asked = _redirected(url, asked, location, status)
                if status == 303 or (status in (301, 302) and method == "POST"):
                    method, data = "GET", None
            else:
                raise LLMCallError(
                    f"{API} redirected the request more than {MAX_REDIRECTS} times "
                    f"(last to {_pointed(asked)})",
                    status,
                )
        except TimeoutError:
            raise Unreachable("the request timed out", timeout=True) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise Unreachable(_why_unanswered(exc)) from None
        if status >= 400:
            message = _message_of(status, raw)
            raise status_failure(
                API,
                status,
                message,
                retry_after=retry_after(headers),
                too_long=bool(_CONTEXT.search(message)),
            )
        return raw

    async def close(self) -> None:
        """Close the connections (unless the session was the caller's)."""
        if self.owned and self.http is not None:
            await self.http.close()
        self.http = None if self.owned else self.http


def malformed(why: str) -> LLMCallError:
    """The error for an answer coevo cannot use, saying why (not retried)."""
    return LLMCallError(f"{API} answered with a malformed response: {why}")


def _too_long(declared: int | None, read: int) -> LLMCallError:
    """The error for an answer past :data:`MAX_RESPONSE_BYTES` (by its ``Content-Length``, or by what was read)."""
    said = (
        f"its Content-Length says {declared:,} bytes"
        if declared is not None
        else f"stopped reading at {read:,} bytes"
    )
    return malformed(
        f"the answer is longer than {MAX_RESPONSE_BYTES:,} bytes, the most coevo reads "
        f"of one answer ({said})"
    )


def _declared(value: str | None) -> int | None:
    """A ``Content-Length`` as a number (None when absent or unreadable)."""
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class _Body:
    """An answer's body gathered piece by piece (decompressed), refused past :data:`MAX_RESPONSE_BYTES`.

    A ``Content-Length`` past the limit is refused before a byte is read; a
    shorter one is not taken at its word (a compressed body's is its size on
    the wire), the pieces are counted as they come.
    """

    def __init__(self, content_length: str | None):
        declared = _declared(content_length)
        if declared is not None and declared > MAX_RESPONSE_BYTES:
            raise _too_long(declared, 0)
        self.pieces: list[bytes] = []
        self.read = 0

    def add(self, piece: bytes) -> None:
        self.read += len(piece)
        if self.read > MAX_RESPONSE_BYTES:
            raise _too_long(None, self.read)
        self.pieces.append(piece)

    def whole(self) -> bytes:
        return b"".join(self.pieces)


async def _read_within(response: aiohttp.ClientResponse) -> bytes:
    """The answer's body (:class:`_Body`); refused, its connection is closed, not drained."""
    try:
        body = _Body(response.headers.get("Content-Length"))
        async for piece in response.content.iter_any():
            body.add(piece)
    except LLMCallError:
        response.close()
        raise
    return body.whole()


def _origin(url: str) -> tuple[str, str, int | None]:
    """A URL's origin: its scheme, host and port (the scheme's own when none is written)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # a port that is no number: an origin of no server
        port = -1
    return scheme, (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(scheme)


def _pointed(url: str) -> str:
    """Where a URL points, for messages: scheme, host, port and path (no credentials, no query)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    host = parts.hostname or ""
    netloc = f"{host}:{port}" if port else host
    return f"{parts.scheme}://{netloc}{parts.path}"


def _redirected(base: str, asked: str, location: str, status: int) -> str:
    """Where a redirect from ``asked`` to ``location`` leads, when it stays on ``base``'s origin.

    Raises:
        LLMCallError: it leads to another origin (the request is not sent there).
    """
    target = urljoin(asked, location)
    if _origin(target) != _origin(base):
        scheme, host, port = _origin(base)
        raise LLMCallError(
            f"{API} redirected the request ({status}) to another origin, {_pointed(target)}: "
            f"coevo follows a redirect only within {scheme}://{host}:{port}, so that a prompt "
            "goes nowhere the settings do not name; if that server should answer, set "
            "base_url to it",
            status,
        )
    return target


def _why_unanswered(exc: BaseException) -> str:
    """What the operating system said under a connection error ("connection refused")."""
    underneath = getattr(exc, "os_error", None)
    for error in (underneath, exc):
        if isinstance(error, OSError) and error.errno:
            return os.strerror(error.errno).lower()
    return root_cause(exc) or type(exc).__name__


def _sync(base_url: str, key: str, timeout: float) -> httpx2.Client:
    return httpx2.Client(base_url=base_url.rstrip("/"), headers=_headers(key), timeout=timeout)


@dataclass(frozen=True)
class Answer:
    """An answer to a request without an event loop: its status, headers and body."""

    status: int
    headers: Mapping[str, str]
    raw: bytes


def ask_now(
    base_url: str,
    key: str,
    timeout: float,
    method: str,
    url: str,
    body: dict[str, Any] | None = None,
) -> Answer:
    """One request without an event loop (start-up checks, adapters), its body read as :class:`_Body` reads one.

    httpx2 follows no redirect: a redirect is an answer of its own, which no caller takes.

    Raises:
        Unreachable: no answer came back.
        LLMCallError: the answer is longer than :data:`MAX_RESPONSE_BYTES`, or it could not be asked.
    """
    content = None if body is None else to_json(body)
    try:
        with (
            _sync(base_url, key, timeout) as http,
            http.stream(method, url, content=content) as response,
        ):
            gathered = _Body(response.headers.get("Content-Length"))
            for piece in response.iter_bytes():
                gathered.add(piece)
            return Answer(response.status_code, response.headers, gathered.whole())
    except httpx2.HTTPError as exc:
        raise _transport_error(exc) from None


def post_now(base_url: str, key: str, timeout: float, url: str, body: dict[str, Any]) -> bytes:
    """POST ``body`` as JSON to ``url`` without an event loop; the answer's bytes (an error status raised as :func:`status_error` says)."""
    answer = ask_now(base_url, key, timeout, "POST", url, body)
    if answer.status >= 400:
        raise status_error(answer)
    return answer.raw
