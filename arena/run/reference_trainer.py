"""The reference trainer: the smallest consumer of the trainer hand-off (``coevo reference-trainer RUN_DIR``).

It does what a real trainer does around its gradient step, and records the
step instead of taking it:

1. wait for the run directory and its trainer folder (it may start first);
2. for each batch handed out, in order, not yet in its journal: read it,
   "train" (a journal line: the batch id, its rows, its mean reward and the
   new version), then announce the new version;
3. a batch in the journal that was not announced (it was killed between the
   two) is announced without training again: the journal is its checkpoint,
   so no batch is trained on twice, whatever is killed when;
4. stop when the run has committed all its generations and every batch is
   trained (or after ``--batches N``).

Each version is announced as a LoRA adapter by default, for the server to
load (vLLM's runtime adapter loading), so ``/v1/models`` lists every
version. A record of an adapter is not one vLLM can load: against a real
vLLM, pass ``--adapter DIR`` (any LoRA adapter of the served model, e.g. an
untrained one saved by peft), which each version names; ``--announce model``
announces model names the server already serves instead.

The journal (``reference/journal.jsonl`` in the trainer folder) is rewritten
whole on each step (moved into place), so it is never half-written.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TextIO

import pyarrow.compute as pc
from coevo.arena.errors import ArenaError
from coevo.arena.gamelog import RunDir
from coevo.arena.run.trainer import (
    Announcement,
    FolderTransport,
    batch_gen,
    folder_uri,
    run_identity,
)

__all__ = ["ReferenceTrainer", "TrainerSettings", "journal"]

JOURNAL: Final = ("reference", "journal.jsonl")
"""Where in the trainer folder the journal is."""


@dataclass(frozen=True)
class TrainerSettings:
    """How the reference trainer runs.

    Attributes:
        run_dir: the run it trains for.
        folder: the trainer folder (None: the run's ``trainer.uri``, else ``RUN_DIR/trainer``).
        announce: ``lora`` (each version an adapter for the server to load) or ``model``.
        adapter: the adapter folder each version names (``lora``; None: a record of one is written).
        prefix: versions are named ``{prefix}-v{n}``, n = batches trained through (None:
            ``reference-`` and six hex digits of the run directory, so that two runs
            against one server never share a version's name).
        poll: seconds between looks for batches.
        delay: seconds each "training step" takes (to watch staleness at work).
        batches: stop after training this many batches (None: when the run is finished).
        lag: announce batch n only once batch n + lag is handed out (or the run is
            finished): a trainer that many batches behind, to watch ``max_staleness`` work.
        wait: seconds to wait for the run and its batches before giving up (None: forever).
    """

    run_dir: str
    folder: str | None = None
    announce: str = "lora"
    adapter: str | None = None
    prefix: str | None = None
    poll: float = 0.5
    delay: float = 0.0
    batches: int | None = None
    wait: float | None = None
    lag: int = 0


def journal(folder: FolderTransport) -> list[dict[str, Any]]:
    """The trainer's journal: one entry per batch trained, in order.

    Raises:
        ArenaError: the journal is not one (a line that is not a JSON object with a batch id).
    """
    if not folder.dir.exists(*JOURNAL):
        return []
    entries = []
    for n, line in enumerate(folder.dir.read_bytes(*JOURNAL).decode().splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            batch_gen(entry["batch_id"])
        except (ValueError, KeyError, TypeError, ArenaError) as exc:
            raise ArenaError(
                f"{folder.uri}/{'/'.join(JOURNAL)} line {n} is not a journal entry ({exc}); the "
                "journal says which batches were trained on: restore it, or start the trainer "
                "on a new run"
            ) from None
        entries.append(entry)
    return entries


class ReferenceTrainer:
    """The reference consumer of the hand-off (see the module docstring).

    Args:
        settings: how it runs.
        say: where it reports each step (a line each).
        sleep: how it waits.
    """

    def __init__(
        self,
        settings: TrainerSettings,
        *,
        say: Callable[[str], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.settings = settings
        self.say = say or (lambda line: print(line, flush=True))
        self.sleep = sleep
        self.run = RunDir(settings.run_dir)
        self.folder: FolderTransport | None = None

    def _experiment(self) -> dict[str, Any] | None:
        if not self.run.exists("experiment.json"):
            return None
        try:
            data = json.loads(self.run.read_bytes("experiment.json"))
        except (OSError, ValueError) as exc:
            raise ArenaError(
                f"{self.settings.run_dir}/experiment.json cannot be read: {exc}"
            ) from exc
        return data if isinstance(data, dict) else None

    def _open(self, experiment: dict[str, Any]) -> FolderTransport:
        trainer = experiment.get("trainer")
        if not isinstance(trainer, dict):
            raise ArenaError(
                f"the run in {self.settings.run_dir} has no [trainer] table: its Solver learns "
                "in the run and hands out no batches (experiments/openai-trainer.toml has one)"
            )
        if trainer.get("transport", "folder") != "folder":
            raise ArenaError(
                f"the run in {self.settings.run_dir} hands its batches out on a Ray queue; the "
                "reference trainer reads the folder transport (see docs/trainer.md for the queue)"
            )
        return FolderTransport(self.settings.folder or folder_uri(trainer.get("uri", ""), self.run))

    def _finished(self, experiment: dict[str, Any], trained: int) -> bool:
        planned = int((experiment.get("run") or {}).get("generations", 0))
        manifests = [n for n in self.run.listdir("log", "_manifests") if n.endswith(".json")]
        return len(manifests) >= planned and trained >= planned

    def serve(self) -> int:
        """Train on every batch as it comes; returns the batches trained in this call.

        Raises:
            ArenaError: the run or its batches did not appear within ``wait``, or a batch is not one.
        """
        settings = self.settings
        started = time.monotonic()
        waiting_said = False
        trained_now = 0
        while True:
            experiment = self._experiment()
            if experiment is not None and self.folder is None:
                self.folder = self._open(experiment)
                self.say(f"reading batches from {self.folder.uri}")
            progressed = False
            if self.folder is not None and experiment is not None:
                done = {entry["batch_id"]: entry for entry in journal(self.folder)}
                said = self.folder.announcements()
                offered = self.folder.offered()
                finished = self._finished(experiment, len(done))
                for entry in done.values():  # trained, not announced yet (lag, or killed between)
                    if entry["batch_id"] not in said and self._due(entry, offered, finished):
                        self._announce(entry)
                        progressed = True
                for batch in offered:
                    if batch in done:
                        continue
                    if settings.batches is not None and trained_now >= settings.batches:
                        return trained_now
                    entry = self._train(batch, len(done))
                    done[batch] = entry
                    if self._due(entry, offered, finished):
                        self._announce(entry)
                    trained_now += 1
                    progressed = True
                if self._finished(experiment, len(done)) and len(said) >= len(done):
                    self.say(f"the run is finished: {len(done)} batches trained")
                    return trained_now
                if settings.batches is not None and trained_now >= settings.batches:
                    return trained_now
            if progressed:
                started = time.monotonic()
            elif settings.wait is not None and time.monotonic() - started > settings.wait:
                what = "the run directory" if experiment is None else "a batch"
                raise ArenaError(
                    f"waited {settings.wait:g} s for {what} in {settings.run_dir}: is the run "
                    "going? (`coevo run EXPERIMENT --out RUN_DIR` with a [trainer] table)"
                )
            elif not waiting_said and experiment is None:
                waiting_said = True
                self.say(f"waiting for the run directory {settings.run_dir}")
            self.sleep(settings.poll)

    def _due(self, entry: dict[str, Any], offered: list[str], finished: bool) -> bool:
        """Whether a trained batch is announced now: at once, or with ``lag``, once ``lag`` more batches are out."""
        later = [b for b in offered if batch_gen(b) > batch_gen(entry["batch_id"])]
        return finished or len(later) >= self.settings.lag

    def _prefix(self) -> str:
        if self.settings.prefix is not None:
            return self.settings.prefix
        tag = hashlib.sha256(run_identity(self.run).encode()).hexdigest()[:6]
        return f"reference-{tag}"

    def _train(self, batch: str, trained_before: int) -> dict[str, Any]:
        """One "training step": read the batch, journal it (the step's checkpoint), return the entry."""
        assert self.folder is not None
        table = self.folder.read(batch)
        if self.settings.delay:
            self.sleep(self.settings.delay)
        rewards = table.column("reward")
        mean = pc.mean(rewards).as_py() if table.num_rows else None
        versions = sorted(set(table.column("policy_version").to_pylist()))
        gen = batch_gen(batch)
        entry = {
            "batch_id": batch,
            "rows": table.num_rows,
            "mean_reward": mean,
            "played_by": versions,
            "digest": hashlib.sha256(
                json.dumps(table.column("episode_id").to_pylist()).encode()
            ).hexdigest(),
            "version": f"{self._prefix()}-v{gen + 1}",
            "step": trained_before + 1,
        }
        lines = [json.dumps(e, sort_keys=True) for e in journal(self.folder)]
        lines.append(json.dumps(entry, sort_keys=True))
        self.folder.dir.write_bytes(("\n".join(lines) + "\n").encode(), *JOURNAL)
        shown = "—" if mean is None else f"{mean:.3f}"
        self.say(
            f"{batch}: {table.num_rows} rollouts (played by {', '.join(versions) or '—'}), mean reward {shown}"
        )
        return entry

    def _announce(self, entry: dict[str, Any]) -> None:
        assert self.folder is not None
        version = entry["version"]
        lora_path = None
        if self.settings.announce == "lora":
            lora_path = self.settings.adapter or self._adapter_record(version, entry)
        self.folder.announce(
            Announcement(batch_id=entry["batch_id"], version=version, lora_path=lora_path)
        )
        how = f"LoRA adapter at {lora_path}" if lora_path else "model name"
        self.say(f"  announced {version} ({how})")

    def _adapter_record(self, version: str, entry: dict[str, Any]) -> str:
        """A folder standing for the adapter of ``version`` (a record, not weights a server can load)."""
        assert self.folder is not None
        record = {"coevo": "reference-trainer record (no weights)", "trained": entry}
        self.folder.dir.write_bytes(
            json.dumps(record, indent=1).encode(),
            "reference",
            "adapters",
            version,
            "adapter_config.json",
        )
        where = self.folder.dir.path("reference", "adapters", version)
        return (
            where
            if self.folder.dir.is_local
            else f"{self.folder.uri.rstrip('/')}/reference/adapters/{version}"
        )


def main(settings: TrainerSettings, out: TextIO = sys.stdout) -> int:
    """Run the reference trainer until the run is finished; the exit status."""
    trainer = ReferenceTrainer(settings, say=lambda line: print(line, file=out, flush=True))
    trainer.serve()
    return 0
