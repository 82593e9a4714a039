"""The game log: Parquet tables per generation, committed by a manifest written last.

Layout under a run directory (a local path or any pyarrow filesystem URI,
e.g. ``s3://bucket/runs/a``)::

    log/<table>/gen=<n>/part-0.parquet     one file per table and generation (hive partitioning)
    log/_manifests/gen=<n:06d>.json        written last: the generation is committed
    checkpoints/gen=<n>/...                written before the manifest

A generation's parts are written first, then its checkpoint, then its
manifest; readers and ``coevo resume`` only see generations whose manifest
exists, contiguous from 0, and read only the files a manifest lists. A
generation that was being written when the driver died leaves parts without
a manifest: they are invisible, and the rerun overwrites them (file names are
deterministic). Nothing in the tables depends on timing (no wall-clock
columns), so the same seed gives the same log.

Tables (every one also has ``gen``, from the partition):

=============== ============================================================
``worlds``      world_id, domain, spec (the world record as JSON), once per world
``tasks``       every proposed task: task_id, world_id, source (fresh, mutation,
                eval), level, family, domain, parent, operator, spec (JSON, world by id)
``verdicts``    task_id, accepted, failed (check names), checks (JSON), solve_calls, error
``episodes``    episode_id (unique, deterministic), task_id, purpose (train, eval),
                solver (version), seed, reward, steps, truncated, calls (JSON), reason, failure
``predictions`` task_id, version, p: the World model's P(success) before any rollout
``updates``     version, episodes, loss, success, entropy, skipped: one row per learner step
``generations`` one row per generation: counts, success on train and eval, frontier,
                accepted level, calibration, top rejection reasons
``evals``       task_id, episode_id, level, domain, reward, success
``usage``       role, task_id, calls and tokens (input, output, cache write, cache read)
                and dollars: what API-backed roles spent this generation, per task
=============== ============================================================
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from coevo.arena.errors import LogError
from coevo.arena.spec import TaskSpec, WorldSpec

__all__ = [
    "SCHEMAS",
    "SCHEMA_VERSION",
    "GameLog",
    "LogError",
    "RunDir",
]

SCHEMA_VERSION: Final = 1

_S, _I, _F, _B = pa.string(), pa.int64(), pa.float64(), pa.bool_()

SCHEMAS: Final[dict[str, pa.Schema]] = {
    "worlds": pa.schema([("world_id", _S), ("domain", _S), ("spec", _S)]),
    "tasks": pa.schema(
        [
            ("task_id", _S),
            ("world_id", _S),
            ("source", _S),
            ("level", _I),
            ("family", _S),
            ("domain", _S),
            ("parent", _S),
            ("operator", _S),
            ("spec", _S),
        ]
    ),
    "verdicts": pa.schema(
        [
            ("task_id", _S),
            ("accepted", _B),
            ("failed", pa.list_(_S)),
            ("checks", _S),
            ("solve_calls", _I),
            ("error", _S),
        ]
    ),
    "episodes": pa.schema(
        [
            ("episode_id", _S),
            ("task_id", _S),
            ("purpose", _S),
            ("solver", _S),
            ("seed", _I),
            ("reward", _I),
            ("steps", _I),
            ("truncated", _B),
            ("calls", _S),
            ("reason", _S),
            ("failure", _S),
        ]
    ),
    "predictions": pa.schema([("task_id", _S), ("version", _S), ("p", _F)]),
    "updates": pa.schema(
        [
            ("version", _S),
            ("episodes", _I),
            ("loss", _F),
            ("success", _F),
            ("entropy", _F),
            ("skipped", _I),
        ]
    ),
    "generations": pa.schema(
        [
            ("proposed", _I),
            ("accepted", _I),
            ("rejected", _I),
            ("mutations", _I),
            ("trained_tasks", _I),
            ("train_episodes", _I),
            ("train_success", _F),
            ("eval_success", _F),
            ("frontier", _F),
            ("accepted_level", _F),
            ("trained_level", _F),
            ("brier", _F),
            ("version", _S),
            ("rejections", _S),
            ("failures", _I),
        ]
    ),
    "usage": pa.schema(
        [
            ("role", _S),
            ("task_id", _S),
            ("calls", _I),
            ("input_tokens", _I),
            ("output_tokens", _I),
            ("cache_write_tokens", _I),
            ("cache_read_tokens", _I),
            ("dollars", _F),
        ]
    ),
    "evals": pa.schema(
        [
            ("task_id", _S),
            ("episode_id", _S),
            ("level", _I),
            ("domain", _S),
            ("reward", _I),
            ("success", _B),
        ]
    ),
}
"""The columns of every table (``gen`` comes from the partition)."""


@dataclass(frozen=True)
class RunDir:
    """A run directory on a pyarrow filesystem.

    Args:
        uri: a local path or a filesystem URI (``file://``, ``s3://``, ``gs://``, ...).
    """

    uri: str

    @property
    def fs(self) -> pafs.FileSystem:
        """The filesystem."""
        return self._resolved[0]

    @property
    def root(self) -> str:
        """The run directory's path on :attr:`fs`."""
        return self._resolved[1]

    @cached_property
    def _resolved(self) -> tuple[pafs.FileSystem, str]:
        # resolved once per RunDir: a filesystem object keeps its connection (and a mock:// one, its files)
        if "://" in self.uri:
            fs, path = pafs.FileSystem.from_uri(self.uri)
            return fs, path.rstrip("/")
        return pafs.LocalFileSystem(), str(Path(self.uri).resolve())

    def path(self, *parts: str) -> str:
        """A path under the run directory."""
        return "/".join([self.root, *parts])

    def exists(self, *parts: str) -> bool:
        """Whether the file or directory exists."""
        return self.fs.get_file_info(self.path(*parts)).type != pafs.FileType.NotFound

    def write_bytes(self, data: bytes, *parts: str) -> None:
        """Write a file whole: to a temporary name, then moved into place (atomic on local disks)."""
        target = self.path(*parts)
        self.fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        temporary = target + ".partial"
        with self.fs.open_output_stream(temporary) as out:
            out.write(data)
        self.fs.move(temporary, target)

    def read_bytes(self, *parts: str) -> bytes:
        """Read a file whole."""
        with self.fs.open_input_stream(self.path(*parts)) as stream:
            return bytes(stream.read())

    def listdir(self, *parts: str) -> list[str]:
        """Base names in a directory (empty when it does not exist)."""
        if not self.exists(*parts):
            return []
        infos = self.fs.get_file_info(pafs.FileSelector(self.path(*parts)))
        return sorted(info.base_name for info in infos)


def _manifest_name(gen: int) -> str:
    return f"gen={gen:06d}.json"


class GameLog:
    """Writes and reads the game log of one run directory.

    Args:
        run: the run directory (a :class:`RunDir`, a path or a URI).
    """

    def __init__(self, run: RunDir | str):
        self.run = run if isinstance(run, RunDir) else RunDir(str(run))

    # ---- writing ------------------------------------------------------------------------

    def write_part(self, table: str, gen: int, rows: Sequence[Mapping[str, Any]]) -> str:
        """Write one table's rows of generation ``gen``; returns the file's path relative to the run.

        Raises:
            LogError: an unknown table, or a row that does not fit the table's columns.
        """
        if table not in SCHEMAS:
            raise LogError(f"unknown game-log table {table!r}; tables: {', '.join(SCHEMAS)}")
        schema = SCHEMAS[table]
        try:
            data = pa.Table.from_pylist([dict(r) for r in rows], schema=schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, KeyError) as exc:
            raise LogError(
                f"a row of {table!r} (generation {gen}) does not fit its columns: {exc}"
            ) from None
        relative = f"log/{table}/gen={gen}/part-0.parquet"
        target = self.run.path(relative)
        self.run.fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        pq.write_table(data, target, filesystem=self.run.fs)
        return relative

    def commit(
        self, gen: int, parts: Mapping[str, str], rows: Mapping[str, int], extra: Mapping[str, Any]
    ) -> None:
        """Write generation ``gen``'s manifest (last: this commits the generation)."""
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "gen": gen,
            "parts": dict(parts),
            "rows": dict(rows),
            **extra,
        }
        data = json.dumps(manifest, sort_keys=True, indent=1).encode()
        self.run.write_bytes(data, "log", "_manifests", _manifest_name(gen))

    # ---- reading ------------------------------------------------------------------------

    def manifests(self) -> list[dict[str, Any]]:
        """The manifests of the committed generations, contiguous from 0.

        A gap (generation n missing while n+1 exists) ends the list: what
        follows cannot be trusted to be whole.

        Raises:
            LogError: a manifest of another schema version, or unreadable.
        """
        out: list[dict[str, Any]] = []
        names = [n for n in self.run.listdir("log", "_manifests") if n.endswith(".json")]
        for expected, name in enumerate(names):
            if name != _manifest_name(expected):
                break
            try:
                manifest = json.loads(self.run.read_bytes("log", "_manifests", name))
            except (OSError, ValueError) as exc:
                raise LogError(f"manifest {name} of {self.run.uri} cannot be read: {exc}") from None
            if manifest.get("schema_version") != SCHEMA_VERSION:
                raise LogError(
                    f"{self.run.uri} was written with game-log schema "
                    f"{manifest.get('schema_version')}, this coevo reads {SCHEMA_VERSION}"
                )
            out.append(manifest)
        return out

    def last_generation(self) -> int:
        """The last committed generation (-1: none)."""
        return len(self.manifests()) - 1

    def read(self, table: str, *, gens: Iterable[int] | None = None) -> pa.Table:
        """One table over the committed generations (or only ``gens``), with its ``gen`` column.

        Raises:
            LogError: an unknown table.
        """
        if table not in SCHEMAS:
            raise LogError(f"unknown game-log table {table!r}; tables: {', '.join(SCHEMAS)}")
        wanted = set(gens) if gens is not None else None
        files = [
            self.run.path(m["parts"][table])
            for m in self.manifests()
            if table in m["parts"] and (wanted is None or m["gen"] in wanted)
        ]
        schema = SCHEMAS[table].append(pa.field("gen", pa.int32()))
        if not files:
            return schema.empty_table()
        dataset = ds.dataset(
            files,
            schema=schema,
            filesystem=self.run.fs,
            format="parquet",
            partitioning=ds.partitioning(pa.schema([("gen", pa.int32())]), flavor="hive"),
            partition_base_dir=self.run.path("log", table),
        )
        return dataset.to_table()

    def task_specs(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Every logged task record with its world inline, by id, and the world records by id.

        Each world record is parsed once and shared by its tasks.
        """
        worlds_table = self.read("worlds")
        worlds = {
            world_id: WorldSpec.model_validate_json(spec)
            for world_id, spec in zip(
                worlds_table.column("world_id").to_pylist(),
                worlds_table.column("spec").to_pylist(),
                strict=True,
            )
        }
        tasks_table = self.read("tasks")
        tasks: dict[str, Any] = {}
        for task_id, spec in zip(
            tasks_table.column("task_id").to_pylist(),
            tasks_table.column("spec").to_pylist(),
            strict=True,
        ):
            if task_id in tasks:
                continue
            task = TaskSpec.model_validate_json(spec)
            world = worlds.get(str(task.world))
            if world is None:
                raise LogError(f"task {task_id} refers to world {task.world}, not in the log")
            tasks[task_id] = task.model_copy(update={"world": world})
        return tasks, worlds
