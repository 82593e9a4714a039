"""What a tool may return and take, in bytes, and the cut form of what is over: for code worlds and MCP records.

The limits are :class:`~coevo.arena.limits.Limits`' (one owner): a tool's
result is at most ``max_result_bytes`` of JSON (256,000 by default, the cap
SQL worlds apply to their rows), a call's arguments at most
``max_value_bytes`` (1,000,000, the largest value SQLite may build), and a
code world's state, read at the end of an episode, at most
``max_state_bytes`` (16 MiB). What is over is refused with an error the
agent reads (a state: the episode fails, saying so); what is recorded of a
refused call keeps each oversized argument cut to its first
:data:`RECORDED_CHARS` characters and its size.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from coevo.arena.limits import DEFAULT_LIMITS, Limits

__all__ = [
    "RECORDED_CHARS",
    "arguments_problem",
    "cut_arguments",
    "cut_text",
    "json_size",
    "result_problem",
    "state_problem",
]

RECORDED_CHARS: Final = 1_000
"""Characters of an oversized value a record keeps (with its size)."""


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON (ASCII, so characters are bytes)."""
    return len(json.dumps(value, separators=(",", ":"), default=str))


def cut_text(text: str, limit: int = RECORDED_CHARS) -> str:
    """``text`` if it has at most ``limit`` characters, else its start and its size."""
    if len(text) <= limit:
        return text
    size = len(text.encode("utf-8", "surrogatepass"))
    return f"{text[:limit]}… [cut: {size:,} bytes in all]"


def result_problem(tool: str, size: int, limits: Limits = DEFAULT_LIMITS) -> str | None:
    """The error an agent reads for a result of ``size`` bytes of JSON, or None when it is within the limit."""
    if size <= limits.max_result_bytes:
        return None
    return (
        f"{tool} returned {size:,} bytes, more than the limit of {limits.max_result_bytes:,} "
        "bytes a tool may return; ask for less (narrower arguments)"
    )


def state_problem(size: int, limits: Limits = DEFAULT_LIMITS) -> str | None:
    """Why a code world's state of ``size`` bytes of JSON is not read, or None when it is within the limit."""
    if size <= limits.max_state_bytes:
        return None
    return (
        f"its state is {size:,} bytes of JSON, more than the limit of "
        f"{limits.max_state_bytes:,} bytes a code world's state may have (Limits.max_state_bytes); "
        "it was not read"
    )


def arguments_problem(
    tool: str, arguments: Mapping[str, Any], limits: Limits = DEFAULT_LIMITS
) -> str | None:
    """The error an agent reads for arguments over ``max_value_bytes`` of JSON, or None."""
    size = json_size(dict(arguments))
    if size <= limits.max_value_bytes:
        return None
    return (
        f"{tool}: its arguments are {size:,} bytes, more than the limit of "
        f"{limits.max_value_bytes:,} bytes a call may send; nothing was run"
    )


def cut_arguments(arguments: Mapping[str, Any], limit: int = RECORDED_CHARS) -> dict[str, Any]:
    """``arguments`` as a record keeps them: each value longer than ``limit`` cut, with its size.

    A string keeps its first ``limit`` characters; any other value too large
    (a long list, a deep object) becomes the start of its JSON, as text.
    """
    out: dict[str, Any] = {}
    for name, value in arguments.items():
        if isinstance(value, str):
            out[name] = cut_text(value, limit)
        elif json_size(value) > limit:
            out[name] = cut_text(json.dumps(value, default=str), limit)
        else:
            out[name] = value
    return out
