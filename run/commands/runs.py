"""``coevo run`` and ``coevo resume``: experiments from TOML files, on Ray, with a live table and a game log."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Any, Final

from coevo.arena.errors import CoevoError, CommandError
from coevo.run.commands import (
    EXIT_INTERRUPTED,
    EXIT_ROLE_FAILED,
    EXIT_TRAINER_TIMEOUT,
    local_ray_auth,
)
from coevo.run.driver.columns import column_help
from coevo.run.driver.failures import ROLE_TABLE
from coevo.run.driver.stopping import EXIT_TERMINATED, Terminated, stop_on_sigterm

__all__ = ["add_commands", "cmd_resume", "cmd_run"]


def _print_summary(summary: dict[str, Any]) -> None:
    from coevo.run.driver.summary import summary_lines

    print("\n" + "\n".join(summary_lines(summary)), file=sys.stderr)


def _starting(args: argparse.Namespace, experiment: Any) -> str:
    """What the status line says while Ray and the role actors start."""
    from coevo.run.experiment import ray_address

    address = ray_address(args.address, experiment)
    if experiment.ray.in_process:
        return "starting the roles in this process (ray.in_process: no Ray)"
    if address:
        where = f"joining the Ray cluster at {address}"
    else:
        cpus = experiment.ray.num_cpus or os.cpu_count() or 1
        where = f"starting Ray on this machine ({cpus} CPU{'s' * (cpus > 1)})"
    return f"{where} and the role actors"


def _planned(run_dir: str) -> int | None:
    """The generations the run in ``run_dir`` was started for (None when its record cannot be read)."""
    from coevo.arena.errors import CoevoError
    from coevo.run.experiment import recorded_experiment

    try:
        return recorded_experiment(run_dir).run.generations
    except CoevoError:
        return None


def _finished(args: argparse.Namespace, experiment: Any, run_dir: str, done: int) -> int:
    """``coevo resume`` of a run with every generation committed: its summary, from the log alone.

    With a folder ``[trainer]``, a batch committed but not handed out (the driver
    stopped in between) is handed out now.
    """
    from coevo.arena.gamelog import GameLog
    from coevo.run.driver.summary import summarize
    from coevo.run.handoff.transports import Handoff

    trainer = experiment.trainer
    if trainer is not None and trainer.transport == "folder":
        log = GameLog(run_dir)
        log.verify(checksum=True, last_checkpoint_only=True)  # a batch only from a whole log
        for batch in Handoff(trainer, log, experiment.run.max_staleness).start(done, None):
            print(
                f"handed {batch} out to the trainer (committed, not yet handed out)",
                file=sys.stderr,
            )

    # damage is said here too, as a resume that went on would say it (and analyze, export)
    GameLog(run_dir).verify(checksum=True, last_checkpoint_only=True)
    summary = summarize(run_dir)  # after the fact: from the log
    print(
        f"{run_dir} is finished ({done} generations): nothing to resume (to run it longer: "
        f"`coevo resume {run_dir} --set run.generations={done + 10}`)",
        file=sys.stderr,
    )
    _print_summary(summary)
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    return 0


RESUMABLE: Final = {
    "run.generations": "how far the run goes",
    "run.stop_grace": "how long a SIGTERM waits for a commit",
    "run.stop_after_failing": "when a failing role stops the run",
    "trainer.timeout": "how long to wait for the trainer",
    "trainer.poll": "how often to look for the trainer's announcement",
    "tracking": "where the metrics go",
    "ray.address": "where the run's actors play",
    "ray.num_cpus": "the CPUs of a Ray started here",
    "ray.in_process": "Ray actors or hosts in this process (the same log either way)",
}
"""The keys ``coevo resume --set`` may change (a prefix covers the keys under it): none changes what the log's generations mean."""


def _dotted(tree: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted keys of a nested mapping of overrides (a table's keys, not the table)."""
    keys: list[str] = []
    for key, value in tree.items():
        name = f"{prefix}{key}"
        keys.extend(_dotted(value, f"{name}.") if isinstance(value, dict) and value else [name])
    return keys


def _resumed_with(
    experiment: Any, overrides: list[str], run_dir: str
) -> tuple[Any, dict[str, Any]]:
    """The recorded experiment with ``coevo resume --set`` overrides, and what they change (key: [before, after]).

    Raises:
        CommandError: a key that may not change on resume (naming why, and those that may).
    """
    from coevo.run.experiment import load_experiment, parse_overrides

    for key in _dotted(parse_overrides(overrides)):
        if not any(key == k or key.startswith(f"{k}.") for k in RESUMABLE):
            raise CommandError(
                f"--set {key}: cannot change on resume: the generations {run_dir} holds were made "
                "with its recorded value, and a resumed run must go on as the uninterrupted one "
                "would (the same seeds, roles and curriculum; a changed log means a new run: "
                "`coevo run ... --out NEW`). On resume --set takes: "
                + ", ".join(f"{k} ({why})" for k, why in RESUMABLE.items())
            )
        if key == "run.generations" and experiment.benchmark is not None:
            raise CommandError(
                f"--set run.generations: {run_dir} is a [benchmark] run, whose generations are its "
                f"trials (benchmark.trials = {experiment.benchmark.trials}), fixed when it started"
            )
    before = experiment.model_dump(mode="json")
    after = load_experiment(before, overrides)
    new = after.model_dump(mode="json")
    return after, {
        key: [_at(before, key), _at(new, key)]
        for key in sorted(set(_dotted(before)) | set(_dotted(new)))
        if _at(before, key) != _at(new, key)
    }


def _at(tree: Any, key: str) -> Any:
    for part in key.split("."):
        tree = tree.get(part) if isinstance(tree, dict) else None
    return tree


def _run_names() -> tuple[str, ...]:
    """The names coevo writes at the top of a run directory (a folder holding anything else is no run's).

    A run killed while Ray started (before its ``experiment.json``) leaves
    some of them: its lock, its first events, a benchmark's pool, the
    trackers' record and folders.
    """
    from coevo.arena.gamelog.inbox import INBOX
    from coevo.arena.gamelog.lock import LOCK_NAME
    from coevo.run.tracking.sender import RECORD

    written_first = ("events.jsonl", LOCK_NAME, "pool.jsonl", RECORD, "tensorboard", "mlruns")
    return ("experiment.json", "log", "checkpoints", INBOX, "suites", "trainer", *written_first)


def _refuse_other_folder(run_dir: str) -> None:
    """Refuse to start a run in a folder that holds something else than a run (nothing is written there).

    A folder is taken as a run's when it is missing or empty, when its
    ``experiment.json`` is coevo's (a JSON object with a ``run`` table: what
    follows checks its generations), or when it holds only names a run
    writes (:func:`_run_names`: a run killed before its ``experiment.json``
    leaves only its lock and first events). Anything else
    (``notes.txt`` beside them, an ``experiment.json`` of another program)
    is the user's, and ``coevo run`` would write over it: refused.

    Raises:
        CommandError: the folder holds other files, or an ``experiment.json`` that is not coevo's.
    """
    from coevo.arena.gamelog import RunDir

    run = RunDir(run_dir)
    if run.exists("experiment.json"):
        try:
            record = run.read_json("experiment.json")
        except (OSError, ValueError) as exc:
            raise CommandError(
                f"{run_dir} holds an experiment.json coevo cannot read ({exc}); choose another "
                "--out (a run goes in a new or empty folder)"
            ) from None
        if not (isinstance(record, dict) and isinstance(record.get("run"), dict)):
            raise CommandError(
                f"{run_dir} holds an experiment.json that is not a coevo run's (no [run] table); "
                "it is not written over: choose another --out (a run goes in a new or empty folder)"
            )
        return
    others = run.others(_run_names())
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise CommandError(
            f"{run_dir} is not empty and holds no run ({shown}); coevo writes a run into a new "
            "or empty folder, never among other files: choose another --out"
        )


def _unwritable(run_dir: str, exc: OSError) -> CommandError:
    """The message for a run directory that cannot be written (a file in the way, no permission)."""
    why = str(exc).split(". Detail:")[0]  # pyarrow repeats the errno in a "Detail"
    return CommandError(f"cannot write the run directory {run_dir}: {why}; choose another --out")


def _run(args: argparse.Namespace, *, resume: bool) -> int:
    from coevo.arena.gamelog import GameLog, RunDir
    from coevo.run.experiment import load_experiment, ray_address, recorded_experiment

    changed: dict[str, Any] = {}
    if resume:
        experiment = recorded_experiment(args.run_dir)
        if args.set:
            experiment, changed = _resumed_with(experiment, args.set, args.run_dir)
        run_dir = args.run_dir
        done = GameLog(run_dir).last_generation() + 1
        if done >= experiment.run.generations:
            return _finished(args, experiment, run_dir, done)  # answered without Ray
    else:
        overrides = list(args.set or [])
        if args.seed is not None:
            overrides.append(f"run.seed={args.seed}")
        if args.out:
            overrides.append(f"run.out={json.dumps(args.out)}")  # experiment.json says where it ran
        experiment = load_experiment(args.experiment, overrides)
        run_dir = experiment.run.out
        done = GameLog(run_dir).last_generation() + 1
        # said before anything is written there or Ray starts: that run's record stays as it was
        planned = _planned(run_dir) if done else 0
        if done and planned is None:
            raise CommandError(
                f"{run_dir} already holds {done} generations, but its experiment.json cannot be "
                f"read: `coevo doctor {run_dir}` says what is damaged; or choose another --out"
            )
        if done and planned is not None and planned <= done:
            raise CommandError(
                f"{run_dir} already holds a finished run ({done} generations): read it with "
                f"`coevo analyze {run_dir}`, or start a new one with --out DIR"
            )
        if done:
            raise CommandError(
                f"{run_dir} already holds {done} of {planned} generations of a run; "
                f"continue it with `coevo resume {run_dir}`, or start a new one with --out DIR"
            )
        # no generation there: a folder of the user's is not written over
        _refuse_other_folder(run_dir)
    # the lock first, before Ray or the roles are imported: a second run into this directory
    # stops here at once, naming the first (and nothing of the first run's is touched)
    lock, made = _claim(run_dir, resume=resume)
    try:
        with stop_on_sigterm(experiment.run.stop_grace, lock, run_dir):
            local_ray_auth(ray_address(getattr(args, "address", None), experiment))
            # Ray loads here, once the run is known, so that `coevo --help` and bad input stay fast
            from coevo.run.driver.driving import preflight

            # a missing API key, a tracker not installed, a cluster address where nothing listens:
            # said before anything but the lock is written (run_experiment is given the lock)
            try:
                preflight(experiment, args.address, trackers=True)
                pool = None
                if experiment.benchmark is not None and done == 0:  # a pool that cannot be played
                    from coevo.run.benchmark import check_pool

                    pool = check_pool(experiment)
                if experiment.eval.suites and done == 0:  # a suite that cannot be read or played
                    from coevo.run.generation.suites import check_suites

                    check_suites(experiment)
            except BaseException:
                lock.release()
                if made:  # the directory the lock made, empty again: as it was
                    with contextlib.suppress(OSError):
                        os.rmdir(RunDir(run_dir).root)
                raise
            return _drive(
                args,
                experiment,
                run_dir,
                lock,
                resume=resume,
                first=done,
                pool=pool,
                changed=changed,
            )
    finally:
        lock.release()


def _claim(run_dir: str, *, resume: bool) -> tuple[Any, bool]:
    """The run directory's lock (a second writer stops here, naming the first), and whether claiming it made the directory (local)."""
    from coevo.arena.gamelog import GameLog, RunDir

    run = RunDir(run_dir)
    made = run.is_local and not os.path.isdir(run.root)
    try:
        return GameLog(run).claim(resume=resume), made
    except OSError as exc:
        raise _unwritable(run_dir, exc) from exc


def _drive(
    args: argparse.Namespace,
    experiment: Any,
    run_dir: str,
    lock: Any,
    *,
    resume: bool,
    first: int,
    pool: Any = None,
    changed: dict[str, Any] | None = None,
) -> int:
    """The run, its directory's lock held: its events, live table, trackers and summary."""
    from coevo.arena.gamelog import GameLog, RunDir
    from coevo.run.driver.display import EventLog, GenerationTable
    from coevo.run.driver.summary import RunTables, summarize, tokens_per_second
    from coevo.run.handoff.transports import TrainerTimeout
    from coevo.run.loop import run_experiment
    from coevo.run.tracking import Tracking

    events = EventLog(RunDir(run_dir))
    # a run directory elsewhere with no tracker destination named stops the run here
    tracking = Tracking(experiment, run_dir, resume=resume, events=events)
    try:
        events(
            "run_resumed" if resume else "run_started",
            run_dir=run_dir,
            experiment=experiment.run.name,
            seed=experiment.run.seed,
            generations=experiment.run.generations,
            curriculum=experiment.curriculum.name,
        )
        if changed:  # `coevo resume --set`: the record says what the run goes on with
            RunDir(run_dir).write_bytes(experiment.recorded_json().encode(), "experiment.json")
            events("experiment_changed", run_dir=run_dir, changes=changed)
    except OSError as exc:
        raise _unwritable(run_dir, exc) from exc
    table = GenerationTable(f"{experiment.run.name} → {run_dir}", total=experiment.run.generations)
    table.starting(_starting(args, experiment))

    # what the summary is made of: the generations committed before (a resume), then those written
    benchmark = experiment.benchmark is not None
    written = (
        RunTables.read(GameLog(run_dir), benchmark=benchmark)
        if first
        else RunTables(benchmark=benchmark)
    )

    def show_and_track(report: Any) -> None:
        table(report)
        tracking(report)  # queued: the trackers write on their own thread
        written.add(report.tables)

    try:
        tracking.start()
        if experiment.benchmark is not None:
            from coevo.run.benchmark import run_benchmark

            result = run_benchmark(
                experiment,
                lock,
                resume=resume,
                address=args.address,
                on_generation=show_and_track,
                events=events,
                on_start=lambda actors: table.start(first),
                tasks=pool,
            )
        else:
            result = run_experiment(
                experiment,
                run_dir,
                resume=resume,
                address=args.address,
                on_generation=show_and_track,
                on_start=lambda arena: table.start(first),
                events=events,
                lock=lock,
                progress=table.progress,
            )
    except KeyboardInterrupt as exc:
        table.close()
        tracking.close(exc)  # what was queued is sent, within a bounded wait
        done = GameLog(run_dir).last_generation() + 1
        by_sigterm = isinstance(exc, Terminated)
        events("run_interrupted", run_dir=run_dir, generations=done, sigterm=by_sigterm)
        what, status = (
            ("stopped by SIGTERM", EXIT_TERMINATED)
            if by_sigterm
            else ("interrupted", EXIT_INTERRUPTED)
        )
        if done >= experiment.run.generations:  # stopped while closing down: nothing is missing
            raise CommandError(
                f"{what} while closing down; all {done} generations are committed: "
                f"`coevo analyze {run_dir}` reads them",
                status=status,
            ) from None
        if not RunDir(run_dir).exists("experiment.json"):  # stopped while Ray was starting
            raise CommandError(
                f"{what} before the run began; nothing to resume: run the same command again",
                status=status,
            ) from None
        raise CommandError(
            f"{what} after {done} of {experiment.run.generations} generations (all "
            f"committed); continue with `coevo resume {run_dir}`",
            status=status,
        ) from None
    except TrainerTimeout as exc:
        tracking.close(exc)
        done = GameLog(run_dir).last_generation() + 1
        events("trainer_timeout", run_dir=run_dir, generations=done, error=str(exc))
        raise CommandError(str(exc), status=EXIT_TRAINER_TIMEOUT) from None
    except BaseException as exc:
        tracking.close(exc)  # as above; the error goes on
        if isinstance(exc, CoevoError):  # what stopped the run, where its events are
            events("run_stopped", run_dir=run_dir, error=str(exc))
        raise
    finally:
        table.close()
    summary = summarize(run_dir, written)
    summary["roles_failing"] = {
        role: {
            "generations": gens,
            "calls": result.calls[role].calls,
            "failed": result.calls[role].failed,
            "error": result.calls[role].error,
        }
        for role, gens in result.failing.items()
    }
    summary["roles_never_succeeded"] = sorted(result.never_succeeded)
    if unloads := getattr(result, "adapter_unloads_failed", 0):  # a warning, not a failure
        summary["adapter_unloads_failed"] = unloads
    summary["tokens_per_second"] = tokens_per_second(
        summary, {report.gen: report.seconds for report in result.reports}
    )
    halted = getattr(result, "halted", None)  # a benchmark run's summary has none
    if halted is not None:
        calls = result.calls[halted]
        summary["stopped_by"] = {
            "role": halted,
            "generations": experiment.run.stop_after_failing,
            "calls": calls.calls,
            "error": calls.error,
        }
    if tracking.enabled:
        print("sending the last metrics and the report's figures to the trackers", file=sys.stderr)
    summary["tracking_failed"] = tracking.close()  # the figures too; never raises for a tracker
    events("run_finished", **summary)
    _print_summary(summary)
    for line in tracking.summary_lines():  # where the metrics went, or why a tracker stopped
        print(line, file=sys.stderr)
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    if halted is not None:
        n = experiment.run.stop_after_failing
        name = getattr(experiment, ROLE_TABLE[halted]).name
        raise CommandError(
            f"stopped after {summary['generations']} of {experiment.run.generations} generations: "
            f"every call of the {halted} {name!r} failed in the last {n} generation{'s' * (n > 1)} "
            f"(run.stop_after_failing = {n}; {result.calls[halted].calls} calls), the last error: "
            f"{result.calls[halted].error}; once it works again, `coevo resume {run_dir}`",
            status=EXIT_ROLE_FAILED,
        )
    if result.never_succeeded:
        raise CommandError(
            "; ".join(
                f"the {role} {getattr(experiment, ROLE_TABLE[role]).name!r} never returned without "
                f"failure ({calls.calls} calls), the last error: {calls.error}"
                for role, calls in sorted(result.never_succeeded.items())
            ),
            status=EXIT_ROLE_FAILED,
        )
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """``coevo run EXPERIMENT``."""
    return _run(args, resume=False)


def cmd_resume(args: argparse.Namespace) -> int:
    """``coevo resume RUN_DIR``."""
    return _run(args, resume=True)


def add_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``run`` and ``resume`` to the ``coevo`` command."""
    run = sub.add_parser(
        "run",
        help="run a co-evolution experiment (a TOML file, or a bundled one by name)",
        formatter_class=fmt,
        description=(
            "Run EXPERIMENT (a TOML file, or a bundled experiment by name) on Ray: a local\n"
            "Ray, or --address / RAY_ADDRESS for a cluster. Generations of propose → judge →\n"
            "predict → train → learn, logged to RUN_DIR/log as Parquet; one table row per\n"
            "generation on the terminal, every event in RUN_DIR/events.jsonl. Ctrl-C stops\n"
            "after what is committed (exit 130), SIGTERM once the generation in flight\n"
            "commits (exit 143; run.stop_grace); `coevo resume RUN_DIR` continues.\n"
            "An experiment with a [benchmark] table plays a file of imported tasks k times\n"
            "instead (one generation per trial; pass^k in the summary and `coevo analyze`)."
        ),
        epilog=(
            "the table's columns (one row per generation):\n"
            f"{column_help()}\n\n"
            "examples:\n  coevo run quickstart\n"
            "  coevo run quickstart --set curriculum.name=plr --seed 3 --out runs/plr-3\n"
            "  coevo run my-experiment.toml --set run.generations=5"
        ),
    )
    run.add_argument(
        "experiment",
        metavar="EXPERIMENT",
        help="a TOML file, or the name of a bundled experiment (`coevo examples` lists them)",
    )
    run.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a key (TOML value), e.g. solver.actors=2; repeatable",
    )
    run.add_argument("--seed", type=int, default=None, help="the run's seed (run.seed)")
    run.add_argument("--out", default=None, help="the run directory (any pyarrow filesystem URI)")
    run.add_argument(
        "--address",
        default=None,
        help="a Ray cluster to join (default: the experiment's [ray] address, else RAY_ADDRESS, else a local Ray)",
    )
    run.add_argument(
        "--json", action="store_true", help="print the summary as JSON on standard output"
    )
    run.set_defaults(func=cmd_run)

    resume = sub.add_parser(
        "resume",
        help="continue a run after its last complete generation",
        formatter_class=fmt,
        description="Continue RUN_DIR after its last committed generation, from its checkpoint\n(after Ctrl-C, SIGTERM, a killed driver or a crash): no lost and no duplicated\nrows. --set changes what may change on resume (the run's length, tracking, ...).",
        epilog="examples:\n  coevo resume runs/quickstart\n"
        "  coevo resume runs/quickstart --set run.generations=50",
    )
    resume.add_argument("run_dir", metavar="RUN_DIR")
    resume.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="change a key that may change on resume (TOML value), e.g. run.generations=50: "
        + ", ".join(RESUMABLE)
        + "; recorded in RUN_DIR/experiment.json; repeatable",
    )
    resume.add_argument("--address", default=None, help="a Ray cluster to join")
    resume.add_argument(
        "--json", action="store_true", help="print the summary as JSON on standard output"
    )
    resume.set_defaults(func=cmd_resume)
