"""A two-node Ray cluster on this machine: a run joins it with --address and survives losing the worker node."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from coevo.arena.gamelog import GameLog

RAY = Path(sys.executable).with_name("ray")


def _uses(pid: Path, temp_dir: str) -> bool:
    """Whether a process belongs to the cluster in ``temp_dir``: by its arguments or its open files."""
    if temp_dir.encode() in (pid / "cmdline").read_bytes():
        return True
    fds = pid / "fd"
    return any(temp_dir in os.readlink(fd) for fd in fds.iterdir() if fd.is_symlink())


def _kill_cluster(temp_dir: str) -> None:
    """SIGKILL every process of the cluster in ``temp_dir`` (never the test session's own Ray)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if _uses(entry, temp_dir):
                    os.kill(int(entry.name), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                continue


def _raylets() -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"raylet" in (entry / "cmdline").read_bytes().split(b"\0")[0]:
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.skipif(
    not Path("/proc").exists() or not RAY.exists(), reason="needs /proc and the ray CLI"
)
@pytest.mark.slow
def test_a_run_on_two_nodes_survives_losing_the_worker_node(tmp_path) -> None:
    """Head + worker started with `ray start`; the worker's raylet is SIGKILLed mid-run; the run completes whole."""
    # Ray 2.60 turns token auth on for `ray start` clusters; a local test cluster opts out
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_AUTH_MODE"] = "disabled"
    port = "6391"
    temp_dir = tempfile.mkdtemp(prefix="coevo-ray-", dir="/tmp")  # short: Ray puts sockets in it
    before = _raylets()
    subprocess.run(
        [
            str(RAY),
            "start",
            "--head",
            f"--port={port}",
            "--num-cpus=1",
            "--include-dashboard=false",
            f"--temp-dir={temp_dir}",
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    try:
        head_raylets = _raylets() - before
        subprocess.run(
            [str(RAY), "start", f"--address=127.0.0.1:{port}", "--num-cpus=1"],
            env=env,
            check=True,
            capture_output=True,
            timeout=120,
        )
        worker = sorted(_raylets() - before - head_raylets)
        assert worker, "the worker node's raylet is running"
        toml = tmp_path / "cluster.toml"
        toml.write_text(
            "[run]\nseed = 5\ngenerations = 4\nrollouts = 2\nchunk = 8\n"
            '[synthesizer]\nname = "procedural"\nactors = 2\nconfig = { domains = ["retail"], world_pool = 2 }\n'
            '[judge]\nname = "mechanical"\nactors = 2\n'
            '[solver]\nname = "linear-pg"\nactors = 4\n'
            '[curriculum]\nname = "uniform"\ntasks_per_gen = 8\nlevels = [1, 2]\n'
            "[eval]\nlevels = [1]\nper_level = 3\nevery = 2\n"
        )
        run_dir = tmp_path / "run"
        driver = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "coevo.arena.run.cli",
                "run",
                str(toml),
                "--out",
                str(run_dir),
                "--address",
                f"127.0.0.1:{port}",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        first = run_dir / "log" / "_manifests" / "gen=000000.json"
        deadline = time.monotonic() + 240
        while not first.exists() and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert first.exists(), (
            driver.stderr.read() if driver.poll() is not None else "no generation 0"
        )
        for pid in worker:
            os.kill(pid, signal.SIGKILL)
        _, stderr = driver.communicate(timeout=300)
        assert driver.returncode == 0, stderr[-3000:]
        log = GameLog(str(run_dir))
        rows = log.read("generations").to_pylist()
        assert [r["gen"] for r in rows] == [0, 1, 2, 3]
        episodes = log.read("episodes").to_pylist()
        assert len({e["episode_id"] for e in episodes}) == len(episodes)
        assert all(r["train_episodes"] == r["trained_tasks"] * 2 for r in rows)
    finally:
        _kill_cluster(temp_dir)
