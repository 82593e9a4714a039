"""The text protocol for tool calls: for models whose chat template has no tools section.

Many small and base models were never taught a function-calling format: their
chat template drops the ``tools`` of a request, so the model never learns which
tools exist and a server's tool parser never finds a call. With
``tool_protocol = "text"`` (or ``"auto"`` when the server shows that its chat
template ignores tools) an LLM role speaks to such a model in text, in the
Hermes format that Qwen, Hermes and many fine-tunes were trained on:

* the tools are described in the system text (:func:`tools_text`): each as
  its JSON function schema, one per line between ``<tools>`` and ``</tools>``,
  then how to call one, with an example built from the first tool;
* the model calls a tool by writing a JSON object with ``name`` and
  ``arguments`` between ``<tool_call>`` and ``</tool_call>``; text outside
  the tags is the model's own (its reasoning). Generation stops at the
  closing tag (the client's stop sequence,
  :meth:`~coevo.agents.llm.client.LLMClient.request_sampling`), so a turn
  makes one call and nothing the model would write after it (an imagined
  ``<tool_response>``) is sampled into the trained tokens;
* :func:`parse_tool_calls` reads what models write: a call is the JSON
  object that follows the tag, in a Markdown code fence or not (what the
  model writes after it, before the closing tag or without one, is not part
  of it); a call left unclosed ends where the next ``<tool_call>`` opens; a
  call whose JSON was cut off is a failed step;
* each tool's result goes back as a user message ``<tool_response>...
  </tool_response>`` (the results of one turn in one message, in order), since
  many templates know no ``tool`` role (:func:`text_messages`).

The conversation a role keeps, and a trajectory records, stays in the Chat
Completions format (the assistant's text with its ``tool_calls`` parsed, one
``tool`` message per result); :func:`text_messages` is the rendering sent to
the server, a function of those messages alone, so what the model saw can
always be rebuilt from the record.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any, Final

from coevo.agents.llm.turns import ToolCallRequest, Turn, parse_arguments

__all__ = [
    "CALL_CLOSE",
    "CALL_OPEN",
    "RESPONSE_CLOSE",
    "RESPONSE_OPEN",
    "example_call",
    "forced_tool",
    "opened_with",
    "parse_tool_calls",
    "text_messages",
    "tools_text",
    "with_text_calls",
]

CALL_OPEN: Final = "<tool_call>"
CALL_CLOSE: Final = "</tool_call>"
RESPONSE_OPEN: Final = "<tool_response>"
RESPONSE_CLOSE: Final = "</tool_response>"

_NAME: Final = re.compile(r'"name"\s*:\s*"([^"\\]{1,200})"')
_OPENING: Final = re.compile(r"\s*(?:```[\w+-]*[ \t]*\n?\s*)?")
"""What may come between the tag and the call's JSON: white space and a code fence's opening."""
_DECODER: Final = json.JSONDecoder()
_UNREAD: Final = object()


def _placeholder(schema: Any) -> Any:
    """An example value of a JSON Schema (for the example call in the tools text)."""
    if not isinstance(schema, dict):
        return "..."
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    return {"integer": 1, "number": 1.5, "boolean": True, "array": [], "object": {}}.get(
        str(kind), "..."
    )


def example_call(tool: dict[str, Any]) -> str:
    """One call of ``tool`` (an OpenAI function tool) written as the protocol wants it."""
    function = tool.get("function", tool)
    schema = function.get("parameters") or {}
    properties = schema.get("properties") or {}
    required = schema.get("required") or list(properties)
    arguments = {name: _placeholder(properties.get(name)) for name in required}
    call = json.dumps({"name": function["name"], "arguments": arguments}, ensure_ascii=False)
    return f"{CALL_OPEN}{call}{CALL_CLOSE}"


def tools_text(tools: Sequence[dict[str, Any]], forced: str | None = None) -> str:
    """What the system text says of ``tools`` (OpenAI function tools): each schema, and how to call one.

    Args:
        tools: the tools offered.
        forced: the tool the answer must call (a forced ``tool_choice``), if any.
    """
    schemas = "\n".join(json.dumps(t.get("function", t), ensure_ascii=False) for t in tools)
    lines = [
        "# Tools",
        "",
        "You can call these tools. Each is described by its JSON schema:",
        "<tools>",
        schemas,
        "</tools>",
        "",
        f"To call a tool, write a JSON object with its name and arguments between {CALL_OPEN} "
        f"and {CALL_CLOSE}, for example:",
        example_call(tools[0])
        if tools
        else f'{CALL_OPEN}{{"name": ..., "arguments": {{}}}}{CALL_CLOSE}',
        f"Each result comes back between {RESPONSE_OPEN} and {RESPONSE_CLOSE}.",
    ]
    if forced is not None:
        lines.append(f"Answer with a call of {forced} and nothing else.")
    return "\n".join(lines)


def _written_calls_in(text: str) -> Iterator[tuple[str, Any]]:
    """Each call's text and its JSON value (:data:`_UNREAD` when none parses), in order.

    One pass over ``text``: the JSON is decoded where it stands (no copy of the rest), and
    the closing tag looked for again only once the scan has passed it, so that 10,000
    calls, unclosed or not, cost no more than reading them.
    """
    pos = 0
    closed = -1
    while (opened := text.find(CALL_OPEN, pos)) != -1:
        start = opened + len(CALL_OPEN)
        if closed < start:
            closed = text.find(CALL_CLOSE, start)
        end = len(text) if closed == -1 else closed
        after = end if closed == -1 else closed + len(CALL_CLOSE)
        opening = _OPENING.match(text, start, end)
        at = opening.end() if opening else start
        try:
            # the call is the JSON object after the tag; what a model writes after it (a code
            # fence's end, its guess of the result, more text) is not part of it
            value, stop = _DECODER.raw_decode(text, at)
        except (ValueError, RecursionError):  # nested beyond what a parser follows, too long
            value, stop = _UNREAD, -1
        if value is not _UNREAD and stop <= end:
            yield text[at:stop], value
            following = text.find(CALL_OPEN, stop, end)  # an unclosed call, and the next one
            pos = following if following != -1 else after
            continue
        following = text.find(CALL_OPEN, start, end)
        if following == -1:
            yield text[at:end].strip(), _UNREAD
            pos = after
            continue
        pos = following
        if text[at:following].strip():  # a tag written twice (<tool_call><tool_call>) is one
            yield text[at:following].strip(), _UNREAD


def _json_text(value: Any) -> str:
    """``value`` as JSON text that is valid UTF-8 (an unpaired surrogate, as a JSON escape can decode to, escaped)."""
    written = json.dumps(value, ensure_ascii=False)
    try:
        written.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value)
    return written


def parse_tool_calls(text: str | None, prefix: str = "call_") -> list[ToolCallRequest]:
    """The calls written in ``text``, in order (ids ``{prefix}0``, ``{prefix}1``, ...).

    A call is the JSON object after a ``<tool_call>`` tag (white space and a
    Markdown code fence's opening may come first); it ends at its closing tag,
    or where the next ``<tool_call>`` opens, or with the text. A call whose
    JSON does not parse, or that names no tool, comes back with
    ``arguments=None`` and an ``error`` written for the model (its name, when
    one can be read), so that the world refuses it as a failed step.
    """
    calls: list[ToolCallRequest] = []
    for n, (written, value) in enumerate(_written_calls_in(text or "")):
        call_id = f"{prefix}{n}"
        if value is _UNREAD:
            named = _NAME.search(written)
            calls.append(
                ToolCallRequest(
                    id=call_id,
                    name=named.group(1) if named else "",
                    raw=written,
                    arguments=None,
                    error=f"the text between {CALL_OPEN} and {CALL_CLOSE} is not a JSON object",
                )
            )
            continue
        name = value.get("name") if isinstance(value, dict) else None
        given = (
            value.get("arguments", value.get("parameters", {})) if isinstance(value, dict) else None
        )
        if not isinstance(name, str) or not name:
            calls.append(
                ToolCallRequest(
                    id=call_id,
                    name="",
                    raw=written,
                    arguments=None,
                    error='a call is a JSON object {"name": TOOL, "arguments": {...}}; this one names no tool',
                )
            )
            continue
        raw = given if isinstance(given, str) else _json_text(given)
        arguments, error = parse_arguments(raw)
        calls.append(
            ToolCallRequest(id=call_id, name=name, raw=raw, arguments=arguments, error=error)
        )
    return calls


def _written_calls(message: dict[str, Any]) -> str:
    """An assistant message's calls written in the protocol (for a message recorded natively)."""
    written = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        raw = function.get("arguments") or "{}"
        try:
            arguments = json.loads(raw)
        except ValueError:
            arguments = raw
        body = json.dumps(
            {"name": function.get("name", ""), "arguments": arguments}, ensure_ascii=False
        )
        written.append(f"{CALL_OPEN}{body}{CALL_CLOSE}")
    return "\n".join(written)


def text_messages(
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]] | None,
    forced: str | None = None,
) -> list[dict[str, Any]]:
    """``messages`` (Chat Completions format) as the text protocol sends them.

    The tools are described at the end of the system message (one is put first
    when there is none); an assistant message is its text (its calls written in
    the protocol when the text does not hold them); the ``tool`` messages
    answering a turn become one user message of ``<tool_response>`` blocks.
    ``tools`` None: the conversation's rendering without the tools text (what
    comes between two turns does not depend on it).
    """
    out: list[dict[str, Any]] = []
    described = tools is None or not tools
    for message in messages:
        role = message.get("role")
        if role == "system" and not described:
            content = message.get("content") or ""
            out.append(
                {"role": "system", "content": f"{content}\n\n{tools_text(tools or [], forced)}"}
            )
            described = True
        elif role == "assistant":
            content = message.get("content") or ""
            if message.get("tool_calls") and CALL_OPEN not in content:
                content = "\n".join(p for p in (content, _written_calls(message)) if p)
            out.append({"role": "assistant", "content": content})
        elif role == "tool":
            block = f"{RESPONSE_OPEN}\n{message.get('content') or ''}\n{RESPONSE_CLOSE}"
            if out and out[-1].get("role") == "user" and out[-1].get("tool_results"):
                out[-1] = {**out[-1], "content": f"{out[-1]['content']}\n{block}"}
            else:
                out.append({"role": "user", "content": block, "tool_results": True})
        else:
            out.append({k: v for k, v in message.items() if k in ("role", "content")})
    if not described:
        out.insert(0, {"role": "system", "content": tools_text(tools or [], forced)})
    return [{k: v for k, v in m.items() if k != "tool_results"} for m in out]


def forced_tool(tool_choice: str | dict[str, Any] | None) -> str | None:
    """The tool a ``tool_choice`` forces, if it names one."""
    if isinstance(tool_choice, dict):
        function = tool_choice.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return function["name"]
    return None


def with_text_calls(turn: Turn, prefix: str = "call_") -> Turn:
    """``turn`` with the calls its text holds: its ``tool_calls``, and its message's (the text kept as written)."""
    calls = parse_tool_calls(turn.text, prefix)
    if not calls:
        return turn
    message = {
        **turn.message,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw}}
            for c in calls
        ],
    }
    return dataclasses.replace(turn, message=message, tool_calls=calls)


def opened_with(turn: Turn, opening: str) -> Turn:
    """``turn``, whose text the model continued from ``opening`` (a required call's tag), with that opening put back."""
    text = opening + (turn.text or "")
    return dataclasses.replace(turn, text=text, message={**turn.message, "content": text})
