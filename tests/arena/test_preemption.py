"""Runs on shared machines: SIGTERM stops a run as Ctrl-C does, and a second run into a locked directory is refused at once.

The SIGTERM tests send a real signal to a real ``coevo run`` (a process of
its own, in process and on Ray) once its first generation has committed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from coevo.arena.gamelog import GameLog, RunDir, RunLock

from tests.conftest import SMALL_RUN
from tests.factories import run_cli

COEVO = Path(sys.executable).with_name("coevo")
GENERATIONS = 40


def _tiny(tmp_path: Path, *, on_ray: bool = False) -> Path:
    toml = tmp_path / "tiny.toml"
    text = SMALL_RUN.replace("generations = 3", f"generations = {GENERATIONS}")
    if on_ray:
        text = text.replace("[ray]\nin_process = true\n", "")
    toml.write_text(text)
    return toml


def _started(toml: Path, run: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(COEVO), "run", str(toml), "--out", str(run)],
        cwd=toml.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")},
    )


def _after_first_commit(process: subprocess.Popen[str], run: Path) -> None:
    """Wait until generation 0 is committed (its manifest written), the run still going."""
    deadline = time.monotonic() + 240  # a hung run fails the test rather than the suite
    while GameLog(str(run)).last_generation() < 0:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no generation committed"
        time.sleep(0.1)


def _assert_stopped_cleanly(status: int, err: str, run: Path) -> int:
    """Exit 143, one line naming `coevo resume`, no signal dump, the lock given back; returns the committed generations."""
    assert status == 143, err
    assert "AbslFailureSignalHandler" not in err and "PC: @" not in err, err
    assert "Traceback" not in err, err
    committed = GameLog(str(run)).last_generation() + 1
    assert 1 <= committed < GENERATIONS, err
    said = [line for line in err.splitlines() if "coevo resume" in line]
    assert said == [
        f"coevo run: stopped by SIGTERM after {committed} of {GENERATIONS} generations "
        f"(all committed); continue with `coevo resume {run}`"
    ], err
    assert not (run / "run.lock").exists()
    return committed


def _resumes(run: Path, committed: int) -> None:
    """`coevo resume` continues after the last committed generation and ends (shortened to one more, in this process)."""
    done = run_cli(
        "resume",
        str(run),
        *("--set", f"run.generations={committed + 1}"),
        *("--set", "ray.in_process=true"),
    )
    assert done.returncode == 0, done.stderr
    assert GameLog(str(run)).last_generation() == committed
    GameLog(str(run)).verify(checksum=True)


@pytest.mark.slow
def test_sigterm_stops_an_in_process_run_at_a_commit_and_it_resumes(tmp_path) -> None:
    """SIGTERM after the first commit: the generation in flight commits, exit 143, one line naming `coevo resume`, the lock released; resume completes."""
    run = tmp_path / "run"
    process = _started(_tiny(tmp_path), run)
    _after_first_commit(process, run)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    committed = _assert_stopped_cleanly(process.returncode, err, run)
    assert "SIGTERM: stopping once the generation in flight commits" in err
    starting = err[: err.index("ready in")]  # what was starting, as it started
    for role in ("synthesizer 'procedural'", "judge", "solver 'linear-pg'", "world model 'irt'"):
        assert f"starting the {role}" in starting, err
    _resumes(run, committed)


@pytest.mark.slow
def test_sigterm_stops_a_run_on_ray_without_rays_signal_dump(tmp_path) -> None:
    """On a local Ray of its own (whose ray.init installs a SIGTERM handler): the same clean stop, no C++ stack dump, the lock released; resume completes.

    Ray's token warning appears nowhere either: `coevo run` keeps token authentication by saying so.
    """
    run = tmp_path / "run"
    process = _started(_tiny(tmp_path, on_ray=True), run)
    _after_first_commit(process, run)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=180)
    assert "Token authentication is enabled" not in out + err
    committed = _assert_stopped_cleanly(process.returncode, err, run)
    # what was starting, as it started (not seconds of silence before "ready")
    starting = err[: err.index("ready in")]
    assert "Ray up in" in starting, err
    for role in ("synthesizer", "judge", "solver", "learner", "world model"):
        assert f"starting 1 {role} actor" in starting and f"{role}: 1/1 up" in starting, err
    _resumes(run, committed)


@pytest.mark.slow
def test_a_second_sigterm_ends_the_run_at_once_with_the_log_intact(tmp_path) -> None:
    """Two SIGTERMs: the run ends at once (exit 143), the lock given back, the committed generations readable, and resume works."""
    run = tmp_path / "run"
    toml = _tiny(tmp_path)
    toml.write_text(toml.read_text().replace('name = "tiny"', 'name = "tiny"\nstop_grace = 600'))
    process = _started(toml, run)
    _after_first_commit(process, run)
    process.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    assert "stopped at once (a second SIGTERM)" in err and f"coevo resume {run}" in err, err
    assert not (run / "run.lock").exists()
    committed = GameLog(str(run)).last_generation() + 1
    GameLog(str(run)).verify(checksum=True)
    _resumes(run, committed)


@pytest.mark.slow
def test_the_grace_time_passing_ends_the_run_at_once(tmp_path) -> None:
    """With run.stop_grace = 0 a SIGTERM ends the run at once: exit 143, the reason said, the log intact."""
    run = tmp_path / "run"
    toml = _tiny(tmp_path)
    toml.write_text(toml.read_text().replace('name = "tiny"', 'name = "tiny"\nstop_grace = 0'))
    process = _started(toml, run)
    _after_first_commit(process, run)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    assert "stopped at once (the grace time (0 s) passed)" in err, err
    GameLog(str(run)).verify(checksum=True)
    _resumes(run, GameLog(str(run)).last_generation() + 1)


SECOND_SIGTERM_WHILE_ENDING = """
import os, signal, time
from coevo.run.driver.stopping import Terminated, stop_on_sigterm

class Lock:
    def release(self):
        pass

try:
    with stop_on_sigterm(600, Lock(), "RUN"):
        os.kill(os.getpid(), signal.SIGTERM)  # before the generations begin: stops at once
except Terminated:
    print("stopped by the first", flush=True)
os.kill(os.getpid(), signal.SIGTERM)  # the second, while the process is ending
time.sleep(30)
"""


def test_a_second_sigterm_after_the_run_stopped_still_exits_143() -> None:
    """A second SIGTERM that comes after the first one's stop (the process still ending) exits 143 with the line naming `coevo resume`, not killed by the signal (-15)."""
    done = subprocess.run(
        [sys.executable, "-c", SECOND_SIGTERM_WHILE_ENDING],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "stopped by the first", done.stderr
    assert done.returncode == 143, done.stderr
    assert "stopped at once (a second SIGTERM)" in done.stderr and "coevo resume RUN" in done.stderr


def test_a_second_run_into_a_locked_directory_is_refused_before_ray_or_the_loop_load(
    tmp_path,
) -> None:
    """`coevo run` into a directory another run holds stops at the lock, naming the holder, before Ray, the driver or the loop are imported."""
    toml = _tiny(tmp_path, on_ray=True)
    run = tmp_path / "run"
    code = (
        "import sys, time\n"
        "from coevo.run.cli import main\n"
        "began = time.perf_counter()\n"
        f"status = main(['run', {str(toml)!r}, '--out', {str(run)!r}])\n"
        "print(f'refused in {time.perf_counter() - began:.2f} s', file=sys.stderr)\n"
        "heavy = [m for m in ('ray', 'coevo.run.driver.driving', 'coevo.run.loop') if m in sys.modules]\n"
        "print(status, ','.join(heavy))\n"
    )
    with RunLock(RunDir(str(run))):
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
    print(done.stderr.splitlines()[-1])  # the time it took: a figure, not a test
    assert done.stdout.split() == ["2"], (done.stdout, done.stderr)
    assert f"is being written by another run: pid {os.getpid()}" in done.stderr
