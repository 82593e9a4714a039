"""Corpora at scale: worlds and tasks generated or mined across Ray workers, judged, deduplicated, committed in shards.

``coevo corpus build --out DIR`` (:func:`build_corpus`) writes a corpus:

* ``DIR/corpus.json``, the manifest (``coevo.corpus/1``): the coevo version,
  the source and its flags, the seed, the shard size and the train/eval
  split rule. Written once; a build into a folder whose manifest says
  otherwise is refused.
* ``DIR/worlds/``, ``DIR/tasks/``, ``DIR/verdicts/``: the game log's tables
  (the same columns), one Parquet part per committed shard, partitioned
  ``shard=N``. ``pyarrow.dataset.dataset("DIR/tasks")`` reads every task
  once.
* ``DIR/_commits/shard-N.json``: shard N's commit (its rows and files).

A shard is a fixed range of world indexes, built by one Ray task: every
world of the range and its tasks, each task judged by the mechanical Judge,
near-duplicates dropped. The driver commits shards in order: it writes a
shard's parts under hidden names (``.part-0.parquet``: pyarrow's dataset
reader skips names that begin with ``.`` or ``_``), then the commit file,
then moves the parts into place. A build started again on the same folder
(after ``kill -9``, a lost node, Ctrl-C) completes the moves of committed
shards, removes the hidden parts of the others, reuses every committed
shard and builds the rest: the same corpus as an uninterrupted build, with
any number of workers. It holds the folder's lock as a run does, taking it
over at once from a builder that died on this host.

What a build depends on is only its flags: world ``i`` of a procedural
source is domain ``domains[i % len(domains)]`` built from
``derive_seed(seed, "corpus", i)``; its task ``j`` is drawn at level
``levels[(i + j) % len(levels)]``; a mined source's world ``i`` is the
``i``-th database of the folder (sorted by name), mined and drawn from with
the corpus's seed itself (so the same database twice is one world).

Deduplication (independent of build order): a task whose id was already
kept is a duplicate, and so is a *near-duplicate*: a task of the same world
with the same :func:`near_duplicate_key` — its instruction with numbers and
quoted values blanked, lower-cased, and the tool names of its reference
solution — as a task drawn before it in that world. A world whose id an
earlier shard committed (the same database twice in a folder) is dropped
with its tasks. The driver keeps one id per world, never the tasks.

The split: a world is held out for evaluation when the first eight hex
digits of its id (after ``sha256:``), read as a number, are below
``eval_share × 16⁸`` — a rule on the id, so every reader agrees without a
table of its own.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Final, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import ray
from coevo.agents.protocols import ProposalRequest
from coevo.arena.errors import CoevoError
from coevo.arena.gamelog import GameLog, RunDir, RunLock
from coevo.arena.gamelog.corpus import CORPUS_FORMAT, CORPUS_MANIFEST, held_out
from coevo.arena.gamelog.rows import TaskRow, VerdictRow, WorldRow
from coevo.arena.judge import WorldCache, assess_task
from coevo.arena.run.connection import connect
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import TaskSpec, WorldSpec
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CORPUS_FORMAT",
    "CORPUS_TABLES",
    "MANIFEST",
    "BuildReport",
    "CorpusError",
    "CorpusSource",
    "ShardResult",
    "build_corpus",
    "build_shard",
    "databases_in",
    "held_out",
    "near_duplicate_key",
]

MANIFEST: Final = CORPUS_MANIFEST
CORPUS_TABLES: Final = ("worlds", "tasks", "verdicts")
_COMMITS: Final = "_commits"
_HIDDEN: Final = ".part-0.parquet"
_PART: Final = "part-0.parquet"


class CorpusError(CoevoError):
    """A corpus cannot be built or read (the message says why and what to do)."""


class CorpusSource(BaseModel):
    """Where a corpus's worlds come from, and how many: everything a build depends on.

    Attributes:
        kind: ``procedural`` (the procedural domains) or ``mine`` (every SQLite database of a folder).
        worlds: worlds to build (for ``mine``: the databases found).
        tasks_per_world: tasks drawn in each world.
        domains: the procedural domains, in the order world indexes cycle through them.
        levels: the levels tasks are drawn at, in the order they cycle.
        seed: the seed everything derives from.
        databases: for ``mine``, the databases, sorted by name.
        per_table: for ``mine``, rows drawn from each large table.
        shard_size: worlds per shard (the unit of work and of commit).
        eval_share: the share of worlds held out for evaluation (by :func:`held_out`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["procedural", "mine"] = "procedural"
    worlds: int = Field(ge=1)
    tasks_per_world: int = Field(ge=1)
    domains: tuple[str, ...] = ()
    levels: tuple[int, ...] = (1, 2, 3, 4, 5)
    seed: int = 0
    databases: tuple[str, ...] = ()
    per_table: int = Field(default=120, ge=1)
    shard_size: int = Field(default=10, ge=1)
    eval_share: float = Field(default=0.1, ge=0, le=1)

    @property
    def shards(self) -> int:
        """Shards in all."""
        return -(-self.worlds // self.shard_size)


def near_duplicate_key(task: TaskSpec) -> str:
    """The key two near-duplicate tasks of one world share (see the module docstring)."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "?", task.instruction)
    text = re.sub(r"\d+(?:\.\d+)?", "#", text)
    text = " ".join(text.lower().split())
    tools = ",".join(call.tool for call in task.solution)
    raw = f"{task.world_id}\n{text}\n{tools}"
    return hashlib.sha256(raw.encode()).hexdigest()


# ---- one shard (a Ray task) -----------------------------------------------------------------


@dataclass
class ShardResult:
    """What one shard made: its tables' rows, its world ids and its counts."""

    shard: int
    tables: dict[str, pa.Table]
    world_ids: list[str]
    keys: list[str] = field(default_factory=list)
    """Per world (aligned with ``world_ids``): what makes two worlds the same — its id, or a mined
    database's content hash."""
    proposed: int = 0
    duplicates: int = 0
    duplicate_worlds: int = 0
    missed: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def _content_key(source: CorpusSource, index: int) -> str | None:
    """A mined database's content hash (two copies of one database are one world), else None."""
    if source.kind != "mine":
        return None
    digest = hashlib.sha256()
    with open(source.databases[index], "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return "db:" + digest.hexdigest()


def _seed(source: CorpusSource, index: int) -> int:
    """World ``index``'s seed: its own for a procedural world; the corpus's for a mined one (the same database twice is the same world)."""
    return source.seed if source.kind == "mine" else derive_seed(source.seed, "corpus", index)


def _world_source(source: CorpusSource, index: int) -> tuple[Any, str]:
    """The synthesizer of world ``index`` and the seed its requests use."""
    seed = _seed(source, index)
    if source.kind == "mine":
        from coevo.agents.synthesizers.mining import Miner  # lazy: only a mining build needs it

        return Miner(source.databases[index], seed=seed, per_table=source.per_table), ""
    from coevo.agents.synthesizers.procedural import (  # lazy: only a procedural build needs it
        ProceduralSynthesizer,
    )

    domain = source.domains[index % len(source.domains)]
    return ProceduralSynthesizer([domain]), domain


def build_shard(source: CorpusSource, shard: int) -> ShardResult:
    """Shard ``shard``: its worlds, their tasks drawn, judged and deduplicated, as the three tables."""
    started = time.perf_counter()
    worlds: list[WorldRow] = []
    tasks: list[TaskRow] = []
    verdicts: list[VerdictRow] = []
    result = ShardResult(shard, {}, [])
    first = shard * source.shard_size
    for index in range(first, min(first + source.shard_size, source.worlds)):
        try:
            synth, domain = _world_source(source, index)
        except Exception as exc:  # a database that cannot be mined: noted, the shard goes on
            result.notes.append(f"world {index}: {type(exc).__name__}: {exc}")
            continue
        seed = _seed(source, index)
        drawn: list[TaskSpec] = []
        for j in range(source.tasks_per_world):
            level = source.levels[(index + j) % len(source.levels)]
            request = ProposalRequest(
                n=source.tasks_per_world,
                seed=seed,
                level=level,
                domains=[domain] if domain else None,
            )
            try:
                task = synth.draw(request, j)
            except CoevoError as exc:
                result.notes.append(f"world {index}: {exc}")
                break
            if task is None:
                result.missed += 1
            else:
                drawn.append(task)
        if not drawn:
            continue
        world = drawn[0].world
        assert isinstance(world, WorldSpec)
        same = _content_key(source, index) or world.world_id
        if same in result.keys or world.world_id in result.world_ids:  # one world twice in a shard
            result.duplicate_worlds += 1
            continue
        result.proposed += len(drawn)
        seen_ids: set[str] = set()
        seen_keys: set[str] = set()
        kept: list[TaskSpec] = []
        for task in drawn:
            near = near_duplicate_key(task)
            if task.task_id in seen_ids or near in seen_keys:
                result.duplicates += 1
                continue
            seen_ids.add(task.task_id)
            seen_keys.add(near)
            kept.append(task)
        cache = WorldCache()
        try:
            for task in kept:
                verdicts.append(VerdictRow.of(assess_task(task, cache)))
                tasks.append(TaskRow.of(task, "fresh"))
        finally:
            cache.close()
        worlds.append(WorldRow.of(world))
        result.world_ids.append(world.world_id)
        result.keys.append(same)
    for name, rows in (("worlds", worlds), ("tasks", tasks), ("verdicts", verdicts)):
        result.tables[name] = GameLog.arrow(name, shard, [r.cells() for r in rows])
    result.seconds = time.perf_counter() - started
    return result


# ---- the driver ----------------------------------------------------------------------------


@dataclass
class BuildReport:
    """What a build did (this invocation and the corpus as a whole)."""

    out: str
    shards: int
    reused: int = 0
    built: int = 0
    worlds: int = 0
    tasks: int = 0
    accepted: int = 0
    duplicates: int = 0
    duplicate_worlds: int = 0
    missed: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The report as the command prints it."""
        rate = self.accepted / self.seconds if self.seconds else 0.0
        return [
            f"{self.out}: {self.shards} shards; reused {self.reused} committed, built {self.built}",
            f"this build: {self.worlds} worlds, {self.tasks} tasks, {self.accepted} accepted "
            f"({rate:,.0f} accepted/s over {self.seconds:.1f} s); duplicates dropped: "
            f"{self.duplicates} tasks, {self.duplicate_worlds} worlds; {self.missed} draws missed",
            *(f"  note: {n}" for n in self.notes[:10]),
        ]


def _manifest(source: CorpusSource) -> dict[str, Any]:
    try:
        version = metadata.version("coevo")
    except metadata.PackageNotFoundError:
        version = None
    return {
        "format": CORPUS_FORMAT,
        "coevo": version,
        "source": source.model_dump(mode="json"),
        "split": {
            "rule": "a world is in eval when int(world_id[7:15], 16) < eval_share * 16**8",
            "eval_share": source.eval_share,
        },
        "tables": list(CORPUS_TABLES),
        "command": sys.argv[1:],
    }


def _committed(run: RunDir) -> dict[int, dict[str, Any]]:
    out = {}
    for name in run.listdir(_COMMITS):
        if name.startswith("shard-") and name.endswith(".json"):
            data = json.loads(run.read_bytes(_COMMITS, name))
            out[int(data["shard"])] = data
    return out


def _tidy(run: RunDir, committed: dict[int, dict[str, Any]]) -> None:
    """Finish the moves of committed shards; remove the hidden parts of the others."""
    for table in CORPUS_TABLES:
        for folder in run.listdir(table):
            if not folder.startswith("shard="):
                continue
            shard = int(folder.removeprefix("shard="))
            if run.exists(table, folder, _HIDDEN):
                if shard in committed:
                    run.fs.move(run.path(table, folder, _HIDDEN), run.path(table, folder, _PART))
                else:
                    run.delete(table, folder)
            elif shard not in committed:
                run.delete(table, folder)


def _commit(run: RunDir, result: ShardResult, tables: dict[str, pa.Table], keys: list[str]) -> None:
    folder = f"shard={result.shard}"
    for name, table in tables.items():
        run.fs.create_dir(run.path(name, folder), recursive=True)
        pq.write_table(table, run.path(name, folder, _HIDDEN), filesystem=run.fs)
    record = {
        "shard": result.shard,
        "rows": {name: table.num_rows for name, table in tables.items()},
        "worlds": [w for w in tables["worlds"].column("world_id").to_pylist()],
        "keys": keys,
        "seconds": round(result.seconds, 3),
    }
    run.write_bytes(
        json.dumps(record, sort_keys=True).encode(), _COMMITS, f"shard-{result.shard}.json"
    )
    for name in tables:
        run.fs.move(run.path(name, folder, _HIDDEN), run.path(name, folder, _PART))


def _without_worlds(result: ShardResult, drop: set[str]) -> dict[str, pa.Table]:
    """The shard's tables less the worlds (and their tasks and verdicts) an earlier shard committed."""
    if not drop:
        return result.tables
    worlds = result.tables["worlds"]
    tasks = result.tables["tasks"]
    dropped_tasks = set(
        tasks.filter(pc.is_in(tasks.column("world_id"), pa.array(sorted(drop))))
        .column("task_id")
        .to_pylist()
    )
    keep_world = pc.invert(pc.is_in(worlds.column("world_id"), pa.array(sorted(drop))))
    keep_task = pc.invert(pc.is_in(tasks.column("world_id"), pa.array(sorted(drop))))
    verdicts = result.tables["verdicts"]
    keep_verdict = pc.invert(
        pc.is_in(verdicts.column("task_id"), pa.array(sorted(dropped_tasks), pa.string()))
    )
    return {
        "worlds": worlds.filter(keep_world),
        "tasks": tasks.filter(keep_task),
        "verdicts": verdicts.filter(keep_verdict),
    }


def build_corpus(
    out: str,
    source: CorpusSource,
    *,
    workers: int = 1,
    address: str | None = None,
    progress: Callable[[str], None] | None = None,
    stop_after: int | None = None,
) -> BuildReport:
    """Build (or finish building) the corpus ``source`` describes in ``out`` (see the module docstring).

    Args:
        out: the corpus folder (any pyarrow filesystem URI).
        source: what to build.
        workers: shards built at once (Ray tasks of one CPU each; a local Ray gets this many CPUs).
        address: a Ray cluster to join (else a local Ray).
        progress: called with a line after each committed shard.
        stop_after: commit at most this many shards in this call (tests of resume).

    Raises:
        CorpusError: ``out`` holds a corpus built from another source, or its commits do not read.
        LogError: another builder holds ``out``.
    """
    run = RunDir(out)
    lock = RunLock(run)
    lock.acquire()
    say = progress or (lambda line: None)
    report = BuildReport(out=run.uri, shards=source.shards)
    try:
        wanted = _manifest(source)
        if run.exists(MANIFEST):
            have = json.loads(run.read_bytes(MANIFEST))
            if have.get("format") != CORPUS_FORMAT or have.get("source") != wanted["source"]:
                raise CorpusError(
                    f"{run.uri} holds a corpus built from another source or other flags "
                    f"({have.get('source')}); resume it with the flags it was built with, or "
                    "choose another --out"
                )
        else:
            run.write_bytes(json.dumps(wanted, indent=1, sort_keys=True).encode(), MANIFEST)
        committed = _committed(run)
        _tidy(run, committed)
        report.reused = len(committed)
        seen_worlds = {
            k for data in committed.values() for k in [*data["worlds"], *data.get("keys", [])]
        }
        todo = [s for s in range(source.shards) if s not in committed]
        if not todo:
            return report
        started = connect(address, workers)
        try:
            _run_shards(run, lock, source, todo, workers, seen_worlds, report, say, stop_after)
        finally:
            if started:
                ray.shutdown()
        return report
    finally:
        lock.release()


def _run_shards(
    run: RunDir,
    lock: RunLock,
    source: CorpusSource,
    todo: list[int],
    workers: int,
    seen_worlds: set[str],
    report: BuildReport,
    say: Callable[[str], None],
    stop_after: int | None,
) -> None:
    remote = ray.remote(num_cpus=1, max_retries=3)(build_shard)
    source_ref = ray.put(source)
    window = max(2, 2 * workers)
    pending: dict[Any, int] = {}
    done: dict[int, ShardResult] = {}
    queue: Iterator[int] = iter(todo)
    order = list(todo)
    started = time.perf_counter()

    def submit() -> None:
        while len(pending) + len(done) < window:
            shard = next(queue, None)
            if shard is None:
                return
            pending[remote.remote(source_ref, shard)] = shard

    submit()
    while order:
        if stop_after is not None and report.built >= stop_after:
            for ref in pending:
                ray.cancel(ref, force=True)
            return
        while order[0] not in done:
            ready, _ = ray.wait(list(pending), num_returns=1)
            shard = pending.pop(ready[0])
            done[shard] = ray.get(ready[0])
            submit()
        result = done.pop(order.pop(0))
        duplicate = {
            w
            for w, k in zip(result.world_ids, result.keys, strict=True)
            if w in seen_worlds or k in seen_worlds
        }
        tables = _without_worlds(result, duplicate)
        kept_keys = [
            k for w, k in zip(result.world_ids, result.keys, strict=True) if w not in duplicate
        ]
        lock.confirm()
        _commit(run, result, tables, kept_keys)
        seen_worlds.update(result.world_ids)
        seen_worlds.update(result.keys)
        accepted = sum(tables["verdicts"].column("accepted").to_pylist())
        report.built += 1
        report.worlds += tables["worlds"].num_rows
        report.tasks += tables["tasks"].num_rows
        report.accepted += accepted
        report.duplicates += result.duplicates
        report.duplicate_worlds += len(duplicate) + result.duplicate_worlds
        report.missed += result.missed
        report.notes.extend(result.notes)
        report.seconds = time.perf_counter() - started
        say(
            f"shard {result.shard + 1}/{source.shards}: {tables['tasks'].num_rows} tasks, "
            f"{accepted} accepted ({report.accepted / report.seconds:,.0f} accepted/s)"
        )
        submit()


def databases_in(folder: str | Path) -> list[str]:
    """Every SQLite database in ``folder`` (by its header), sorted by name."""
    found = []
    for path in sorted(Path(folder).iterdir()):
        if path.is_file():
            with path.open("rb") as handle:
                if handle.read(16) == b"SQLite format 3\x00":
                    found.append(str(path.resolve()))
    return found
