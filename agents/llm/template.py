"""What the served model's chat template does, learnt from the server before any episode.

An OpenAI-compatible server that renders chat templates on request (vLLM's
``POST /tokenize``; SGLang's too, from 0.5.12) shows coevo what its model's
template does with a conversation, without sampling anything:

* whether it **describes tools**: a conversation rendered with a tool and
  without one gives different tokens; a template with no tools section
  (SmolLM2, many small and base models) gives the same, and a model behind it
  never learns which tools exist: ``tool_protocol = "auto"`` then speaks the
  text protocol (:mod:`~coevo.agents.llm.text_tools`);
* whether it **writes tool calls in the Hermes format** (``<tool_call>{...}
  </tool_call>``, as Qwen's and Hermes' templates do): an assistant turn with a
  call, rendered and read back as text. Token in, token out reads a model's
  calls from the text it sampled, so coevo must know their format: the text
  protocol's, or a native template's in the Hermes format.

:func:`probe` asks, once, at start-up; a server that renders nothing (no
``/tokenize``: OpenAI, Ollama, an older server) is a :class:`Template` with
``renders=False``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from coevo.agents.llm import openai_api
from coevo.agents.llm.text_tools import CALL_OPEN
from coevo.agents.llm.turns import LLMCallError, Transient, Unreachable

__all__ = ["PROBE_TOOL", "Template", "probe"]

PROBE_TOOL: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": "look_up_probe",
        "description": "Look a record up by its key.",
        "parameters": {
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"],
        },
    },
}
"""The tool the probe renders (its name is unlikely in any template's own text)."""


@dataclass(frozen=True)
class Template:
    """What a server's chat template does.

    Attributes:
        renders: the server renders conversations as token ids (``/tokenize``).
        describes_tools: a request's tools reach the model's prompt.
        hermes_calls: an assistant's tool call is written ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``.
        note: what the probe could not learn, and why (None: all of it).
    """

    renders: bool
    describes_tools: bool = True
    hermes_calls: bool = False
    note: str | None = None


def probe(
    base_url: str,
    key: str,
    timeout: float,
    model: str,
    template_kwargs: dict[str, Any] | None = None,
) -> Template:
    """Ask the server at ``base_url`` what ``model``'s chat template does (see the module docstring)."""
    hello = [{"role": "user", "content": "Hello"}]

    def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        return openai_api.tokenize_chat_now(
            base_url, key, timeout, model, messages, tools=tools, template_kwargs=template_kwargs
        )

    try:
        plain = render(hello, None)
    except (LLMCallError, Transient, Unreachable) as exc:
        return Template(renders=False, note=f"it renders no chat template on request ({exc})")
    try:
        described = render(hello, [PROBE_TOOL]) != plain
    except (LLMCallError, Transient, Unreachable) as exc:
        return Template(renders=True, note=f"its chat template could not render a tool ({exc})")
    call = {
        "id": "call_0",
        "type": "function",
        "function": {"name": "look_up_probe", "arguments": json.dumps({"key": "k1"})},
    }
    try:
        with_call = render(
            [*hello, {"role": "assistant", "content": "", "tool_calls": [call]}],
            [PROBE_TOOL] if described else None,
        )
        text = openai_api.detokenize_now(base_url, key, timeout, model, with_call)
    except (LLMCallError, Transient, Unreachable) as exc:
        return Template(
            renders=True,
            describes_tools=described,
            note=f"how its chat template writes a tool call could not be read back ({exc})",
        )
    hermes = CALL_OPEN in text and "look_up_probe" in text.split(CALL_OPEN, 1)[1]
    return Template(renders=True, describes_tools=described, hermes_calls=hermes)
