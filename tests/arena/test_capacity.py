"""Actor counts are bounded: statically when an experiment is loaded, by the cluster's CPUs and memory when Ray is up."""

from __future__ import annotations

import pytest
from coevo.arena.errors import ArenaError, ExperimentError
from coevo.run.actors.capacity import ACTOR_MEMORY, ACTORS_PER_CPU, MAX_ACTORS, check_capacity
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


def test_the_way_on_is_a_larger_cluster_for_a_local_ray_and_more_nodes_for_a_joined_one() -> None:
    """On a Ray started here the message suggests --address; on a cluster joined at an address, adding nodes to it."""
    exp = load_experiment(QUICKSTART, ["solver.actors=2"])
    small = {"CPU": 64.0, "memory": 2.0**30}
    with pytest.raises(ArenaError, match="join a larger cluster with --address"):
        check_capacity(exp, small)
    with pytest.raises(ArenaError) as caught:
        check_capacity(exp, small, joined="10.0.0.5:6379")
    assert "--address" not in str(caught.value).replace("ray start --address", "")
    assert "add nodes to the cluster at 10.0.0.5:6379" in str(caught.value)


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


CLUSTER = "experiments/cluster.toml"
LAPTOP = {"CPU": 2.0, "memory": 16.0 * 2**30, "object_store_memory": 2.0 * 2**30}


def _hinted(message: str) -> list[str]:
    """The `--set` items a refusal's hint gives."""
    assert "This fits the cluster: " in message, message
    words = message.split("This fits the cluster: ")[1].split(" --set ")
    return [w.removeprefix("--set ").strip() for w in words]


@pytest.mark.parametrize(
    "nodes",
    [
        [LAPTOP],
        [LAPTOP, LAPTOP],
        [{"CPU": 1.0, "memory": 8.0 * 2**30}, {"CPU": 1.0, "memory": 8.0 * 2**30}],
        [{"CPU": 64.0, "memory": 2.0 * 2**30}],
    ],
    ids=["2-cpu", "two-2-cpu-nodes", "two-1-cpu-nodes", "64-cpu-2-gib"],
)
def test_a_refusal_s_hint_is_a_configuration_that_fits(nodes) -> None:
    """experiments/cluster.toml on a laptop, two small nodes, or little memory: the hinted --set values pass both checks (never a second refusal)."""
    from coevo.run.actors.capacity import _check, fitting_overrides

    total = {k: sum(n.get(k, 0.0) for n in nodes) for k in ("CPU", "memory")}
    exp = load_experiment(CLUSTER)
    with pytest.raises(ArenaError):
        _check(exp, total, nodes, nodes[0])
    items = fitting_overrides(exp, total, nodes, nodes[0])
    assert items, "a hint is found"
    _check(load_experiment(CLUSTER, items), total, nodes, nodes[0])  # fits: no error
    keys = {item.split("=")[0] for item in items}
    assert keys <= {
        f"{t}.{k}" for t in ("synthesizer", "judge", "solver") for k in ("actors", "resources.cpus")
    }, items


def test_no_hint_when_one_actor_a_role_cannot_fit() -> None:
    """A cluster too small for one actor of each role gets the refusal alone, not a hint that fails."""
    from coevo.run.actors.capacity import fitting_overrides

    tiny = {"CPU": 0.25, "memory": 16.0 * 2**30}
    assert fitting_overrides(load_experiment(CLUSTER), tiny, [tiny], tiny) is None


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_coevo_run_cluster_toml_on_a_small_ray_hints_the_sets_that_fit(tmp_path, capsys) -> None:
    """`coevo run cluster.toml` on the 2-CPU test Ray: exit 2 and a hint; with the hint's --set values the cluster check passes."""
    from coevo.run.actors.capacity import check_cluster
    from coevo.run.cli import main

    assert main(["run", CLUSTER, "--out", str(tmp_path / "r")]) == 2
    line = next(ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("coevo run: "))
    check_cluster(load_experiment(CLUSTER, _hinted(line)))  # no second refusal


def test_actors_that_fit_the_total_but_not_the_nodes_one_by_one_are_refused() -> None:
    """Eleven actors of 0.18 CPU on two 1-CPU nodes: 1.98 CPU fits the total, but a node holds five; refused, not left pending."""
    from coevo.run.actors.resources import RoleResources, check_resources

    one = {"CPU": 1.0, "memory": 8.0 * 2**30}
    nodes = [one, dict(one)]
    share = RoleResources(cpus=0.18)
    with pytest.raises(ArenaError, match=r"hold 4 of the 5 solver actors.*0\.18 CPU"):
        check_resources(
            [("judge", 5, share, "spread"), ("solver", 5, share, "spread")],
            [("learner", share)],
            nodes,
            one,
        )
    check_resources(  # one fewer: five a node
        [("judge", 5, share, "spread"), ("solver", 4, share, "spread")],
        [("learner", share)],
        nodes,
        one,
    )
