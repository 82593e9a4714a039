"""Tracking: each generation's metrics in TensorBoard and MLflow, read back with their own readers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from coevo.arena.errors import ExperimentError
from coevo.arena.gamelog import (
    EpisodeRow,
    EvalRow,
    GameLog,
    GenerationRecord,
    GenerationRow,
    PredictionRow,
    TaskRow,
    UpdateRow,
    UsageRow,
    VerdictRow,
)
from coevo.run.experiment import Experiment, load_experiment, recorded_experiment
from coevo.run.loop import GenerationReport
from coevo.run.tracking import (
    METRICS,
    RECORD,
    Tracking,
    TrackingConfig,
    generation_metrics,
)
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.conftest import SMALL_RUN

ROOT = Path(__file__).resolve().parents[2]


def _isolate_mlflow(patch: pytest.MonkeyPatch) -> None:
    """MLflow talks to the run's own file store only: no server from the environment, no telemetry."""
    patch.delenv("MLFLOW_TRACKING_URI", raising=False)
    patch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    # unset while the test runs (Tracking sets it for its file store), as it was afterwards
    patch.setenv("MLFLOW_ALLOW_FILE_STORE", "")
    patch.delenv("MLFLOW_ALLOW_FILE_STORE")


@pytest.fixture(autouse=True)
def _no_outside_mlflow(monkeypatch):
    _isolate_mlflow(monkeypatch)


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _history(uri: str, run_id: str, key: str) -> dict[int, float]:
    return {m.step: m.value for m in _client(uri).get_metric_history(run_id, key)}


def _scalars(logdir: Path) -> EventAccumulator:
    accumulator = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "images": 0})
    accumulator.Reload()
    return accumulator


def _events(run_dir: Path, name: str) -> list[dict[str, Any]]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


# ---- the [tracking] table --------------------------------------------------------------------


def test_tracking_is_off_by_default(tmp_path):
    """An experiment without [tracking] sends nothing, and an old experiment.json reads as one without it."""
    assert not Experiment().tracking.enabled
    assert not load_experiment({}).tracking.enabled
    record = json.loads(Experiment().model_dump_json())
    del record["tracking"]  # written before the table existed
    (tmp_path / "experiment.json").write_text(json.dumps(record))
    assert recorded_experiment(str(tmp_path)).tracking == TrackingConfig()
    tracking = Tracking(Experiment(), str(tmp_path / "run"), resume=False, events=print)
    tracking.start()
    tracking(GenerationReport(gen=0, row={}, seconds=1.0, episodes_per_second=1.0))
    assert not tracking.enabled and tracking.close() == {} and tracking.summary_lines() == []
    assert not (tmp_path / "run").exists()


def test_a_misspelt_tracking_key_gets_did_you_mean():
    """An unknown key of [tracking] or [tracking.mlflow] is named, with the closest known one."""
    with pytest.raises(ExperimentError, match=r"did you mean 'tracking\.tensorboard'"):
        load_experiment({"tracking": {"tensorbord": True}})
    with pytest.raises(ExperimentError, match=r"did you mean 'tracking\.mlflow\.experiment'"):
        load_experiment({"tracking": {"mlflow": {"experiement": "x"}}})
    with pytest.raises(ExperimentError, match=r"tracking\.mlflow: .*true, false, the uri as text"):
        load_experiment({"tracking": {"mlflow": 3}})


def test_the_shorthands_turn_a_tracker_on_and_survive_experiment_json():
    """`true`, a string and a table each turn a tracker on; the record reads back the same."""
    tracking = load_experiment(
        {"tracking": {"tensorboard": "tb/run", "mlflow": {"experiment": "sweep"}}}
    ).tracking
    assert tracking.tensorboard.enabled and tracking.tensorboard.logdir == "tb/run"
    assert tracking.mlflow.enabled and tracking.mlflow.experiment == "sweep"
    assert load_experiment({"tracking": {"mlflow": "http://mlflow:5000"}}).tracking.mlflow.uri == (
        "http://mlflow:5000"
    )
    off = load_experiment({"tracking": {"mlflow": {"enabled": False, "uri": "x"}}}).tracking
    assert not off.enabled
    again = TrackingConfig.model_validate(json.loads(tracking.model_dump_json()))
    assert again == tracking


def test_a_missing_package_stops_the_run_before_it_starts(monkeypatch, tmp_path):
    """A tracker whose package is not installed is an error that says how to install it."""
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if mlflow were not installed
    experiment = load_experiment({"tracking": {"mlflow": True}})
    with pytest.raises(ExperimentError, match=r"pip install 'coevo\[tracking\]'"):
        Tracking(experiment, str(tmp_path / "run"), resume=False, events=lambda *a, **k: None)
    assert not (tmp_path / "run").exists()


def test_coevo_run_with_a_missing_tracker_stops_before_the_run_directory_or_ray(
    monkeypatch, tmp_path, capsys
):
    """`coevo run` whose [tracking] needs a package that is missing: exit 2, the pip command, no run directory, no Ray."""
    import ray
    from coevo.run.cli import main

    monkeypatch.setitem(sys.modules, "mlflow", None)
    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray was started"))
    toml = tmp_path / "t.toml"
    toml.write_text("[run]\ngenerations = 1\n[tracking]\nmlflow = true\n")
    assert main(["run", str(toml), "--out", str(tmp_path / "run")]) == 2
    assert "pip install 'coevo[tracking]'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_run_directory_elsewhere_needs_its_destinations_named():
    """On an object store there is no default TensorBoard directory: the error says which key to set."""
    experiment = load_experiment({"tracking": {"tensorboard": True}})
    with pytest.raises(ExperimentError, match=r"set tracking\.tensorboard\.logdir"):
        Tracking(experiment, "s3://bucket/run", resume=False, events=lambda *a, **k: None)


def test_every_metric_is_documented():
    """docs/tracking.md names every metric of METRICS."""
    page = (ROOT / "docs" / "tracking.md").read_text()
    assert [name for name in METRICS if f"`{name}`" not in page] == []


# ---- a game log written by hand (no Ray) -----------------------------------------------------


def _task(task_id: str, level: int, world: str, family: str = "question") -> TaskRow:
    return TaskRow(
        task_id=task_id,
        world_id=world,
        source="fresh",
        level=level,
        family=family,
        domain="retail",
        parent=None,
        operator=None,
        spec="{}",
    )


def _verdict(task_id: str, failed: list[str]) -> VerdictRow:
    return VerdictRow(
        task_id=task_id,
        accepted=not failed,
        failed=failed,
        checks="{}",
        solve_calls=None,
        error=None,
    )


def _episode(n: int, gen: int, task_id: str, purpose: str, reward: int) -> EpisodeRow:
    return EpisodeRow(
        episode_id=f"ep-{gen}-{n}",
        task_id=task_id,
        purpose=purpose,
        solver=f"s@{gen}",
        seed=n,
        reward=reward,
        steps=1,
        truncated=False,
        calls="[]",
        reason="",
        failure=None,
    )


def _commit(run_dir: Path, gen: int) -> GenerationRecord:
    """Generation ``gen`` of a small log: two tasks (levels 1 and 2), one rejected; gen 1 retrains gen 0's."""
    record = GenerationRecord(gen)
    a, b, c = f"t{gen}a", f"t{gen}b", f"t{gen}c"
    record.tasks = [_task(a, 1, "w1"), _task(b, 2, "w2", "action"), _task(c, 1, "w1")]
    record.verdicts = [_verdict(a, []), _verdict(b, []), _verdict(c, ["solvable", "valid"])]
    trained = [a, b] if gen == 0 else ["t0a", "t0b"]  # earlier tasks: their levels come from gen 0
    rewards = [1, 1, 0, 1]
    record.episodes = [
        _episode(i, gen, trained[i // 2], "train", r) for i, r in enumerate(rewards)
    ] + [_episode(9, gen, "e1", "eval", 1), _episode(10, gen, "e2", "eval", 0)]
    record.evals = [
        EvalRow(
            task_id="e1", episode_id=f"ep-{gen}-9", level=1, domain="retail", reward=1, success=True
        ),
        EvalRow(
            task_id="e2",
            episode_id=f"ep-{gen}-10",
            level=3,
            domain="retail",
            reward=0,
            success=False,
        ),
    ]
    record.predictions = [PredictionRow(task_id=t, version=f"s@{gen}", p=0.75) for t in (a, b)]
    record.updates = [
        UpdateRow(
            version=f"s@{gen}", episodes=4, loss=0.5 + gen, success=0.75, entropy=None, skipped=0
        )
    ]
    record.usage = [
        UsageRow(role="solver", task_id=a, calls=2, input_tokens=100, output_tokens=10,
                 cache_write_tokens=0, cache_read_tokens=0, dollars=0.25),
        UsageRow(role="judge", task_id=None, calls=1, input_tokens=50, output_tokens=5,
                 cache_write_tokens=0, cache_read_tokens=0, dollars=0.125),
    ]  # fmt: skip
    record.generations = [
        GenerationRow(
            proposed=3,
            accepted=2,
            rejected=1,
            mutations=0,
            trained_tasks=2,
            train_episodes=4,
            train_success=0.75,
            eval_success=0.5,
            frontier=1.0 + gen,
            accepted_level=1.5,
            trained_level=1.5,
            brier=0.125,
            version=f"s@{gen}",
            rejections=json.dumps({"solvable": 1, "valid": 1}),
            failures=0,
        )
    ]
    log = GameLog(str(run_dir))
    parts = log.write(record)
    log.commit(gen, parts, {name: len(rows) for name, rows in record.tables()}, {})
    return record


def _report(gen: int) -> GenerationReport:
    return GenerationReport(
        gen=gen, row={}, seconds=2.5, episodes_per_second=8.0, phases={"solve": 0.5}
    )


def test_a_generations_metrics_come_from_its_rows(tmp_path):
    """Success by level joins episodes to the levels of earlier tasks; rejections count every check."""
    _commit(tmp_path, 0)
    _commit(tmp_path, 1)
    metrics = generation_metrics(GameLog(str(tmp_path)), 1)
    assert metrics["train/success"] == 0.75 and metrics["curriculum/frontier"] == 2.0
    assert metrics["train/success_level_1"] == 1.0  # t0a, level 1, from generation 0's tasks
    assert metrics["train/success_level_2"] == 0.5
    assert metrics["eval/success_level_1"] == 1.0 and metrics["eval/success_level_3"] == 0.0
    assert metrics["rejections/solvable"] == 1.0 and metrics["rejections/valid"] == 1.0
    assert (metrics["pool/worlds"], metrics["pool/domains"], metrics["pool/families"]) == (2, 1, 2)
    assert metrics["proposals/acceptance_rate"] == pytest.approx(2 / 3)
    assert metrics["calibration/brier"] == 0.125 and "calibration/ece" not in metrics  # no fresh
    assert metrics["learner/loss"] == 1.5 and "learner/entropy" not in metrics
    assert metrics["spend/tokens"] == 165 and metrics["spend/dollars"] == 0.375
    assert metrics["spend/solver/dollars"] == 0.25 and metrics["spend/calls"] == 3
    assert generation_metrics(GameLog(str(tmp_path)), 0)["calibration/ece"] == pytest.approx(0.0)


def test_a_resumed_run_continues_the_same_mlflow_run_and_tensorboard_directory(tmp_path):
    """A second session (a resume) adds to the recorded MLflow run and event directory, and first sends what the first had not."""
    run_dir = tmp_path / "run"
    experiment = load_experiment(
        {
            "run": {"name": "handmade"},
            "tracking": {"tensorboard": True, "mlflow": True, "figures": False},
        }
    )
    events: list[tuple[str, dict[str, Any]]] = []

    def record(name: str, **fields: Any) -> None:
        events.append((name, fields))

    first = Tracking(experiment, str(run_dir), resume=False, events=record)
    first.start()
    _commit(run_dir, 0)
    first(_report(0))
    _commit(run_dir, 1)  # committed, but the driver dies before its report reaches the trackers
    assert first.close(KeyboardInterrupt()) == {}
    saved = json.loads((run_dir / RECORD).read_text())
    assert saved["mlflow"]["next_gen"] == 1 and saved["tensorboard"]["next_gen"] == 1
    uri, run_id = saved["mlflow"]["uri"], saved["mlflow"]["run_id"]
    assert _client(uri).get_run(run_id).info.status == "KILLED"

    second = Tracking(experiment, str(run_dir), resume=True, events=record)
    second.start()
    _commit(run_dir, 2)
    second(_report(2))
    assert second.close() == {} and events == []

    assert json.loads((run_dir / RECORD).read_text())["mlflow"]["run_id"] == run_id
    client = _client(uri)
    (only,) = client.search_runs([client.get_experiment_by_name("handmade").experiment_id])
    assert only.info.run_id == run_id and only.info.status == "FINISHED"
    assert _history(uri, run_id, "curriculum/frontier") == {0: 1.0, 1: 2.0, 2: 3.0}
    assert set(_history(uri, run_id, "throughput/seconds")) == {0, 2}  # gen 1 came from the log
    assert only.data.params["run.name"] == "handmade"
    board = _scalars(run_dir / "tensorboard")
    assert [e.step for e in board.Scalars("curriculum/frontier")] == [0, 1, 2]
    assert len(list((run_dir / "tensorboard").glob("events.out.tfevents.*"))) == 2


def test_a_tracker_that_raises_is_dropped_and_the_other_goes_on(tmp_path):
    """A TensorBoard directory under a regular file fails once, is reported, and MLflow still gets every generation."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    run_dir = tmp_path / "run"
    experiment = load_experiment(
        {"tracking": {"tensorboard": str(blocker / "tb"), "mlflow": True, "figures": False}}
    )
    events: list[tuple[str, dict[str, Any]]] = []
    tracking = Tracking(
        experiment, str(run_dir), resume=False, events=lambda name, **f: events.append((name, f))
    )
    tracking.start()
    for gen in range(2):
        _commit(run_dir, gen)
        tracking(_report(gen))
    failed = tracking.close()
    assert list(failed) == ["tensorboard"] and "NotADirectoryError" in failed["tensorboard"]
    assert events == [
        ("tracking_failed", {"tracker": "tensorboard", "error": failed["tensorboard"]})
    ]
    saved = json.loads((run_dir / RECORD).read_text())
    uri, run_id = saved["mlflow"]["uri"], saved["mlflow"]["run_id"]
    assert _history(uri, run_id, "train/success") == {0: 0.75, 1: 0.75}
    assert any("tensorboard failed" in line for line in tracking.summary_lines())


# ---- whole runs on Ray, through the command line ---------------------------------------------

TRACKED = SMALL_RUN.replace("generations = 3", "generations = 2").replace(
    'name = "uniform"',
    'name = "target-band"',  # a curriculum with a frontier to send
)


def _run(tmp_path: Path, name: str, tracking: str) -> tuple[int, Path]:
    from coevo.run.cli import main

    toml = tmp_path / f"{name}.toml"
    toml.write_text(TRACKED + tracking)
    run_dir = tmp_path / name
    return main(["run", str(toml), "--out", str(run_dir)]), run_dir


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory):
    """Two generations of the small experiment, sent to TensorBoard and to MLflow (a file store)."""
    with pytest.MonkeyPatch.context() as patch:
        _isolate_mlflow(patch)
        status, run_dir = _run(
            tmp_path_factory.mktemp("tracked"),
            "tracked",
            '[tracking]\ntensorboard = true\nmlflow = { experiment = "tiny-tracked" }\n',
        )
    return status, run_dir


@pytest.mark.slow
def test_a_tracked_run_sends_each_generation_to_tensorboard_and_mlflow(tracked_run):
    """The metrics MLflow and TensorBoard read back equal the log's `generations` rows; the figures follow."""
    status, run_dir = tracked_run
    assert status == 0
    rows = GameLog(str(run_dir)).read("generations").to_pylist()
    assert [r["gen"] for r in rows] == [0, 1]
    saved = json.loads((run_dir / RECORD).read_text())
    uri, run_id = saved["mlflow"]["uri"], saved["mlflow"]["run_id"]
    assert uri == (run_dir / "mlruns").resolve().as_uri()
    run = _client(uri).get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.params["run.seed"] == "5"
    board = _scalars(run_dir / "tensorboard")
    for name, column in (
        ("train/success", "train_success"),
        ("eval/success", "eval_success"),
        ("curriculum/frontier", "frontier"),
        ("proposals/accepted", "accepted"),
        ("calibration/brier", "brier"),
    ):
        expected = {r["gen"]: r[column] for r in rows if r[column] is not None}
        assert expected, f"the tiny run should fill {column}"
        assert _history(uri, run_id, name) == pytest.approx(expected), name
        in_board = {e.step: e.value for e in board.Scalars(name)}
        assert in_board == pytest.approx(expected, rel=1e-6), name  # TensorBoard keeps float32
    for row in rows:
        for check, count in json.loads(row["rejections"]).items():
            assert _history(uri, run_id, f"rejections/{check}")[row["gen"]] == count
    assert set(_history(uri, run_id, "eval/success_level_1")) == {0, 1}
    assert set(_history(uri, run_id, "throughput/episodes_per_second")) == {0, 1}
    artifacts = {a.path for a in _client(uri).list_artifacts(run_id, "report")}
    assert {"report/report.html", "report/success.png", "report/calibration.png"} <= artifacts
    assert "figures/success" in board.Tags()["images"]


@pytest.mark.slow
def test_trackers_that_fail_leave_the_run_and_its_log_unchanged(tracked_run, tmp_path, capsys):
    """With both trackers failing, the run exits 0 with the same log, a tracking_failed event each, and a summary line."""
    _, reference = tracked_run
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    status, run_dir = _run(
        tmp_path,
        "failing",
        f'[tracking]\ntensorboard = "{blocker / "tb"}"\nmlflow = "{(blocker / "mlruns").as_uri()}"\n',
    )
    assert status == 0
    for table in ("generations", "episodes", "verdicts"):
        mine = GameLog(str(run_dir)).read(table).to_pylist()
        assert mine == GameLog(str(reference)).read(table).to_pylist(), table
    failed = {e["tracker"]: e["error"] for e in _events(run_dir, "tracking_failed")}
    assert set(failed) == {"tensorboard", "mlflow"}
    (finished,) = _events(run_dir, "run_finished")
    assert finished["tracking_failed"] == failed
    err = capsys.readouterr().err
    assert "tracking: mlflow failed and the run went on without it" in err


def test_an_override_adds_to_a_trackers_short_form(tmp_path):
    """`mlflow = "URI"` in the file and `--set tracking.mlflow.experiment=x`: the URI stays, the experiment is added."""
    toml = tmp_path / "t.toml"
    toml.write_text('[tracking]\nmlflow = "http://mlflow.internal:5000"\ntensorboard = "tb/x"\n')
    experiment = load_experiment(
        str(toml), ["tracking.mlflow.experiment=sweep", "tracking.tensorboard.enabled=false"]
    )
    assert experiment.tracking.mlflow.uri == "http://mlflow.internal:5000"
    assert experiment.tracking.mlflow.experiment == "sweep"
    assert experiment.tracking.tensorboard.logdir == "tb/x"
    assert not experiment.tracking.tensorboard.enabled
