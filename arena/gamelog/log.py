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

Tables: one typed row model each in :mod:`coevo.arena.gamelog.rows`, which
also generates their documentation (``docs/game-log.md``). Every table has a
``gen`` column, from its partition.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from coevo.arena.errors import LogError
from coevo.arena.gamelog.rows import SCHEMAS, GenerationRecord
from coevo.arena.gamelog.rundir import RunDir
from coevo.arena.spec import TaskSpec, WorldSpec

__all__ = ["READABLE_VERSIONS", "SCHEMA_VERSION", "GameLog"]

SCHEMA_VERSION: Final = 2
"""The version of the log's format this coevo writes (in every manifest).

1. the first format (checkpoints held pickles);
2. checkpoints hold role state as data (``coevo.state/1``), listed in the
   manifest's ``checkpoint_files``; the tables are unchanged.
"""

READABLE_VERSIONS: Final = (1, 2)
"""The versions whose tables this coevo reads (a column an older log lacks reads as null)."""


def _manifest_name(gen: int) -> str:
    return f"gen={gen:06d}.json"


def _check_files(manifest: Any, name: str, uri: str) -> None:
    """A manifest names files inside its run directory only (a relative path, no ``..``)."""
    if not isinstance(manifest, dict) or not all(
        isinstance(manifest.get(key, {}), dict) for key in ("parts", "checkpoint_files")
    ):
        raise LogError(f"manifest {name} of {uri} is damaged: it is not a manifest object")
    files = [*manifest.get("parts", {}).values(), *manifest.get("checkpoint_files", {}).values()]
    for path in files:
        if path is None:
            continue
        if not isinstance(path, str) or path.startswith("/") or ".." in path.split("/"):
            raise LogError(
                f"manifest {name} of {uri} names {path!r}, outside its run directory; "
                "the run directory has been tampered with"
            )


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
            ) from exc
        relative = f"log/{table}/gen={gen}/part-0.parquet"
        target = self.run.path(relative)
        self.run.fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        pq.write_table(data, target, filesystem=self.run.fs)
        return relative

    def write(self, record: GenerationRecord) -> dict[str, str]:
        """Write every table's part of ``record``'s generation; returns table → part path (for :meth:`commit`).

        Raises:
            LogError: a row that does not fit its table's columns.
        """
        return {
            name: self.write_part(name, record.gen, [row.cells() for row in rows])
            for name, rows in record.tables()
        }

    def commit(
        self, gen: int, parts: Mapping[str, str], rows: Mapping[str, int], extra: Mapping[str, Any]
    ) -> None:
        """Write generation ``gen``'s manifest (last: this commits the generation).

        Args:
            gen: the generation.
            parts: table → the part written for it (what :meth:`write` returned).
            rows: table → rows in that part.
            extra: more keys for the manifest (where the generation's checkpoint is).
        """
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
                raise LogError(f"manifest {name} of {self.run.uri} cannot be read: {exc}") from exc
            if manifest.get("schema_version") not in READABLE_VERSIONS:
                raise LogError(
                    f"{self.run.uri} was written with game-log schema "
                    f"{manifest.get('schema_version')}; this coevo reads schemas "
                    f"{', '.join(map(str, READABLE_VERSIONS))}: read it with the coevo that wrote it"
                )
            _check_files(manifest, name, self.run.uri)
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
