"""Run directories: one writer at a time, damage found before it is read or resumed, and no code from a checkpoint."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from coevo.arena.errors import LogError
from coevo.arena.gamelog import STALE_SECONDS, GameLog, RunDir, RunLock, diagnose
from coevo.arena.gamelog.lock import LOCK_NAME, LockInfo, read_lock
from coevo.run.cli import main
from coevo.run.experiment import load_experiment

from tests.conftest import SMALL_RUN

TINY = SMALL_RUN

HOLD = """
import sys, time
from coevo.arena.gamelog import RunDir, RunLock
with RunLock(RunDir(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


def _dead_pid() -> int:
    """A process id no process has: one past the largest the kernel hands out."""
    limit = Path("/proc/sys/kernel/pid_max")
    return (int(limit.read_text()) if limit.exists() else 1 << 22) + 1


def _plant_lock(run: Path, **fields: object) -> None:
    now = time.time()
    info = {"host": socket.gethostname(), "pid": os.getpid(), "started": now, "heartbeat": now}
    info.update({"token": "planted", **fields})
    (run / LOCK_NAME).write_text(json.dumps(info))


def _manifests(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "log" / "_manifests").iterdir())


def _one_line(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith(f"coevo {command}:")]
    assert len(lines) == 1, f"one line of error: {err!r}"
    assert "Traceback" not in err
    return lines[0]


# ---- one writer ------------------------------------------------------------------------


@pytest.fixture
def holder(tmp_path):
    """Another process holding the lock of tmp_path/run."""
    run = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline().strip() == "held"
    yield run, process
    process.stdin.close()
    process.wait()


def test_a_second_writer_stops_at_once_naming_the_first(holder, capsys) -> None:
    """While a run holds the directory, `coevo run` and `coevo resume` into it exit 2, naming host and pid, touching nothing."""
    run, process = holder
    toml = run.parent / "tiny.toml"
    toml.write_text(TINY)
    assert main(["run", str(toml), "--out", str(run)]) == 2
    line = _one_line(capsys.readouterr().err, "run")
    assert f"pid {process.pid} on host {socket.gethostname()}" in line
    assert "being written by another run" in line
    assert not (run / "events.jsonl").exists() and not (run / "experiment.json").exists()
    (run / "experiment.json").write_text(load_experiment(toml).model_dump_json())
    assert main(["resume", str(run)]) == 2
    assert f"pid {process.pid} on host" in _one_line(capsys.readouterr().err, "resume")
    with pytest.raises(LogError, match=f"pid {process.pid}"):
        RunLock(RunDir(str(run))).acquire()
    # once the first ends, its lock is gone and the directory is free
    process.stdin.close()
    process.wait()
    assert read_lock(RunDir(str(run))) is None
    with RunLock(RunDir(str(run))):
        pass


RACE = """
import sys
from coevo.arena.errors import LogError
from coevo.arena.gamelog import RunDir, RunLock
lock = RunLock(RunDir(sys.argv[1]))
sys.stdin.readline()  # all start together
try:
    lock.acquire()
except LogError:
    print("refused", flush=True)
else:
    print("held", flush=True)
    sys.stdin.read()
    lock.release()
"""


@pytest.mark.slow  # a process of its own
def test_of_writers_started_together_exactly_one_gets_the_lock(tmp_path) -> None:
    """Four processes take the lock of one directory at once: one holds it, three are refused."""
    run = tmp_path / "run"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, str(run)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for racer in racers:
        racer.stdin.write("go\n")
        racer.stdin.flush()
    outcomes = sorted(racer.stdout.readline().strip() for racer in racers)
    for racer in racers:
        racer.stdin.close()
        racer.wait()
    assert outcomes == ["held", "refused", "refused", "refused"]
    assert read_lock(RunDir(str(run))) is None


@pytest.mark.slow  # a process of its own
def test_a_lock_of_a_dead_or_silent_holder_is_taken_over_and_a_live_one_is_not(tmp_path) -> None:
    """Dead pid on this host, or a heartbeat older than the stale bound: taken over; a fresh one elsewhere: refused."""
    run = tmp_path / "run"
    run.mkdir()
    _plant_lock(run, pid=_dead_pid())
    with RunLock(RunDir(str(run))) as lock:
        assert "no longer running" in (lock.taken_over or "")
        assert read_lock(lock.run).token == lock.info.token
    assert not (run / LOCK_NAME).exists(), "released on a clean exit"
    _plant_lock(run, host="elsewhere", pid=1, heartbeat=time.time() - STALE_SECONDS - 5)
    with RunLock(RunDir(str(run))) as lock:
        assert "silent" in (lock.taken_over or "")
    _plant_lock(run, host="elsewhere", pid=1)
    with pytest.raises(LogError, match="pid 1 on host elsewhere"):
        RunLock(RunDir(str(run))).acquire()
    assert read_lock(RunDir(str(run))).token == "planted", "a refused run leaves the lock alone"


@pytest.mark.parametrize("garbage", [b"", b"{not json", b'{"host": 1}'])
def test_an_unreadable_lock_is_garbage_and_taken_over(garbage: bytes, tmp_path) -> None:
    """An empty or damaged lock file (coevo never writes one half) does not block the run directory forever."""
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_NAME).write_bytes(garbage)
    with RunLock(RunDir(str(run))) as lock:
        assert lock.taken_over
        assert read_lock(lock.run).token == lock.info.token
    assert not (run / LOCK_NAME).exists()


@pytest.mark.parametrize("kind", ["link to /dev/zero", "fifo"])
def test_a_lock_that_is_a_link_or_a_fifo_is_taken_over_without_reading_it(kind, tmp_path) -> None:
    """A lock file that is a link to /dev/zero or a FIFO is no lock coevo wrote: taken over at once, never read whole, never waited on."""
    run = tmp_path / "run"
    run.mkdir()
    if kind == "fifo":
        os.mkfifo(run / LOCK_NAME)
    else:
        (run / LOCK_NAME).symlink_to("/dev/zero")
    with RunLock(RunDir(str(run))) as lock:
        assert lock.taken_over
        assert read_lock(lock.run).token == lock.info.token
    assert not (run / LOCK_NAME).exists()


def test_the_lock_is_released_on_error_and_its_heartbeat_is_refreshed(tmp_path) -> None:
    """An exception inside the lock releases it; the holder's thread rewrites its heartbeat."""
    run = RunDir(str(tmp_path / "run"))
    with pytest.raises(KeyboardInterrupt), RunLock(run):
        raise KeyboardInterrupt
    assert read_lock(run) is None
    with RunLock(run, heartbeat=0.01) as lock:
        first = read_lock(run).heartbeat
        deadline = time.monotonic() + 30
        while read_lock(run).heartbeat == first and time.monotonic() < deadline:
            time.sleep(0.01)
        assert read_lock(run).heartbeat > first
        assert read_lock(run).token == lock.info.token


def test_on_an_object_store_a_commit_stops_when_another_writer_holds_the_lease(tmp_path) -> None:
    """On a non-local filesystem the lease is re-read before each commit: another owner's token stops it."""
    run = RunDir("mock:///runs/shared")
    log = GameLog(run)
    row = {
        "task_id": "t",
        "episode_id": "e",
        "level": 1,
        "domain": "d",
        "reward": 1,
        "success": True,
    }
    with RunLock(run) as lock:
        part = log.write_part("evals", 0, [row])
        log.commit(0, {"evals": part}, {"evals": 1}, {}, owner=lock)
        other = LockInfo("elsewhere", 7, time.time(), time.time(), "someone-else")
        run.write_bytes(other.dump(), LOCK_NAME)
        part = log.write_part("evals", 1, [row])
        with pytest.raises(
            LogError, match=r"no longer this run's to write.*pid 7 on host elsewhere"
        ):
            log.commit(1, {"evals": part}, {"evals": 1}, {}, owner=lock)
    assert log.last_generation() == 0, "generation 1 was not committed"
    assert read_lock(run).token == "someone-else", "the other writer's lease is left alone"
    with pytest.raises(LogError, match="pid 7 on host elsewhere"):
        RunLock(run).acquire()


# ---- damage ----------------------------------------------------------------------------


@pytest.fixture
def finished(finished_small_run) -> Path:
    """A finished run of three generations (made once per session; tests copy it)."""
    return finished_small_run


@pytest.fixture
def run(finished, tmp_path) -> Path:
    """A copy of the finished run, to damage."""
    copy = tmp_path / "run"
    shutil.copytree(finished, copy)
    return copy


def _tables(run: Path) -> dict[str, list[dict]]:
    log = GameLog(str(run))
    return {name: log.read(name).to_pylist() for name in ("generations", "episodes", "tasks")}


def test_manifests_record_size_checksum_and_rows_of_every_file(run) -> None:
    """Every part and checkpoint file a manifest commits has its size and sha256 there; rows per part."""
    import hashlib

    for manifest in GameLog(str(run)).manifests():
        files = manifest["files"]
        assert set(files) == {
            *manifest["parts"].values(),
            *(f"{manifest['checkpoint']}/{n}" for n in manifest["checkpoint_files"].values() if n),
        }
        for path, entry in files.items():
            data = (run / path).read_bytes()
            assert entry == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        assert set(manifest["rows"]) == set(manifest["parts"])


def test_a_truncated_part_stops_resume_and_the_readers_with_one_line(run, tmp_path, capsys) -> None:
    """`truncate -s 100` of a committed part: resume adds nothing; analyze, export and report exit 2 naming it."""
    part = run / "log" / "episodes" / "gen=1" / "part-0.parquet"
    size = part.stat().st_size
    os.truncate(part, 100)
    recorded = json.loads((run / "experiment.json").read_text())
    recorded["run"]["generations"] = 5  # resume would add generations, if it went on
    (run / "experiment.json").write_text(json.dumps(recorded))
    before = _manifests(run)
    assert main(["resume", str(run)]) == 2
    line = _one_line(capsys.readouterr().err, "resume")
    assert "generation 1" in line and "log/episodes/gen=1/part-0.parquet is truncated" in line
    assert f"(100 of {size} bytes)" in line and "coevo doctor" in line
    assert _manifests(run) == before, "no generation added"
    for command, argv in (
        ("analyze", ["analyze", str(run)]),
        ("export", ["export", str(run), "--out", str(tmp_path / "export")]),
        ("report", ["report", str(run), "--out", str(tmp_path / "report.html")]),
    ):
        assert main(argv) == 2, command
        line = _one_line(capsys.readouterr().err, command)
        assert "generation 1" in line and "gen=1/part-0.parquet is truncated" in line, line


def test_resume_of_a_finished_run_says_its_damage(run, capsys) -> None:
    """A finished run with a truncated part: `coevo resume` exits 2 naming the part (not "nothing to resume" and a summary)."""
    os.truncate(run / "log" / "episodes" / "gen=1" / "part-0.parquet", 100)
    assert main(["resume", str(run)]) == 2
    err = capsys.readouterr().err
    line = _one_line(err, "resume")
    assert "generation 1" in line and "log/episodes/gen=1/part-0.parquet is truncated" in line
    assert "coevo doctor" in line and "nothing to resume" not in err


def test_a_checkpoint_that_fails_its_checksum_stops_resume(run, capsys) -> None:
    """Bytes changed in place (same size) in the checkpoint resume loads: exit 2, naming the file and the checksum."""
    state = run / "checkpoints" / "gen=2" / "world_model.state"
    data = bytearray(state.read_bytes())
    data[-1] ^= 0xFF
    state.write_bytes(bytes(data))
    recorded = json.loads((run / "experiment.json").read_text())
    recorded["run"]["generations"] = 4
    (run / "experiment.json").write_text(json.dumps(recorded))
    assert main(["resume", str(run)]) == 2
    line = _one_line(capsys.readouterr().err, "resume")
    assert (
        "generation 2" in line and "checkpoints/gen=2/world_model.state fails its checksum" in line
    )
    assert len(_manifests(run)) == 3


def test_doctor_finds_damage_and_repair_truncates_to_what_resume_replays(
    run, finished, capsys
) -> None:
    """doctor exits 1 naming the damage; --repair keeps generation 0 and tidies; resume then writes the same log."""
    os.truncate(run / "log" / "tasks" / "gen=1" / "part-0.parquet", 100)
    (run / "checkpoints" / "gen=2" / "state.json").write_text("{}")
    orphan = run / "log" / "episodes" / "gen=3" / "part-0.parquet"
    orphan.parent.mkdir()
    orphan.write_bytes(b"half written")
    _plant_lock(run, pid=_dead_pid())
    assert main(["doctor", str(run)]) == 1
    out = capsys.readouterr().out
    assert "generation 1: log/tasks/gen=1/part-0.parquet is truncated" in out
    assert "generation 2: checkpoints/gen=2/state.json is truncated (2 of" in out
    assert "log/episodes/gen=3/part-0.parquet" in out and "1 orphan files" in out
    assert "stale: its holder" in out and "no longer running" in out
    found = diagnose(str(run))
    assert (found.committed, found.intact, sorted(found.damage)) == (3, 1, [1, 2])
    assert main(["doctor", str(run), "--repair"]) == 0
    out = capsys.readouterr().out
    assert "repaired: cleared the stale lock" in out
    assert "repaired: removed generations 1–2" in out and "ends at generation 0" in out
    assert "repaired: removed 1 orphan files" in out
    assert _manifests(run) == ["gen=000000.json"]
    assert not (run / "checkpoints" / "gen=1").exists() and not orphan.exists()
    assert not (run / LOCK_NAME).exists()
    assert main(["doctor", str(run)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("intact")
    assert main(["resume", str(run)]) == 0
    assert _tables(run) == _tables(finished), "the repaired run resumes to the log it had"


def test_raising_generations_then_resume_extends_a_finished_run(run, capsys) -> None:
    """A finished run, `run.generations` raised in experiment.json: resume adds the new generations, after a dead holder's lock (taken over, and said in events.jsonl)."""
    recorded = json.loads((run / "experiment.json").read_text())
    recorded["run"]["generations"] = 4
    (run / "experiment.json").write_text(json.dumps(recorded))
    _plant_lock(run, pid=_dead_pid())
    assert main(["resume", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["generations"] == 4
    assert [r["gen"] for r in _tables(run)["generations"]] == [0, 1, 2, 3]
    assert not (run / LOCK_NAME).exists()
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    (taken,) = [e for e in events if e["event"] == "lock_taken_over"]
    assert "no longer running" in taken["why"], "the stale lock taken over is in the run's events"


def test_old_checkpoints_are_pruned_the_log_kept_whole_and_doctor_tells_pruned_from_damaged(
    run, capsys
) -> None:
    """run.keep_checkpoints = 2 over 5 generations: gens 0–2 keep only PRUNED, the log reads whole, doctor says intact; a repair back to a pruned generation says it cannot resume."""
    recorded = json.loads((run / "experiment.json").read_text())
    recorded["run"].update(generations=5, keep_checkpoints=2)
    (run / "experiment.json").write_text(json.dumps(recorded))
    assert main(["resume", str(run)]) == 0
    for gen in range(5):
        files = sorted(p.name for p in (run / "checkpoints" / f"gen={gen}").iterdir())
        assert (files == ["PRUNED"]) == (gen <= 2), (gen, files)
    assert [r["gen"] for r in _tables(run)["generations"]] == [0, 1, 2, 3, 4]
    capsys.readouterr()
    assert main(["doctor", str(run)]) == 0
    out = capsys.readouterr().out
    assert "generations 0–2 keep no checkpoint" in out and out.rstrip().endswith("intact")
    part = run / "log" / "episodes" / "gen=3" / "part-0.parquet"
    part.write_bytes(part.read_bytes()[:100])  # generation 3 damaged: the repair cuts back to 2
    assert main(["doctor", str(run)]) == 1
    assert "whose checkpoint was pruned" in capsys.readouterr().out
    assert main(["doctor", str(run), "--repair"]) == 0
    capsys.readouterr()
    assert main(["resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert "generation 2 of" in err and "keeps no checkpoint" in err and "coevo run" in err


# ---- no code from a run directory --------------------------------------------------------


class _Payload:
    """A pickle that, when loaded, creates ``marker`` (as an attacker's would run a command)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


@pytest.mark.parametrize(
    ("planted", "rewrite_manifest"),
    [("every file", False), ("every file", True), ("role states", True)],
)
def test_planted_pickles_in_a_checkpoint_never_run(
    run, tmp_path, capsys, planted: str, rewrite_manifest: bool
) -> None:
    """Checkpoint files replaced by a malicious pickle (the manifest's checksums forged, or not):
    resume stops with one line naming the file and the way out; analyze, export and report read
    the log only; the pickle never runs (on the driver or in a role's actor)."""
    marker = tmp_path / "pwned"
    checkpoint = run / "checkpoints" / "gen=2"
    assert {f.name for f in checkpoint.iterdir()} == {
        "solver.state",
        "world_model.state",
        "state.json",
    }
    files = sorted(
        f for f in checkpoint.iterdir() if planted == "every file" or f.suffix == ".state"
    )
    for file in files:
        file.write_bytes(pickle.dumps(_Payload(marker)))
    if rewrite_manifest:  # an attacker can recompute the checksums: they guard against damage only
        import hashlib

        path = run / "log" / "_manifests" / "gen=000002.json"
        manifest = json.loads(path.read_text())
        for file in files:
            data = file.read_bytes()
            manifest["files"][f"checkpoints/gen=2/{file.name}"] = {
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        path.write_text(json.dumps(manifest))
    recorded = json.loads((run / "experiment.json").read_text())
    recorded["run"]["generations"] = 4
    (run / "experiment.json").write_text(json.dumps(recorded))
    assert main(["resume", str(run)]) == 2
    line = _one_line(capsys.readouterr().err, "resume")
    assert "checkpoints/gen=2/" in line
    if rewrite_manifest:
        name = "state.json" if planted == "every file" else "solver.state"
        assert f"checkpoints/gen=2/{name}" in line
        assert "coevo never runs code from a run directory" in line
        assert "curriculum can be rebuilt from this log" in line and "coevo run" in line
    else:  # the pickles are not the files the manifest committed
        assert "generation 2 of" in line and "is damaged: checkpoints/gen=2/" in line
    assert len(_manifests(run)) == 3
    assert main(["analyze", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["generations"] == 3
    assert main(["export", str(run), "--out", str(tmp_path / "export")]) == 0
    assert main(["report", str(run), "--out", str(tmp_path / "report.html")]) == 0
    assert main(["doctor", str(run)]) == (0 if rewrite_manifest else 1)
    assert not marker.exists(), "a pickle from the run directory was loaded"
