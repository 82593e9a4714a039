"""How many role actors a Ray cluster can hold, checked after Ray starts and before any actor does.

Role actors ask Ray for no CPU (they wait on each other more than they
compute), so Ray itself never refuses too many: ``solver.actors = 500`` once
started 76 worker processes of about 170 MB each and hung. The arena
therefore bounds the actors it starts by what the cluster has:

* at most :data:`ACTORS_PER_CPU` actors per CPU of the cluster, and
* :data:`ACTOR_MEMORY` bytes of Ray's ``memory`` resource per actor.

Every table's ``actors`` also has a static bound (:data:`MAX_ACTORS`, checked
when the experiment is loaded, before Ray starts). What the role tables
reserve (``[solver.resources]``, ``placement``) is checked against the
cluster's nodes by :func:`check_cluster` (:mod:`coevo.run.resources`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from coevo.arena.errors import ArenaError
from coevo.run.resources import check_resources, cluster_nodes

if TYPE_CHECKING:
    from coevo.run.experiment import Experiment

__all__ = [
    "ACTORS_PER_CPU",
    "ACTOR_MEMORY",
    "MAX_ACTORS",
    "actors_wanted",
    "check_capacity",
    "check_cluster",
]

MAX_ACTORS: Final = 256
"""Actors of one role table, at most, whatever the cluster (checked when an experiment is loaded)."""

ACTORS_PER_CPU: Final = 8
"""Role actors the arena starts per CPU of the cluster, at most."""

ACTOR_MEMORY: Final = 200 * 2**20
"""Bytes a role actor's process is reckoned to take (about 170 MB measured, with a margin)."""


def actors_wanted(experiment: Experiment) -> dict[str, int]:
    """The actors the experiment starts, by what they are (the learner and the World model are one each)."""
    return {
        "synthesizer": experiment.synthesizer.actors,
        "judge": experiment.judge.actors,
        "solver": experiment.solver.actors,
        "learner and World model": 2,
    }


def check_capacity(experiment: Experiment, resources: Mapping[str, float]) -> None:
    """Refuse an experiment that asks for more actors than the cluster can hold.

    Args:
        experiment: the validated experiment.
        resources: the cluster's resources (``ray.cluster_resources()``).

    Raises:
        ArenaError: the message gives the actors asked for, the cluster's CPUs and
            memory, how many fit, and what to change.
    """
    wanted = actors_wanted(experiment)
    total = sum(wanted.values())
    cpus = float(resources.get("CPU", 0.0))
    memory = float(resources.get("memory", 0.0))
    fit = min(int(cpus * ACTORS_PER_CPU), int(memory // ACTOR_MEMORY))
    if total <= fit:
        return
    asked = ", ".join(f"{role} {n}" for role, n in wanted.items())
    largest = max(("synthesizer", "judge", "solver"), key=lambda role: wanted[role])
    raise ArenaError(
        f"the experiment asks for {total} actors ({asked}), but this Ray cluster has "
        f"{cpus:g} CPUs and {memory / 2**30:.1f} GB of memory for them: at most {fit} fit "
        f"({ACTORS_PER_CPU} per CPU, about {ACTOR_MEMORY // 2**20} MB each); lower "
        f"{largest}.actors (e.g. --set {largest}.actors={max(1, wanted[largest] - (total - fit))}) "
        "or join a larger cluster with --address"
    )


def check_cluster(experiment: Experiment) -> None:
    """Both checks against the Ray cluster this process is connected to: the actor count, and what the tables reserve.

    Raises:
        ArenaError: what does not fit and what to change.
    """
    import ray  # lazy: the experiment file reads MAX_ACTORS here before Ray may be imported

    check_capacity(experiment, ray.cluster_resources())  # Ray never refuses actors of 0 CPUs
    nodes, driver_node = cluster_nodes()
    wanted = [
        (
            table,
            getattr(experiment, table).actors,
            getattr(experiment, table).resources,
            getattr(experiment, table).placement,
        )
        for table in ("synthesizer", "judge", "solver")
    ]
    singletons = [
        ("learner ([solver.resources])", experiment.solver.resources),
        ("World model ([world_model.resources])", experiment.world_model.resources),
    ]
    check_resources(wanted, singletons, nodes, driver_node)
