"""The trainer hand-off: training batches out to an external trainer, policy versions back in.

With a ``[trainer]`` table the Solver's learning step is a trainer's (prime-rl,
verl, TRL, OpenRLHF, or :mod:`coevo.run.handoff.reference_trainer`), and coevo is
the environment-and-curriculum side of its run. ``docs/trainer.md`` is the
protocol as a trainer author reads it; in short:

* after generation ``g`` is committed, coevo hands out the batch
  ``batch-{g:06d}``: one row per training rollout of ``g`` (:data:`BATCH_SCHEMA`),
  built from the committed log, so the same batch whenever it is built;
* the trainer trains on it and *announces* the policy it made
  (:class:`Announcement`): a model name, or a LoRA adapter that coevo asks the
  server to load (vLLM's ``/v1/load_lora_adapter``) before its next rollouts;
* generation ``n`` plays only when the policy has been trained through batch
  ``n − 1 − k`` (``run.max_staleness = k``; 0: strict order), with the newest
  announced policy; the ``policies`` table says which, and every trajectory
  is signed with it;
* an adapter coevo loaded is unloaded again (vLLM's ``/v1/unload_lora_adapter``)
  once no generation still to play may use it (:meth:`Handoff.unload_stale`):
  a long run does not fill the server.

Two transports. The **folder** (a local path or any pyarrow filesystem URI;
default ``RUN_DIR/trainer``) hands each batch out *exactly once*: its file
appears whole under its final name (written to a temporary name, then moved;
on an object store the moved object appears whole) and is never written
again, and a batch is built only from committed generations, so a ``kill -9``
of coevo before it was written is made good by ``coevo resume``. The **Ray
queue** (a named actor in the run's cluster) delivers *at least once*: it
lives with the driver, so after a ``kill -9`` of the driver ``coevo resume``
offers a new queue every batch after the policy its checkpoint played, and a
trainer announces again, without training, a batch it has trained on.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Literal, Protocol

import pyarrow as pa
from coevo.agents.registry import REGISTRY
from coevo.arena.bounded import MAX_JSON_BYTES
from coevo.arena.errors import ArenaError, CoevoError, FileRefusedError, TrainerTimeout
from coevo.arena.gamelog import GameLog, PolicyRow, RunDir
from coevo.arena.gamelog.figures import TaskLevels
from coevo.arena.outcomes import Episode
from coevo.arena.settings import StrictNumbers
from coevo.run.handoff.batches import (
    BATCH_FORMAT,
    BATCH_ID,
    BATCH_SCHEMA,
    NEEDED,
    POLICY_FORMAT,
    PROPOSAL_COLUMNS,
    Announcement,
    batch_gen,
    batch_id,
    batch_markdown,
    batch_of,
    dynamic_sampling,
    parquet_bytes,
    read_announcement,
    read_batch_bytes,
    run_identity,
    training_batch,
)
from pydantic import ConfigDict, Field

__all__ = [
    "BATCH_FORMAT",
    "BATCH_SCHEMA",
    "POLICY_FORMAT",
    "Announcement",
    "BatchQueue",
    "FolderTransport",
    "Handoff",
    "QueueTransport",
    "TrainerConfig",
    "TrainerTimeout",
    "Transport",
    "announced_policy",
    "batch_gen",
    "batch_id",
    "batch_markdown",
    "batch_of",
    "folder_uri",
    "policy_row",
    "read_announcement",
    "read_batch_bytes",
    "run_identity",
    "training_batch",
    "transport_for",
    "unreproducible_sampling",
]

SETTLING: Final = 10.0
"""Seconds an announcement that does not parse is given to be written whole (a trainer writing in place)."""


class TrainerConfig(StrictNumbers):
    """``[trainer]``: the Solver is trained by an external trainer (the hand-off).

    Attributes:
        transport: ``folder`` (a folder or object-store URI; exactly once) or
            ``ray-queue`` (a named actor in the run's Ray cluster; at least once).
        uri: the folder; empty: ``trainer`` inside the run directory.
        queue: the queue actor's name (``ray-queue``); empty: ``coevo-trainer``.
        timeout: seconds to wait for the trainer's announcement before the run
            ends (its generations committed; ``coevo resume`` goes on); at most 30 days.
        poll: seconds between looks at the folder for an announcement.
        load_adapters: ask the Solver's servers to load an announced LoRA adapter
            (false: the trainer or an operator loads it; coevo only names it).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    transport: Literal["folder", "ray-queue"] = "folder"
    uri: str = ""
    queue: str = ""
    timeout: float = Field(default=1800.0, gt=0, le=30 * 86_400)
    poll: float = Field(default=0.5, gt=0, le=60)
    load_adapters: bool = True


_UNREPRODUCIBLE: Final = (
    ("top_p", lambda v: v < 1, "keeps only the likeliest tokens, up to top_p of the mass", "1"),
    ("top_k", lambda v: v > 0, "keeps only the k likeliest tokens", "-1 (every token)"),
    ("min_p", lambda v: v > 0, "drops tokens less likely than min_p × the likeliest", "0"),
    ("repetition_penalty", lambda v: v != 1, "penalises tokens already in the text", "1"),
    ("presence_penalty", lambda v: v != 0, "penalises tokens already in the text", "0"),
    ("frequency_penalty", lambda v: v != 0, "penalises tokens by how often they came", "0"),
)
"""Each parameter a trainer cannot reproduce: when its value is wrong, what it does, its neutral value."""


def _finite(value: Any) -> float | None:
    """``value`` as a finite number, or None (a bool, a string, NaN, ±inf)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def unreproducible_sampling(sent: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    """The sampling parameters of ``sent`` that a trainer cannot reproduce, each with why and what to set.

    A trainer scores a rollout's tokens as ``log_softmax(logits / temperature)``
    (``coevo train`` does, as TRL, verl and prime-rl do) and weighs them against the
    log-probabilities the server recorded: a distribution the server truncated
    (``top_p``, ``top_k``, ``min_p``), penalised (``repetition_penalty``,
    ``presence_penalty``, ``frequency_penalty``) or made greedy (``temperature = 0``)
    is one it never computes, so its importance ratios would be wrong.

    Args:
        sent: the sampling parameters a Solver's calls send (as a trajectory records them).

    Returns:
        ``(parameter, value, what is wrong and what to set)`` for each, in a fixed order.
    """
    problems: list[tuple[str, Any, str]] = []
    if "temperature" in sent:
        value = _finite(sent["temperature"])
        if value is None or value <= 0:
            what = "is not a finite number" if value is None else "samples greedily"
            problems.append(
                (
                    "temperature",
                    sent["temperature"],
                    f"{what}; set a temperature above 0 (1: the model's own distribution)",
                )
            )
    for name, wrong, what, neutral in _UNREPRODUCIBLE:
        if name not in sent:
            continue
        value = _finite(sent[name])
        if value is None:
            problems.append((name, sent[name], f"is not a finite number; set {neutral}"))
        elif wrong(value):
            problems.append((name, sent[name], f"{what}; set {neutral}, or leave it out"))
    return problems


# ---- transports -----------------------------------------------------------------------------


class Transport(Protocol):
    """Where batches go and announcements come from (coevo's side and the trainer's)."""

    def claim(self, run: str) -> None:
        """Tie the transport to the run ``run`` (refuse one that serves another run)."""
        ...

    def offer(self, batch: str, table: pa.Table) -> bool:
        """Hand the batch out unless it was already; True when it was handed out now."""
        ...

    def offered(self) -> list[str]:
        """The batch ids handed out, sorted."""
        ...

    def announcements(self, after: int = -1) -> dict[str, Announcement]:
        """The announcements made for batches of generations after ``after``, by batch id."""
        ...


class FolderTransport:
    """The folder transport (exactly once): ``batches/``, ``versions/`` and ``transport.json`` in a folder or URI.

    Args:
        uri: the folder (a local path or any pyarrow filesystem URI).
    """

    def __init__(self, uri: str):
        self.dir = RunDir(uri)
        self.uri = uri

    def claim(self, run: str) -> None:
        """Write ``transport.json`` naming the run; refuse a folder another run's batches are in.

        Raises:
            ArenaError: the folder serves another run.
        """
        record = {"format": "coevo.trainer/1", "run": run}
        if self.dir.exists("transport.json"):
            try:
                there = self.dir.read_json("transport.json").get("run")
            except (OSError, ValueError, AttributeError):
                there = None
            if there != run:
                raise ArenaError(
                    f"the trainer folder {self.uri} serves another run ({there!r}, this one is "
                    f"{run!r}); give this run a folder of its own (trainer.uri), or leave it "
                    "empty for RUN_DIR/trainer"
                )
            return
        self.dir.write_bytes(json.dumps(record).encode(), "transport.json")

    def offer(self, batch: str, table: pa.Table) -> bool:
        """Write ``batches/<batch>.parquet`` whole (moved into place), unless it is there.

        Returns:
            True when it was written now; False when it was handed out before.
        """
        name = f"{batch}.parquet"
        if self.dir.exists("batches", name):
            return False
        self.dir.write_bytes(parquet_bytes(table), "batches", name)
        return True

    def offered(self) -> list[str]:
        """The batches handed out (names ending ``.parquet``: a temporary ``.partial`` is not one)."""
        return [n.removesuffix(".parquet") for n in self.dir.listdir("batches") if _batch_file(n)]

    def read(self, batch: str) -> pa.Table:
        """A batch's rows (the trainer's side).

        Raises:
            ArenaError: the file is not a coevo batch.
        """
        try:
            data = self.dir.read_bytes("batches", f"{batch}.parquet")
        except FileRefusedError as exc:  # a link, a device, too big: refused unread
            raise ArenaError(str(exc)) from None
        return read_batch_bytes(data, f"{self.uri}/batches/{batch}.parquet")

    def announcements(self, after: int = -1) -> dict[str, Announcement]:
        """The announcements in ``versions/`` for batches of generations after ``after``, by batch id.

        Only those files are read (a long run's wait reads few). A file that does
        not parse but was written in the last :data:`SETTLING` seconds is taken for
        one being written in place, and looked at again next time.

        Raises:
            ArenaError: a file there is not an announcement, or is named for another batch.
        """
        out: dict[str, Announcement] = {}
        for name in self.dir.listdir("versions"):
            stem = name.removesuffix(".json")
            if not name.endswith(".json") or BATCH_ID.fullmatch(stem) is None:
                continue  # a temporary name, or none of the protocol's
            if batch_gen(stem) <= after:
                continue
            where = f"{self.uri}/versions/{name}"
            try:
                data = self.dir.read_bytes("versions", name, limit=MAX_JSON_BYTES)
            except FileRefusedError as exc:  # a link, a device, too big: refused unread
                raise ArenaError(
                    f"{exc}; an announcement is a small JSON file the trainer writes there "
                    "(docs/trainer.md)"
                ) from None
            try:
                announcement = read_announcement(data, where)
            except ArenaError:
                if self._settling("versions", name):
                    continue
                raise
            if announcement.batch_id != stem:
                raise ArenaError(
                    f"{where} announces a policy for {announcement.batch_id}: an announcement "
                    "is named after its batch (versions/<batch_id>.json)"
                )
            out[announcement.batch_id] = announcement
        return out

    def _settling(self, *parts: str) -> bool:
        """Whether the file was written in the last :data:`SETTLING` seconds."""
        mtime = self.dir.fs.get_file_info(self.dir.path(*parts)).mtime
        return (
            mtime is not None
            and (datetime.now(UTC) - mtime.astimezone(UTC)).total_seconds() < SETTLING
        )

    def announce(self, announcement: Announcement) -> None:
        """Write ``versions/<batch_id>.json`` whole (the trainer's side)."""
        data = announcement.model_dump_json(exclude_none=True).encode()
        self.dir.write_bytes(data, "versions", f"{announcement.batch_id}.json")


def _batch_file(name: str) -> bool:
    return (
        name.endswith(".parquet") and BATCH_ID.fullmatch(name.removesuffix(".parquet")) is not None
    )


class BatchQueue:
    """The Ray queue transport's actor: batches in order of their ids, announcements back.

    Held by the driver's Ray job: it does not survive a ``kill -9`` of the driver,
    so ``coevo resume`` offers again every batch after the policy it last played
    (at least once). A batch's rows are dropped once its policy is announced.
    """

    def __init__(self) -> None:
        self.run: str | None = None
        self.batches: dict[str, pa.Table | None] = {}
        self.said: dict[str, dict[str, Any]] = {}

    def claim(self, run: str) -> str | None:
        """Tie the queue to ``run``; the run it serves already, if another."""
        if self.run is None:
            self.run = run
        return None if self.run == run else self.run

    def offer(self, batch: str, table: pa.Table) -> bool:
        """Queue a batch unless it is queued already."""
        if batch in self.batches:
            return False
        self.batches[batch] = table
        return True

    def offered(self) -> list[str]:
        """The batch ids queued, sorted."""
        return sorted(self.batches)

    def take(self) -> tuple[str, pa.Table] | None:
        """The oldest batch whose policy is not announced yet (the trainer's side), or None.

        The same batch until its policy is announced: a trainer killed after
        taking it gets it again.
        """
        for batch in sorted(self.batches):
            table = self.batches[batch]
            if batch not in self.said and table is not None:
                return batch, table
        return None

    def announce(self, announcement: dict[str, Any]) -> None:
        """Record an announcement (the trainer's side); the batches it was trained through are let go."""
        batch = str(announcement.get("batch_id"))
        self.said[batch] = dict(announcement)
        for queued in self.batches:
            if queued <= batch:
                self.batches[queued] = None

    def announcements(self) -> dict[str, dict[str, Any]]:
        """Every announcement, by batch id."""
        return dict(self.said)


class QueueTransport:
    """The Ray queue transport (at least once): a named :class:`BatchQueue` actor in the run's cluster.

    Args:
        name: the actor's name (a trainer in the cluster finds it with ``ray.get_actor(name)``).
        create: create the actor if it does not exist (coevo's side); the trainer's side waits for it.
    """

    def __init__(self, name: str, *, create: bool = True):
        import ray  # the folder transport, and the reference trainer with it, need no Ray

        self.ray: Any = ray
        self.name = name
        self.actor: Any
        if create:
            self.actor = (
                ray.remote(BatchQueue).options(name=name, get_if_exists=True, num_cpus=0).remote()
            )
        else:
            self.actor = ray.get_actor(name)

    def claim(self, run: str) -> None:
        """Tie the queue to the run.

        Raises:
            ArenaError: the queue of that name serves another run.
        """
        other = self.ray.get(self.actor.claim.remote(run))
        if other is not None:
            raise ArenaError(
                f"the Ray queue {self.name!r} serves another run ({other!r}); give this run "
                "another trainer.queue"
            )

    def offer(self, batch: str, table: pa.Table) -> bool:
        """Queue the batch unless it is queued already."""
        return bool(self.ray.get(self.actor.offer.remote(batch, table)))

    def offered(self) -> list[str]:
        """The batch ids queued."""
        return list(self.ray.get(self.actor.offered.remote()))

    def take(self) -> tuple[str, pa.Table] | None:
        """The oldest batch whose policy is not announced yet (the same until it is), or None."""
        return self.ray.get(self.actor.take.remote())

    def announcements(self, after: int = -1) -> dict[str, Announcement]:
        """The announcements for batches of generations after ``after``, by batch id, checked.

        Raises:
            ArenaError: one is not an announcement.
        """
        said = self.ray.get(self.actor.announcements.remote())
        return {
            batch: read_announcement(data, f"the announcement for {batch} on queue {self.name!r}")
            for batch, data in said.items()
            if BATCH_ID.fullmatch(batch) is None or batch_gen(batch) > after
        }

    def announce(self, announcement: Announcement) -> None:
        """Announce a policy (the trainer's side)."""
        self.ray.get(self.actor.announce.remote(announcement.model_dump(exclude_none=True)))


def transport_for(config: TrainerConfig, run: RunDir) -> FolderTransport | QueueTransport:
    """The transport a ``[trainer]`` table names, for the run in ``run``."""
    if config.transport == "ray-queue":
        return QueueTransport(config.queue or "coevo-trainer")
    return FolderTransport(folder_uri(config.uri, run))


def folder_uri(uri: str, run: RunDir) -> str:
    """The trainer folder of ``trainer.uri`` for the run in ``run``: empty, ``RUN_DIR/trainer``; a relative path is inside the run directory."""
    if not uri:
        return f"{run.uri.rstrip('/')}/trainer"
    if "://" in uri or uri.startswith("/"):
        return uri
    return f"{run.uri.rstrip('/')}/{uri}"


# ---- coevo's side ---------------------------------------------------------------------------


class Handoff:
    """The loop's side of the hand-off: hand out each committed generation's batch, wait for policies.

    Args:
        config: the ``[trainer]`` table.
        log: the run's game log.
        max_staleness: ``run.max_staleness``.
        transport: where batches go (default: the one ``config`` names).
        events: ``events(name, **fields)``.
        clock: the time source (tests pass one).
        sleep: how to wait between looks.
    """

    def __init__(
        self,
        config: TrainerConfig,
        log: GameLog,
        max_staleness: int,
        *,
        transport: Transport | None = None,
        events: Callable[..., None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.config = config
        self.log = log
        self.k = max_staleness
        self.transport = transport or transport_for(config, log.run)
        self.events = events or (lambda event, **kw: None)
        self.clock = clock
        self.sleep = sleep
        self.policy: Announcement | None = None  # the newest policy adopted
        self.loaded: dict[str, int] = {}
        """Adapters this run had loaded (a server answered "loaded") and has not unloaded: name → trained through."""
        self.unload_failures = 0  # unloads that failed in this process (each an event)
        self.serving: tuple[str, Any] | None = None  # the Solver's name and settings (load's)
        self.levels = TaskLevels()  # each logged task's level (staging)
        self.staged: tuple[int, pa.Table] | None = None  # a generation's batch, before its commit

    @property
    def trained_through(self) -> int:
        """The last generation whose batch the policy in use was trained on (-1: none)."""
        return -1 if self.policy is None else self.policy.trained_through

    def start(self, committed: int, policy: Announcement | None) -> list[str]:
        """Claim the transport and hand out every committed generation's batch not yet handed out.

        Args:
            committed: generations committed so far.
            policy: the policy the last checkpoint played (None: the base model).

        Returns:
            The batch ids handed out now (after a crash between a commit and its hand-out).
        """
        self.transport.claim(run_identity(self.log.run))
        self.policy = policy
        offered = set(self.transport.offered())
        ahead = sorted(b for b in offered if batch_gen(b) >= committed)
        if ahead:
            raise ArenaError(
                f"the trainer has {ahead[0]} ({len(ahead)} batches in all) of generations the log "
                f"of {self.log.run.uri} no longer holds ({committed} committed; `coevo doctor "
                "--repair` truncated it?), so the trainer may have trained on rollouts the log has "
                "lost; start a new run, or, if the trainer never read them, remove those batches "
                "and their announcements and resume"
            )
        out = []
        # a folder keeps every batch; a new queue needs only those the policy was not trained on
        first = 0 if isinstance(self.transport, FolderTransport) else self.trained_through + 1
        for gen in range(first, committed):
            batch = batch_id(gen)
            if batch not in offered and self.transport.offer(batch, training_batch(self.log, gen)):
                out.append(batch)
        return out

    def stage(self, gen: int, tables: Mapping[str, pa.Table]) -> None:
        """Make generation ``gen``'s batch from the tables just written to its parts, before the commit.

        Building it from the rows in memory spares reading the token columns back;
        :meth:`hand_out` hands it out once the generation is committed. A driver
        killed in between leaves it unsent: the resumed run builds it from the log.
        """
        levels = self.levels.up_to(self.log, gen, tables["tasks"])
        trajectories = tables["trajectories"].select(NEEDED)
        proposals = tables["proposals"].select(PROPOSAL_COLUMNS)
        dynamic = dynamic_sampling(tables["generations"])
        self.staged = (
            gen,
            batch_of(trajectories, levels, gen, proposals, informative_only=dynamic),
        )

    def hand_out(self, gen: int) -> bool:
        """Hand out committed generation ``gen``'s batch (once); True when it went now."""
        staged, self.staged = self.staged, None
        batch = staged[1] if staged is not None and staged[0] == gen else None
        if batch is None:
            batch = training_batch(self.log, gen)
        return self.transport.offer(batch_id(gen), batch)

    def finish(self, last: int) -> None:
        """At the run's end: a Ray queue dies with its driver, so wait until the trainer has announced the last batch.

        A folder keeps its batches for a trainer that comes later: nothing to wait for.

        Raises:
            TrainerTimeout: not within ``trainer.timeout`` (the message says what was not taken).
        """
        if isinstance(self.transport, FolderTransport) or last < 0:
            return
        started = self.clock()
        while batch_id(last) not in self.transport.announcements(after=last - 1):
            if self.clock() - started >= self.config.timeout:
                raise TrainerTimeout(
                    f"the trainer announced no policy for {batch_id(last)}, the run's last batch, "
                    f"within {self.config.timeout:g} s (trainer.timeout); every generation is "
                    f"committed, but the Ray queue {getattr(self.transport, 'name', '')!r} ends "
                    "with this run, and the batches after the last announced one with it: to "
                    "leave batches for a trainer that comes later, use the folder transport"
                )
            self.sleep(self.config.poll)

    def policy_for(self, gen: int) -> Announcement | None:
        """The policy generation ``gen`` plays: the newest announced, trained through batch ``gen − 1 − k`` at least.

        Waits for the trainer when it is behind, up to ``trainer.timeout``.

        Args:
            gen: the generation about to play.

        Returns:
            The announcement to adopt, or None to keep the policy in use.

        Raises:
            TrainerTimeout: no announcement in time (the message says how to resume).
            ArenaError: an announcement that cannot be read, or one for a batch not handed out.
        """
        needed = gen - 1 - self.k
        started = self.clock()
        waited = False
        while True:
            newest = self._newest(gen)
            if newest is not None and newest.trained_through >= needed:
                break
            if needed < 0 or self.trained_through >= needed:
                newest = None
                break
            if not waited:
                waited = True
                self.events(
                    "trainer_waiting",
                    gen=gen,
                    batch=batch_id(needed),
                    why="no policy trained through it announced yet",
                    timeout=self.config.timeout,
                )
            if self.clock() - started >= self.config.timeout:
                raise TrainerTimeout(self._timeout_message(gen, needed))
            self.sleep(self.config.poll)
        if newest is None or (self.policy is not None and newest == self.policy):
            return None
        return newest

    def _newest(self, gen: int) -> Announcement | None:
        """The announcement for the latest batch before ``gen``, newer than the policy in use (or None)."""
        said = self.transport.announcements(after=self.trained_through)
        for batch in said:
            if batch_gen(batch) >= gen:
                where = (
                    f"{self.transport.uri}/versions/{batch}.json"
                    if isinstance(self.transport, FolderTransport)
                    else f"the announcement for {batch}"
                )
                raise ArenaError(
                    f"the trainer announced a policy for {batch}, a batch not handed out yet "
                    f"(generation {gen} is about to play): a trainer announces only for batches "
                    f"it has read. Remove {where} (or fix the trainer), then "
                    f"`coevo resume {self.log.run.uri}`"
                )
        candidates = [a for a in said.values() if a.trained_through > self.trained_through]
        return max(candidates, key=lambda a: a.trained_through, default=None)

    def load(self, policy: Announcement, solver: str, settings: Any, gen: int) -> None:
        """Have the Solver's servers load ``policy``'s LoRA adapter (``load_adapters``), or check that they serve its model.

        Args:
            policy: the announcement.
            solver: the Solver's registered name (its class loads adapters: ``load_adapter``).
            settings: the Solver's settings (its servers and key).
            gen: the generation about to play it (for the message).

        Raises:
            ArenaError: the server refused or could not be reached (and how to go on).
        """
        factory = REGISTRY.get(solver).factory
        self.serving = (solver, settings)
        try:
            if policy.lora_path is not None and self.config.load_adapters:
                now = factory.load_adapter(settings, policy.served_as, policy.lora_path)
                if now is True:  # loaded by this run: it may unload it (never one it found there)
                    self.loaded[policy.served_as] = policy.trained_through
            else:  # a model the server serves already (or an adapter an operator loaded)
                factory.check_served(settings, policy.served_as)
        except CoevoError as exc:
            raise ArenaError(
                f"{exc}; generations 0–{gen - 1} are committed: fix the server or the "
                f"announcement {policy.batch_id}, then `coevo resume {self.log.run.uri}`"
            ) from None

    def unload_stale(self, gen: int) -> list[str]:
        """Unload the adapters this run loaded that no generation from ``gen − 1`` on may play.

        Generation ``g`` plays a policy trained through batch ``g − 1 − k`` or later
        (``run.max_staleness = k``), so once ``gen`` has adopted its policy an adapter
        trained through a batch before ``gen − 2 − k`` is out of the staleness window of
        every generation still playing (``gen − 1``'s proposals may be in flight: self-play)
        or to come. The policy in use is never unloaded, nor an adapter the run found
        loaded (an operator's ``--lora-modules``, the base model, one an earlier process
        loaded that the checkpoint does not name). An unload that fails is an event
        (``adapter_unload_failed``), counted; the adapter is tried again after the next
        policy is adopted, and the run goes on.

        The Solver's servers are those :meth:`load` was last given (its class unloads
        adapters: ``unload_adapter``).

        Args:
            gen: the generation that has just adopted its policy.

        Returns:
            The adapters unloaded now.
        """
        if not self.loaded or self.serving is None:
            return []
        solver, settings = self.serving
        factory = REGISTRY.get(solver).factory
        if not callable(getattr(factory, "unload_adapter", None)):
            return []
        oldest = gen - 2 - self.k
        in_use = None if self.policy is None else self.policy.served_as
        stale = sorted(
            (through, name)
            for name, through in self.loaded.items()
            if through < oldest and name != in_use
        )
        unloaded = []
        for through, name in stale:
            try:
                held = factory.unload_adapter(settings, name)
            except Exception as exc:  # a server's failure, or a plugin's: never a failed run
                self.unload_failures += 1
                self.events(
                    "adapter_unload_failed",
                    gen=gen,
                    adapter=name,
                    error=str(exc)
                    if isinstance(exc, CoevoError)
                    else f"{type(exc).__name__}: {exc}",
                    failures=self.unload_failures,
                    why="kept loaded; tried again when the next policy is adopted",
                )
                continue
            del self.loaded[name]
            unloaded.append(name)
            self.events(
                "adapter_unloaded",
                gen=gen,
                adapter=name,
                trained_through=batch_id(through),
                held=held is not False,  # False: no server held it (restarted since)
            )
        return unloaded

    def loaded_state(self) -> dict[str, int]:
        """What a checkpoint keeps of the adapters this run loaded (name → trained through)."""
        return dict(sorted(self.loaded.items()))

    def restore_loaded(self, data: Any) -> None:
        """Take back a checkpoint's :meth:`loaded_state` (anything else in it is not known to be this run's: ignored)."""
        if isinstance(data, dict):
            self.loaded = {
                name: through
                for name, through in data.items()
                if isinstance(name, str)
                and isinstance(through, int)
                and not isinstance(through, bool)
            }

    def adopted(self, policy: Announcement, gen: int) -> None:
        """``policy`` is in use from generation ``gen`` on (its adapter loaded, the Solvers told)."""
        self.policy = policy
        self.events(
            "policy_adopted",
            gen=gen,
            version=policy.version,
            model=policy.served_as,
            trained_through=policy.batch_id,
            adapter=policy.lora_path is not None,
        )

    def _timeout_message(self, gen: int, needed: int) -> str:
        where = (
            f"{self.transport.uri}/batches"
            if isinstance(self.transport, FolderTransport)
            else f"the Ray queue {getattr(self.transport, 'name', '')!r}"
        )
        run = self.log.run.uri
        committed = "generation 0 is" if gen == 1 else f"generations 0–{gen - 1} are"
        return (
            f"the trainer announced no policy trained through {batch_id(needed)} within "
            f"{self.config.timeout:g} s (trainer.timeout), so generation {gen} cannot play "
            f"(run.max_staleness = {self.k}); {committed} committed and their "
            f"batches are in {where}. Start or fix the trainer (e.g. `coevo reference-trainer "
            f"{run}`); a trainer that is running but slower, or that announces only every few "
            f"batches, needs a longer trainer.timeout or a larger run.max_staleness (edit them "
            f"in {run}/experiment.json). Then continue with `coevo resume {run}`"
        )


def policy_row(
    gen: int,
    version: str,
    policy: Announcement | None,
    episodes: Sequence[Episode],
    proposed: int = 0,
    *,
    batch: Sequence[Episode] | None = None,
) -> PolicyRow:
    """Generation ``gen``'s ``policies`` row: the policy that played (``version``), how stale, and its batch.

    ``proposed``: the proposer rollouts of the generation (self-play), rows of its batch too.
    ``batch``: the training episodes its batch holds (with dynamic sampling, those of
    informative groups; None: every one of ``episodes``).
    """
    trained = -1 if policy is None else policy.trained_through
    answered = next((e.trajectory.model for e in episodes if e.trajectory is not None), version)
    return PolicyRow(
        version=version,
        model=answered if policy is None else policy.served_as,
        lora_path=None if policy is None else policy.lora_path,
        announced_for=None if policy is None else policy.batch_id,
        trained_through=trained,
        staleness=gen - 1 - trained,
        batch_id=batch_id(gen),
        batch_rows=sum(
            e.trajectory is not None and not e.failure
            for e in (episodes if batch is None else batch)
        )
        + proposed,
        trainer_metrics=(
            None
            if policy is None or not policy.metrics
            else json.dumps(policy.metrics, sort_keys=True)
        ),
    )


def announced_policy(data: Any) -> Announcement | None:
    """The policy a checkpoint recorded (None: the base model)."""
    return None if data is None else read_announcement(data, "the checkpoint's policy")
