"""The Judge's checks in worker processes: a task that overruns the wall clock costs a worker, not the run.

:class:`IsolatedJudge` sends each task (and, once per worker, its world) to
a :class:`~coevo.arena.workers.WorkerPool` running :func:`assess_job`. A task
whose checks overrun :attr:`IsolatedJudge.seconds` has its worker killed and
gets a rejected verdict saying so; a worker that dies (out of memory, a
crash) rejects the task it held the same way; the other tasks go on.
Verdicts are the same as :func:`~coevo.arena.judge.assess_task` in this
process gives, since the worker runs exactly that.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, Final

from coevo.arena.judge import CHECK_NAMES, WorldCache, assess_task, check_world_valid
from coevo.arena.limits import DEFAULT_LIMITS, Limits
from coevo.arena.outcomes import CheckResult, Verdict
from coevo.arena.records import parse_record
from coevo.arena.spec import TaskSpec, WorldSpec
from coevo.arena.sqlguard import TaskBudget
from coevo.arena.workers import Crashed, Done, Overrun, WorkerPool

__all__ = ["DEFAULT_TASK_SECONDS", "IsolatedJudge", "assess_job"]

DEFAULT_TASK_SECONDS: Final = 60.0
"""The wall clock one task's checks may take in a worker before it is killed."""

_KEEP_WORLDS: Final = 32
_caches: dict[str, WorldCache] = {}  # in a worker: built worlds, by the limits they were built with


def _wire(spec: TaskSpec | WorldSpec) -> dict[str, Any]:
    """A record as the worker receives it: exactly as given (a wrong ``id`` stays wrong, to be judged)."""
    return spec.model_dump(mode="json", by_alias=True)


def _cache(limits: dict[str, Any]) -> WorldCache:
    key = repr(sorted(limits.items()))
    cache = _caches.get(key)
    if cache is None or len(cache.specs) > _KEEP_WORLDS:
        if cache is not None:
            cache.close()
        cache = _caches[key] = WorldCache(Limits(**limits))
    return cache


def assess_job(job: dict[str, Any]) -> dict[str, Any]:
    """A worker's job: the verdict of one task, or the validity of one world (JSON in, JSON out).

    Args:
        job: ``{"limits": {...}, "worlds": [world records], "task": task record}``,
            or ``"world": world record`` in place of ``"task"``.

    Returns:
        ``{"verdict": ..., "instructions": VM instructions the checks spent}``
        for a task; the ``valid`` check's result for a world.
    """
    cache = _cache(job["limits"])
    for record in job.get("worlds", ()):
        spec = parse_record(record)
        assert isinstance(spec, WorldSpec)
        cache.add(spec)
    if "world" in job:
        spec = parse_record(job["world"])
        assert isinstance(spec, WorldSpec)
        cache.add(spec)
        return check_world_valid(spec, cache).model_dump(mode="json")
    task = parse_record(job["task"])
    assert isinstance(task, TaskSpec)
    if job.get("held") and cache.spec_of(task) is None:
        # the parent sent this world before, and this worker has since let its records go
        return {"forgot": task.world_id}
    budget = TaskBudget(cache.limits.task_vm_instructions)
    verdict = assess_task(task, cache, budget=budget)
    return {"verdict": verdict.model_dump(mode="json"), "instructions": budget.spent}


class IsolatedJudge:
    """The mechanical checks of :func:`~coevo.arena.judge.assess_task`, run in worker processes.

    Args:
        limits: budgets for every world built.
        workers: worker processes (each keeps the worlds it has built).
        seconds: the wall clock one task's checks may take (the backstop
            behind the deterministic budgets; overrunning it rejects the task
            and restarts the worker).
        memory_bytes: each worker's address-space limit.
    """

    def __init__(
        self,
        limits: Limits = DEFAULT_LIMITS,
        *,
        workers: int = 1,
        seconds: float = DEFAULT_TASK_SECONDS,
        memory_bytes: int | None = None,
    ):
        self.limits = limits
        self.seconds = seconds
        extra = {} if memory_bytes is None else {"memory_bytes": memory_bytes}
        self.pool = WorkerPool(
            "coevo.arena.isolation:assess_job", workers=workers, seconds=seconds, **extra
        )
        self._limits = asdict(limits)
        #: VM instructions each task of the last :meth:`assess` spent (None: its worker failed)
        self.instructions: list[int | None] = []

    @property
    def restarts(self) -> int:
        """Workers killed (overrun) or found dead so far."""
        return self.pool.restarts

    def assess(
        self, tasks: Sequence[TaskSpec], worlds: Mapping[str, WorldSpec] | None = None
    ) -> list[Verdict]:
        """One verdict per task, in order; a task whose worker overran or died is rejected, saying so.

        Args:
            tasks: the tasks.
            worlds: world records by id, for tasks that refer to their world by id.
        """
        known = dict(worlds or {})
        jobs = list(tasks)

        def slot_of(_: int, task: TaskSpec) -> int:  # one world's tasks go to one worker
            return zlib.crc32(task.world_id.encode())

        def prepare(task: TaskSpec, holds: set[str], again: bool = False) -> dict[str, Any]:
            # An inline world goes once per worker, like a world given by id (it is 80 KB).
            spec = task.world if isinstance(task.world, WorldSpec) else known.get(task.world)
            if isinstance(task.world, WorldSpec) and task.world.id not in (None, task.world_id):
                spec = None  # a wrong id is the task's own problem: send it as written
            by_id = task.model_copy(update={"world": task.world_id}) if spec else task
            message: dict[str, Any] = {"limits": self._limits, "task": _wire(by_id)}
            if spec is not None and (again or spec.world_id not in holds):
                message["worlds"] = [_wire(spec)]
                holds.add(spec.world_id)
            elif spec is not None:
                message["held"] = True  # the worker says so if it has let the record go
            return message

        outcomes = list(self.pool.run(jobs, slot_of=slot_of, prepare=prepare))
        # a worker keeps a bounded number of worlds: those it let go are sent again
        forgot = [i for i, o in enumerate(outcomes) if isinstance(o, Done) and "forgot" in o.result]
        if forgot:
            retried = self.pool.run(
                [jobs[i] for i in forgot],
                slot_of=slot_of,
                prepare=lambda task, holds: prepare(task, holds, again=True),
            )
            for i, outcome in zip(forgot, retried, strict=True):
                outcomes[i] = outcome
        out = []
        self.instructions = []
        for task, outcome in zip(jobs, outcomes, strict=True):
            if isinstance(outcome, Done):
                out.append(Verdict.model_validate(outcome.result["verdict"]))
                self.instructions.append(outcome.result["instructions"])
            else:
                out.append(_failed_verdict(task, self._why(outcome)))
                self.instructions.append(None)
        return out

    def check_world(self, spec: WorldSpec) -> CheckResult:
        """Whether a world record is valid, built in a worker."""
        job = {"limits": self._limits, "world": _wire(spec)}
        (outcome,) = self.pool.run([job])
        if isinstance(outcome, Done):
            return CheckResult.model_validate(outcome.result)
        return CheckResult(passed=False, reason=self._why(outcome))

    def _why(self, outcome: Overrun | Crashed | Done) -> str:
        if isinstance(outcome, Overrun):
            return (
                f"stopped after {outcome.seconds:g} seconds (the Judge's wall-clock backstop per "
                "task; its worker was killed): a call does too much work per SQLite instruction"
            )
        if isinstance(outcome, Crashed):
            return f"the Judge's worker failed on it: {outcome.detail}"
        return "no verdict"

    def close(self) -> None:
        """Stop the workers."""
        self.pool.close()

    def __enter__(self) -> IsolatedJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _failed_verdict(task: TaskSpec, reason: str) -> Verdict:
    checks = {"valid": CheckResult(passed=False, reason=reason)}
    for name in CHECK_NAMES[1:]:
        checks[name] = CheckResult(passed=None, reason="not run: " + reason.split(":")[0])
    return Verdict(task_id=task.task_id, world_id=task.world_id, accepted=False, checks=checks)
