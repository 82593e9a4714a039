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

An experiment file's Synthesizer (an LLM's) is the third source: world
index ``i`` sends it :func:`requests_of` — the same on every build; the
answers need not be, so a resumed build is complete and duplicate-free, not
the one an uninterrupted build would have made. A failed proposal is
counted; a shard whose every proposal failed is not committed (the next
build tries it again). The key reaches the workers as the arena hands it to
its actors (:class:`SynthesizerRole`), never a file.

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
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import ray
from coevo.agents.protocols import ProposalRequest
from coevo.agents.registry import REGISTRY
from coevo.arena.difficulty import task_level
from coevo.arena.errors import CoevoError, FileRefusedError
from coevo.arena.gamelog import GameLog, RunDir, RunLock
from coevo.arena.gamelog.corpus import CORPUS_FORMAT, CORPUS_MANIFEST, held_out
from coevo.arena.gamelog.lock import LOCK_NAME
from coevo.arena.gamelog.rows import TaskRow, VerdictRow, WorldRow
from coevo.arena.judge import WorldCache, assess_task
from coevo.arena.secrets import redact
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import TaskSpec, WorldSpec
from coevo.run.actors.connection import ray_for
from coevo.run.actors.inprocess import LocalRef, LocalTask, get, wait
from coevo.run.corpus.from_experiment import (
    CorpusError,
    ExperimentSynthesizer,
    SynthesizerRole,
    environment,
    experiment_synthesizer,
    public_config,
)
from coevo.run.driver.driving import claim
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "CORPUS_FORMAT",
    "CORPUS_TABLES",
    "MANIFEST",
    "BuildReport",
    "CorpusError",
    "CorpusSource",
    "ExperimentSynthesizer",
    "ShardResult",
    "SynthesizerRole",
    "build_corpus",
    "build_record",
    "build_shard",
    "databases_in",
    "experiment_synthesizer",
    "held_out",
    "near_duplicate_key",
    "public_config",
    "requests_of",
]

MANIFEST: Final = CORPUS_MANIFEST
CORPUS_TABLES: Final = ("worlds", "tasks", "verdicts")
_COMMITS: Final = "_commits"
_FAILED: Final = "_failed"
_HIDDEN: Final = ".part-0.parquet"
_PART: Final = "part-0.parquet"


class CorpusSource(BaseModel):
    """Where a corpus's worlds come from, and how many: everything a build depends on.

    Attributes:
        kind: ``procedural`` (the procedural domains), ``mine`` (every SQLite database of a
            folder) or ``experiment`` (the Synthesizer of an experiment file).
        worlds: worlds to build (for ``mine``: the databases found; for ``experiment``: the
            world indexes, each asking the Synthesizer for ``tasks_per_world`` tasks).
        tasks_per_world: tasks drawn in each world.
        domains: the procedural domains, in the order world indexes cycle through them (for
            ``experiment``: optional hints, cycled the same way; none: the Synthesizer's choice).
        levels: the levels tasks are drawn at, in the order they cycle.
        seed: the seed everything derives from.
        databases: for ``mine``, the databases, sorted by name.
        per_table: for ``mine``, rows drawn from each large table.
        shard_size: worlds per shard (the unit of work and of commit).
        eval_share: the share of worlds held out for evaluation (by :func:`held_out`).
        synthesizer: for ``experiment``, the Synthesizer (its name, config and file's hash).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["procedural", "mine", "experiment"] = "procedural"
    worlds: int = Field(ge=1)
    tasks_per_world: int = Field(ge=1)
    domains: tuple[str, ...] = ()
    levels: tuple[int, ...] = (1, 2, 3, 4, 5)
    seed: int = 0
    databases: tuple[str, ...] = ()
    per_table: int = Field(default=120, ge=1)
    shard_size: int = Field(default=10, ge=1)
    eval_share: float = Field(default=0.1, ge=0, le=1)
    synthesizer: ExperimentSynthesizer | None = None

    @model_validator(mode="after")
    def _synthesizer_with_its_kind(self) -> CorpusSource:
        if (self.kind == "experiment") != (self.synthesizer is not None):
            raise ValueError("an experiment source, and only one, names its synthesizer")
        return self

    @property
    def shards(self) -> int:
        """Shards in all."""
        return -(-self.worlds // self.shard_size)


_Rows = dict[str, list[Any]]
"""The rows a shard keeps, by table (worlds, tasks, verdicts)."""


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
    asked: int = 0
    """Tasks asked of the source (worlds × tasks per world)."""
    proposed: int = 0
    duplicates: int = 0
    duplicate_worlds: int = 0
    missed: int = 0
    failed: int = 0
    """Proposals that ended on a failed call (an experiment's Synthesizer: the API down, a refused key)."""
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def failed_entirely(self) -> bool:
        """Every proposal of the shard failed: it is not committed (the next build tries it again)."""
        return self.failed > 0 and self.failed >= self.asked


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


def _keep(
    world: WorldSpec, drawn: list[TaskSpec], same: str, result: ShardResult, rows: _Rows
) -> None:
    """One world's tasks drawn in order: duplicates dropped, each judged, the rows kept (none for a world already kept)."""
    if same in result.keys or world.world_id in result.world_ids:  # one world twice in a shard
        result.duplicate_worlds += 1
        return
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
            rows["verdicts"].append(VerdictRow.of(assess_task(task, cache)))
            rows["tasks"].append(TaskRow.of(task, "fresh"))
    finally:
        cache.close()
    rows["worlds"].append(WorldRow.of(world))
    result.world_ids.append(world.world_id)
    result.keys.append(same)


def _drawn_world(source: CorpusSource, index: int, result: ShardResult, rows: _Rows) -> None:
    """World ``index`` of a procedural or mined source: its tasks drawn one by one, then kept."""
    try:
        synth, domain = _world_source(source, index)
    except Exception as exc:  # a database that cannot be mined: noted, the shard goes on
        result.notes.append(f"world {index}: {type(exc).__name__}: {exc}")
        return
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
    if drawn:
        world = drawn[0].world
        assert isinstance(world, WorldSpec)
        _keep(world, drawn, _content_key(source, index) or world.world_id, result, rows)


def requests_of(source: CorpusSource, index: int) -> list[ProposalRequest]:
    """What world index ``index`` of an experiment source asks its Synthesizer for: one request per level its tasks cycle through.

    Task ``j`` is at level ``levels[(index + j) % len(levels)]``, as for a
    procedural world; the request of a level asks for that many tasks, with
    the seed ``derive_seed(seed, "corpus", index, "level", level)`` and the
    domain ``domains[index % len(domains)]`` when the source names domains.
    """
    counts: dict[int, int] = {}
    for j in range(source.tasks_per_world):
        level = source.levels[(index + j) % len(source.levels)]
        counts[level] = counts.get(level, 0) + 1
    domains = [source.domains[index % len(source.domains)]] if source.domains else None
    return [
        ProposalRequest(
            n=n,
            seed=derive_seed(source.seed, "corpus", index, "level", level),
            level=level,
            domains=domains,
        )
        for level, n in counts.items()
    ]


def _failed_proposals(synth: Any) -> int | None:
    """Proposals whose calls failed in the Synthesizer's last request, when it keeps its attempts (the LLM Synthesizers do)."""
    drain = getattr(synth, "drain_attempts", None)
    if not callable(drain):
        return None
    attempts = drain()
    return len({a.get("proposal") for a in attempts if a.get("stage") == "call" and a.get("error")})


def _asked_at(task: TaskSpec, level: int | None) -> TaskSpec:
    """``task`` with the level it was asked at as its provenance's ``level`` when it measured none (its id stays)."""
    if level is None or task_level(task) is not None:
        return task
    return task.model_copy(update={"provenance": {**task.provenance, "level": level}})


def _proposed_worlds(
    source: CorpusSource,
    role: SynthesizerRole,
    indexes: range,
    result: ShardResult,
    rows: _Rows,
) -> None:
    """World indexes ``indexes`` of an experiment source: the Synthesizer's proposals, grouped by world, kept."""
    with environment(role.env):
        try:
            synth = REGISTRY.get(role.name).create(role.config)
        except Exception as exc:  # a Synthesizer that cannot be made here: every proposal failed
            result.failed += result.asked
            result.notes.append(
                redact(f"the synthesizer {role.name!r}: {type(exc).__name__}: {exc}")
            )
            return
        for index in indexes:
            drawn: list[TaskSpec] = []
            for request in requests_of(source, index):
                try:
                    tasks = list(synth.propose(request))[: request.n]
                except Exception as exc:  # a failed call is counted and noted, not a crash
                    failed = _failed_proposals(synth) or request.n
                    result.failed += failed
                    result.missed += request.n - failed
                    result.notes.append(redact(f"world {index}: {type(exc).__name__}: {exc}"))
                    continue
                failed = _failed_proposals(synth) or 0
                result.failed += failed
                result.missed += max(0, request.n - len(tasks) - failed)
                drawn += [_asked_at(task, request.level) for task in tasks]
            by_world: dict[str, list[TaskSpec]] = {}
            for task in drawn:
                by_world.setdefault(task.world_id, []).append(task)
            for tasks in by_world.values():
                world = tasks[0].world
                assert isinstance(world, WorldSpec)
                _keep(world, tasks, world.world_id, result, rows)


def build_shard(source: CorpusSource, shard: int, role: SynthesizerRole | None) -> ShardResult:
    """Shard ``shard``: its worlds, their tasks drawn, judged and deduplicated, as the three tables.

    Args:
        source: what the corpus is built from.
        shard: the shard's number.
        role: for an experiment source, the Synthesizer to build (here, with its variables
            set while the shard is built); else None.
    """
    started = time.perf_counter()
    rows: _Rows = {"worlds": [], "tasks": [], "verdicts": []}
    result = ShardResult(shard, {}, [])
    first = shard * source.shard_size
    indexes = range(first, min(first + source.shard_size, source.worlds))
    result.asked = len(indexes) * source.tasks_per_world
    if source.kind == "experiment":
        if role is None:
            raise CorpusError("an experiment source needs its SynthesizerRole to build a shard")
        _proposed_worlds(source, role, indexes, result, rows)
    else:
        for index in indexes:
            _drawn_world(source, index, result, rows)
    for name, kept in rows.items():
        result.tables[name] = GameLog.arrow(name, shard, [r.cells() for r in kept])
    result.seconds = time.perf_counter() - started
    return result


# ---- the driver ----------------------------------------------------------------------------


@dataclass
class BuildReport:
    """What a build did (this invocation and the corpus as a whole).

    ``failed``: proposals that ended on a failed call; ``failed_shards``: shards whose every
    proposal failed, not committed (the next build tries them again); ``last_failure``: why.
    """

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
    failed: int = 0
    failed_shards: list[int] = field(default_factory=list)
    last_failure: str = ""
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The report as the command prints it."""
        rate = self.accepted / self.seconds if self.seconds else 0.0
        lines = [
            f"{self.out}: {self.shards} shards; reused {self.reused} committed, built {self.built}",
            f"this build: {self.worlds} worlds, {self.tasks} tasks, {self.accepted} accepted "
            f"({rate:,.0f} accepted/s over {self.seconds:.1f} s); duplicates dropped: "
            f"{self.duplicates} task{'s' * (self.duplicates != 1)}, {self.duplicate_worlds} "
            f"world{'s' * (self.duplicate_worlds != 1)}; {self.missed} draws missed; "
            f"{self.failed} proposals failed",
        ]
        if self.failed_shards:
            shown = ", ".join(map(str, self.failed_shards[:10]))
            more = (
                f" and {len(self.failed_shards) - 10} more" if len(self.failed_shards) > 10 else ""
            )
            lines.append(
                f"not committed (every proposal failed): {len(self.failed_shards)} shards "
                f"({shown}{more}); the last failure: {self.last_failure}"
            )
        return [*lines, *(f"  note: {n}" for n in self.notes[:10])]


def _recorded(source: CorpusSource) -> dict[str, Any]:
    """The source as the manifest records it (no ``synthesizer`` key unless it has one: older manifests still match)."""
    return source.model_dump(mode="json", exclude_none=True)


def _manifest(source: CorpusSource) -> dict[str, Any]:
    try:
        version = metadata.version("coevo")
    except metadata.PackageNotFoundError:
        version = None
    return {
        "format": CORPUS_FORMAT,
        "coevo": version,
        "source": _recorded(source),
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
            try:
                data = run.read_json(_COMMITS, name)
                out[int(data["shard"])] = data
            except (OSError, ValueError, KeyError, TypeError) as exc:  # refused, or not a commit
                raise CorpusError(
                    f"{run.label(_COMMITS, name)} is not a shard's commit this coevo reads "
                    f"({type(exc).__name__}: {exc}); delete it to build that shard again"
                ) from exc
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


def _counts(result: ShardResult, dropped_worlds: int) -> dict[str, Any]:
    """What a shard's draws came to, as its commit (or its failure record) keeps them for ``coevo corpus report``."""
    return {
        "asked": result.asked,
        "proposed": result.proposed,
        "missed": result.missed,
        "failed": result.failed,
        "duplicates": result.duplicates,
        "duplicate_worlds": result.duplicate_worlds + dropped_worlds,
    }


def _commit(
    run: RunDir,
    result: ShardResult,
    tables: dict[str, pa.Table],
    keys: list[str],
    dropped_worlds: int,
) -> None:
    folder = f"shard={result.shard}"
    for name, table in tables.items():
        with run.open_output(name, folder, _HIDDEN) as out:  # through no link (local)
            pq.write_table(table, out)
    record = {
        "shard": result.shard,
        "rows": {name: table.num_rows for name, table in tables.items()},
        "worlds": [w for w in tables["worlds"].column("world_id").to_pylist()],
        "keys": keys,
        "seconds": round(result.seconds, 3),
        "counts": _counts(result, dropped_worlds),
        "notes": result.notes[:5],
    }
    run.write_bytes(
        json.dumps(record, sort_keys=True).encode(), _COMMITS, f"shard-{result.shard}.json"
    )
    run.delete(_FAILED, f"shard-{result.shard}.json")  # an earlier build's failure of it
    for name in tables:
        run.fs.move(run.path(name, folder, _HIDDEN), run.path(name, folder, _PART))


def _record_failure(run: RunDir, result: ShardResult) -> None:
    """A shard whose every proposal failed: not committed, its failure kept for ``coevo corpus report``."""
    record = {"shard": result.shard, "counts": _counts(result, 0), "notes": result.notes[:5]}
    run.write_bytes(
        json.dumps(record, sort_keys=True).encode(), _FAILED, f"shard-{result.shard}.json"
    )


def build_record(folder: str) -> dict[str, Any]:
    """What the builds of a corpus came to: their draws' counts over the committed shards, and the shards not committed because every proposal of theirs failed.

    Returns:
        ``{"asked", "proposed", "missed", "failed", "duplicates", "duplicate_worlds"}`` summed
        over the committed shards (0 for a count a corpus built before it was recorded lacks),
        ``notes`` (the first of them), and ``not_committed``: ``[{"shard", "failed", "why"}]``.
    """
    run = RunDir(folder)
    committed = _committed(run)
    totals = dict.fromkeys(_counts(ShardResult(0, {}, []), 0), 0)
    notes: list[str] = []
    for data in committed.values():
        for name, value in data.get("counts", {}).items():
            totals[name] = totals.get(name, 0) + int(value)
        notes += data.get("notes", [])
    failed = []
    for name in run.listdir(_FAILED):
        if name.startswith("shard-") and name.endswith(".json"):
            data = run.read_json(_FAILED, name)
            if int(data["shard"]) not in committed:
                why = data.get("notes") or ["no reason recorded"]
                failed.append(
                    {"shard": data["shard"], "failed": data["counts"]["failed"], "why": why[-1]}
                )
    failed.sort(key=lambda f: int(f["shard"]))
    return {**totals, "notes": notes[:10], "not_committed": failed}


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


def _differences(have: dict[str, Any], wanted: dict[str, Any]) -> str:
    """What differs between a corpus's recorded source and the one asked for: ``worlds: 60 there, 80 now``."""
    said = [
        f"{key}: {json.dumps(have.get(key), default=str)} there, "
        f"{json.dumps(wanted.get(key), default=str)} now"
        for key in sorted(set(have) | set(wanted))
        if have.get(key) != wanted.get(key)
    ]
    text = "; ".join(said) or "the manifest's format"
    return text if len(text) <= 600 else text[:600] + " …"


def build_corpus(
    out: str,
    source: CorpusSource,
    *,
    workers: int = 1,
    address: str | None = None,
    progress: Callable[[str], None] | None = None,
    stop_after: int | None = None,
    role: SynthesizerRole | None = None,
) -> BuildReport:
    """Build (or finish building) the corpus ``source`` describes in ``out`` (see the module docstring).

    Args:
        out: the corpus folder (any pyarrow filesystem URI).
        source: what to build.
        workers: shards built at once (Ray tasks of one CPU each; a local Ray gets this many CPUs);
            0: one after another in this process, without Ray (debugging, tests).
        address: a Ray cluster to join (else a local Ray).
        progress: called with a line as Ray starts and after each committed shard.
        stop_after: commit at most this many shards in this call (tests of resume).
        role: for an experiment source, the Synthesizer the workers build, with the variables
            it needs (:func:`experiment_synthesizer`); handed to each shard's Ray task as the
            arena hands a role's to its actors, never written.

    Returns:
        The report; its ``failed_shards`` were not committed because every proposal of theirs
        failed (the command exits non-zero; the next build tries them again).

    Raises:
        CorpusError: ``out`` is a file, holds a run, other files than a corpus's (a folder
            holding only a corpus's names is one cut short and is finished), or a corpus built
            from another source, or its commits do not read; or it cannot be written; or an
            experiment source comes without its ``role``.
        LogError: another builder holds ``out``.
    """
    named = source.synthesizer.name if source.synthesizer is not None else None
    if source.kind == "experiment" and (role is None or role.name != named):
        raise CorpusError(
            "an experiment source is built with its Synthesizer: pass the SynthesizerRole "
            "experiment_synthesizer() returned with it"
        )
    run = RunDir(out)
    if run.exists("experiment.json") or run.exists("log", "_manifests"):
        raise CorpusError(
            f"{run.uri} holds a run (its experiment.json and game log), not a corpus: a corpus "
            "is built in a folder of its own; choose another --out (a run draws on a corpus "
            "with [corpus] path = ...)"
        )
    if run.fs.get_file_info(run.root).type == pafs.FileType.File:
        raise CorpusError(
            f"{run.uri} is a file: a corpus is built in a folder; choose another --out"
        )
    # never among the user's files: a folder of only a corpus's names is one started, and finished
    own = (MANIFEST, LOCK_NAME, _COMMITS, _FAILED, *CORPUS_TABLES)
    others = [] if run.exists(MANIFEST) else run.others(own)
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise CorpusError(
            f"{run.uri} is not empty and holds no corpus ({shown}); a corpus is built in a new "
            "or empty folder, never among other files: choose another --out"
        )
    try:
        lock = claim(run, resume=False)
    except FileRefusedError:
        raise
    except OSError as exc:  # no permission, a file on the way
        why = str(exc).split(". Detail:")[0]  # pyarrow repeats the errno in a "Detail"
        raise CorpusError(
            f"cannot write the corpus folder {run.uri}: {why}; choose another --out"
        ) from exc
    say = progress or (lambda line: None)
    report = BuildReport(out=run.uri, shards=source.shards)
    try:
        wanted = _manifest(source)
        if run.exists(MANIFEST):
            have = run.read_json(MANIFEST)
            if have.get("format") != CORPUS_FORMAT or have.get("source") != wanted["source"]:
                raise CorpusError(
                    f"{run.uri} holds a corpus built from another source or other flags "
                    f"({_differences(have.get('source') or {}, wanted['source'])}); resume it "
                    "with the flags it was built with (its corpus.json lists them), or choose "
                    "another --out"
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
        if workers:  # Ray takes seconds to start: said, so the wait is not silence
            where = f"joining the Ray cluster at {address}" if address else "starting Ray"
            say(
                f"{where} for {len(todo)} shard{'s' * (len(todo) != 1)} "
                f"({report.reused} already committed), {workers} at once"
            )
        with ray_for(address, workers or None, in_process=workers == 0):
            _run_shards(
                run, lock, source, role, todo, workers, seen_worlds, report, say, stop_after
            )
        return report
    finally:
        lock.release()


def _run_shards(
    run: RunDir,
    lock: RunLock,
    source: CorpusSource,
    role: SynthesizerRole | None,
    todo: list[int],
    workers: int,
    seen_worlds: set[str],
    report: BuildReport,
    say: Callable[[str], None],
    stop_after: int | None,
) -> None:
    if workers == 0:  # in this process, one shard after another
        remote: Any = LocalTask(build_shard)
        source_ref: Any = LocalRef(source)
        window = 1
    else:
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
            # the role goes inline with each task (its variables as the arena hands an actor its own)
            pending[remote.remote(source_ref, shard, role)] = shard

    submit()
    while order:
        if stop_after is not None and report.built >= stop_after:
            for ref in pending:
                if not isinstance(ref, LocalRef):
                    ray.cancel(ref, force=True)
            return
        while order[0] not in done:
            ready, _ = wait(list(pending), num_returns=1, timeout=None)
            shard = pending.pop(ready[0])
            done[shard] = get(ready[0])
            submit()
        result = done.pop(order.pop(0))
        report.failed += result.failed
        report.missed += result.missed
        report.notes.extend(result.notes)
        report.seconds = time.perf_counter() - started
        if result.failed_entirely:
            lock.confirm()
            _record_failure(run, result)
            report.failed_shards.append(result.shard)
            report.last_failure = result.notes[-1] if result.notes else "no reason recorded"
            say(
                f"shard {result.shard + 1}/{source.shards}: every one of its {result.asked} "
                f"proposals failed, not committed ({report.last_failure})"
            )
            submit()
            continue
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
        _commit(run, result, tables, kept_keys, len(duplicate))
        seen_worlds.update(result.world_ids)
        seen_worlds.update(result.keys)
        accepted = sum(tables["verdicts"].column("accepted").to_pylist())
        report.built += 1
        report.worlds += tables["worlds"].num_rows
        report.tasks += tables["tasks"].num_rows
        report.accepted += accepted
        report.duplicates += result.duplicates
        report.duplicate_worlds += len(duplicate) + result.duplicate_worlds
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
