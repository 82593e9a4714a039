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

The loop (waiting, the journal, exactly once, announcing) is
:class:`~coevo.run.handoff.consumer.BatchConsumer`'s, which ``coevo train``
shares; the journal is ``reference/journal.jsonl`` in the trainer folder.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TextIO

import pyarrow as pa
from coevo.run.handoff.consumer import BatchConsumer, ConsumerSettings
from coevo.run.handoff.consumer import journal as consumer_journal
from coevo.run.handoff.transports import FolderTransport

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
    """The reference trainer's journal: one entry per batch trained, in order.

    Raises:
        ArenaError: the journal is not one (a line that is not a JSON object with a batch id).
    """
    return consumer_journal(folder, JOURNAL[0])


class ReferenceTrainer(BatchConsumer):
    """The reference consumer of the hand-off (see the module docstring).

    Args:
        settings: how it runs.
        say: where it reports each step (a line each).
        sleep: how it waits.
    """

    name = "reference"

    def __init__(
        self,
        settings: TrainerSettings,
        *,
        say: Callable[[str], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        super().__init__(
            ConsumerSettings(
                run_dir=settings.run_dir,
                folder=settings.folder,
                prefix=settings.prefix,
                poll=settings.poll,
                batches=settings.batches,
                wait=settings.wait,
                lag=settings.lag,
            ),
            say=say,
            sleep=sleep,
        )
        self.settings = settings

    def step(self, batch: str, table: pa.Table, entry: dict[str, Any]) -> dict[str, Any]:
        """The "training step": wait ``delay``, and report the batch (the journal entry is its record)."""
        if self.settings.delay:
            self.sleep(self.settings.delay)
        mean = entry["mean_reward"]
        shown = "—" if mean is None else f"{mean:.3f}"
        played = ", ".join(entry["played_by"]) or "—"
        self.say(f"{batch}: {table.num_rows} rollouts (played by {played}), mean reward {shown}")
        return entry

    def metrics(self, entry: dict[str, Any]) -> dict[str, float] | None:
        """What it "trained" on, announced (the run's trackers show ``trainer/rows`` and ``trainer/mean_reward``)."""
        mean = entry.get("mean_reward")  # a journal entry from before the metrics has none
        return {"rows": float(entry["rows"]), **({} if mean is None else {"mean_reward": mean})}

    def lora_path(self, entry: dict[str, Any]) -> str | None:
        """``--adapter``, or a record of an adapter written for the version (``lora``); None (``model``)."""
        if self.settings.announce != "lora":
            return None
        return self.settings.adapter or self._adapter_record(entry["version"], entry)

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
