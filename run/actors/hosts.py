"""A role inside a Ray actor, one host per kind: every call batched, every failure a recorded outcome.

A host is a plain class (the arena wraps it with ``ray.remote``, or calls it
in process: :mod:`coevo.run.actors.start`); it builds
its role from the registry in the actor's own process and turns whatever the
role raises into data the game log can hold:

* a Synthesizer that raises on a request yields no tasks and the error;
* a Judge that raises on a batch, or answers it with verdicts of other tasks
  or another count, is asked task by task, and a task that still fails gets a
  rejected verdict whose ``error`` says so;
* a Solver that raises, or returns episodes of other tasks or another count,
  gives reward-0 episodes whose reason names the problem;
* a World model that raises, or returns other than one probability per task,
  predicts 0.5 (and the error is reported).

The loop counts every one of these in the generation's ``failures``.

A host uses a capability (:mod:`coevo.agents.protocols`) only when its role
has it, checked with ``isinstance``; it reads nothing else off the role.

Every host keeps the wall-clock intervals its role was busy (its work
methods: ``propose``, ``mutate``, ``assess``, ``attempt``, ``learn``,
``predict``, ``update``); :meth:`_Host.drain_busy` hands them over and
runs in its own concurrency group (:data:`MONITOR`), so the loop can ask
while a long call is still running.

The Solver's weights come with every ``attempt`` (as a reference to the
learner's latest state), so an actor that was killed and restarted, and the
batch Ray retried on it, plays exactly the episodes the first one would have.
A Solver that :class:`~coevo.agents.protocols.ShipsDecisions` returns what it
recorded playing each batch beside the episodes, and the learner's ``learn``
takes it with them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

import ray
from coevo.agents.protocols import (
    Learns,
    LearnStats,
    ProposalFeedback,
    ProposalRequest,
    Remembers,
    ReportsAttempts,
    ReportsTrajectories,
    ReportsUsage,
    ShipsDecisions,
    Stateful,
    Versioned,
)
from coevo.agents.registry import REGISTRY
from coevo.agents.synthesizers.mutation import Mutator
from coevo.arena.errors import StateError
from coevo.arena.gamelog.rows import UsageRow
from coevo.arena.outcomes import Episode, Verdict, failed_episode, failed_verdict
from coevo.arena.spec import TaskSpec
from coevo.arena.trajectory import Trajectory
from coevo.curricula.base import Mutation
from coevo.run.driver.failures import without_doc_links

__all__ = [
    "MONITOR",
    "JudgeHost",
    "SolverHost",
    "SynthesizerHost",
    "WorldModelHost",
    "host_for",
    "remote_host",
]

MONITOR: Final = "monitor"
"""The concurrency group of :meth:`_Host.drain_busy` (one thread beside the role's calls)."""

_F = TypeVar("_F", bound=Callable[..., Any])


def _busy(method: _F) -> _F:
    """Record the wall-clock interval of each call of a host's work method."""

    @functools.wraps(method)
    def timed(self: _Host, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self._since = time.time()
        try:
            return method(self, *args, **kwargs)
        finally:
            with self._lock:
                if self._since is not None:
                    self._intervals.append((self._since, time.time()))
                self._since = None

    return timed  # type: ignore[return-value]  # the wrapper keeps the method's signature


def _resolved(ref: Any) -> Any:
    """The value of a reference the loop passed inside a list (a Ray ref, or in-process its holder)."""
    # duck-typed: coevo.run.actors.start.LocalRef (that module imports this one)
    return ref.result() if hasattr(ref, "result") else ray.get(ref)


def _error(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {os.path.basename(frame.filename)}:{frame.lineno}" if frame else ""
    return f"{type(exc).__name__}: {without_doc_links(str(exc))}{where}"


def _matches(results: Sequence[Episode] | Sequence[Verdict], tasks: Sequence[TaskSpec]) -> bool:
    """One result per task, in the tasks' order (the batch contract every role keeps)."""
    return len(results) == len(tasks) and all(
        r.task_id == t.task_id for r, t in zip(results, tasks, strict=True)
    )


class _Host:
    """What every host does: build the role, report its pid and what it spent.

    Args:
        name: the registered role name.
        config: the role's settings (validated again here, in the actor's process).
        env: environment variables the role needs in this process (never logged).
    """

    def __init__(self, name: str, config: dict[str, Any], env: dict[str, str] | None = None):
        # the variables a role needs (an API key) reach its actor here, not through any log
        os.environ.update(env or {})
        self._lock = threading.Lock()
        self._intervals: list[tuple[float, float]] = []
        self._since: float | None = None  # when the call running now started
        self.name = name
        self.role = REGISTRY.get(name).create(config)

    def pid(self) -> int:
        """The actor's process id (tests kill it)."""
        return os.getpid()

    @ray.method(concurrency_group=MONITOR)
    def drain_busy(self) -> list[tuple[float, float]]:
        """The intervals (``time.time()``) the role was busy since the last call; a call still running counts up to now."""
        with self._lock:
            out, self._intervals = self._intervals, []
            if self._since is not None:
                now = time.time()
                out.append((self._since, now))
                self._since = now
        return out

    def drain_usage(self) -> list[UsageRow]:
        """What the role spent on an API since the last call (none if it does not say)."""
        return self.role.drain_usage() if isinstance(self.role, ReportsUsage) else []

    def get_state(self) -> bytes | None:
        """The role's state as data, or None when the role is not :class:`Stateful`."""
        return self.role.get_state() if isinstance(self.role, Stateful) else None

    def set_state(self, state: bytes) -> None:
        """Load a state (the role is :class:`Stateful`: the state came from it)."""
        self.role.set_state(state)


class SynthesizerHost(_Host):
    """Hosts a Synthesizer; also makes the curriculum's mutations (the operators need no role).

    A Synthesizer that learns (:class:`~coevo.agents.protocols.Learns`) has
    one more host, its learner; the learner's state comes with every
    ``propose``, as a Solver's does with ``attempt``.
    """

    def __init__(self, name: str, config: dict[str, Any], env: dict[str, str] | None = None):
        super().__init__(name, config, env)
        self._mutator: Mutator | None = None
        self._version: int | None = None

    def learns(self) -> bool:
        """Whether the Synthesizer learns from feedback (and keeps its state as data)."""
        return isinstance(self.role, Learns) and isinstance(self.role, Stateful)

    @_busy
    def propose(
        self,
        requests: Sequence[ProposalRequest],
        version: int | None = None,
        state: Sequence[Any] = (),
    ) -> list[tuple[list[TaskSpec], str | None]]:
        """For each request, its tasks (or none and the error), proposed with the learner's ``state``.

        ``state`` is a one-item list holding a Ray ref to the learner's state
        (loaded once per ``version``), or empty.
        """
        if state and version != self._version and isinstance(self.role, Stateful):
            self.role.set_state(_resolved(state[0]))
            self._version = version
        out: list[tuple[list[TaskSpec], str | None]] = []
        for request in requests:
            try:
                out.append((list(self.role.propose(request)), None))
            except Exception as exc:  # a failing role is a recorded outcome
                out.append(([], _error(exc)))
        return out

    @_busy
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

    def drain_attempts(self) -> list[dict[str, Any]]:
        """The synthesizer's recorded attempts since the last call (none if it keeps no record)."""
        return self.role.drain_attempts() if isinstance(self.role, ReportsAttempts) else []

    def drain_trajectories(self) -> list[tuple[str, Trajectory]]:
        """The proposer's rollout of each task proposed since the last call (none if it keeps none)."""
        return self.role.drain_trajectories() if isinstance(self.role, ReportsTrajectories) else []

    @_busy
    def learn(
        self, feedback: Sequence[ProposalFeedback]
    ) -> tuple[LearnStats, bytes | None, str | None]:
        """One proposer update: the stats, the new state and an error (the state is unchanged then)."""
        try:
            stats = self.role.learn(list(feedback))
            error = None
        except Exception as exc:
            stats, error = LearnStats(episodes=len(feedback), updates=0), _error(exc)
        return stats, self.get_state(), error

    def policy_version(self) -> str:
        """How the Synthesizer signs its proposals now (its registered name if it is not Versioned)."""
        return self.role.policy_version() if isinstance(self.role, Versioned) else self.name


class JudgeHost(_Host):
    """Hosts a Judge."""

    @_busy
    def assess(self, tasks: Sequence[TaskSpec]) -> list[Verdict]:
        """A verdict per task, in order; a task the Judge fails on is rejected with the reason."""
        try:
            verdicts = list(self.role.assess(list(tasks)))
            if _matches(verdicts, tasks):
                return verdicts
        except Exception:
            pass
        out = []
        for task in tasks:
            try:
                (verdict,) = answer = list(self.role.assess([task]))
                if not _matches(answer, [task]):
                    raise ValueError(f"it returned a verdict of task {verdict.task_id}")
                out.append(verdict)
            except Exception as exc:
                out.append(failed_verdict(task, _error(exc)))
        return out


class SolverHost(_Host):
    """Hosts a Solver: the players of a generation's episodes, and the learner."""

    def __init__(self, name: str, config: dict[str, Any], env: dict[str, str] | None = None):
        super().__init__(name, config, env)
        self._version: int | None = None

    @_busy
    def attempt(
        self,
        version: int | None,
        state: list[Any],
        tasks: Sequence[TaskSpec],
        seed: int,
        ship: bool = True,
    ) -> tuple[list[Episode], bytes | None]:
        """Episodes of ``tasks`` with the learner's weights ``state`` (a one-item list holding a Ray ref, or empty).

        Returns the episodes and, from a Solver that :class:`ShipsDecisions`,
        what it recorded playing them, for the learner (None otherwise, when
        the batch failed, or with ``ship`` false: episodes nobody learns from,
        such as an eval suite's). The decisions are a cache: failing to pack
        them costs the learner a rebuild, never the batch.
        """
        if state and version != self._version and isinstance(self.role, Stateful):
            self.role.set_state(_resolved(state[0]))
            self._version = version
        ships = isinstance(self.role, ShipsDecisions)
        try:
            episodes = list(self.role.attempt(list(tasks), seed))
            shipped = None
            if ships:
                try:
                    shipped = self.role.drain_decisions()
                except Exception:
                    shipped = None
            if _matches(episodes, tasks):
                return episodes, shipped if ship else None
            why = f"it returned {len(episodes)} episodes for {len(tasks)} tasks, or of other tasks"
        except Exception as exc:
            why = _error(exc)
        if ships:  # what a failed batch recorded is not learnt from: forgotten
            with contextlib.suppress(Exception):
                self.role.drain_decisions()
        return [failed_episode(t, seed, why, self.policy_version()) for t in tasks], None

    @_busy
    def learn(
        self,
        episodes: Sequence[Episode],
        tasks: Sequence[TaskSpec],
        decisions: Sequence[bytes] = (),
    ) -> tuple[LearnStats, bytes | None, str | None]:
        """One learner step: the stats, the new state (None if the solver has none) and an error.

        ``decisions``: what the Solver actors shipped with the episodes (given to a
        Solver that :class:`ShipsDecisions`, which then need not rebuild it).
        """
        if isinstance(self.role, Remembers):
            self.role.remember(tasks)
        if decisions and isinstance(self.role, ShipsDecisions):
            # a cache: a blob that does not read is left out, and learn rebuilds its decisions
            for blob in decisions:
                with contextlib.suppress(StateError):
                    self.role.take_decisions([blob])
        try:
            stats = self.role.learn(list(episodes))
            error = None
        except Exception as exc:
            stats, error = LearnStats(episodes=len(episodes), updates=0), _error(exc)
        return stats, self.get_state(), error

    def policy_version(self) -> str:
        """How the solver signs its episodes now (its registered name if it is not :class:`Versioned`)."""
        return self.role.policy_version() if isinstance(self.role, Versioned) else self.name


class WorldModelHost(_Host):
    """Hosts a World model."""

    @_busy
    def predict(self, tasks: Sequence[TaskSpec]) -> tuple[list[float], str | None]:
        """P(success) per task (0.5 each and the error if the model raises)."""
        try:
            predicted = [float(p) for p in self.role.predict(list(tasks))]
        except Exception as exc:
            return [0.5] * len(tasks), _error(exc)
        if len(predicted) != len(tasks) or not all(0.0 <= p <= 1.0 for p in predicted):
            why = (
                f"it returned {len(predicted)} values for {len(tasks)} tasks, or one outside [0, 1]"
            )
            return [0.5] * len(tasks), why
        return predicted, None

    @_busy
    def update(self, episodes: Sequence[Episode]) -> str | None:
        """Give the model the outcomes; the error if it raised."""
        try:
            self.role.update(list(episodes))
            return None
        except Exception as exc:
            return _error(exc)


_HOSTS: dict[str, type[_Host]] = {
    "synthesizer": SynthesizerHost,
    "judge": JudgeHost,
    "solver": SolverHost,
    "world model": WorldModelHost,
}


def host_for(kind: str) -> type[_Host]:
    """The host class of a role kind."""
    return _HOSTS[kind]


def remote_host(kind: str) -> Any:
    """The Ray actor class of a role kind: its calls one at a time, ``drain_busy`` beside them."""
    # ray's type stubs leave concurrency_groups out of remote()'s overloads
    return ray.remote(concurrency_groups={MONITOR: 1})(host_for(kind))  # type: ignore[call-overload]
