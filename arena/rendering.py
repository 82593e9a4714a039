"""How a task is shown to an agent: the system text, the instruction, the tools as function definitions.

Every agent-facing view of a task is made here, so the Claude roles, the
export for trainers and ``coevo play`` show the same thing:

* :data:`SYSTEM`: the system text of every episode;
* :func:`tool_definitions`: the world's tools and ``submit`` in the
  Anthropic Messages shape (``name``, ``description``, ``input_schema``);
* :func:`openai_tools`: the same in the OpenAI Chat Completions shape
  (``{"type": "function", "function": {name, description, parameters}}``);
* :func:`prompt`: the system text and the instruction, joined.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from coevo.arena.spec import SUBMIT, TaskSpec, WorldSpec

__all__ = ["SUBMIT_TOOL", "SYSTEM", "openai_tools", "prompt", "tool_definitions"]

SYSTEM: Final = (
    "You are an agent working in a company's systems through the tools given. "
    "Find what you need with the tools; never guess identifiers. "
    "When the request is done, call submit (with the answer, if the request asks a question)."
)
"""The system text of every episode an agent plays."""

SUBMIT_TOOL: Final[dict[str, Any]] = {
    "name": SUBMIT,
    "description": (
        "End the episode. Call it once the user's request is done; for a question, "
        "pass the answer as text."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "answer": {
                "type": "string",
                "description": "The answer, when the user asked a question.",
            }
        },
        "additionalProperties": False,
    },
}
"""The reserved ``submit`` tool, as a function definition."""


def tool_definitions(world: WorldSpec) -> list[dict[str, Any]]:
    """The world's tools as function definitions (``name``, ``description``, ``input_schema``), ``submit`` last."""
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters}
        for t in world.tools
    ] + [SUBMIT_TOOL]


def openai_tools(definitions: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Function definitions from :func:`tool_definitions` in the OpenAI ``tools`` shape."""
    return [
        {
            "type": "function",
            "function": {
                "name": d["name"],
                "description": d["description"],
                "parameters": d["input_schema"],
            },
        }
        for d in definitions
    ]


def prompt(task: TaskSpec) -> str:
    """The system text and the task's instruction, as one text."""
    return f"{SYSTEM}\n\n{task.instruction}"
