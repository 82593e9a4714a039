"""The co-evolution loop, on Ray or in process: generations of propose → judge → predict → train → learn → log.

One generation ``g``:

1. take the proposals of ``g`` (submitted while ``g − 1`` was solving), judged;
2. the World model predicts P(success) of the accepted tasks; the curriculum admits them;
3. the proposals of ``g + 1`` are planned and submitted *now*, so synthesis
   and judging overlap with solving ``g`` (their inputs are fixed before
   anything of ``g`` is solved, so timing never changes the log);
4. the curriculum picks the training tasks; Solver actors play each ``k``
   times, in chunks of fixed size with seeds derived from (seed, g, chunk)
   (the same episodes whatever the number of actors); with
   ``curriculum.dynamic_sampling``, further rounds of tasks follow until
   enough groups are informative (:mod:`coevo.curricula.dynamic`), and the
   learner steps on those groups only;
5. the learner takes one step and its new state goes to every Solver with
   the next call; the World model and the curriculum see the outcomes;
6. every ``eval.every`` generations the held-out suites are played (:mod:`coevo.run.generation.suites`);
7. the generation's rows (a :class:`~coevo.arena.gamelog.GenerationRecord`)
   are written, then the checkpoint, then the manifest (the commit).

That is the order at ``run.max_staleness = 0``. At 1 or more the judging of
``g + 1``, the solving of ``g`` and the learner's step and World model update
on ``g − 1`` run at the same time (:mod:`coevo.run.generation.overlap`); the log is
still the same for the same seed and staleness. Each generation's event gives
its phases' times and the share of its wall time each actor was busy.

``coevo resume`` continues after the last committed generation from its
checkpoint; the log of a resumed run equals the log of an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from coevo.agents.llm.policy import policy_state
from coevo.agents.protocols import ProposalRequest
from coevo.agents.registry import REGISTRY
from coevo.arena.errors import ArenaError, LogError, StateError
from coevo.arena.gamelog import GameLog, GenerationRecord, GenerationRow, RunDir, RunLock
from coevo.arena.gamelog.figures import rejection_counts, top_rejections
from coevo.arena.outcomes import JUDGE_FAILED_PREFIX, Episode
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import TaskSpec, WorldSpec
from coevo.curricula.base import Curriculum, GenerationPlan
from coevo.curricula.registry import make_curriculum
from coevo.run.actors.inprocess import get
from coevo.run.actors.pool import ActorPool, Lost
from coevo.run.actors.start import Actors, start_actors
from coevo.run.driver.driving import driving
from coevo.run.driver.failures import ROLE_TABLE, RoleTally, failing_streak
from coevo.run.driver.stopping import at_commit, generations_begin
from coevo.run.driver.summary import summarize
from coevo.run.experiment import REDACTED_WHY, Experiment, recorded_experiment
from coevo.run.generation.checkpoints import prune_checkpoints, resumable
from coevo.run.generation.overlap import (
    Background,
    Deferred,
    busy_shares,
    drain_busy,
)
from coevo.run.generation.playing import Players
from coevo.run.generation.record import generation_record
from coevo.run.generation.selfplay import ProposalScoring, Watch
from coevo.run.generation.state import (
    Clock,
    Generation,
    GenerationReport,
    Proposals,
    RunSummary,
    Submitted,
    plan_json,
    plan_of,
)
from coevo.run.generation.suites import HeldOutSuites
from coevo.run.handoff.inbox import Inbox, known_tasks
from coevo.run.handoff.transports import (
    Announcement,
    Handoff,
    announced_policy,
    batch_id,
)

__all__ = [
    "Arena",
    "GenerationReport",
    "RunSummary",
    "resume_run",
    "run_experiment",
    "summarize",
]


class Arena:
    """One run: its actors, curriculum, log and checkpoints.

    Args:
        experiment: the validated experiment.
        run_dir: where the log goes (any pyarrow filesystem URI).
        on_generation: called with each generation's report (the display).
        events: ``events(name, **fields)`` for structured events.
        lock: the run directory's lock, held; checked before every commit.
        progress: told what is starting (Ray, each role's actors), for the status line.
    """

    def __init__(
        self,
        experiment: Experiment,
        run_dir: str | RunDir,
        *,
        on_generation: Callable[[GenerationReport], None] | None = None,
        events: Callable[..., None] | None = None,
        lock: RunLock | None = None,
        progress: Callable[[str], None] | None = None,
    ):
        self.exp = experiment
        self.progress = progress
        self.run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
        self.log = GameLog(self.run)
        self.lock = lock
        self.on_generation = on_generation
        self.events = events or (lambda event, **kw: None)
        self.seed = experiment.run.seed
        self.curriculum: Curriculum = make_curriculum(experiment.curriculum, self.seed)
        self.worlds: dict[str, WorldSpec] = {}
        self.logged_worlds: set[str] = set()
        self.eval_tasks: list[TaskSpec] = []
        self.held = HeldOutSuites()  # [[eval.suites]]: further held-out suites (transfer)
        self.version: int | None = None
        self.state_ref: Any = None
        self.unsaved: set[str] = set()  # roles already reported as not checkpointed
        self.pruned_through = (
            -1
        )  # checkpoints up to here pruned (run.keep_checkpoints), this session
        self.suite_failures = 0  # role failures while the eval suite was made
        self.suite_calls = RoleTally()  # the role calls that made it (counted with generation 0's)
        self.calls = RoleTally()  # every role call of this invocation
        self.failing: dict[str, list[int]] = {}  # generations in which every call of a role failed
        self.halted: str | None = None  # the role whose failures stopped the run
        self.handoff: Handoff | None = None  # with a [trainer]: the hand-off (made in start)
        self.scoring = ProposalScoring(experiment.proposer)  # what proposals earned, novelty
        self.watch = Watch(experiment.watch)  # plateau and collapse
        self.synth_learner: Any = None  # a Synthesizer that learns: its learner
        self.synth_version: int | None = None  # the generation its state learnt through
        self.synth_ref: Any = None  # its state (a Ray ref), given with every propose
        self.next_proposing: tuple[int | None, Any, str] = (None, None, "")  # gen + 1's proposer
        self.synth_follows = False  # a Synthesizer that plays the trainer's policies (self-play)
        # run.max_staleness >= 1: judging, solving, learning and the model's update overlap
        self.overlap = experiment.run.max_staleness >= 1
        self.background = Background() if self.overlap else None
        self.deferred: Deferred | None = None  # the last generation's step, run beside this one's
        self.updating: Any = None  # the World model's update in flight (a Ray ref)
        self.timeline: list[tuple[str, float, float]] | None = None  # a list: busy intervals
        self.actors: Actors | None = None  # made in start

    # ---- actors -------------------------------------------------------------------------

    def _start_actors(self) -> None:
        self.actors = start_actors(self.exp, self.progress)
        a = self.actors
        self.synth, self.judges, self.solvers = a.synth, a.judges, a.solvers
        self.learner, self.model, self.synth_learner = a.learner, a.model, a.synth_learner
        self.players = Players(self.solvers, self.seed, self.exp.run.chunk)
        able = set(REGISTRY.get(self.exp.synthesizer.name).capabilities)
        self.synth_follows = {"reports-trajectories", "stateful"} <= able and "learns" not in able

    @property
    def _started(self) -> Actors:
        """The run's actors, once :meth:`start` has started them."""
        if self.actors is None:
            raise ArenaError("the arena's actors are not started: call start() first")
        return self.actors

    @property
    def _every_actor(self) -> list[Any]:
        return [actor for _, actor in self._labelled]

    @property
    def _labelled(self) -> list[tuple[str, Any]]:
        """Every actor with its label in the events (``solver-0``, ``learner``, ...)."""
        return self._started.labelled

    # ---- pieces of a generation ---------------------------------------------------------

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

    def _submit(
        self,
        gen: int,
        plan: GenerationPlan,
        logged: Mapping[str, TaskSpec] | None = None,
        proposing: tuple[int | None, Any, str] | None = None,
    ) -> Submitted:
        """Submit a generation's proposals (and mutations); judging follows in :meth:`_collect`.

        A mutation's parent is the curriculum's task; on resume, a parent the
        curriculum has since forgotten (it planned before its last ``observe``)
        comes from the log (``logged``), so a resumed run mutates what the
        uninterrupted one did. ``proposing``: the learning Synthesizer's state to propose with.
        """
        version, ref, proposer = proposing or self._proposing()
        state = [ref] if ref is not None else []
        proposals = self.synth.map("propose", [([r], version, state) for r in plan.requests])
        if not plan.mutations:
            return Submitted(gen, proposals, proposer=proposer)
        logged = logged or {}
        parents = {
            m.parent: task
            for m in plan.mutations
            if (task := self.curriculum.tasks.get(m.parent) or logged.get(m.parent))
        }
        mutations = [m for m in plan.mutations if m.parent in parents]
        return Submitted(
            gen,
            proposals,
            self.synth.map("mutate", [(list(parents.values()), mutations)]),
            missing=len(plan.mutations) - len(mutations),
            proposer=proposer,
        )

    def _collect(self, pending: Submitted, events: Callable[..., None] | None = None) -> Proposals:
        """Gather proposals, judge them (chunks over the judge pool), in request order.

        ``events``: where its events go (the background judging replays them later).
        """
        events = events or self.events
        made: list[tuple[TaskSpec, str]] = []
        failures = 0
        tally = RoleTally()
        for result in pending.proposals.get():
            for tasks, error in result:
                tally.record("synthesizer", error or None)
                if error:
                    failures += 1
                    events("synthesizer_failed", gen=pending.gen, error=error)
                made.extend((t, "fresh") for t in tasks)
        mutations = pending.mutations
        for result in mutations.get() if mutations is not None else []:
            made.extend((child, "mutation") for child, _why in result if child is not None)
        if pending.missing:
            # a parent neither the curriculum nor the log holds: a bug, counted and said
            failures += pending.missing
            events("mutation_parent_missing", gen=pending.gen, count=pending.missing)
        seen: set[str] = set()
        unique: list[tuple[TaskSpec, str]] = []
        for task, source in made:
            canonical = self._canonical(task)
            if canonical.task_id not in seen:
                seen.add(canonical.task_id)
                unique.append((canonical, source))
        tasks = [t for t, _ in unique]
        chunk = 16
        calls = self.judges.map(
            "assess", [(tasks[i : i + chunk],) for i in range(0, len(tasks), chunk)]
        )
        verdicts = [v for part in calls.get() for v in part]
        for verdict in verdicts:
            failed = (verdict.error or "").startswith(JUDGE_FAILED_PREFIX)
            failures += failed
            tally.record("judge", verdict.error if failed else None)
        sources = [s for _, s in unique]
        return Proposals(tasks, verdicts, sources, failures, tally, pending.proposer)

    def _judged(self, pending: Submitted) -> Callable[[], Proposals]:
        """What :meth:`_collect` gives for submitted proposals: judged now when asked, or in the background (overlap)."""
        if self.background is None:
            return lambda: self._collect(pending)
        return self.background.start(lambda emit: self._collect(pending, emit), self.events)

    def _play(self, gen: int, tasks: list[TaskSpec], purpose: str, repeats: int) -> list[Episode]:
        """Each task ``repeats`` times, in fixed chunks over the Solver pool; episodes get deterministic ids."""
        calls = self.players.submit(gen, tasks, purpose, repeats, (self.version, self.state_ref))
        return self.players.gather(gen, purpose, calls.get())

    def _eval_suite(self) -> list[TaskSpec]:
        """The held-out tasks: fixed requests per level, judged; never trained on."""
        config = self.exp.eval
        plan = GenerationPlan(
            [
                ProposalRequest(
                    n=config.per_level,
                    seed=derive_seed(config.seed, "eval", level),
                    level=level,
                    domains=self.exp.curriculum.domains,
                    binding=True,
                )
                for level in config.levels
            ]
        )
        judged = self._collect(self._submit(-1, plan))
        self.suite_failures = judged.failures  # counted with generation 0's
        self.suite_calls = judged.calls
        suite = [t for t, v in zip(judged.tasks, judged.verdicts, strict=True) if v.accepted]
        asked = config.per_level * len(config.levels)
        if len(suite) < asked:  # the summary says so too
            self.events("eval_suite_short", asked=asked, made=len(judged.tasks), kept=len(suite))
        return suite

    def _drained(self, actors: list[Any], method: str, gen: int) -> list[Any]:
        """Everything ``method`` drains from ``actors``, in order; an actor lost for good is an event."""
        out: list[Any] = []
        for result in ActorPool("role", actors).each(method):
            if isinstance(result, Lost):
                self.events(f"{method}_lost", gen=gen, error=result.cause)
            else:
                out.extend(result)
        return out

    # ---- the run ------------------------------------------------------------------------

    def start(self, *, resume: bool) -> int:
        """Start the actors and load the last checkpoint when resuming; returns the next generation."""
        self._start_actors()
        self.inbox = Inbox(self.log, self.events)  # the parts committed generations ingested
        last = self.log.last_generation()
        if not resume and last >= 0:
            raise ArenaError(
                f"{self.run.uri} already holds {last + 1} generations; "
                f"continue it with `coevo resume {self.run.uri}` or choose another --out"
            )
        self.held.start(self.exp, self.run, new=last < 0)  # a bad suite stops the run here
        if not resume:
            self.run.write_bytes(self.exp.recorded_json().encode(), "experiment.json")
            if hidden := self.exp.redacted_settings():  # a key pasted into a setting: said once
                self.events("settings_redacted", keys=hidden, why=REDACTED_WHY)
        if self.exp.trainer is not None:
            self.handoff = Handoff(
                self.exp.trainer, self.log, self.exp.run.max_staleness, events=self.events
            )
        if last < 0:
            if self.handoff is not None:
                self.handoff.start(0, None)
            self.eval_tasks = self._eval_suite()
            self.pending = self._judged(self._submit(0, self.curriculum.plan(0)))
            return 0
        self._load_checkpoint(last)
        return last + 1

    def _unloadable(self, gen: int, name: str, why: str) -> ArenaError:
        """The error for a checkpoint file that cannot be loaded: which file, and the way out."""
        return ArenaError(
            f"the checkpoint of generation {gen} in {self.run.uri} cannot be read: "
            f"checkpoints/gen={gen}/{name} {why}; coevo never runs code from a run directory. "
            "Its log is intact (coevo analyze, report, export read it); to train on, start a new "
            "run with `coevo run`: the learner starts afresh, and the curriculum can be rebuilt "
            "from this log (coevo.curricula.rebuild.curriculum_from_log)"
        )

    def _load_checkpoint(self, gen: int) -> None:
        manifest = resumable(self.log, gen)
        base = ("checkpoints", f"gen={gen}")
        tasks = self._tasks_from_log()
        self.logged_worlds = set(self.worlds)
        rows = self.log.read("proposals", columns=["task_id", "accepted", "gen"]).to_pylist()
        rows = [r for r in sorted(rows, key=lambda r: r["gen"]) if r["accepted"]]  # in order
        self.scoring.rebuild([self._canonical(tasks[r["task_id"]]) for r in rows])
        try:
            state = self.run.read_json(*base, "state.json")
            self.curriculum.load(state["curriculum"], tasks)
            self.eval_tasks = [tasks[t] for t in state["eval_tasks"]]
            version, plan = state["version"], plan_of(state["next_plan"])
            policy = announced_policy(state.get("policy"))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # a damaged or hand-edited checkpoint: say which, and that the log itself is fine
            raise self._unloadable(
                gen,
                "state.json",
                f"is not a checkpoint this coevo reads ({type(exc).__name__}: {exc})",
            ) from exc
        files = manifest.get("checkpoint_files", {})
        solver_state = self._read_state(base, files.get("solver"), "solver")
        if solver_state is not None:
            self._restore(self.learner, solver_state, gen, files["solver"])
            self.state_ref = self._started.put(solver_state)
            self.version = version
        model_state = self._read_state(base, files.get("world_model"), "world_model")
        if model_state is not None:
            self._restore(self.model, model_state, gen, files["world_model"])
        proposing = self._load_proposer(base, files, state, gen)
        for key, name in Deferred.files_in(files):  # overlap: the step still to take
            try:
                data = self.run.read_bytes(*base, name)
                self.deferred = Deferred.read(self.deferred, key, data, tasks)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise self._unloadable(gen, name, f"cannot be read ({exc})") from exc
        if self.handoff is not None:
            self.handoff.restore_loaded(state.get("adapters"))  # what the earlier process loaded
            for batch in self.handoff.start(gen + 1, policy):
                self.events("batch_handed_out", batch=batch, after="resume")
            if policy is not None:
                self._adopt(policy, gen + 1)  # the server may have restarted since: loaded again
        if gen + 1 < self.exp.run.generations:
            self.pending = self._judged(self._submit(gen + 1, plan, tasks, proposing))

    def _proposing(self) -> tuple[int | None, Any, str]:
        """What proposes now: the learner's version, its state (a Ray ref) and its name."""
        learner = self.synth_learner
        name = get(learner.policy_version.remote()) if learner else self.exp.synthesizer.name
        return (self.synth_version, self.synth_ref, name)

    def _load_proposer(
        self, base: tuple[str, str], files: Mapping[str, Any], state: Mapping[str, Any], gen: int
    ) -> tuple[int | None, Any, str] | None:
        """Restore the watch and a learning Synthesizer; the pending proposals' state."""
        self.watch.load(state.get("watch") or {})
        synth = state.get("synth") or {}
        if self.synth_learner is None:
            return None
        learnt = self._read_state(base, files.get("synthesizer"), "synthesizer")
        if learnt is not None:
            self._restore(self.synth_learner, learnt, gen, files["synthesizer"])
            self.synth_ref = self._started.put(learnt)
            self.synth_version = synth.get("version")
        name = files.get("synthesizer_proposing")
        ref = self._started.put(self.run.read_bytes(*base, name)) if name else None
        self.next_proposing = (synth.get("proposing_version"), ref, synth.get("proposer", ""))
        return self.next_proposing

    def _read_state(self, base: tuple[str, str], name: str | None, table: str) -> bytes | None:
        if name is None:
            role = getattr(self.exp, table).name
            self.events("role_not_restored", role=table, name=role, why="it keeps no saved state")
            return None
        return self.run.read_bytes(*base, name)

    def _restore(self, actor: Any, state: bytes, gen: int, name: str) -> None:
        try:
            get(actor.set_state.remote(state))
        except Exception as exc:  # Ray's RayTaskError, or in-process the role's own error
            cause = getattr(exc, "cause", exc)
            cause = cause if isinstance(cause, StateError) else exc
            raise self._unloadable(gen, name, f"cannot be loaded ({cause})") from exc

    def _tasks_from_log(self) -> dict[str, TaskSpec]:
        tasks, worlds = self.log.task_specs()
        self.worlds.update(worlds)
        return tasks

    def generation(self, gen: int) -> GenerationReport:
        """Run and commit generation ``gen``: its phases fill a :class:`Generation`, whose rows are logged."""
        clock, started = Clock(), time.time()
        done = Generation(gen, proposals=self.pending())
        done.failures = done.proposals.failures + (self.suite_failures if gen == 0 else 0)
        done.external = self.inbox.take(gen, known_tasks(self.curriculum.tasks, log=self.log))
        done.failures += done.external.failures
        for attempt in self._drained(self.synth.actors, "drain_attempts", gen):
            self.events("synthesis_attempt", gen=gen, **attempt)
        done.keep_proposed(self._drained(self.synth.actors, "drain_trajectories", gen))
        clock.lap("proposals")
        self._predict_and_plan(done)
        clock.lap("predict")
        self._train(done, clock)
        self._score_proposals(done)
        clock.lap("proposer")
        evaluated = gen % self.exp.eval.every == 0 or gen == self.exp.run.generations - 1
        done.evals = self._play(gen, self.eval_tasks, "eval", 1) if evaluated else []
        done.suite_evals = self.held.play(gen, self._play, self.state_ref) if evaluated else {}
        clock.lap("eval")
        self._tally_calls(done)
        busy = self._busy(started)
        record = self._record(done)
        summary = record.generations[0]
        for name, fields in self.watch.observe(gen, summary.eval_success, summary.pool_diversity):
            self.events(name, **fields)
        tables = self._commit(record, done.next_plan)
        clock.lap("commit")
        if self.handoff is not None and self.handoff.hand_out(gen):
            self.events("batch_handed_out", gen=gen, batch=batch_id(gen))
            clock.lap("hand_out")
        return self._report(done, record.generations[0], tables, clock, busy)

    def _predict_and_plan(self, done: Generation) -> None:
        """Predict the accepted tasks, admit them, and submit the next generation's proposals."""
        gen, proposals = done.gen, done.proposals
        eval_ids = {t.task_id for t in self.eval_tasks} | self.held.ids()  # never trained on
        done.accepted = [
            t
            for t, v in zip(proposals.tasks, proposals.verdicts, strict=True)
            if v.accepted and t.task_id not in eval_ids
        ]
        predicting = self.model.predict.remote(done.accepted)
        if self.deferred is not None:
            # overlap: the update on gen - 1 is taken after these predictions, beside solving
            self.updating = self.model.update.remote(self.deferred.update)
        done.predicted, error = get(predicting)
        done.calls.record("world model", error or None)
        if error:
            done.failures += 1
            self.events("world_model_failed", gen=gen, error=error)
        self.curriculum.admit(gen, done.accepted, done.predicted)
        done.next_plan = self.curriculum.plan(gen + 1)
        # what proposes for gen + 1, kept even after the last generation (a run made longer)
        self.next_proposing = self._proposing()
        if gen + 1 < self.exp.run.generations:
            # nothing is left in flight after the last generation (closing would kill it mid-call)
            self.pending = self._judged(
                self._submit(gen + 1, done.next_plan, proposing=self.next_proposing)
            )

    def _train(self, done: Generation, clock: Clock) -> None:
        """Play the curriculum's batch, take a learner step, update the World model and the curriculum."""
        gen = done.gen
        if self.handoff is not None:
            announced = self.handoff.policy_for(gen)
            if announced is not None:
                self._adopt(announced, gen)
            done.policy = self.handoff.policy
            clock.lap("trainer")
        # the version that plays this generation: predictions, the update and the summary say it
        done.version = get(self.learner.policy_version.remote())
        done.batch = self.curriculum.batch(gen)
        done.dynamic = self.exp.curriculum.dynamic_sampling
        policy, rollouts = (self.version, self.state_ref), self.exp.run.rollouts
        attempts = self.players.submit(gen, done.batch, "train", rollouts, policy)
        behind = self.deferred  # overlap: gen - 1's learner step runs beside these rollouts
        stepping = self.learner.learn.remote(*behind.learner_args) if behind else None
        parts = attempts.get()
        done.episodes = self.players.gather(gen, "train", parts)
        shipped = [decisions for _, decisions in parts if decisions is not None]  # for the learner
        # dynamic sampling: further rounds, with the same policy, until enough groups teach
        shipped += self.players.further_rounds(done, self.curriculum, rollouts, policy, len(parts))
        done.solving = clock.lap("solve")
        # an episode the Solver could not play (its server down) says nothing about the task:
        # it is counted as a failure, and nobody learns from it
        played = [e for e in done.episodes if not e.failure]
        outcomes = played + done.external.episodes  # what the World model and curriculum see
        learn = done.learnt_on()  # with dynamic sampling, the informative groups only
        if self.overlap:
            self.deferred = Deferred(gen, learn, done.batch, outcomes, shipped)
        else:
            stepping = self.learner.learn.remote(learn, done.batch, shipped)
            self.updating = self.model.update.remote(outcomes)
        if stepping is not None:
            self._learnt(done, stepping, behind.gen if behind else gen)
        clock.lap("learn")
        model_error = get(self.updating) if self.updating is not None else None
        self.updating = None
        done.calls.record("world model", model_error or None)
        if model_error:
            done.failures += 1
            self.events("world_model_failed", gen=gen, error=model_error)
        self.curriculum.observe(
            gen, [e.task_id for e in outcomes], [e.reward.value for e in outcomes]
        )
        clock.lap("world_model")

    def _learnt(self, done: Generation, stepping: Any, through: int) -> None:
        """Take the learner's step (a Ray ref) on generation ``through``'s episodes: its stats, and its state for the Solvers."""
        done.stats, new_state, learn_error = get(stepping)
        done.learnt_from = done.version
        done.calls.record("learner", learn_error or None)
        if learn_error:
            done.failures += 1
            self.events("learner_failed", gen=done.gen, error=learn_error)
        if new_state is not None and self.handoff is None:  # with a trainer, the trainer's policies
            self.state_ref = self._started.put(new_state)
            self.version = through

    def _busy(self, started: float) -> dict[str, float]:
        """Each actor's share of the generation's wall time so far spent in its role's calls."""
        now = time.time()
        intervals = drain_busy(self._labelled)
        if self.timeline is not None:
            self.timeline.extend((a, s, e) for a, spans in intervals.items() for s, e in spans)
        return busy_shares(intervals, started, now)

    def _score_proposals(self, done: Generation) -> None:
        """What each proposal earned (the ``proposals`` rows); a Synthesizer that learns, learns from it."""
        proposals = done.proposals
        done.scored = self.scoring.score(
            done.gen,
            proposals.tasks,
            proposals.verdicts,
            proposals.sources,
            proposers={"fresh": proposals.proposer},
            predicted=dict(zip([t.task_id for t in done.accepted], done.predicted, strict=True)),
            episodes=[e for e in done.episodes if not e.failure],
        )
        if self.synth_learner is None:
            return
        _stats, state, error = get(self.synth_learner.learn.remote(done.scored.feedback))
        done.calls.record("synthesizer", error or None)
        if error:
            done.failures += 1
            self.events("synthesizer_learn_failed", gen=done.gen, error=error)
        elif state is not None:
            self.synth_ref = self._started.put(state)
            self.synth_version = done.gen

    def _adopt(self, policy: Announcement, gen: int) -> None:
        """Play ``policy`` from generation ``gen`` on: its adapter loaded, every Solver given it."""
        assert self.handoff is not None
        self.handoff.load(policy, self.exp.solver.name, self.exp.role_settings()["solver"], gen)
        state = policy_state(policy.served_as, policy.version)
        get(self.learner.set_state.remote(state))
        self.state_ref = self._started.put(state)
        self.version = policy.trained_through
        if self.synth_follows:  # self-play: the Synthesizer proposes with the policy too
            self.synth_ref, self.synth_version = self.state_ref, policy.trained_through
        self.handoff.adopted(policy, gen)
        self.handoff.unload_stale(gen)  # the adapters out of the staleness window; never fails

    def _tally_calls(self, done: Generation) -> None:
        """Add the generation's role calls to the run's; a role every call of which failed is an error event."""
        calls = done.calls
        calls.add(done.proposals.calls)
        if done.gen == 0:
            calls.add(self.suite_calls)
        for episode in [*done.episodes, *done.evals, *done.suite_episodes()]:
            calls.record("solver", episode.failure)
        for role, failed in calls.all_failed().items():
            self.failing.setdefault(role, []).append(done.gen)
            self.events(
                "role_failed_every_call",
                gen=done.gen,
                role=role,
                name=getattr(self.exp, ROLE_TABLE[role]).name,
                calls=failed.calls,
                error=failed.error,
            )
        self.calls.add(calls)

    def _record(self, done: Generation) -> GenerationRecord:
        """The generation's rows of every table."""
        logged = self.logged_worlds
        record = generation_record(
            done,
            seed=self.seed,
            eval_tasks=self.eval_tasks,
            logged_worlds=logged,
            frontier=self.curriculum.frontier(),
            policies=self.handoff is not None,
            suites=self.held.suites,
        )
        record.usage = self._drained(self._every_actor, "drain_usage", done.gen)
        record.usage += self.held.drain_usage()  # the code suites' hosts
        return record

    def _report(
        self,
        done: Generation,
        summary: GenerationRow,
        tables: dict[str, Any],
        clock: Clock,
        busy: dict[str, float],
    ) -> GenerationReport:
        """Show the committed generation (the table, the trackers) and record it (``events.jsonl``)."""
        seconds = clock.total()
        row = summary.cells()
        report = GenerationReport(
            gen=done.gen,
            row=row,
            seconds=seconds,
            episodes_per_second=len(done.episodes) / done.solving if done.solving > 0 else 0.0,
            top_rejections=list(
                top_rejections(rejection_counts(done.proposals.verdicts), 3).items()
            ),
            phases=clock.phases,
            busy=busy,
            tables=tables,
        )
        self.events(
            "generation",
            gen=done.gen,
            seconds=round(seconds, 3),
            phases=clock.phases,
            busy=busy,
            **{k: v for k, v in row.items() if k != "rejections"},
        )
        if self.on_generation:
            self.on_generation(report)
        return replace(report, tables={})  # the run's summary keeps no copy of the tables

    def _commit(self, record: GenerationRecord, next_plan: GenerationPlan) -> dict[str, Any]:
        """Write the record, then the checkpoint, then the manifest (the commit); returns the tables written."""
        tables: dict[str, Any] = {}
        parts = self.log.write(record, tables)
        if self.handoff is not None:
            self.handoff.stage(record.gen, tables)
        base = ("checkpoints", f"gen={record.gen}")
        files: dict[str, str | None] = {}
        for table, actor in (("solver", self.learner), ("world_model", self.model)):
            state = get(actor.get_state.remote())
            files[table] = None if state is None else f"{table}.state"
            if state is not None:
                self.run.write_bytes(state, *base, f"{table}.state")
            elif table not in self.unsaved:
                self.unsaved.add(table)
                role = getattr(self.exp, table).name
                self.events(
                    "role_not_checkpointed",
                    role=table,
                    name=role,
                    why=f"{role!r} is not Stateful: a resumed run starts it afresh",
                )
        synth = self._save_proposer(record.gen, base, files)
        for key, (name, data) in (self.deferred.checkpoint() if self.deferred else {}).items():
            files[key] = name  # overlap: the step the next generation takes beside solving
            self.run.write_bytes(data, *base, name)
        state = {
            "curriculum": self.curriculum.state(),
            "next_plan": plan_json(next_plan),
            "version": self.version,
            "eval_tasks": [t.task_id for t in self.eval_tasks],
            "policy": None
            if self.handoff is None or self.handoff.policy is None
            else self.handoff.policy.model_dump(exclude_none=True),
            "watch": self.watch.state(),
            "synth": synth,
            "adapters": {} if self.handoff is None else self.handoff.loaded_state(),  # to unload
        }
        self.run.write_bytes(json.dumps(state, sort_keys=True).encode(), *base, "state.json")
        rows = {name: len(items) for name, items in record.tables()}
        self.log.commit(
            record.gen,
            parts,
            rows,
            {"checkpoint": "/".join(base), "checkpoint_files": {**files, "state": "state.json"}},
            owner=self.lock,
        )
        self.pruned_through = prune_checkpoints(
            self.log, record.gen, self.exp.run.keep_checkpoints, self.pruned_through
        )
        return GameLog.as_read(record.gen, tables)

    def _save_proposer(
        self, gen: int, base: tuple[str, str], files: dict[str, str | None]
    ) -> dict[str, Any]:
        """A learning Synthesizer's checkpoint: its learner's state, and the state the pending proposals used."""
        if self.synth_learner is None:
            return {}
        state = get(self.synth_learner.get_state.remote())
        files["synthesizer"] = "synthesizer.state"
        self.run.write_bytes(state, *base, "synthesizer.state")
        version, ref, proposer = self.next_proposing
        if ref is not None:
            files["synthesizer_proposing"] = "synthesizer-proposing.state"
            self.run.write_bytes(get(ref), *base, "synthesizer-proposing.state")
        return {"version": self.synth_version, "proposing_version": version, "proposer": proposer}

    def close(self) -> None:
        """Stop the background judging and the actors."""
        if self.background is not None:
            self.background.close()
        self.held.close()
        if self.actors is not None:
            self.actors.close()


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
    lock: RunLock | None = None,
    progress: Callable[[str], None] | None = None,
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
        lock: the run directory's lock, when the caller has claimed it after its preflight
            (:mod:`coevo.run.driver.driving`, as ``coevo run`` does); else this call runs the
            preflight and claims it before Ray starts.
        progress: told what is starting (Ray, each role's actors) until the first generation.

    Raises:
        LogError: another run holds the run directory, or (to resume) its log is damaged.
    """
    target = run_dir or experiment.run.out
    if resume and (last := GameLog(target).last_generation()) >= 0:
        resumable(GameLog(target), last)  # before Ray starts or the lock is taken
    with driving(
        experiment,
        target,
        resume=resume,
        address=address,
        lock=lock,
        events=events,
        progress=progress,
    ) as held:
        arena = Arena(
            experiment,
            held.run,
            on_generation=on_generation,
            events=events,
            lock=held,
            progress=progress,
        )
        reports = _generations(arena, experiment, resume, stop_after, on_start)
    return RunSummary(
        arena.run.uri,
        arena.log.last_generation() + 1,
        reports,
        calls=arena.calls.roles,
        failing=arena.failing,
        halted=arena.halted,
        adapter_unloads_failed=0 if arena.handoff is None else arena.handoff.unload_failures,
    )


def _generations(
    arena: Arena,
    experiment: Experiment,
    resume: bool,
    stop_after: int | None,
    on_start: Callable[[Arena], None] | None,
) -> list[GenerationReport]:
    """The arena's generations of this call, its actors closed at the end."""
    reports: list[GenerationReport] = []
    try:
        first = arena.start(resume=resume)
        if on_start is not None:
            on_start(arena)
        generations_begin()  # a SIGTERM from now on lets the generation in flight commit
        for gen in range(first, experiment.run.generations):
            if stop_after is not None and len(reports) >= stop_after:
                break
            reports.append(arena.generation(gen))
            at_commit()  # a commit boundary: where a SIGTERM stops the run
            role = failing_streak(arena.failing, experiment.run.stop_after_failing, gen)
            if role is not None and gen + 1 < experiment.run.generations:
                arena.halted = role  # an outage: said now, not after every generation's retries
                arena.events(
                    "run_halted",
                    gen=gen,
                    role=role,
                    generations=experiment.run.stop_after_failing,
                    error=arena.calls.roles[role].error,
                )
                break
        if (
            arena.handoff is not None
            and arena.log.last_generation() + 1 >= experiment.run.generations
        ):
            arena.handoff.finish(arena.log.last_generation())  # a Ray queue ends with the run
    finally:
        with contextlib.suppress(Exception):
            arena.close()
    return reports


def resume_run(run_dir: str, **kwargs: Any) -> RunSummary:
    """Continue the run in ``run_dir`` after its last committed generation (its own experiment file).

    Raises:
        ArenaError: no experiment was recorded there, or its log or checkpoint cannot be read.
    """
    experiment = recorded_experiment(run_dir)
    try:
        return run_experiment(experiment, run_dir, resume=True, **kwargs)
    except LogError as exc:
        raise ArenaError(str(exc)) from exc
