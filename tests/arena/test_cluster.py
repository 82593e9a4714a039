"""A two-node Ray cluster on this machine, started once for the module: an experiment goes in as a Ray Job; a run joins it and survives losing the worker node; a corpus build loses a new worker node."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from coevo.arena.gamelog import GameLog

from tests.factories import run_cli, wait_for_file

RAY = Path(sys.executable).with_name("ray")
COEVO = Path(sys.executable).with_name("coevo")


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


def _raylets(temp_dir: str) -> set[int]:
    """The raylets of the cluster in ``temp_dir`` (other Ray instances on the machine are left alone)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes()
                if b"raylet" in argv.split(b"\0")[0] and temp_dir.encode() in argv:
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


@dataclass
class Cluster:
    """A head and a worker node started with `ray start` (the head's dashboard serves Ray Jobs when asked for)."""

    address: str
    dashboard: str
    worker_raylets: list[int]
    env: dict[str, str]
    port: str
    temp_dir: str
    workers_started: int = 1

    def lose_worker(self) -> None:
        """SIGKILL the worker node's raylet (the node is lost as a machine failing would lose it)."""
        for pid in self.worker_raylets:
            os.kill(pid, signal.SIGKILL)
        self.worker_raylets = []

    def ensure_worker(self) -> None:
        """A worker node again, if the last was lost: a new one on ports of its own (the lost node's agents may hold theirs a while)."""
        if self.worker_raylets and all(
            Path(f"/proc/{pid}").exists() for pid in self.worker_raylets
        ):
            return
        before = _raylets(self.temp_dir)
        # four ports each (+24 to +27 for the second worker node, ...), past the head's (+18)
        offset = 10 + 4 * self.workers_started
        _, worker = _start_commands(self.port, self.temp_dir, jobs=False, worker_offset=offset)
        subprocess.run(worker, env=self.env, check=True, capture_output=True, timeout=180)
        self.worker_raylets = sorted(_raylets(self.temp_dir) - before)
        self.workers_started += 1
        assert self.worker_raylets, "the new worker node's raylet is running"


def _start_commands(
    port: str, temp_dir: str, *, jobs: bool, worker_offset: int = 4
) -> tuple[list[str], list[str]]:
    """`ray start` for the head and the worker: every port its own, as docs/cluster.md gives them.

    Another Ray on the machine (the test session's) holds the default ports; a
    dashboard agent without its port leaves `ray job submit` without an agent.
    """
    base = int(port)

    def ports(offset: int) -> list[str]:
        return [
            f"--dashboard-agent-listen-port={base + offset + 10}",
            f"--dashboard-agent-grpc-port={base + offset + 11}",
            f"--runtime-env-agent-port={base + offset + 12}",
            f"--metrics-export-port={base + offset + 13}",
        ]

    head = [str(RAY), "start", "--head", f"--port={port}", "--num-cpus=1", f"--temp-dir={temp_dir}"]
    head += [*ports(0), f"--ray-client-server-port={base + 18}"]
    head += (
        [
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={base + 1000}",
        ]
        if jobs
        else ["--include-dashboard=false"]
    )
    worker = [
        str(RAY),
        "start",
        f"--address=127.0.0.1:{port}",
        "--num-cpus=1",
        *ports(worker_offset),
    ]
    return head, worker


def _documented(marker: str) -> list[list[str]]:
    """The commands of docs/cluster.md's block after ``<!-- marker -->``, each split as a shell would."""
    text = (Path(__file__).parents[2] / "docs" / "cluster.md").read_text(encoding="utf-8")
    block = text.split(f"<!-- {marker} -->", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    joined = block.replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in joined.splitlines() if line.strip()]


def _flags(command: list[str]) -> set[str]:
    return {word.split("=")[0] for word in command if word.startswith("--")}


def test_the_documented_test_cluster_gives_every_port_the_tests_give() -> None:
    """docs/cluster.md's `ray start` commands pass the same flags as the tests' cluster (the ports that make Ray Jobs work beside another Ray)."""
    commands = [c for c in _documented("test-cluster-commands") if c[:2] == ["ray", "start"]]
    head, worker = _start_commands("6390", "/tmp/my-ray", jobs=True)
    assert [_flags(c) for c in commands] == [_flags(head), _flags(worker)]
    assert [sorted(c[2:]) for c in commands] == [sorted(head[2:]), sorted(worker[2:])], "values too"


def _documented_sets() -> list[str]:
    """The `--set` items of docs/cluster.md's test-cluster submission."""
    (command,) = _documented("test-cluster-submit")
    return [command[i + 1] for i, word in enumerate(command) if word == "--set"]


# The GCS checks each raylet every 3 s and calls it dead after five misses:
# ~15 s after a SIGKILL before its actors restart elsewhere (a run that lost
# its worker node waited 23 s for its next generation, 3.5 s with these). A
# killed raylet refuses at once, so five misses take a second; a live one
# must leave five checks of 2 s each unanswered (a loaded machine's stall).
FAST_NODE_DEATH = {
    "RAY_health_check_initial_delay_ms": "200",
    "RAY_health_check_period_ms": "200",
    "RAY_health_check_timeout_ms": "2000",
    "RAY_health_check_failure_threshold": "5",
}


@contextlib.contextmanager
def two_nodes(port: str, *, jobs: bool = False) -> Iterator[Cluster]:
    """Head (1 CPU) + worker (1 CPU) on this machine; every process of it SIGKILLed after."""
    # Ray 2.60 turns token auth on for `ray start` clusters; a local test cluster opts out
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_AUTH_MODE"] = "disabled"
    env.update(FAST_NODE_DEATH)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # coevo on it
    temp_dir = tempfile.mkdtemp(prefix="coevo-ray-", dir="/tmp")  # short: Ray puts sockets in it
    dashboard_port = str(int(port) + 1000)
    head, worker_start = _start_commands(port, temp_dir, jobs=jobs)
    try:
        subprocess.run(head, env=env, check=True, capture_output=True, timeout=180)
        head_raylets = _raylets(temp_dir)
        subprocess.run(worker_start, env=env, check=True, capture_output=True, timeout=180)
        worker = sorted(_raylets(temp_dir) - head_raylets)
        assert worker, "the worker node's raylet is running"
        yield Cluster(
            f"127.0.0.1:{port}", f"http://127.0.0.1:{dashboard_port}", worker, env, port, temp_dir
        )
    finally:
        _kill_cluster(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


needs_cluster = pytest.mark.skipif(
    not Path("/proc").exists() or not RAY.exists(), reason="needs /proc and the ray CLI"
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """One two-node cluster for the module's tests (a start is about 10 s of both cores); each test that needs a worker node asks for one (:meth:`Cluster.ensure_worker`)."""
    with two_nodes("6391", jobs=True) as started:
        yield started


def _jobs(cluster: Cluster, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(RAY), "job", *args],
        cwd=cwd,
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _submit(cluster: Cluster, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``ray job submit ARGS``, again while the head's dashboard agent is still starting (Ray says so)."""
    deadline = time.monotonic() + 120
    while True:
        done = _jobs(cluster, "submit", *args, cwd=cwd)
        starting = "No available agent to submit job" in done.stdout + done.stderr
        if not starting or time.monotonic() > deadline:
            return done
        time.sleep(2)


@needs_cluster
@pytest.mark.slow
def test_experiments_cluster_toml_goes_in_as_a_ray_job_and_writes_a_whole_log(
    cluster, tmp_path
) -> None:
    """`ray job submit --working-dir . -- coevo run cluster.toml --out file://...` on a two-node cluster: the job succeeds, the log is whole."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(
        Path(__file__).parents[2] / "experiments" / "cluster.toml", project / "cluster.toml"
    )
    out = f"file://{tmp_path / 'shared' / 'run-1'}"  # a filesystem every node sees
    # the file as shipped, scaled to two 1-CPU nodes with the values docs/cluster.md gives
    sets = [arg for item in _documented_sets() for arg in ("--set", item)]
    cluster.ensure_worker()
    submitted = _submit(
        cluster,
        "--address",
        cluster.dashboard,
        "--submission-id",
        "coevo-cluster-test",
        "--working-dir",
        ".",
        "--",
        "coevo",
        "run",
        "cluster.toml",
        "--out",
        out,
        *sets,
        cwd=project,
    )
    status = _jobs(cluster, "status", "--address", cluster.dashboard, "coevo-cluster-test")
    assert "succeeded" in status.stdout.lower(), submitted.stdout[-3000:] + submitted.stderr[-3000:]
    logs = _jobs(cluster, "logs", "--address", cluster.dashboard, "coevo-cluster-test")
    assert "2 generations" in logs.stdout and "game log: " in logs.stdout

    log = GameLog(out)
    assert [r["gen"] for r in log.read("generations").to_pylist()] == [0, 1]
    recorded = json.loads(log.run.read_bytes("experiment.json"))
    assert recorded["run"]["name"] == "cluster" and recorded["solver"]["actors"] == 2
    episodes = log.read("episodes").to_pylist()
    assert len({e["episode_id"] for e in episodes}) == len(episodes) > 0
    tasks = {t["task_id"] for t in log.read("tasks").to_pylist()}
    worlds = {w["world_id"] for w in log.read("worlds").to_pylist()}
    assert {e["task_id"] for e in episodes} <= tasks
    assert {t["world_id"] for t in log.read("tasks").to_pylist()} <= worlds
    for row in log.read("generations").to_pylist():
        train = [e for e in episodes if e["gen"] == row["gen"] and e["purpose"] == "train"]
        assert len(train) == row["train_episodes"] == row["trained_tasks"] * 2
    proposed = {t["task_id"] for t in log.read("tasks").to_pylist() if t["source"] != "eval"}
    assert proposed and {v["task_id"] for v in log.read("verdicts").to_pylist()} == proposed
    events = [json.loads(line) for line in log.run.read_bytes("events.jsonl").splitlines()]
    generations = [e for e in events if e["event"] == "generation"]
    assert [e["gen"] for e in generations] == [0, 1]
    assert {"solver-0", "solver-1", "learner"} <= set(generations[0]["busy"])


@needs_cluster
@pytest.mark.slow
def test_a_run_on_two_nodes_survives_losing_the_worker_node(cluster, tmp_path) -> None:
    """Head + worker started with `ray start`; the worker's raylet is SIGKILLed mid-run; the run completes whole."""
    cluster.ensure_worker()
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
            "coevo.run.cli",
            "run",
            str(toml),
            "--out",
            str(run_dir),
            "--address",
            cluster.address,
        ],
        env=cluster.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_file(run_dir / "log" / "_manifests" / "gen=000000.json", driver)
    cluster.lose_worker()
    _, stderr = driver.communicate(timeout=300)
    assert driver.returncode == 0, stderr[-3000:]
    log = GameLog(str(run_dir))
    rows = log.read("generations").to_pylist()
    assert [r["gen"] for r in rows] == [0, 1, 2, 3]
    episodes = log.read("episodes").to_pylist()
    assert len({e["episode_id"] for e in episodes}) == len(episodes)
    assert all(r["train_episodes"] == r["trained_tasks"] * 2 for r in rows)


def _corpus(folder: Path) -> dict[str, list[dict]]:
    return {
        table: sorted(
            ds.dataset(folder / table, format="parquet", partitioning="hive")
            .to_table()
            .to_pylist(),
            key=lambda row: json.dumps(row, sort_keys=True, default=str),
        )
        for table in ("worlds", "tasks", "verdicts")
    }


@needs_cluster
@pytest.mark.slow
def test_a_corpus_build_that_loses_its_worker_node_completes_to_the_same_corpus(
    cluster, tmp_path
) -> None:
    """Two shards at a time over two nodes; the worker node's raylet is SIGKILLed after the first commit; the build finishes whole, as the same build in one process."""
    flags = ["--worlds", "30", "--tasks-per-world", "3", "--shard-size", "5"]
    whole = run_cli("corpus", "build", "--out", str(tmp_path / "whole"), *flags, "--workers", "0")
    assert whole.returncode == 0, whole.stderr[-3000:]
    flags += ["--workers", "2"]
    cluster.ensure_worker()

    def build(out: Path) -> subprocess.Popen:
        return subprocess.Popen(
            [
                str(COEVO),
                "corpus",
                "build",
                "--out",
                str(out),
                *flags,
                "--address",
                cluster.address,
            ],
            env=cluster.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    hit = build(tmp_path / "hit")
    wait_for_file(tmp_path / "hit" / "_commits" / "shard-0.json", hit, 300)
    assert hit.poll() is None, "killed while the build was under way"
    cluster.lose_worker()
    stdout, stderr = hit.communicate(timeout=600)
    assert hit.returncode == 0, stderr[-3000:]
    said = stdout + stderr
    assert "reused 0 committed, built 6" in said, said[-1500:]
    assert _corpus(tmp_path / "hit") == _corpus(tmp_path / "whole")
    commits = sorted(p.name for p in (tmp_path / "hit" / "_commits").iterdir())
    assert commits == sorted(f"shard-{i}.json" for i in range(6))
