"""``corpus``: a Synthesizer that samples a corpus (``coevo corpus build``) instead of making tasks.

An experiment's task source can be a corpus: ``[synthesizer] name =
"corpus"``, ``config = { path = "corpus" }``. Each request is met with
accepted tasks of the corpus at the request's level (and domains and
families, when it names them), drawn without replacement with a seed
derived from the request's, so the same request gives the same tasks.

Training requests draw from the corpus's *train* worlds; the eval suite's
requests (``binding``) from its *held-out* worlds (the corpus's split by
world, :func:`coevo.arena.gamelog.corpus.held_out`): no world has tasks on
both sides. ``domains``, ``levels`` and ``families`` in the settings narrow
the corpus for the whole run. The corpus is data: its records are read and
validated, never run.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from coevo.agents.protocols import ProposalRequest
from coevo.arena.errors import CoevoError, ConfigError
from coevo.arena.gamelog import RunDir, accepted_ids
from coevo.arena.gamelog.corpus import CORPUS_MANIFEST, held_out, read_corpus
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import TaskSpec, WorldSpec

__all__ = ["CorpusSynthesizer"]


@dataclass(frozen=True)
class _Entry:
    task_id: str
    world_id: str
    level: int | None
    domain: str | None
    family: str | None
    held_out: bool


class CorpusSynthesizer:
    """Samples accepted tasks of a corpus (see the module docstring).

    Args:
        path: the corpus folder.
        domains: only tasks of these domains (default: all).
        levels: only tasks at these levels (default: all).
        families: only tasks of these families (default: all).

    Raises:
        ConfigError: no corpus at ``path``, or none of its accepted tasks is left by the filters.
    """

    name = "corpus"

    @staticmethod
    def preflight(settings: Any) -> None:
        """Before a run starts: the corpus is there (a wrong path stops the run before Ray)."""
        if not RunDir(settings.path).exists(CORPUS_MANIFEST):
            raise ConfigError(
                f"the synthesizer 'corpus': {settings.path} holds no corpus (no "
                f"{CORPUS_MANIFEST}); build one with `coevo corpus build`{_relative(settings.path)}"
            )

    def __init__(
        self,
        path: str,
        *,
        domains: Sequence[str] | None = None,
        levels: Sequence[int] | None = None,
        families: Sequence[str] | None = None,
    ):
        try:
            manifest, tables = read_corpus(path)
        except CoevoError as exc:
            raise ConfigError(f"the synthesizer 'corpus': {exc}{_relative(path)}") from exc
        share = float(manifest.get("split", {}).get("eval_share", 0.0))
        accepted = accepted_ids(tables["verdicts"])
        tasks = tables["tasks"]
        self._specs: dict[str, str] = {}
        self._entries: list[_Entry] = []
        for row, spec in zip(
            tasks.drop_columns(["spec"]).to_pylist(), tasks.column("spec").to_pylist(), strict=True
        ):
            if row["task_id"] not in accepted or row["task_id"] in self._specs:
                continue
            if domains and row["domain"] not in domains:
                continue
            if levels and row["level"] not in levels:
                continue
            if families and row["family"] not in families:
                continue
            self._specs[row["task_id"]] = spec
            self._entries.append(
                _Entry(
                    row["task_id"],
                    row["world_id"],
                    row["level"],
                    row["domain"],
                    row["family"],
                    held_out(row["world_id"], share),
                )
            )
        if not self._entries:
            raise ConfigError(
                f"the synthesizer 'corpus': no accepted task of {path} is left by the filters "
                f"(domains {domains or 'any'}, levels {levels or 'any'}, families {families or 'any'})"
            )
        worlds = tables["worlds"]
        self._world_specs = dict(
            zip(
                worlds.column("world_id").to_pylist(),
                worlds.column("spec").to_pylist(),
                strict=True,
            )
        )
        self._worlds: dict[str, WorldSpec] = {}
        self.path = path
        self.misses: list[str] = []

    def _world(self, world_id: str) -> WorldSpec:
        if world_id not in self._worlds:
            self._worlds[world_id] = WorldSpec.model_validate_json(self._world_specs[world_id])
        return self._worlds[world_id]

    def propose(self, request: ProposalRequest) -> list[TaskSpec]:
        """Up to ``request.n`` distinct tasks of the corpus for the request (fewer only when fewer match).

        Raises:
            CoevoError: no task of the corpus's split matches the request.
        """
        held = request.binding
        pool = [
            e
            for e in self._entries
            if e.held_out == held
            and (request.level is None or e.level == request.level)
            and (not request.domains or e.domain in request.domains)
            and (not request.families or e.family in request.families)
        ]
        if not pool:
            side = "held-out (eval)" if held else "train"
            if not any(e.held_out == held for e in self._entries):
                raise CoevoError(
                    f"the corpus {self.path} holds no {side} world at all (its split holds out "
                    "a share of the worlds by id): build it with more worlds, or another "
                    "--eval-share"
                )
            raise CoevoError(
                f"no {side} task of the corpus {self.path} is at level {request.level} "
                f"(domains {request.domains or 'any'}, families {request.families or 'any'}); "
                "build the corpus with those levels, or ask for others"
            )
        rng = random.Random(derive_seed(request.seed, "corpus"))
        chosen = rng.sample(pool, min(request.n, len(pool)))
        out = []
        for entry in chosen:
            task = TaskSpec.model_validate_json(self._specs[entry.task_id])
            out.append(task.model_copy(update={"world": self._world(entry.world_id)}))
        return out

    def describe(self) -> dict[str, Any]:
        """How many tasks it samples from, per split."""
        held = sum(e.held_out for e in self._entries)
        return {"tasks": len(self._entries), "eval": held, "train": len(self._entries) - held}


def _relative(path: str) -> str:
    """What a relative corpus path is relative to (the folder coevo runs in, not the experiment file's)."""
    if "://" in path or os.path.isabs(path):
        return ""
    return f" (a relative path is read from the folder coevo runs in, {os.getcwd()})"
