"""A pool of persistent worker processes that is killed and restarted when a job overruns.

The SQLite guards bound what one statement may cost in instructions, but a
wall clock can only be enforced from outside: a function call that runs for
minutes cannot be stopped from inside the process running it. So untrusted
work that must finish (the Judge's checks of a task from a file or from a
synthesizer) runs in a :class:`WorkerPool`: a few long-lived processes, each
given one job at a time over a pipe. A job that overruns its wall-clock
allowance gets its worker killed (``SIGKILL``) and restarted, and comes back
as an :class:`Overrun`; a worker that dies (out of memory, a crash) comes
back as a :class:`Crashed`; the pool goes on with the next job.

Jobs and results cross the pipe as JSON (length-prefixed frames), never
pickles, and the function a worker runs is named by the program as
``"module:function"`` from an installed package, never by data. Each worker
has an address-space limit (``RLIMIT_AS``) and dies with its parent.
Given a :class:`~coevo.arena.sandbox.Sandbox`, a worker also runs without
network, under its own unprivileged uid, with CPU, process and file limits
and Landlock rules on what it may read and write; ``pool.isolation`` lists
the layers that are active.

A process per job would cost about 0.2 s of start-up each (importing coevo);
a persistent worker costs a pipe round trip, about 0.1 ms, per job.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import resource
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Final

from coevo.arena.sandbox import (
    SETUP_VARIABLE,
    CpuTimeExceeded,
    Jail,
    Sandbox,
    check_or_refuse,
    cpu_allowance,
    enter,
    fresh_id,
)

__all__ = ["Crashed", "Done", "Overrun", "WorkerPool", "serve"]

_HEADER: Final = 4
_MAX_FRAME: Final = 1 << 30
DEFAULT_MEMORY_BYTES: Final = 4 << 30
"""Address space a worker may map (``RLIMIT_AS``), unless the pool is given another."""
START_SECONDS: Final = 60.0
"""How long a sandboxed worker may take to import its handler and enter its sandbox."""


@dataclass(frozen=True, slots=True)
class Done:
    """A job's result, as the worker's function returned it (JSON data)."""

    result: Any


@dataclass(frozen=True, slots=True)
class Overrun:
    """A job stopped by the wall clock: its worker was killed and restarted."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Crashed:
    """A job whose worker died (out of memory, a crash) or answered something unreadable."""

    detail: str


Outcome = Done | Overrun | Crashed


def _write_frame(stream: IO[bytes], obj: Any) -> None:
    data = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()
    stream.write(len(data).to_bytes(_HEADER, "big") + data)
    stream.flush()


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks: list[bytes] = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


class _FrameTooLarge(ValueError):
    """A frame's header announces more bytes than the reader takes (nothing of its body was read)."""


def _read_frame(fd: int, max_bytes: int = _MAX_FRAME) -> Any:
    """The next JSON frame on ``fd``; raises EOFError at the end, ValueError on garbage.

    A frame over ``max_bytes`` raises :class:`_FrameTooLarge` before its body is read.
    """
    header = _read_exactly(fd, _HEADER)
    if header is None:
        raise EOFError
    size = int.from_bytes(header, "big")
    if size > max_bytes:
        raise _FrameTooLarge(
            f"the worker answered {size:,} bytes, more than the {max_bytes:,} this pool reads "
            "from a worker"
        )
    body = _read_exactly(fd, size)
    if body is None:
        raise EOFError
    return json.loads(body)


def _die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies (``PR_SET_PDEATHSIG``)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class _Worker:
    process: subprocess.Popen[bytes]
    #: what this worker has been sent and keeps (e.g. world ids), for the caller's bookkeeping
    holds: set[str] = field(default_factory=set)
    #: the worker's sandbox (None: not sandboxed), released when the worker stops
    jail: Jail | None = None
    #: the isolation layers the worker reported active once it was set up
    layers: list[str] = field(default_factory=list)


class WorkerPool:
    """Persistent worker processes running ``handler`` on JSON jobs, with a wall clock per job.

    Args:
        handler: the function the workers run, as ``"package.module:function"``
            of an installed package (named by the program, never read from
            data); it takes one job (JSON data) and returns JSON data, and may
            keep state between jobs (caches).
        workers: processes in the pool.
        seconds: the wall-clock allowance of one job.
        memory_bytes: each worker's address-space limit (0: none).
        sandbox: the limits and isolation of each worker (None: a plain
            process with the parent's rights and environment). A strict
            sandbox that this machine cannot give raises
            :class:`~coevo.arena.sandbox.SandboxUnavailable` here.
        paths: folders put in front of the workers' import path
            (``PYTHONPATH``), e.g. where the handler's module is; a sandbox
            lets its workers read them.
        max_answer_bytes: the largest answer read from a worker (its frame, in
            bytes); a larger one is a :class:`Crashed` job, nothing of it read,
            and its worker is restarted.
    """

    def __init__(
        self,
        handler: str,
        *,
        workers: int = 1,
        seconds: float = 60.0,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        sandbox: Sandbox | None = None,
        paths: Sequence[str] = (),
        max_answer_bytes: int = _MAX_FRAME,
    ):
        if workers < 1:
            raise ValueError(f"a worker pool needs at least one worker, got {workers}")
        if seconds <= 0:
            raise ValueError(f"the wall-clock allowance must be positive, got {seconds}")
        self.handler = handler
        self.seconds = seconds
        self.memory_bytes = memory_bytes
        self.sandbox = sandbox
        self.paths = tuple(os.path.abspath(path) for path in paths)
        self.max_answer_bytes = min(max_answer_bytes, _MAX_FRAME)
        #: the isolation layers this machine cannot give the sandbox, each with how to get it
        self.isolation_missing: dict[str, str] = {} if sandbox is None else check_or_refuse(sandbox)
        self._group = None if sandbox is None else fresh_id(sandbox)  # the gid the workers share
        self._workers: list[_Worker | None] = [None] * workers
        #: workers killed for overrunning or found dead, since the pool started
        self.restarts = 0

    @property
    def size(self) -> int:
        """The number of workers."""
        return len(self._workers)

    @property
    def isolation(self) -> list[str]:
        """The isolation layers active in the workers, as a worker reported them (e.g. ``"landlock ABI 7"``).

        A sandboxed pool starts its first worker to ask, if none runs yet
        (OSError if it cannot start, saying why); the layers this machine
        cannot give are in :attr:`isolation_missing`.
        """
        if self.sandbox is None:
            return ["address-space limit"] if self.memory_bytes > 0 else []
        return list(self._worker(0).layers)

    def _start(self) -> _Worker:
        jail = None
        if self.sandbox is not None:
            assert self._group is not None
            jail = Jail(
                self.sandbox, group=self._group, paths=self.paths, memory_bytes=self.memory_bytes
            )
        limit = self.memory_bytes if jail is None else jail.memory_bytes

        def prepare() -> None:  # runs in the child, before it executes Python
            _die_with_parent()
            if limit > 0:
                soft, hard = resource.getrlimit(resource.RLIMIT_AS)
                # never above a limit this process already has (it cannot be raised)
                capped = min(v for v in (limit, soft, hard) if v != resource.RLIM_INFINITY)
                resource.setrlimit(resource.RLIMIT_AS, (capped, capped))
            if jail is not None:
                jail.before_exec()

        if jail is None:
            command = [sys.executable, "-m", "coevo.arena.workers", self.handler]
            env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
            if self.paths:
                env["PYTHONPATH"] = os.pathsep.join([*self.paths, env.get("PYTHONPATH", "")])
        else:  # -P: the working directory (the box) is not an import path; -s: nor the user's site
            command = [sys.executable, "-P", "-s", "-m", "coevo.arena.workers", self.handler]
            env = {**jail.environment(), "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                preexec_fn=prepare,  # only syscalls before exec: no locks taken
                env=env,
                cwd=None if jail is None else jail.box,
                # a sandboxed worker leads its own process group, so what it forks dies with it
                process_group=None if jail is None else 0,
            )
        except BaseException:
            if jail is not None:
                jail.release(None)
            raise
        worker = _Worker(process, jail=jail)
        if jail is not None:
            self._await_ready(worker)
        return worker

    def _await_ready(self, worker: _Worker) -> None:
        """Read a sandboxed worker's first frame: the layers it entered, or why it could not."""
        assert worker.process.stdout is not None
        fd = worker.process.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], START_SECONDS)
        try:
            if not ready:
                raise OSError(f"no answer in {START_SECONDS:g} s")
            hello = _read_frame(fd)
            if not isinstance(hello, dict) or "__ready__" not in hello:
                raise OSError(hello.get("__error__") if isinstance(hello, dict) else repr(hello))
        except (EOFError, ValueError, OSError) as exc:
            self._stop(worker, kill=True)
            raise OSError(f"the sandboxed worker could not start: {exc or 'it exited'}") from None
        worker.layers = list(hello["__ready__"])

    def _worker(self, slot: int) -> _Worker:
        worker = self._workers[slot]
        if worker is None or worker.process.poll() is not None:
            if worker is not None:
                self.restarts += 1
            worker = self._workers[slot] = self._start()
        return worker

    def _kill(self, slot: int) -> None:
        worker = self._workers[slot]
        if worker is not None:
            self._stop(worker, kill=True)
            self._workers[slot] = None
            self.restarts += 1

    @staticmethod
    def _stop(worker: _Worker, *, kill: bool) -> None:
        """Stop a worker (kill it, or close its input and give it 2 s) and release its sandbox."""
        if not kill and worker.process.stdin is not None:
            with contextlib.suppress(OSError):
                worker.process.stdin.close()
            try:
                worker.process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                kill = True
        if kill:
            with contextlib.suppress(ProcessLookupError):
                worker.process.kill()
            worker.process.wait()
        for stream in (worker.process.stdin, worker.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        if worker.jail is not None:
            worker.jail.release(worker.process.pid)

    def run(
        self,
        jobs: Iterable[Any],
        *,
        slot_of: Callable[[int, Any], int] | None = None,
        prepare: Callable[[Any, set[str]], Any] | None = None,
    ) -> Iterator[Outcome]:
        """Run ``jobs``, yielding one outcome per job, in order.

        Args:
            jobs: the jobs (JSON data).
            slot_of: which worker takes job ``i`` (default: round robin), e.g.
                by world so that a worker's caches are reused.
            prepare: turns a job into the message sent, given what the chosen
                worker already holds (and may add to that set), e.g. to send
                a world only to a worker that has not seen it.
        """
        pending: list[list[tuple[int, Any]]] = [[] for _ in self._workers]
        count = 0
        for i, job in enumerate(jobs):
            slot = (slot_of(i, job) if slot_of else i) % self.size
            pending[slot].append((i, job))
            count += 1
        results: dict[int, Outcome] = {}
        busy: dict[int, tuple[int, float]] = {}  # slot -> (job index, deadline)

        def dispatch(slot: int) -> None:
            while pending[slot]:
                index, job = pending[slot].pop(0)
                try:
                    worker = self._worker(slot)
                except (OSError, subprocess.SubprocessError) as exc:
                    results[index] = Crashed(f"a worker process could not start: {exc}")
                    continue
                message = prepare(job, worker.holds) if prepare else job
                try:
                    assert worker.process.stdin is not None
                    _write_frame(worker.process.stdin, message)
                except (BrokenPipeError, OSError) as exc:
                    self._kill(slot)
                    results[index] = Crashed(f"the worker could not take the job: {exc}")
                    continue
                busy[slot] = (index, time.monotonic() + self.seconds)
                return

        for slot in range(self.size):
            dispatch(slot)
        try:
            yield from self._collect(count, results, busy, dispatch)
        finally:
            for slot in list(busy):  # the caller stopped early: those answers would come late
                self._kill(slot)

    def _collect(
        self,
        count: int,
        results: dict[int, Outcome],
        busy: dict[int, tuple[int, float]],
        dispatch: Callable[[int], None],
    ) -> Iterator[Outcome]:
        """Wait for answers and deadlines; yield the outcomes in job order."""
        next_out = 0
        while next_out < count:
            while next_out in results:
                yield results.pop(next_out)
                next_out += 1
            if next_out >= count:
                break
            if not busy:  # every job left failed to dispatch
                continue
            now = time.monotonic()
            timeout = max(0.0, min(deadline for _, deadline in busy.values()) - now)
            fds = {self._stdout_fd(slot): slot for slot in busy}
            ready, _, _ = select.select(list(fds), [], [], timeout)
            for fd in ready:
                slot = fds[fd]
                index, _ = busy.pop(slot)
                try:
                    answer = _read_frame(fd, self.max_answer_bytes)
                    if isinstance(answer, dict) and set(answer) == {"__error__"}:
                        results[index] = Crashed(f"the job failed: {answer['__error__']}")
                    else:
                        results[index] = Done(answer)
                except _FrameTooLarge as exc:  # the worker is still writing it: no exit to wait for
                    self._kill(slot)
                    results[index] = Crashed(str(exc))
                except (EOFError, ValueError, OSError) as exc:
                    status = self._exit_status(slot)
                    self._kill(slot)
                    detail = f"exit status {status}" if status is not None else str(exc) or "EOF"
                    results[index] = Crashed(f"the worker died ({detail})")
                dispatch(slot)
            now = time.monotonic()
            for slot, (index, deadline) in list(busy.items()):
                if now >= deadline:
                    busy.pop(slot)
                    self._kill(slot)
                    results[index] = Overrun(self.seconds)
                    dispatch(slot)

    def _stdout_fd(self, slot: int) -> int:
        worker = self._workers[slot]
        assert worker is not None and worker.process.stdout is not None
        return worker.process.stdout.fileno()

    def _exit_status(self, slot: int) -> int | None:
        worker = self._workers[slot]
        if worker is None:
            return None
        try:
            return worker.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        """Stop every worker (they also stop when this process dies)."""
        for slot in range(self.size):
            worker = self._workers[slot]
            if worker is not None:
                self._stop(worker, kill=False)
                self._workers[slot] = None

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _resolve(handler: str) -> Callable[[Any], Any]:
    module, _, name = handler.partition(":")
    if not module or not name:
        raise SystemExit(f"coevo worker: {handler!r} is not module:function")
    function: Callable[[Any], Any] = getattr(importlib.import_module(module), name)
    return function


def _describe(exc: BaseException) -> str:
    """``"Type: message"``, or the type alone for an exception without a message (a MemoryError)."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def serve(handler: str, sandbox_setup: str | None = None) -> int:
    """A worker's main loop: read a job, run ``handler`` on it, write the result; until EOF.

    Args:
        handler: the function, as ``"module:function"``.
        sandbox_setup: the sandbox the parent prepared (JSON, from the
            parent's environment, never from a job), entered once the
            handler is imported; the worker first answers with the layers
            it entered (``{"__ready__": [...]}``), and each job then gets
            its own CPU-time allowance.
    """
    function = _resolve(handler)
    # Ctrl-C reaches the whole process group: the parent decides, the worker goes on or is stopped
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints must not corrupt the frames
    cpu_seconds = None
    if sandbox_setup is not None:
        setup = json.loads(sandbox_setup)
        try:
            layers = enter(setup)
        except Exception as exc:  # the parent must hear why, and no job may run unconfined
            _write_frame(out, {"__error__": _describe(exc)})
            return 3
        cpu_seconds = setup["cpu_seconds"]
        _write_frame(out, {"__ready__": layers})
    fd = sys.stdin.fileno()
    while True:
        try:
            job = _read_frame(fd)
        except EOFError:
            return 0
        try:
            if cpu_seconds is None:
                answer = function(job)
            else:
                with cpu_allowance(cpu_seconds):
                    answer = function(job)
        # the job's failure is its result; the worker lives on
        except (Exception, CpuTimeExceeded) as exc:
            answer = {"__error__": _describe(exc)}
        _write_frame(out, answer)


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1], os.environ.pop(SETUP_VARIABLE, None)))
