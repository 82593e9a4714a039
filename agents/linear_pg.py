"""``linear-pg``: a Solver that learns, by policy gradient, a log-linear policy over the :class:`ActionSpace`.

At each step the policy makes a few small decisions, each a softmax over
options scored by ``w · φ + prior · π₀`` with :mod:`~coevo.agents.role_features`
(``φ``: hashed features of roles; ``π₀``: a careful reader's first guess, the
same for every solver, which the weights learn to correct):

1. which tool to call, or ``submit``;
2. for each parameter of that tool, which value to copy (from the
   instruction, an earlier observation's cell, or the parameter's ``enum``);
3. on ``submit`` of a question, which observed cell to answer with (or none).

``learn`` is REINFORCE with the group mean as baseline: the k episodes of
one task in a batch (the curriculum sends a task k times) share a baseline,
and ``advantage = reward − mean reward of the group``; a task attempted once
uses a running mean instead. An entropy bonus keeps the policy exploring,
and Adam scales the steps. The same episodes are what the curriculum counts
as the task's success estimate. Each task's best success so far is kept
(the most recent ``replay_size`` tasks), and every update also imitates
``replay_batch`` of them: a curriculum that has moved on to harder tasks
does not make the policy forget the easier ones.

Why the prior and the Adam floor (``adam_eps``): with the weights alone the
policy starts uniform over ~18 calls a step, so a task of 4–6 calls is
almost never solved by chance, its groups all fail and teach nothing, and
what level 1 teaches does not carry over. With Adam's usual 1e-8 floor, a
weight that only the entropy bonus moves steps as far as one a reward
moves. ``docs/benchmarks.md`` (the learning Solver) has the measurements:
the prior is what lets levels 2–3 be learnt; replay keeps level 1 when a
curriculum moves on; the floor is neutral.

The solver never reads a task's reference solution or its verifier: only
the instruction, the tools and what the tools return.
"""

from __future__ import annotations

import json
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from coevo.agents.action_space import ActionSpace, Choice
from coevo.agents.decisions import pack_decisions, unpack_decisions
from coevo.agents.protocols import LearnStats
from coevo.agents.role_features import (
    Context,
    FeatureHasher,
    answer_features,
    answer_prior,
    tool_features,
    tool_prior,
    value_features,
    value_prior,
)
from coevo.arena.errors import CoevoError, SpecError, StateError
from coevo.arena.limits import DEFAULT_LIMITS, Limits
from coevo.arena.outcomes import Episode, Reward
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import TaskSpec, ToolCall, WorldSpec
from coevo.arena.state import pack_state, unpack_state
from coevo.arena.world import World

__all__ = ["LinearPGSolver"]


@dataclass(frozen=True)
class _Decision:
    """One softmax decision: the feature buckets of every option (``owner`` maps a bucket to its option)."""

    idx: np.ndarray
    owner: np.ndarray
    n: int
    chosen: int
    kind: str
    prior: np.ndarray | None = None


def _call_key(task_id: str, calls: Iterable[ToolCall]) -> tuple[Any, ...]:
    return (
        task_id,
        *((c.tool, json.dumps(c.arguments, sort_keys=True, default=str)) for c in calls),
    )


class LinearPGSolver:
    """A log-linear policy over pointer-style actions, trained by policy gradient (numpy only).

    Args:
        lr: Adam's step size.
        entropy: weight of the entropy bonus.
        temperature: softmax temperature when acting.
        greedy: act by the highest score instead of sampling (for evaluation).
        max_steps: tool calls per episode, ``submit`` included (the last is always ``submit``).
        dim: hashed feature buckets (the number of weights).
        per_parameter: values on offer per parameter.
        answers: answers on offer at ``submit``.
        limits: budgets for every world built.
        keep_worlds: built worlds kept between batches.
        step_cost: a success's reward less this per call (of two ways to earn 1, the shorter).
        prior: the weight of the first guesses (:func:`~coevo.agents.role_features.tool_prior`,
            ``value_prior``, ``answer_prior``) in every score; 0 starts uniform, as before.
        adam_eps: Adam's floor on the step's denominator; a weight whose
            gradients stay below it (the entropy bonus's alone) moves slower.
        replay: the weight of imitating kept successes in each update (0: none).
        replay_size: tasks whose best success is kept (the most recently successful).
        replay_batch: kept successes imitated per update.
    """

    kind = "solver"

    def __init__(
        self,
        *,
        lr: float = 0.05,
        entropy: float = 0.01,
        temperature: float = 1.0,
        greedy: bool = False,
        max_steps: int = 8,
        dim: int = 1 << 18,
        per_parameter: int = 24,
        answers: int = 40,
        limits: Limits = DEFAULT_LIMITS,
        keep_worlds: int = 64,
        step_cost: float = 0.0,
        prior: float = 3.0,
        adam_eps: float = 1e-3,
        replay: float = 0.5,
        replay_size: int = 512,
        replay_batch: int = 64,
    ):
        if not 0 < lr <= 10:
            raise ValueError(f"lr must be in (0, 10], not {lr}")
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, not {temperature}")
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, not {max_steps}")
        if dim < 1024:
            raise ValueError(f"dim must be at least 1024, not {dim}")
        if prior < 0:
            raise ValueError(f"prior must be at least 0, not {prior}")
        if adam_eps <= 0:
            raise ValueError(f"adam_eps must be positive, not {adam_eps}")
        if replay < 0 or replay_size < 0 or replay_batch < 0:
            raise ValueError(
                f"replay, replay_size and replay_batch must be at least 0, not "
                f"{replay}, {replay_size}, {replay_batch}"
            )
        self.lr = lr
        self.step_cost = step_cost
        self.prior = prior
        self.adam_eps = adam_eps
        self.replay = replay
        self.replay_size = replay_size
        self.replay_batch = replay_batch
        self.entropy = entropy
        self.temperature = temperature
        self.greedy = greedy
        self.max_steps = max_steps
        self.per_parameter = per_parameter
        self.answers = answers
        self.limits = limits
        self.keep_worlds = keep_worlds
        self.hasher = FeatureHasher(dim)
        self.weights = np.zeros(dim, dtype=np.float64)
        self._m = np.zeros(dim, dtype=np.float64)
        self._v = np.zeros(dim, dtype=np.float64)
        self.updates = 0
        self.baseline = 0.0
        self._worlds: OrderedDict[str, World] = OrderedDict()
        self._tasks: OrderedDict[str, TaskSpec] = OrderedDict()
        self._traces: dict[tuple[Any, ...], list[_Decision]] = {}
        self._kept: OrderedDict[str, tuple[float, list[_Decision]]] = OrderedDict()

    # ---- acting -------------------------------------------------------------------------

    def attempt(self, tasks: Sequence[TaskSpec], seed: int) -> list[Episode]:
        """One episode per task, in order; task ``i`` is played with ``default_rng(derive_seed(seed, "episode", i))``.

        A task whose world cannot be built gives a reward-0 episode whose reason says why.
        """
        self.remember(tasks)
        return [self._episode(task, seed, i) for i, task in enumerate(tasks)]

    def remember(self, tasks: Iterable[TaskSpec]) -> None:
        """Keep ``tasks`` so that :meth:`learn` can score episodes of them made elsewhere."""
        for task in tasks:
            self._tasks[task.task_id] = task
            self._tasks.move_to_end(task.task_id)
        while len(self._tasks) > 20_000:
            self._tasks.popitem(last=False)

    def _world(self, spec: WorldSpec) -> World:
        key = spec.world_id
        world = self._worlds.get(key)
        if world is None:
            world = World(spec, limits=self.limits)
            self._worlds[key] = world
            while len(self._worlds) > self.keep_worlds:
                _, old = self._worlds.popitem(last=False)
                old.close()
        self._worlds.move_to_end(key)
        return world

    def _episode(self, task: TaskSpec, seed: int, index: int) -> Episode:
        if not isinstance(task.world, WorldSpec):
            raise CoevoError(
                f"task {task.task_id} refers to world {task.world} by id; give the solver tasks with their world inline"
            )
        try:
            world = self._world(task.world)
        except SpecError as exc:
            reason = f"the world could not be built: {exc.summary()}"
            return Episode(
                task_id=task.task_id,
                world_id=task.world.world_id,
                calls=[],
                observations=[],
                reward=Reward(value=0, submitted=False, reason=reason),
                solver=self.name,
                seed=seed,
            )
        rng = np.random.default_rng(derive_seed(seed, "episode", index))
        decisions: list[_Decision] = []
        calls = self._play(task, world, decisions, rng)
        self._traces[_call_key(task.task_id, calls)] = decisions
        if len(self._traces) > 100_000:
            self._traces.clear()
        return world.run(task, calls, max_steps=self.max_steps, solver=self.name, seed=seed)

    def _play(
        self, task: TaskSpec, world: World, decisions: list[_Decision], rng: np.random.Generator
    ) -> list[ToolCall]:
        space = ActionSpace(world.spec, per_parameter=self.per_parameter)
        ctx = Context.of(task.instruction, {t.name: t.effect for t in world.spec.tools})
        world.reset(task, max_steps=self.max_steps)
        calls: list[ToolCall] = []
        while True:
            call = self._next_call(space, ctx, decisions, rng, None)
            assert call is not None  # acting, every decision is made
            calls.append(call)
            if call.tool == "submit":
                return calls
            obs = world.step(call)
            ctx.calls.append(call)
            ctx.observations.append(obs)

    def _next_call(
        self,
        space: ActionSpace,
        ctx: Context,
        sink: list[_Decision],
        rng: np.random.Generator | None,
        made: ToolCall | None,
    ) -> ToolCall | None:
        """Decide the next call (acting: ``rng``), or find the decisions that give ``made`` (learning).

        Returns None when ``made`` is not in the space (an episode of another policy).
        """
        last_step = ctx.step >= self.max_steps - 1
        choices: list[Choice | None] = [None]
        if not last_step:
            choices += space.choices(ctx.instruction, ctx.observations)
        target = None
        if made is not None:
            target = next(
                (
                    i
                    for i, c in enumerate(choices)
                    if (c is None and made.tool == "submit")
                    or (
                        c is not None
                        and c.tool == made.tool
                        and set(c.params) == set(made.arguments)
                    )
                ),
                None,
            )
            if target is None:
                return None
        prior = [tool_prior(c, ctx) for c in choices] if self.prior else None
        k = self._decide(tool_features(choices, ctx), rng, target, sink, "tool", prior)
        choice = choices[k]
        if choice is None:
            answer = None
            if ctx.asks:
                offered = space.sourced_answers(ctx.observations, self.answers)
                target = None
                if made is not None:
                    given = made.arguments.get("answer")
                    target = next((i for i, (a, _) in enumerate(offered) if a == given), None)
                    if target is None:
                        return None
                feats = [answer_features(a, s, ctx) for a, s in offered]
                prior = [answer_prior(a, s, ctx) for a, s in offered] if self.prior else None
                j = self._decide(feats, rng, target, sink, "answer", prior)
                answer = offered[j][0]
            return space.submit(answer)
        arguments: dict[str, Any] = {}
        for param, values in zip(choice.params, choice.values, strict=True):
            target = None
            if made is not None:
                given = made.arguments[param]
                target = next(
                    (i for i, (v, _) in enumerate(values) if v == given and type(v) is type(given)),
                    None,
                )
                if target is None:
                    return None
            feats = [
                value_features(choice.tool, param, v, s, ctx, rank)
                for rank, (v, s) in enumerate(values)
            ]
            prior = (
                [value_prior(choice.tool, param, v, s, ctx) for v, s in values]
                if self.prior
                else None
            )
            j = self._decide(feats, rng, target, sink, f"{choice.tool}.{param}", prior)
            arguments[param] = values[j][0]
        return ToolCall(choice.tool, arguments)

    def _decide(
        self,
        feats: list[list[tuple[Any, ...]]],
        rng: np.random.Generator | None,
        target: int | None,
        sink: list[_Decision],
        kind: str,
        prior: list[float] | None = None,
    ) -> int:
        n = len(feats)
        bias = None if prior is None or n == 1 else self.prior * np.asarray(prior)
        sizes = np.fromiter((len(f) for f in feats), dtype=np.int64, count=n)
        idx = self.hasher.indices([key for f in feats for key in f])
        owner = np.repeat(np.arange(n), sizes)
        if target is not None:
            chosen = target
        elif n == 1:
            chosen = 0
        else:
            assert rng is not None
            scores = _scores(self.weights, idx, owner, n, bias)
            if self.greedy:
                chosen = int(np.argmax(scores))
            else:
                p = _softmax(scores / self.temperature)
                chosen = min(int(np.searchsorted(np.cumsum(p), rng.random() * p.sum())), n - 1)
        if n > 1:
            sink.append(_Decision(idx, owner, n, chosen, kind, bias))
        return chosen

    # ---- learning -----------------------------------------------------------------------

    def decisions(self, episode: Episode) -> list[_Decision] | None:
        """The policy's decisions behind ``episode`` (None: its task is unknown or its calls are not in the space)."""
        key = _call_key(episode.task_id, episode.calls)
        if key in self._traces:
            return self._traces[key]
        task = self._tasks.get(episode.task_id)
        if task is None or not isinstance(task.world, WorldSpec) or not episode.calls:
            return None
        space = ActionSpace(task.world, per_parameter=self.per_parameter)
        ctx = Context.of(task.instruction, {t.name: t.effect for t in task.world.tools})
        sink: list[_Decision] = []
        for call, obs in zip(episode.calls, [*episode.observations, None], strict=False):
            if self._next_call(space, ctx, sink, None, call) is None:
                return None
            if call.tool == "submit" or obs is None:
                break
            ctx.calls.append(call)
            ctx.observations.append(obs)
        return sink

    def drain_decisions(self) -> bytes:
        """The decisions behind the episodes played since the last call, as data (:mod:`coevo.agents.decisions`); then forgotten."""
        packed = pack_decisions(self._traces)
        self._traces.clear()
        return packed

    def take_decisions(self, payloads: Sequence[bytes]) -> None:
        """Decisions another instance played (its :meth:`drain_decisions`): :meth:`learn` uses them instead of rebuilding them.

        Raises:
            StateError: a blob that is not decisions, is damaged, or is of a policy of another ``dim``.
        """
        shipped = [unpack_decisions(p, dim=self.weights.size, make=_Decision) for p in payloads]
        for traces in shipped:
            self._traces.update(traces)

    def learn(self, episodes: Sequence[Episode]) -> LearnStats:
        """One policy-gradient step on ``episodes`` (group-mean baseline per task, entropy bonus, replay, Adam).

        Episodes whose decisions cannot be found (an unknown task, calls
        outside the action space) are skipped and counted in ``extra["skipped"]``.
        """
        groups: dict[str, list[float]] = defaultdict(list)
        for episode in episodes:
            groups[episode.task_id].append(self._return(episode))
        means = {task: sum(r) / len(r) for task, r in groups.items()}
        all_idx: list[np.ndarray] = []
        all_val: list[np.ndarray] = []
        entropies: list[float] = []
        objective = 0.0
        used = skipped = 0
        for episode in episodes:
            decisions = self.decisions(episode)
            if decisions is None:
                skipped += 1
                continue
            used += 1
            reward = self._return(episode)
            if reward > 0 and self.replay and self.replay_size:
                self._keep(episode.task_id, reward, decisions)
            group = groups[episode.task_id]
            advantage = reward - (means[episode.task_id] if len(group) > 1 else self.baseline)
            for d in decisions:
                scores = _scores(self.weights, d.idx, d.owner, d.n, d.prior)
                p = _softmax(scores / self.temperature)
                logp = np.log(np.maximum(p, 1e-12))
                h = float(-(p * logp).sum())
                entropies.append(h)
                coef = -advantage * p
                coef[d.chosen] += advantage
                coef += self.entropy * (-p * (logp + h))
                objective += advantage * float(logp[d.chosen])
                all_idx.append(d.idx)
                all_val.append(coef[d.owner] / self.temperature)
        if used:
            for d in self._replayed():
                p = _softmax(_scores(self.weights, d.idx, d.owner, d.n, d.prior) / self.temperature)
                coef = -self.replay * p
                coef[d.chosen] += self.replay
                all_idx.append(d.idx)
                all_val.append(coef[d.owner] / self.temperature)
        self._traces.clear()
        rewards = [float(e.reward.value) for e in episodes]
        if rewards:
            self.baseline = 0.9 * self.baseline + 0.1 * (sum(rewards) / len(rewards))
        if used and all_idx:
            grad = (
                np.bincount(
                    np.concatenate(all_idx),
                    weights=np.concatenate(all_val),
                    minlength=self.weights.size,
                )
                / used
            )
            self._adam(grad)
        return LearnStats(
            episodes=len(episodes),
            updates=1 if used else 0,
            loss=-objective / used if used else None,
            extra={
                "success": sum(rewards) / len(rewards) if rewards else 0.0,
                "entropy": float(np.mean(entropies)) if entropies else 0.0,
                "skipped": skipped,
                "version": self.updates,
            },
        )

    def _keep(self, task_id: str, reward: float, decisions: list[_Decision]) -> None:
        """Keep a task's best success (the first of equals), most recently successful last."""
        kept = self._kept.get(task_id)
        if kept is None or kept[0] < reward:
            self._kept[task_id] = (reward, decisions)
        self._kept.move_to_end(task_id)
        while len(self._kept) > self.replay_size:
            self._kept.popitem(last=False)

    def _replayed(self) -> list[_Decision]:
        """The decisions of ``replay_batch`` kept successes, drawn by the update's own seed."""
        if not self.replay or not self._kept:
            return []
        kept = list(self._kept.values())
        rng = np.random.default_rng(derive_seed(self.updates, "replay"))
        return [d for i in rng.permutation(len(kept))[: self.replay_batch] for d in kept[i][1]]

    def _return(self, episode: Episode) -> float:
        """The reward, less ``step_cost`` per call when it is 1: of two ways to earn 1, the shorter is preferred.

        Failures all count 0 whatever their length, so a short failure is
        never preferred to a long one (that would teach giving up at once).
        """
        value = float(episode.reward.value)
        return value * max(0.0, 1.0 - self.step_cost * len(episode.calls)) if value else 0.0

    def _adam(self, grad: np.ndarray, beta1: float = 0.9, beta2: float = 0.999) -> None:
        self.updates += 1
        touched = np.nonzero(grad)[0]
        g = grad[touched]
        # lazy Adam: moments move only where the gradient is non-zero (sparse features)
        self._m[touched] = beta1 * self._m[touched] + (1 - beta1) * g
        self._v[touched] = beta2 * self._v[touched] + (1 - beta2) * g * g
        m_hat = self._m[touched] / (1 - beta1**self.updates)
        v_hat = self._v[touched] / (1 - beta2**self.updates)
        self.weights[touched] += self.lr * m_hat / (np.sqrt(v_hat) + self.adam_eps)

    # ---- weights ------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """How many updates the weights have had."""
        return self.updates

    @property
    def name(self) -> str:
        """Who made an episode: ``linear-pg@<version>`` (a world model keeps one ability per version)."""
        return f"linear-pg@{self.updates}"

    def policy_version(self) -> str:
        """How its episodes are signed: ``linear-pg@<updates>`` (a world model keeps one ability per version)."""
        return self.name

    def get_state(self) -> bytes:
        """Weights, optimiser moments, counters and kept successes as ``coevo.state/1`` (for broadcast and checkpoints)."""
        meta = {
            "dim": int(self.weights.size),
            "updates": self.updates,
            "baseline": self.baseline,
            "kept": [[task, reward, len(ds)] for task, (reward, ds) in self._kept.items()],
        }
        arrays = {"weights": self.weights, "m": self._m, "v": self._v, **_pack(self._kept)}
        return pack_state("linear-pg", 1, meta, arrays)

    def set_state(self, state: bytes) -> None:
        """Load what :meth:`get_state` returned.

        Raises:
            StateError: the bytes are not a linear-pg state, or have another ``dim``.
        """
        loaded = unpack_state(state, role="linear-pg", versions={1})
        dim = int(loaded.meta["dim"])
        if dim != self.weights.size:
            raise StateError(
                f"the state has dim={dim} but this solver has dim={self.weights.size}; make it with dim={dim}"
            )
        if any(loaded.arrays[k].shape != (dim,) for k in ("weights", "m", "v")):
            raise StateError("the linear-pg state is truncated: its arrays are not of length dim")
        self.weights = loaded.arrays["weights"].astype(np.float64)
        self._m = loaded.arrays["m"].astype(np.float64)
        self._v = loaded.arrays["v"].astype(np.float64)
        self.updates = int(loaded.meta["updates"])
        self.baseline = float(loaded.meta["baseline"])
        self._kept = _unpack(loaded.meta.get("kept", []), loaded.arrays)

    def close(self) -> None:
        """Close the worlds kept between batches."""
        for world in self._worlds.values():
            world.close()
        self._worlds.clear()


def _pack(kept: Mapping[str, tuple[float, list[_Decision]]]) -> dict[str, np.ndarray]:
    """Kept decisions as flat arrays: feature buckets, owners, priors (NaN: none) and per decision (features, n, chosen)."""
    decisions = [d for _, ds in kept.values() for d in ds]
    if not decisions:
        return {}
    return {
        "kept_idx": np.concatenate([d.idx for d in decisions]),
        "kept_owner": np.concatenate([d.owner for d in decisions]),
        "kept_prior": np.concatenate(
            [d.prior if d.prior is not None else np.full(d.n, np.nan) for d in decisions]
        ),
        "kept_shape": np.array([(d.idx.size, d.n, d.chosen) for d in decisions], dtype=np.int64),
    }


def _unpack(
    index: list[Any], arrays: Mapping[str, np.ndarray]
) -> OrderedDict[str, tuple[float, list[_Decision]]]:
    """The inverse of :func:`_pack`, with the meta's ``[task, reward, decisions]`` rows."""
    kept: OrderedDict[str, tuple[float, list[_Decision]]] = OrderedDict()
    shape = arrays.get("kept_shape", np.zeros((0, 3), dtype=np.int64))
    if sum(int(count) for _, _, count in index) != len(shape):
        raise StateError("the linear-pg state is damaged: its kept successes do not add up")
    row = at = options = 0
    for task, reward, count in index:
        decisions = []
        for size, n, chosen in shape[row : row + int(count)]:
            prior = arrays["kept_prior"][options : options + n]
            decisions.append(
                _Decision(
                    arrays["kept_idx"][at : at + size],
                    arrays["kept_owner"][at : at + size],
                    int(n),
                    int(chosen),
                    "replay",
                    None if np.isnan(prior).all() else prior,
                )
            )
            at, options = at + int(size), options + int(n)
        kept[str(task)] = (float(reward), decisions)
        row += int(count)
    return kept


def _scores(
    weights: np.ndarray, idx: np.ndarray, owner: np.ndarray, n: int, prior: np.ndarray | None
) -> np.ndarray:
    """Each option's score: its features' weights, plus the (weighted) prior."""
    scores = np.bincount(owner, weights=weights[idx], minlength=n)
    return scores if prior is None else scores + prior


def _softmax(scores: np.ndarray) -> np.ndarray:
    z = np.exp(scores - scores.max())
    return z / z.sum()
