"""A loopback fake of an OpenAI-compatible server that behaves like vLLM (no network here, and no GPU).

``with FakeOpenAI(policy) as server:`` serves ``/v1/models`` and
``/v1/chat/completions`` over real HTTP on 127.0.0.1, so the official
``openai`` SDK talks to it unchanged (``base_url=server.url``). Each chat
request is answered with what ``policy(body)`` returns, a :class:`Reply`
(``call``, ``calls``, ``text`` and ``raw_call`` build one), dressed as
vLLM dresses it: ``chatcmpl-`` ids, ``chatcmpl-tool-`` tool-call ids,
``tool_calls: []`` when there are none, ``finish_reason: "stop"`` (not
``"tool_calls"``) for a call of the function ``tool_choice`` names, a
completion cut at ``max_tokens`` returned as text with ``"length"``,
``stop_reason``, ``token_ids`` and top-level ``prompt_token_ids``
(``"return_token_ids": true``) and per-token log-probabilities
(``"logprobs": true``).

The fake model's tokenizer is the UTF-8 bytes of a ChatML-like rendering
(:func:`render_prompt`, :func:`render_turn`), each byte + 1000, and
:data:`START` and :data:`END` one special token each (998, 999), as a
real tokenizer has them. With
``template="stable"`` an assistant turn is rendered in later prompts exactly
as it was generated, so turn k+1's prompt ids begin with turn k's prompt ids
and completion ids (the prefix property a trainer relies on);
``template="reformat"`` re-serialises tool-call arguments, as many real chat
templates do, and the property breaks.

Token in, token out as vLLM serves it: ``POST /v1/completions`` takes the
prompt as token ids and answers the policy's reply (the policy is given the
body with the prompt's text as ``prompt_text``; policies that read no
``messages``, as :class:`ScriptedPolicy`, answer it) with the ids sampled,
the end-of-turn token :data:`END` last (not in the text); with
``renders_templates=True`` the server also renders its chat template on
request (``POST /tokenize``, ``/detokenize`` at its root), so a client's
template probe finds it. Both endpoints honour ``stop`` as vLLM does: the
text ends before the stop string, or after it with
``include_stop_str_in_output``; the ids run through the token that
completed it either way (on the chat path, for replies without tool calls).

Failures are real too: ``faults`` (``status(429, retry_after=1)``,
``drop()``) answer the next chat requests in place of the policy, and
``outage`` every one of them (``models_faults`` the next ``GET /v1/models``).
A hostile server's answers are faults as well: ``endless()`` (a body
streamed without end, chunked, no ``Content-Length``), ``gzip_bomb()``
(about 1 MB on the wire, 1 GiB decompressed), ``lying_length()`` (a
``Content-Length`` the body does not keep), ``redirect()``; ``streamed``
counts the bytes each streamed body got out before the client hung up, and
``connections`` the connections accepted. A reply's ``last_logprob`` is
written in place of its last token's log-prob (``NaN``, ``-Infinity``,
vLLM's ``-9999.0``, as Python's JSON writes them). ``stop()``
closes the port and every open connection (a restarting server), ``start()``
listens again on the same port; ``latency`` delays every chat answer, and up
to hundreds of requests are served at once (``max_in_flight`` says how many
were). Every chat and completion body and its headers are recorded in
``requests`` and ``headers``; adapter requests in ``adapter_requests``
(``adapter_faults`` answer the next of them in place of the server).

Policies: :class:`SolutionPolicy` (plays tasks' reference solutions),
:class:`ExplorerPolicy` (generic: a tool, then ``submit``),
:class:`MalformedPolicy` (every way a model's turn can be unusable),
:class:`StructuredPolicy` (answers named-function requests),
:class:`ScriptedPolicy` (given replies in order) and :class:`ProposerPolicy`
(one model in both roles of self-play: llm-synth's stages, then the tasks).

As a script it serves until killed and prints one line once it listens::

    python tests/agents/fake_openai.py --port 0 --latency 0.2 --model fake-model
    listening on http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import http.server
import json
import os
import re
import signal
import socket
import struct
import sys
import threading
import time
import traceback
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from coevo.arena.spec import SUBMIT

if TYPE_CHECKING:
    from coevo.arena.spec import TaskSpec

__all__ = [
    "END",
    "SPECIAL",
    "START",
    "ExplorerPolicy",
    "FakeOpenAI",
    "Fault",
    "MalformedPolicy",
    "ProposerPolicy",
    "Reply",
    "ScriptedPolicy",
    "SolutionPolicy",
    "StructuredPolicy",
    "apply_stop",
    "call",
    "calls",
    "decode",
    "drop",
    "encode",
    "endless",
    "example_arguments",
    "gzip_bomb",
    "lying_length",
    "main",
    "raw_call",
    "redirect",
    "render_prompt",
    "render_turn",
    "status",
    "text",
]

START = "<|im_start|>"
"""Opens a turn in the fake chat template."""

END = "<|im_end|>"
"""Closes a turn; the fake model's end-of-turn (a completion ends with it)."""

TOKEN_OFFSET = 1000
"""A token id is a UTF-8 byte + this (so ids are not confusable with small ints)."""

MAX_MODEL_LEN = 32768
"""What ``/v1/models`` reports as each model's context length (not enforced)."""

TEMPLATES = ("stable", "reformat")
"""The chat templates the fake model can have (see the module docstring)."""


# --------------------------------------------------------------------------- replies


@dataclass(frozen=True)
class Reply:
    """What the fake model says in one turn.

    Attributes:
        content: the text of the turn (None: no text).
        tool_calls: ``(name, arguments as JSON text)`` pairs; the text may be invalid JSON on purpose.
        finish_reason: as given, or None to derive it (``tool_calls`` when there are calls, else ``stop``).
        usage: False: the response has no ``usage`` at all (as some compatible servers do).
        last_logprob: written as the last completion token's log-prob when log-probs are
            asked for (``nan``, ``-inf``, ``-9999.0``: what a broken server writes); None: the model's.
    """

    content: str | None = None
    tool_calls: Sequence[tuple[str, str]] = ()
    finish_reason: str | None = None
    usage: bool = True
    last_logprob: float | None = None


def call(name: str, /, **arguments: Any) -> Reply:
    """A turn that makes one well-formed tool call."""
    return raw_call(name, json.dumps(arguments, ensure_ascii=False))


def calls(*pairs: tuple[str, Mapping[str, Any]]) -> Reply:
    """A turn that makes several tool calls at once (parallel tool calls), ``(name, arguments)`` each."""
    return Reply(
        tool_calls=tuple((name, json.dumps(dict(args), ensure_ascii=False)) for name, args in pairs)
    )


def text(content: str) -> Reply:
    """A turn that answers in text and calls no tool."""
    return Reply(content=content)


def raw_call(name: str, arguments_text: str) -> Reply:
    """A turn that calls ``name`` with arguments exactly as given (e.g. ``'{"email": "a@b.c"'``, invalid JSON)."""
    return Reply(tool_calls=((name, arguments_text),))


# --------------------------------------------------------------------------- faults


@dataclass(frozen=True)
class Fault:
    """A failure that answers one chat request in place of the policy.

    Attributes:
        status: the HTTP status to answer with; None: close the connection without answering.
        retry_after: seconds for a ``retry-after`` header (None: no header).
        message: the error's message.
        headers: more headers to send (``location``, ``content-encoding``, ``content-length``).
        body: the body's pieces, sent as they come in place of the error JSON (chunked,
            unless ``headers`` give a ``content-length``); called once per answer.
    """

    status: int | None
    retry_after: float | None = None
    message: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    body: Callable[[], Iterable[bytes]] | None = None


_ERROR_TYPES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    408: "RequestTimeoutError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
    500: "InternalServerError",
    502: "BadGatewayError",
    503: "ServiceUnavailableError",
    504: "GatewayTimeoutError",
}


def status(code: int, *, retry_after: float | None = None, message: str = "") -> Fault:
    """A fault that answers HTTP ``code`` with the error JSON (and ``retry-after`` when given)."""
    return Fault(code, retry_after, message or HTTPStatus(code).phrase)


def drop() -> Fault:
    """A fault that closes the connection without any response (the client sees a connection error)."""
    return Fault(None)


_PIECE = 2**16
"""The bytes of one piece of a streamed body."""

_ENDLESS_START = b'{"id": "chatcmpl-endless", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "'


def _endless_pieces(total: int) -> Iterator[bytes]:
    """A completion whose text runs on for ``total`` bytes in all (never closed: no client should read it all)."""
    yield _ENDLESS_START
    filler = b"a" * _PIECE
    for _ in range((total - len(_ENDLESS_START)) // _PIECE):
        yield filler


def endless(total: int = 2**30) -> Fault:
    """A 200 whose body streams ``total`` bytes (1 GiB), chunked with no ``Content-Length``, as fast as the client reads."""
    return Fault(200, body=lambda: _endless_pieces(total))


def lying_length(declared: int, total: int = 2**30) -> Fault:
    """A 200 whose ``Content-Length`` says ``declared`` bytes while its body streams ``total``."""
    return Fault(
        200, headers=(("content-length", str(declared)),), body=lambda: _endless_pieces(total)
    )


def _bomb_parts(size: int) -> tuple[bytes, bytes, int]:
    """A gzip stream of ``size`` spaces in 1 MiB blocks: its header and first block, every later block, the blocks."""
    block = b" " * 2**20
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    # a full flush forgets the history: every later block compresses to the same bytes
    first = squeeze.compress(block) + squeeze.flush(zlib.Z_FULL_FLUSH)
    again = squeeze.compress(block) + squeeze.flush(zlib.Z_FULL_FLUSH)
    return first, again, max(1, size // len(block))


def _bomb_pieces(size: int) -> Iterator[bytes]:
    first, again, blocks = _bomb_parts(size)
    yield first
    for _ in range(blocks - 1):
        yield again
    block, crc = b" " * 2**20, 0
    for _ in range(blocks):  # reached only by a client that read it all
        crc = zlib.crc32(block, crc)
    # an empty final block (fixed Huffman), then the gzip trailer: CRC-32 and size mod 2**32
    yield b"\x03\x00" + struct.pack("<II", crc, (blocks * len(block)) & 0xFFFFFFFF)


def gzip_bomb(size: int = 2**30) -> Fault:
    """A 200 whose gzip body, about ``size`` / 1000 bytes on the wire (its true ``Content-Length``), decompresses to ``size`` bytes (1 GiB)."""
    first, again, blocks = _bomb_parts(size)
    wire = len(first) + len(again) * (blocks - 1) + 10
    return Fault(
        200,
        headers=(("content-encoding", "gzip"), ("content-length", str(wire))),
        body=lambda: _bomb_pieces(size),
    )


def redirect(code: int, location: str) -> Fault:
    """A redirect (``code``: 301, 302, 303, 307, 308) to ``location``, absolute or relative."""
    return Fault(code, message=HTTPStatus(code).phrase, headers=(("location", location),))


def _error(code: int, message: str, kind: str | None = None) -> dict[str, Any]:
    """The error body vLLM and OpenAI send: ``{"error": {message, type, param, code}}``."""
    return {
        "error": {
            "message": message,
            "type": kind or _ERROR_TYPES.get(code, "APIError"),
            "param": None,
            "code": code,
        }
    }


# --------------------------------------------------------------------------- the fake model's template and tokenizer


SPECIAL: dict[str, int] = {START: TOKEN_OFFSET - 2, END: TOKEN_OFFSET - 1}
"""The special tokens: one id each, as a real tokenizer has them."""

_SPECIAL_TEXT = {i: t for t, i in SPECIAL.items()}
_SPECIAL_SPLIT = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL) + ")")


def encode(rendered: str) -> list[int]:
    """Token ids of a text: its UTF-8 bytes, each + :data:`TOKEN_OFFSET`; :data:`START` and :data:`END` one id each."""
    ids: list[int] = []
    for piece in _SPECIAL_SPLIT.split(rendered):
        if piece in SPECIAL:
            ids.append(SPECIAL[piece])
        else:
            ids.extend(byte + TOKEN_OFFSET for byte in piece.encode("utf-8"))
    return ids


def decode(ids: Iterable[int], *, skip_special: bool = False) -> str:
    """The text of token ids (bytes that do not make a whole character are dropped; specials left out if asked)."""
    out: list[str] = []
    run = bytearray()
    for i in ids:
        if i in _SPECIAL_TEXT:
            out.append(run.decode("utf-8", errors="ignore"))
            run.clear()
            out.append("" if skip_special else _SPECIAL_TEXT[i])
        else:
            run.append(i - TOKEN_OFFSET)
    out.append(run.decode("utf-8", errors="ignore"))
    return "".join(out)


def apply_stop(
    text: str, ids: list[int], stop: Any, include: bool
) -> tuple[str, list[int], str | None]:
    """What vLLM makes of a generation that reaches a stop string: ``(text, ids, the stop string)``.

    The text ends before the first stop string found (after it, with
    ``include_stop_str_in_output``); the ids run through the token that completed
    it either way. ``text`` is the generation's text (no special tokens), ``ids``
    its ids; a generation with no stop string in it comes back as it is.
    """
    stops = [stop] if isinstance(stop, str) else [s for s in stop or [] if isinstance(s, str) and s]
    found = min(((text.find(s), s) for s in stops if s in text), default=None)
    if found is None:
        return text, ids, None
    at, chosen = found
    through = at + len(chosen)
    kept = len(encode(text[:through]))  # the text holds no special token: one id per byte
    return text[: through if include else at], ids[:kept], chosen


def _text_of(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a list of parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def _tool_call_block(name: str, arguments: str) -> str:
    return f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": {arguments}}}\n</tool_call>'


def render_turn(content: str | None, tool_calls: Sequence[tuple[str, str]]) -> str:
    """An assistant turn as the fake model writes it: its text, then its tool calls, then :data:`END`."""
    parts = [content] if content else []
    parts += [_tool_call_block(name, arguments) for name, arguments in tool_calls]
    return "\n".join(parts) + END


def _arguments_in_prompt(arguments: Any, template: str) -> str:
    """A past tool call's arguments as the template puts them in a later prompt."""
    written = arguments if isinstance(arguments, str) else json.dumps(arguments)
    if template == "reformat":
        try:
            return json.dumps(json.loads(written), indent=1, sort_keys=True)
        except ValueError:
            return written  # a template cannot re-serialise what does not parse
    return written


def render_prompt(body: Mapping[str, Any], template: str = "stable") -> str:
    """The prompt a chat request's messages and tools make, ending with the generation prompt.

    Raises:
        ValueError: a message is not shaped as the Chat Completions API has it.
    """
    messages = list(body.get("messages") or [])
    system = None
    if messages and messages[0].get("role") in ("system", "developer"):
        system = _text_of(messages.pop(0).get("content"))
    if body.get("tools"):
        listing = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in body["tools"])
        system = (f"{system}\n\n" if system else "") + f"# Tools\n\n<tools>\n{listing}\n</tools>"
    blocks = [] if system is None else [f"{START}system\n{system}{END}\n"]
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            try:
                past = [
                    (
                        c["function"]["name"],
                        _arguments_in_prompt(c["function"]["arguments"], template),
                    )
                    for c in message.get("tool_calls") or []
                ]
            except (KeyError, TypeError) as exc:
                raise ValueError(f"an assistant message's tool call lacks {exc}") from exc
            blocks.append(
                f"{START}assistant\n{render_turn(_text_of(message.get('content')), past)}\n"
            )
        elif role == "tool":
            response = f'<tool_response id="{message.get("tool_call_id")}">\n'
            response += f"{_text_of(message.get('content'))}\n</tool_response>"
            blocks.append(f"{START}tool\n{response}{END}\n")
        elif role in ("system", "developer", "user"):
            blocks.append(f"{START}{role}\n{_text_of(message.get('content'))}{END}\n")
        else:
            raise ValueError(
                f"a message's role must be system, user, assistant or tool, not {role!r}"
            )
    return "".join(blocks) + f"{START}assistant\n"


def _logprob(position: int, token_id: int) -> float:
    """The fake model's log-probability of a token at a position: deterministic, in (-5, 0)."""
    spread = (position * 2654435761 + token_id * 40503) % 10007
    return -(0.001 + 4.99 * spread / 10007)


def _logprobs(ids: Sequence[int], start: int, top: int, as_ids: bool) -> dict[str, Any]:
    """The ``logprobs`` of a choice: one entry per completion token, ``start`` its first position."""

    def entry(token_id: int, logprob: float) -> dict[str, Any]:
        written = _SPECIAL_TEXT.get(token_id, "").encode() or bytes([token_id - TOKEN_OFFSET])
        token = f"token_id:{token_id}" if as_ids else written.decode("utf-8", "replace")
        return {"token": token, "logprob": logprob, "bytes": list(written)}

    content = []
    for index, token_id in enumerate(ids):
        chosen = _logprob(start + index, token_id)
        item = entry(token_id, chosen)
        alternatives = [
            TOKEN_OFFSET + (token_id - TOKEN_OFFSET + rank) % 256 for rank in range(1, top)
        ]
        item["top_logprobs"] = (
            [entry(token_id, chosen)]
            + [entry(a, chosen - r) for r, a in enumerate(alternatives, 1)]
            if top > 0
            else []
        )
        content.append(item)
    return {"content": content}


# --------------------------------------------------------------------------- policies


def _functions(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The function definitions of a request's ``tools``, in order."""
    return [t["function"] for t in body.get("tools") or [] if isinstance(t.get("function"), dict)]


def _assistant_turns(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [m for m in body.get("messages") or [] if m.get("role") == "assistant"]


def example_arguments(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """Arguments that satisfy a JSON Schema's required properties in the plainest way.

    Each required property gets its first ``enum`` value when there is one,
    else ``"x"`` for a string, 1 for an integer or number, true for a
    boolean, ``[]`` for an array and ``{}`` for an object.
    """
    plain = {"string": "x", "integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    properties = (schema or {}).get("properties") or {}
    arguments: dict[str, Any] = {}
    for name in (schema or {}).get("required") or []:
        prop = properties.get(name) or {}
        if prop.get("enum"):
            arguments[name] = prop["enum"][0]
            continue
        kinds = prop.get("type", "string")
        kinds = (
            [kinds] if isinstance(kinds, str) else [k for k in kinds if k != "null"] or ["string"]
        )
        arguments[name] = plain.get(kinds[0], "x")
    return arguments


class SolutionPolicy:
    """Plays tasks' reference solutions: an agent that follows it earns reward 1.

    The task is the one whose instruction is the first user message; the
    answer is the next ``parallel`` calls of its solution after those the
    assistant already made in the conversation (``submit`` is the last).

    Args:
        tasks: the tasks it knows (coevo ``TaskSpec``s).
        parallel: calls per turn (more than one: parallel tool calls).
    """

    def __init__(self, tasks: Iterable[TaskSpec], parallel: int = 1):
        if parallel < 1:
            raise ValueError(f"parallel must be at least 1 (calls per turn), got {parallel}")
        self.tasks = {task.instruction: task for task in tasks}
        self.parallel = parallel

    def __call__(self, body: dict[str, Any]) -> Reply:
        """The next calls of the reference solution of the request's task."""
        users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
        task = self.tasks.get(_text_of(users[0].get("content"))) if users else None
        if task is None:
            return text("I cannot help with that.")
        made = sum(len(m.get("tool_calls") or []) for m in _assistant_turns(body))
        upcoming = task.solution[made : made + self.parallel]
        if not upcoming:
            return text("The request is done.")
        return calls(*((c.tool, c.arguments) for c in upcoming))


class ExplorerPolicy:
    """A generic agent that needs no task knowledge: a few calls of one tool, then ``submit``.

    For the first ``steps - 1`` turns it calls the first tool in the
    request's ``tools`` that is not ``submit``, with
    :func:`example_arguments`; then it calls ``submit`` with ``{}``.

    Args:
        steps: turns per episode, the ``submit`` turn included.
    """

    def __init__(self, steps: int = 3):
        if steps < 1:
            raise ValueError(f"steps must be at least 1 (the submit turn), got {steps}")
        self.steps = steps

    def __call__(self, body: dict[str, Any]) -> Reply:
        """This turn's call (deterministic in the number of assistant turns so far)."""
        functions = _functions(body)
        if not functions:
            return text("I have no tools to work with.")
        others = [f for f in functions if f.get("name") != SUBMIT]
        if len(_assistant_turns(body)) < self.steps - 1 and others:
            return call(others[0]["name"], **example_arguments(others[0].get("parameters")))
        return call(SUBMIT)


class MalformedPolicy:
    """Every way a turn can be unusable, one per turn in a cycle; it never submits.

    Turn by turn: a call whose arguments are invalid JSON; a call missing a
    required parameter; a call to a tool that does not exist; a text answer
    with no tool call; a tool call cut off by the token limit
    (``finish_reason: "length"``).
    """

    KINDS = ("invalid_json", "missing_parameter", "unknown_tool", "no_tool_call", "cut")
    """The kinds of unusable turn, in the order they come."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        """This turn's unusable reply."""
        functions = [f for f in _functions(body) if f.get("name") != SUBMIT]
        first: dict[str, Any] = functions[0] if functions else {"name": "lookup", "parameters": {}}
        kind = self.KINDS[len(_assistant_turns(body)) % len(self.KINDS)]
        if kind == "invalid_json":
            written = json.dumps(example_arguments(first.get("parameters")), ensure_ascii=False)
            return raw_call(first["name"], written[:-1])  # the closing brace is missing
        if kind == "missing_parameter":
            needy = [f for f in functions if (f.get("parameters") or {}).get("required")]
            target = needy[0] if needy else first
            arguments = example_arguments(target.get("parameters"))
            for name in list(arguments)[:1]:
                del arguments[name]
            return call(target["name"], **arguments)
        if kind == "unknown_tool":
            names = {f.get("name") for f in _functions(body)}
            name = "undefined_tool"
            while name in names:
                name += "_x"
            return call(name)
        if kind == "no_tool_call":
            return text("I am not sure what to do next.")
        return Reply(
            content=f'<tool_call>\n{{"name": {json.dumps(first["name"])}, "arguments": {{"',
            finish_reason="length",
        )


class StructuredPolicy:
    """Answers structured-output requests: ``tool_choice`` names a function, the reply calls it.

    A request whose ``response_format`` is a ``json_schema`` is answered the
    same way by the schema's name, with the arguments as the text content.

    Args:
        answers: function name to the arguments to return, or to a callable from the body to them.
    """

    def __init__(
        self,
        answers: Mapping[str, Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]]],
    ):
        self.answers = dict(answers)

    def _arguments(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.answers[name]
        return dict(answer(body) if callable(answer) else answer)

    def __call__(self, body: dict[str, Any]) -> Reply:
        """A call of the named function, or ``text("no answer")`` for a name it has no answer for."""
        choice = body.get("tool_choice")
        if isinstance(choice, dict) and choice.get("type") == "function":
            name = (choice.get("function") or {}).get("name")
            if name in self.answers:
                return call(name, **self._arguments(name, body))
        response_format = body.get("response_format") or {}
        if response_format.get("type") == "json_schema":
            name = (response_format.get("json_schema") or {}).get("name")
            if name in self.answers:
                return text(json.dumps(self._arguments(name, body), ensure_ascii=False))
        return text("no answer")


class ScriptedPolicy:
    """The given replies in order, one per request (thread-safe), then ``text("done")`` forever."""

    def __init__(self, replies: Iterable[Reply]):
        self._replies = iter(list(replies))
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        """The next scripted reply."""
        with self._lock:
            return next(self._replies, text("done"))


class ProposerPolicy:
    """One model in both roles of self-play: it answers llm-synth's stage calls with drafts, and plays the drafts' tasks.

    A stage call (``tool_choice`` names ``scenario``, ``world``, ``task`` or
    ``verifier``) is answered from one draft. The scenario call takes draft
    ``i % len(drafts)``, ``i`` the proposal's index in its request (its
    ``Variation seed: SEED:i``), and marks its need ``(draft i, request SEED)``;
    the world and task calls find the draft by that mark, the verifier call by
    the instruction the task call wrote. Other forced functions are answered
    from ``answers``, as :class:`StructuredPolicy` does (a Judge's ``review``, a
    World model's ``predict``). Any other request is a Solver's (or a Judge's
    attempt): the reference solution of the task whose instruction is the first
    user message is played, one call a turn (as :class:`SolutionPolicy` does);
    an instruction it never wrote is answered in text.

    Args:
        drafts: per proposal, each stage's arguments: ``{"scenario": {...}, "world":
            {...}, "task": {...}, "verifier": {...}}`` (:meth:`draft_of` makes one of a task).
        answers: answers of other forced functions.
        per_request: each request's tasks are tasks of their own: the instruction
            ends with `` (request SEED)`` (else a draft is the same task in every request).

    Attributes:
        played: the instructions it was asked to play, in arrival order.
    """

    STAGES = ("scenario", "world", "task", "verifier")
    """llm-synth's stages, in order."""

    def __init__(
        self,
        drafts: Sequence[Mapping[str, Mapping[str, Any]]],
        answers: Mapping[str, Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]]]
        | None = None,
        *,
        per_request: bool = False,
    ):
        if not drafts:
            raise ValueError("drafts must hold at least one draft")
        self.drafts = [dict(d) for d in drafts]
        self.others = StructuredPolicy(answers or {})
        self.per_request = per_request
        self.played: list[str] = []
        self._written = {d["task"]["instruction"]: i for i, d in enumerate(self.drafts)}
        self._lock = threading.Lock()

    @staticmethod
    def draft_of(task: TaskSpec) -> dict[str, dict[str, Any]]:
        """The stage answers that rebuild ``task`` (a task with its world inline)."""
        world = task.world.model_dump(mode="json", by_alias=True)  # type: ignore[union-attr]
        return {
            "scenario": {"domain": world["domain"], "setting": "an office", "need": "a request"},
            "world": {
                "schema_sql": world["schema"],
                "data": world["data"],
                "tools": world["tools"],
            },
            "task": {
                "instruction": task.instruction,
                "solution": [{"tool": c.tool, "arguments": c.arguments} for c in task.solution],
            },
            "verifier": task.verifier.model_dump(mode="json"),
        }

    def _stage(self, name: str, prompt: str) -> dict[str, Any]:
        """The arguments of stage ``name`` for the proposal ``prompt`` is about."""
        if name == "scenario":
            label = prompt.split("Variation seed: ", 1)[1].split(".", 1)[0]
            seed, index = label.rsplit(":", 1)
            i = int(index) % len(self.drafts)
            arguments = dict(self.drafts[i]["scenario"])
            arguments["need"] = f"{arguments.get('need', 'a request')} (draft {i}, request {seed})"
            return arguments
        if name == "verifier":
            written = prompt.split("Instruction: ", 1)[1].split("\n\nSchema:", 1)[0]
            with self._lock:
                return dict(self.drafts[self._written[written]]["verifier"])
        i = next(i for i in range(len(self.drafts)) if f"(draft {i}, request " in prompt)
        arguments = dict(self.drafts[i][name])
        if name == "task" and self.per_request:
            seed = prompt.split(f"(draft {i}, request ", 1)[1].split(")", 1)[0]
            arguments["instruction"] = f"{arguments['instruction']} (request {seed})"
        if name == "task":
            with self._lock:
                self._written[arguments["instruction"]] = i
        return arguments

    def __call__(self, body: dict[str, Any]) -> Reply:
        """A stage's answer, another forced function's, or the next call of a task's solution."""
        choice = body.get("tool_choice")
        name = (choice.get("function") or {}).get("name") if isinstance(choice, dict) else None
        users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
        first = _text_of(users[0].get("content")) if users else ""
        if name in self.STAGES:
            return call(name, **self._stage(name, first))
        if name is not None:
            return self.others(body)
        with self._lock:
            self.played.append(first)
            i = self._written.get(first)
        if i is None:
            return text("I cannot help with that.")
        made = sum(len(m.get("tool_calls") or []) for m in _assistant_turns(body))
        upcoming = self.drafts[i]["task"]["solution"][made : made + 1]
        if not upcoming:
            return text("The request is done.")
        return calls(*((c["tool"], c.get("arguments") or {}) for c in upcoming))


# --------------------------------------------------------------------------- responses


def _completion(
    body: Mapping[str, Any], model: str, prompt_ids: list[int], reply: Reply
) -> dict[str, Any]:
    """The ChatCompletion JSON vLLM sends for ``reply`` to the request ``body`` (its prompt's ids given)."""
    content, tool_calls = reply.content, list(reply.tool_calls)
    written = render_turn(content, tool_calls)
    ids = encode(written)
    finish = reply.finish_reason or ("tool_calls" if tool_calls else "stop")
    stop_reason = None
    named = isinstance(body.get("tool_choice"), dict)
    if named and tool_calls and reply.finish_reason is None:
        # vLLM (like OpenAI) ends a named-function call with "stop" and content "", not "tool_calls"
        finish, content = "stop", content or ""
    if not tool_calls and body.get("stop"):
        include = bool(body.get("include_stop_str_in_output"))
        cut, kept, stop_reason = apply_stop(content or "", ids, body["stop"], include)
        if stop_reason is not None:
            content, ids, finish = cut, kept, "stop"
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if limit is not None and len(ids) > limit:
        # vLLM cut mid-turn: the text so far comes back as content; a cut tool call is not parsed
        ids = ids[:limit]
        visible = decode(ids, skip_special=True)
        content, tool_calls, finish, stop_reason = visible, [], "length", None
    choice: dict[str, Any] = {
        "index": 0,
        "message": {
            "role": "assistant",
            "content": content,
            "refusal": None,
            "annotations": None,
            "audio": None,
            "function_call": None,
            "tool_calls": [
                {
                    "id": f"chatcmpl-tool-{uuid.uuid4().hex}",
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
                for name, arguments in tool_calls
            ],
            "reasoning": None,
            "reasoning_content": None,
        },
        "logprobs": None,
        "finish_reason": finish,
        "stop_reason": stop_reason,
        "token_ids": None,
    }
    if body.get("logprobs"):
        choice["logprobs"] = _logprobs(
            ids,
            len(prompt_ids),
            int(body.get("top_logprobs") or 0),
            bool(body.get("return_tokens_as_token_ids")),
        )
        if reply.last_logprob is not None and ids:
            choice["logprobs"]["content"][-1]["logprob"] = reply.last_logprob
    wants_ids = bool(body.get("return_token_ids"))
    if wants_ids:
        choice["token_ids"] = ids
    response: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": {
            "prompt_tokens": len(prompt_ids),
            "total_tokens": len(prompt_ids) + len(ids),
            "completion_tokens": len(ids),
            "prompt_tokens_details": None,
        },
        "prompt_logprobs": None,
        "prompt_token_ids": prompt_ids if wants_ids else None,
        "kv_transfer_params": None,
    }
    if not reply.usage:
        del response["usage"]
    return response


def _text_completion(
    body: Mapping[str, Any], model: str, prompt_ids: list[int], reply: Reply
) -> dict[str, Any]:
    """The Completion JSON vLLM sends for ``reply`` to a token prompt: the text, and the ids with :data:`END` last.

    The reply's tool calls, if any, are written into the text in the Hermes
    format (a completion has no tool parser).
    """
    said = render_turn(reply.content, list(reply.tool_calls))[: -len(END)]
    ids = [*encode(said), SPECIAL[END]]  # the end-of-turn token is sampled, but not in the text
    text, finish, stop_reason = said, reply.finish_reason or "stop", None
    if body.get("stop"):
        include = bool(body.get("include_stop_str_in_output"))
        text, ids, stop_reason = apply_stop(said, ids, body["stop"], include)
    limit = body.get("max_tokens")
    if isinstance(limit, int) and len(ids) > limit:
        ids = ids[:limit]
        text, finish, stop_reason = decode(ids, skip_special=True), "length", None
    logprobs = None
    if body.get("logprobs") is not None:
        scored = _logprobs(ids, len(prompt_ids), 0, False)["content"]
        logprobs = {
            "tokens": [t["token"] for t in scored],
            "token_logprobs": [t["logprob"] for t in scored],
            "top_logprobs": None,
            "text_offset": None,
        }
        if reply.last_logprob is not None and ids:
            logprobs["token_logprobs"][-1] = reply.last_logprob
    wants_ids = bool(body.get("return_token_ids"))
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "text": text,
                "logprobs": logprobs,
                "finish_reason": finish,
                "stop_reason": stop_reason,
                "token_ids": ids if wants_ids else None,
                "prompt_token_ids": prompt_ids if wants_ids else None,
                "prompt_logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": len(prompt_ids),
            "total_tokens": len(prompt_ids) + len(ids),
            "completion_tokens": len(ids),
        },
    }


def _request_problem(body: Mapping[str, Any]) -> str | None:
    """Why the request's shape is refused (as vLLM's validation would), or None."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return "messages: a list of message objects is required"
    for field in ("max_tokens", "max_completion_tokens"):
        value = body.get(field)
        if value is not None and (not isinstance(value, int) or value < 1):
            return f"{field} must be at least 1, got {value!r}"
    for message in messages:
        # vLLM parses the calls of earlier turns to render them, and refuses what is not JSON
        for call in message.get("tool_calls") or []:
            arguments = (call.get("function") or {}).get("arguments")
            if isinstance(arguments, str) and arguments.strip():
                try:
                    json.loads(arguments)
                except ValueError as exc:
                    return f"{exc}"
    return None


@dataclass(frozen=True)
class _Answer:
    """An HTTP answer: status, JSON payload, extra headers; ``payload`` None: drop the connection; ``stream``: the body in pieces instead."""

    status: int
    payload: dict[str, Any] | str | None
    headers: tuple[tuple[str, str], ...] = ()
    stream: Iterable[bytes] | None = None


# --------------------------------------------------------------------------- the server


class _Handler(http.server.BaseHTTPRequestHandler):
    """One connection to the fake (HTTP/1.1 keep-alive, as uvicorn serves vLLM)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = (
        True  # as uvicorn does: headers and body leave at once, no 40 ms stall
    )
    server: _Server

    def version_string(self) -> str:
        return "uvicorn"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def setup(self) -> None:
        super().setup()
        self.server.fake._opened(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._closed(self.connection)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def _send(self, answer: _Answer) -> None:
        if answer.stream is not None:
            self._stream(answer)
            return
        if answer.payload is None:
            self.close_connection = True  # no response at all: the client sees the connection end
            return
        payload = answer.payload
        plain = isinstance(payload, str)  # vLLM answers an adapter's loading in plain text
        data = (payload if isinstance(payload, str) else json.dumps(payload)).encode("utf-8")
        self.send_response(answer.status)
        self.send_header("content-type", "text/plain" if plain else "application/json")
        self.send_header("content-length", str(len(data)))
        for key, value in answer.headers:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, answer: _Answer) -> None:
        """A body sent piece by piece (chunked unless a ``content-length`` is given) until it ends or the client hangs up."""
        self.close_connection = True  # what is left of a refused body is never read as an answer
        chunked = all(key.lower() != "content-length" for key, _ in answer.headers)
        self.send_response(answer.status)
        self.send_header("content-type", "application/json")
        if chunked:
            self.send_header("transfer-encoding", "chunked")
        for key, value in answer.headers:
            self.send_header(key, value)
        self.end_headers()
        self.connection.settimeout(10)  # a client that stops reading but keeps the connection
        sent = 0
        try:
            assert answer.stream is not None
            for piece in answer.stream:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                sent += len(piece)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # the client hung up (or stopped reading): what was sent is counted
        finally:
            self.server.fake._streamed(sent)

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        headers = {k.lower(): v for k, v in self.headers.items()}
        self._body()
        if path == "/health":
            self._send(_Answer(200, {}))
        elif path == "/v1/models":
            self._send(self.server.fake._models(headers))
        else:
            self._send(_Answer(404, {"detail": "Not Found"}))

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        headers = {k.lower(): v for k, v in self.headers.items()}
        raw = self._body()
        fake = self.server.fake
        if path == "/v1/chat/completions":
            self._send(fake._chat(raw, headers))
        elif path == "/v1/completions":
            self._send(fake._chat(raw, headers, tokens=True))
        elif path in ("/tokenize", "/detokenize") and fake.renders_templates:
            self._send(fake._tokenize(path.lstrip("/"), raw, headers))
        elif path in ("/v1/load_lora_adapter", "/v1/unload_lora_adapter"):
            self._send(self.server.fake._adapter(path.rsplit("/", 1)[1], raw, headers))
        else:
            self._send(_Answer(404, {"detail": "Not Found"}))


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512  # a burst of concurrent connections must not wait on a tiny backlog

    def __init__(self, port: int, fake: FakeOpenAI):
        self.fake = fake
        super().__init__(("127.0.0.1", port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return  # a client hung up, or stop() closed the connection under a request
        super().handle_error(request, client_address)


class FakeOpenAI:
    """The fake server (see the module docstring); a context manager that starts and stops it.

    Args:
        policy: the request body to the assistant's reply; None: :class:`ExplorerPolicy`.
        models: the models served, listed in this order; the first is the default.
        api_key: the key every request must bear (``Authorization: Bearer KEY``); None: no check.
        latency: seconds each chat request waits before its answer (faults too).
        template: ``"stable"`` or ``"reformat"``: how past assistant turns are rendered in prompts.
        port: the port to listen on (0: a free one, kept across ``stop()`` and ``start()``).
        enable_lora: serve vLLM's runtime LoRA endpoints (``/v1/load_lora_adapter``, unload);
            an adapter is loaded when its folder exists, then listed and served by its name.
        renders_templates: serve ``/tokenize`` and ``/detokenize`` (the chat template rendered
            on request, as vLLM does); without them a client finds no template to probe.

    Attributes:
        requests: every chat request body that parsed, in arrival order.
        headers: each one's request headers (lower-case names), in the same order.
        faults: failures that answer the next chat requests in place of the policy, leftmost first.
        outage: a failure that answers every chat request once ``faults`` is empty (an API down or
            overloaded: ``status(503, retry_after=1)``); None: the policy answers.
        max_in_flight: the most chat requests being served at one moment.
        adapters: the LoRA adapters loaded: name → the folder it was loaded from.
        adapter_requests: every adapter request body, in arrival order (with its endpoint).
        adapter_faults: failures that answer the next adapter requests in place of the server.
        tokenize_requests: every ``/tokenize`` and ``/detokenize`` body, in arrival order.
        models_faults: failures that answer the next ``GET /v1/models`` in place of the list.
        streamed: the body bytes each streamed answer (a fault's ``body``) wrote to its
            connection before it ended or the client hung up, in the order they ended.
        connections: the connections accepted.
    """

    def __init__(
        self,
        policy: Callable[[dict[str, Any]], Reply] | None = None,
        *,
        models: Sequence[str] = ("fake-model",),
        api_key: str | None = "sk-fake-test-key",
        latency: float = 0.0,
        template: str = "stable",
        port: int = 0,
        enable_lora: bool = True,
        renders_templates: bool = False,
    ):
        if template not in TEMPLATES:
            raise ValueError(f"template must be one of {TEMPLATES}, got {template!r}")
        if not models:
            raise ValueError("models must name at least one model to serve")
        self.policy = policy if policy is not None else ExplorerPolicy()
        self.models = tuple(models)
        self.api_key = api_key
        self.latency = latency
        self.template = template
        self.port = port
        self.enable_lora = enable_lora
        self.renders_templates = renders_templates
        self.adapters: dict[str, str] = {}
        self.adapter_requests: list[tuple[str, dict[str, Any]]] = []
        self.adapter_faults: collections.deque[Fault] = collections.deque()
        self.tokenize_requests: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.faults: collections.deque[Fault] = collections.deque()
        self.outage: Fault | None = None
        self.models_faults: collections.deque[Fault] = collections.deque()
        self.streamed: list[int] = []
        self.connections = 0
        self._ended = threading.Condition()
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._created = int(time.time())

    @property
    def url(self) -> str:
        """The SDK's ``base_url``: ``http://127.0.0.1:PORT/v1``."""
        if not self.port:
            raise RuntimeError(
                "the fake has no port yet: start() it (or use it as a context manager)"
            )
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAI:
        """Listen (again, on the same port after ``stop()``) and serve in a daemon thread."""
        if self._server is not None:
            return self
        self._server = _Server(self.port, self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the port and every open connection: new connections are refused until ``start()``."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by its client
                connection.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _opened(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.add(connection)
            self.connections += 1

    def _streamed(self, sent: int) -> None:
        with self._ended:
            self.streamed.append(sent)
            self._ended.notify_all()

    def wait_streamed(self, count: int, timeout: float = 30.0) -> list[int]:
        """``streamed`` once ``count`` streamed answers have ended (their handlers see the client hang up a moment after it does)."""
        with self._ended:
            if not self._ended.wait_for(lambda: len(self.streamed) >= count, timeout):
                raise TimeoutError(f"{len(self.streamed)} of {count} streamed answers ended")
            return list(self.streamed)

    def _fault_answer(self, fault: Fault) -> _Answer:
        """A fault as an answer: a dropped connection, a streamed body, or the error JSON."""
        if fault.status is None:
            return _Answer(0, None)
        if fault.body is not None:
            return _Answer(fault.status, "", fault.headers, fault.body())
        extra = () if fault.retry_after is None else (("retry-after", f"{fault.retry_after:g}"),)
        return _Answer(fault.status, _error(fault.status, fault.message), extra + fault.headers)

    def _closed(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)

    def _refusal(self, headers: Mapping[str, str]) -> _Answer | None:
        """The 401 for a request without the key, or None when it may pass."""
        if self.api_key is None or headers.get("authorization") == f"Bearer {self.api_key}":
            return None
        return _Answer(401, _error(401, "Unauthorized: a valid API key is required."))

    def _models(self, headers: Mapping[str, str]) -> _Answer:
        refusal = self._refusal(headers)
        if refusal is not None:
            return refusal
        with self._lock:
            fault = self.models_faults.popleft() if self.models_faults else None
        if fault is not None:
            return self._fault_answer(fault)
        cards: list[dict[str, Any]] = [
            {
                "id": model,
                "object": "model",
                "created": self._created,
                "owned_by": "vllm",
                "root": model,
                "parent": None,
                "max_model_len": MAX_MODEL_LEN,
                "permission": [],
            }
            for model in self.models
        ]
        cards += [
            {
                "id": name,
                "object": "model",
                "created": self._created,
                "owned_by": "vllm",
                "root": path,
                "parent": self.models[0],
                "max_model_len": MAX_MODEL_LEN,
                "permission": [],
            }
            for name, path in list(self.adapters.items())
        ]
        return _Answer(200, {"object": "list", "data": cards})

    def _adapter(self, action: str, raw: bytes, headers: dict[str, str]) -> _Answer:
        """vLLM's runtime LoRA endpoints: load an adapter from a folder under a name, or unload it."""
        refusal = self._refusal(headers)
        if refusal is not None:
            return refusal
        if not self.enable_lora:
            return _Answer(404, {"detail": "Not Found"})
        try:
            body = json.loads(raw)
            name = body["lora_name"]
        except (ValueError, KeyError, TypeError):
            return _Answer(400, _error(400, "lora_name is required", "BadRequestError"))
        with self._lock:
            self.adapter_requests.append((action, body))
            fault = self.adapter_faults.popleft() if self.adapter_faults else None
            if fault is not None:
                if fault.status is None:
                    return _Answer(0, None)
                return _Answer(fault.status, _error(fault.status, fault.message))
            if action == "unload_lora_adapter":
                if self.adapters.pop(name, None) is None:
                    return _Answer(
                        404,
                        _error(404, f"The lora adapter '{name}' cannot be found.", "NotFoundError"),
                    )
                return _Answer(200, f"Success: LoRA adapter '{name}' removed successfully.")
            path = body.get("lora_path")
            if not path:
                return _Answer(
                    400,
                    _error(
                        400, "Both 'lora_name' and 'lora_path' must be provided.", "BadRequestError"
                    ),
                )
            if name in self.adapters or name in self.models:
                return _Answer(
                    400,
                    _error(
                        400,
                        f"The lora adapter '{name}' has already been loaded.",
                        "InvalidUserInput",
                    ),
                )
            if not os.path.exists(path):
                return _Answer(
                    404,
                    _error(
                        404,
                        f"Loading lora {name} failed: No adapter found for {path}",
                        "NotFoundError",
                    ),
                )
            self.adapters[name] = path
        return _Answer(200, f"Success: LoRA adapter '{name}' added successfully.")

    def _tokenize(self, action: str, raw: bytes, headers: dict[str, str]) -> _Answer:
        """vLLM's ``/tokenize`` (a conversation by the chat template, or a text) and ``/detokenize``."""
        refusal = self._refusal(headers)
        if refusal is not None:
            return refusal
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            with self._lock:
                self.tokenize_requests.append(body)
            if action == "detokenize":
                return _Answer(200, {"prompt": decode(body["tokens"])})
            if "messages" in body:
                rendered = render_prompt(body, self.template)
                if body.get("add_generation_prompt") is False:
                    rendered = rendered.removesuffix(f"{START}assistant\n")
            else:
                rendered = str(body["prompt"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return _Answer(400, _error(400, f"the request cannot be rendered: {exc}"))
        ids = encode(rendered)
        return _Answer(
            200,
            {"count": len(ids), "max_model_len": MAX_MODEL_LEN, "tokens": ids, "token_strs": None},
        )

    def _chat(self, raw: bytes, headers: dict[str, str], *, tokens: bool = False) -> _Answer:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            return self._answer(raw, headers, tokens)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _answer(self, raw: bytes, headers: dict[str, str], tokens: bool = False) -> _Answer:
        problem: str | None = None
        try:
            body = json.loads(raw)
        except ValueError as exc:
            body, problem = None, f"the body is not valid JSON: {exc}"
        if isinstance(body, dict):
            with self._lock:
                self.requests.append(body)
                self.headers.append(headers)
        time.sleep(self.latency)
        refusal = self._refusal(headers)
        if refusal is not None:
            return refusal
        if not isinstance(body, dict):
            return _Answer(400, _error(400, problem or "the body must be a JSON object"))
        try:
            fault: Fault | None = self.faults.popleft()
        except IndexError:
            fault = self.outage
        if fault is not None:
            return self._fault_answer(fault)
        model = body.get("model") or self.models[0]
        if model not in self.models and model not in self.adapters:
            return _Answer(404, _error(404, f"The model `{model}` does not exist."))
        if tokens:
            return self._token_answer(body, model)
        problem = _request_problem(body)
        if problem is not None:
            return _Answer(400, _error(400, problem))
        try:  # vLLM's template step refuses messages it cannot render, with a 400
            prompt_ids = encode(render_prompt(body, self.template))
        except (ValueError, AttributeError, TypeError) as exc:
            return _Answer(400, _error(400, f"the messages do not render: {exc}"))
        try:
            reply = self.policy(body)
            if not isinstance(reply, Reply):
                raise TypeError(f"the policy must return a Reply, got {type(reply).__name__}")
            return _Answer(200, _completion(body, model, prompt_ids, reply))
        except Exception as exc:  # a broken policy: the test should see why
            traceback.print_exc()
            return _Answer(500, _error(500, f"the fake's policy failed: {exc!r}"))

    def _token_answer(self, body: dict[str, Any], model: str) -> _Answer:
        """A ``/v1/completions`` answer to a prompt of token ids (or text)."""
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            prompt_ids = encode(prompt)
        elif isinstance(prompt, list) and all(
            isinstance(i, int) and not isinstance(i, bool) for i in prompt
        ):
            prompt_ids = list(prompt)
        else:
            return _Answer(400, _error(400, "prompt: a text or a list of token ids is required"))
        try:
            reply = self.policy({**body, "prompt_text": decode(prompt_ids)})
            if not isinstance(reply, Reply):
                raise TypeError(f"the policy must return a Reply, got {type(reply).__name__}")
            return _Answer(200, _text_completion(body, model, prompt_ids, reply))
        except Exception as exc:  # a broken policy: the test should see why
            traceback.print_exc()
            return _Answer(500, _error(500, f"the fake's policy failed: {exc!r}"))


# --------------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> None:
    """Serve until killed; print ``listening on URL`` once connections are accepted."""
    parser = argparse.ArgumentParser(description="A fake vLLM server on loopback (for benchmarks).")
    parser.add_argument("--port", type=int, default=0, help="the port (0: a free one)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per chat request")
    parser.add_argument(
        "--model", action="append", help="a model to serve (repeat for several; default fake-model)"
    )
    parser.add_argument("--api-key", default=None, help="the key to require (default: any)")
    parser.add_argument("--policy", choices=("explorer", "malformed"), default="explorer")
    parser.add_argument("--steps", type=int, default=3, help="the explorer's turns per episode")
    parser.add_argument("--template", choices=TEMPLATES, default="stable")
    args = parser.parse_args(argv)
    policy = ExplorerPolicy(args.steps) if args.policy == "explorer" else MalformedPolicy()
    server = FakeOpenAI(
        policy,
        models=args.model or ("fake-model",),
        api_key=args.api_key,
        latency=args.latency,
        template=args.template,
        port=args.port,
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with server:
        print(f"listening on {server.url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
