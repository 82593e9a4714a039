"""Built-in Judge roles."""

from __future__ import annotations

from collections.abc import Sequence

from coevo.arena.judge import WorldCache, assess_task
from coevo.arena.limits import DEFAULT_LIMITS, Limits
from coevo.arena.outcomes import Verdict
from coevo.arena.spec import TaskSpec

__all__ = ["MechanicalJudge"]


class MechanicalJudge:
    """The Judge's mechanical checks (valid, oracle, noop, unsolved, partial, determinism, grounded).

    ``solvable`` stays ``null``: proving it needs a solver that never saw the
    solution (a search judge). Worlds are built once and kept for the next
    batch (the last ``keep_worlds`` of them).

    Args:
        limits: budgets for every world built.
        keep_worlds: built worlds kept between batches.
    """

    kind = "judge"

    def __init__(self, limits: Limits = DEFAULT_LIMITS, keep_worlds: int = 16):
        self.limits = limits
        self.keep_worlds = keep_worlds
        self._cache = WorldCache(limits)

    def assess(self, tasks: Sequence[TaskSpec]) -> list[Verdict]:
        """One verdict per task, in order (a broken task is a rejected verdict)."""
        if len(self._cache.specs) > self.keep_worlds:
            self._cache.close()
            self._cache = WorldCache(self.limits)
        return [assess_task(task, self._cache) for task in tasks]
