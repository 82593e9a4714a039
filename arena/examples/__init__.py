"""Example tasks shipped with coevo: ``examples.jsonl`` (retail, clinic, HR and payroll).

:func:`example_tasks` reads them, each with its world inline; the conformance
checkers call roles and curricula on them.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from coevo.arena.records import load_records
from coevo.arena.spec import TaskSpec, WorldSpec

__all__ = ["EXAMPLES", "example_tasks"]

EXAMPLES = Path(str(resources.files(__name__) / "examples.jsonl"))
"""The path of the bundled ``examples.jsonl``."""


def example_tasks() -> list[TaskSpec]:
    """The bundled example tasks, in file order, each with its world inline."""
    tasks, worlds = load_records(EXAMPLES)
    return [
        t if isinstance(t.world, WorldSpec) else t.model_copy(update={"world": worlds[t.world]})
        for t in tasks
    ]
