"""`coevo resume RUN --set KEY=VALUE`: the keys that may change on resume change, the record says so; the others are refused with the reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from coevo.arena.examples import bundled
from coevo.arena.gamelog import GameLog

from tests.factories import run_cli


@pytest.fixture
def run(finished_small_run: Path, tmp_path: Path) -> Path:
    """A copy of a finished three-generation run (in process)."""
    copy = tmp_path / "run"
    shutil.copytree(finished_small_run, copy)
    return copy


def _events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def test_resume_set_generations_runs_longer_and_records_the_change(run: Path) -> None:
    """--set run.generations=4 on a finished 3-generation run plays one more; experiment.json and an event record the change."""
    done = run_cli("resume", str(run), "--set", "run.generations=4", "--set", "run.stop_grace=5")
    assert done.returncode == 0, done.stderr
    assert GameLog(str(run)).last_generation() == 3
    record = json.loads((run / "experiment.json").read_text())
    assert record["run"]["generations"] == 4 and record["run"]["stop_grace"] == 5
    (changed,) = [e for e in _events(run) if e["event"] == "experiment_changed"]
    assert changed["changes"] == {"run.generations": [3, 4], "run.stop_grace": [25.0, 5.0]}


def test_a_finished_run_points_at_resume_set(run: Path) -> None:
    """Resuming a finished run says how to run it longer: the --set to give, not a file to edit."""
    done = run_cli("resume", str(run))
    assert done.returncode == 0, done.stderr
    assert f"`coevo resume {run} --set run.generations=13`" in done.stderr


@pytest.mark.parametrize(
    "key", ["run.seed=3", "curriculum.name='plr'", "solver.config.lr=0.5", "run.rollouts=8"]
)
def test_resume_set_refuses_a_key_that_changes_the_logs_meaning(run: Path, key: str) -> None:
    """A key that changes what the log's generations mean is refused (exit 2) with why and the keys that may change; nothing is written."""
    before = (run / "experiment.json").read_bytes()
    done = run_cli("resume", str(run), "--set", "run.generations=5", "--set", key)
    assert done.returncode == 2, done.stderr
    name = key.split("=")[0]
    assert f"--set {name}: cannot change on resume" in done.stderr
    assert "the same seeds, roles and curriculum" in done.stderr
    assert "run.generations (how far the run goes)" in done.stderr
    assert (run / "experiment.json").read_bytes() == before
    assert GameLog(str(run)).last_generation() == 2


def test_resume_set_checks_the_value(run: Path) -> None:
    """A value the key cannot take is refused as `coevo run --set` refuses it, naming the override."""
    done = run_cli("resume", str(run), "--set", "run.generations=0")
    assert done.returncode == 2, done.stderr
    assert "--set run.generations=0" in done.stderr and "generations" in done.stderr


@pytest.mark.parametrize("name", [b.name for b in bundled() if b.kind == "experiment"])
def test_every_bundled_experiment_takes_resume_set_as_recorded(name: str) -> None:
    """A bundled experiment as experiment.json records it, with resume's --set: only the keys set change."""
    from coevo.run.commands.runs import _resumed_with
    from coevo.run.experiment import load_experiment

    recorded = load_experiment(name)
    sets = ["run.stop_grace=3", "run.stop_after_failing=0"]
    if recorded.benchmark is None:  # a benchmark run's generations are its trials
        sets.append("run.generations=99")
    changed, changes = _resumed_with(recorded, sets, "RUN")
    assert {k: v[1] for k, v in changes.items()} == {
        k: float(v) if k == "run.stop_grace" else int(v) for k, v in (s.split("=") for s in sets)
    }
    assert changed.model_copy(update={"run": recorded.run}) == recorded
