"""What each role's actors ask Ray for, where they go, and whether the cluster has it.

A role table may say what each of its actors reserves and how they are
placed::

    [solver]
    name = "linear-pg"
    actors = 8
    placement = "spread"            # default | spread | pack | strict-pack | strict-spread
    [solver.resources]
    cpus = 1                        # Ray's num_cpus (default 0: role actors mostly wait)
    gpus = 0                        # num_gpus
    memory = "2GiB"                 # Ray's memory resource: bytes, or with KB/MB/GB/KiB/MiB/GiB
    custom = { "solver-node" = 1 }  # custom resources (``ray start --resources``)

``spread`` asks Ray to put the actors on different nodes where it can;
``pack``, ``strict-pack`` and ``strict-spread`` reserve a placement group of
one bundle per actor (so they need a resource to reserve). The learner (the
Solver that takes the learning step) reserves what a Solver actor does and
the World model its table's, both on the driver's node, which keeps their
state when another node is lost: run the driver where they fit (with Ray
Jobs, ``--entrypoint-num-gpus`` and friends).

:func:`check_resources` compares all of it with the cluster before any actor
starts, so an experiment that cannot be placed stops with the reason instead
of waiting forever for resources that do not exist.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from coevo.arena.errors import ArenaError
from coevo.arena.settings import StrictNumbers
from pydantic import ConfigDict, Field, field_validator

__all__ = [
    "PLACEMENTS",
    "Placement",
    "RoleResources",
    "check_resources",
    "cluster_nodes",
    "parse_bytes",
    "placed",
    "ray_options",
]

Placement = Literal["default", "spread", "pack", "strict-pack", "strict-spread"]
PLACEMENTS: Final = ("default", "spread", "pack", "strict-pack", "strict-spread")

_UNITS: Final = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_bytes(value: int | float | str) -> int:
    """``4294967296``, ``"4GiB"``, ``"512 MB"`` → bytes.

    Raises:
        ValueError: not a size (the message shows the forms taken).
    """
    if isinstance(value, bool):
        raise ValueError("a size, not true/false")
    if isinstance(value, int) and value.bit_length() > 62:  # float() of it may overflow
        raise ValueError(f"a {len(str(value))}-digit number of bytes is more than a machine has")
    if isinstance(value, int | float):
        number, unit = float(value), ""
    else:
        found = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", value)
        if not found or found.group(2).lower() not in _UNITS:
            raise ValueError(
                f"{value!r} is not a size: give bytes (4294967296) or a number with "
                'KB, MB, GB, TB, KiB, MiB, GiB or TiB ("4GiB")'
            )
        number, unit = float(found.group(1)), found.group(2).lower()
    if not number * _UNITS[unit] < 1 << 62:  # int(inf) overflows; no machine has 4 EiB
        raise ValueError(f"{str(value)[:40]!r} is more bytes than a machine has")
    size = int(number * _UNITS[unit])
    if size <= 0:
        raise ValueError("a size above 0")
    return size


class RoleResources(StrictNumbers):
    """``[<role>.resources]``: what each actor of the role reserves.

    Attributes:
        cpus: Ray's ``num_cpus`` per actor.
        gpus: Ray's ``num_gpus`` per actor.
        memory: Ray's ``memory`` resource per actor, in bytes (the file may say ``"2GiB"``), at
            most 1 PiB.
        custom: custom resources per actor (``{"name" = amount}``, each above 0, at most 1e9).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpus: float = Field(default=0.0, ge=0, le=1024)
    gpus: float = Field(default=0.0, ge=0, le=256)
    memory: int | None = Field(default=None, ge=1, le=1 << 50)
    custom: dict[str, float] = Field(default_factory=dict)

    @field_validator("memory", mode="before")
    @classmethod
    def _size(cls, value: Any) -> int | None:
        return None if value is None else parse_bytes(value)

    @field_validator("custom")
    @classmethod
    def _amounts(cls, value: dict[str, float]) -> dict[str, float]:
        for name, amount in value.items():
            if name in {"CPU", "GPU", "memory"}:
                raise ValueError(f"{name!r} is set with cpus, gpus or memory, not custom")
            if not 0 < amount <= 1e9:  # Ray takes at most 1e14 of one resource in all
                raise ValueError(f"custom resource {name!r} needs an amount above 0, at most 1e9")
        return value

    def demand(self) -> dict[str, float]:
        """The resources one actor reserves, in Ray's names (those above 0)."""
        wanted = {"CPU": self.cpus, "GPU": self.gpus, "memory": float(self.memory or 0)}
        wanted.update(self.custom)
        return {k: v for k, v in wanted.items() if v > 0}


def ray_options(resources: RoleResources) -> dict[str, Any]:
    """The ``.options(...)`` that reserve ``resources`` for one actor."""
    options: dict[str, Any] = {"num_cpus": resources.cpus}
    if resources.gpus:
        options["num_gpus"] = resources.gpus
    if resources.memory:
        options["memory"] = resources.memory
    if resources.custom:
        options["resources"] = dict(resources.custom)
    return options


def _fmt(resource: str, amount: float) -> str:
    if resource == "memory":
        return f"{amount / 2**30:.1f} GiB of memory"
    return f"{amount:g} {resource}"


def check_resources(
    wanted: Sequence[tuple[str, int, RoleResources, Placement]],
    singletons: Sequence[tuple[str, RoleResources]],
    nodes: Sequence[Mapping[str, float]],
    driver_node: Mapping[str, float],
) -> None:
    """Refuse what the cluster cannot place: a sum above its total, an actor no node can hold, a singleton the driver's node cannot.

    Args:
        wanted: per role table: its name, its actor count, what each reserves, its placement.
        singletons: the actors pinned to the driver's node (learner, World model), with what they reserve.
        nodes: each live node's total resources.
        driver_node: the resources of the node the driver runs on.

    Raises:
        ArenaError: what does not fit, which table asks for it, and what to change.
    """
    totals: dict[str, float] = {}
    for node in nodes:
        for resource, amount in node.items():
            totals[resource] = totals.get(resource, 0.0) + amount
    needed: dict[str, float] = {}
    asking: dict[str, list[str]] = {}
    for table, actors, res, placement in wanted:
        demand = res.demand()
        if placement in ("pack", "strict-pack", "strict-spread") and not demand:
            raise ArenaError(
                f"{table}.placement = {placement!r} reserves a placement group, which needs "
                f"something to reserve: set [{table}.resources] cpus (or gpus, memory, custom), "
                'or use placement = "spread"'
            )
        if placement == "strict-spread" and actors > len(nodes):
            raise ArenaError(
                f"{table}.placement = 'strict-spread' puts each of its {actors} actors on its own "
                f"node, and the cluster has {len(nodes)}: lower {table}.actors or use 'spread'"
            )
        if demand and not any(_fits(demand, node) for node in nodes):
            raise ArenaError(
                f"no node of this Ray cluster can hold one {table} actor, which reserves "
                f"{', '.join(_fmt(k, v) for k, v in demand.items())} "
                f"(the nodes have: {'; '.join(_node_text(n) for n in nodes) or 'none'}); "
                f"lower [{table}.resources] or add a node that has them"
            )
        for resource, amount in demand.items():
            needed[resource] = needed.get(resource, 0.0) + amount * actors
            asking.setdefault(resource, []).append(f"{table} {actors} × {amount:g}")
    for label, res in singletons:
        demand = res.demand()
        if demand and not _fits(demand, driver_node):
            raise ArenaError(
                f"the {label} lives on the driver's node (its state must outlive other nodes) and "
                f"reserves {', '.join(_fmt(k, v) for k, v in demand.items())}, which that node "
                f"lacks (it has {_node_text(driver_node)}): run the driver on a node that has "
                "them (ray job submit --entrypoint-num-gpus / --entrypoint-resources), or lower "
                "the table's resources"
            )
        for resource, amount in demand.items():
            needed[resource] = needed.get(resource, 0.0) + amount
            asking.setdefault(resource, []).append(f"{label} {amount:g}")
    for resource, amount in sorted(needed.items()):
        have = totals.get(resource, 0.0)
        if amount > have + 1e-9:
            raise ArenaError(
                f"the experiment reserves {_fmt(resource, amount)} "
                f"({', '.join(asking[resource])}) and this Ray cluster has {_fmt(resource, have)}: "
                "lower the actors or their resources, or join a larger cluster with --address"
            )
    _check_packing(wanted, singletons, nodes, driver_node)


def _check_packing(
    wanted: Sequence[tuple[str, int, RoleResources, Placement]],
    singletons: Sequence[tuple[str, RoleResources]],
    nodes: Sequence[Mapping[str, float]],
    driver_node: Mapping[str, float],
) -> None:
    """Refuse actors that fit the cluster's total but not its nodes (five 0.18-CPU actors a 1-CPU node, not six).

    The learner and the World model go on the driver's node first, then every
    actor that reserves something, largest first, on the first node with room
    (a ``strict-spread`` table's each on a node of its own, a ``strict-pack``
    table's all on one): Ray, which places actors one at a time, could not
    place more.
    """
    free = [dict(node) for node in nodes]
    driver = next((i for i, node in enumerate(nodes) if node is driver_node), None)
    if driver is None:
        driver = next((i for i, node in enumerate(nodes) if node == driver_node), 0)
    for _, res in singletons:
        for resource, amount in res.demand().items():
            if free:
                free[driver][resource] = free[driver].get(resource, 0.0) - amount
    order = sorted(
        (t for t in wanted if t[2].demand()),
        key=lambda t: -max(t[2].demand().values()),
    )
    for table, actors, res, placement in order:
        demand = res.demand()
        used: set[int] = set()
        placed_count = 0
        for _ in range(actors):
            candidates = [
                i
                for i, node in enumerate(free)
                if _fits(demand, node)
                and not (placement == "strict-spread" and i in used)
                and not (placement == "strict-pack" and used and i not in used)
            ]
            if not candidates:
                break
            node = free[candidates[0]]
            for resource, amount in demand.items():
                node[resource] = node.get(resource, 0.0) - amount
            used.add(candidates[0])
            placed_count += 1
        if placed_count < actors:
            raise ArenaError(
                f"the cluster's nodes hold {placed_count} of the {actors} {table} actors, each "
                f"reserving {', '.join(_fmt(k, v) for k, v in demand.items())}, beside the "
                "other tables' actors (the total fits, the nodes one by one do not: the nodes "
                f"have {'; '.join(_node_text(n) for n in nodes)}): lower [{table}.resources] or "
                f"{table}.actors, or add a node"
            )


def _fits(demand: Mapping[str, float], node: Mapping[str, float]) -> bool:
    return all(node.get(k, 0.0) + 1e-9 >= v for k, v in demand.items())


def _node_text(node: Mapping[str, float]) -> str:
    shown = [
        _fmt(k, v)
        for k, v in sorted(node.items())
        if not k.startswith("node:") and k not in {"object_store_memory"}
    ]
    return ", ".join(shown) or "nothing"


_STRATEGIES: Final = {
    "pack": "PACK",
    "strict-pack": "STRICT_PACK",
    "strict-spread": "STRICT_SPREAD",
}


def placed(
    table: str, actors: int, res: RoleResources, placement: Placement, wait: float = 120.0
) -> tuple[list[dict[str, Any]], Any]:
    """Each actor's ``.options(...)`` for a role table, and the placement group made for it (or None).

    Raises:
        ArenaError: the placement group was not ready within ``wait`` seconds (the cluster
            cannot place it now).
    """
    # lazy: an experiment file's tables are read before Ray may be imported (a local run
    # sets RAY_AUTH_MODE first, and Ray reads it once, at import)
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    base = ray_options(res)
    if placement == "default":
        return [dict(base) for _ in range(actors)], None
    if placement == "spread":
        return [{**base, "scheduling_strategy": "SPREAD"} for _ in range(actors)], None
    group = placement_group([res.demand()] * actors, strategy=_STRATEGIES[placement])
    ready, _ = ray.wait([group.ready()], timeout=wait)
    if not ready:
        remove_placement_group(group)
        raise ArenaError(
            f"Ray could not place {table}'s {actors} actors ({placement}, each "
            f"{', '.join(_fmt(k, v) for k, v in res.demand().items())}) within {wait:g} s: "
            "the cluster has the resources in all but not where this placement needs them; "
            'use placement = "spread" or "default", or fewer actors'
        )
    return [
        {
            **base,
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                group, placement_group_bundle_index=i
            ),
        }
        for i in range(actors)
    ], group


def cluster_nodes() -> tuple[list[dict[str, float]], dict[str, float]]:
    """Each live node's total resources, and the driver's node's."""
    import ray  # lazy: as in placed()

    here = ray.get_runtime_context().get_node_id()
    nodes, mine = [], {}
    for node in ray.nodes():
        if node.get("Alive"):
            nodes.append(dict(node.get("Resources", {})))
            if node.get("NodeID") == here:
                mine = nodes[-1]
    return nodes, mine
