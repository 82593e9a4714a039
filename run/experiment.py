"""Experiment files: TOML validated into :class:`Experiment`, with "did you mean" on a misspelt key.

A minimal file::

    [run]
    seed = 0
    generations = 12

    [solver]
    name = "linear-pg"
    actors = 2

    [curriculum]
    name = "target-band"

Every table and key is optional except what a role needs (see
``experiments/quickstart.toml`` for all of them with comments). ``--set
solver.actors=1`` overrides a key from the command line; the value is read as
TOML (``1``, ``"text"``, ``[1, 2]``, ``true``) or, failing that, as text.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from coevo.agents.registry import REGISTRY
from coevo.arena.bounded import MAX_JSON_BYTES, loads_toml, read_regular
from coevo.arena.difficulty import known_levels
from coevo.arena.errors import ArenaError, CoevoError, ExperimentError, RegistryError
from coevo.arena.examples import find_bundled
from coevo.arena.gamelog import RunDir
from coevo.arena.secrets import redact, redact_value
from coevo.arena.settings import (
    Settings,
    StrictNumbers,
    explain,
    merged,
    settings_model,
    validate_settings,
)
from coevo.curricula.base import CurriculumConfig
from coevo.curricula.objectives import ProposerConfig
from coevo.curricula.registry import curriculum_config, recorded_curriculum
from coevo.run.actors.capacity import MAX_ACTORS
from coevo.run.actors.resources import Placement, RoleResources
from coevo.run.generation.selfplay import WatchConfig
from coevo.run.handoff.transports import TrainerConfig, unreproducible_sampling
from coevo.run.tracking import TrackingConfig
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_validator,
)

__all__ = [
    "REDACTED_WHY",
    "BenchmarkConfig",
    "EvalConfig",
    "Experiment",
    "ExperimentError",
    "RayConfig",
    "RoleTable",
    "RunConfig",
    "SuiteConfig",
    "check_environment",
    "load_experiment",
    "parse_overrides",
    "ray_address",
    "recorded_experiment",
]


class _Table(StrictNumbers):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _a_path(value: str) -> str:
    """A path as a setting gives it: not empty, and no NUL character (no file system takes one)."""
    if not value:
        raise ValueError("a path is wanted here, not an empty text")
    if "\x00" in value:
        raise ValueError("a path cannot hold a NUL character (\\u0000)")
    return value


PathText = Annotated[str, AfterValidator(_a_path)]
"""A setting that names a file or folder (a local path or a URI): refused when empty or holding a NUL."""


SEED_MIN: Final = -(1 << 63)
"""The least seed (``run.seed``, ``eval.seed``): seeds are 64-bit integers, as numpy and torch take them."""
SEED_MAX: Final = (1 << 63) - 1
"""The greatest seed."""
MAX_GENERATIONS: Final = 1_000_000
"""The most generations a run (or ``eval.every``, ``stop_after_failing``) may count: weeks of the tiniest run."""
MAX_SUITE_TASKS: Final = 1_000_000
"""The most a suite's or a benchmark's ``limit`` may be (a suite is played in full at every evaluation)."""
MAX_EPISODE_STEPS: Final = 10_000
"""The most tool calls and messages a code-task episode may take (``max_steps``; τ²-bench's are tens)."""


class RunConfig(_Table):
    """``[run]``: the run as a whole.

    Attributes:
        name: a label for displays and summaries.
        seed: the seed everything derives from (same seed, same log): a 64-bit integer.
        generations: generations to run, at most a million (a generation takes seconds at
            least: a million is weeks of a tiny run).
        out: the run directory (any pyarrow filesystem URI), unless ``--out`` is given.
        rollouts: episodes per training task (k; their mean is the group baseline), at most
            4096 (GRPO-style groups are 4 to 64).
        chunk: episodes per Solver call (the unit of retry; independent of the actor count),
            at most 65,536.
        max_staleness: how far the policy may lag behind the rollouts. 0: strict order, each
            generation plays the policy learnt on the one before. 1 or more: the learner's
            step and the World model's update on generation n − 1 and the judging of n + 1 run
            beside the solving of n, which plays the policy learnt through n − 2
            (:mod:`coevo.run.generation.overlap`); with a ``[trainer]``, generation n plays once
            the trainer has trained through batch n − 1 − k.
        stop_grace: seconds a SIGTERM (a scheduler's, ``timeout``'s) waits for the generation
            in flight to commit before the run ends at once (:mod:`coevo.run.driver.stopping`).
        stop_after_failing: stop the run (exit 3, the cause said) once a role has failed every
            call in this many generations in a row; 0: never (the run goes on to the end); at
            most a million, as ``generations``.
        keep_checkpoints: the checkpoints kept, of the last generations (a run resumes from
            its last; ``coevo doctor --repair`` from an earlier one that has its checkpoint);
            older ones are removed once a newer one is committed, their log kept whole. 0:
            every generation's.

    Every whole number has an upper bound far above any real run's, so that a 4,000-digit
    number is refused here, naming the key, rather than met as an overflow or a
    ``MemoryError`` hours later (docs/security.md, "Integer settings are bounded").
    """

    name: str = "experiment"
    seed: int = Field(default=0, ge=SEED_MIN, le=SEED_MAX)
    generations: int = Field(default=10, ge=1, le=MAX_GENERATIONS)
    out: PathText = "runs/experiment"
    rollouts: int = Field(default=4, ge=1, le=4096)
    chunk: int = Field(default=64, ge=1, le=65_536)
    max_staleness: int = Field(default=0, ge=0, le=1000)
    stop_grace: float = Field(default=25.0, ge=0, le=3600)
    stop_after_failing: int = Field(default=2, ge=0, le=MAX_GENERATIONS)
    keep_checkpoints: int = Field(default=3, ge=0, le=MAX_GENERATIONS)


class RoleTable(_Table):
    """A role table (``[synthesizer]``, ``[judge]``, ``[solver]``, ``[world_model]``).

    Attributes:
        name: the registered role name (``coevo roles`` lists them).
        actors: Ray actors of this role (the learner and the World model are always one), at
            most :data:`~coevo.run.actors.capacity.MAX_ACTORS` and what the cluster holds.
        config: keyword arguments for the role's factory.
        resources: what each actor reserves (``[solver.resources]``: cpus, gpus, memory,
            custom; :mod:`coevo.run.actors.resources`).
        placement: ``default``, ``spread`` (different nodes where Ray can), or a placement
            group: ``pack``, ``strict-pack``, ``strict-spread``.
    """

    name: str
    actors: int = Field(default=1, ge=1, le=MAX_ACTORS)
    config: dict[str, Any] = Field(default_factory=dict)
    resources: RoleResources = Field(default_factory=RoleResources)
    placement: Placement = "default"

    @model_validator(mode="after")
    def _placement_reserves(self) -> RoleTable:
        # checked when the file is read: a placement group needs something to reserve
        if (
            self.placement in ("pack", "strict-pack", "strict-spread")
            and not self.resources.demand()
        ):
            raise ValueError(
                f"placement = {self.placement!r} reserves a placement group of one bundle per "
                "actor, which needs something to reserve: set resources.cpus (or gpus, memory, "
                'custom) in this table, or use placement = "spread"'
            )
        return self


SUITE_NAME: Final = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
"""What a further eval suite's ``name`` may be: lower-case letters, digits, ``_ . -`` (it names a file in the run directory)."""

SYNTHESIZED_SUITE: Final = "synthesized"
"""The name the synthesized held-out suite goes by beside further suites (``[[eval.suites]]`` may not take it)."""


class SuiteConfig(_Table):
    """``[[eval.suites]]``: a further held-out suite, played beside the synthesized one and never trained on.

    Exactly one of ``tasks`` and ``corpus``. A suite of ``coevo.codetask/1``
    records (``coevo import tau2``) is played by an LLM Solver, its tools in the
    sandbox and a user simulator playing the customer, as a ``[benchmark]`` run
    plays them; a Solver that cannot play code tasks is refused before the run
    starts (docs/arena.md#transfer-suites).

    Attributes:
        name: the suite's name in the log (``evals.suite``), analyze and the report.
        tasks: a JSON-lines file of world and task records: ``coevo.task/1`` (``coevo synth``,
            ``coevo mine``, ``coevo export``) or ``coevo.codetask/1`` (``coevo import tau2``).
        corpus: a corpus folder (``coevo corpus build``): its accepted tasks of ``split``.
        split: the corpus's side: ``eval``, its held-out worlds (the only side: a run may
            train on the other).
        trials: times each task is played at every evaluation (k of pass^k).
        limit: at most this many tasks (the file's first; a corpus's by task id), at most a
            million.
        code: for code tasks, folders put on the sandboxed workers' import path.
        user: for code tasks with a user scenario, the user simulator's settings.
        max_steps: for code tasks, tool calls and messages per episode before it ends with 0
            (at most 10,000).
        workers: for code tasks, sandboxed tool workers.
        seconds: for code tasks, the wall-clock allowance of one tool call (at most a day).
    """

    name: str = Field(pattern=SUITE_NAME)
    tasks: PathText | None = None
    corpus: PathText | None = None
    split: Literal["eval"] = "eval"
    trials: int = Field(default=1, ge=1, le=100)
    limit: int | None = Field(default=None, ge=1, le=MAX_SUITE_TASKS)
    code: list[PathText] = Field(default_factory=list)
    user: dict[str, Any] | None = None
    max_steps: int = Field(default=60, ge=1, le=MAX_EPISODE_STEPS)
    workers: int = Field(default=1, ge=1, le=64)
    seconds: float = Field(default=30.0, gt=0, le=86_400)

    @field_validator("tasks", "corpus")
    @classmethod
    def _expanded(cls, value: str | None) -> str | None:
        return None if value is None else str(Path(value).expanduser())

    @field_validator("code")
    @classmethod
    def _code_folders(cls, value: list[str]) -> list[str]:
        return [str(Path(p).expanduser()) for p in value]

    @model_validator(mode="after")
    def _one_source(self) -> SuiteConfig:
        if (self.tasks is None) == (self.corpus is None):
            raise ValueError(
                f"eval suite {self.name!r}: give exactly one of tasks (a JSON-lines file of task "
                'records) and corpus (a corpus folder, with split = "eval")'
            )
        return self

    def benchmark(self) -> BenchmarkConfig:
        """The suite as the ``[benchmark]`` settings its code tasks are played with."""
        assert self.tasks is not None
        return BenchmarkConfig(
            tasks=self.tasks,
            code=self.code,
            user=self.user,
            max_steps=self.max_steps,
            workers=self.workers,
            seconds=self.seconds,
        )


class EvalConfig(_Table):
    """``[eval]``: the held-out evaluation suite (fixed tasks, never trained on), and further suites.

    Attributes:
        every: run it every this many generations (and after the last), at most a million.
        levels: the levels it covers (1–5).
        per_level: tasks per level, at most 100,000 (each is played at every evaluation).
        seed: the seed of its proposals (kept apart from training seeds), a 64-bit integer.
        suites: further held-out suites (``[[eval.suites]]``), played at the same generations:
            a file of tasks, or a corpus's held-out split (transfer).
    """

    every: int = Field(default=2, ge=1, le=MAX_GENERATIONS)
    levels: list[int] = Field(default_factory=lambda: [1, 2, 3], min_length=1)
    per_level: int = Field(default=16, ge=1, le=100_000)
    seed: int = Field(default=10**6, ge=SEED_MIN, le=SEED_MAX)
    suites: list[SuiteConfig] = Field(default_factory=list)

    _levels_exist = field_validator("levels")(known_levels)

    @field_validator("suites")
    @classmethod
    def _distinct_names(cls, value: list[SuiteConfig]) -> list[SuiteConfig]:
        names = [s.name for s in value]
        for name in names:
            if name == SYNTHESIZED_SUITE:
                raise ValueError(
                    f"eval suite name {name!r} is the synthesized suite's: choose another"
                )
            if names.count(name) > 1:
                raise ValueError(f"two eval suites are named {name!r}: give each its own name")
        return value


class RayConfig(_Table):
    """``[ray]``: where to run. ``address`` (or ``--address``, or ``RAY_ADDRESS``) joins a cluster.

    Attributes:
        address: a cluster address; empty: start Ray on this machine.
        num_cpus: CPUs for a local Ray (empty: all).
        in_process: play every role in this process, without Ray: the same log, no worker
            processes, no restarts, placement or cluster (a debugger, tests;
            :mod:`coevo.run.actors.start`).
    """

    address: str = ""
    num_cpus: int | None = Field(default=None, ge=1, le=4096)
    in_process: bool = False


class BenchmarkConfig(_Table):
    """``[benchmark]``: the pool is a file of imported code tasks (``coevo import tau2``), played ``trials`` times each.

    A run with ``[benchmark]`` is an evaluation: no Synthesizer, curriculum or
    learner runs; each generation is one trial of every task; ``coevo analyze``
    gives pass^k (docs/benchmarks-import.md).

    Attributes:
        tasks: the JSONL file of world and task records (``coevo import tau2 ... --out FILE``).
        code: folders put on the sandboxed workers' import path (a τ²-bench checkout's ``src``).
        trials: times each task is played (k of pass^k); the run's generations.
        ids: play only these tasks (the benchmark's task id, ``provenance.task``, or the content id); empty: all.
        domains: play only tasks of these domains; empty: all.
        limit: play at most this many tasks (the first ones of the file, after the filters),
            at most a million.
        judge: ``static`` (only ``valid``) or ``replay`` (every Judge check, by replay in the
            sandbox) before the first trial; rejected tasks are not played.
        max_steps: tool calls and messages to the user per episode before it ends with 0
            (at most 10,000).
        workers: sandboxed tool workers per Solver actor.
        seconds: the wall-clock allowance of one tool call (at most a day).
        user: the user simulator's settings (those of every LLM role: ``provider``, ``model``,
            ``base_url``, ...); needed when a task has a user scenario.
    """

    tasks: PathText
    code: list[PathText] = Field(default_factory=list)
    trials: int = Field(default=4, ge=1, le=1000)
    ids: list[str] = Field(default_factory=list)
    domains: list[str] = Field(default_factory=list)
    limit: int | None = Field(default=None, ge=1, le=MAX_SUITE_TASKS)
    judge: Literal["static", "replay"] = "static"
    max_steps: int = Field(default=60, ge=1, le=MAX_EPISODE_STEPS)
    workers: int = Field(default=1, ge=1, le=64)
    seconds: float = Field(default=30.0, gt=0, le=86_400)
    user: dict[str, Any] | None = None

    def user_settings(self) -> Settings:
        """The user simulator's settings, validated by its role (``user`` must be set).

        Raises:
            ConfigError: a setting it does not take, or a value it refuses (naming the key).
        """
        from coevo.agents.llm.user import LLMUser  # lazy: the LLM SDKs, only for a benchmark run

        assert self.user is not None
        return validate_settings(
            settings_model(LLMUser, "LlmUser"),
            self.user,
            where="benchmark.user",
            owner="the user simulator",
        )

    @field_validator("tasks")
    @classmethod
    def _tasks_path(cls, value: str) -> str:
        return str(Path(value).expanduser())

    @field_validator("code")
    @classmethod
    def _code_folders(cls, value: list[str]) -> list[str]:
        return [str(Path(p).expanduser()) for p in value]


class Experiment(_Table):
    """A whole experiment file."""

    run: RunConfig = Field(default_factory=RunConfig)
    synthesizer: RoleTable = Field(default_factory=lambda: RoleTable(name="procedural"))
    judge: RoleTable = Field(default_factory=lambda: RoleTable(name="mechanical"))
    solver: RoleTable = Field(default_factory=lambda: RoleTable(name="linear-pg"))
    world_model: RoleTable = Field(default_factory=lambda: RoleTable(name="irt"))
    curriculum: SerializeAsAny[CurriculumConfig] = Field(default_factory=CurriculumConfig)
    proposer: ProposerConfig = Field(default_factory=ProposerConfig)
    watch: WatchConfig = Field(default_factory=WatchConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    ray: RayConfig = Field(default_factory=RayConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    trainer: TrainerConfig | None = None
    benchmark: BenchmarkConfig | None = None

    @field_validator("curriculum", mode="before")
    @classmethod
    def _the_named_curriculums_settings(cls, value: Any) -> Any:
        # the [curriculum] table is read by the curriculum it names (its own keys, no others)
        return curriculum_config(value) if isinstance(value, Mapping) else value

    @model_validator(mode="after")
    def _dynamic_sampling_needs_groups(self) -> Experiment:
        # a group of one episode never has rewards that differ: every round would be wasted
        if self.curriculum.dynamic_sampling and self.run.rollouts < 2:
            raise ValueError(
                "curriculum.dynamic_sampling = true keeps the groups whose rewards differ, and "
                f"run.rollouts = {self.run.rollouts} makes groups of one: set run.rollouts to 2 "
                "or more (4 is usual), or dynamic_sampling = false"
            )
        return self

    def public(self, **dump: Any) -> dict[str, Any]:
        """The experiment as JSON values with every secret taken out (:func:`~coevo.arena.secrets.redact_value`).

        What ``experiment.json``, MLflow's params and artifacts record. A key
        pasted into a setting (``extra_body``, a tag) is recorded as
        ``[redacted]``, so a resumed run sends that text in its place: keys belong
        in variables (``api_key_env``). ``dump`` goes to ``model_dump``.
        """
        return dict(redact_value(self.model_dump(mode="json", **dump)))

    def recorded_json(self) -> str:
        """What ``experiment.json`` holds: :meth:`public`, as indented JSON."""
        return json.dumps(self.public(), indent=1, ensure_ascii=False)

    def redacted_settings(self) -> list[str]:
        """The dotted keys whose values hold a secret, so that :meth:`public` records them otherwise."""
        found: list[str] = []

        def walk(path: str, given: Any, public: Any) -> None:
            if isinstance(given, dict) and isinstance(public, dict):
                for key, value in given.items():
                    walk(f"{path}.{key}" if path else str(key), value, public.get(redact(key)))
            elif isinstance(given, list) and isinstance(public, list):
                for i, (a, b) in enumerate(zip(given, public, strict=False)):
                    walk(f"{path}[{i}]", a, b)
            elif given != public:
                found.append(path)

        walk("", self.model_dump(mode="json"), self.public())
        return found

    def role_settings(self) -> dict[str, Settings]:
        """Each role table's settings, validated by its role (did-you-mean on a misspelt key).

        Raises:
            ExperimentError: an unknown role, or a setting it does not take.
        """
        out = {}
        for table in ROLE_TABLES:
            role: RoleTable = getattr(self, table)
            kind = table.replace("_", " ")
            try:
                info = REGISTRY.get(
                    role.name, among=lambda spec, kind=kind: spec.kind == kind, what=kind
                )
                if info.kind != kind:
                    raise ExperimentError(
                        f"{role.name!r} is a {info.kind}, not a {kind}; `coevo roles` lists the "
                        f"{kind}s"
                    )
                out[table] = info.validate(role.config, where=f"{table}.config")
            except CoevoError as exc:
                raise ExperimentError(f"{table}: {exc}") from exc
        return out


REDACTED_WHY: Final = (
    "they hold a key (docs/security.md#redaction): experiment.json, MLflow and the events record "
    "[redacted], and a resumed run sends [redacted] there; give keys in variables (api_key_env)"
)
"""What the ``settings_redacted`` event says of the settings :meth:`Experiment.redacted_settings` names."""

ROLE_TABLES: Final = ("synthesizer", "judge", "solver", "world_model")
"""The tables of an experiment that name a role."""


def _fields_at(model: type[BaseModel], path: Sequence[str | int]) -> list[str]:
    """The keys allowed where ``path`` points (for "did you mean")."""
    current: Any = model
    for part in path[:-1]:
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return []
        current = fields[part].annotation
        # an optional table (``[trainer]``, ``[benchmark]``): the model inside ``X | None``
        inner = [a for a in getattr(current, "__args__", ()) if hasattr(a, "model_fields")]
        if not hasattr(current, "model_fields") and len(inner) == 1:
            current = inner[0]
    fields = getattr(current, "model_fields", None)
    return list(fields) if fields else []


def _dotted_keys(model: type[BaseModel] = Experiment, prefix: str = "") -> list[str]:
    """Every key of an experiment as a dotted path (``run.generations``), for "did you mean"."""
    keys = []
    for name, info in model.model_fields.items():
        inner = info.annotation
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            keys += _dotted_keys(inner, f"{prefix}{name}.")
        else:
            keys.append(f"{prefix}{name}")
    return keys


def _closest_key(location: Sequence[str | int]) -> str | None:
    """The experiment key an unknown ``location`` most likely meant: the same last name elsewhere, or a close spelling."""
    dotted = ".".join(map(str, location))
    keys = _dotted_keys()
    same_name = [k for k in keys if k.rsplit(".", 1)[-1] == str(location[-1])]
    if same_name:
        return same_name[0]
    close = difflib.get_close_matches(dotted, keys, n=1, cutoff=0.75)
    return close[0] if close else None


def _explain(error: ValidationError, heading: str) -> str:
    lines = explain(error, "", lambda location: _fields_at(Experiment, [*location, ""]))
    for i, problem in enumerate(error.errors()):
        # explain() suggests a sibling; a key in the wrong table (`generations` for `run.generations`)
        # is found by its full dotted name
        if problem["type"] == "extra_forbidden" and "did you mean" not in lines[i]:
            closest = _closest_key(problem["loc"])
            if closest:
                lines[i] = lines[i].replace(" (allowed", f"; did you mean {closest!r}? (allowed", 1)
    return f"{heading}:\n  " + "\n  ".join(lines)


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``["solver.actors=1", ...]`` → a nested mapping.

    Raises:
        ExperimentError: an item is not ``key=value``.
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ExperimentError(f"--set wants key=value (e.g. solver.actors=2), not {item!r}")
        try:
            value = loads_toml(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text
        except ValueError as exc:  # TOML, but not a value coevo takes (a 5,000-digit integer)
            raise ExperimentError(f"--set {key.strip()}: {exc}") from None
        except RecursionError:
            raise ExperimentError(f"--set {key.strip()}: the value is nested too deep") from None
        node = out
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ExperimentError(f"--set {key}: {part} is set both as a table and a value")
        node[parts[-1]] = value
    return out


def overridden(data: Mapping[str, Any], items: Sequence[str]) -> dict[str, Any]:
    """``data`` with each ``--set`` item applied in turn: its value replaces what is at its key.

    A table value replaces the whole table (``--set 'solver.config={max_calls=3}'``
    leaves no other setting of the file's); a scalar sets one key and leaves
    the rest of its table. Setting a role table's ``name`` to another role
    drops the file's ``config`` for that table (those settings were the old
    role's), unless an item sets that ``config`` too:
    ``--set solver.name=claude`` swaps the Solver.

    Raises:
        ExperimentError: an item is not ``key=value``, or sets a key inside a value.
    """
    out = copy.deepcopy(dict(data))
    for item in items:
        value: Any = parse_overrides([item])
        path = item.partition("=")[0].strip().split(".")
        for part in path:
            value = value[part]
        node = out
        for part in path[:-1]:
            child = node.get(part, {})
            if not isinstance(child, dict):
                raise ExperimentError(f"--set {item}: {part} is a value, not a table")
            node[part] = child
            node = child
        role_swapped = (
            len(path) == 2
            and path[0] in ROLE_TABLES
            and path[1] == "name"
            and node.get("name") != value
            and not any(
                other.split("=", 1)[0].strip() in (f"{path[0]}.config", path[0])
                or other.startswith(f"{path[0]}.config.")
                for other in items
            )
        )
        if role_swapped:
            node.pop("config", None)  # the file's settings were the old role's
        node[path[-1]] = value
    return out


def _is_bundled(name: str) -> bool:
    try:
        find_bundled(name, kind="experiment")
    except RegistryError:
        return False
    return True


def _experiment_file(source: str | Path) -> Path:
    """The file ``source`` names: the path if it exists, else the bundled experiment of that name.

    Raises:
        ExperimentError: neither (the message names the closest bundled experiment and lists them).
    """
    path = Path(source)
    if path.is_file():
        return path
    if path.exists() and not _is_bundled(str(source)):
        raise ExperimentError(f"{path} is a directory, not an experiment file")
    try:  # a name (even one a folder here shares, such as a run directory): the bundled file
        return find_bundled(str(source), kind="experiment").path
    except RegistryError as exc:
        raise ExperimentError(f"{path}: no such experiment file, and {exc}") from None


def load_experiment(
    source: str | Path | Mapping[str, Any], overrides: Sequence[str] = ()
) -> Experiment:
    """Read and validate an experiment, with ``--set`` overrides.

    Args:
        source: a TOML file's path; else the name of a bundled experiment
            (``quickstart``: :func:`~coevo.arena.examples.bundled` lists them); or the parsed mapping.
            A path that exists wins over a name.
        overrides: ``--set`` items, ``key=value``.

    Raises:
        ExperimentError: the file is missing (and no bundled experiment has that name: the
            message names the closest), not TOML, or not a valid experiment
            (every problem listed, an unknown key with the closest known one).
    """
    if isinstance(source, Mapping):
        data, label = dict(source), "the experiment"
    else:
        path = _experiment_file(source)
        label = str(path)
        try:
            # a link the user made is followed (their own file); a device, a FIFO, a huge file is not read
            text = read_regular(path.resolve(), limit=MAX_JSON_BYTES, what=str(path))
            data = loads_toml(text.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ExperimentError(
                f"{path} is not a TOML file: it is not UTF-8 text (byte {exc.start}); "
                "pass an experiment file, or the name of a bundled one such as quickstart"
            ) from exc
        except ValueError as exc:  # tomllib.TOMLDecodeError, or an integer too long to read
            raise ExperimentError(f"{path} is not valid TOML: {exc}") from exc
        except RecursionError:
            raise ExperimentError(f"{path} is nested too deep to be an experiment") from None
        except OSError as exc:  # FileRefusedError too: a FIFO, a device, over the limit
            raise ExperimentError(f"{path} cannot be read: {exc}") from exc
    # role tables start from their defaults, so "--set solver.actors=2" works without a [solver] table
    defaults = {key: {"name": getattr(Experiment(), key).name} for key in ROLE_TABLES}
    data = merged(defaults, data)
    if not overrides:
        return _validated(data, label)
    _validated(data, label)  # the file's own mistakes are the file's
    # what fails now is the overrides' doing: the message names them, not the file
    many = len(overrides) > 1
    shown = [o if len(o) <= 120 else f"{o[:60]}... ({len(o)} characters)" for o in overrides]
    return _validated(
        overridden(_tracking_expanded(data), overrides),
        f"the override{'s' * many} --set " + " --set ".join(shown),
        what="valid" if not many else "valid together",
        verb="are" if many else "is",
    )


def _tracking_expanded(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``[tracking]``'s short forms written out (so an override adds to them)."""
    if "tracking" not in data:
        return data
    return {**data, "tracking": TrackingConfig.expanded(data["tracking"])}


def _validated(
    data: dict[str, Any], label: str, what: str = "a valid experiment", verb: str = "is"
) -> Experiment:
    """``data`` read into an :class:`Experiment`; errors say ``{label} {verb} not {what}``.

    Raises:
        ExperimentError: every problem, each naming its key, with "did you mean".
    """
    data = dict(data)
    bench = data.get("benchmark")
    trials = bench.get("trials", 4) if isinstance(bench, Mapping) else None
    if isinstance(bench, Mapping) and isinstance(trials, int) and trials >= 1:
        run = dict(data.get("run") or {})
        if run.get("generations", trials) != trials:
            raise ExperimentError(
                f"{label} {verb} not {what}:\n  run.generations = {run['generations']}, but a "
                f"[benchmark] run's generations are its trials (benchmark.trials = {trials}): "
                "remove run.generations"
            )
        data["run"] = run | {"generations": trials}
    try:
        # read first on its own, so that its errors name the curriculum's own keys
        data["curriculum"] = curriculum_config(data.get("curriculum", {}))
        experiment = Experiment.model_validate(data)
    except CoevoError as exc:
        raise ExperimentError(f"{label} {verb} not {what}:\n  {exc}") from exc
    except ValidationError as exc:
        raise ExperimentError(_explain(exc, f"{label} {verb} not {what}")) from exc
    try:
        experiment.role_settings()
        _trainable(experiment)
        _benchmark(experiment)
        _in_process(experiment)
    except ExperimentError as exc:
        raise ExperimentError(f"{label} {verb} not {what}:\n  {exc}") from exc
    return experiment


def _benchmark(experiment: Experiment) -> None:
    """With ``[benchmark]``: an LLM Solver, no trainer, a valid user simulator.

    Raises:
        ExperimentError: what does not fit, and how to fix it.
    """
    bench = experiment.benchmark
    if bench is None:
        return
    factory = REGISTRY.get(experiment.solver.name).factory
    if not callable(getattr(factory, "load_adapter", None)):
        raise ExperimentError(
            f"[benchmark] pools are played by a model: the solver must be an LLM Solver "
            f"(llm-solver or claude), not {experiment.solver.name!r}"
        )
    if experiment.trainer is not None:
        raise ExperimentError(
            "[benchmark] runs evaluate; they hand nothing to a trainer: remove [trainer]"
        )
    if bench.user is not None:
        try:
            bench.user_settings()
        except CoevoError as exc:
            raise ExperimentError(str(exc)) from exc


def _in_process(experiment: Experiment) -> None:
    """With ``[ray] in_process``: nothing that needs Ray (a cluster, the Ray queue's hand-off).

    Raises:
        ExperimentError: what needs Ray, and the way on.
    """
    if not experiment.ray.in_process:
        return
    if experiment.ray.address:
        raise ExperimentError(
            "ray.in_process plays every role in this process, ray.address joins a cluster: "
            "choose one"
        )
    if experiment.trainer is not None and experiment.trainer.transport == "ray-queue":
        raise ExperimentError(
            'trainer.transport = "ray-queue" hands batches over a Ray queue, and ray.in_process runs '
            'without Ray: use trainer.transport = "folder", or leave ray.in_process out'
        )


def _trainable(experiment: Experiment) -> None:
    """With a ``[trainer]``, the Solver must be one a trainer can give a new policy (a served model).

    Raises:
        ExperimentError: it is not (naming the Solvers that are).
    """
    if experiment.trainer is None:
        return
    factory = REGISTRY.get(experiment.solver.name).factory
    settings = experiment.role_settings()["solver"]
    if not callable(getattr(factory, "load_adapter", None)):
        raise ExperimentError(
            f"[trainer] hands the Solver's episodes to an external trainer, which trains a "
            f"served model: the solver must be an LLM Solver (llm-solver), not "
            f"{experiment.solver.name!r}; or remove [trainer]"
        )
    if (getattr(settings, "provider", None) or factory.default_provider) != "openai":
        raise ExperimentError(
            f"[trainer] trains the model your server serves: the solver {experiment.solver.name!r} "
            'must use an OpenAI-compatible server (solver.config.provider = "openai", e.g. '
            "vLLM), not Anthropic's API, whose models no trainer of yours can change"
        )
    _reproducible(experiment)


def _reproducible(experiment: Experiment) -> None:
    """With a ``[trainer]``, the trained rollouts must be sampled from a distribution a trainer computes.

    The Solver's, and a self-play Synthesizer's (its proposals are rows of the batch
    too): what their calls send (:meth:`~coevo.agents.llm.role.LLMRole.sent_sampling`,
    the neutral values filled in) must hold no parameter of
    :func:`~coevo.run.handoff.transports.unreproducible_sampling`.

    Raises:
        ExperimentError: naming each setting, its value, and what to set.
    """
    settings = experiment.role_settings()
    lines = []
    for table in ("solver", "synthesizer"):
        factory = REGISTRY.get(getattr(experiment, table).name).factory
        role = settings[table]
        sent_by = getattr(factory, "sent_sampling", None)
        if not callable(sent_by) or (
            table == "synthesizer" and not getattr(role, "self_play", False)
        ):
            continue
        extra = getattr(role, "extra_body", None) or {}
        for name, value, what in unreproducible_sampling(sent_by(role)):
            where = "extra_body" if name in extra else "sampling"
            lines.append(f"{table}.config.{where}.{name} = {value!r} {what}")
    if lines:
        raise ExperimentError(
            "[trainer] trains the policy on the log-probabilities its rollouts were sampled "
            "with, which a trainer computes as log_softmax(logits / temperature), nothing "
            "truncated or penalised; these settings sample from another distribution:\n    "
            + "\n    ".join(lines)
        )


def ray_address(address: str | None, experiment: Experiment) -> str | None:
    """The cluster a run joins: ``--address``, else ``[ray].address``, else ``RAY_ADDRESS``; None: a local Ray."""
    return address or experiment.ray.address or os.environ.get("RAY_ADDRESS") or None


def recorded_experiment(run_dir: str) -> Experiment:
    """The experiment a run directory was started with (its ``experiment.json``).

    Raises:
        ExperimentError: there is no run there, or its record is not a valid experiment.
    """
    run = RunDir(run_dir)
    if not run.exists("experiment.json"):
        raise ExperimentError(run.no_run(run_dir))
    label = f"{run_dir}/experiment.json"
    try:
        data = run.read_json("experiment.json")
        if not isinstance(data, dict) or not isinstance(data.get("curriculum", {}), dict):
            raise ValueError("it is not an experiment record (a JSON object of tables)")
        data["curriculum"] = recorded_curriculum(data.get("curriculum", {}))
        return Experiment.model_validate(data)
    except ValidationError as exc:
        raise ExperimentError(_explain(exc, f"{label} is not a valid experiment")) from exc
    except (ValueError, CoevoError) as exc:
        raise ExperimentError(f"{label} cannot be read: {exc}") from exc


def check_environment(experiment: Experiment) -> None:
    """Fail before anything starts when a role is unknown, is given a setting it does not take, needs an unset variable, or fails its start-up check (an LLM role's server down, or not serving its model).

    Raises:
        ArenaError: naming the role, and the setting or the variable to fix.
    """
    try:
        settings = experiment.role_settings()
    except CoevoError as exc:
        raise ArenaError(str(exc)) from exc
    for table, role_settings in settings.items():
        role: RoleTable = getattr(experiment, table)
        try:
            needed = REGISTRY.get(role.name).env(role_settings).required
        except CoevoError as exc:
            raise ArenaError(f"the {table} {role.name!r}: {exc}") from None
        for variable in needed:
            if not os.environ.get(variable):
                raise ArenaError(
                    f"the {table} {role.name!r} needs {variable}: set it in the environment "
                    "(on every node, for a cluster) and run again"
                )
    for table, role_settings in settings.items():
        if experiment.benchmark is not None and table != "solver":
            continue  # a benchmark run makes no other role
        try:
            REGISTRY.get(getattr(experiment, table).name).preflight(role_settings)
        except CoevoError as exc:
            raise ArenaError(str(exc)) from None
    if experiment.benchmark is not None and experiment.benchmark.user is not None:
        from coevo.agents.llm.user import LLMUser  # lazy: the LLM SDKs, only for a benchmark run

        try:
            LLMUser.preflight(experiment.benchmark.user_settings())
        except CoevoError as exc:
            raise ArenaError(f"benchmark.user: {exc}") from None
