"""One writer per run directory: a lock file on local disks, a lease on object stores.

``coevo run`` and ``coevo resume`` take the run directory's lock before Ray
starts and hold it until they end (cleanly, on an error or on Ctrl-C). The
lock is the file ``RUN/run.lock``, a JSON object::

    {"host": ..., "pid": ..., "started": <unix time>, "heartbeat": <unix time>, "token": <uuid>}

* On a local disk it is created exclusively (written under a name of its
  own, then hard-linked into place, which fails when the lock exists, as
  ``O_CREAT | O_EXCL`` does): of two runs started together, exactly one
  creates it; the other stops at once, naming the holder's host and pid.
* A thread of the holder rewrites ``heartbeat`` every :data:`HEARTBEAT_SECONDS`.
  A lock is *stale* when its holder is dead (same host, its pid is not
  running) or silent (heartbeat older than :data:`STALE_SECONDS`: another
  host, or a holder suspended or wedged); a new run takes a stale lock over,
  and nothing else.
* Before each manifest is written (the commit of a generation) the holder
  re-reads the lock and stops if the token is not its own any more: a
  writer that was taken over never commits over its successor.
* On an object store (a URI with ``://`` other than a local ``file://``)
  pyarrow has no exclusive create, so the lock is a *lease*: written, read
  back and checked by token before every commit, like the local lock, but two
  runs started within the same instant can both believe they hold it. That
  check is best effort; use one writer per run directory by design there.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Final

import pyarrow.fs as pafs
from coevo.arena.bounded import MAX_JSON_BYTES, read_regular
from coevo.arena.errors import LogError
from coevo.arena.gamelog.rundir import RunDir

__all__ = ["HEARTBEAT_SECONDS", "LOCK_NAME", "STALE_SECONDS", "LockInfo", "RunLock", "read_lock"]

LOCK_NAME: Final = "run.lock"
"""The lock's file name, in the run directory."""

HEARTBEAT_SECONDS: Final = 10.0
"""How often the holder rewrites its heartbeat."""

STALE_SECONDS: Final = 60.0
"""A heartbeat older than this marks a silent holder, whose lock may be taken over."""


@dataclass(frozen=True)
class LockInfo:
    """What a lock file says about its holder."""

    host: str
    pid: int
    started: float
    heartbeat: float
    token: str

    @classmethod
    def parse(cls, data: bytes) -> LockInfo | None:
        """The lock in ``data`` (None: not a lock this coevo wrote, or half-written)."""
        try:
            raw: Any = json.loads(data)
            return cls(
                str(raw["host"]),
                int(raw["pid"]),
                float(raw["started"]),
                float(raw["heartbeat"]),
                str(raw["token"]),
            )
        except (ValueError, TypeError, KeyError):
            return None

    def dump(self) -> bytes:
        """The lock file's bytes."""
        return json.dumps(self.__dict__, sort_keys=True).encode()

    def stale_because(self, now: float | None = None) -> str | None:
        """Why this lock may be taken over (None: its holder may still be running)."""
        now = time.time() if now is None else now
        if self.host == socket.gethostname() and not _alive(self.pid):
            return f"its holder (pid {self.pid} on {self.host}) is no longer running"
        silent = now - self.heartbeat
        if silent > STALE_SECONDS:
            return (
                f"its holder (pid {self.pid} on {self.host}) has been silent for {silent:.0f} s "
                f"(stale after {STALE_SECONDS:.0f} s)"
            )
        return None

    def describe(self) -> str:
        """The holder, for a message."""
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        return f"pid {self.pid} on host {self.host} (started {started})"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def _local(run: RunDir) -> bool:
    return isinstance(run.fs, pafs.LocalFileSystem)


def read_lock(run: RunDir, name: str = LOCK_NAME) -> LockInfo | None:
    """The lock of ``run`` as it is now (None: unlocked).

    A lock file that cannot be parsed reads as a lock from an unknown holder,
    started and last heard of at the epoch: stale.
    """
    try:
        data = run.read_bytes(name, limit=MAX_JSON_BYTES)
    except OSError:  # FileRefusedError too: a link, a FIFO, a device read as no lock of coevo's
        return None
    return LockInfo.parse(data) or LockInfo("?", -1, 0.0, 0.0, "")


class RunLock:
    """The lock of one run directory, held by this process (a context manager).

    Args:
        run: the run directory.
        heartbeat: seconds between heartbeats (:data:`HEARTBEAT_SECONDS`).
        name: the lock file's name in the folder (``coevo train`` locks its trainer
            folder with ``lora/train.lock``).
        holder: what messages call the one who holds it.

    Raises:
        LogError: (on entering) another run holds the lock; the message names its host and pid.
    """

    def __init__(
        self,
        run: RunDir,
        *,
        heartbeat: float = HEARTBEAT_SECONDS,
        name: str = LOCK_NAME,
        holder: str = "run",
    ):
        self.run = run
        self.every = heartbeat
        self.name = name
        self.holder = holder
        self.info = LockInfo(
            socket.gethostname(), os.getpid(), time.time(), time.time(), uuid.uuid4().hex
        )
        self.taken_over: str | None = None  # why the previous holder's lock was stale
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- taking and giving back ---------------------------------------------------------

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lock (taking a stale one over), or raise naming its holder; starts the heartbeat."""
        self.run.fs.create_dir(self.run.root, recursive=True)
        if not self._create():
            holder = read_lock(self.run, self.name)
            why = holder.stale_because() if holder is not None else "it was just released"
            if holder is not None and why is None:
                raise LogError(
                    f"{self.run.uri} is being written by another {self.holder}: {holder.describe()}; "
                    f"wait for it to end, or stop it (a lock is taken over once its holder has "
                    f"died or been silent for {STALE_SECONDS:.0f} s)"
                )
            self._take_over(holder)
            self.taken_over = why
        self._thread = threading.Thread(target=self._beat, name="coevo-run-lock", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop the heartbeat and remove the lock (when it is still this process's)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with contextlib.suppress(OSError):
            if self._mine():
                self.run.fs.delete_file(self.run.path(self.name))

    def _create(self) -> bool:
        """Create the lock exclusively (local) or as a lease (object store); False: one exists."""
        if _local(self.run):
            # written whole under a name of its own, then linked into place: link(2) creates
            # exclusively (like O_CREAT | O_EXCL, and on NFS too), and no reader sees a half-written lock
            mine = self.run.path(f"{self.name}.{self.info.token}")
            fd = os.open(mine, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            with os.fdopen(fd, "wb") as out:
                out.write(self.info.dump())
            try:
                os.link(mine, self.run.path(self.name))
            except FileExistsError:
                return False
            finally:
                os.unlink(mine)
            return True
        if read_lock(self.run, self.name) is not None:
            return False
        self.run.write_bytes(self.info.dump(), self.name)
        return self._mine()

    def _take_over(self, stale: LockInfo | None) -> None:
        """Replace the stale lock ``stale`` by this one, unless another run replaced it first."""
        path = self.run.path(self.name)
        if _local(self.run):
            aside = f"{path}.{self.info.token}"
            with contextlib.suppress(FileNotFoundError):
                os.rename(path, aside)  # atomic: of two runs taking over, one moves the stale lock
                moved = _read_local(aside)
                # an unreadable lock reads as token "": garbage, never a lock coevo wrote
                moved_token = moved.token if moved is not None else ""
                if stale is not None and moved_token != stale.token:
                    # a fresh lock, created since we read the stale one: put it back
                    with contextlib.suppress(FileExistsError):
                        os.link(aside, path)
                    os.unlink(aside)
                    raise LogError(
                        f"{self.run.uri} was just taken by another {self.holder}; let it run, or wait for it to end"
                    )
                os.unlink(aside)
            if not self._create():
                holder = read_lock(self.run, self.name)
                raise LogError(
                    f"{self.run.uri} was just taken by another {self.holder}: "
                    f"{holder.describe() if holder else 'unknown'}; let it run, or wait for it to end"
                )
            return
        self.run.write_bytes(self.info.dump(), self.name)
        if not self._mine():
            raise LogError(f"{self.run.uri} was just taken by another {self.holder}; let it run")

    # ---- holding ------------------------------------------------------------------------

    def _mine(self) -> bool:
        holder = read_lock(self.run, self.name)
        return holder is not None and holder.token == self.info.token

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            try:
                if not self._mine():
                    return  # taken over: the check before the next commit stops this run
                self.info = LockInfo(**{**self.info.__dict__, "heartbeat": time.time()})
                self.run.write_bytes(self.info.dump(), self.name)
            except OSError:
                continue  # a flaky store: the next beat tries again, the check before a commit decides

    def confirm(self) -> None:
        """Check this process still holds the lock (before a commit).

        Raises:
            LogError: another run has taken the run directory over, or the lock is gone.
        """
        holder = read_lock(self.run, self.name)
        if holder is None or holder.token != self.info.token:
            who = holder.describe() if holder is not None else "nobody (the lock file is gone)"
            raise LogError(
                f"{self.run.uri} is no longer this {self.holder}'s to write: its lock is held by "
                f"{who}; this {self.holder} stops without committing. Check which should go on, "
                "and start it again once the other has ended"
            )


def _read_local(path: str) -> LockInfo | None:
    try:
        return LockInfo.parse(read_regular(path, limit=MAX_JSON_BYTES))
    except OSError:  # FileRefusedError too: a link, a FIFO or a device is no lock coevo wrote
        return None
