"""Actor counts are bounded: statically when an experiment is loaded, by the cluster's CPUs and memory when Ray is up."""

from __future__ import annotations

import pytest
from coevo.arena.errors import ArenaError, ExperimentError
from coevo.run.capacity import ACTOR_MEMORY, ACTORS_PER_CPU, MAX_ACTORS, check_capacity
from coevo.run.experiment import load_experiment

QUICKSTART = "experiments/quickstart.toml"


def test_an_absurd_actor_count_is_refused_when_the_experiment_is_loaded() -> None:
    """solver.actors = 500 is an error naming the key and the bound, before Ray is involved."""
    with pytest.raises(ExperimentError, match=rf"solver\.actors: .*{MAX_ACTORS}"):
        load_experiment(QUICKSTART, ["solver.actors=500"])


def test_the_memory_of_the_cluster_bounds_the_actors() -> None:
    """A cluster of many CPUs but 1 GB holds 5 actors: 6 are refused, with the memory in the message."""
    exp = load_experiment(QUICKSTART, ["solver.actors=2"])  # 1 + 1 + 2 + learner and World model
    roomy = {"CPU": 64.0, "memory": 6.0 * ACTOR_MEMORY}
    check_capacity(exp, roomy)
    with pytest.raises(ArenaError, match=r"asks for 6 actors.*64 CPUs and 1\.0 GB.*at most 5 fit"):
        check_capacity(exp, {"CPU": 64.0, "memory": 2.0**30})


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_too_many_actors_for_the_session_s_ray_are_refused_before_any_starts(tmp_path) -> None:
    """On the 2-CPU test Ray, 20 Solver actors are refused with its capacity and the fix; no actor or record is made."""
    import ray
    from coevo.run.loop import run_experiment

    resources = ray.cluster_resources()
    check_capacity(load_experiment(QUICKSTART), resources)  # the quickstart fits
    exp = load_experiment(QUICKSTART, ["solver.actors=20"])
    fit = int(resources["CPU"]) * ACTORS_PER_CPU
    with pytest.raises(ArenaError) as caught:
        run_experiment(exp, str(tmp_path / "run"))
    message = str(caught.value)
    assert f"{resources['CPU']:g} CPUs" in message and "GB of memory" in message
    assert f"at most {fit} fit" in message and "--set solver.actors=" in message
    assert "--address" in message
    assert not (tmp_path / "run" / "experiment.json").exists()
    assert ray.is_initialized(), "the session's Ray is left running"


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_coevo_run_with_too_many_actors_exits_2_with_one_line(tmp_path, capsys) -> None:
    """`coevo run --set solver.actors=20` on the test Ray: exit 2, `coevo run: ...` naming the capacity, no traceback."""
    from coevo.run.cli import main

    status = main(["run", QUICKSTART, "--set", "solver.actors=20", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert status == 2
    line = next(line for line in err.splitlines() if line.startswith("coevo run: "))
    assert "asks for 24 actors" in line and "CPUs" in line and "Traceback" not in err
