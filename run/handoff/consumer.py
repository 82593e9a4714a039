"""A trainer's side of the folder hand-off: every batch once, in order, each policy announced.

:class:`BatchConsumer` does what every trainer does around its gradient step
(``docs/trainer.md``, "The folder transport"):

1. wait for the run directory and its trainer folder (it may start first);
2. for each batch handed out, in order, not yet in its journal: read it,
   take the step (:meth:`BatchConsumer.step`, which checkpoints what it
   trained before it returns), journal it, then announce the new version.
   A batch file that is refused (not a coevo batch, too big once decoded, a
   link) is journaled with ``refused`` and no rows, so the trainer goes on
   instead of failing on it at every restart;
3. a batch in the journal that was not announced (it was killed between the
   two) is announced without training again: the journal is the checkpoint's
   record, so no batch is trained on twice, whatever is killed when;
4. stop when the run has committed all its generations and every batch is
   trained (or after ``batches`` of them).

The journal (``<name>/journal.jsonl`` in the trainer folder) is rewritten
whole on each step (moved into place), so it is never half-written. The
reference trainer (:mod:`~coevo.run.handoff.reference_trainer`) records each
step; ``coevo train`` (:mod:`coevo.run.train`) takes it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
import pyarrow.fs as pafs
from coevo.arena.bounded import MAX_JSON_BYTES
from coevo.arena.errors import ArenaError, FileRefusedError
from coevo.arena.gamelog import RunDir
from coevo.arena.gamelog.lock import RunLock
from coevo.run.handoff.transports import (
    BATCH_SCHEMA,
    Announcement,
    FolderTransport,
    batch_gen,
    folder_uri,
    run_identity,
)

__all__ = ["MAX_BATCHES", "MAX_LAG", "VERSION_NAME", "BatchConsumer", "ConsumerSettings", "journal"]

PREFIX: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")
"""A versions' prefix: letters, digits, ``_``, ``-`` and single dots inside (never ``..``, never a path)."""

VERSION_NAME: Final = re.compile(rf"(?:{PREFIX.pattern})-v[1-9][0-9]*")
"""The names a consumer gives its versions (``{prefix}-v{n}``); a journal naming any other is refused."""

LOCK: Final = "train.lock"
"""The lock of a consumer's folder in the trainer folder (one writer: one trainer per folder)."""


MAX_BATCHES: Final = 1_000_000
"""The most batches ``--batches`` may count: one per generation of the longest run (``run.generations``)."""

MAX_LAG: Final = 1000
"""The most batches ``--lag`` may hold a version back: ``run.max_staleness``'s bound."""


@dataclass(frozen=True)
class ConsumerSettings:
    """How a consumer of the hand-off waits and stops.

    Attributes:
        run_dir: the run it trains for.
        folder: the trainer folder (None: the run's ``trainer.uri``, else ``RUN_DIR/trainer``).
        prefix: versions are named ``{prefix}-v{n}`` (None: the consumer's name and six hex
            digits of the run directory, so that two runs against one server never share a
            version's name).
        poll: seconds between looks for batches.
        batches: stop after training this many batches (None: when the run is finished); at
            most :data:`MAX_BATCHES`, a batch per generation of the longest run.
        lag: announce batch n only once batch n + lag is handed out (or the run is
            finished): a trainer that many batches behind, to watch ``max_staleness`` work;
            at most 1000, as ``run.max_staleness``.
        wait: seconds to wait for the run and its batches before giving up (None: forever).
    """

    run_dir: str
    folder: str | None = None
    prefix: str | None = None
    poll: float = 0.5
    batches: int | None = None
    wait: float | None = None
    lag: int = 0

    def __post_init__(self) -> None:
        problems = [
            f"--{name} {_shown(value)}: {rule}"
            for name, value, ok, rule in [
                ("poll", self.poll, _finite(self.poll) and self.poll > 0, "seconds, more than 0"),
                (
                    "wait",
                    self.wait,
                    self.wait is None or (_finite(self.wait) and self.wait >= 0),
                    "seconds, 0 or more",
                ),
                (
                    "batches",
                    self.batches,
                    self.batches is None or 1 <= self.batches <= MAX_BATCHES,
                    f"a count, from 1 to {MAX_BATCHES:,} (a batch per generation)",
                ),
                (
                    "lag",
                    self.lag,
                    0 <= self.lag <= MAX_LAG,
                    f"a count of batches, from 0 to {MAX_LAG} (as run.max_staleness)",
                ),
            ]
            if not ok
        ]
        if problems:
            raise ArenaError("; ".join(problems))
        if self.prefix is not None and not (
            len(self.prefix) <= 200 and PREFIX.fullmatch(self.prefix)
        ):
            raise ArenaError(
                f"--prefix {self.prefix[:80]!r}: a version's name is a folder's name in the "
                "trainer folder and a model name on the server: letters, digits, '_', '-' and "
                "dots between them (e.g. my-model), at most 200 characters"
            )


def _shown(value: object) -> str:
    """A flag's value for a message: a number of thousands of digits said by its length."""
    text = repr(value)
    return text if len(text) <= 40 else f"(a {len(text)}-digit number)"


def _finite(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def journal(folder: FolderTransport, name: str = "reference") -> list[dict[str, Any]]:
    """A consumer's journal in ``folder``: one entry per batch trained, in order.

    Raises:
        ArenaError: the journal is not one (a line that is not a JSON object with a batch id).
    """
    if not folder.dir.exists(name, "journal.jsonl"):
        return []
    entries = []
    try:
        raw = folder.dir.read_bytes(name, "journal.jsonl", limit=MAX_JSON_BYTES)
    except FileRefusedError as exc:  # a link, a device, too big: refused unread
        raise ArenaError(str(exc)) from None
    for n, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            batch_gen(entry["batch_id"])
            version = entry.get("version")
            if not isinstance(version, str):
                raise TypeError("no version")
            if len(version) > 256 or not VERSION_NAME.fullmatch(version):
                raise ValueError(
                    f"its version {version[:80]!r} is not a name coevo gives (PREFIX-vN)"
                )
        except (ValueError, KeyError, TypeError, RecursionError, ArenaError) as exc:
            raise ArenaError(
                f"{folder.uri}/{name}/journal.jsonl line {n} is not a journal entry ({exc}); the "
                "journal says which batches were trained on: restore it, or start the trainer "
                "on a new run"
            ) from None
        entries.append(entry)
    return entries


class BatchConsumer:
    """The loop around a trainer's steps (see the module docstring); subclasses take the step.

    Args:
        settings: how it waits and stops.
        say: where it reports each step (a line each).
        sleep: how it waits.
    """

    name = "consumer"
    """The folder (in the trainer folder) of its journal, and the first word of its versions' names."""

    def __init__(
        self,
        settings: ConsumerSettings,
        *,
        say: Callable[[str], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.consumer = settings
        self.say = say or (lambda line: print(line, flush=True))
        self.sleep = sleep
        self.run = RunDir(settings.run_dir)
        self.folder: FolderTransport | None = None
        self.lock: RunLock | None = None

    # ---- what a subclass provides ---------------------------------------------------------

    def step(self, batch: str, table: pa.Table, entry: dict[str, Any]) -> dict[str, Any]:
        """Train on ``table`` (batch ``batch``) and checkpoint the result; the journal entry, with what it adds.

        ``entry`` holds ``batch_id``, ``version`` (the name to announce), ``step``
        (batches trained through), ``rows``, ``mean_reward``, ``played_by`` and
        ``digest``. The checkpoint must be whole before this returns: the journal
        entry written next is what says the batch was trained on.
        """
        raise NotImplementedError

    def lora_path(self, entry: dict[str, Any]) -> str | None:
        """The adapter folder to announce for ``entry`` (None: announce the version as a model name)."""
        return None

    def metrics(self, entry: dict[str, Any]) -> dict[str, float] | None:
        """What to announce of the step ``entry`` journaled (``Announcement.metrics``; None: nothing)."""
        return None

    def opened(self) -> None:
        """Called once the trainer folder is known (a subclass restores its checkpoint here)."""

    # ---- the loop ---------------------------------------------------------------------------

    def _experiment(self) -> dict[str, Any] | None:
        if not self.run.exists("experiment.json"):
            return None
        try:
            data = self.run.read_json("experiment.json")
        except (OSError, ValueError, RecursionError) as exc:
            raise ArenaError(
                f"{self.consumer.run_dir}/experiment.json cannot be read: {exc}"
            ) from exc
        return data if isinstance(data, dict) else None

    def _open(self, experiment: dict[str, Any]) -> FolderTransport:
        trainer = experiment.get("trainer")
        if not isinstance(trainer, dict):
            raise ArenaError(
                f"the run in {self.consumer.run_dir} has no [trainer] table: its Solver learns "
                "in the run and hands out no batches (experiments/openai-trainer.toml has one)"
            )
        if trainer.get("transport", "folder") != "folder":
            raise ArenaError(
                f"the run in {self.consumer.run_dir} hands its batches out on a Ray queue; "
                f"{self.name} reads the folder transport (see docs/trainer.md for the queue)"
            )
        return FolderTransport(
            self.consumer.folder or folder_uri(str(trainer.get("uri", "")), self.run)
        )

    def _finished(self, experiment: dict[str, Any], trained: int) -> bool:
        planned = int((experiment.get("run") or {}).get("generations", 0))
        manifests = [n for n in self.run.listdir("log", "_manifests") if n.endswith(".json")]
        return len(manifests) >= planned and trained >= planned

    def journal(self) -> list[dict[str, Any]]:
        """This consumer's journal (empty before the folder is known)."""
        return [] if self.folder is None else journal(self.folder, self.name)

    def serve(self) -> int:
        """Train on every batch as it comes; returns the batches trained in this call.

        The consumer's folder in the trainer folder is locked while it serves
        (:data:`LOCK`, as a run directory is): a second consumer of the same
        name on the same folder stops at once, naming the holder.

        Raises:
            ArenaError: the run or its batches did not appear within ``wait``, or a batch is not one.
            LogError: another consumer holds the folder.
        """
        try:
            return self._serve()
        finally:
            if self.lock is not None:
                self.lock.release()
                self.lock = None

    def _take(self, folder: FolderTransport) -> None:
        """Lock this consumer's folder in ``folder`` (or raise naming who holds it)."""
        self.lock = RunLock(
            RunDir(f"{folder.dir.uri.rstrip('/')}/{self.name}"), name=LOCK, holder="trainer"
        )
        self.lock.acquire()
        if self.lock.taken_over:
            self.say(f"took over the trainer folder's lock ({self.lock.taken_over})")

    def _serve(self) -> int:
        settings = self.consumer
        there = self.run.fs.get_file_info(self.run.root).type
        if there not in (pafs.FileType.NotFound, pafs.FileType.Directory):
            raise ArenaError(
                f"{settings.run_dir} is a file, not a run directory: give the folder "
                "`coevo run EXPERIMENT --out RUN_DIR` writes (or will write)"
            )
        started = time.monotonic()
        waiting_said = False
        trained_now = 0
        while True:
            experiment = self._experiment()
            if experiment is not None and self.folder is None:
                folder = self._open(experiment)
                self._take(folder)
                self.folder = folder
                self.say(f"reading batches from {self.folder.uri}")
                self.opened()
            progressed = False
            if self.folder is not None and experiment is not None:
                done = {entry["batch_id"]: entry for entry in self.journal()}
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
                    refused = sum(1 for entry in done.values() if entry.get("refused"))
                    self.say(
                        f"the run is finished: {len(done)} batches trained"
                        + (f" ({refused} refused: see the journal)" if refused else "")
                    )
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
        return finished or len(later) >= self.consumer.lag

    def prefix(self) -> str:
        """What every version's name begins with (``{prefix}-v{n}``)."""
        if self.consumer.prefix is not None:
            return self.consumer.prefix
        tag = hashlib.sha256(run_identity(self.run).encode()).hexdigest()[:6]
        return f"{self.name}-{tag}"

    def _train(self, batch: str, trained_before: int) -> dict[str, Any]:
        """One step: read the batch, train and checkpoint, journal it; the journal entry."""
        assert self.folder is not None
        refused = None
        try:
            table = self.folder.read(batch)
        except ArenaError as exc:  # not a batch, too big, a link: the same on every retry
            refused = str(exc)
            table = BATCH_SCHEMA.empty_table()
            self.say(f"  {batch} refused ({exc}): journaled with nothing trained; the run goes on")
        rewards = table.column("reward").to_pylist()
        mean = sum(rewards) / len(rewards) if rewards else None
        versions = sorted(set(table.column("policy_version").to_pylist()))
        entry: dict[str, Any] = {
            "batch_id": batch,
            "rows": table.num_rows,
            "mean_reward": mean,
            "played_by": versions,
            "digest": hashlib.sha256(
                json.dumps(table.column("episode_id").to_pylist()).encode()
            ).hexdigest(),
            "version": f"{self.prefix()}-v{batch_gen(batch) + 1}",
            "step": trained_before + 1,
            **({"refused": refused} if refused else {}),
        }
        entry = self.step(batch, table, entry)
        if self.lock is not None:
            self.lock.confirm()  # taken over while it trained (it was silent): the successor's to journal
        lines = [json.dumps(e, sort_keys=True) for e in self.journal()]
        lines.append(json.dumps(entry, sort_keys=True))
        self.folder.dir.write_bytes(("\n".join(lines) + "\n").encode(), self.name, "journal.jsonl")
        return entry

    def _announce(self, entry: dict[str, Any]) -> None:
        assert self.folder is not None
        version = entry["version"]
        lora_path = self.lora_path(entry)
        self.folder.announce(
            Announcement(
                batch_id=entry["batch_id"],
                version=version,
                lora_path=lora_path,
                metrics=self.metrics(entry),
            )
        )
        how = f"LoRA adapter at {lora_path}" if lora_path else "model name"
        self.say(f"  announced {version} ({how})")
