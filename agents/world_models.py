"""World models: P(the solver succeeds on a task) before any rollout, and calibration metrics.

:class:`IRTWorldModel` is an online item-response model::

    P(success | solver version v, task t) = sigmoid(theta_v - b_t)
    b_t = w . phi(t) + delta_t

``phi(t)`` are features the model computes itself from the task record (how
many calls and writes the reference solution makes, checks, frame size,
instruction length, whether it branches or asks a question, and the
synthesizer's own numeric ``features`` when present), so it predicts tasks
never attempted; ``delta_t`` is a per-task offset learnt once the task has
outcomes (shrunk towards 0). Each solver version has its own ability
``theta``; a version never seen starts from the latest version's ability plus
the average step between versions seen so far (abilities drift as versions
advance). Each update refits the model on the outcomes so far (ridge
logistic regression by Newton steps: deterministic, numpy only).

Calibration metrics (Brier score, reliability, ECE) are in
:mod:`coevo.arena.calibration`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from coevo.arena.difficulty import TASK_FEATURES
from coevo.arena.errors import StateError
from coevo.arena.outcomes import Episode
from coevo.arena.spec import SUBMIT, TaskSpec, WorldSpec
from coevo.arena.state import pack_state, unpack_state

__all__ = [
    "FEATURE_NAMES",
    "IRTWorldModel",
    "fit_logistic",
    "task_features",
]

_SYNTH_FEATURES = TASK_FEATURES


FEATURE_NAMES: tuple[str, ...] = (
    "bias",
    "calls",
    "write_calls",
    "checks",
    "frame_tables",
    "instruction_words/10",
    "branches",
    "answers",
    "tools/10",
    *(f"synth:{n}" for n in _SYNTH_FEATURES),
)
"""The names of :func:`task_features`' entries, in order."""


def task_features(task: TaskSpec) -> np.ndarray:
    """The features a world model reads off a task record (no rollout): a fixed-length vector."""
    world = task.world if isinstance(task.world, WorldSpec) else None
    writes = {t.name for t in world.tools if t.effect == "write"} if world else set()
    calls = [c for c in task.solution if c.tool != SUBMIT]
    answer = bool(task.solution and task.solution[-1].arguments.get("answer"))
    checks = task.verifier.checks
    own = [
        1.0,  # bias
        float(len(calls)),
        float(sum(c.tool in writes for c in calls)),
        float(len(checks)),
        float(len(task.verifier.frame)),
        len(task.instruction.split()) / 10.0,
        float(any("CASE WHEN" in c.sql for c in checks)),
        float(answer),
        len(world.tools) / 10.0 if world else 0.0,
    ]
    given = [float(task.features.get(name, 0.0)) for name in _SYNTH_FEATURES]
    rows_at = _SYNTH_FEATURES.index("result_rows")
    given[rows_at] = math.log1p(given[rows_at])  # list sizes vary over orders of magnitude
    return np.array(own + given, dtype=float)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, x))))


def _version(episode: Episode) -> str:
    return episode.solver or "solver"


def fit_logistic(
    x: np.ndarray,
    y: np.ndarray,
    penalty: np.ndarray,
    beta: np.ndarray,
    *,
    steps: int,
    weight: np.ndarray | None = None,
) -> np.ndarray:
    """A ridge-penalised logistic regression fitted by damped Newton steps from ``beta``.

    Maximises ``Σ w·(y·z − log(1 + eᶻ)) − ½ Σ penalty·β²`` with ``z = x·β``;
    each step is halved until the fit is no worse (at most ``steps`` steps).
    Shared by the IRT World models (``irt`` and ``family-irt``).

    Args:
        x: the design matrix (rows × columns).
        y: the outcomes, in [0, 1] (a share of successes for grouped rows).
        penalty: the ridge penalty per column.
        beta: where to start (the previous fit).
        steps: Newton steps at most.
        weight: a weight per row (None: 1 each).
    """
    w = np.ones(len(y)) if weight is None else weight

    def objective(b: np.ndarray) -> float:
        z = np.clip(x @ b, -30, 30)
        return float(np.sum(w * (y * z - np.logaddexp(0.0, z))) - 0.5 * np.sum(penalty * b * b))

    current = objective(beta)
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ beta, -30, 30)))
        gradient = x.T @ (w * (y - p)) - penalty * beta
        hessian = (x.T * (w * p * (1 - p))) @ x + np.diag(penalty)
        direction = np.linalg.solve(hessian, gradient)
        scale = 1.0
        while scale > 1e-4:  # damped Newton: never step to a worse fit
            trial = beta + scale * direction
            value = objective(trial)
            if value >= current:
                beta, current = trial, value
                break
            scale /= 2
        else:
            break
    return beta


class IRTWorldModel:
    """An item-response world model (see the module docstring), refitted as outcomes arrive.

    ``update`` appends the episodes' outcomes to a history and refits, by a
    few Newton steps of ridge-penalised logistic regression, one ability per
    solver version and the feature weights of the difficulty. Each task that
    has outcomes then gets its own offset: the gap between its observed
    success and the fit, shrunk towards 0 by how few outcomes it has. Task
    records come from the tasks the model was asked to predict (the loop
    predicts before it rolls out); an episode of a task never predicted only
    counts towards its version's ability and the task's offset.

    Args:
        l2: ridge penalty on the feature weights.
        shrinkage: outcomes worth of prior for a task's own offset (more: offsets move less).
        history: the most outcomes kept for refitting.
        version: the solver version predictions are for until episodes name another.
    """

    kind = "world model"

    def __init__(
        self,
        l2: float = 1.0,
        shrinkage: float = 8.0,
        history: int = 50_000,
        version: str | None = None,
    ):
        self.l2 = l2
        self.shrinkage = shrinkage
        self.history = history
        self.weights = np.zeros(len(FEATURE_NAMES), dtype=float)
        self.theta: dict[str, float] = {}
        self.order: list[str] = []  # versions in the order first seen
        self.offsets: dict[str, float] = {}
        self.current = version
        self._phi: dict[str, np.ndarray] = {}
        self._seen: list[tuple[str, str, float]] = []  # (task id, version, outcome)

    def ability(self, version: str | None = None) -> float:
        """The ability of ``version`` (a new version: the latest one plus the average step between versions)."""
        name = version or self.current
        if name is not None and name in self.theta:
            return self.theta[name]
        if not self.order:
            return 0.0
        latest = self.theta[self.order[-1]]
        steps = [
            self.theta[b] - self.theta[a] for a, b in zip(self.order, self.order[1:], strict=False)
        ]
        return latest + (max(0.0, sum(steps) / len(steps)) if steps else 0.0)

    def _features(self, task: TaskSpec) -> np.ndarray:
        phi = self._phi.get(task.task_id)
        if phi is None:
            phi = self._phi[task.task_id] = task_features(task)
        return phi

    def difficulty(self, task: TaskSpec) -> float:
        """The task's difficulty ``b``: predicted from its features, refined by its own outcomes."""
        return float(self.weights @ self._features(task)) + self.offsets.get(task.task_id, 0.0)

    def predict(self, tasks: Sequence[TaskSpec], version: str | None = None) -> list[float]:
        """P(success) per task for ``version`` (default: the latest version seen)."""
        theta = self.ability(version)
        return [_sigmoid(theta - self.difficulty(t)) for t in tasks]

    def update(self, episodes: Sequence[Episode]) -> None:
        """Add the episodes' outcomes and refit."""
        for episode in episodes:
            version = _version(episode)
            if version not in self.order:
                self.order.append(version)
            self.current = version
            self._seen.append((episode.task_id, version, float(episode.reward.value)))
        del self._seen[: max(0, len(self._seen) - self.history)]
        if self._seen:
            self._refit()

    def _refit(self, steps: int = 12) -> None:
        versions = {v: i for i, v in enumerate(self.order)}
        width = len(FEATURE_NAMES)
        rows = len(self._seen)
        x = np.zeros((rows, len(versions) + width))
        y = np.empty(rows)
        for r, (task_id, version, outcome) in enumerate(self._seen):
            x[r, versions[version]] = 1.0
            phi = self._phi.get(task_id)
            if phi is not None:
                x[r, len(versions) :] = -phi
            y[r] = outcome
        # the abilities are the intercepts: the features' constant column would only
        # duplicate them (and leave the fit with no unique solution)
        x[:, len(versions)] = 0.0
        penalty = np.full(x.shape[1], self.l2)
        penalty[: len(versions)] = 0.01  # abilities are barely shrunk
        beta = np.concatenate([[self.theta.get(v, 0.0) for v in self.order], self.weights])

        beta = fit_logistic(x, y, penalty, beta, steps=steps)
        self.theta = {v: float(beta[i]) for v, i in versions.items()}
        self.weights = beta[len(versions) :].copy()
        fitted = 1.0 / (1.0 + np.exp(-np.clip(x @ beta, -30, 30)))
        totals: dict[str, list[float]] = {}
        for (task_id, _, outcome), p_fit in zip(self._seen, fitted, strict=True):
            entry = totals.setdefault(task_id, [0.0, 0.0, 0.0])
            entry[0] += outcome
            entry[1] += float(p_fit)
            entry[2] += 1
        self.offsets = {}
        for task_id, (wins, expected, n) in totals.items():
            observed = (wins + 0.5) / (n + 1.0)
            predicted = min(max(expected / n, 1e-3), 1 - 1e-3)
            gap = math.log(predicted / (1 - predicted)) - math.log(observed / (1 - observed))
            self.offsets[task_id] = n / (n + self.shrinkage) * gap

    def get_state(self) -> bytes:
        """The whole fit and its history as ``coevo.state/1`` (layout 1; see :meth:`set_state`)."""
        phi_ids = list(self._phi)
        meta = {
            "features": list(FEATURE_NAMES),
            "theta": dict(self.theta),
            "order": list(self.order),
            "offsets": dict(self.offsets),
            "current": self.current,
            "phi_ids": phi_ids,
            "seen_tasks": [task for task, _, _ in self._seen],
        }
        width = len(FEATURE_NAMES)
        arrays = {
            "weights": self.weights,
            "phi": np.array([self._phi[t] for t in phi_ids]).reshape(len(phi_ids), width),
            "seen_version": np.array(
                [self.order.index(v) for _, v, _ in self._seen], dtype=np.int64
            ),
            "seen_outcome": np.array([o for _, _, o in self._seen], dtype=float),
        }
        return pack_state("irt", 1, meta, arrays)

    def set_state(self, state: bytes) -> None:
        """Load what :meth:`get_state` returned: weights, abilities, offsets, task features, history.

        Raises:
            StateError: not an ``irt`` state, or one made with other features.
        """
        loaded = unpack_state(state, role="irt", versions={1})
        meta, arrays = loaded.meta, loaded.arrays
        if meta["features"] != list(FEATURE_NAMES):
            raise StateError(
                "this irt state was fitted on other task features; start the world model afresh"
            )
        self.weights = arrays["weights"].astype(float)
        self.theta = {str(k): float(v) for k, v in meta["theta"].items()}
        self.order = [str(v) for v in meta["order"]]
        self.offsets = {str(k): float(v) for k, v in meta["offsets"].items()}
        self.current = meta["current"]
        self._phi = {t: arrays["phi"][i].copy() for i, t in enumerate(meta["phi_ids"])}
        self._seen = [
            (str(task), self.order[int(v)], float(o))
            for task, v, o in zip(
                meta["seen_tasks"], arrays["seen_version"], arrays["seen_outcome"], strict=True
            )
        ]

    def state(self) -> dict[str, Any]:
        """The model's parameters as JSON-ready data."""
        return {
            "weights": dict(zip(FEATURE_NAMES, self.weights.tolist(), strict=True)),
            "theta": dict(self.theta),
            "order": list(self.order),
            "offsets": dict(self.offsets),
            "current": self.current,
        }
