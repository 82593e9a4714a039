"""What crosses a role boundary: the requests and the small Protocols roles satisfy.

Batches, not single items, cross every boundary (a Ray call costs about 1 ms,
a SQLite step a few µs). The roles issue adds the Solver, Judge and World
model protocols next to :class:`Synthesizer`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from coevo.arena.spec import TaskSpec
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ProposalRequest", "Synthesizer"]


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
