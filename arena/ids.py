"""Content ids for worlds and tasks, stable across machines and Python versions.

``id = "sha256:" + hex(sha256(canonical))`` where ``canonical`` is
``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
allow_nan=False)`` of the model dumped in JSON mode:

* a world: the whole world record without ``id``;
* a task: ``{format, world: <world id>, instruction, verifier}`` — so a
  task's id does not change with its solution, features, lineage or
  provenance, and two tasks that ask the same thing of the same world
  with the same verifier are the same task.

Episode ids (:func:`episode_id`) are not content ids: they name one play of a
task by where it happened (seed, generation, purpose, index; a benchmark's
trial; an inbox part's rollout), so that a retried batch gets the same ids
and is never logged twice.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coevo.arena.spec import TaskSpec, WorldSpec

__all__ = ["canonical_json", "episode_id", "task_id", "world_id"]


def canonical_json(obj: Any) -> str:
    """The canonical JSON text of a JSON-mode value (sorted keys, no spaces, UTF-8)."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def _digest(obj: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def world_id(world: WorldSpec) -> str:
    """The id of a world: the hash of its canonical record without ``id``."""
    return _digest(world.model_dump(mode="json", by_alias=True, exclude={"id"}))


def task_id(task: TaskSpec) -> str:
    """The id of a task: the hash of ``{format, world: <world id>, instruction, verifier}``."""
    return _digest(
        {
            "format": task.format,
            "world": task.world_id,
            "instruction": task.instruction,
            "verifier": task.verifier.model_dump(mode="json", by_alias=True),
        }
    )


def episode_id(*parts: object, prefix: str = "ep-") -> str:
    """The id of one play: ``prefix`` and the first 24 hex digits of the SHA-256 of ``parts`` joined by ``:``.

    The loop names a Solver's episode by ``(seed, gen, purpose, index, task_id)``,
    a benchmark run by ``(seed, trial, "benchmark", task_id)``, the inbox by
    ``("inbox", digest of the rollout's id or content, occurrence in its part)``, and a proposer's rollout (prefix ``prop-``) by
    ``(seed, gen, "propose", task_id)``.
    """
    raw = ":".join(str(part) for part in parts)
    return prefix + hashlib.sha256(raw.encode()).hexdigest()[:24]
