"""The co-evolution loop on Ray: generations of propose → judge → predict → train → learn → log.

One generation ``g``:

1. take the proposals of ``g`` (submitted while ``g − 1`` was solving), judged;
2. the World model predicts P(success) of the accepted tasks; the curriculum admits them;
3. the proposals of ``g + 1`` are planned and submitted *now*, so synthesis
   and judging overlap with solving ``g`` (their inputs are fixed before
   anything of ``g`` is solved, so timing never changes the log);
4. the curriculum picks the training tasks; Solver actors play each ``k``
   times, in chunks of fixed size with seeds derived from (seed, g, chunk)
   (the same episodes whatever the number of actors);
5. the learner takes one step and its new weights go to every Solver with
   the next call; the World model and the curriculum see the outcomes;
6. every ``eval.every`` generations the held-out suite is played;
7. the tables are written, then the checkpoint, then the manifest (commit).

``coevo resume`` continues after the last committed generation from its
checkpoint; the log of a resumed run equals the log of an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import inspect
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import ray
from coevo.agents.protocols import ProposalRequest
from coevo.agents.registry import REGISTRY
from coevo.arena.calibration import brier
from coevo.arena.difficulty import task_level
from coevo.arena.errors import ArenaError, RegistryError
from coevo.arena.gamelog import GameLog, LogError, RunDir
from coevo.arena.outcomes import Episode, Verdict
from coevo.arena.run.experiment import Experiment
from coevo.arena.run.hosts import RoleHost
from coevo.arena.spec import TaskSpec, WorldSpec
from coevo.curricula.strategies import (
    Curriculum,
    GenerationPlan,
    Mutation,
    make_curriculum,
)
from ray.exceptions import ActorUnavailableError, RayActorError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

__all__ = ["ArenaError", "GenerationReport", "RunSummary", "resume_run", "run_experiment"]


@dataclass
class GenerationReport:
    """What one generation did (the ``generations`` row plus display-only figures)."""

    gen: int
    row: dict[str, Any]
    seconds: float
    episodes_per_second: float
    top_rejections: list[tuple[str, int]] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)


@dataclass
class RunSummary:
    """The end of a run: where its log is and what it did."""

    run_dir: str
    generations: int
    reports: list[GenerationReport]


def _seed(*parts: Any) -> int:
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _episode_id(seed: int, gen: int, purpose: str, index: int, task_id: str) -> str:
    raw = f"{seed}:{gen}:{purpose}:{index}:{task_id}"
    return "ep-" + hashlib.sha256(raw.encode()).hexdigest()[:24]


def _rejections(verdicts: Sequence[Verdict]) -> Counter[str]:
    """How many rejected proposals failed each check (``error`` for a record that could not be read)."""
    return Counter(
        name for v in verdicts if not v.accepted for name in (v.failed or {"error": None})
    )


def _family(task: TaskSpec) -> str | None:
    """The task family (question, action, bulk, conditional) when its synthesizer recorded a plan."""
    plan = (task.provenance or {}).get("plan")
    family = plan.get("family") if isinstance(plan, dict) else None
    return str(family) if family is not None else None


def _plan_json(plan: GenerationPlan) -> dict[str, Any]:
    return {
        "requests": [r.model_dump(mode="json") for r in plan.requests],
        "mutations": [asdict(m) for m in plan.mutations],
    }


def _plan_of(data: dict[str, Any]) -> GenerationPlan:
    return GenerationPlan(
        [ProposalRequest.model_validate(r) for r in data["requests"]],
        [Mutation(**m) for m in data["mutations"]],
    )


class _Batch:
    """Calls in flight on a pool; :meth:`get` gathers them in order, resubmitting a call whose actor died.

    Ray restarts a dead actor and retries its calls, but a call caught while
    its node is going away can still fail ("actor unavailable"). Every call
    here is deterministic (seeds and weights travel with it), so it is simply
    made again, on the next actor, a few times with a growing pause.
    """

    def __init__(self, pool: _Pool, method: str, chunks: Sequence[tuple[Any, ...]]):
        self.pool = pool
        self.method = method
        self.chunks = list(chunks)
        self.refs = [pool.call(i, method, args) for i, args in enumerate(self.chunks)]

    def get(self, attempts: int = 8) -> list[Any]:
        """Every call's result, in submission order."""
        results = []
        for i, ref in enumerate(self.refs):
            for attempt in range(attempts):
                try:
                    results.append(ray.get(ref))
                    break
                except (RayActorError, ActorUnavailableError) as exc:
                    if attempt == attempts - 1:
                        raise ArenaError(
                            f"a {self.method} call failed {attempts} times, the last: {exc}"
                        ) from None
                    time.sleep(0.2 * (attempt + 1))
                    ref = self.pool.call(i + attempt + 1, self.method, self.chunks[i])
        return results


class _Pool:
    """Actors of one role; work is split in fixed chunks, handed out round-robin, gathered in order."""

    def __init__(self, actors: list[Any]):
        self.actors = actors

    def call(self, index: int, method: str, args: tuple[Any, ...]) -> Any:
        """Submit ``method(*args)`` to actor ``index`` (modulo the pool size)."""
        return getattr(self.actors[index % len(self.actors)], method).remote(*args)

    def map(self, method: str, chunks: Sequence[tuple[Any, ...]]) -> _Batch:
        """Submit one call per chunk; ``.get()`` the results."""
        return _Batch(self, method, chunks)


class Arena:
    """One run: its actors, curriculum, log and checkpoints.

    Args:
        experiment: the validated experiment.
        run_dir: where the log goes (any pyarrow filesystem URI).
        on_generation: called with each generation's report (the display).
        stop_after: stop (as if killed) after this many generations of this
            process, for tests of resume.
    """

    def __init__(
        self,
        experiment: Experiment,
        run_dir: str,
        *,
        on_generation: Callable[[GenerationReport], None] | None = None,
        events: Callable[..., None] | None = None,
    ):
        self.exp = experiment
        self.run = RunDir(run_dir)
        self.log = GameLog(self.run)
        self.on_generation = on_generation
        self.events = events or (lambda event, **kw: None)
        self.seed = experiment.run.seed
        self.curriculum: Curriculum = make_curriculum(experiment.curriculum, self.seed)
        self.worlds: dict[str, WorldSpec] = {}
        self.logged_worlds: set[str] = set()
        self.eval_tasks: list[TaskSpec] = []
        self.version: int | None = None
        self.state_ref: Any = None
        self.solver_label = experiment.solver.name

    # ---- actors -------------------------------------------------------------------------

    def _start_actors(self) -> None:
        host = ray.remote(RoleHost)
        here = ray.get_runtime_context().get_node_id()

        def pool(role: Any, n: int, restarts: bool) -> list[Any]:
            options: dict[str, Any] = {"num_cpus": 0}
            if restarts:
                options.update(max_restarts=4, max_task_retries=4)
            else:
                # stateful singletons (the learner, the World model) live on the driver's node:
                # losing another node must not lose their state
                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(here, soft=False)
            env = _passed_env(role.name)
            return [host.options(**options).remote(role.name, role.config, env) for _ in range(n)]

        exp = self.exp
        self.synth = _Pool(pool(exp.synthesizer, exp.synthesizer.actors, True))
        self.judges = _Pool(pool(exp.judge, exp.judge.actors, True))
        self.solvers = _Pool(pool(exp.solver, exp.solver.actors, True))
        self.learner = pool(exp.solver, 1, False)[0]
        self.model = pool(exp.world_model, 1, False)[0]

    # ---- pieces of a generation ---------------------------------------------------------

    def _from_each(self, actors: list[Any], method: str, gen: int) -> list[list[Any]]:
        """``method()`` of every actor, waiting for restarts; an actor lost for good gives [] and an event.

        Used for what actors kept in memory (usage, synthesis attempts): an
        actor whose node died has lost it, and the run goes on without it.
        """
        out: list[list[Any]] = []
        for actor in actors:
            for attempt in range(6):
                try:
                    out.append(ray.get(getattr(actor, method).remote()))
                    break
                except (RayActorError, ActorUnavailableError) as exc:
                    if attempt == 5:
                        self.events(f"{method}_lost", gen=gen, error=str(exc)[:300])
                        out.append([])
                    else:
                        time.sleep(0.2 * (attempt + 1))
        return out

    def _canonical(self, task: TaskSpec) -> TaskSpec:
        """The task with its world replaced by the one instance kept per world id (memory, transport)."""
        if not isinstance(task.world, WorldSpec):
            world = self.worlds.get(str(task.world))
            if world is None:
                raise ArenaError(
                    f"task {task.task_id} refers to world {task.world}, which no task brought"
                )
            return task.model_copy(update={"world": world})
        kept = self.worlds.setdefault(task.world.world_id, task.world)
        return task if kept is task.world else task.model_copy(update={"world": kept})

    def _submit(self, gen: int, plan: GenerationPlan) -> dict[str, Any]:
        """Submit a generation's proposals (and mutations); judging follows in :meth:`_collect`."""
        refs: dict[str, Any] = {"plan": plan, "gen": gen}
        refs["proposals"] = self.synth.map("propose", [([r],) for r in plan.requests])
        if plan.mutations:
            parents = [
                self.curriculum.tasks[m.parent]
                for m in plan.mutations
                if m.parent in self.curriculum.tasks
            ]
            refs["mutations"] = self.synth.map("mutate", [(parents, plan.mutations)])
        return refs

    def _collect(
        self, pending: dict[str, Any]
    ) -> tuple[list[TaskSpec], list[Verdict], list[str], int]:
        """Gather proposals, judge them (chunks over the judge pool), in request order."""
        tasks: list[TaskSpec] = []
        sources: list[str] = []
        failures = 0
        for result in pending["proposals"].get():
            for made, error in result:
                if error:
                    failures += 1
                    self.events("synthesizer_failed", gen=pending["gen"], error=error)
                tasks.extend(made)
                sources.extend(["fresh"] * len(made))
        mutated = 0
        mutations = pending.get("mutations")
        for result in mutations.get() if mutations is not None else []:
            for child, _why in result:
                if child is not None:
                    tasks.append(child)
                    sources.append("mutation")
                    mutated += 1
        seen: set[str] = set()
        unique: list[tuple[TaskSpec, str]] = []
        for task, source in zip(tasks, sources, strict=True):
            canonical = self._canonical(task)
            if canonical.task_id not in seen:
                seen.add(canonical.task_id)
                unique.append((canonical, source))
        tasks = [t for t, _ in unique]
        sources = [s for _, s in unique]
        chunk = 16
        refs = self.judges.map(
            "assess", [(tasks[i : i + chunk],) for i in range(0, len(tasks), chunk)]
        )
        verdicts = [v for part in refs.get() for v in part]
        return tasks, verdicts, sources, failures

    def _play(self, gen: int, tasks: list[TaskSpec], purpose: str, repeats: int) -> list[Episode]:
        """Each task ``repeats`` times, in fixed chunks over the Solver pool; episodes get deterministic ids."""
        order = [t for t in tasks for _ in range(repeats)]
        size = self.exp.run.chunk
        chunks = [order[i : i + size] for i in range(0, len(order), size)]
        state = [self.state_ref] if self.state_ref is not None else []
        refs = self.solvers.map(
            "attempt",
            [
                (self.version, state, c, _seed(self.seed, gen, purpose, i))
                for i, c in enumerate(chunks)
            ],
        )
        episodes: list[Episode] = []
        for i, part in enumerate(refs.get()):
            for j, episode in enumerate(part):
                index = i * size + j
                episodes.append(
                    episode.model_copy(
                        update={
                            "episode_id": _episode_id(
                                self.seed, gen, purpose, index, episode.task_id
                            )
                        }
                    )
                )
        return episodes

    def _eval_suite(self) -> list[TaskSpec]:
        """The held-out tasks: fixed requests per level, judged; never trained on."""
        config = self.exp.eval
        plan = GenerationPlan(
            [
                ProposalRequest(
                    n=config.per_level,
                    seed=_seed(config.seed, "eval", level),
                    level=level,
                    domains=self.exp.curriculum.domains,
                )
                for level in config.levels
            ]
        )
        tasks, verdicts, _, _ = self._collect(self._submit(-1, plan))
        return [t for t, v in zip(tasks, verdicts, strict=True) if v.accepted]

    # ---- the run ------------------------------------------------------------------------

    def start(self, *, resume: bool) -> int:
        """Start the actors and load the last checkpoint when resuming; returns the next generation."""
        self._start_actors()
        last = self.log.last_generation()
        if not resume:
            if last >= 0:
                raise ArenaError(
                    f"{self.run.uri} already holds {last + 1} generations; "
                    f"continue it with `coevo resume {self.run.uri}` or choose another --out"
                )
            self.run.write_bytes(self.exp.model_dump_json(indent=1).encode(), "experiment.json")
            self.eval_tasks = self._eval_suite()
            self.pending = self._submit(0, self.curriculum.plan(0))
            return 0
        if last < 0:
            self.eval_tasks = self._eval_suite()
            self.pending = self._submit(0, self.curriculum.plan(0))
            return 0
        self._load_checkpoint(last)
        return last + 1

    def _load_checkpoint(self, gen: int) -> None:
        base = ("checkpoints", f"gen={gen}")
        state = json.loads(self.run.read_bytes(*base, "state.json"))
        tasks = self._tasks_from_log()
        self.logged_worlds = set(self.worlds)
        self.curriculum.load(state["curriculum"], tasks)
        self.eval_tasks = [tasks[t] for t in state["eval_tasks"]]
        solver_state = (
            self.run.read_bytes(*base, "solver.bin")
            if self.run.exists(*base, "solver.bin")
            else b""
        )
        if solver_state:
            ray.get(self.learner.set_state.remote(solver_state))
            self.state_ref = ray.put(solver_state)
            self.version = state["version"]
        ray.get(self.model.restore.remote(self.run.read_bytes(*base, "world_model.pkl")))
        if gen + 1 < self.exp.run.generations:
            self.pending = self._submit(gen + 1, _plan_of(state["next_plan"]))

    def _tasks_from_log(self) -> dict[str, TaskSpec]:
        tasks, worlds = self.log.task_specs()
        self.worlds.update(worlds)
        return tasks

    def generation(self, gen: int) -> GenerationReport:
        """Run and commit generation ``gen``."""
        started = time.perf_counter()
        phases: dict[str, float] = {}
        clock = [started]

        def lap(name: str) -> None:
            now = time.perf_counter()
            phases[name] = round(phases.get(name, 0.0) + now - clock[0], 4)
            clock[0] = now

        exp = self.exp
        tasks, verdicts, sources, failures = self._collect(self.pending)
        for kept in self._from_each(self.synth.actors, "attempts", gen):
            for attempt in kept:
                self.events("synthesis_attempt", gen=gen, **attempt)
        lap("proposals")
        accepted = [
            t
            for t, v in zip(tasks, verdicts, strict=True)
            if v.accepted and t.task_id not in self._eval_ids
        ]
        predicted, error = ray.get(self.model.predict.remote(accepted))
        if error:
            self.events("world_model_failed", gen=gen, error=error)
        self.curriculum.admit(gen, accepted, predicted)
        next_plan = self.curriculum.plan(gen + 1)
        if gen + 1 < exp.run.generations:
            # nothing is left in flight after the last generation (closing would kill it mid-call)
            self.pending = self._submit(gen + 1, next_plan)
        lap("predict")

        batch = self.curriculum.batch(gen)
        solve_start = time.perf_counter()
        episodes = self._play(gen, batch, "train", exp.run.rollouts)
        played = time.perf_counter() - solve_start
        lap("solve")
        stats, new_state, learn_error = ray.get(self.learner.learn.remote(episodes, batch))
        if learn_error:
            self.events("learner_failed", gen=gen, error=learn_error)
        if new_state is not None:
            self.state_ref = ray.put(new_state)
            self.version = gen
        lap("learn")
        model_error = ray.get(self.model.update.remote(episodes))
        if model_error:
            self.events("world_model_failed", gen=gen, error=model_error)
        self.curriculum.observe(
            gen, [e.task_id for e in episodes], [e.reward.value for e in episodes]
        )
        lap("world_model")

        last = gen == exp.run.generations - 1
        evals: list[Episode] = []
        if gen % exp.eval.every == 0 or last:
            evals = self._play(gen, self.eval_tasks, "eval", 1)
        lap("eval")
        label = ray.get(self.learner.solver_name.remote())
        row = self._commit(
            gen,
            tasks,
            verdicts,
            sources,
            accepted,
            predicted,
            batch,
            episodes,
            evals,
            stats,
            label,
            next_plan,
            failures,
        )
        lap("commit")
        seconds = time.perf_counter() - started
        rejections = _rejections(verdicts)
        report = GenerationReport(
            gen=gen,
            row=row,
            seconds=seconds,
            episodes_per_second=len(episodes) / played if played > 0 else 0.0,
            top_rejections=rejections.most_common(3),
            phases=phases,
        )
        self.events(
            "generation",
            gen=gen,
            seconds=round(seconds, 3),
            phases=phases,
            **{k: v for k, v in row.items() if k != "rejections"},
        )
        if self.on_generation:
            self.on_generation(report)
        return report

    @property
    def _eval_ids(self) -> set[str]:
        return {t.task_id for t in self.eval_tasks}

    def _commit(
        self,
        gen: int,
        tasks: list[TaskSpec],
        verdicts: list[Verdict],
        sources: list[str],
        accepted: list[TaskSpec],
        predicted: list[float],
        batch: list[TaskSpec],
        episodes: list[Episode],
        evals: list[Episode],
        stats: Any,
        label: str,
        next_plan: GenerationPlan,
        failures: int,
    ) -> dict[str, Any]:
        rows: dict[str, list[dict[str, Any]]] = {
            name: []
            for name in (
                "worlds",
                "tasks",
                "verdicts",
                "episodes",
                "predictions",
                "updates",
                "generations",
                "evals",
                "usage",
            )
        }
        new_tasks = list(tasks)
        if gen == 0:
            new_tasks = [*self.eval_tasks, *tasks]
            sources = ["eval"] * len(self.eval_tasks) + sources
        for task in new_tasks:
            world = task.world
            assert isinstance(world, WorldSpec)
            if world.world_id not in self.logged_worlds:
                self.logged_worlds.add(world.world_id)
                rows["worlds"].append(
                    {
                        "world_id": world.world_id,
                        "domain": world.domain,
                        "spec": world.model_dump_json(),
                    }
                )
        for task, source in zip(new_tasks, sources, strict=True):
            rows["tasks"].append(
                {
                    "task_id": task.task_id,
                    "world_id": task.world_id,
                    "source": source,
                    "level": task_level(task),
                    "family": _family(task),
                    "domain": task.world.domain if isinstance(task.world, WorldSpec) else None,
                    "parent": task.lineage.parent if task.lineage else None,
                    "operator": task.lineage.operator if task.lineage else None,
                    "spec": task.model_copy(update={"world": task.world_id}).model_dump_json(),
                }
            )
        for verdict in verdicts:
            rows["verdicts"].append(
                {
                    "task_id": verdict.task_id,
                    "accepted": verdict.accepted,
                    "failed": sorted(verdict.failed),
                    "checks": json.dumps(
                        {k: v.model_dump() for k, v in verdict.checks.items()}, sort_keys=True
                    ),
                    "solve_calls": getattr(verdict, "solve_calls", None),
                    "error": verdict.error,
                }
            )
        predictions = dict(zip([t.task_id for t in accepted], predicted, strict=True))
        for task_id, p in predictions.items():
            rows["predictions"].append({"task_id": task_id, "version": label, "p": float(p)})
        for purpose, items in (("train", episodes), ("eval", evals)):
            for e in items:
                rows["episodes"].append(
                    {
                        "episode_id": e.episode_id,
                        "task_id": e.task_id,
                        "purpose": purpose,
                        "solver": e.solver,
                        "seed": e.seed,
                        "reward": e.reward.value,
                        "steps": len(e.calls),
                        "truncated": e.truncated,
                        "calls": json.dumps(
                            [{"tool": c.tool, "arguments": c.arguments} for c in e.calls],
                            default=str,
                        ),
                        "reason": e.reward.reason,
                        "failure": e.reward.reason
                        if e.reward.reason.startswith("the solver failed")
                        else None,
                    }
                )
        levels = {t.task_id: task_level(t) for t in self.eval_tasks}
        domains = {
            t.task_id: (t.world.domain if isinstance(t.world, WorldSpec) else None)
            for t in self.eval_tasks
        }
        for e in evals:
            rows["evals"].append(
                {
                    "task_id": e.task_id,
                    "episode_id": e.episode_id,
                    "level": levels.get(e.task_id),
                    "domain": domains.get(e.task_id),
                    "reward": e.reward.value,
                    "success": e.reward.value == 1,
                }
            )
        extra = stats.extra or {}
        rows["updates"].append(
            {
                "version": label,
                "episodes": stats.episodes,
                "loss": stats.loss,
                "success": extra.get("success"),
                "entropy": extra.get("entropy"),
                "skipped": extra.get("skipped"),
            }
        )
        fresh_outcomes = [
            (predictions[e.task_id], e.reward.value) for e in episodes if e.task_id in predictions
        ]
        accepted_levels = [lv for t in accepted if (lv := task_level(t)) is not None]
        trained_levels = [lv for t in batch if (lv := task_level(t)) is not None]
        rejections = _rejections(verdicts)
        row = {
            "proposed": len(tasks),
            "accepted": len(accepted),
            "rejected": sum(not v.accepted for v in verdicts),
            "mutations": sum(s == "mutation" for s in sources),
            "trained_tasks": len(batch),
            "train_episodes": len(episodes),
            "train_success": sum(e.reward.value for e in episodes) / len(episodes)
            if episodes
            else None,
            "eval_success": sum(e.reward.value for e in evals) / len(evals) if evals else None,
            "frontier": self.curriculum.frontier(),
            "accepted_level": sum(accepted_levels) / len(accepted_levels)
            if accepted_levels
            else None,
            "trained_level": sum(trained_levels) / len(trained_levels) if trained_levels else None,
            "brier": brier([p for p, _ in fresh_outcomes], [o for _, o in fresh_outcomes])
            if fresh_outcomes
            else None,
            "version": label,
            "rejections": json.dumps(dict(rejections.most_common(5)), sort_keys=True),
            "failures": failures
            + sum(e.reward.reason.startswith("the solver failed") for e in episodes),
        }
        rows["generations"].append(row)
        actors = [
            *self.synth.actors,
            *self.judges.actors,
            *self.solvers.actors,
            self.learner,
            self.model,
        ]
        for spent in self._from_each(actors, "usage", gen):
            rows["usage"].extend(spent)

        parts = {name: self.log.write_part(name, gen, items) for name, items in rows.items()}
        base = ("checkpoints", f"gen={gen}")
        solver_state = ray.get(self.learner.get_state.remote())
        if solver_state is not None:
            self.run.write_bytes(solver_state, *base, "solver.bin")
        self.run.write_bytes(ray.get(self.model.dump.remote()), *base, "world_model.pkl")
        state = {
            "curriculum": self.curriculum.state(),
            "next_plan": _plan_json(next_plan),
            "version": self.version,
            "eval_tasks": [t.task_id for t in self.eval_tasks],
        }
        self.run.write_bytes(json.dumps(state, sort_keys=True).encode(), *base, "state.json")
        self.log.commit(
            gen, parts, {k: len(v) for k, v in rows.items()}, {"checkpoint": "/".join(base)}
        )
        return row

    def close(self) -> None:
        """Stop the actors."""
        for actor in [
            *self.synth.actors,
            *self.judges.actors,
            *self.solvers.actors,
            self.learner,
            self.model,
        ]:
            ray.kill(actor)


def _passed_env(name: str) -> dict[str, str]:
    factory = REGISTRY.get(name).factory
    return {k: os.environ[k] for k in getattr(factory, "passed_env", ()) if k in os.environ}


def check_environment(experiment: Experiment) -> None:
    """Fail before anything starts when a role is unknown, is given a setting it does not take, or needs an unset variable.

    Raises:
        ArenaError: naming the role, and the setting or the variable to fix.
    """
    for table in ("synthesizer", "judge", "solver", "world_model"):
        role = getattr(experiment, table)
        try:
            factory = REGISTRY.get(role.name).factory
        except RegistryError as exc:
            raise ArenaError(f"{table}: {exc}") from None
        parameters: Mapping[str, inspect.Parameter]
        try:
            parameters = inspect.signature(factory).parameters
        except (TypeError, ValueError):  # a factory without a signature: its settings go unchecked
            parameters = {}
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        if parameters and not takes_any:
            for key in role.config:
                if key not in parameters:
                    close = difflib.get_close_matches(key, list(parameters), n=1)
                    hint = f"did you mean {close[0]!r}? " if close else ""
                    raise ArenaError(
                        f"{table}.config: {role.name!r} takes no {key!r}; {hint}"
                        f"it takes: {', '.join(parameters) or 'nothing'}"
                    )
        for variable in getattr(factory, "required_env", ()):
            if not os.environ.get(variable):
                raise ArenaError(
                    f"the {table} {role.name!r} needs {variable}: set it in the environment "
                    "(on every node, for a cluster) and run again"
                )


def _connect(address: str | None, num_cpus: int | None) -> bool:
    """Connect to Ray (a cluster at ``address``, else a local one); True if this call started it."""
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    else:
        ray.init(
            num_cpus=num_cpus,
            include_dashboard=False,
            logging_level=logging.WARNING,
            log_to_driver=False,
        )
    return True


def run_experiment(
    experiment: Experiment,
    run_dir: str | None = None,
    *,
    resume: bool = False,
    address: str | None = None,
    on_generation: Callable[[GenerationReport], None] | None = None,
    events: Callable[..., None] | None = None,
    stop_after: int | None = None,
    on_start: Callable[[Arena], None] | None = None,
) -> RunSummary:
    """Run (or continue) ``experiment``; returns the summary.

    Args:
        experiment: the validated experiment.
        run_dir: the run directory (default: ``experiment.run.out``).
        resume: continue after the last committed generation.
        address: a Ray cluster to join (else ``[ray].address``, ``RAY_ADDRESS``, or a local Ray).
        on_generation: called after each committed generation.
        events: ``events(name, **fields)`` for structured events.
        stop_after: end after this many generations of this call (tests of resume).
        on_start: called with the :class:`Arena` once its actors are up (tests, embedding).
    """
    target = run_dir or experiment.run.out
    check_environment(experiment)
    started = _connect(address or experiment.ray.address or None, experiment.ray.num_cpus)
    arena = Arena(experiment, target, on_generation=on_generation, events=events)
    reports: list[GenerationReport] = []
    try:
        first = arena.start(resume=resume)
        if on_start is not None:
            on_start(arena)
        for gen in range(first, experiment.run.generations):
            if stop_after is not None and len(reports) >= stop_after:
                break
            reports.append(arena.generation(gen))
    finally:
        with contextlib.suppress(Exception):
            arena.close()
        if started:
            ray.shutdown()
    return RunSummary(arena.run.uri, arena.log.last_generation() + 1, reports)


def resume_run(run_dir: str, **kwargs: Any) -> RunSummary:
    """Continue the run in ``run_dir`` after its last committed generation (its own experiment file).

    Raises:
        ArenaError: no experiment was recorded there.
    """
    run = RunDir(run_dir)
    if not run.exists("experiment.json"):
        raise ArenaError(f"{run_dir} holds no run (no experiment.json); start one with `coevo run`")
    experiment = Experiment.model_validate_json(run.read_bytes("experiment.json"))
    try:
        return run_experiment(experiment, run_dir, resume=True, **kwargs)
    except LogError as exc:
        raise ArenaError(str(exc)) from None
