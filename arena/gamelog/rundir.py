"""Run directories: a local path or any pyarrow filesystem URI, read and written whole-file.

Every read is bounded (:mod:`coevo.arena.bounded`): a regular file only, no
link followed, its size checked before it is read (a Parquet file's, on disk,
by its footer, and as it is decoded). On a local disk no write goes through a
link inside the directory either: a file that is a link, or a folder on the
way that is a link out, is refused before anything is written (the directory
itself may be a link).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
from coevo.arena.bounded import (
    MAX_FILE_BYTES,
    MAX_JSON_BYTES,
    check_parquet_size,
    inside,
    links_under,
    loads_json,
    open_regular,
    open_to_write,
    read_parquet,
    read_regular,
    read_within,
    refuse_link_out,
    too_big,
)
from coevo.arena.errors import FileRefusedError

__all__ = ["RunDir"]


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

    @property
    def is_local(self) -> bool:
        """Whether the directory is on this machine's file system (not an object store)."""
        return "://" not in self.uri or self.uri.startswith("file://")

    def no_run(self, label: str | None = None) -> str:
        """Why this directory holds no run, for a message: it does not exist, or has no ``experiment.json``."""
        label = label or self.uri
        if not self.exists():
            return f"{label}: no such run directory (give the folder `coevo run` wrote, e.g. runs/quickstart)"
        return f"{label} holds no run (no experiment.json); start one with `coevo run`"

    def write_bytes(self, data: bytes, *parts: str) -> None:
        """Write a file whole: to a temporary name, then moved into place (atomic on local disks).

        Raises:
            FileRefusedError: (local) the temporary file is a link or not a regular file, or a
                folder on the way is a link out of the run directory; nothing was written.
            OSError: it cannot be written.
        """
        target = self.path(*parts)
        temporary = target + ".partial"
        with self.open_output(*parts[:-1], parts[-1] + ".partial") as out:
            out.write(data)
        self.fs.move(temporary, target)  # a rename: a link of that name is replaced, not followed

    @contextmanager
    def open_output(self, *parts: str) -> Iterator[Any]:
        """A file of the run directory opened to be written whole (its folders made), as a binary stream.

        On a local disk it is opened only once no link is on the way
        (:func:`~coevo.arena.bounded.open_to_write`): the file itself a link, or
        a folder on the way a link out of the run directory, is refused before
        any folder is made or byte written.

        Raises:
            FileRefusedError: (local) a link, not a regular file, or in a folder that links out.
            OSError: it cannot be written.
        """
        path = self.path(*parts)
        self.make_dirs(*parts[:-1])
        if not self.is_local:
            with self.fs.open_output_stream(path) as out:
                yield out
            return
        with os.fdopen(open_to_write(path, self.root, what=self.label(*parts)), "wb") as stream:
            yield stream

    def make_dirs(self, *parts: str) -> None:
        """Make a folder under the run directory, with those above it (the run directory itself with no ``parts``).

        Raises:
            FileRefusedError: (local) a folder on the way is a link out of the run directory.
            OSError: it cannot be made.
        """
        folder = self.path(*parts)
        if self.is_local and parts:
            refuse_link_out(self.path(*parts, "_"), self.root, what=self.label(*parts))
        self.fs.create_dir(folder, recursive=True)

    def links(self) -> list[str]:
        """The symbolic links inside the run directory, relative to it (none on an object store, which has no links)."""
        return links_under(self.root) if self.is_local else []

    def read_bytes(self, *parts: str, limit: int = MAX_FILE_BYTES) -> bytes:
        """Read a file whole: a regular file of at most ``limit`` bytes (checked before reading).

        Raises:
            FileRefusedError: a symbolic link, not a regular file, a folder leading out of the
                run directory, or bigger than ``limit`` (an ``OSError``; nothing was read).
            OSError: it cannot be read.
        """
        path, what = self.path(*parts), self.label(*parts)
        if self.is_local:
            self._check_inside(path, what)
            return read_regular(path, limit=limit, what=what)
        info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.File and info.size is not None and info.size > limit:
            raise FileRefusedError(too_big(what, info.size, limit))
        with self.fs.open_input_stream(path) as stream:
            data = read_within(stream, info.size, limit)
        if len(data) > limit:
            raise FileRefusedError(too_big(what, len(data), limit))
        return data

    def read_json(self, *parts: str, limit: int = MAX_JSON_BYTES) -> Any:
        """A JSON file parsed, read as :meth:`read_bytes` does (at most ``limit`` bytes).

        Raises:
            FileRefusedError: as :meth:`read_bytes`.
            ValueError: not JSON, not UTF-8, or nested too deep (naming the file).
            OSError: it cannot be read.
        """
        return loads_json(self.read_bytes(*parts, limit=limit), self.label(*parts))

    def parquet_footer(self, *parts: str, limit: int | None = None) -> Any:
        """A Parquet file's footer (``pyarrow.parquet.FileMetaData``), once checked; only the footer is read.

        The file must be a regular file of at most
        :data:`~coevo.arena.bounded.MAX_FILE_BYTES` that holds at most ``limit``
        bytes decompressed and decoded, by its footer
        (:func:`~coevo.arena.bounded.check_parquet_size`; default
        :data:`~coevo.arena.bounded.MAX_PARQUET_UNCOMPRESSED_BYTES`).

        Raises:
            FileRefusedError: a link, not a regular file, too big on disk, decompressed or decoded.
            OSError, pyarrow.ArrowException: it cannot be read, or is not Parquet.
        """
        with self._open_parquet(*parts) as (stream, what):
            return check_parquet_size(stream, what, limit=limit)

    def read_parquet(
        self, *parts: str, schema: pa.Schema | None = None, limit: int | None = None
    ) -> pa.Table:
        """A Parquet file read within its limits, by its footer and as it is decoded (:func:`~coevo.arena.bounded.read_parquet`).

        Args:
            parts: the file's path under the run directory.
            schema: read it as this schema, as a dataset of that schema reads a file: only
                these columns are decoded, each cast to its type, and one the file lacks is
                null (default: the file's own schema).
            limit: the most it may hold decompressed and decoded (default
                :data:`~coevo.arena.bounded.MAX_PARQUET_UNCOMPRESSED_BYTES`).

        Raises:
            FileRefusedError: a link, not a regular file, too big on disk, decompressed or decoded.
            OSError, pyarrow.ArrowException: it cannot be read, is not Parquet, or a column
                cannot be cast to ``schema``'s type.
        """
        with self._open_parquet(*parts) as (stream, what):
            columns = None if schema is None else schema.names
            table = read_parquet(stream, what, limit=limit, columns=columns)
        if schema is None:
            return table
        return pa.Table.from_arrays(
            [
                table.column(f.name).cast(f.type)
                if f.name in table.column_names
                else pa.nulls(table.num_rows, f.type)
                for f in schema
            ],
            schema=schema,
        )

    @contextmanager
    def _open_parquet(self, *parts: str) -> Iterator[tuple[Any, str]]:
        """A Parquet file opened to read (and how a message names it), once a regular file within MAX_FILE_BYTES."""
        path, what = self.path(*parts), self.label(*parts)
        if self.is_local:
            self._check_inside(path, what)
            with os.fdopen(open_regular(path, limit=MAX_FILE_BYTES, what=what), "rb") as stream:
                yield stream, what
            return
        info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.File and info.size is not None and info.size > MAX_FILE_BYTES:
            raise FileRefusedError(too_big(what, info.size, MAX_FILE_BYTES))
        with self.fs.open_input_file(path) as stream:
            yield stream, what

    def label(self, *parts: str) -> str:
        """How a message names a file of the run directory: its path (its URI on an object store)."""
        if not self.is_local:
            return "/".join([self.uri.rstrip("/"), *parts])
        return self.path(*parts)

    def _check_inside(self, path: str, what: str) -> None:
        """Refuse a file whose folder, links followed, is not inside the run directory."""
        if not inside(path, self.root):
            raise FileRefusedError(
                f"{what} is in a folder that is a link out of {self.root}; coevo follows no link "
                "out of a run directory: put the folder itself there"
            )

    def others(self, own: Collection[str]) -> list[str]:
        """What the directory holds besides coevo's ``own`` names, sorted; [] when it is missing, empty or a file.

        Besides each own name ``NAME``, ``NAME.partial`` (a write cut short)
        and ``NAME.`` followed by 32 hex digits (a lock taken when the process
        died: :class:`~coevo.arena.gamelog.lock.RunLock` writes its lock under
        such a name first) are coevo's too.
        """
        if self.fs.get_file_info(self.root).type != pafs.FileType.Directory:
            return []

        def owned(name: str) -> bool:
            stem, _, tail = name.rpartition(".")
            return name in own or (
                stem in own
                and (tail == "partial" or re.fullmatch("[0-9a-f]{32}", tail) is not None)
            )

        return [name for name in self.listdir() if not owned(name)]

    def listdir(self, *parts: str) -> list[str]:
        """Base names in a directory (empty when it does not exist)."""
        if not self.exists(*parts):
            return []
        infos = self.fs.get_file_info(pafs.FileSelector(self.path(*parts)))
        return sorted(info.base_name for info in infos)

    def sha256(self, *parts: str) -> tuple[int, str]:
        """A file's size and sha256 (hex), read in chunks (a regular file only, as :meth:`read_bytes`).

        Raises:
            OSError: the file cannot be read, or is refused (:class:`FileRefusedError`).
        """
        digest, size = hashlib.sha256(), 0
        path = self.path(*parts)
        if self.is_local:
            self._check_inside(path, self.label(*parts))
            stream: Any = os.fdopen(open_regular(path, limit=None, what=self.label(*parts)), "rb")
        else:
            stream = self.fs.open_input_stream(path)
        with stream:
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
        return size, digest.hexdigest()

    def sizes(self, paths: list[str]) -> dict[str, int | None]:
        """The sizes of files under the run directory, in one call (None: missing)."""
        infos = self.fs.get_file_info([self.path(p) for p in paths]) if paths else []
        return {
            p: None if info.type != pafs.FileType.File else info.size
            for p, info in zip(paths, infos, strict=True)
        }

    def delete(self, *parts: str) -> None:
        """Delete a file or a directory with everything in it (nothing when it does not exist).

        Raises:
            FileRefusedError: (local) a folder on the way is a link out of the run directory.
        """
        if self.is_local:
            refuse_link_out(self.path(*parts), self.root, what=self.label(*parts))
        info = self.fs.get_file_info(self.path(*parts))
        if info.type == pafs.FileType.Directory:
            self.fs.delete_dir(self.path(*parts))
        elif info.type != pafs.FileType.NotFound:
            self.fs.delete_file(self.path(*parts))

    def walk(self, *parts: str) -> list[str]:
        """Every file under a directory, relative to the run directory, sorted (empty when it does not exist)."""
        if not self.exists(*parts):
            return []
        selector = pafs.FileSelector(self.path(*parts), recursive=True)
        start = len(self.root) + 1
        return sorted(
            info.path[start:]
            for info in self.fs.get_file_info(selector)
            if info.type == pafs.FileType.File
        )
