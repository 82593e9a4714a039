"""A benchmark run: an experiment whose pool is a file of imported code tasks, each played ``trials`` times.

``coevo run`` of an experiment with a ``[benchmark]`` table
(:class:`~coevo.run.experiment.BenchmarkConfig`) comes here instead of
the co-evolution loop. There is no Synthesizer, curriculum, learner or World
model: the tasks are fixed, and what is measured is how reliably the Solver
(an LLM Solver, on either backend) solves them, with an LLM user simulator
(:class:`~coevo.agents.llm.user.LLMUser`) playing each task's customer.

* Generation 0 logs every world and task of the pool (``tasks.source`` =
  ``imported``) and the Judge's verdict on each (``judge = "static"``:
  ``valid``; ``"replay"``: every check of
  :func:`~coevo.arena.codetask.assess_code_task`, in the sandbox); a rejected
  task is never played.
* Each generation is one trial of every accepted task, spread over the
  Solver actors (Ray actors, ``solver.actors``), each with its own sandboxed
  tool workers; its episodes are logged as eval episodes (``episodes``,
  ``evals``, ``trajectories``), with what the models spent (``usage``), and
  the generation is committed like any other: a killed run resumes at the
  next trial (``coevo resume``) and the log stays readable.
* The seeds derive from ``run.seed``, the trial and the task, so the same
  seed sends the same requests (what a model answers is the server's).

``coevo analyze`` gives pass^k over the trials
(:mod:`coevo.arena.analysis.passk`), ``coevo export`` the pool's tasks.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from coevo.agents.llm.codeplay import play_code
from coevo.agents.llm.environment import llm_environment
from coevo.agents.llm.solver import LLMSolver
from coevo.agents.llm.user import LLMUser
from coevo.agents.registry import REGISTRY
from coevo.arena.codetask import (
    RESPOND,
    CodeTaskSpec,
    assess_code_task,
    code_records,
    code_tasks_of,
    read_code_tasks,
    static_problems,
)
from coevo.arena.codeworld import CodeWorlds, domain_code_fails, replay
from coevo.arena.errors import ArenaError, CoevoError
from coevo.arena.gamelog import GameLog, RunDir, RunLock
from coevo.arena.gamelog.figures import rejection_counts, top_rejections
from coevo.arena.gamelog.rows import (
    EpisodeRow,
    EvalRow,
    GenerationRecord,
    GenerationRow,
    TaskRow,
    TrajectoryRow,
    UsageRow,
    VerdictRow,
    WorldRow,
)
from coevo.arena.ids import episode_id
from coevo.arena.outcomes import JUDGE_FAILED_PREFIX, CheckResult, Episode, Verdict
from coevo.arena.secrets import redact
from coevo.arena.seeding import derive_seed
from coevo.run.actors.inprocess import get, kill
from coevo.run.actors.pool import ActorPool, Lost
from coevo.run.actors.start import start_hosts
from coevo.run.driver.driving import driving
from coevo.run.driver.failures import RoleTally
from coevo.run.driver.stopping import at_commit, generations_begin
from coevo.run.experiment import BenchmarkConfig, Experiment
from coevo.run.generation.state import GenerationReport, RunSummary

__all__ = [
    "POOL",
    "BenchmarkHost",
    "check_pool",
    "host_environment",
    "pool_tasks",
    "read_pool",
    "run_benchmark",
]


class BenchmarkHost:
    """One Solver actor of a benchmark run: the LLM Solver, the user simulator and sandboxed tool workers.

    Args:
        solver: the Solver's registered name (an LLM Solver).
        config: its settings.
        user: the user simulator's settings, or None.
        bench: the ``[benchmark]`` table (code paths, workers, limits).
        run_dir: the run directory, whose ``pool.jsonl`` holds the pool (read again by an actor
            Ray restarts).
        env: variables the models need in this process (keys; never logged).
        pool: the pool's file in the run directory (an eval suite's: ``suites/NAME.jsonl``).
    """

    def __init__(
        self,
        solver: str,
        config: dict[str, Any],
        user: dict[str, Any] | None,
        bench: BenchmarkConfig,
        run_dir: str,
        env: dict[str, str] | None = None,
        pool: tuple[str, ...] = (),
    ):
        os.environ.update(env or {})
        self.solver = REGISTRY.get(solver).create(config)
        if not isinstance(self.solver, LLMSolver):
            raise ArenaError(
                f"the solver {solver!r} is not an LLM Solver: it cannot play code tasks"
            )
        self.user = LLMUser(**user) if user is not None else None
        self.bench = bench
        self.worlds = CodeWorlds(workers=bench.workers, seconds=bench.seconds, paths=bench.code)
        self.tasks = {t.task_id: t for t in read_pool(run_dir, *pool)}
        self.gold: dict[str, dict[str, Any] | None] = {}

    def pid(self) -> int:
        """The actor's process id (tests kill it)."""
        return os.getpid()

    def judge(self, task_ids: Sequence[str]) -> list[Verdict]:
        """The Judge's verdict on each task, every check by replay in the sandbox."""
        out = []
        for task_id in task_ids:
            try:
                out.append(assess_code_task(self.tasks[task_id], self.worlds))
            except Exception as exc:  # a fault of coevo's own: this verdict fails, the rest go on
                reason = f"{JUDGE_FAILED_PREFIX}{type(exc).__name__}: {exc}"
                out.append(
                    Verdict(
                        task_id=task_id,
                        accepted=False,
                        checks={"judge": CheckResult(passed=False, reason=reason)},
                        error=reason,
                    )
                )
        return out

    def gold_state(self, task: CodeTaskSpec) -> dict[str, Any] | None:
        """The state ``task``'s reference solution reaches (None: it could not be played), once per task."""
        if task.task_id not in self.gold:
            calls = [(c.tool, c.arguments) for c in task.solution if c.tool != RESPOND]
            state, _, _ = replay(self.worlds, task.world, calls)
            self.gold[task.task_id] = state
        return self.gold[task.task_id]

    def play(
        self, items: Sequence[tuple[str, int, str]], state: bytes | None = None
    ) -> list[Episode]:
        """One episode per ``(task id, seed, episode id)``, played concurrently; ``state``: the policy to play (the Solver's ``get_state``)."""
        if state is not None:
            self.solver.set_state(state)
        # the coroutine is a module function: a class with an async method is an async actor to Ray
        return self.solver.client.run(_play(self, list(items)))

    def drain_usage(self) -> list[UsageRow]:
        """What the Solver and the user simulator spent since the last call."""
        rows = self.solver.drain_usage()
        return rows + (self.user.drain_usage() if self.user is not None else [])

    def close(self) -> None:
        """Stop the sandboxed workers."""
        self.worlds.close()


async def _play(host: BenchmarkHost, items: list[tuple[str, int, str]]) -> list[Episode]:
    try:
        golds = {}
        for task_id, _, _ in items:
            golds[task_id] = await asyncio.to_thread(host.gold_state, host.tasks[task_id])
        return list(
            await asyncio.gather(
                *(
                    play_code(
                        host.solver.client,
                        host.tasks[task_id],
                        host.worlds,
                        golds[task_id],
                        user=host.user,
                        seed=seed,
                        version=host.solver.version,
                        max_steps=host.bench.max_steps,
                        index=i,
                        episode_id=episode_id,
                    )
                    for i, (task_id, seed, episode_id) in enumerate(items)
                )
            )
        )
    finally:
        if host.user is not None:
            await host.user.client.release()


POOL: Final = "pool.jsonl"
"""The run directory's copy of the pool (world records, then tasks by world id), written before trial 0."""


def read_pool(run_dir: str, *parts: str) -> list[CodeTaskSpec]:
    """The pool a benchmark run logged in its directory (data only: records, never code); ``parts``: another file of it.

    Raises:
        ArenaError: it is missing or does not read back.
    """
    run = RunDir(run_dir)
    parts = parts or (POOL,)
    try:
        text = run.read_bytes(*parts).decode("utf-8")
        return code_tasks_of(text.splitlines(), run.path(*parts))
    except (OSError, UnicodeDecodeError, CoevoError) as exc:
        raise ArenaError(
            f"{run.path(*parts)}: the run's pool cannot be read ({exc}); the log is intact "
            "(`coevo analyze` reads it); start a new run to play on"
        ) from exc


def check_pool(exp: Experiment) -> list[CodeTaskSpec]:
    """Before anything starts: the pool can be read and chosen, has a user simulator if its tasks need one, and its domain's code runs.

    Raises:
        ArenaError: what is wrong and how to fix it.
    """
    bench = exp.benchmark
    assert bench is not None
    tasks = pool_tasks(bench)
    if bench.user is None and any(t.user_scenario is not None for t in tasks):
        raise ArenaError(
            "the pool's tasks have user scenarios: set [benchmark.user] (a model playing the user, "
            'e.g. user = { provider = "anthropic", model = "claude-haiku-4-5" })'
        )
    worlds = {t.world.world_id: t.world for t in tasks}
    failed = domain_code_fails(worlds.values(), paths=bench.code, seconds=bench.seconds)
    if failed is not None:
        world, why = failed
        raise ArenaError(
            f"the {world.domain!r} domain's code does not run from benchmark.code "
            f"{bench.code or '(none given)'}: {why}; give the folder holding the domain's "
            "code (CHECKOUT/src for τ²-bench) and install what it imports"
        )
    return tasks


def pool_tasks(bench: BenchmarkConfig) -> list[CodeTaskSpec]:
    """The tasks ``bench`` names: its file, filtered by ``domains`` and ``ids``, cut at ``limit``.

    Raises:
        ArenaError: the file cannot be read, or the filters leave no task (naming what is there).
    """
    missing = next((p for p in bench.code if not Path(p).is_dir()), None)
    if missing is not None:
        raise ArenaError(
            f"benchmark.code: {missing} is no folder (give the folder holding the domain's code, "
            "e.g. CHECKOUT/src for τ²-bench)"
        )
    try:
        tasks = read_code_tasks(bench.tasks)
    except (OSError, CoevoError) as exc:
        raise ArenaError(
            f"benchmark.tasks: {bench.tasks} cannot be read as code tasks: {exc}; write one with "
            "`coevo import tau2 CHECKOUT --domain NAME --out FILE`"
        ) from exc
    if bench.domains:
        tasks = [t for t in tasks if t.world.domain in bench.domains]
    if bench.ids:
        wanted = set(bench.ids)
        tasks = [t for t in tasks if t.task_id in wanted or str(t.provenance.get("task")) in wanted]
    if bench.limit is not None:
        tasks = tasks[: bench.limit]
    if not tasks:
        raise ArenaError(
            f"benchmark: no task of {bench.tasks} is left after the filters (domains "
            f"{bench.domains or 'any'}, ids {bench.ids or 'any'}); check them against the file"
        )
    return tasks


@dataclass
class _Benchmark:
    """The state of one benchmark run in the driver."""

    exp: Experiment
    log: GameLog
    lock: RunLock | None
    solvers: ActorPool
    tasks: list[CodeTaskSpec]
    events: Callable[..., None]
    calls: RoleTally = field(default_factory=RoleTally)
    accepted: list[str] = field(default_factory=list)

    def verdicts(self) -> list[Verdict]:
        bench = self.exp.benchmark
        assert bench is not None
        static = ["; ".join(static_problems(t)) or None for t in self.tasks]
        if bench.judge == "static":
            return [
                Verdict(
                    task_id=t.task_id,
                    world_id=t.world.world_id,
                    accepted=why is None,
                    checks={
                        "valid": CheckResult(
                            passed=why is None,
                            reason=why or "the record and its solution are well formed",
                        )
                    },
                )
                for t, why in zip(self.tasks, static, strict=True)
            ]
        ids = [t.task_id for t in self.tasks]
        n = len(self.solvers.actors)
        chunks = [tuple([ids[i::n]]) for i in range(n) if ids[i::n]]
        try:
            parts = self.solvers.map("judge", chunks).get()
        except ArenaError as exc:
            raise ArenaError(f"the Judge's replays of the pool could not be made: {exc}") from exc
        found = {v.task_id: v for part in parts for v in part}
        return [found[i] for i in ids]

    def trial(self, gen: int) -> GenerationReport:
        started = time.perf_counter()
        record = GenerationRecord(gen=gen)
        failures = 0
        verdicts: list[Verdict] = []
        if gen == 0:
            verdicts = self.verdicts()
            worlds = {t.world.world_id: t.world for t in self.tasks}
            record.worlds = [WorldRow.of_code(w) for w in worlds.values()]
            record.tasks = [TaskRow.of_code(t) for t in self.tasks]
            record.verdicts = [VerdictRow.of(v) for v in verdicts]
            failures += sum(1 for v in verdicts if v.error)
            self.accepted = [v.task_id for v in verdicts if v.accepted and v.task_id]
            if not self.accepted:
                top = top_rejections(rejection_counts(verdicts))
                raise ArenaError(
                    f"the Judge rejected every task of the pool ({len(verdicts)}; by check: {top}), "
                    'so there is nothing to play; with judge = "replay" a task that doing nothing '
                    "passes is rejected (`coevo audit` lists them): choose other tasks or "
                    'judge = "static"'
                )
        seed = self.exp.run.seed
        items = [
            (
                task_id,
                derive_seed(seed, gen, "benchmark", task_id),
                episode_id(seed, gen, "benchmark", task_id),
            )
            for task_id in self.accepted
        ]
        n = len(self.solvers.actors)
        size = max(1, min(self.exp.run.chunk, -(-len(items) // n)))
        chunks = [tuple([items[i : i + size]]) for i in range(0, len(items), size)]
        episodes = [e for part in self.solvers.map("play", chunks).get() for e in part]
        by_id = {t.task_id: t for t in self.tasks}
        for episode in episodes:
            self.calls.record("solver", episode.failure)
        failures += sum(1 for e in episodes if e.failure)
        record.episodes = [EpisodeRow.of(e, "eval") for e in episodes]
        record.evals = [
            EvalRow(
                task_id=e.task_id,
                episode_id=e.episode_id or "",
                level=None,
                domain=by_id[e.task_id].world.domain,
                reward=e.reward.value,
                success=e.success,
            )
            for e in episodes
        ]
        record.trajectories = [TrajectoryRow.of(e, "eval") for e in episodes if e.trajectory]
        for usage in self.solvers.each("drain_usage"):
            if not isinstance(usage, Lost):
                record.usage.extend(usage)
        played = [e.reward.value for e in episodes if not e.failure]
        verdicts_rows = record.verdicts
        row = GenerationRow(
            proposed=len(record.tasks),
            accepted=sum(1 for v in verdicts_rows if v.accepted),
            rejected=sum(1 for v in verdicts_rows if not v.accepted),
            mutations=0,
            trained_tasks=0,
            train_episodes=0,
            train_success=None,
            eval_success=sum(played) / len(played) if played else None,
            frontier=None,
            accepted_level=None,
            trained_level=None,
            brier=None,
            version=episodes[0].solver if episodes and episodes[0].solver else "",
            rejections=json.dumps(top_rejections(rejection_counts(verdicts)), sort_keys=True),
            failures=failures,
        )
        record.generations = [row]
        tables: dict[str, Any] = {}
        parts = self.log.write(record, tables)
        rows = {name: len(r) for name, r in record.tables()}
        self.log.commit(gen, parts, rows, {}, owner=self.lock)
        seconds = time.perf_counter() - started
        self.events(
            "trial_committed",
            gen=gen,
            episodes=len(episodes),
            success=None if row.eval_success is None else round(row.eval_success, 4),
            failures=failures,
            seconds=round(seconds, 3),
        )
        return GenerationReport(
            gen=gen,
            row=row.cells(),
            seconds=seconds,
            episodes_per_second=len(episodes) / seconds if seconds else 0.0,
            tables=GameLog.as_read(gen, tables),
        )


def host_environment(exp: Experiment, bench: BenchmarkConfig | None = None) -> dict[str, str]:
    """The variables the Solver and the user simulator (of ``bench``, else ``[benchmark]``) need, from this process's environment."""
    solver = REGISTRY.get(exp.solver.name)
    settings = exp.role_settings()["solver"]
    names = set(solver.env(settings).passed)
    bench = bench or exp.benchmark
    if bench is not None and bench.user is not None:
        names |= set(llm_environment(bench.user_settings()).passed)
    return {k: os.environ[k] for k in names if k in os.environ}


def run_benchmark(
    exp: Experiment,
    lock: RunLock,
    *,
    resume: bool,
    address: str | None = None,
    on_generation: Callable[[GenerationReport], None] | None = None,
    events: Callable[..., None] | None = None,
    stop_after: int | None = None,
    on_start: Callable[[list[Any]], None] | None = None,
    tasks: list[CodeTaskSpec] | None = None,
) -> RunSummary:
    """Run (or continue) the benchmark ``exp`` in the run directory ``lock`` holds (see the module docstring).

    ``on_start`` is called with the Solver actors once they are up; ``tasks``
    is the pool :func:`check_pool` gave, when the caller checked it already.

    Raises:
        ArenaError: the pool cannot be read, a task needs a user simulator and none is set,
            the run directory already holds a run (without ``resume``), or a chunk is lost for good.
    """
    bench = exp.benchmark
    assert bench is not None
    log = GameLog(lock.run)
    last = log.last_generation()
    if not resume and last >= 0:
        raise ArenaError(
            f"{lock.run.uri} already holds {last + 1} generations; continue it with "
            f"`coevo resume {lock.run.uri}` or choose another --out"
        )
    if last < 0:  # a new run (or one stopped before trial 0): the pool from the file, copied
        tasks = tasks if tasks is not None else check_pool(exp)
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in code_records(tasks))
        lock.run.write_bytes(text.encode(), POOL)
    else:  # a resumed run plays the pool it logged, whatever the file holds now
        tasks = read_pool(lock.run.uri)
    if not resume:
        lock.run.write_bytes(exp.recorded_json().encode(), "experiment.json")
    say = events or (lambda name, **fields: None)
    args = (
        exp.solver.name,
        exp.solver.config,
        bench.user,
        bench,
        lock.run.uri,
        host_environment(exp),
    )
    actors: list[Any] = []
    run: _Benchmark | None = None
    reports: list[GenerationReport] = []
    with driving(exp, lock.run, resume=resume, address=address, lock=lock, events=events):
        try:
            options = {"num_cpus": 0, "max_restarts": 4, "max_task_retries": 4}
            actors = start_hosts(
                BenchmarkHost, args, [options] * exp.solver.actors,
                in_process=exp.ray.in_process, made_as="solver",
            )  # fmt: skip
            get([a.pid.remote() for a in actors])  # built: the pool read, the servers answered
            if on_start is not None:
                on_start(actors)
            generations_begin()  # a SIGTERM from now on lets the trial in flight commit
            run = _Benchmark(exp, log, lock, ActorPool("solver", actors), tasks, say)
            if last >= 0:
                verdicts = log.read("verdicts", columns=["task_id", "accepted"]).to_pylist()
                run.accepted = [r["task_id"] for r in verdicts if r["accepted"] and r["task_id"]]
            for gen in range(last + 1, exp.run.generations):
                if stop_after is not None and len(reports) >= stop_after:
                    break
                report = run.trial(gen)
                if on_generation is not None:
                    on_generation(report)
                reports.append(replace(report, tables={}))  # the summary keeps no copy
                at_commit()  # where a SIGTERM stops the run
        finally:
            _close(actors)
    calls = run.calls.roles if run is not None else {}
    return RunSummary(run_dir=lock.run.uri, generations=len(reports), reports=reports, calls=calls)


def _close(actors: list[Any]) -> None:
    """Close each Solver actor's workers, then end it."""
    for actor in actors:
        try:
            get(actor.close.remote(), timeout=30)
        except Exception as exc:  # the run's outcome stands; the workers end with the actor
            print(
                f"coevo: a Solver actor did not close cleanly: {redact(str(exc))}", file=sys.stderr
            )
        kill(actor)
