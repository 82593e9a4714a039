"""A role inside a Ray actor: every call batched, every failure returned as a recorded outcome.

:class:`RoleHost` is a plain class (the arena wraps it with ``ray.remote``);
it builds its role from the registry in the actor's own process and turns
whatever the role raises into data the game log can hold:

* a Synthesizer that raises on a request yields no tasks and the error;
* a Judge that raises on a batch is retried task by task, and a task that
  still raises gets a rejected verdict whose ``error`` says so;
* a Solver that raises gives reward-0 episodes whose reason names the error;
* a World model that raises predicts 0.5 (and the error is reported).

The Solver's weights come with every ``attempt`` (as a reference to the
learner's latest state), so an actor that was killed and restarted, and the
batch Ray retried on it, plays exactly the episodes the first one would have.
"""

from __future__ import annotations

import os
import pickle
import traceback
from collections.abc import Sequence
from typing import Any

import ray
from coevo.agents.protocols import LearnStats, ProposalRequest
from coevo.agents.registry import REGISTRY
from coevo.agents.synthesizers.mutation import Mutator
from coevo.arena.outcomes import CheckResult, Episode, Verdict, failed_episode
from coevo.arena.spec import TaskSpec
from coevo.curricula.strategies import Mutation

__all__ = ["RoleHost"]


def _error(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {os.path.basename(frame.filename)}:{frame.lineno}" if frame else ""
    return f"{type(exc).__name__}: {exc}{where}"


class RoleHost:
    """Hosts one role (built from the registry by name) for the arena.

    Args:
        name: the registered role name.
        config: keyword arguments for its factory.
        env: environment variables the role needs in this process (its ``passed_env``).
    """

    def __init__(self, name: str, config: dict[str, Any], env: dict[str, str] | None = None):
        # the variables a role needs (an API key) reach its actor here, not through any log
        os.environ.update(env or {})
        self.name = name
        self.role = REGISTRY.create(name, **config)
        self._version: int | None = None
        self._mutator: Any = None

    def pid(self) -> int:
        """The actor's process id (tests kill it)."""
        return os.getpid()

    # ---- synthesizer --------------------------------------------------------------------

    def propose(
        self, requests: Sequence[ProposalRequest]
    ) -> list[tuple[list[TaskSpec], str | None]]:
        """For each request, its tasks (or none and the error)."""
        out: list[tuple[list[TaskSpec], str | None]] = []
        for request in requests:
            try:
                out.append((list(self.role.propose(request)), None))
            except Exception as exc:  # a failing role is a recorded outcome
                out.append(([], _error(exc)))
        return out

    def mutate(
        self, parents: Sequence[TaskSpec], mutations: Sequence[Mutation]
    ) -> list[tuple[TaskSpec | None, str | None]]:
        """For each mutation, the child task (or None and why the operator did not apply)."""
        if self._mutator is None:
            self._mutator = Mutator()
        by_id = {p.task_id: p for p in parents}
        out: list[tuple[TaskSpec | None, str | None]] = []
        for mutation in mutations:
            parent = by_id.get(mutation.parent)
            if parent is None:
                out.append((None, f"parent {mutation.parent} not given"))
                continue
            try:
                out.append(
                    (self._mutator.mutate(parent, mutation.operator, seed=mutation.seed), None)
                )
            except Exception as exc:
                out.append((None, _error(exc)))
        return out

    # ---- judge --------------------------------------------------------------------------

    def assess(self, tasks: Sequence[TaskSpec]) -> list[Verdict]:
        """A verdict per task; a task the Judge raises on is rejected with the error."""
        try:
            return list(self.role.assess(list(tasks)))
        except Exception:
            pass
        verdicts = []
        for task in tasks:
            try:
                verdicts.extend(self.role.assess([task]))
            except Exception as exc:
                verdicts.append(
                    Verdict(
                        task_id=task.task_id,
                        world_id=task.world_id,
                        accepted=False,
                        checks={
                            "judge": CheckResult(
                                passed=False, reason=f"the judge raised {_error(exc)}"
                            )
                        },
                        error=f"the judge raised {_error(exc)}",
                    )
                )
        return verdicts

    # ---- solver -------------------------------------------------------------------------

    def attempt(
        self, version: int | None, state: list[Any], tasks: Sequence[TaskSpec], seed: int
    ) -> list[Episode]:
        """Episodes of ``tasks`` with the learner's weights ``state`` (a one-item list holding a Ray ref, or empty)."""
        if state and version != self._version and hasattr(self.role, "set_state"):
            self.role.set_state(ray.get(state[0]))
            self._version = version
        try:
            return list(self.role.attempt(list(tasks), seed))
        except Exception as exc:
            why = _error(exc)
            label = getattr(self.role, "name", self.name)
            return [failed_episode(t, seed, why, str(label)) for t in tasks]

    def learn(
        self, episodes: Sequence[Episode], tasks: Sequence[TaskSpec]
    ) -> tuple[LearnStats, bytes | None, str | None]:
        """One learner step: the stats, the new state (None if the solver has none) and an error."""
        remember = getattr(self.role, "remember", None)
        if remember is not None:
            remember(tasks)
        try:
            stats = self.role.learn(list(episodes))
            error = None
        except Exception as exc:
            stats, error = LearnStats(episodes=len(episodes), updates=0), _error(exc)
        getter = getattr(self.role, "get_state", None)
        return stats, (getter() if getter is not None else None), error

    def get_state(self) -> bytes | None:
        """The solver's state (None if it has none)."""
        getter = getattr(self.role, "get_state", None)
        return getter() if getter is not None else None

    def set_state(self, state: bytes) -> None:
        """Load a solver state."""
        self.role.set_state(state)

    def solver_name(self) -> str:
        """How the solver signs its episodes now."""
        return str(getattr(self.role, "name", self.name))

    # ---- world model --------------------------------------------------------------------

    def predict(self, tasks: Sequence[TaskSpec]) -> tuple[list[float], str | None]:
        """P(success) per task (0.5 each and the error if the model raises)."""
        try:
            return [float(p) for p in self.role.predict(list(tasks))], None
        except Exception as exc:
            return [0.5] * len(tasks), _error(exc)

    def update(self, episodes: Sequence[Episode]) -> str | None:
        """Give the model the outcomes; the error if it raised."""
        try:
            self.role.update(list(episodes))
            return None
        except Exception as exc:
            return _error(exc)

    def attempts(self) -> list[dict[str, Any]]:
        """The synthesizer's recorded attempts since the last call (stage, attempt, why it failed), then forgotten."""
        kept = getattr(self.role, "attempts", None)
        if not isinstance(kept, list):
            return []
        out = list(kept)
        kept.clear()
        return out

    def usage(self) -> list[dict[str, Any]]:
        """What the role spent on an API since the last call (per role and task), then forgotten."""
        client = getattr(self.role, "client", None)
        spent = getattr(client, "usage", None)
        if not spent:
            return []
        rows = [
            {"role": role, "task_id": task, **vars(used)}
            for (role, task), used in sorted(spent.items())
        ]
        spent.clear()
        return rows

    def dump(self) -> bytes:
        """The whole role, pickled (for checkpoints of roles without a state API)."""
        return pickle.dumps(self.role)

    def restore(self, data: bytes) -> None:
        """Load what :meth:`dump` returned."""
        self.role = pickle.loads(data)
