"""``learned-synth``: a Synthesizer that learns, by policy gradient on the proposer reward, which tasks to propose.

Each task is drawn from a *design* (:mod:`.policy`, :mod:`.design`): a value
for each of the procedural planner's choice points — the world (a procedural
domain or a mined database), the family, the rows written, the look-ups, and
whether picks state filters, use superlatives and face distractors. The
design becomes a planner target and sampler knobs; when the world cannot
realise it, it is relaxed step by step. The design drawn, the options
offered and what the task realised are kept in ``provenance["design"]``.

:meth:`LearnedSynthesizer.learn` reads everything it needs from the feedback
(the design is in the feedback's provenance), never from a memory of its own
proposals, so it learns from tasks another actor proposed, a generation late,
exactly as from its own. It is REINFORCE over the choice points the task
realised as drawn: the gradient is the mean over the feedback of
``(r − b) · ∇ log π(drawn)`` per point, with ``b`` a running mean of the
rewards of the generations before (:data:`BASELINE_MEMORY`), and the step an
Adam step of size ``lr`` (:meth:`DesignPolicy.apply`). A baseline that lags
matters: when the Solver masters the band the policy prefers, every
proposal there earns less than the baseline remembers, and the policy moves
off it at once.
"""

from __future__ import annotations

import math
import random
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
from coevo.agents.protocols import LearnStats, ProposalFeedback, ProposalRequest
from coevo.agents.synthesizers.learned.design import (
    WRITES_OF_FAMILY,
    Design,
    feasible_hops,
    realisations,
    realised,
)
from coevo.agents.synthesizers.learned.policy import CHOICE_POINTS, SWITCH, DesignPolicy
from coevo.agents.synthesizers.mining import Miner
from coevo.agents.synthesizers.planner import FAMILIES, FAMILY_LEVELS, Target, TaskSampler, Unfit
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer, domain_named
from coevo.arena.errors import CoevoError, ConfigError, StateError
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import TaskSpec
from coevo.arena.state import pack_state, unpack_state

__all__ = ["LearnedSynthesizer"]

_ROLE = "learned-synth"

_LEAST_EXTRA: Final = {"question": 1.0, "action": 2.0, "conditional": 3.5, "bulk": 3.0}
"""The least a task of each family adds to its look-ups' difficulty (submit, writes, a branch)."""

BASELINE_MEMORY: Final = 0.8
"""The running baseline keeps this share of itself at each update (the rest is the new batch's mean reward)."""


def _within(value: float, bounds: tuple[float, float] | None) -> bool:
    return bounds is None or bounds[0] <= value <= bounds[1]


def _switch(offered: bool, bounds: tuple[float, float] | None = None) -> tuple[str, ...]:
    """The yes/no options of a point: both when it applies, else ``no`` (narrowed by a hard range on a count)."""
    if not offered:
        return ("no",)
    if bounds is not None and bounds[1] < 1:
        return ("no",)
    if bounds is not None and bounds[0] >= 1:
        return ("yes",)
    return SWITCH


class LearnedSynthesizer:
    """A Synthesizer whose proposals follow a policy over the planner's choice points, learnt from the proposer reward.

    It takes the procedural synthesizer's settings (``domains``,
    ``world_pool``, ``attempts``), so it can replace ``procedural`` in an
    experiment file as is. By default it proposes from its own policy and
    treats a request's level as a hint it ignores; a request's domains,
    families and explicit feature ranges are always honoured.

    Args:
        domains: the procedural domains to draw in (default: every one; ``[]``
            with ``databases``: none).
        world_pool: as the procedural synthesizer's: world seeds are ``seed % world_pool``.
        attempts: planner draws per task before a design is relaxed one step
            (a step after the first gets a quarter of them).
        follow_requests: when true, a request's level is a hard constraint (its
            difficulty band and families), and the design is drawn within it;
            a request that is ``binding`` (the eval suite's) is always followed, and
            over procedural domains it is the procedural synthesizer's own (the same
            held-out suite as a run with ``procedural``).
        lr: the step size of the policy's Adam steps (in logits).
        epsilon: the uniform share mixed into every choice (exploration that
            never dies out: no option's probability falls below ε / options).
        temperature: the softmax temperature of every choice.
        databases: SQLite files whose mined worlds join the ``domain`` choice
            (each mined once, when the synthesizer is made).
    """

    name = _ROLE
    kind = "synthesizer"

    def __init__(
        self,
        domains: Sequence[str] | None = None,
        *,
        world_pool: int | None = None,
        attempts: int = 400,
        follow_requests: bool = False,
        lr: float = 0.3,
        epsilon: float = 0.05,
        temperature: float = 1.0,
        databases: list[str] | None = None,
    ):
        if not 0 < lr <= 10:
            raise ValueError(f"lr must be in (0, 10], not {lr}")
        if attempts < 1:
            raise ValueError(f"attempts must be at least 1, not {attempts}")
        only_mined = domains is not None and not list(domains) and bool(databases)
        self.procedural = ProceduralSynthesizer(
            None if only_mined else domains, world_pool=world_pool, attempts=attempts
        )
        self.domains: list[str] = [] if only_mined else list(self.procedural.domains)
        self.world_pool = world_pool
        self.attempts = attempts
        self.follow_requests = follow_requests
        self.lr = lr
        self.miners: dict[str, Miner] = {}
        for path in databases or []:
            miner = Miner(path, attempts=attempts)
            name, n = miner.world.domain, 2
            while name in self.miners or name in self.domains:
                name, n = f"{miner.world.domain}#{n}", n + 1
            self.miners[name] = miner
        self.worlds: list[str] = [*self.domains, *self.miners]
        self.policy = DesignPolicy(self.worlds, epsilon=epsilon, temperature=temperature)
        self.updates = 0
        self.baseline: float | None = None
        self.misses: list[str] = []
        self._hops: dict[tuple[str, int, str], list[int]] = {}

    @classmethod
    def preflight(cls, settings: Any) -> None:
        """Check the settings before a run starts (else every synthesizer actor fails to start).

        Raises:
            ConfigError: a value out of range, an unknown domain or a database that is not there.
        """
        given = settings.arguments()
        problems = []
        if not 0 < given.get("lr", 0.3) <= 10:
            problems.append(f"lr must be in (0, 10], not {given['lr']}")
        if given.get("attempts", 400) < 1:
            problems.append(f"attempts must be at least 1, not {given['attempts']}")
        if not 0 <= given.get("epsilon", 0.05) < 1:
            problems.append(f"epsilon must be in [0, 1), not {given['epsilon']}")
        if given.get("temperature", 1.0) <= 0:
            problems.append(f"temperature must be positive, not {given['temperature']}")
        for domain in given.get("domains") or []:
            try:
                domain_named(domain)
            except CoevoError as exc:
                problems.append(str(exc))
        problems += [
            f"databases: {path} is not a file; give the path of an SQLite database"
            for path in given.get("databases") or []
            if not Path(path).is_file()
        ]
        if problems:
            raise ConfigError(f"the synthesizer {_ROLE!r}: " + "; ".join(problems))

    # ---- proposing ----------------------------------------------------------------------

    def policy_version(self) -> str:
        """How its tasks are signed: ``learned-synth@<updates>``."""
        return f"{_ROLE}@{self.updates}"

    def distribution(self) -> dict[str, dict[str, float]]:
        """Each choice point's probabilities by option (as text: ``{"hops": {"1": 0.2, ...}, ...}``), before any mask."""
        return self.policy.distribution()

    def propose(self, request: ProposalRequest) -> list[TaskSpec]:
        """Up to ``request.n`` tasks, each from a design drawn from the policy (see the module).

        A task none of whose relaxations could be realised is left out and the
        reason kept in :attr:`misses`.

        Raises:
            CoevoError: the request's domains name none of this synthesizer's
                worlds, or not one task could be made.
            ValueError: an unknown family, or families that do not reach a followed level.
        """
        self.misses = []
        if request.binding and not any(w in self.miners for w in self._offered_worlds(request)):
            # the held-out suite is the yardstick every setup is measured by: over procedural
            # domains it is the procedural synthesizer's, whatever this one has learnt, so a
            # run with learned-synth and one with procedural share it (benchmarks compare them)
            return self.procedural.propose(request)
        tasks = [t for i in range(request.n) if (t := self.draw(request, i)) is not None]
        if request.n and not tasks:
            raise CoevoError(self.misses[0])
        return tasks

    def _offered_worlds(self, request: ProposalRequest) -> list[str]:
        if not request.domains:
            return list(self.worlds)
        offered = [w for w in self.worlds if w in request.domains]
        if not offered:
            raise CoevoError(
                f"the request asks for domains {request.domains}, but this learned-synth draws in "
                f"{self.worlds}; add them to the synthesizer's `domains` (or `databases`)"
            )
        return offered

    def _sampler(self, world: str, seed: int) -> tuple[TaskSampler, int, dict[str, Any]]:
        """The sampler of ``world`` for a request seed, its world seed, and the provenance its tasks start with."""
        if world in self.miners:
            miner = self.miners[world]
            return miner.sampler, 0, {"synthesizer": "miner", "source": miner.path.name}
        world_seed = self.procedural.world_seed(seed)
        sampler = self.procedural.sampler(world, world_seed)
        return sampler, world_seed, {"synthesizer": f"procedural/{world}"}

    def _feasible(
        self, world: str, world_seed: int, sampler: TaskSampler, family: str
    ) -> list[int]:
        key = (world, world_seed, family)
        if key not in self._hops:
            self._hops[key] = feasible_hops(sampler, family)
        return self._hops[key]

    def _wanted_families(self, request: ProposalRequest, level: int | None) -> list[str]:
        wanted = list(request.families or FAMILIES)
        unknown = [f for f in wanted if f not in FAMILIES]
        if unknown:
            raise ValueError(
                f"unknown task family {unknown[0]!r}; choose from {', '.join(FAMILIES)}"
            )
        if level is not None:
            wanted = [f for f in wanted if level in FAMILY_LEVELS[f]]
            if not wanted:
                raise ValueError(f"no family asked for reaches level {level}")
        return wanted

    def draw(self, request: ProposalRequest, index: int) -> TaskSpec | None:
        """Task ``index`` of ``request``, or None with the miss recorded.

        The design is drawn with ``Random(derive_seed(seed, "design", index))``
        and the planner's draws with ``Random(derive_seed(seed, "task", index))``,
        so the same policy state and request give the same task.
        """
        # a binding request (the eval suite's) is met whatever the policy prefers
        level = request.level if self.follow_requests or request.binding else None
        hard = Target.of(level, request.features)
        rng = random.Random(derive_seed(request.seed, "design", index))
        offered: dict[str, list[Any]] = {"domain": self._offered_worlds(request)}
        world = self.policy.draw(rng, "domain", offered["domain"])
        sampler, world_seed, provenance = self._sampler(world, request.seed)
        top = hard.ranges.get("difficulty", (0.0, math.inf))[1]
        by_family = {
            f: [
                h
                for h in self._feasible(world, world_seed, sampler, f)
                if _within(h, hard.ranges.get("hops")) and h + _LEAST_EXTRA[f] <= top
            ]
            for f in self._wanted_families(request, level)
        }
        design = self._design(rng, world, by_family, hard, offered)
        if design is None:
            self.misses.append(
                f"task {index}: no family of {list(by_family)} has a walk of the wanted length in {world}"
            )
            return None
        record: dict[str, Any] = {
            "drawn": design.to_json(),
            "offered": offered,
            "policy": self.policy_version(),
            "followed_level": level,
        }
        if request.level is not None and level is None:
            record["ignored_level"] = request.level
        provenance = {**provenance, "seed": request.seed, "index": index}
        if level is not None:
            provenance["level"] = level
        task_rng = random.Random(derive_seed(request.seed, "task", index))
        reachable = [f for f in FAMILIES if by_family.get(f)]
        reasons = []
        for step, attempt in enumerate(realisations(design, hard, reachable)):
            try:
                task = sampler.sample(
                    task_rng,
                    attempt.target,
                    attempts=self.attempts if step == 0 else max(1, self.attempts // 4),
                    provenance=provenance,
                    filter_share=attempt.filter_share,
                    order_share=attempt.order_share,
                )
            except Unfit as exc:
                reasons.append(str(exc).split(" (")[0])
                continue
            except (sqlite3.Error, ValueError, TypeError, KeyError) as exc:
                # a mined database's data the planner cannot plan over
                reasons.append(f"the planner failed on this data ({type(exc).__name__}: {exc})")
                continue
            record["relaxed"] = list(attempt.relaxed)
            record["realized"] = realised(task, world)
            return task.model_copy(update={"provenance": {**task.provenance, "design": record}})
        self.misses.append(f"task {index}: design {design.to_json()} not realised ({reasons[-1]})")
        return None

    def _design(
        self,
        rng: random.Random,
        world: str,
        by_family: Mapping[str, list[int]],
        hard: Target,
        offered: dict[str, list[Any]],
    ) -> Design | None:
        """A design in ``world`` (None when no family has a walk), with the options offered at each point (into ``offered``)."""
        offered["hops"] = sorted({h for hops in by_family.values() for h in hops})
        if not offered["hops"]:
            return None
        hops = self.policy.draw(rng, "hops", offered["hops"])
        offered["family"] = [f for f in FAMILIES if hops in by_family.get(f, ())]
        family = self.policy.draw(rng, "family", offered["family"])
        offered["writes"] = [
            w for w in WRITES_OF_FAMILY[family] if _within(w, hard.ranges.get("writes"))
        ] or list(WRITES_OF_FAMILY[family])
        writes = self.policy.draw(rng, "writes", offered["writes"])
        # the picks the knobs steer: down hops, less a bulk task's last (every row) and,
        # for filters, a conditional task's last (unfiltered, or the branch is given away)
        steered = hops - 1 - (family == "bulk")
        offered["filters"] = list(_switch(steered - (family == "conditional") >= 1))
        offered["superlatives"] = list(_switch(steered >= 1))
        offered["distractors"] = list(_switch(True, hard.ranges.get("distractors")))
        return Design(
            domain=world,
            hops=hops,
            family=family,
            writes=writes,
            filters=self.policy.draw(rng, "filters", offered["filters"]),
            superlatives=self.policy.draw(rng, "superlatives", offered["superlatives"]),
            distractors=self.policy.draw(rng, "distractors", offered["distractors"]),
        )

    # ---- learning -----------------------------------------------------------------------

    def _credits(self, record: Mapping[str, Any]) -> list[tuple[str, list[Any], Any]]:
        """(point, offered, drawn) for each choice point a design realised as drawn."""
        drawn, offered = record.get("drawn"), record.get("offered")
        made = record.get("realized")
        if not all(isinstance(x, Mapping) for x in (drawn, offered, made)):
            return []
        assert isinstance(drawn, Mapping) and isinstance(offered, Mapping)
        assert isinstance(made, Mapping)
        if drawn.get("domain") not in self.worlds:
            return []  # drawn by a synthesizer over other worlds
        out = []
        for point in CHOICE_POINTS:
            options = offered.get(point)
            if not isinstance(options, list) or point not in drawn:
                continue
            if made.get(point) == drawn[point]:
                out.append((point, options, drawn[point]))
        return out

    def learn(self, feedback: Sequence[ProposalFeedback]) -> LearnStats:
        """One policy-gradient step from the feedback on a generation's proposals (see the module).

        Feedback without a reward (an accepted task nobody played), whose
        reward is not a finite number, or whose provenance holds no design
        (a task this role did not draw, or drew over other worlds) is
        skipped and counted (``extra["skipped"]``).
        """
        usable = [
            (fb, credits)
            for fb in feedback
            if fb.reward is not None
            and math.isfinite(fb.reward)
            and isinstance(design := fb.provenance.get("design"), Mapping)
            and (credits := self._credits(design))
        ]
        rewards = [float(fb.reward or 0.0) for fb, _ in usable]  # all set: filtered above
        extra: dict[str, Any] = {"skipped": len(feedback) - len(usable)}
        if not usable:
            return LearnStats(episodes=len(feedback), updates=0, extra=extra)
        mean = sum(rewards) / len(rewards)
        baseline = mean if self.baseline is None else self.baseline
        gradient = self.policy.zeros()
        credited = 0
        for (_, credits), reward in zip(usable, rewards, strict=True):
            for point, options, chosen in credits:
                credited += self.policy.credit(gradient, point, options, chosen, reward - baseline)
        for grad in gradient.values():
            grad /= len(usable)
        self.policy.apply(gradient, self.lr)
        memory = BASELINE_MEMORY if self.baseline is not None else 0.0
        self.baseline = memory * baseline + (1 - memory) * mean
        self.updates += 1
        extra.update(
            credited=credited,
            baseline=round(baseline, 6),
            mean_reward=round(mean, 6),
            entropy=round(self.policy.entropy(), 6),
        )
        return LearnStats(episodes=len(feedback), updates=1, loss=-mean, extra=extra)

    # ---- state --------------------------------------------------------------------------

    def get_state(self) -> bytes:
        """The policy as ``coevo.state/1``: its logits and Adam moments, the update count, the baseline.

        The meta holds ``worlds`` (the ``domain`` point's options, in order),
        ``updates``, ``steps`` (Adam's) and ``baseline`` (null before the first
        update); the arrays are ``logits/<point>``, ``m/<point>`` and
        ``v/<point>`` for each choice point.
        """
        policy = self.policy
        meta = {
            "worlds": self.worlds,
            "updates": self.updates,
            "steps": policy.steps,
            "baseline": self.baseline,
        }
        arrays = {
            f"{kind}/{name}": values[name]
            for kind, values in (
                ("logits", policy.logits),
                ("m", policy.moments),
                ("v", policy.squares),
            )
            for name in CHOICE_POINTS
        }
        return pack_state(_ROLE, 1, meta, arrays)

    def set_state(self, state: bytes) -> None:
        """Load what :meth:`get_state` returned.

        Raises:
            StateError: not a learned-synth state, or one made over other worlds.
        """
        loaded = unpack_state(state, role=_ROLE, versions={1})
        worlds = loaded.meta.get("worlds")
        if worlds != self.worlds:
            raise StateError(
                f"this learned-synth state was made over the worlds {worlds}, but this one draws in "
                f"{self.worlds}; give it the same `domains` and `databases`"
            )
        found: dict[str, dict[str, np.ndarray]] = {"logits": {}, "m": {}, "v": {}}
        for kind, values in found.items():
            for name in CHOICE_POINTS:
                got = loaded.arrays.get(f"{kind}/{name}")
                wanted = self.policy.logits[name].shape
                if got is None or got.shape != wanted:
                    raise StateError(
                        f"the learned-synth state's {kind}/{name} array is missing or of shape "
                        f"{None if got is None else got.shape}, not {wanted}"
                    )
                values[name] = got.astype(np.float64)
        baseline = loaded.meta.get("baseline")
        try:
            updates, steps = int(loaded.meta["updates"]), int(loaded.meta["steps"])
            baseline = None if baseline is None else float(baseline)
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"the learned-synth state's meta is damaged ({exc})") from exc
        self.policy.logits, self.policy.moments, self.policy.squares = (
            found["logits"],
            found["m"],
            found["v"],
        )
        self.policy.steps, self.updates, self.baseline = steps, updates, baseline
