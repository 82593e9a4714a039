"""Sandboxed workers: tool code that tries to escape gets a clear error for that job, and the pool goes on.

Real processes, no mocks. The tools are in ``sandbox_tools.py``, next to this file, imported by the
workers as a top-level module. Tests that need a layer this machine cannot give (root for the
network namespace, the uid and the pids cgroup; a kernel with Landlock) are skipped, saying which.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from coevo.arena.sandbox import Sandbox
from coevo.arena.workers import Crashed, Done, Overrun, WorkerPool

TOOLS = "sandbox_tools:job"
HERE = str(Path(__file__).parent)
REPO = Path(__file__).parents[2]
MISSING = Sandbox().missing()

pytestmark = pytest.mark.slow  # worker processes of their own


def needs(*layers: str) -> pytest.MarkDecorator:
    """Skip unless this machine gives every one of ``layers``."""
    absent = [f"{name} ({MISSING[name]})" for name in layers if name in MISSING]
    return pytest.mark.skipif(bool(absent), reason="not available here: " + "; ".join(absent))


def sandboxed(seconds: float = 60.0, **limits: Any) -> WorkerPool:
    """A pool of one sandboxed worker running the tools, with these limits."""
    return WorkerPool(TOOLS, seconds=seconds, sandbox=Sandbox(**limits), paths=[HERE])


def failed(outcome: object, *words: str) -> bool:
    return isinstance(outcome, Crashed) and all(word in outcome.detail for word in words)


@needs("landlock")
def test_files_outside_the_box_cannot_be_read_or_written(tmp_path):
    """Reading /etc/passwd, a file of the test or of the repository, or writing outside the box, is refused per job."""
    secret = tmp_path / "secret.txt"
    secret.write_text("not for tools")
    escape = tmp_path / "escape.txt"
    with sandboxed() as pool:
        outcomes = list(
            pool.run(
                [
                    {"do": "read", "path": "/etc/passwd"},
                    {"do": "read", "path": str(secret)},
                    {"do": "read", "path": str(REPO / "pyproject.toml")},
                    {"do": "write", "path": str(escape)},
                    {
                        "do": "read",
                        "path": str(Path(HERE) / "sandbox_tools.py"),
                    },  # its own import path
                    {},
                ]
            )
        )
    *refused, own, after = outcomes
    assert all(failed(o, "PermissionError", "Permission denied") for o in refused), refused
    assert not escape.exists()
    assert isinstance(own, Done) and own.result["read"] > 0
    assert isinstance(after, Done) and after.result["jobs"] == 6 and pool.restarts == 0


@needs("network namespace")
def test_the_network_is_out_of_reach():
    """A TCP connection or a UDP datagram to a server of the test on 127.0.0.1 fails; the server hears nothing."""
    with (
        socket.create_server(("127.0.0.1", 0)) as tcp,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp,
    ):
        udp.bind(("127.0.0.1", 0))
        tcp.setblocking(False)
        udp.setblocking(False)
        with sandboxed() as pool:
            connect, send, after = pool.run(
                [
                    {"do": "connect", "host": "127.0.0.1", "port": tcp.getsockname()[1]},
                    {"do": "udp", "host": "127.0.0.1", "port": udp.getsockname()[1]},
                    {},
                ]
            )
        assert failed(connect, "Error"), (
            connect
        )  # Landlock's EACCES, or the namespace's ENETUNREACH
        assert failed(send, "OSError", "Network is unreachable"), send
        with pytest.raises(BlockingIOError):
            tcp.accept()
        with pytest.raises(BlockingIOError):
            udp.recv(100)
    assert isinstance(after, Done) and after.result["jobs"] == 3


@needs("process limit")
def test_a_fork_bomb_stops_at_the_process_limit():
    """Forking 10,000 sleeping children stops at the limit with EAGAIN; the worker lives on."""
    with sandboxed(processes=16) as pool:
        bomb, after = pool.run([{"do": "fork", "children": 10_000}, {}])
    assert failed(bomb, "BlockingIOError", "Resource temporarily unavailable"), bomb
    assert isinstance(after, Done) and after.result["jobs"] == 2 and pool.restarts == 0


def test_an_allocation_past_the_memory_limit_fails_the_job_only():
    """Allocating 4 GiB under a 1 GiB address space is a MemoryError for that job; the next job runs."""
    with sandboxed(memory_bytes=1 << 30) as pool:
        big, after = pool.run([{"do": "allocate", "bytes": 4 << 30}, {}])
    assert failed(big, "MemoryError"), big
    assert isinstance(after, Done) and after.result["jobs"] == 2 and pool.restarts == 0


def test_a_job_past_its_cpu_time_fails_and_the_next_gets_its_own():
    """An endless loop is stopped by the CPU allowance (not the wall clock); the next job has a fresh allowance."""
    with sandboxed(cpu_seconds=1) as pool:
        spin, again, after = pool.run([{"do": "spin"}, {"do": "spin"}, {}])
    assert failed(spin, "CpuTimeExceeded", "1 s of CPU time"), spin
    assert failed(again, "CpuTimeExceeded"), again
    assert isinstance(after, Done) and after.result["jobs"] == 3 and pool.restarts == 0


def test_a_sleeping_job_is_stopped_by_the_wall_clock():
    """A job that sleeps forever (using no CPU) overruns the wall clock; its worker is replaced."""
    with sandboxed(seconds=2.0) as pool:
        before, slow, after = pool.run([{}, {"do": "sleep", "seconds": 3600}, {}])
    assert isinstance(slow, Overrun) and slow.seconds == 2.0
    assert isinstance(after, Done) and after.result["pid"] != before.result["pid"]
    assert pool.restarts == 1


@needs("landlock")
def test_the_box_is_readable_and_writable(tmp_path):
    """Tools write and read their box (also as TMPDIR); the caller sees what they wrote; an own box goes with its worker."""
    box = tmp_path / "box"
    with sandboxed(box=str(box)) as pool:
        (shared,) = pool.run([{"do": "box"}])
    assert isinstance(shared, Done), shared
    assert shared.result == {"box": str(box), "text": "kept in the box"}
    assert (box / "note.txt").read_text() == "kept in the box"
    with sandboxed() as pool:
        (own,) = pool.run([{"do": "box"}])
    assert isinstance(own, Done) and own.result["text"] == "kept in the box"
    assert not os.path.exists(own.result["box"])  # removed when its worker stopped


def test_the_parent_environment_stays_out(monkeypatch):
    """A sandboxed worker sees only the sandbox's variables: no secret of the parent, not its own setup."""
    monkeypatch.setenv("COEVO_TEST_SECRET", "sk-not-for-tools")
    with WorkerPool(TOOLS, sandbox=Sandbox(env={"GREETING": "hi"}), paths=[HERE]) as pool:
        (environ,) = pool.run([{"do": "environ"}])
    assert isinstance(environ, Done), environ
    names = set(environ.result["environ"])
    assert "GREETING" in names and "HOME" in names
    assert "COEVO_TEST_SECRET" not in names and "COEVO_WORKER_SANDBOX" not in names


@needs("network namespace", "unprivileged uid", "landlock", "process limit")
def test_isolation_lists_the_active_layers():
    """``isolation`` names each layer the worker entered; a strict sandbox starts where all are available."""
    with WorkerPool(TOOLS, sandbox=Sandbox(strict=True), paths=[HERE]) as pool:
        layers = pool.isolation
        (job,) = pool.run([{}])
    assert layers[0] == "network namespace" and "pids cgroup" in layers and "rlimits" in layers
    assert f"uid {job.result['uid']}" in layers and job.result["uid"] >= Sandbox().uid_base
    assert any(layer.startswith("landlock ABI ") for layer in layers)
    assert pool.isolation_missing == {}
    with WorkerPool(TOOLS, sandbox=Sandbox(network=True), paths=[HERE]) as pool:
        assert "network namespace" not in pool.isolation
    with WorkerPool(TOOLS) as pool:
        assert pool.isolation == ["address-space limit"]


_WITHOUT_CAPABILITIES = textwrap.dedent(
    """
    from coevo.arena.sandbox import Sandbox, SandboxUnavailable
    from coevo.arena.workers import Done, WorkerPool
    try:
        WorkerPool("sandbox_tools:job", sandbox=Sandbox(strict=True), paths=[{here!r}])
    except SandboxUnavailable as exc:
        print("REFUSED", exc)
    with WorkerPool("sandbox_tools:job", sandbox=Sandbox(), paths=[{here!r}]) as pool:
        print("ISOLATION", pool.isolation)
        print("MISSING", sorted(pool.isolation_missing))
        (outcome,) = pool.run([{{"do": "read", "path": "/etc/passwd"}}])
        print("READ", outcome)
    """
)


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv"
)
@pytest.mark.slow  # a process of its own
@needs("landlock")
def test_a_missing_layer_is_reported_and_a_strict_sandbox_refuses():
    """Root without capabilities cannot switch uid nor make a cgroup: strict refuses, naming them; lax lists the rest."""
    code = _WITHOUT_CAPABILITIES.format(here=HERE)
    result = subprocess.run(
        ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    out = result.stdout
    assert result.returncode == 0, result.stderr
    assert "REFUSED the strict sandbox cannot start: 2 layer(s) missing" in out
    assert "- unprivileged uid: switching each worker to its own uid needs root" in out
    assert "- process limit: neither a writable pids cgroup" in out
    assert "MISSING ['process limit', 'unprivileged uid']" in out
    isolation = next(line for line in out.splitlines() if line.startswith("ISOLATION"))
    assert "uid " not in isolation and "pids cgroup" not in isolation
    assert "landlock ABI" in isolation and "rlimits" in isolation
    assert "network namespace (in a user namespace)" in isolation  # no CAP_SYS_ADMIN: the fallback
    assert "PermissionError" in out.split("READ", 1)[1]
