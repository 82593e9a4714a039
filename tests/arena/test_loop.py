"""The co-evolution loop on Ray: a complete, deterministic log; resume; killed actors; failing roles."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from coevo.arena.gamelog import SCHEMAS, GameLog
from coevo.arena.gamelog.figures import training_groups
from coevo.run.experiment import load_experiment
from coevo.run.loop import ArenaError, resume_run, run_experiment

from tests.factories import run_cli


def experiment(**overrides: Any):
    """A small experiment, its roles in this process (``ray__in_process=False``: on Ray)."""
    base: dict[str, Any] = {
        "ray": {"in_process": True},
        "judge": {"config": {"isolate": False}},
        "run": {"seed": 11, "generations": 3, "rollouts": 2, "chunk": 8},
        "synthesizer": {"name": "procedural", "config": {"domains": ["retail"], "world_pool": 2}},
        "solver": {"name": "linear-pg", "actors": 2, "config": {"lr": 0.2}},
        "curriculum": {"name": "plr", "tasks_per_gen": 6, "min_fill": 4, "levels": [1, 2]},
        "eval": {"levels": [1, 2], "per_level": 3, "every": 2},
    }
    if "judge__name" in overrides:
        base["judge"] = {}  # isolation is the built-in Judge's setting
    for key, value in overrides.items():
        section, _, name = key.partition("__")
        base.setdefault(section, {})[name] = value
    return load_experiment(base)


def tables(run_dir) -> dict[str, list[dict]]:
    log = GameLog(str(run_dir))
    return {name: log.read(name).to_pylist() for name in SCHEMAS}


def test_a_run_writes_a_whole_log(tmp_path) -> None:
    """Contiguous generations, one generations row each, unique episode ids, counts as configured."""
    summary = run_experiment(experiment(), str(tmp_path / "run"))
    assert summary.generations == 3
    log = tables(tmp_path / "run")
    assert [r["gen"] for r in log["generations"]] == [0, 1, 2]
    episodes = log["episodes"]
    assert len({e["episode_id"] for e in episodes}) == len(episodes)
    for row in log["generations"]:
        train = [e for e in episodes if e["gen"] == row["gen"] and e["purpose"] == "train"]
        assert len(train) == row["train_episodes"] == row["trained_tasks"] * 2
        assert row["trained_tasks"] == 6
    evals = log["evals"]
    assert {r["gen"] for r in evals} == {0, 2}  # every 2 generations and after the last
    assert all(isinstance(r["success"], bool) for r in evals)
    accepted = {v["task_id"] for v in log["verdicts"] if v["accepted"]}
    trained = {e["task_id"] for e in episodes if e["purpose"] == "train"}
    assert trained <= accepted
    eval_ids = {r["task_id"] for r in evals}
    assert not eval_ids & trained, "the eval suite is never trained on"
    assert {t["task_id"] for t in log["tasks"]} >= trained | eval_ids
    assert {w["world_id"] for w in log["worlds"]} >= {t["world_id"] for t in log["tasks"]}
    # dynamic sampling is off by default: every group is learnt from, and the share is still told
    counted = {
        r["gen"]: r for r in training_groups(GameLog(str(tmp_path / "run")).read("episodes"))
    }
    for row, update in zip(log["generations"], log["updates"], strict=True):
        assert row["dynamic_sampling"] is False and row["extra_tasks"] == 0
        assert row["informative_groups"] == counted[row["gen"]]["informative"]
        assert row["informative_share"] == row["informative_groups"] / row["trained_tasks"]
        assert update["episodes"] == row["train_episodes"]


def _groups(episodes: list[dict], gen: int) -> dict[str, list[int]]:
    """Generation ``gen``'s training groups from ``episodes`` rows: task id → rewards, in the order played."""
    out: dict[str, list[int]] = {}
    for e in episodes:
        if e["gen"] == gen and e["purpose"] == "train":
            out.setdefault(e["task_id"], []).append(e["reward"])
    return out


def test_dynamic_sampling_learns_from_informative_groups_within_its_budget(tmp_path) -> None:
    """Rounds of further tasks until tasks_per_gen groups differ or 2 × tasks_per_gen tasks are played; the learner takes those groups; the share and the extra tasks are in the log, the summary, analyze and the trackers; the curriculum rebuilds from the log."""
    import json

    from coevo.arena.analysis import analyze, load_run
    from coevo.arena.gamelog import RunDir
    from coevo.curricula.rebuild import curriculum_from_log
    from coevo.run.driver.summary import summarize, summary_lines
    from coevo.run.tracking.metrics import generation_metrics

    run_dir = str(tmp_path / "run")
    run_experiment(experiment(curriculum__dynamic_sampling=True), run_dir)
    log = tables(run_dir)
    assert [r["gen"] for r in log["generations"]] == [0, 1, 2]
    ids = [e["episode_id"] for e in log["episodes"]]
    assert len(ids) == len(set(ids))
    for row, update in zip(log["generations"], log["updates"], strict=True):
        groups = _groups(log["episodes"], row["gen"])
        teach = [t for t, rewards in groups.items() if len(set(rewards)) > 1]
        assert row["dynamic_sampling"] is True and len(groups) == row["trained_tasks"] <= 12
        assert row["informative_groups"] == len(teach)
        assert len(teach) >= 6 or row["trained_tasks"] == 12, "a batch stops full or spent"
        assert row["extra_tasks"] == row["trained_tasks"] - 6
        assert update["episodes"] == 2 * len(teach), "the learner steps on informative groups"
    assert any(r["extra_tasks"] > 0 for r in log["generations"]), "a further round was played"

    summary = summarize(run_dir)
    played = sum(r["trained_tasks"] for r in log["generations"])
    found = sum(r["informative_groups"] for r in log["generations"])
    assert (summary["groups"], summary["informative_groups"]) == (played, found)
    assert summary["extra_tasks"] == sum(r["extra_tasks"] for r in log["generations"])
    lines = summary_lines(summary)
    assert (
        f"groups: {found} of {played} informative ({found / played:.0%}: rewards that differ)"
        in lines
    )
    assert any(line.startswith("dynamic sampling: ") for line in lines)
    per_gen = analyze(load_run(run_dir), irt=False)["groups"]
    assert [(g["groups"], g["informative"], g["extra_tasks"]) for g in per_gen] == [
        (r["trained_tasks"], r["informative_groups"], r["extra_tasks"]) for r in log["generations"]
    ]
    shown = run_cli("analyze", run_dir, "--no-irt")
    last = log["generations"][-1]
    cell = f"{last['informative_groups']}/{last['trained_tasks']} +{last['extra_tasks']}"
    assert shown.returncode == 0 and cell in shown.stdout.splitlines()[2 + last["gen"]]
    metrics = generation_metrics(GameLog(run_dir), 2)
    assert metrics["train/informative_share"] == last["informative_share"]
    assert metrics["train/extra_tasks"] == last["extra_tasks"]
    saved = json.loads(RunDir(run_dir).read_bytes("checkpoints", "gen=2", "state.json"))
    assert json.loads(json.dumps(curriculum_from_log(run_dir).state())) == saved["curriculum"]


@pytest.mark.slow
def test_the_curriculum_is_rebuilt_from_the_log_alone(tmp_path) -> None:
    """Replaying admit/batch/observe from the log gives exactly the curriculum state in the last checkpoint."""
    import json

    from coevo.arena.gamelog import RunDir
    from coevo.curricula.rebuild import curriculum_from_log

    run_experiment(experiment(curriculum__name="accel", run__generations=6), str(tmp_path / "run"))
    rebuilt = curriculum_from_log(str(tmp_path / "run"))
    saved = json.loads(
        RunDir(str(tmp_path / "run")).read_bytes("checkpoints", "gen=5", "state.json")
    )
    assert json.loads(json.dumps(rebuilt.state())) == saved["curriculum"]
    log = tables(tmp_path / "run")
    mutated = [t for t in log["tasks"] if t["source"] == "mutation"]
    assert mutated, "accel mutated some of its best tasks"
    assert all(t["parent"] and t["operator"] for t in mutated)


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_same_seed_same_log_and_resume_continues_it(tmp_path) -> None:
    """Two runs with one seed write equal logs, one on Ray and one in process; a run stopped after gen 1 and resumed writes the same log again."""
    run_experiment(experiment(ray__in_process=False), str(tmp_path / "a"))
    run_experiment(experiment(), str(tmp_path / "b"))
    first, second = tables(tmp_path / "a"), tables(tmp_path / "b")
    assert first == second
    partial = run_experiment(experiment(), str(tmp_path / "c"), stop_after=2)
    assert partial.generations == 2
    resumed = resume_run(str(tmp_path / "c"))
    assert resumed.generations == 3
    assert tables(tmp_path / "c") == first


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_dynamic_sampling_gives_one_log_per_seed_on_ray_in_process_and_after_resume(
    tmp_path,
) -> None:
    """With dynamic sampling's rounds: the log on Ray equals the log in process, and a run stopped after generation 0 and resumed writes it again."""
    sampling = {"run__generations": 2, "curriculum__dynamic_sampling": True}
    run_experiment(experiment(ray__in_process=False, **sampling), str(tmp_path / "ray"))
    run_experiment(experiment(**sampling), str(tmp_path / "here"))
    first = tables(tmp_path / "ray")
    assert first == tables(tmp_path / "here")
    assert any(r["extra_tasks"] for r in first["generations"]), "a further round was played"
    run_experiment(experiment(**sampling), str(tmp_path / "cut"), stop_after=1)
    resume_run(str(tmp_path / "cut"))
    assert tables(tmp_path / "cut") == first


@pytest.mark.slow
def test_dynamic_sampling_at_staleness_1_defers_the_step_on_the_informative_groups(
    tmp_path,
) -> None:
    """max_staleness = 1 with dynamic sampling: generation g's deferred step (logged with g + 1) learns the informative groups of g; one log per seed, through resume."""
    lagging = experiment(
        run__max_staleness=1, run__generations=4, curriculum__dynamic_sampling=True
    )
    run_experiment(lagging, str(tmp_path / "a"))
    first = tables(tmp_path / "a")
    run_experiment(lagging, str(tmp_path / "b"), stop_after=2)
    assert "deferred" in GameLog(str(tmp_path / "b")).manifests()[1]["checkpoint_files"]
    resume_run(str(tmp_path / "b"))
    assert tables(tmp_path / "b") == first
    rows = first["generations"]
    assert [r["gen"] for r in first["updates"]] == [1, 2, 3]
    for update, row in zip(first["updates"], rows, strict=False):
        assert update["episodes"] == 2 * row["informative_groups"]
    assert any(r["extra_tasks"] for r in rows)


@pytest.mark.slow
def test_a_finished_run_is_not_overwritten(tmp_path) -> None:
    """Running again into a run directory with generations says to resume or choose another --out."""
    run_experiment(experiment(run__generations=1), str(tmp_path / "r"))
    with pytest.raises(ArenaError, match="coevo resume"):
        run_experiment(experiment(run__generations=1), str(tmp_path / "r"))


@pytest.mark.slow
def test_at_staleness_1_phases_overlap_and_the_log_is_still_one_per_seed(tmp_path) -> None:
    """max_staleness = 1: the policy lags one generation more, the log repeats per seed and survives resume, busy shares are reported."""
    lagging = experiment(run__max_staleness=1, run__generations=4)
    events: list[dict[str, Any]] = []
    run_experiment(
        lagging, str(tmp_path / "a"), events=lambda e, **kw: events.append({"e": e, **kw})
    )
    first = tables(tmp_path / "a")
    run_experiment(lagging, str(tmp_path / "b"))
    assert tables(tmp_path / "b") == first
    run_experiment(lagging, str(tmp_path / "c"), stop_after=2)
    assert "deferred" in GameLog(str(tmp_path / "c")).manifests()[1]["checkpoint_files"]
    damaged = tmp_path / "damaged"
    shutil.copytree(tmp_path / "c", damaged)
    (damaged / "checkpoints" / "gen=1" / "deferred.json").write_text("{not json")
    with pytest.raises(ArenaError, match=r"checkpoints/gen=1/deferred\.json"):
        resume_run(str(damaged))
    resume_run(str(tmp_path / "c"))
    assert tables(tmp_path / "c") == first

    # generation g plays the policy learnt through g - 2; each step is logged a generation late
    versions = [r["version"] for r in first["generations"]]
    assert versions[0] == versions[1] != versions[2] != versions[3]
    steps = first["updates"]
    assert [r["gen"] for r in steps] == [1, 2, 3]
    train = {
        g: sum(e["gen"] == g and e["purpose"] == "train" for e in first["episodes"])
        for g in range(4)
    }
    assert [r["episodes"] for r in steps] == [train[0], train[1], train[2]]
    strict = experiment(run__generations=4)
    run_experiment(strict, str(tmp_path / "strict"))
    in_order = tables(tmp_path / "strict")
    assert [r["gen"] for r in in_order["updates"]] == [0, 1, 2, 3]
    assert in_order["generations"][1]["version"] != in_order["generations"][0]["version"]
    # generation 0's proposals and verdicts come before any policy: the schedule cannot change them
    gen0 = [v for v in first["verdicts"] if v["gen"] == 0]
    assert gen0 and gen0 == [v for v in in_order["verdicts"] if v["gen"] == 0]

    done = [e for e in events if e["e"] == "generation"]
    assert [e["gen"] for e in done] == [0, 1, 2, 3]
    for event in done:
        busy = event["busy"]
        assert {"solver-0", "solver-1", "learner", "world_model", "judge-0"} <= set(busy)
        assert all(0.0 <= share <= 1.0 for share in busy.values())
    assert all(e["busy"]["solver-0"] > 0 for e in done), "the Solvers played every generation"


@pytest.mark.slow
def test_a_pending_learner_step_resumes_with_the_decisions_the_solvers_shipped(tmp_path) -> None:
    """max_staleness = 1, stopped with a learner step pending: its shipped decisions are in the checkpoint as data and
    resume writes the log of an uninterrupted run; a checkpoint without them (an older coevo's) resumes to the same log,
    and a damaged one stops `coevo resume` naming the file."""
    import hashlib
    import json

    lagging = experiment(run__max_staleness=1, run__generations=4)
    run_experiment(lagging, str(tmp_path / "whole"))
    whole = tables(tmp_path / "whole")
    run_experiment(lagging, str(tmp_path / "cut"), stop_after=2)
    files = GameLog(str(tmp_path / "cut")).manifests()[1]["checkpoint_files"]
    assert files["deferred_decisions"] == "deferred-decisions.state"
    shipped = tmp_path / "cut" / "checkpoints" / "gen=1" / "deferred-decisions.state"
    assert shipped.read_bytes().startswith(b"coevo.state/1\n")
    older, damaged = tmp_path / "older", tmp_path / "damaged"
    shutil.copytree(tmp_path / "cut", older)
    shutil.copytree(tmp_path / "cut", damaged)

    resume_run(str(tmp_path / "cut"))
    assert tables(tmp_path / "cut") == whole

    manifest = older / "log" / "_manifests" / "gen=000001.json"
    data = json.loads(manifest.read_text())
    del data["checkpoint_files"]["deferred_decisions"]
    data.get("files", {}).pop("checkpoints/gen=1/deferred-decisions.state", None)
    manifest.write_text(json.dumps(data))
    (older / "checkpoints" / "gen=1" / "deferred-decisions.state").unlink()
    resume_run(str(older))  # the learner rebuilds the decisions: the same step
    assert tables(older) == whole

    # a pickle in its place: the manifest's checksum says so; with the manifest made to agree, it is still never loaded
    pickled = b"\x80\x05" + b"\0" * (shipped.stat().st_size - 2)
    (damaged / "checkpoints" / "gen=1" / "deferred-decisions.state").write_bytes(pickled)
    done = run_cli("resume", str(damaged))
    assert done.returncode != 0
    assert "checkpoints/gen=1/deferred-decisions.state fails its checksum" in done.stderr
    manifest = damaged / "log" / "_manifests" / "gen=000001.json"
    data = json.loads(manifest.read_text())
    entry = data["files"]["checkpoints/gen=1/deferred-decisions.state"]
    entry["sha256"] = hashlib.sha256(pickled).hexdigest()
    manifest.write_text(json.dumps(data))
    done = run_cli("resume", str(damaged))
    assert done.returncode != 0
    assert "checkpoints/gen=1/deferred-decisions.state cannot be read" in done.stderr
    assert "pickle, which coevo never loads" in done.stderr


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_shipped_decisions_cross_ray_and_the_log_is_the_in_process_one(tmp_path) -> None:
    """At max_staleness 1 the decisions go from the Solver actors through Ray to a pending learner step: the log is the in-process one.

    (At 0, ``test_same_seed_same_log_and_resume_continues_it`` compares the two.)
    """
    lagging = {"run__max_staleness": 1, "run__generations": 4}
    run_experiment(experiment(ray__in_process=False, **lagging), str(tmp_path / "ray"))
    run_experiment(experiment(**lagging), str(tmp_path / "in-process"))
    assert tables(tmp_path / "ray") == tables(tmp_path / "in-process")


@pytest.mark.slow
def test_half_written_generations_are_invisible(tmp_path) -> None:
    """Parts of a generation without its manifest (a driver killed while writing) are never read."""
    run_experiment(experiment(run__generations=1), str(tmp_path / "r"))
    log = GameLog(str(tmp_path / "r"))
    log.write_part("generations", 1, [dict.fromkeys(SCHEMAS["generations"].names)])
    assert log.last_generation() == 0
    assert log.read("generations").num_rows == 1
    assert isinstance(log.read("episodes"), pa.Table)


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_a_killed_solver_actor_is_restarted_and_the_log_is_unchanged(tmp_path) -> None:
    """SIGKILL of a Solver actor's process after generation 0: Ray restarts it, the batch is retried, same log."""
    import ray

    killed: list[int] = []
    pids: list[int] = []

    def remember_pids(arena) -> None:
        pids.extend(ray.get([actor.pid.remote() for actor in arena.solvers.actors]))

    def kill_a_solver(report) -> None:
        if report.gen == 0:
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    run_experiment(
        experiment(ray__in_process=False),
        str(tmp_path / "k"),
        on_start=remember_pids,
        on_generation=kill_a_solver,
    )
    assert killed
    run_experiment(experiment(), str(tmp_path / "ref"))
    assert tables(tmp_path / "k") == tables(tmp_path / "ref")


@pytest.mark.slow
def test_roles_that_raise_are_recorded_and_the_run_goes_on(tmp_path) -> None:
    """A solver raising on some chunks gives recorded failed episodes; a synthesizer raising on level 3 gives fewer tasks."""
    exp = experiment(
        solver__name="tests.arena.faulty_roles:FlakySolver",
        synthesizer__name="tests.arena.faulty_roles:PickySynthesizer",
        curriculum__levels=[1, 2, 3],
    )
    summary = run_experiment(exp, str(tmp_path / "f"))
    assert summary.generations == 3
    log = tables(tmp_path / "f")
    failed = [e for e in log["episodes"] if e["failure"]]
    assert failed and all("flaky solver gave up" in e["failure"] for e in failed)
    assert all(e["reward"] == 0 for e in failed)
    assert sum(r["failures"] for r in log["generations"]) >= len(failed)


@pytest.mark.slow
@pytest.mark.parametrize("sampling", ["", "dynamic_sampling = true\n"], ids=["batch", "dynamic"])
def test_a_driver_killed_with_sigkill_resumes_to_the_same_log(tmp_path, sampling) -> None:
    """`coevo run` killed -9 mid-run, then `coevo resume`: contiguous generations, no duplicates, the same log (with dynamic sampling's rounds too)."""
    import subprocess
    import sys
    import time

    toml = tmp_path / "small.toml"
    toml.write_text(
        "[run]\nseed = 11\ngenerations = 4\nrollouts = 2\nchunk = 8\n"
        '[synthesizer]\nname = "procedural"\nconfig = { domains = ["retail"], world_pool = 2 }\n'
        '[solver]\nname = "linear-pg"\nactors = 2\nconfig = { lr = 0.2 }\n'
        '[curriculum]\nname = "plr"\ntasks_per_gen = 6\nmin_fill = 4\nlevels = [1, 2]\n'
        + sampling
        + "[eval]\nlevels = [1, 2]\nper_level = 3\nevery = 2\n"
        "[judge]\nconfig = { isolate = false }\n[ray]\nin_process = true\n"
    )
    run_dir = tmp_path / "killed"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    driver = subprocess.Popen(
        [sys.executable, "-m", "coevo.run.cli", "run", str(toml), "--out", str(run_dir)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    manifest = run_dir / "log" / "_manifests" / "gen=000001.json"
    deadline = time.monotonic() + 240
    while not manifest.exists() and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert manifest.exists(), "the driver committed generation 1"
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    assert GameLog(str(run_dir)).last_generation() < 3, "killed before the end"
    done = subprocess.run(
        [sys.executable, "-m", "coevo.run.cli", "resume", str(run_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    resumed = tables(run_dir)
    assert [r["gen"] for r in resumed["generations"]] == [0, 1, 2, 3]
    ids = [e["episode_id"] for e in resumed["episodes"]]
    assert len(ids) == len(set(ids))
    run_experiment(load_experiment(toml), str(tmp_path / "whole"))
    assert resumed == tables(tmp_path / "whole")


@pytest.mark.slow
def test_checkpoints_hold_role_state_as_data(tmp_path) -> None:
    """The learner's and the World model's checkpoints are coevo.state/1 data named in the manifest."""
    from coevo.arena.state import peek_state

    run_experiment(experiment(run__generations=1), str(tmp_path / "run"))
    log = GameLog(str(tmp_path / "run"))
    (manifest,) = log.manifests()
    files = manifest["checkpoint_files"]
    assert files == {
        "solver": "solver.state",
        "world_model": "world_model.state",
        "state": "state.json",
    }
    base = ("checkpoints", "gen=0")
    assert peek_state(log.run.read_bytes(*base, files["solver"]))[0] == "linear-pg"
    assert peek_state(log.run.read_bytes(*base, files["world_model"]))[0] == "irt"


@pytest.mark.slow
def test_a_role_without_saved_state_is_said_so_and_starts_afresh_on_resume(tmp_path) -> None:
    """A World model that is not Stateful is not checkpointed: an event says so, and resume says it starts afresh."""
    events: list[tuple[str, dict]] = []
    exp = experiment(world_model__name="tests.arena.faulty_roles:ForgetfulModel")

    def record(event: str, **fields: Any) -> None:
        events.append((event, fields))

    run_experiment(exp, str(tmp_path / "run"), stop_after=1, events=record)
    assert [f["role"] for n, f in events if n == "role_not_checkpointed"] == ["world_model"]
    (manifest,) = GameLog(str(tmp_path / "run")).manifests()
    assert manifest["checkpoint_files"]["world_model"] is None
    resume_run(str(tmp_path / "run"), events=record)
    assert [f["role"] for n, f in events if n == "role_not_restored"] == ["world_model"]
    assert GameLog(str(tmp_path / "run")).last_generation() == 2


def test_a_schema_1_run_is_not_resumed_and_its_pickles_never_load(tmp_path) -> None:
    """Resuming a run written with pickled checkpoints stops with a message; a planted pickle never runs."""
    import pickle
    import shutil
    from pathlib import Path

    run = tmp_path / "old"
    shutil.copytree(Path(__file__).resolve().parents[1] / "data" / "logs" / "v1-383f438", run)
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    for checkpoint in (run / "checkpoints").iterdir():
        for name in ("world_model.pkl", "solver.bin", "world_model.state", "solver.state"):
            (checkpoint / name).write_bytes(pickle.dumps(Payload()))
    with pytest.raises(ArenaError, match="checkpoints are Python pickles; coevo never loads"):
        resume_run(str(run))
    assert not marker.exists()


@pytest.mark.slow
def test_an_accel_run_resumes_to_the_same_log_when_its_parents_were_forgotten(tmp_path) -> None:
    """ACCEL plans mutations before it forgets tasks: a resumed run finds those parents in the log."""
    import json

    from coevo.arena.gamelog import RunDir

    exp = load_experiment(
        str(Path(__file__).resolve().parents[2] / "experiments" / "curricula.toml"),
        [
            'curriculum.name="accel"',
            "curriculum.accel.buffer_size=6",  # small enough that it forgets a parent it plans to mutate
            "curriculum.accel.min_fill=4",
            "curriculum.levels=[1]",
            "curriculum.tasks_per_gen=16",
            "run.generations=4",  # the cut falls at generation 1 (measured)
            "run.keep_checkpoints=0",  # the test reads every generation's checkpoint
            "eval.per_level=2",
            "ray.in_process=true",
            "judge.config.isolate=false",
        ],
    )
    run_experiment(exp, str(tmp_path / "whole"))
    whole = tables(tmp_path / "whole")
    run = RunDir(str(tmp_path / "whole"))
    # the first checkpoint whose next plan mutates a task its curriculum has already forgotten
    cut = next(
        gen
        for gen in range(exp.run.generations - 1)
        if (state := json.loads(run.read_bytes("checkpoints", f"gen={gen}", "state.json")))
        and {m["parent"] for m in state["next_plan"]["mutations"]}
        - set(state["curriculum"]["stats"])
    )
    run_experiment(exp, str(tmp_path / "cut"), stop_after=cut + 1)
    resume_run(str(tmp_path / "cut"))
    assert tables(tmp_path / "cut") == whole


@pytest.mark.slow
def test_roles_that_break_the_batch_contract_are_counted_and_the_run_goes_on(tmp_path) -> None:
    """A World model short of a prediction and a Judge that shuffles its verdicts: the run completes,
    each failure is in the generation's `failures`, and no verdict is logged against the wrong task."""
    events: list[tuple[str, dict]] = []
    exp = experiment(
        world_model__name="tests.arena.faulty_roles:ShortModel",
        judge__name="tests.arena.faulty_roles:MuddledJudge",
        run__generations=2,
    )
    summary = run_experiment(
        exp, str(tmp_path / "run"), events=lambda e, **f: events.append((e, f))
    )
    assert summary.generations == 2
    log = tables(tmp_path / "run")
    model_failures = [f for e, f in events if e == "world_model_failed"]
    assert len(model_failures) >= 2 and "values for" in model_failures[0]["error"]
    per_gen = {r["gen"]: r["failures"] for r in log["generations"]}
    assert all(failures >= 1 for failures in per_gen.values())
    assert sum(per_gen.values()) >= len(model_failures)
    # the Judge is asked task by task when its batch answer is muddled: every verdict is its task's
    tasks = {(t["gen"], t["task_id"]) for t in log["tasks"]}
    assert all((v["gen"], v["task_id"]) in tasks for v in log["verdicts"])
    assert any(v["accepted"] for v in log["verdicts"])


@pytest.mark.slow
def test_a_damaged_checkpoint_stops_resume_with_a_message(tmp_path) -> None:
    """A checkpoint edited by hand gives ArenaError naming the generation and the file, not a traceback."""
    import json

    run_experiment(experiment(), str(tmp_path / "run"), stop_after=1)
    state = tmp_path / "run" / "checkpoints" / "gen=0" / "state.json"
    data = json.loads(state.read_text())
    del data["curriculum"]
    state.write_text(json.dumps(data))
    with pytest.raises(
        ArenaError,
        match=r"generation 0 of .* is damaged: checkpoints/gen=0/state.json is truncated",
    ):
        resume_run(str(tmp_path / "run"))
