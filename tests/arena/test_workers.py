"""The worker pool: persistent processes, JSON jobs, killed and restarted when a job overruns or dies."""

from __future__ import annotations

import pytest
from coevo.arena import TaskSpec
from coevo.arena.isolation import IsolatedJudge
from coevo.arena.judge import WorldCache, assess_task
from coevo.arena.limits import Limits
from coevo.arena.workers import Crashed, Done, Overrun, WorkerPool

from tests.factories import call, mini_task, mini_world, tool

HANDLER = "tests.arena.worker_jobs:job"

pytestmark = pytest.mark.slow  # worker processes of their own


def test_jobs_come_back_in_order_from_persistent_workers():
    """Results come back in job order; a worker keeps its state between jobs (it is not restarted)."""
    with WorkerPool(HANDLER, workers=2, seconds=30) as pool:
        outcomes = list(pool.run([{"echo": i} for i in range(10)]))
        again = list(pool.run([{"echo": "x"}, {"echo": "y"}]))
    assert [o.result["echo"] for o in outcomes] == list(range(10))
    assert all(isinstance(o, Done) for o in outcomes + again)
    assert len({o.result["pid"] for o in outcomes}) == 2
    assert max(o.result["jobs"] for o in again) == 6  # the same two processes, still counting
    assert pool.restarts == 0


def test_an_overrunning_job_is_killed_and_the_pool_goes_on():
    """A job past its wall clock gets its worker killed and restarted; the jobs after it run normally."""
    with WorkerPool(HANDLER, seconds=1.0) as pool:
        first, slow, after = pool.run([{"echo": 1}, {"do": "sleep", "seconds": 60}, {"echo": 3}])
    assert isinstance(slow, Overrun) and slow.seconds == 1.0
    assert isinstance(first, Done) and isinstance(after, Done)
    assert after.result["pid"] != first.result["pid"] and after.result["jobs"] == 1
    assert pool.restarts == 1


def test_a_dying_worker_is_a_crashed_job_and_a_raising_job_is_not_a_dead_worker():
    """A worker that exits mid-job reports its exit status; a job that raises leaves its worker alive."""
    with WorkerPool(HANDLER, seconds=30) as pool:
        died, raised, printed, after = pool.run(
            [{"do": "exit", "status": 3}, {"do": "raise"}, {"do": "print"}, {"echo": 4}]
        )
    assert isinstance(died, Crashed) and "exit status 3" in died.detail
    assert isinstance(raised, Crashed) and "ValueError: asked to fail" in raised.detail
    assert isinstance(printed, Done)  # a stray print does not corrupt the frames
    assert isinstance(after, Done) and after.result["jobs"] == 3
    assert pool.restarts == 1


def test_a_worker_has_a_memory_limit():
    """A job that allocates past the worker's address-space limit fails; the pool goes on."""
    with WorkerPool(HANDLER, seconds=30, memory_bytes=600 << 20) as pool:
        big, small = pool.run(
            [{"do": "allocate", "megabytes": 2000}, {"do": "allocate", "megabytes": 10}]
        )
    assert isinstance(big, Crashed) and "MemoryError" in big.detail
    assert isinstance(small, Done) and small.result == {"allocated": 10}


def _grinding_task() -> TaskSpec:
    """A valid task whose solution calls a tool doing megabytes of work per SQLite instruction."""
    world = mini_world()
    world["tools"] = world["tools"] + [
        tool(
            "grind",
            "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 100000) "
            "SELECT count(replace(printf('%900000c', 'x'), ' ', 'y')) AS n FROM r",
        )
    ]
    task = mini_task(world=world)
    task["solution"] = [call("grind"), *task["solution"]]
    return TaskSpec.model_validate(task)


def test_the_isolated_judge_rejects_a_task_that_overruns_and_judges_the_next():
    """The wall clock per task holds whatever a call does: the task is rejected saying so; the next is judged."""
    slow, fine = _grinding_task(), TaskSpec.model_validate(mini_task())
    limits = Limits(max_call_seconds=3600, vm_instructions=10**12, task_vm_instructions=10**12)
    with IsolatedJudge(limits, seconds=2.0) as judge:
        first, second = judge.assess([slow, fine])
        assert judge.restarts == 1
    assert not first.accepted and "wall-clock backstop" in first.checks["valid"].reason
    assert second.accepted
    assert second.model_dump() == assess_task(fine, WorldCache(limits)).model_dump()


def test_the_isolated_judge_gives_the_same_verdicts(examples):
    """Judged in workers or in this process, every example gets the same verdict."""
    tasks, worlds = examples
    with IsolatedJudge(workers=2) as judge:
        isolated = judge.assess(tasks, worlds)
    here = [assess_task(task, WorldCache(specs=worlds)) for task in tasks]
    assert [v.model_dump() for v in isolated] == [v.model_dump() for v in here]


def test_a_caller_that_stops_early_gets_no_stale_answer_next_time():
    """Leaving a run before its last answer stops the jobs still running; the next run's answers are its own."""
    with WorkerPool(HANDLER, seconds=30) as pool:  # one worker: the sleeping job is on it
        for outcome in pool.run([{"echo": "first"}, {"do": "sleep", "seconds": 30}]):
            assert outcome.result["echo"] == "first"
            break
        (fresh,) = pool.run([{"echo": "fresh"}])
    assert isinstance(fresh, Done) and fresh.result["echo"] == "fresh"
    assert pool.restarts == 1


def test_a_worker_that_let_a_world_go_is_sent_it_again():
    """More worlds than a judging worker keeps: tasks of the first world, judged again later, still find it (were: "not defined")."""
    from coevo.agents.protocols import ProposalRequest
    from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
    from coevo.arena.isolation import _KEEP_WORLDS

    synth = ProceduralSynthesizer(["retail"], world_pool=_KEEP_WORLDS + 8)
    tasks = [
        t
        for seed in range(_KEEP_WORLDS + 8)
        for t in synth.propose(ProposalRequest(n=1, seed=seed))
    ]
    worlds = {t.world_id for t in tasks}
    assert len(worlds) > _KEEP_WORLDS + 1, "more worlds than a worker keeps"
    with IsolatedJudge(workers=1) as judge:
        first = judge.assess(tasks)
        again = judge.assess(tasks[:4])  # the worker has let these worlds go by now
    assert all(v.accepted for v in first), [v.failed for v in first if not v.accepted]
    assert [v.model_dump() for v in again] == [v.model_dump() for v in first[:4]]
