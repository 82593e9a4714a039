"""Per-role resources and placement: parsed from the experiment file, checked against the cluster, given to Ray."""

from __future__ import annotations

import time

import pytest
from coevo.arena.errors import ArenaError, ExperimentError
from coevo.arena.gamelog import GameLog
from coevo.run.actors.resources import RoleResources, check_resources, parse_bytes
from coevo.run.experiment import load_experiment

QUICKSTART = "experiments/quickstart.toml"
SMALL = [
    "run.generations=2",
    "curriculum.tasks_per_gen=4",
    "eval.per_level=2",
    "eval.levels=[1]",
]
NODE = {"CPU": 2.0, "memory": 8.0 * 2**30, "node:127.0.0.1": 1.0}


def test_sizes_read_as_bytes_and_nonsense_is_refused_with_the_forms_taken() -> None:
    assert parse_bytes("4GiB") == 4 * 2**30
    assert parse_bytes("512 MB") == 512 * 10**6
    assert parse_bytes(1024) == 1024
    with pytest.raises(ValueError, match="KiB, MiB, GiB"):
        parse_bytes("lots")
    exp = load_experiment(
        QUICKSTART, ['solver.resources.memory="2GiB"', "solver.resources.cpus=0.5"]
    )
    assert exp.solver.resources.memory == 2 * 2**30 and exp.solver.resources.cpus == 0.5
    with pytest.raises(ExperimentError, match=r"solver\.resources\.memory"):
        load_experiment(QUICKSTART, ['solver.resources.memory="lots"'])
    with pytest.raises(ExperimentError, match="placement"):
        load_experiment(QUICKSTART, ['solver.placement="everywhere"'])
    with pytest.raises(ExperimentError, match="gpu"):  # did you mean
        load_experiment(QUICKSTART, ["solver.resources.gpu=1"])
    with pytest.raises(ExperimentError, match=r"placement = 'pack' reserves a placement group"):
        load_experiment(QUICKSTART, ['solver.placement="pack"'])  # before Ray: nothing to reserve
    load_experiment(QUICKSTART, ['solver.placement="pack"', "solver.resources.cpus=0.5"])


def test_what_no_node_can_hold_or_the_cluster_lacks_is_refused_with_the_table() -> None:
    two = RoleResources(cpus=1)
    check_resources([("solver", 2, two, "default")], [], [NODE], NODE)
    with pytest.raises(ArenaError, match=r"reserves 3 CPU \(solver 3 × 1\).*has 2 CPU"):
        check_resources([("solver", 3, two, "default")], [], [NODE], NODE)
    gpu = RoleResources(gpus=1)
    with pytest.raises(ArenaError, match=r"no node .* one solver actor.*1 GPU"):
        check_resources([("solver", 1, gpu, "spread")], [], [NODE], NODE)
    with pytest.raises(ArenaError, match=r"learner.*driver's node.*entrypoint-num-gpus"):
        check_resources([], [("learner", gpu)], [NODE, {**NODE, "GPU": 1.0}], NODE)
    with pytest.raises(ArenaError, match=r"placement group.*set \[judge.resources\]"):
        check_resources([("judge", 2, RoleResources(), "pack")], [], [NODE], NODE)
    with pytest.raises(ArenaError, match=r"strict-spread.*4 actors.*has 1"):
        check_resources([("solver", 4, two, "strict-spread")], [], [NODE], NODE)
    custom = RoleResources(custom={"tpu-host": 1})
    with pytest.raises(ArenaError, match="tpu-host"):
        check_resources([("synthesizer", 1, custom, "default")], [], [NODE], NODE)


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_a_run_refuses_a_custom_resource_the_cluster_lacks_before_any_actor(tmp_path) -> None:
    from coevo.run.loop import run_experiment

    exp = load_experiment(QUICKSTART, [*SMALL, 'solver.resources.custom={"a100"=1}'])
    with pytest.raises(ArenaError, match=r"no node .* solver actor.*1 a100"):
        run_experiment(exp, str(tmp_path / "run"))
    assert not (tmp_path / "run" / "experiment.json").exists()


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_actors_reserve_what_their_tables_say_and_a_packed_placement_group_runs(tmp_path) -> None:
    """Solvers reserving 0.5 CPU each in a PACK placement group, judges spread: the run completes; Ray saw the reservations."""
    import ray
    from coevo.run.loop import run_experiment

    exp = load_experiment(
        QUICKSTART,
        [
            *SMALL,
            "solver.actors=2",
            "solver.resources.cpus=0.5",
            'solver.resources.memory="64MiB"',
            'solver.placement="pack"',
            'judge.placement="spread"',
        ],
    )
    seen: dict[str, float] = {}

    def look(_arena) -> None:
        total, free = ray.cluster_resources(), ray.available_resources()
        seen["cpu_reserved"] = total["CPU"] - free.get("CPU", 0.0)
        seen["groups"] = len(_arena.actors.groups)

    summary = run_experiment(exp, str(tmp_path / "run"), on_start=look)
    assert summary.generations == 2
    # two Solver actors in the group (0.5 each) and the learner (0.5) on the driver's node
    assert seen["cpu_reserved"] == pytest.approx(1.5)
    assert seen["groups"] == 1
    assert [r["gen"] for r in GameLog(str(tmp_path / "run")).read("generations").to_pylist()] == [
        0,
        1,
    ]
    deadline = time.monotonic() + 60  # Ray frees a killed actor's reservation soon, not at once
    while ray.available_resources().get("CPU", 0.0) < ray.cluster_resources()["CPU"]:
        assert time.monotonic() < deadline, "the run gave back what its actors reserved"
        time.sleep(0.2)
