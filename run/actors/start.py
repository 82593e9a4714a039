"""Where the roles play: Ray actors, or hosts in this process (``[ray] in_process``).

A run's roles are hosts (:mod:`coevo.run.actors.hosts`), each called the way a Ray
actor is: ``actor.method.remote(*args)`` gives a reference, :func:`get`
gives its value. With Ray (the default) a host is an actor in a process of
its own, restarted when it dies, placed as its role table asks. With
``[ray] in_process = true`` every host is an object in the driver's process
(:class:`LocalActor`): no Ray, no worker processes, one call at a time per
host as on Ray, each call run when it is made; the arguments and the result
are deep copies, as Ray's transport makes them, so a role never shares an
object with the loop. The log is the same either way (a test compares them);
what only Ray gives is restarts, placement, resources and clusters, so an
in-process run is for debugging with a debugger, and for tests.

:mod:`coevo.run.actors.inprocess` holds the in-process hosts and the functions that
take a reference of either kind; :meth:`Actors.put` makes the reference the
run's actors take.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray
from coevo.agents.registry import REGISTRY
from coevo.arena.errors import ArenaError
from coevo.run.actors.capacity import check_cluster
from coevo.run.actors.connection import ends_with_this_driver, joined_address
from coevo.run.actors.hosts import host_for, remote_host
from coevo.run.actors.inprocess import LocalActor, LocalRef, kill
from coevo.run.actors.pool import ActorPool
from coevo.run.actors.resources import placed, ray_options
from coevo.run.experiment import Experiment, RoleTable
from ray.util.placement_group import remove_placement_group
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

__all__ = ["Actors", "start_actors", "start_hosts"]


@dataclass
class Actors:
    """A run's actors: a pool per role that scales, and the stateful singletons.

    Attributes:
        synth, judges, solvers: the pools.
        learner: the Solver's learner.
        model: the World model.
        synth_learner: a Synthesizer that learns: its learner (else None).
        in_process: hosts in this process, not Ray actors.
        groups: the placement groups made for the role tables.
    """

    synth: ActorPool
    judges: ActorPool
    solvers: ActorPool
    learner: Any
    model: Any
    synth_learner: Any
    in_process: bool
    groups: list[Any] = field(default_factory=list)

    def put(self, value: Any) -> Any:
        """A reference to ``value`` that these actors take (Ray's object store, or in-process)."""
        return LocalRef(value) if self.in_process else ray.put(value)

    @property
    def labelled(self) -> list[tuple[str, Any]]:
        """Every actor with its label in the events (``solver-0``, ``learner``, ...)."""
        return [
            *((f"synthesizer-{i}", a) for i, a in enumerate(self.synth.actors)),
            *((f"judge-{i}", a) for i, a in enumerate(self.judges.actors)),
            *((f"solver-{i}", a) for i, a in enumerate(self.solvers.actors)),
            ("learner", self.learner),
            ("world_model", self.model),
            *([("synthesizer-learner", self.synth_learner)] if self.synth_learner else []),
        ]

    def close(self) -> None:
        """Kill the actors and remove their placement groups (on Ray this driver shuts down, Ray's shutdown does)."""
        if not self.in_process and ends_with_this_driver():
            return  # killing them now makes Ray print a failed-task line per call in flight
        for _, actor in self.labelled:
            kill(actor)
        for group in self.groups:
            remove_placement_group(group)


def start_hosts(
    host: type,
    args: tuple[Any, ...],
    options: Sequence[dict[str, Any]],
    *,
    in_process: bool,
    made_as: str,
    remote: Any = None,
) -> list[Any]:
    """One host of class ``host`` built from ``args`` per entry of ``options``: the one way coevo starts actors.

    In this process each is a :class:`LocalActor` (a constructor that raises
    is said as the pool says it on Ray, naming ``made_as``); on Ray each is
    an actor of ``remote`` (default ``ray.remote(host)``) with its options,
    and a constructor that fails is named by the pool at the first call.

    Raises:
        ArenaError: in process, the constructor raised.
    """
    if in_process:
        made = []
        for _ in options:
            try:
                made.append(LocalActor(host(*args)))
            except (
                Exception
            ) as exc:  # the role's own error, whatever its class: say it as Ray's path does
                raise ArenaError(
                    f"the {made_as} could not be made, its constructor raised: {exc} "
                    "(a setting in its table of the experiment file, or its environment)"
                ) from exc
        return made
    actor_class = remote if remote is not None else ray.remote(host)
    return [actor_class.options(**o).remote(*args) for o in options]


def start_actors(exp: Experiment, progress: Callable[[str], None] | None = None) -> Actors:
    """Start every actor of ``exp`` (on Ray, joined already; or in this process).

    ``progress(text)`` is told what is starting and, on Ray, how many of each role's
    actors are up (``solver: 2/4 up``), for the status line while a run starts.

    Raises:
        ArenaError: the cluster cannot hold the role tables (Ray), or a role cannot be made
            (in-process; on Ray the pool says so at the first call).
    """
    in_process = exp.ray.in_process
    groups: list[Any] = []
    if not in_process:
        check_cluster(
            exp, joined_address()
        )  # before any actor: Ray would wait forever for what is not there
        here = ray.get_runtime_context().get_node_id()
    settings = exp.role_settings()
    say = progress or (lambda text: None)
    started: list[tuple[str, list[Any]]] = []  # on Ray: each role's actors, to wait for

    def actors(table: str, n: int, restarts: bool, label: str = "") -> list[Any]:
        role: RoleTable = getattr(exp, table)
        info = REGISTRY.get(role.name)
        env = {k: os.environ[k] for k in info.env(settings[table]).passed if k in os.environ}
        label = label or table.replace("_", " ")
        args = (role.name, role.config, env)
        if in_process:
            made = []
            for i in range(n):
                say(f"starting the {label} {role.name!r}" + (f" ({i + 1}/{n})" if n > 1 else ""))
                made += start_hosts(host_for(info.kind), args, [{}], in_process=True, made_as=table)
            return made
        say(f"starting {n} {label} actor{'s' * (n > 1)} ({role.name!r})")
        if restarts:
            each, group = placed(table, n, role.resources, role.placement)
            groups.extend([group] if group is not None else [])
            each = [{**o, "max_restarts": 4, "max_task_retries": 4} for o in each]
        else:
            # stateful singletons (the learner, the World model) live on the driver's node:
            # losing another node must not lose their state
            affinity = NodeAffinitySchedulingStrategy(here, soft=False)
            each = [{**ray_options(role.resources), "scheduling_strategy": affinity}] * n
        handles = start_hosts(
            host_for(info.kind), args, each, in_process=False, made_as=table,
            remote=remote_host(info.kind),
        )  # fmt: skip
        started.append((label, handles))
        return handles

    # what the Synthesizer can do, from its class (no call: a constructor error is the pool's)
    able = set(REGISTRY.get(exp.synthesizer.name).capabilities)
    learns = {"learns", "stateful"} <= able
    made = Actors(
        synth=ActorPool("synthesizer", actors("synthesizer", exp.synthesizer.actors, True)),
        judges=ActorPool("judge", actors("judge", exp.judge.actors, True)),
        solvers=ActorPool("solver", actors("solver", exp.solver.actors, True)),
        learner=actors("solver", 1, False, "learner")[0],
        model=actors("world_model", 1, False)[0],
        synth_learner=actors("synthesizer", 1, False, "synthesizer learner")[0] if learns else None,
        in_process=in_process,
        groups=groups,
    )
    _count_up(started, say)
    return made


def _count_up(started: list[tuple[str, list[Any]]], say: Callable[[str], None]) -> None:
    """Wait until every actor of ``started`` is up (its constructor returned or failed), saying how many of each role are.

    A constructor that failed is not raised here: the pool names it at the role's first call.
    """
    waiting = {a.__ray_ready__.remote(): label for label, handles in started for a in handles}
    total = {label: len(handles) for label, handles in started}
    up = dict.fromkeys(total, 0)
    while waiting:
        ready, _ = ray.wait(list(waiting), num_returns=1)
        label = waiting.pop(ready[0])
        up[label] += 1
        say(f"{label}: {up[label]}/{total[label]} up")
