"""What crosses a role boundary: the requests, the four role protocols, and the capabilities a role may add.

Four roles, each a Protocol with one or two required methods. Batches, not
single items, cross every boundary (a Ray call costs about 1 ms, a SQLite
step a few µs), and a role that fails on one item returns a recorded outcome
for it (an Episode with reward 0, a rejected Verdict) instead of raising.

==============  ==============================================
kind            required
==============  ==============================================
synthesizer     ``propose(request) -> list[TaskSpec]``
solver          ``attempt(tasks, seed) -> list[Episode]``,
                ``learn(episodes) -> LearnStats``
judge           ``assess(tasks) -> list[Verdict]``
world model     ``predict(tasks) -> list[float]``,
                ``update(episodes) -> None``
==============  ==============================================

A role may also have *capabilities*, each a small protocol of its own; the
arena uses a capability only when the role has it (``isinstance(role,
Stateful)``) and never looks for anything else:

=================== =========================================== ===================================
capability          methods                                     what the arena does with it
=================== =========================================== ===================================
:class:`Stateful`   ``get_state() -> bytes``, ``set_state``     broadcasts a learner's state to the
                                                                Solver actors; checkpoints it
:class:`Versioned`  ``policy_version() -> str``                 signs predictions and updates with it
:class:`Remembers`  ``remember(tasks)``                         gives a learner the tasks of the
                                                                episodes it is about to learn from
:class:`ReportsUsage` ``drain_usage() -> list[UsageRow]``       writes what an API-backed role spent
                                                                to the ``usage`` table
:class:`ReportsAttempts` ``drain_attempts() -> list[dict]``     writes a synthesizer's attempts to
                                                                ``events.jsonl``
:class:`Learns`     ``learn(feedback) -> LearnStats``           gives a Synthesizer, after each
                    (a Synthesizer's)                           generation, what every task it
                                                                proposed earned
                                                                (:class:`ProposalFeedback`)
:class:`ReportsTrajectories`                                    writes a Synthesizer's rollout of
                    ``drain_trajectories()``                    each task it proposed to the
                    ``-> list[(task id, Trajectory)]``          ``trajectories`` table (purpose
                                                                ``propose``): the batch's proposer
                                                                rows (self-play); when also
                                                                Stateful, gives it each policy a
                                                                trainer announces
:class:`ShipsDecisions`                                         ships what a Solver actor recorded
                    ``drain_decisions() -> bytes``,             while playing a batch to the
                    ``take_decisions(blobs)``                   learner with the episodes (and
                                                                checkpoints a pending step's), so
                                                                the learner need not rebuild it
=================== =========================================== ===================================

State is data: ``get_state`` returns bytes in a documented, versioned
format (:mod:`coevo.arena.state`: JSON and numpy arrays, never pickle), so a
checkpoint from someone else is safe to load. A role without ``Stateful`` is
not checkpointed: a resumed run starts it afresh and says so.

:func:`coevo.run.testing.check_role` checks an object against its
protocol and every capability it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, NamedTuple, Protocol, runtime_checkable

from coevo.arena.gamelog.rows import UsageRow
from coevo.arena.outcomes import Episode, Verdict
from coevo.arena.spec import TaskSpec
from coevo.arena.trajectory import Trajectory
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CAPABILITIES",
    "ROLE_KINDS",
    "Judge",
    "LearnStats",
    "Learns",
    "ProposalFeedback",
    "ProposalRequest",
    "Remembers",
    "ReportsAttempts",
    "ReportsTrajectories",
    "ReportsUsage",
    "RoleEnvironment",
    "ShipsDecisions",
    "Solver",
    "Stateful",
    "Synthesizer",
    "Versioned",
    "WorldModel",
    "capabilities_of",
    "kind_of",
]

ROLE_KINDS: Final = ("synthesizer", "solver", "judge", "world model")
"""The four kinds of role."""


class ProposalRequest(BaseModel):
    """What the curriculum asks a Synthesizer for.

    Attributes:
        n: how many tasks.
        seed: the seed; the same request gives the same tasks.
        level: a difficulty level (1 easiest … 5 hardest), or ``None``.
        features: feature name → ``[low, high]`` (inclusive; ``null`` for open);
            these win over the level's ranges, e.g. ``{"hops": [3, null]}`` for
            "at least three look-ups".
        domains: the domains to draw from (``None``: all the synthesizer has).
        families: the task families to draw from (``None``: the level's).
        binding: the level and features must be met (the eval suite's requests); otherwise a
            Synthesizer that proposes from a policy of its own may take the level as a hint.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int = Field(ge=0)
    seed: int
    level: int | None = Field(default=None, ge=1, le=5)
    features: dict[str, tuple[float | None, float | None]] = Field(default_factory=dict)
    domains: list[str] | None = None
    families: list[str] | None = None
    binding: bool = False


@runtime_checkable
class Synthesizer(Protocol):
    """Proposes tasks. A proposal is not yet accepted: the Judge decides."""

    def propose(self, request: ProposalRequest) -> list[TaskSpec]:
        """Up to ``request.n`` tasks for the request (fewer only when the target cannot be met)."""
        ...


class LearnStats(BaseModel):
    """What one ``Solver.learn`` call did.

    Attributes:
        episodes: episodes learnt from.
        updates: parameter updates made (0 for a frozen or API solver).
        loss: the objective after the update, when the solver has one.
        extra: anything else worth logging (entropy, gradient norm, ...), JSON values.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    episodes: int = Field(ge=0)
    updates: int = Field(default=0, ge=0)
    loss: float | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


@runtime_checkable
class Solver(Protocol):
    """Attempts tasks and may learn from the episodes."""

    def attempt(self, tasks: Sequence[TaskSpec], seed: int) -> list[Episode]:
        """One episode per task, in order (a task that cannot be run gives an episode with reward 0)."""
        ...

    def learn(self, episodes: Sequence[Episode]) -> LearnStats:
        """Learn from episodes (a no-op for a frozen or API solver)."""
        ...


@runtime_checkable
class Judge(Protocol):
    """Decides which tasks may enter a curriculum."""

    def assess(self, tasks: Sequence[TaskSpec]) -> list[Verdict]:
        """One verdict per task, in order (a broken task is a rejected verdict, not an exception)."""
        ...


@runtime_checkable
class WorldModel(Protocol):
    """Predicts the solver's success on a task before any rollout."""

    def predict(self, tasks: Sequence[TaskSpec]) -> list[float]:
        """P(the solver succeeds) per task, in order, each in [0, 1]."""
        ...

    def update(self, episodes: Sequence[Episode]) -> None:
        """Learn from the outcomes of real episodes."""
        ...


# ---- capabilities ----------------------------------------------------------------------


@runtime_checkable
class Stateful(Protocol):
    """A role whose state can be saved and loaded as data (a learner's weights, a model's fit)."""

    def get_state(self) -> bytes:
        """The whole state, as bytes in a documented format (:mod:`coevo.arena.state`; never pickle)."""
        ...

    def set_state(self, state: bytes) -> None:
        """Load what :meth:`get_state` returned (raise :class:`~coevo.arena.errors.StateError` if it cannot)."""
        ...


@runtime_checkable
class Versioned(Protocol):
    """A role whose behaviour changes as it learns, and which says which version it is now."""

    def policy_version(self) -> str:
        """How the role signs its records now, e.g. ``linear-pg@12`` (episodes carry it as ``solver``)."""
        ...


@runtime_checkable
class Remembers(Protocol):
    """A learner that wants the tasks of the episodes it learns from (it never sees their solutions' use)."""

    def remember(self, tasks: Sequence[TaskSpec]) -> None:
        """The tasks of the next ``learn`` call's episodes."""
        ...


@runtime_checkable
class ReportsUsage(Protocol):
    """A role that spends on an API (calls, tokens, dollars) and says what, per task."""

    def drain_usage(self) -> list[UsageRow]:
        """What was spent since the last call, one row per (role, task); then forgotten."""
        ...


@runtime_checkable
class ReportsAttempts(Protocol):
    """A synthesizer that keeps a record of every attempt it made (stage, attempt, why it failed)."""

    def drain_attempts(self) -> list[dict[str, Any]]:
        """The attempts since the last call, each a JSON-ready mapping; then forgotten."""
        ...


class ProposalFeedback(BaseModel):
    """What one proposed task earned its Synthesizer in one generation (the input of :meth:`Learns.learn`).

    The arena computes it after the generation's rollouts, for every task the
    Synthesizer proposed (accepted or not), with the proposer objective of the
    experiment's ``[proposer]`` table (``docs/self-play.md``); the same numbers
    are the game log's ``proposals`` rows.

    Attributes:
        task_id: the proposed task.
        gen: the generation it was proposed for.
        accepted: whether the Judge accepted it.
        failed: the Judge's checks it failed (empty when accepted).
        outcomes: the Solver's training rewards on it this generation (empty: not played).
        p_hat: the Solver's observed success on it (the mean of ``outcomes``; None: not played).
        flaky: why its reward cannot be trusted, or None: the Judge found it nondeterministic or
            ambiguous, or Solver attempts that made the same calls earned different rewards.
        novelty: how unlike the tasks proposed before it is (0 a repeat … 1 nothing shared).
        reward: the proposer reward under the objective (a penalty when rejected or flaky);
            None for an accepted task the Solver did not play (a learner is not given these).
        objective: the objective's name (``learnability``, ``r-zero``, ``absolute-zero``).
        features: the task's measured features.
        provenance: the task's provenance (what the Synthesizer recorded of how it made it).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    gen: int
    accepted: bool
    failed: list[str] = Field(default_factory=list)
    outcomes: list[int] = Field(default_factory=list)
    p_hat: float | None = None
    flaky: str | None = None
    novelty: float = 1.0
    reward: float | None
    objective: str
    features: dict[str, float] = Field(default_factory=dict)
    provenance: dict[str, Any] = Field(default_factory=dict)


@runtime_checkable
class Learns(Protocol):
    """A Synthesizer that learns from what its proposals earned (self-play's proposer)."""

    def learn(self, feedback: Sequence[ProposalFeedback]) -> LearnStats:
        """One update from the feedback on every task proposed in a generation."""
        ...


@runtime_checkable
class ReportsTrajectories(Protocol):
    """A Synthesizer that plays the trained policy as the proposer (self-play) and keeps its rollouts.

    Each task it proposes comes with the rollout that made it: every call to
    the model, as the turns of one :class:`~coevo.arena.trajectory.Trajectory`.
    The arena writes the rollouts of the tasks proposed for a generation to the
    ``trajectories`` table (purpose ``propose``), and the trainer hand-off puts
    them in the generation's batch as ``proposer`` rows, paid the proposal's
    proposer reward. Such a Synthesizer plays the policy the trainer trains:
    when it is also :class:`Stateful`, the arena gives it every policy a trainer
    announces, as it gives the Solver (``set_state``).
    """

    def drain_trajectories(self) -> list[tuple[str, Trajectory]]:
        """``(task id, rollout)`` of each task proposed since the last call, in proposal order; then forgotten."""
        ...


@runtime_checkable
class ShipsDecisions(Protocol):
    """A learning Solver whose players record what its learner needs, and ship it with the episodes.

    The loop's Solver actors play and a learner actor (another instance)
    learns. A Solver that records, while playing, what a ``learn`` step needs
    (``linear-pg``: its softmax decisions, :mod:`coevo.agents.decisions`)
    hands it over as data after each ``attempt``; the learner takes the blobs
    of the episodes it is about to learn from. The blobs are a cache: ``learn``
    must give the same result with them as without (when it rebuilds what it
    needs from the episodes); ``check_role`` checks this.
    """

    def drain_decisions(self) -> bytes:
        """What was recorded while playing since the last call (``coevo.state/1`` data, never a pickle); then forgotten."""
        ...

    def take_decisions(self, blobs: Sequence[bytes]) -> None:
        """Blobs other instances drained, for the next ``learn`` (raise :class:`~coevo.arena.errors.StateError` if one is damaged)."""
        ...


CAPABILITIES: Final[dict[str, type]] = {
    "stateful": Stateful,
    "versioned": Versioned,
    "remembers": Remembers,
    "reports-usage": ReportsUsage,
    "reports-attempts": ReportsAttempts,
    "learns": Learns,
    "reports-trajectories": ReportsTrajectories,
    "ships-decisions": ShipsDecisions,
}
"""Every capability by the name ``coevo roles`` shows."""


def capabilities_of(obj: object) -> list[str]:
    """The names of the capabilities ``obj`` (an instance or a class) has.

    ``learns`` is a Synthesizer's: a Solver's ``learn`` is part of its protocol.
    """
    if isinstance(obj, type):
        found = [name for name, p in CAPABILITIES.items() if issubclass(obj, p)]
        solver = issubclass(obj, Solver)
    else:
        found = [name for name, p in CAPABILITIES.items() if isinstance(obj, p)]
        solver = isinstance(obj, Solver)
    return [name for name in found if not (solver and name == "learns")]


class RoleEnvironment(NamedTuple):
    """The environment variables a role needs (computed from its settings by its registration).

    Attributes:
        required: variables the role cannot start without (checked before anything starts).
        passed: variables handed to the role's actors (an API key; never logged).
    """

    required: tuple[str, ...] = ()
    passed: tuple[str, ...] = ()


_PROTOCOLS: Final[dict[str, type]] = {
    "synthesizer": Synthesizer,
    "solver": Solver,
    "judge": Judge,
    "world model": WorldModel,
}


def kind_of(obj: object) -> str | None:
    """The kind of role ``obj`` is by the methods it has (``None`` when it satisfies no protocol).

    An object may declare its kind with a ``kind`` attribute; it must then
    also satisfy that kind's protocol.
    """
    declared = getattr(obj, "kind", None)
    if isinstance(declared, str) and declared in _PROTOCOLS:
        return declared if isinstance(obj, _PROTOCOLS[declared]) else None
    for kind, protocol in _PROTOCOLS.items():
        if isinstance(obj, protocol):
            return kind
    return None
