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
cluster's nodes by :func:`check_cluster` (:mod:`coevo.run.actors.resources`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from coevo.arena.errors import ArenaError, ExperimentError
from coevo.run.actors.resources import check_resources, cluster_nodes

if TYPE_CHECKING:
    from coevo.run.experiment import Experiment

__all__ = [
    "ACTORS_PER_CPU",
    "ACTOR_MEMORY",
    "MAX_ACTORS",
    "actors_wanted",
    "check_capacity",
    "check_cluster",
    "fitting_overrides",
]

MAX_ACTORS: Final = 256
"""Actors of one role table, at most, whatever the cluster (checked when an experiment is loaded)."""

ROLE_TABLES: Final = ("synthesizer", "judge", "solver")
"""The role tables with an actor count of their own (the learner and the World model are one each)."""

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


def check_capacity(
    experiment: Experiment, resources: Mapping[str, float], joined: str | None = None
) -> None:
    """Refuse an experiment that asks for more actors than the cluster can hold.

    Args:
        experiment: the validated experiment.
        resources: the cluster's resources (``ray.cluster_resources()``).
        joined: the address of the cluster the run joined (None: a Ray on this machine).

    Raises:
        ArenaError: the message gives the actors asked for, the cluster's CPUs and
            memory, how many fit, and what to change.
    """
    wanted = actors_wanted(experiment)
    total = sum(wanted.values())
    cpus = float(resources.get("CPU", 0.0))
    memory = float(resources.get("memory", 0.0))
    fit = _fit(resources)
    if total <= fit:
        return
    asked = ", ".join(f"{role} {n}" for role, n in wanted.items())
    largest = max(ROLE_TABLES, key=lambda role: wanted[role])
    raise ArenaError(
        f"the experiment asks for {total} actors ({asked}), but this Ray cluster has "
        f"{cpus:g} CPUs and {memory / 2**30:.1f} GB of memory for them: at most {fit} fit "
        f"({ACTORS_PER_CPU} per CPU, about {ACTOR_MEMORY // 2**20} MB each); lower "
        f"{largest}.actors or "
        + (
            f"add nodes to the cluster at {joined} (`ray start --address={joined}` on each)"
            if joined
            else "join a larger cluster with --address"
        )
    )


def _fit(resources: Mapping[str, float]) -> int:
    """How many role actors a cluster of ``resources`` holds."""
    cpus = float(resources.get("CPU", 0.0))
    memory = float(resources.get("memory", 0.0))
    return min(int(cpus * ACTORS_PER_CPU), int(memory // ACTOR_MEMORY))


def _reserved(experiment: Experiment) -> tuple[list[Any], list[Any]]:
    """What the role tables reserve, as :func:`check_resources` takes it: the tables, and the driver's node's actors."""
    wanted = [
        (
            table,
            getattr(experiment, table).actors,
            getattr(experiment, table).resources,
            getattr(experiment, table).placement,
        )
        for table in ROLE_TABLES
    ]
    singletons = [
        ("learner ([solver.resources])", experiment.solver.resources),
        ("World model ([world_model.resources])", experiment.world_model.resources),
    ]
    return wanted, singletons


def _check(
    experiment: Experiment,
    resources: Mapping[str, float],
    nodes: list[dict[str, float]],
    driver_node: dict[str, float],
    joined: str | None = None,
) -> None:
    check_capacity(experiment, resources, joined)
    check_resources(*_reserved(experiment), nodes, driver_node)


def _scaled(table: str, resource: str, amount: float) -> tuple[str, str]:
    """The ``--set`` item for one actor's ``resource`` of ``table`` at ``amount`` (rounded down)."""
    if resource == "memory":
        return f"{table}.resources.memory", str(int(amount) // 2**20 * 2**20)
    value = f"{math.floor(amount * 100) / 100:g}"
    key = {"CPU": "cpus", "GPU": "gpus"}.get(resource)
    return (f"{table}.resources.{key}", value) if key else (f"{table}.resources.custom", value)


def fitting_overrides(
    experiment: Experiment,
    resources: Mapping[str, float],
    nodes: list[dict[str, float]],
    driver_node: dict[str, float],
) -> list[str] | None:
    """``--set`` items that make ``experiment`` fit this cluster, checked; None when none are found.

    Fewer actors first (the largest table lowered one at a time until the
    count fits), then each role's reservation of a resource the cluster has
    too little of scaled down by the same share. The result is checked as a
    run would check it, so a hint never leads to a second refusal.
    """
    from coevo.run.experiment import load_experiment  # the experiment module imports this one

    counts = {table: getattr(experiment, table).actors for table in ROLE_TABLES}
    while sum(counts.values()) + 2 > _fit(resources):
        largest = max(counts, key=lambda table: counts[table])
        if counts[largest] == 1:
            return None  # not even one actor a role: no --set makes it fit
        counts[largest] -= 1
    sets = {
        f"{table}.actors": str(n)
        for table, n in counts.items()
        if n != getattr(experiment, table).actors
    }
    totals: dict[str, float] = {}
    for node in nodes:
        for resource, amount in node.items():
            totals[resource] = totals.get(resource, 0.0) + amount
    demands = {table: getattr(experiment, table).resources.demand() for table in ROLE_TABLES}
    learner = experiment.solver.resources.demand()
    model = experiment.world_model.resources.demand()
    customs: dict[str, dict[str, float]] = {}
    for resource in sorted({r for d in demands.values() for r in d}):
        needed = sum(counts[t] * d.get(resource, 0.0) for t, d in demands.items())
        needed += learner.get(resource, 0.0) + model.get(resource, 0.0)
        have = totals.get(resource, 0.0)
        if needed <= have:
            continue
        share = have / needed
        for table, demand in demands.items():
            if resource not in demand:
                continue
            key, value = _scaled(table, resource, demand[resource] * share)
            if key.endswith(".custom"):  # the table's whole custom map, with this one scaled
                custom = customs.setdefault(
                    table, dict(getattr(experiment, table).resources.custom)
                )
                custom[resource] = float(value)
                value = "{ " + ", ".join(f'"{k}" = {v:g}' for k, v in custom.items()) + " }"
            sets[key] = value
    if not sets:
        return None
    for _ in range(_SHRINKS):  # the nodes one by one may hold less than the total says
        items = [f"{key}={value}" for key, value in sets.items()]
        try:
            _check(
                load_experiment(experiment.model_dump(mode="json"), items),
                resources,
                nodes,
                driver_node,
            )
            return items
        except ExperimentError:
            return None
        except ArenaError:
            shrunk = {key: _shrink(key, value) for key, value in sets.items()}
            if shrunk == sets:
                return None
            sets = shrunk
    return None  # nothing found that fits: no hint rather than a wrong one


_SHRINKS: Final = 20
"""How many times :func:`fitting_overrides` lowers the scaled reservations by a tenth before it gives up."""


def _shrink(key: str, value: str) -> str:
    """A scaled reservation a tenth lower (actor counts and custom maps as they are)."""
    if not key.endswith((".cpus", ".gpus", ".memory")):
        return value
    if key.endswith(".memory"):
        return str(int(int(value) * 0.9) // 2**20 * 2**20)
    return f"{math.floor(float(value) * 90) / 100:g}"


def check_cluster(experiment: Experiment, joined: str | None = None) -> None:
    """Both checks against the Ray cluster this process is connected to: the actor count, and what the tables reserve.

    ``joined``: the address of the cluster the run joined (None: a Ray on this machine), for the advice.

    Raises:
        ArenaError: what does not fit and what to change.
    """
    import ray  # lazy: the experiment file reads MAX_ACTORS here before Ray may be imported

    resources = ray.cluster_resources()  # Ray never refuses actors of 0 CPUs: the count is ours
    nodes, driver_node = cluster_nodes()
    try:
        _check(experiment, resources, nodes, driver_node, joined)
    except ArenaError as exc:
        items = fitting_overrides(experiment, resources, nodes, driver_node)
        if not items:
            raise
        raise ArenaError(
            f"{exc}. This fits the cluster: {' '.join(f'--set {item}' for item in items)}"
        ) from None
