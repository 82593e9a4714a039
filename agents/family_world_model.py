"""A World model that discriminates at the frontier: IRT plus the recent history of the task's kind.

The IRT World model (:class:`~coevo.agents.world_models.IRTWorldModel`)
predicts a task never attempted from its ability per solver version and a
difficulty linear in the task's surface features (calls, writes, checks,
...). Once a Solver succeeds about half the time, those features say little:
two tasks with three calls and one write are equally hard to it, yet a
learning Solver has mastered one *kind* of task and not the other. What
separates them is what the Solver has done lately on tasks of the same kind.

:class:`FamilyWorldModel` fits::

    P(success | version v, task t) = sigmoid(theta_v - w . phi(t) - sum_k u[k(t)])

where ``phi`` are the IRT model's features
(:func:`~coevo.agents.world_models.task_features`) and ``k(t)`` the task's
*kinds*, each with its own learnt difficulty ``u``: its family (question,
action, bulk, conditional, from the synthesizer's plan), the reference
solution's sequence of tools, the family with that sequence, and each tool the
solution calls (a Solver that has not learnt one tool fails every task that
needs it). Kinds are hashed into a fixed number of buckets (CRC-32: stable
across processes) and their difficulties are ridge-shrunk towards 0, so a kind
with few outcomes moves little (a random effect). Outcomes are weighted by
recency, ``decay ** (updates since)``, so the kinds' difficulties follow a
Solver that learns. The fit is ridge logistic regression by damped Newton
steps, as the IRT model's: numpy only, deterministic (no randomness at all).

Registered as ``family-irt``; ``[world_model] name = "family-irt"``.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from coevo.agents.linear_pg import LinearPGSolver
from coevo.agents.world_models import FEATURE_NAMES, fit_logistic, task_features
from coevo.arena.errors import CoevoError, StateError
from coevo.arena.outcomes import Episode
from coevo.arena.spec import SUBMIT, TaskSpec, WorldSpec
from coevo.arena.state import pack_state, unpack_state
from coevo.arena.world import World

__all__ = ["PATHS", "FamilyWorldModel", "reference_path", "task_kinds"]

PATHS = ("none", "surprisal", "features")
"""What the model reads off the reference path (:func:`reference_path`): nothing, the prior's surprisal, or that and the path's feature buckets as kinds."""


def task_kinds(task: TaskSpec) -> list[str]:
    """The kinds a task belongs to (its family, its reference's tool sequence, their pair, each tool it calls)."""
    plan = (task.provenance or {}).get("plan")
    family = str(plan.get("family")) if isinstance(plan, dict) and plan.get("family") else "-"
    tools = [c.tool for c in task.solution if c.tool != SUBMIT]
    sequence = ">".join(tools)
    return [
        f"family:{family}",
        f"sequence:{sequence}",
        f"family+sequence:{family}|{sequence}",
        *sorted({f"tool:{tool}" for tool in tools}),
    ]


def reference_path(task: TaskSpec, buckets: int) -> tuple[float, np.ndarray]:
    """How the Solver's features see the task's reference solution: the prior's surprisal, and the path's feature buckets.

    The reference solution is replayed in its world and each of its decisions
    (tool, each argument, the answer) is scored as the ``linear-pg`` Solver
    with no learnt weights would score it (:mod:`~coevo.agents.role_features`
    and its prior). Returns ``-log P_prior(reference path)`` (a task whose
    path the prior does not favour is hard to find by sampling; 0 when the
    path is not in the Solver's action space: nothing to go on) and the
    buckets (``mod buckets``) of the features of each chosen option — the
    relations the Solver must have learnt to walk that path.
    """
    world_spec = task.world
    if not isinstance(world_spec, WorldSpec) or not task.solution:
        return 0.0, np.zeros(0, dtype=np.int64)
    solver = LinearPGSolver(keep_worlds=1)
    try:
        with World(world_spec) as world:
            episode = world.run(task, task.solution)
        solver.remember([task])
        decisions = solver.decisions(episode)
    except CoevoError:
        return 0.0, np.zeros(0, dtype=np.int64)
    finally:
        solver.close()
    if not decisions:
        return 0.0, np.zeros(0, dtype=np.int64)
    surprisal = 0.0
    chosen: set[int] = set()
    for d in decisions:
        scores = np.zeros(d.n) if d.prior is None else np.asarray(d.prior, dtype=float)
        top = scores.max()
        surprisal -= scores[d.chosen] - top - math.log(np.exp(scores - top).sum())
        chosen.update((d.idx[d.owner == d.chosen] % buckets).tolist())
    return float(surprisal), np.array(sorted(chosen), dtype=np.int64)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))


class FamilyWorldModel:
    """IRT abilities and feature difficulty, plus a recency-weighted difficulty per kind of task (see the module docstring).

    Args:
        l2: ridge penalty on the feature weights.
        kind_l2: ridge penalty on each kind's difficulty (more: kinds move less).
        buckets: hash buckets the kinds are spread over.
        decay: the weight of an outcome falls by this factor at each update after it.
        history: the most outcomes kept for refitting.
        path: what is read off the reference path (:data:`PATHS`; :func:`reference_path`):
            ``none`` (the default: in ``benchmarks/bench_world_model.py`` the rest gained
            little for their cost, about 25 ms a task), ``surprisal`` (one more feature), or
            ``features`` (and the path's feature buckets as kinds).
        version: the solver version predictions are for until episodes name another.
    """

    kind = "world model"

    def __init__(
        self,
        l2: float = 1.0,
        kind_l2: float = 8.0,
        buckets: int = 256,
        decay: float = 0.85,
        history: int = 50_000,
        path: str = "none",
        version: str | None = None,
    ):
        if path not in PATHS:
            raise ValueError(f"path must be one of {', '.join(PATHS)}, got {path!r}")
        self.path = path
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay must lie in (0, 1], got {decay}: 1 weighs every outcome alike")
        self.l2, self.kind_l2, self.buckets, self.decay = l2, kind_l2, buckets, decay
        self.history = history
        self.current = version
        self.order: list[str] = []
        self.theta: dict[str, float] = {}
        self.weights = np.zeros(len(FEATURE_NAMES) + 1, dtype=float)  # and the path's surprisal
        self.kinds = np.zeros(buckets, dtype=float)
        self.updates = 0
        self._phi: dict[str, np.ndarray] = {}
        self._kind: dict[str, np.ndarray] = {}
        self._seen: list[tuple[str, str, float, int]] = []  # (task id, version, outcome, update)

    def _remember(self, task: TaskSpec) -> None:
        if task.task_id not in self._phi:
            kinds = {zlib.crc32(k.encode()) % self.buckets for k in task_kinds(task)}
            surprisal = 0.0
            if self.path != "none":
                surprisal, buckets = reference_path(task, self.buckets)
                if self.path == "features":
                    kinds.update(buckets.tolist())
            self._phi[task.task_id] = np.append(task_features(task), surprisal / 10.0)
            self._kind[task.task_id] = np.array(sorted(kinds), dtype=np.int64)

    def ability(self, version: str | None = None) -> float:
        """The ability of ``version`` (a new version: the latest one plus the average step between versions)."""
        name = version or self.current
        if name is not None and name in self.theta:
            return self.theta[name]
        if not self.order:
            return 0.0
        values = [self.theta[v] for v in self.order]
        steps = np.diff(values)
        return values[-1] + (max(0.0, float(steps.mean())) if len(steps) else 0.0)

    def difficulty(self, task: TaskSpec) -> float:
        """The task's difficulty: its features' and its kinds' together."""
        self._remember(task)
        phi = self._phi[task.task_id].copy()
        phi[0] = 0.0  # the abilities are the intercepts
        return float(self.weights @ phi + self.kinds[self._kind[task.task_id]].sum())

    def predict(self, tasks: Sequence[TaskSpec], version: str | None = None) -> list[float]:
        """P(success) per task for ``version`` (default: the latest version seen)."""
        theta = self.ability(version)
        return [float(_sigmoid(np.array(theta - self.difficulty(t)))) for t in tasks]

    def update(self, episodes: Sequence[Episode]) -> None:
        """Add the episodes' outcomes (weighted by recency from now on) and refit."""
        for episode in episodes:
            version = episode.solver or "solver"
            if version not in self.order:
                self.order.append(version)
            self.current = version
            self._seen.append((episode.task_id, version, float(episode.reward.value), self.updates))
        self.updates += 1
        del self._seen[: max(0, len(self._seen) - self.history)]
        if self._seen:
            self._refit()

    def _refit(self, steps: int = 12) -> None:
        versions = {v: i for i, v in enumerate(self.order)}
        nv, width = len(versions), len(FEATURE_NAMES) + 1
        # the rollouts of one task by one version in one update share a row: (successes, count)
        grouped: dict[tuple[str, str, int], list[float]] = {}
        for task_id, version, outcome, at in self._seen:
            cell = grouped.setdefault((task_id, version, at), [0.0, 0.0])
            cell[0] += outcome
            cell[1] += 1.0
        # only the kinds some kept outcome belongs to enter the fit (the rest have no data: 0)
        active = np.unique(
            np.concatenate(
                [self._kind[t] for t, _, _ in grouped if t in self._kind] or [np.zeros(0, np.int64)]
            )
        )
        column = np.full(self.buckets, -1, dtype=np.int64)
        column[active] = nv + width + np.arange(len(active))
        x = np.zeros((len(grouped), nv + width + len(active)))
        y = np.empty(len(grouped))
        weight = np.empty(len(grouped))
        for r, ((task_id, version, at), (wins, n)) in enumerate(grouped.items()):
            x[r, versions[version]] = 1.0
            if (
                task_id in self._phi
            ):  # a task never predicted counts towards its version's ability only
                x[r, nv : nv + width] = -self._phi[task_id]
                x[r, column[self._kind[task_id]]] = -1.0
            y[r] = wins / n
            weight[r] = n * self.decay ** (self.updates - 1 - at)
        x[:, nv] = 0.0  # the features' constant column would only duplicate the abilities
        penalty = np.concatenate(
            [np.full(nv, 0.01), np.full(width, self.l2), np.full(len(active), self.kind_l2)]
        )
        beta = np.concatenate(
            [[self.theta.get(v, 0.0) for v in self.order], self.weights, self.kinds[active]]
        )

        beta = fit_logistic(x, y, penalty, beta, steps=steps, weight=weight)
        self.theta = {v: float(beta[i]) for v, i in versions.items()}
        self.weights = beta[nv : nv + width].copy()
        self.kinds = np.zeros(self.buckets)
        self.kinds[active] = beta[nv + width :]

    def get_state(self) -> bytes:
        """The fit and its history as ``coevo.state/1`` (role ``family-irt``, layout 1)."""
        ids = list(self._phi)
        meta: dict[str, Any] = {
            "features": list(FEATURE_NAMES),
            "settings": [self.l2, self.kind_l2, self.buckets, self.decay, self.history, self.path],
            "theta": dict(self.theta),
            "order": list(self.order),
            "current": self.current,
            "updates": self.updates,
            "ids": ids,
            "kinds": [self._kind[t].tolist() for t in ids],
            "seen_tasks": [t for t, _, _, _ in self._seen],
        }
        arrays = {
            "weights": self.weights,
            "kinds": self.kinds,
            "phi": np.array([self._phi[t] for t in ids]).reshape(len(ids), len(FEATURE_NAMES) + 1),
            "seen_version": np.array([self.order.index(v) for _, v, _, _ in self._seen], np.int64),
            "seen_outcome": np.array([o for _, _, o, _ in self._seen], dtype=float),
            "seen_update": np.array([a for _, _, _, a in self._seen], dtype=np.int64),
        }
        return pack_state("family-irt", 1, meta, arrays)

    def set_state(self, state: bytes) -> None:
        """Load what :meth:`get_state` returned.

        Raises:
            StateError: not a ``family-irt`` state, or one made with other features or settings.
        """
        loaded = unpack_state(state, role="family-irt", versions={1})
        meta, arrays = loaded.meta, loaded.arrays
        settings = [self.l2, self.kind_l2, self.buckets, self.decay, self.history, self.path]
        if meta["features"] != list(FEATURE_NAMES) or meta["settings"] != settings:
            raise StateError(
                "this family-irt state was fitted with other task features or settings "
                f"({meta['settings']}, now {settings}); start the world model afresh"
            )
        self.theta = {str(k): float(v) for k, v in meta["theta"].items()}
        self.order = [str(v) for v in meta["order"]]
        self.current = meta["current"]
        self.updates = int(meta["updates"])
        self.weights = arrays["weights"].astype(float)
        self.kinds = arrays["kinds"].astype(float)
        self._phi = {t: arrays["phi"][i].copy() for i, t in enumerate(meta["ids"])}
        self._kind = {
            t: np.array(k, dtype=np.int64) for t, k in zip(meta["ids"], meta["kinds"], strict=True)
        }
        self._seen = [
            (str(t), self.order[int(v)], float(o), int(a))
            for t, v, o, a in zip(
                meta["seen_tasks"],
                arrays["seen_version"],
                arrays["seen_outcome"],
                arrays["seen_update"],
                strict=True,
            )
        ]
