"""Built-in Judge roles."""

from __future__ import annotations

from collections.abc import Sequence

from coevo.agents.search import search_solve
from coevo.arena.isolation import DEFAULT_TASK_SECONDS, IsolatedJudge
from coevo.arena.judge import WorldCache, assess_task
from coevo.arena.limits import DEFAULT_LIMITS, Limits
from coevo.arena.outcomes import CheckResult, Verdict
from coevo.arena.spec import TaskSpec

__all__ = ["MechanicalJudge", "SearchJudge"]


class MechanicalJudge:
    """The Judge's mechanical checks (valid, oracle, noop, unsolved, partial, determinism, grounded).

    ``solvable`` stays ``null``: proving it needs a solver that never saw the
    solution (a search judge). Worlds are built once and kept for the next
    batch (the last ``keep_worlds`` of them).

    By default the checks run in worker processes
    (:class:`~coevo.arena.isolation.IsolatedJudge`): a task whose checks
    overrun ``task_seconds`` of wall clock is rejected, saying so, and its
    worker restarted, so no task can hang the Judge. ``isolate = false``
    runs them in the Judge's own process (faster, for trusted synthesizers).

    Args:
        limits: budgets for every world built.
        keep_worlds: built worlds kept between batches.
        isolate: run the checks in worker processes.
        workers: worker processes when isolated.
        task_seconds: the wall clock one task's checks may take when isolated.
    """

    kind = "judge"

    def __init__(
        self,
        limits: Limits = DEFAULT_LIMITS,
        keep_worlds: int = 16,
        isolate: bool = True,
        workers: int = 1,
        task_seconds: float = DEFAULT_TASK_SECONDS,
    ):
        self.limits = limits
        self.keep_worlds = keep_worlds
        self._cache = WorldCache(limits)
        self._isolated = (
            IsolatedJudge(limits, workers=workers, seconds=task_seconds) if isolate else None
        )

    def assess(self, tasks: Sequence[TaskSpec]) -> list[Verdict]:
        """One verdict per task, in order (a broken task is a rejected verdict)."""
        if len(self._cache.specs) > self.keep_worlds:
            self._cache.close()
            self._cache = WorldCache(self.limits)
        if self._isolated is not None:
            for task in tasks:  # remembered (not built) for roles that need the world here
                spec = self._cache.spec_of(task)
                if spec is not None:
                    self._cache.add(spec)
            return self._isolated.assess(tasks, self._cache.specs)
        return [assess_task(task, self._cache) for task in tasks]


class SearchJudge(MechanicalJudge):
    """The mechanical checks, then ``solvable``: a search that never saw the solution must earn 1.

    The search (:func:`coevo.agents.search.search_solve`) only calls tools with
    values it has seen. A task it solves gets ``solvable: passed`` and the
    tool calls the search spent in :attr:`Verdict.solve_calls
    <coevo.arena.outcomes.Verdict.solve_calls>` (a difficulty signal; the
    reason also gives the length of the calls it found); a task it cannot
    solve within the budget stays ``solvable: null``, *unproven*, with the
    budget in the reason and ``solve_calls`` None, and the curriculum decides
    what to do with it.

    Args:
        budget: tool calls the search may spend per task.
        limits: budgets for every world built.
        keep_worlds: built worlds kept between batches.
        isolate: run the mechanical checks in worker processes.
        workers: worker processes when isolated.
        task_seconds: the wall clock one task's checks may take when isolated.
    """

    kind = "judge"

    def __init__(
        self,
        budget: int = 5000,
        limits: Limits = DEFAULT_LIMITS,
        keep_worlds: int = 16,
        isolate: bool = True,
        workers: int = 1,
        task_seconds: float = DEFAULT_TASK_SECONDS,
    ):
        super().__init__(limits, keep_worlds, isolate, workers, task_seconds)
        self.budget = budget

    def assess(self, tasks: Sequence[TaskSpec]) -> list[Verdict]:
        """One verdict per task, in order, with ``solvable`` decided by the search."""
        verdicts = super().assess(tasks)
        out = []
        for task, verdict in zip(tasks, verdicts, strict=True):
            if not verdict.accepted:
                out.append(verdict)
                continue
            spec = self._cache.spec_of(task)
            if spec is None:  # an accepted task always has its world; never reached
                out.append(verdict)
                continue
            result = search_solve(task, self._cache.world(spec), budget=self.budget)
            checks = dict(verdict.checks)
            checks["solvable"] = CheckResult(
                passed=True if result.solved else None, reason=result.reason
            )
            solve_calls = result.spent if result.solved else None
            out.append(verdict.model_copy(update={"checks": checks, "solve_calls": solve_calls}))
        return out
