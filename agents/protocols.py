"""What crosses a role boundary: the requests and the small Protocols roles satisfy.

Four roles, each a Protocol with one or two required methods. Batches, not
single items, cross every boundary (a Ray call costs about 1 ms, a SQLite
step a few µs), and a role that fails on one item returns a recorded outcome
for it (an Episode with reward 0, a rejected Verdict) instead of raising.

==============  ==============================================  =====================
kind            required                                        optional
==============  ==============================================  =====================
synthesizer     ``propose(request) -> list[TaskSpec]``
solver          ``attempt(tasks, seed) -> list[Episode]``,      ``get_state() -> bytes``,
                ``learn(episodes) -> LearnStats``               ``set_state(bytes)``
judge           ``assess(tasks) -> list[Verdict]``
world model     ``predict(tasks) -> list[float]``,
                ``update(episodes) -> None``
==============  ==============================================  =====================

:func:`coevo.arena.testing.check_role` checks an object against these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol, runtime_checkable

from coevo.arena.outcomes import Episode, Verdict
from coevo.arena.spec import TaskSpec
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ROLE_KINDS",
    "Judge",
    "LearnStats",
    "ProposalRequest",
    "Solver",
    "Synthesizer",
    "WorldModel",
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
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int = Field(ge=0)
    seed: int
    level: int | None = Field(default=None, ge=1, le=5)
    features: dict[str, tuple[float | None, float | None]] = Field(default_factory=dict)
    domains: list[str] | None = None
    families: list[str] | None = None


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
