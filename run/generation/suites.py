"""Further held-out suites (``[[eval.suites]]``): transfer, measured beside the synthesized suite.

The synthesized held-out suite says how the Solver does on tasks like the
ones it trains on. The anchors of environment synthesis also report success
on tasks nobody made for the run — a human-written benchmark never trained
on. A run's ``[eval]`` can name such suites::

    [[eval.suites]]
    name = "kiosk"
    tasks = "kiosk.jsonl"      # coevo import tau2 ... --out kiosk.jsonl (or coevo synth/mine/export)
    trials = 4                 # k of pass^k

    [[eval.suites]]
    name = "corpus-eval"
    corpus = "corpus"          # coevo corpus build --out corpus
    split = "eval"             # its held-out worlds
    limit = 200

* **Read before the run starts** (:func:`read_suites`): a file is a regular
  file of at most :data:`~coevo.arena.bounded.MAX_JSON_BYTES`, read as a
  stream of lines of at most :data:`~coevo.arena.records.MAX_LINE_BYTES`
  each, as every task file is (:func:`~coevo.arena.records.iter_lines`); a
  bad file is an :class:`~coevo.arena.errors.ArenaError` naming the suite,
  the file and the line. The path is the user's own, in their experiment
  file: a relative one is read from the folder coevo runs in, and a link on
  the way (the file, or a folder above it) is followed, as the experiment
  file's own path is. A suite of code tasks
  (``coevo.codetask/1``) needs an LLM Solver, and its domain's code must run
  from ``code``: both are checked then too (:func:`check_suites`).
* **Kept with the run**: the tasks are copied to ``RUN_DIR/suites/NAME.jsonl``
  when the run starts, and a resumed run plays that copy, whatever the file
  holds by then; generation 0 logs them in ``tasks`` (``source = "eval"``).
* **Never trained on**: their ids are held out of the training pool (a
  proposal with the same content id is dropped), the inbox refuses
  outcomes of ``eval`` tasks, and eval episodes reach neither the learner,
  the World model nor the curriculum.
* **Played at the same generations** as the synthesized suite, each task
  ``trials`` times: a suite of ``coevo.task/1`` records by the run's Solver
  actors with the current policy (chunks and seeds as every episode, the
  purpose ``eval:NAME``); a suite of code tasks by hosts that play them as a
  ``[benchmark]`` run does (:class:`~coevo.run.benchmark.BenchmarkHost`: the
  LLM Solver's model, the policy the run plays, the tools in the sandbox, a
  user simulator). Each episode is an ``evals`` row with ``suite = NAME``
  (null: the synthesized suite).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final

from coevo.agents.registry import REGISTRY
from coevo.arena.bounded import MAX_JSON_BYTES, open_regular
from coevo.arena.codetask import CODETASK_FORMAT, CodeTaskSpec, code_records, code_tasks_from
from coevo.arena.codeworld import domain_code_fails
from coevo.arena.errors import ArenaError, CoevoError
from coevo.arena.gamelog import RunDir, UsageRow, accepted_ids
from coevo.arena.gamelog.corpus import held_out, read_corpus
from coevo.arena.ids import episode_id
from coevo.arena.outcomes import Episode
from coevo.arena.records import collect_records, dump_record, iter_lines, parse_line
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import TaskSpec, WorldSpec
from coevo.run.actors.inprocess import get, kill
from coevo.run.actors.start import start_hosts
from coevo.run.experiment import Experiment, SuiteConfig

__all__ = [
    "SUITES_DIR",
    "HeldOutSuites",
    "Suite",
    "check_suites",
    "close_code_hosts",
    "code_items",
    "keep_suites",
    "kept_suites",
    "read_suites",
    "start_code_hosts",
]

SUITES_DIR: Final = "suites"
"""The run directory's folder of the suites' copies (``suites/NAME.jsonl``)."""


@dataclass(frozen=True)
class Suite:
    """A further held-out suite, read: its settings and its tasks (all ``coevo.task/1``, or all code tasks).

    Attributes:
        config: its ``[[eval.suites]]`` table.
        tasks: its tasks, in order (each world inline).
    """

    config: SuiteConfig
    tasks: list[Any]

    @property
    def name(self) -> str:
        """The suite's name."""
        return self.config.name

    @property
    def code(self) -> bool:
        """Whether its tasks are code tasks (``coevo.codetask/1``), played by an LLM Solver's host."""
        return bool(self.tasks) and isinstance(self.tasks[0], CodeTaskSpec)

    @property
    def source(self) -> str:
        """Where its tasks came from, as a message names it."""
        c = self.config
        return c.tasks if c.tasks is not None else f"{c.corpus}, split {c.split!r}"

    def records(self) -> bytes:
        """Its tasks as JSON lines (world records first, then tasks naming them): its copy in the run directory."""
        if self.code:
            rows = code_records(self.tasks)
        else:
            worlds: dict[str, dict[str, Any]] = {}
            tasks = []
            for task in self.tasks:
                world = task.world
                if world.world_id not in worlds:  # each world dumped once
                    worlds[world.world_id] = dump_record(world)
                tasks.append(dump_record(task) | {"world": world.world_id})
            rows = [*worlds.values(), *tasks]
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


_LONG_LINE: Final = (
    "coevo run reads no longer line of a suite (a task or world record is kilobytes, a "
    "τ²-bench domain's database a few MB; the limit is MAX_LINE_BYTES in coevo.arena.records, "
    "not a setting)"
)
"""What the message of a suite's line over :data:`~coevo.arena.records.MAX_LINE_BYTES` says to do."""


def _parsed(stream: BinaryIO, label: str) -> list[Any]:
    """The tasks of a suite's JSON lines, read as a stream: code tasks, or ``coevo.task/1`` with their worlds inline.

    Raises:
        CoevoError: a line is too long or not UTF-8, or a record cannot be read (naming
            ``label`` and the line).
    """
    lines = iter_lines(stream, fix=_LONG_LINE)
    first = next(lines, None)
    if first is None:
        return []
    numbered = itertools.chain([first], lines)
    if CODETASK_FORMAT in first[1] or '"coevo.codeworld/1"' in first[1]:
        return code_tasks_from(numbered, label)
    tasks, worlds = collect_records(parse_line(text, number) for number, text in numbered)
    out = []
    for task in tasks:
        if not isinstance(task.world, WorldSpec):
            world = worlds.get(str(task.world))
            if world is None:
                raise CoevoError(
                    f"task {task.task_id} names world {task.world}, which no world record in the file defines"
                )
            task = task.model_copy(update={"world": world})
        out.append(task)
    return out


def _from_file(config: SuiteConfig) -> list[Any]:
    """A suite's file read (see the module docstring): its user's links followed, a device, a FIFO or more than 64 MiB refused unread."""
    assert config.tasks is not None
    path = Path(config.tasks)
    fd = open_regular(path.resolve(), limit=MAX_JSON_BYTES, what=str(path))
    with os.fdopen(fd, "rb") as stream:
        return _parsed(stream, str(path))


def _from_corpus(config: SuiteConfig) -> list[TaskSpec]:
    """A corpus's accepted tasks on the held-out side of its split, by task id."""
    assert config.corpus is not None
    manifest, tables = read_corpus(config.corpus)
    split = manifest.get("split")
    share = split.get("eval_share") if isinstance(split, dict) else None
    if not isinstance(share, int | float) or isinstance(share, bool) or not 0 < share < 1:
        raise CoevoError(
            f"corpus {config.corpus}: its manifest has no held-out split (split.eval_share "
            f"between 0 and 1, found {share!r}); build it with `coevo corpus build --eval-share`"
        )
    accepted = accepted_ids(tables["verdicts"])
    worlds = dict(
        zip(
            tables["worlds"].column("world_id").to_pylist(),
            tables["worlds"].column("spec").to_pylist(),
            strict=True,
        )
    )
    specs: dict[str, tuple[str, str]] = {}
    tasks = tables["tasks"].select(["task_id", "world_id", "spec"]).to_pylist()
    for row in tasks:
        if row["task_id"] in accepted and held_out(row["world_id"], share):
            specs.setdefault(row["task_id"], (row["world_id"], row["spec"]))
    chosen = sorted(specs)[: config.limit]
    parsed: dict[str, WorldSpec] = {}
    out = []
    for task_id in chosen:
        world_id, spec = specs[task_id]
        if world_id not in parsed:
            parsed[world_id] = WorldSpec.model_validate_json(worlds[world_id])
        task = TaskSpec.model_validate_json(spec)
        out.append(task.model_copy(update={"world": parsed[world_id]}))
    return out


def read_suites(configs: Sequence[SuiteConfig]) -> list[Suite]:
    """Every suite's tasks, read from its file or corpus (see the module docstring).

    Raises:
        ArenaError: a file or corpus cannot be read or holds no task (naming the suite and the
            file, and how to make one).
    """
    suites = []
    for config in configs:
        where = config.tasks if config.tasks is not None else config.corpus
        try:
            if config.tasks is not None:
                tasks = _from_file(config)[: config.limit]
            else:
                tasks = _from_corpus(config)
        except (OSError, CoevoError, ValueError, KeyError) as exc:
            how = (
                "write one with `coevo import tau2 CHECKOUT --domain NAME --out FILE`, "
                "`coevo synth` or `coevo export`"
                if config.tasks is not None
                else "build one with `coevo corpus build`"
            )
            said = f"{exc}" if how in str(exc) else f"{exc}; {how}"  # the way out, said once
            raise ArenaError(
                f"eval suite {config.name!r}: {where} cannot be read as a suite of tasks: {said}"
            ) from None
        if not tasks:
            side = "" if config.tasks is not None else f" on its {config.split!r} side"
            raise ArenaError(
                f"eval suite {config.name!r}: {where} holds no task{side}; give a file or corpus "
                "with tasks, or remove the suite"
            )
        suites.append(Suite(config, tasks))
    return suites


def check_suites(experiment: Experiment) -> list[Suite]:
    """Before anything starts: every suite reads, and each can be played by the run's Solver.

    A suite of code tasks is played by an LLM Solver only (its tools are code
    run in the sandbox, its customer a user simulator): with any other Solver
    the run is refused here, naming the suite, rather than counting every
    episode a failure after hours of training. Its domain's code must run from
    ``code``, and a task with a user scenario needs ``user``.

    Raises:
        ArenaError: what is wrong, naming the suite and the file, and how to fix it.
    """
    suites = read_suites(experiment.eval.suites)
    solver = experiment.solver.name
    for suite in suites:
        if not suite.code:
            continue
        if not callable(getattr(REGISTRY.get(solver).factory, "load_adapter", None)):
            raise ArenaError(
                f"eval suite {suite.name!r}: {suite.source} holds code tasks (coevo.codetask/1, "
                f"`coevo import`), which only an LLM Solver plays (llm-solver, claude): the "
                f"solver {solver!r} cannot. Remove the suite, or measure the file with a "
                "[benchmark] run of an LLM Solver (docs/benchmarks-import.md)"
            )
        config = suite.config
        if config.user is None and any(t.user_scenario is not None for t in suite.tasks):
            raise ArenaError(
                f"eval suite {suite.name!r}: the tasks of {suite.source} have user scenarios: set "
                'its user (a model playing the customer, e.g. user = { provider = "anthropic", '
                'model = "claude-haiku-4-5" })'
            )
        try:  # the customer's model: its settings, key and server, as [benchmark.user]'s
            if config.user is not None:
                from coevo.agents.llm.user import LLMUser  # an LLM SDK: only for a code suite

                LLMUser.preflight(config.benchmark().user_settings())
        except CoevoError as exc:
            raise ArenaError(f"eval suite {suite.name!r}: user: {exc}") from None
        missing = next((p for p in config.code if not Path(p).is_dir()), None)
        if missing is not None:
            raise ArenaError(
                f"eval suite {suite.name!r}: code: {missing} is no folder (give the folder holding "
                "the domain's code, e.g. CHECKOUT/src for τ²-bench)"
            )
        worlds = {t.world.world_id: t.world for t in suite.tasks}
        failed = domain_code_fails(worlds.values(), paths=config.code, seconds=config.seconds)
        if failed is not None:
            world, why = failed
            raise ArenaError(
                f"eval suite {suite.name!r}: the {world.domain!r} domain's code does not "
                f"run from code {config.code or '(none given)'}: {why}; give the folder "
                "holding the domain's code (CHECKOUT/src for τ²-bench)"
            )
    return suites


def keep_suites(run: RunDir, suites: Sequence[Suite]) -> None:
    """Copy each suite's tasks into the run directory (``suites/NAME.jsonl``), which a resumed run plays."""
    for suite in suites:
        run.write_bytes(suite.records(), SUITES_DIR, f"{suite.name}.jsonl")


def kept_suites(run: RunDir, configs: Sequence[SuiteConfig]) -> list[Suite]:
    """The suites a run kept when it started (:func:`keep_suites`), for its resumption.

    Raises:
        ArenaError: a copy is missing or does not read back (naming it).
    """
    suites = []
    for config in configs:
        label = run.label(SUITES_DIR, f"{config.name}.jsonl")
        try:
            data = run.read_bytes(SUITES_DIR, f"{config.name}.jsonl")
            suites.append(Suite(config, _parsed(io.BytesIO(data), label)))
        except (OSError, CoevoError, ValueError) as exc:
            raise ArenaError(
                f"{label}: the run's copy of eval suite {config.name!r} cannot be read ({exc}); "
                "the log is intact (`coevo analyze` reads it); start a new run to go on"
            ) from None
    return suites


def start_code_hosts(
    experiment: Experiment, suites: Sequence[Suite], run_dir: str
) -> dict[str, Any]:
    """A :class:`~coevo.run.benchmark.BenchmarkHost` per code suite (a Ray actor, or in this process), by suite name.

    Each reads its suite's copy in the run directory, so an actor Ray
    restarts plays the same tasks.
    """
    hosts: dict[str, Any] = {}
    for suite in suites:
        if not suite.code:
            continue
        # the LLM SDKs come with the host: a run without code suites never imports them
        from coevo.run.benchmark import BenchmarkHost, host_environment

        bench = suite.config.benchmark()
        args = (
            experiment.solver.name,
            experiment.solver.config,
            bench.user,
            bench,
            run_dir,
            host_environment(experiment, bench),
            (SUITES_DIR, f"{suite.name}.jsonl"),
        )
        options = {"num_cpus": 0, "max_restarts": 4, "max_task_retries": 4}
        [hosts[suite.name]] = start_hosts(
            BenchmarkHost, args, [options], in_process=experiment.ray.in_process,
            made_as=f"host of eval suite {suite.name!r}",
        )  # fmt: skip
    if hosts:  # built: the suite read, the servers up
        get([host.pid.remote() for host in hosts.values()])
    return hosts


def close_code_hosts(hosts: dict[str, Any]) -> None:
    """Stop each host's sandboxed workers, then the host."""
    for host in hosts.values():
        with contextlib.suppress(Exception):  # the run's outcome stands; workers end with the host
            get(host.close.remote(), timeout=30)
        kill(host)


def code_items(seed: int, gen: int, suite: Suite) -> list[tuple[str, int, str]]:
    """A code suite's episodes of generation ``gen``: ``(task id, seed, episode id)``, each task ``trials`` times."""
    purpose = f"eval:{suite.name}"
    out = []
    for i, task in enumerate(t for t in suite.tasks for _ in range(suite.config.trials)):
        out.append(
            (
                task.task_id,
                derive_seed(seed, "solve", gen, purpose, i),
                episode_id(seed, gen, purpose, i, task.task_id),
            )
        )
    return out


class HeldOutSuites:
    """A run's further suites and the hosts of its code suites: what the loop (:mod:`coevo.run.loop`) holds of them.

    Attributes:
        suites: the suites, read (empty until :meth:`start`).
        hosts: a code suite's host, by suite name.
        seed: the run's seed (a code suite's episodes' seeds and ids derive from it).
    """

    def __init__(self) -> None:
        self.suites: list[Suite] = []
        self.hosts: dict[str, Any] = {}
        self.seed = 0

    def start(self, experiment: Experiment, run: RunDir, *, new: bool) -> None:
        """Read and check the suites and keep them with the run (``new``), or read the run's copies; start the code suites' hosts.

        Raises:
            ArenaError: a suite cannot be read or played (naming it).
        """
        if new:
            self.suites = check_suites(experiment)
            keep_suites(run, self.suites)
        else:
            self.suites = kept_suites(run, experiment.eval.suites)
        self.hosts = start_code_hosts(experiment, self.suites, run.uri)
        self.seed = experiment.run.seed

    def ids(self) -> set[str]:
        """Every suite's task ids (never trained on)."""
        return {t.task_id for suite in self.suites for t in suite.tasks}

    def play(
        self,
        gen: int,
        play: Callable[[int, list[Any], str, int], list[Episode]],
        state_ref: Any,
    ) -> dict[str, list[Episode]]:
        """Each suite's episodes of ``gen``, by name: its tasks ``trials`` times with the policy ``state_ref`` holds.

        ``play(gen, tasks, purpose, repeats)`` plays ``coevo.task/1`` tasks on the
        run's Solver actors (the loop's ``_play``); a code suite's host plays its own.
        """
        out = {}
        for suite in self.suites:
            host = self.hosts.get(suite.name)
            if host is None:
                out[suite.name] = play(gen, suite.tasks, f"eval:{suite.name}", suite.config.trials)
            else:
                state = get(state_ref) if state_ref is not None else None
                items = code_items(self.seed, gen, suite)
                out[suite.name] = get(host.play.remote(items, state))
        return out

    def drain_usage(self) -> list[UsageRow]:
        """What the code suites' models (the Solver's, the user simulator's) spent since the last call."""
        return [row for host in self.hosts.values() for row in get(host.drain_usage.remote())]

    def close(self) -> None:
        """Stop the code suites' hosts."""
        close_code_hosts(self.hosts)
        self.hosts = {}
