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

A manifest records every file it commits (``files``: path → size and
sha256) and the rows of each part (``rows``). Readers check each part's size
before reading it; ``coevo resume`` and ``coevo doctor`` also check row
counts and checksums (:meth:`GameLog.damage`). A damaged generation stops
them with a :class:`LogError` naming the generation and the file. Manifests
written before ``files`` existed read as before, checked for existence and
rows only.

Tables: one typed row model each in :mod:`coevo.arena.gamelog.rows`, which
also generates their documentation (``docs/game-log.md``). Every table has a
``gen`` column, from its partition.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq
from coevo.arena.codetask import CODETASK_FORMAT
from coevo.arena.codeworld import CODEWORLD_FORMAT
from coevo.arena.errors import LogError
from coevo.arena.gamelog.inbox import INBOX
from coevo.arena.gamelog.lock import LOCK_NAME, RunLock
from coevo.arena.gamelog.rows import SCHEMAS, GenerationRecord
from coevo.arena.gamelog.rundir import RunDir
from coevo.arena.spec import TaskSpec, WorldSpec

__all__ = [
    "PRUNED",
    "READABLE_VERSIONS",
    "SCHEMA_VERSION",
    "GameLog",
    "committed_files",
    "has_format",
]

SCHEMA_VERSION: Final = 6
"""The version of the log's format this coevo writes (in every manifest).

1. the first format (checkpoints held pickles);
2. checkpoints hold role state as data (``coevo.state/1``), listed in the
   manifest's ``checkpoint_files``; the tables are unchanged. Later schema-2
   manifests add ``files`` (each file's size and sha256), which a reader
   uses when it is there: older readers ignore it, so the version is unchanged;
3. ``evals`` has a ``suite`` column (null: the synthesized held-out suite; else an
   ``[[eval.suites]]`` suite's name). A reader of schema 2 would count every suite's
   episodes as the synthesized suite's, so it refuses a schema-3 log; schema-2 logs read
   with ``suite`` null;
4. ``generations`` has ``informative_groups``, ``informative_share``, ``extra_tasks`` and
   ``dynamic_sampling``. With dynamic sampling on, a generation's training batch holds its
   informative groups only, which a schema-3 reader would rebuild with every group
   (``coevo.run.handoff.batches.training_batch``), so it refuses a schema-4 log; older logs read
   with these null;
5. ``policies`` has ``trainer_metrics`` (what a trainer announced of its step). A reader of
   schema 4 would read it as absent and lose it; older logs read with it null;
6. ``usage`` has ``refused_logprobs`` (answers whose server log-probs were no numbers and
   were left out). Older logs read with it null.
"""

READABLE_VERSIONS: Final = (1, 2, 3, 4, 5, 6)
"""The versions whose tables this coevo reads (a column an older log lacks reads as null)."""


PRUNED: Final = "PRUNED"
"""The file left in a generation's checkpoint folder whose files were removed (``run.keep_checkpoints``):
its log is intact, and the run can no longer resume from that generation."""


def _manifest_name(gen: int) -> str:
    return f"gen={gen:06d}.json"


def _manifest_problem(manifest: Any, name: str, gen: int) -> str | None:
    """What is wrong with a parsed manifest (None: nothing); it names files inside its run directory only."""
    if not isinstance(manifest, dict) or not all(
        isinstance(manifest.get(key, {}), dict) for key in ("parts", "checkpoint_files")
    ):
        return f"its manifest {name} is not a manifest object"
    if manifest.get("gen") != gen:
        return f"its manifest {name} says it is generation {manifest.get('gen')!r}"
    files = [*manifest.get("parts", {}).values(), *manifest.get("checkpoint_files", {}).values()]
    for path in [*files, manifest.get("checkpoint")]:
        if path is None:
            continue
        if not isinstance(path, str) or path.startswith("/") or ".." in path.split("/"):
            return (
                f"its manifest {name} names {path!r}, outside its run directory "
                "(the run directory has been tampered with)"
            )
    recorded = manifest.get("files", {})
    if not isinstance(recorded, dict) or not all(
        isinstance(entry, dict)
        and isinstance(entry.get("size"), int)
        and isinstance(entry.get("sha256"), str)
        for entry in recorded.values()
    ):
        return f"its manifest {name} has `files` that are not sizes and sha256 digests"
    return None


def committed_files(manifest: Mapping[str, Any]) -> dict[str, str | None]:
    """Every file a manifest commits, relative to the run directory → its table (None: a checkpoint file)."""
    out: dict[str, str | None] = {path: table for table, path in manifest["parts"].items()}
    base = manifest.get("checkpoint")
    for name in manifest.get("checkpoint_files", {}).values():
        if base is not None and name is not None:
            out[f"{base}/{name}"] = None
    return out


def _size_problem(path: str, size: int | None, entry: Mapping[str, Any] | None) -> str | None:
    """What is wrong with a file's size (None: nothing; ``entry``: its record in the manifest, if any)."""
    if size is None:
        return f"{path} is missing"
    if entry is None or size == entry["size"]:
        return None
    if size < entry["size"]:
        return f"{path} is truncated ({size} of {entry['size']} bytes)"
    return f"{path} is damaged ({size} bytes, its manifest says {entry['size']})"


def _schema(table: str) -> pa.Schema:
    """A table's Arrow schema as read, with the ``gen`` column of its partition."""
    return SCHEMAS[table].append(pa.field("gen", pa.int32()))


def _damage_message(uri: str, gen: int, problem: str) -> str:
    back = f"generation {gen - 1}" if gen > 0 else "no generation"
    return (
        f"generation {gen} of {uri} is damaged: {problem}; `coevo doctor {uri}` lists the damage "
        f"and `coevo doctor {uri} --repair` truncates the run back to {back}"
    )


class GameLog:
    """Writes and reads the game log of one run directory.

    Args:
        run: the run directory (a :class:`RunDir`, a path or a URI).
    """

    def __init__(self, run: RunDir | str):
        self.run = run if isinstance(run, RunDir) else RunDir(str(run))

    # ---- writing ------------------------------------------------------------------------

    def write_part(self, table: str, gen: int, rows: Sequence[Mapping[str, Any]] | pa.Table) -> str:
        """Write one table's rows of generation ``gen``; returns the file's path relative to the run.

        Args:
            table: the table.
            gen: the generation.
            rows: its rows, or the Arrow table :meth:`arrow` made of them.

        Raises:
            LogError: an unknown table, or a row that does not fit the table's columns.
        """
        data = rows if isinstance(rows, pa.Table) else self.arrow(table, gen, rows)
        relative = f"log/{table}/gen={gen}/part-0.parquet"
        with self.run.open_output(*relative.split("/")) as out:  # through no link (local)
            pq.write_table(data, out)
        return relative

    @staticmethod
    def arrow(table: str, gen: int, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
        """One table's rows as the Arrow table a part holds.

        Raises:
            LogError: an unknown table, or a row that does not fit the table's columns.
        """
        if table not in SCHEMAS:
            raise LogError(f"unknown game-log table {table!r}; tables: {', '.join(SCHEMAS)}")
        try:
            return pa.Table.from_pylist([dict(r) for r in rows], schema=SCHEMAS[table])
        except (pa.ArrowInvalid, pa.ArrowTypeError, KeyError) as exc:
            raise LogError(
                f"a row of {table!r} (generation {gen}) does not fit its columns: {exc}"
            ) from exc

    def write(
        self, record: GenerationRecord, tables: dict[str, pa.Table] | None = None
    ) -> dict[str, str]:
        """Write every table's part of ``record``'s generation; returns table → part path (for :meth:`commit`).

        Args:
            record: the generation's rows.
            tables: filled with each table's Arrow table as written, when given (the
                trainer hand-off builds its batch from them, without reading the part back).

        Raises:
            LogError: a row that does not fit its table's columns.
        """
        parts = {}
        for name, rows in record.tables():
            data = self.arrow(name, record.gen, [row.cells() for row in rows])
            parts[name] = self.write_part(name, record.gen, data)
            if tables is not None:
                tables[name] = data
        return parts

    @staticmethod
    def as_read(gen: int, tables: Mapping[str, pa.Table]) -> dict[str, pa.Table]:
        """The tables :meth:`write` gave for generation ``gen``, each with the ``gen`` column :meth:`read` adds."""
        column = pa.field("gen", pa.int32())
        return {
            name: table.append_column(column, pa.array([gen] * table.num_rows, pa.int32()))
            for name, table in tables.items()
        }

    def commit(
        self,
        gen: int,
        parts: Mapping[str, str],
        rows: Mapping[str, int],
        extra: Mapping[str, Any],
        *,
        owner: RunLock | None = None,
    ) -> None:
        """Write generation ``gen``'s manifest (last: this commits the generation).

        Args:
            gen: the generation.
            parts: table → the part written for it (what :meth:`write` returned).
            rows: table → rows in that part.
            extra: more keys for the manifest (where the generation's checkpoint is:
                ``checkpoint``, the folder, and ``checkpoint_files``, the files in it).
            owner: the run directory's lock; checked just before the manifest is written.

        Raises:
            LogError: a file to commit cannot be read back, or ``owner`` no longer holds the lock.
        """
        manifest: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "gen": gen,
            "parts": dict(parts),
            "rows": dict(rows),
            **extra,
        }
        # what landed in the run directory, read back: a write that went wrong shows now
        manifest["files"] = {}
        for path in committed_files(manifest):
            try:
                size, digest = self.run.sha256(path)
            except OSError as exc:
                raise LogError(
                    f"generation {gen} of {self.run.uri} is not committed: {path} cannot be "
                    f"read back ({exc}); check the disk or the store and run again"
                ) from exc
            manifest["files"][path] = {"size": size, "sha256": digest}
        if owner is not None:
            owner.confirm()  # last, just before the commit: another writer's generation is never overwritten
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
        return [self.manifest(gen) for gen in range(self._committed_count())]

    def _committed_count(self) -> int:
        """How many manifests there are, contiguous from 0 (from their names alone)."""
        count = 0
        for expected, name in enumerate(self.manifest_names()):
            if name != _manifest_name(expected):
                break
            count = expected + 1
        return count

    def manifest_names(self) -> list[str]:
        """The names of the manifest files there are, committed or not (after a gap), sorted."""
        return [n for n in self.run.listdir("log", "_manifests") if n.endswith(".json")]

    def manifest(self, gen: int) -> dict[str, Any]:
        """Generation ``gen``'s manifest, checked.

        Raises:
            LogError: it cannot be read, is of another schema version, or names a file outside the run.
        """
        manifest, problem = self.read_manifest(gen)
        if problem is not None:
            raise LogError(_damage_message(self.run.uri, gen, problem))
        return manifest

    def read_manifest(self, gen: int) -> tuple[dict[str, Any], str | None]:
        """Generation ``gen``'s manifest, and what is wrong with it (None: nothing; then it is usable).

        Raises:
            LogError: it is of a schema version this coevo does not read.
        """
        name = _manifest_name(gen)
        try:
            manifest = self.run.read_json("log", "_manifests", name)
        except (OSError, ValueError) as exc:
            return {}, f"its manifest {name} cannot be read ({type(exc).__name__}: {exc})"
        if isinstance(manifest, dict) and manifest.get("schema_version") not in READABLE_VERSIONS:
            raise LogError(
                f"{self.run.uri} was written with game-log schema "
                f"{manifest.get('schema_version')}; this coevo reads schemas "
                f"{', '.join(map(str, READABLE_VERSIONS))}: read it with the coevo that wrote it"
            )
        return manifest, _manifest_problem(manifest, name, gen)

    def damage(
        self, manifest: Mapping[str, Any], *, checksum: bool, checkpoint: bool = True
    ) -> list[str]:
        """What is wrong with the files of one committed generation (empty: nothing).

        Every file is checked for its size (against ``files``, or only that it
        exists for older manifests); with ``checksum``, every part's row count
        (from its Parquet footer) and sha256 too, and the checkpoint files'
        sha256 unless ``checkpoint`` is False.
        """
        recorded = manifest.get("files", {})
        listed = committed_files(manifest)
        if self.pruned(manifest):  # its checkpoint was removed on purpose: the parts still count
            listed = {path: table for path, table in listed.items() if table is not None}
        sizes = self.run.sizes(list(listed))
        problems = []
        for path, table in listed.items():
            entry = recorded.get(path)
            problem = _size_problem(path, sizes[path], entry)
            if problem:
                problems.append(problem)
                continue
            if not checksum or (table is None and not checkpoint):
                continue
            if entry is not None and self.run.sha256(path)[1] != entry["sha256"]:
                problems.append(f"{path} fails its checksum (sha256)")
                continue
            if table is not None and (expected := manifest.get("rows", {}).get(table)) is not None:
                try:
                    found = self.run.parquet_footer(path).num_rows
                except (OSError, pa.ArrowException) as exc:
                    problems.append(f"{path} is not a readable Parquet file ({exc})")
                    continue
                if found != expected:
                    problems.append(f"{path} holds {found} rows, its manifest says {expected}")
        return problems

    def pruned(self, manifest: Mapping[str, Any]) -> bool:
        """Whether the checkpoint of the generation ``manifest`` commits was pruned (:meth:`prune_checkpoint`)."""
        base = manifest.get("checkpoint")
        return isinstance(base, str) and self.run.exists(*base.split("/"), PRUNED)

    def prune_checkpoint(self, gen: int) -> bool:
        """Remove committed generation ``gen``'s checkpoint files, leaving :data:`PRUNED` in their folder; False if there was none.

        The marker is written first, so a prune cut short leaves a generation
        that reads as pruned (the next prune finishes it); the log's parts are
        never touched.
        """
        base = ("checkpoints", f"gen={gen}")
        if not self.run.exists(*base):
            return False
        if not self.run.exists(*base, PRUNED):
            self.run.write_bytes(
                b"this generation's checkpoint was removed (run.keep_checkpoints); its log is intact\n",
                *base,
                PRUNED,
            )
        marker = "/".join([*base, PRUNED])
        for path in self.run.walk(*base):
            if path != marker:
                self.run.delete(*path.split("/"))
        return True

    def verify(self, *, checksum: bool = True, last_checkpoint_only: bool = False) -> None:
        """Check every committed generation's files (see :meth:`damage`); ``checksum``: also their sha256.

        Args:
            checksum: also check row counts and checksums (else sizes only).
            last_checkpoint_only: checksum only the last generation's checkpoint
                (the one resume loads); every part is still checked.

        Raises:
            LogError: the first damaged generation, naming it and the file, and how to repair it.
        """
        manifests = self.manifests()
        for manifest in manifests:
            checkpoint = not last_checkpoint_only or manifest is manifests[-1]
            problems = self.damage(manifest, checksum=checksum, checkpoint=checkpoint)
            if problems:
                raise LogError(_damage_message(self.run.uri, manifest["gen"], problems[0]))

    def claim(self, *, resume: bool) -> RunLock:
        """Take the run directory's lock (held: release it, or use it as a context manager).

        Taken before Ray starts. To ``resume``, the committed generations are
        then checked: every part's size, rows and checksum, and the checksums
        of the checkpoint that resume loads (the others' sizes).

        Raises:
            LogError: the directory holds a symbolic link (nothing is written through one, and
                none is written), another run holds the lock (naming its host and pid), or a
                generation is damaged.
        """
        # left out: a lock that is a link is no lock coevo wrote (moved aside, never followed),
        # and an inbox part that is one is refused when read, as the run goes on
        links = [
            link
            for link in self.run.links()
            if link != LOCK_NAME and not link.startswith(f"{INBOX}/")
        ]
        if links:
            shown = ", ".join(links[:3]) + (f" and {len(links) - 3} more" if len(links) > 3 else "")
            raise LogError(
                f"{self.run.uri} holds a symbolic link ({shown}); coevo writes through no link "
                "inside a folder it writes, and nothing was written: remove it (put the file or "
                "folder itself there), or choose another folder"
            )
        lock = RunLock(self.run)
        lock.acquire()
        try:
            if resume:
                self.verify(checksum=True, last_checkpoint_only=True)
        except BaseException:
            lock.release()
            raise
        return lock

    def last_generation(self) -> int:
        """The last committed generation (-1: none)."""
        return len(self.manifests()) - 1

    def read(
        self,
        table: str,
        *,
        gens: Iterable[int] | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """One table over the committed generations (or only ``gens``), with its ``gen`` column.

        Args:
            table: the table.
            gens: only these generations (those not committed are left out); only their
                manifests are read, so reading one generation costs the same late in a run.
            columns: only these columns (default: all, and ``gen``); only they are decoded.

        Raises:
            LogError: an unknown table or column, or a damaged generation: a part missing,
                of another size than its manifest records, or that cannot be read or is
                refused (a link, too big on disk, decompressed or decoded: "Size limits" in
                docs/security.md), naming the generation and the file.
        """
        if table not in SCHEMAS:
            raise LogError(f"unknown game-log table {table!r}; tables: {', '.join(SCHEMAS)}")
        schema = _schema(table)
        wanted = schema.names if columns is None else list(columns)
        if unknown := [c for c in wanted if c not in schema.names]:
            raise LogError(
                f"the game-log table {table!r} has no column {', '.join(map(repr, unknown))}; "
                f"its columns: {', '.join(schema.names)}"
            )
        stored = pa.schema([schema.field(c) for c in wanted if c != "gen"])
        if gens is None:
            manifests = self.manifests()
        else:
            committed = self._committed_count()
            manifests = [self.manifest(g) for g in sorted(set(gens)) if 0 <= g < committed]
        chosen = [m for m in manifests if table in m["parts"]]
        # sizes only, in one call: a truncated part is named here, not by Arrow
        sizes = self.run.sizes([m["parts"][table] for m in chosen])
        for manifest in chosen:
            path = manifest["parts"][table]
            problem = _size_problem(path, sizes[path], manifest.get("files", {}).get(path))
            if problem:
                raise LogError(_damage_message(self.run.uri, manifest["gen"], problem))
        if not chosen:
            return schema.empty_table().select(wanted)
        # each part a regular file within its limits, by its footer and as it is decoded
        parts = []
        for manifest in chosen:
            path = manifest["parts"][table]
            try:
                part = self.run.read_parquet(path, schema=stored)
                # only `gen` wanted: no column decoded, the rows counted by the footer
                rows = part.num_rows if stored.names else self.run.parquet_footer(path).num_rows
            except (OSError, pa.ArrowException) as exc:
                problem = f"{path} cannot be read ({type(exc).__name__}: {exc})"
                raise LogError(_damage_message(self.run.uri, manifest["gen"], problem)) from exc
            gen = pa.repeat(pa.scalar(manifest["gen"], pa.int32()), rows)
            with_gen = pa.Table.from_arrays(
                [*part.columns, gen], schema=stored.append(schema.field("gen"))
            )
            parts.append(with_gen.select(wanted))
        return pa.concat_tables(parts)

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
            if not has_format(spec, CODEWORLD_FORMAT)
        }
        tasks_table = self.read("tasks")
        tasks: dict[str, Any] = {}
        for task_id, spec in zip(
            tasks_table.column("task_id").to_pylist(),
            tasks_table.column("spec").to_pylist(),
            strict=True,
        ):
            if task_id in tasks or has_format(spec, CODETASK_FORMAT):
                continue
            task = TaskSpec.model_validate_json(spec)
            world = worlds.get(str(task.world))
            if world is None:
                raise LogError(f"task {task_id} refers to world {task.world}, not in the log")
            tasks[task_id] = task.model_copy(update={"world": world})
        return tasks, worlds


def accepted_ids(verdicts: pa.Table) -> set[str]:
    """The task ids a ``verdicts`` table (of a run or a corpus) accepted."""
    return set(verdicts.filter(verdicts.column("accepted")).column("task_id").to_pylist())


def has_format(spec: str, fmt: str) -> bool:
    """Whether a logged record's JSON text is of the format ``fmt`` (every record's first key is its format)."""
    return spec.startswith((f'{{"format":"{fmt}"', f'{{"format": "{fmt}"'))
