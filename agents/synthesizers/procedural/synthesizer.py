"""The procedural Synthesizer role: tasks in seeded professional worlds, aimed at a difficulty target."""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Final

from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.initial import initial_state
from coevo.agents.synthesizers.planner import Target, TaskSampler, Unfit
from coevo.agents.synthesizers.procedural.domains import DOMAINS, domain_named
from coevo.arena.errors import CoevoError, ConfigError
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import SUBMIT, TaskSpec, ToolCall, WorldSpec

__all__ = ["ProceduralSynthesizer"]


class ProceduralSynthesizer:
    """Proposes tasks in procedural worlds (no network, no API key).

    One world per (domain, world seed) serves every task drawn in it; task
    ``i`` of a request is drawn with ``Random(derive_seed(seed, "task", i))``, so the same
    request gives the same tasks, byte for byte.

    Args:
        domains: the domains to draw from (default: every registered domain).
        world_pool: when set, world seeds are ``seed % world_pool``, so many
            requests share a few worlds (what a long run wants); by default
            each request seed gets its own world.
        attempts: draws per task before giving up on a target.
        tool_subset: when set, each task's world offers only the tools its
            reference solution calls and ``tool_subset`` other tools of the
            world (drawn with the task's seed): the same rows and schema behind
            a short tool list, for small models, whose prompt the whole list
            would fill (every such world is a record of its own, judged as any).
        families: the task families drawn when a request names none (default: every
            family the level has).
        relay_share: the share of question tasks made *relays* (:func:`relayed`): the
            instruction states the answer and the reference solution is one call,
            ``submit(answer)``: the protocol's smallest task (level 1, one step), for a
            model that cannot make a tool call yet (0: none).
    """

    name = "procedural"

    def __init__(
        self,
        domains: Sequence[str] | None = None,
        *,
        world_pool: int | None = None,
        attempts: int = 400,
        tool_subset: int | None = None,
        families: Sequence[str] | None = None,
        relay_share: float = 0.0,
    ):
        self.domains = [domain_named(d).name for d in domains] if domains else list(DOMAINS)
        if world_pool is not None and world_pool < 1:
            raise ValueError(f"world_pool must be at least 1, not {world_pool}")
        if tool_subset is not None and tool_subset < 0:
            raise ValueError(f"tool_subset must be at least 0, not {tool_subset}")
        self.world_pool = world_pool
        self.attempts = attempts
        self.tool_subset = tool_subset
        if not 0.0 <= relay_share <= 1.0:
            raise ValueError(f"relay_share must be between 0 and 1, not {relay_share}")
        self.relay_share = relay_share
        self.families = list(families) if families else None
        self._samplers: OrderedDict[tuple[str, int], TaskSampler] = OrderedDict()
        self.misses: list[str] = []

    @classmethod
    def preflight(cls, settings: Any) -> None:
        """Check the settings before a run starts (else every synthesizer actor fails to start).

        Raises:
            ConfigError: an unknown domain, or a ``world_pool`` or ``attempts`` below 1.
        """
        given = settings.arguments()
        problems = []
        for domain in given.get("domains") or []:
            try:
                domain_named(domain)
            except CoevoError as exc:
                problems.append(str(exc))
        for key in ("world_pool", "attempts"):
            if given.get(key) is not None and given[key] < 1:
                problems.append(f"{key} must be at least 1, not {given[key]}")
        if given.get("tool_subset") is not None and given["tool_subset"] < 0:
            problems.append(f"tool_subset must be at least 0, not {given['tool_subset']}")
        if given.get("families"):
            try:
                Target.of(None, {}, given["families"])
            except ValueError as exc:
                problems.append(f"families: {exc}")
        if not 0.0 <= given.get("relay_share", 0.0) <= 1.0:
            problems.append(f"relay_share must be between 0 and 1, not {given['relay_share']}")
        if problems:
            raise ConfigError(f"the synthesizer {cls.name!r}: " + "; ".join(problems))

    def world_seed(self, seed: int) -> int:
        """The seed of the world a request seed draws its tasks in."""
        return seed % self.world_pool if self.world_pool else seed

    def sampler(self, domain: str, world_seed: int) -> TaskSampler:
        """The task sampler of one world (built once, a few kept)."""
        key = (domain, world_seed)
        if key in self._samplers:
            self._samplers.move_to_end(key)
            return self._samplers[key]
        spec = domain_named(domain).build_world(world_seed)
        sampler = TaskSampler(domain_named(domain).catalog, initial_state(spec), spec)
        self._samplers[key] = sampler
        while len(self._samplers) > 8:
            _, old = self._samplers.popitem(last=False)
            old.conn.close()
        return sampler

    def world(self, domain: str, seed: int) -> WorldSpec:
        """The world record a request with ``seed`` draws ``domain`` tasks in."""
        return self.sampler(domain, self.world_seed(seed)).world

    def propose(self, request: ProposalRequest) -> list[TaskSpec]:
        """``request.n`` tasks for the request's level, features, domains and families.

        A task whose target cannot be met in its domain is left out and the
        reason kept in :attr:`misses`.

        Raises:
            CoevoError: an unknown domain, level or family, or not one task could be made.
            ValueError: an impossible target (a family asked for at a level it does not reach).
        """
        self.misses = []
        tasks = [t for i in range(request.n) if (t := self.draw(request, i)) is not None]
        if request.n and not tasks:
            raise CoevoError(self.misses[0])
        return tasks

    def draw(self, request: ProposalRequest, index: int) -> TaskSpec | None:
        """Task ``index`` of ``request`` (drawn with ``Random(derive_seed(seed, "task", index))``), or None with the miss recorded."""
        domains = (
            [domain_named(d).name for d in request.domains] if request.domains else self.domains
        )
        target = Target.of(request.level, request.features, request.families or self.families)
        rng = random.Random(derive_seed(request.seed, "task", index))
        domain = domains[rng.randrange(len(domains))]
        sampler = self.sampler(domain, self.world_seed(request.seed))
        provenance: dict[str, Any] = {
            "synthesizer": f"procedural/{domain}",
            "seed": request.seed,
            "index": index,
        }
        if request.level is not None:
            provenance["level"] = request.level
        try:
            task = sampler.sample(rng, target, attempts=self.attempts, provenance=provenance)
        except Unfit as exc:
            self.misses.append(str(exc))
            return None
        if self.tool_subset is not None:
            task = narrowed(task, self.tool_subset, rng)
        if self.relay_share and task.features.get("question") and rng.random() < self.relay_share:
            task = relayed(task)
        return task


RELAY_FEATURES: Final = {
    "difficulty": 1.0,
    "steps": 1,
    "hops": 0,
    "writes": 0,
    "distractors": 0,
    "branching": 0,
    "result_rows": 0,
    "aggregates": 0,
    "question": 1,
}
"""A relay's measured features: one call (``submit``), nothing to find."""


def relayed(task: TaskSpec) -> TaskSpec:
    """A question ``task`` whose instruction states its answer: the reference solution is ``submit(answer)`` alone.

    The verifier is the question's (so the answer is checked as before); the
    world keeps its tools; the plan is dropped from the provenance (a relay is
    no plan's realisation, and mutation operators leave it alone).
    """
    answer = str(task.solution[-1].arguments.get("answer", ""))
    provenance = {k: v for k, v in task.provenance.items() if k != "plan"}
    return task.model_copy(
        update={
            "id": None,
            "instruction": f"{task.instruction} (The answer is {answer}: submit it.)",
            "solution": [ToolCall(SUBMIT, {"answer": answer})],
            "features": dict(RELAY_FEATURES),
            "provenance": {**provenance, "relay": True},
        }
    )


def narrowed(task: TaskSpec, others: int, rng: random.Random) -> TaskSpec:
    """``task`` in a copy of its world that offers only the tools its solution calls and ``others`` more."""
    assert isinstance(task.world, WorldSpec)
    called = {c.tool for c in task.solution}
    rest = sorted(t.name for t in task.world.tools if t.name not in called)
    kept = called | set(rng.sample(rest, min(others, len(rest))))
    world = task.world.model_copy(
        update={"id": None, "tools": [t for t in task.world.tools if t.name in kept]}
    )
    return task.model_copy(update={"id": None, "world": world})
