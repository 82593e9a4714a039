"""Metrics where users already look: each generation's figures to TensorBoard and MLflow.

``[tracking]`` in an experiment file (off by default: ``tensorboard = true``,
``mlflow = true``) turns trackers on. After each committed generation the
run hands its :class:`~coevo.run.loop.GenerationReport` to
:class:`Tracking`, which queues it and returns at once; a background thread
reads that generation's parts of the game log (only the columns it needs),
computes :data:`METRICS` (step = the generation) and sends them; at the end,
the report's figures (:mod:`coevo.arena.analysis.report`). A tracker's
first error disables it and becomes a ``tracking_failed`` event: the run, its
log and its exit status go on as without tracking. ``RUN_DIR/tracking.json``
(data only) lets ``coevo resume`` continue the same MLflow run and TensorBoard
directory. See ``docs/tracking.md``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import queue
import re
import struct
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final
from urllib.parse import urlparse

from coevo.arena.analysis.report import render_report
from coevo.arena.calibration import expected_calibration_error
from coevo.arena.errors import ExperimentError
from coevo.arena.gamelog import GameLog, RunDir
from coevo.arena.settings import StrictNumbers
from pydantic import ConfigDict, Field, field_validator

if TYPE_CHECKING:  # both import this module (an experiment has a [tracking] table)
    from coevo.run.experiment import Experiment
    from coevo.run.loop import GenerationReport

__all__ = [
    "METRICS",
    "MlflowConfig",
    "TaskLevels",
    "TensorBoardConfig",
    "Tracking",
    "TrackingConfig",
    "generation_metrics",
    "report_figures",
    "report_metrics",
    "require_installed",
]

RECORD: Final = "tracking.json"
"""The file in the run directory that keeps each tracker's destination and progress."""

_FORMAT: Final = "coevo.tracking/1"
_QUEUE_SIZE: Final = 64
_INTERRUPTED_WAIT: Final = 10.0
_ERROR_CHARS: Final = 500


class _Table(StrictNumbers):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _shorthand(value: Any, text_key: str) -> Any:
    """``true``/``false``, a string (``text_key``) or a table; a table without ``enabled`` turns it on."""
    if isinstance(value, bool):
        return {"enabled": value}
    if isinstance(value, str):
        return {"enabled": True, text_key: value}
    if isinstance(value, Mapping) and "enabled" not in value:
        return {"enabled": True, **value}
    if not isinstance(value, Mapping | StrictNumbers):
        raise ValueError(f"wants true, false, the {text_key} as text, or a table")
    return value


class TensorBoardConfig(_Table):
    """``[tracking.tensorboard]``: TensorBoard event files.

    ``tensorboard = true`` turns it on, ``tensorboard = "DIR"`` also names the
    directory, and so does a table (which turns it on unless it says
    ``enabled = false``).

    Attributes:
        enabled: write event files.
        logdir: this run's event-file directory (default: ``RUN_DIR/tensorboard``; needed
            when the run directory is not on this machine).
    """

    enabled: bool = False
    logdir: str | None = None


class MlflowConfig(_Table):
    """``[tracking.mlflow]``: an MLflow run per coevo run.

    ``mlflow = true`` turns it on, ``mlflow = "URI"`` also names the tracking
    URI, and so does a table (which turns it on unless it says ``enabled = false``).

    Attributes:
        enabled: send to MLflow.
        uri: the tracking URI (default: ``MLFLOW_TRACKING_URI``, else the file store
            ``RUN_DIR/mlruns``).
        experiment: the MLflow experiment (default: ``run.name``), created when missing.
        run_name: the MLflow run's name (default: the run directory's base name).
        tags: more tags for the MLflow run.
    """

    enabled: bool = False
    uri: str | None = None
    experiment: str | None = None
    run_name: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)


class TrackingConfig(_Table):
    """``[tracking]``: experiment trackers that get each generation's metrics (all off by default).

    Attributes:
        tensorboard: TensorBoard event files (see :class:`TensorBoardConfig`).
        mlflow: an MLflow run (see :class:`MlflowConfig`).
        figures: at the end of the run, send the report's figures too.
        timeout: seconds the end of the run waits for the trackers (queued generations,
            the figures) before it goes on without them (at most 10 after an error or Ctrl-C).
    """

    tensorboard: TensorBoardConfig = Field(default_factory=TensorBoardConfig)
    mlflow: MlflowConfig = Field(default_factory=MlflowConfig)
    figures: bool = True
    timeout: float = Field(default=60.0, gt=0, le=3600)

    @field_validator("tensorboard", mode="before")
    @classmethod
    def _tensorboard_shorthand(cls, value: Any) -> Any:
        return _shorthand(value, "logdir")

    @field_validator("mlflow", mode="before")
    @classmethod
    def _mlflow_shorthand(cls, value: Any) -> Any:
        return _shorthand(value, "uri")

    @property
    def enabled(self) -> bool:
        """Whether any tracker is on."""
        return self.tensorboard.enabled or self.mlflow.enabled

    @staticmethod
    def expanded(table: Any) -> Any:
        """``table`` with each tracker's short form written as its table (``mlflow = "URI"`` → ``{enabled, uri}``).

        The experiment file and ``--set`` overrides are merged key by key, so both
        are expanded first: ``--set tracking.mlflow.experiment=x`` then adds to a
        file's ``mlflow = "http://..."`` instead of replacing it. What is not a
        valid short form is left as it is, for validation to report.
        """
        if not isinstance(table, Mapping):
            return table
        out = dict(table)
        for key, text_key in (("tensorboard", "logdir"), ("mlflow", "uri")):
            if key in out:
                with contextlib.suppress(ValueError):
                    out[key] = _shorthand(out[key], text_key)
        return out


METRICS: Final[Mapping[str, str]] = {
    "train/success": "mean reward of the training episodes (`generations.train_success`)",
    "train/success_level_<L>": "mean reward of the training episodes of level-L tasks (failed episodes left out)",
    "train/episodes": "training episodes played (`train_episodes`)",
    "train/tasks": "distinct tasks trained on (`trained_tasks`)",
    "train/level": "mean level of the tasks trained on (`trained_level`)",
    "eval/success": "mean reward on the held-out suite (`eval_success`), when it was played",
    "eval/success_level_<L>": "the same, of its level-L tasks (the `evals` table)",
    "curriculum/frontier": "the curriculum's level after the generation (`frontier`)",
    "curriculum/accepted_level": "mean level of the accepted tasks (`accepted_level`)",
    "proposals/proposed": "tasks proposed (`proposed`)",
    "proposals/accepted": "of those, accepted (`accepted`)",
    "proposals/rejected": "of those, rejected (`rejected`)",
    "proposals/mutations": "proposals that were mutations (`mutations`)",
    "proposals/acceptance_rate": "accepted / proposed",
    "rejections/<check>": "rejected proposals that failed the check (`error`: not judged at all); "
    "the `rejections` column keeps the top five",
    "pool/worlds": "distinct worlds among the generation's accepted tasks",
    "pool/domains": "distinct domains among them",
    "pool/families": "distinct task families among them",
    "calibration/brier": "the World model's Brier score on the generation's fresh tasks (`brier`)",
    "calibration/ece": "its expected calibration error on the same episodes",
    "learner/loss": "the learner's objective after its step (`updates.loss`), when it has one",
    "learner/entropy": "the policy's mean entropy (`updates.entropy`), when reported",
    "failures": "role failures recorded (`failures`)",
    "throughput/seconds": "wall time of the generation",
    "throughput/episodes_per_second": "training episodes per second of solving",
    "throughput/<phase>_seconds": "wall time of each phase (proposals, predict, solve, learn, "
    "world_model, eval, commit)",
    "spend/calls": "API calls of the roles that report usage (the `usage` table)",
    "spend/tokens": "their input and output tokens",
    "spend/dollars": "their cost at list price",
    "spend/<role>/tokens": "tokens per role",
    "spend/<role>/dollars": "dollars per role",
}
"""Every metric sent, by name (``<L>``, ``<check>``, ``<phase>``, ``<role>`` stand for each one there is).

Every name but ``throughput/*`` is computed from the game log alone, so a
generation sent after a resume has them all.
"""

_ROW_METRICS: Final = {
    "train/success": "train_success",
    "train/episodes": "train_episodes",
    "train/tasks": "trained_tasks",
    "train/level": "trained_level",
    "eval/success": "eval_success",
    "curriculum/frontier": "frontier",
    "curriculum/accepted_level": "accepted_level",
    "proposals/proposed": "proposed",
    "proposals/accepted": "accepted",
    "proposals/rejected": "rejected",
    "proposals/mutations": "mutations",
    "calibration/brier": "brier",
    "failures": "failures",
}

_NAME: Final = re.compile(r"[^\w\-./ ]")


def _key(name: str) -> str:
    """A metric name both trackers take (MLflow allows letters, digits, ``_-./`` and spaces)."""
    return _NAME.sub("_", name)


class TaskLevels:
    """Task id → level, filled generation by generation from the ``tasks`` parts (each read once).

    A generation trains on tasks proposed in earlier ones; this keeps their
    levels so that no generation re-reads the whole ``tasks`` table.
    """

    def __init__(self) -> None:
        self.of: dict[str, int | None] = {}
        self.through = -1

    def up_to(self, log: GameLog, gen: int) -> dict[str, int | None]:
        """The levels of every task logged in generations up to ``gen``."""
        for earlier in range(self.through + 1, gen + 1):
            tasks = log.read("tasks", gens=[earlier], columns=["task_id", "level"])
            for task_id, level in zip(
                tasks.column("task_id").to_pylist(), tasks.column("level").to_pylist(), strict=True
            ):
                self.of.setdefault(task_id, level)
            self.through = earlier
        return self.of


def _by_level(levels: list[int | None], rewards: list[int], prefix: str) -> dict[str, float]:
    sums: dict[int, list[int]] = defaultdict(list)
    for level, reward in zip(levels, rewards, strict=True):
        if level is not None:
            sums[level].append(reward)
    return {f"{prefix}{level}": sum(r) / len(r) for level, r in sorted(sums.items())}


def generation_metrics(
    log: GameLog, gen: int, levels: TaskLevels | None = None
) -> dict[str, float]:
    """The metrics of :data:`METRICS` that come from the game log, for committed generation ``gen``.

    Reads only that generation's parts (and, for the levels of the tasks it
    trained on, the ``task_id`` and ``level`` columns of earlier ``tasks``
    parts, once per ``levels`` cache).

    Args:
        log: the run's game log.
        gen: a committed generation.
        levels: a cache kept across calls (one per run); None reads afresh.

    Raises:
        LogError: the generation is not committed, or its manifest cannot be read.
    """
    levels = TaskLevels() if levels is None else levels
    log.manifest(gen)  # a generation that is not committed (or whose manifest is damaged) says so
    out: dict[str, float] = {}
    (row,) = log.read("generations", gens=[gen], columns=list(_ROW_METRICS.values())).to_pylist()
    for name, column in _ROW_METRICS.items():
        if row[column] is not None:
            out[name] = float(row[column])
    if row["proposed"]:
        out["proposals/acceptance_rate"] = row["accepted"] / row["proposed"]

    episodes = log.read(
        "episodes", gens=[gen], columns=["episode_id", "task_id", "purpose", "reward", "failure"]
    ).to_pylist()
    failed = {e["episode_id"] for e in episodes if e["failure"]}  # never played: no measure
    train = [e for e in episodes if e["purpose"] == "train" and not e["failure"]]
    level_of = levels.up_to(log, gen)
    out.update(
        _by_level(
            [level_of.get(e["task_id"]) for e in train],
            [e["reward"] for e in train],
            "train/success_level_",
        )
    )
    evals = [
        e
        for e in log.read(
            "evals", gens=[gen], columns=["episode_id", "level", "reward"]
        ).to_pylist()
        if e["episode_id"] not in failed
    ]
    out.update(
        _by_level([e["level"] for e in evals], [e["reward"] for e in evals], "eval/success_level_")
    )

    verdicts = log.read(
        "verdicts", gens=[gen], columns=["task_id", "accepted", "failed"]
    ).to_pylist()
    checks = Counter(
        name for v in verdicts if not v["accepted"] for name in (v["failed"] or ["error"])
    )
    out.update({_key(f"rejections/{check}"): float(n) for check, n in sorted(checks.items())})
    accepted = {v["task_id"] for v in verdicts if v["accepted"]}
    tasks = log.read(
        "tasks", gens=[gen], columns=["task_id", "world_id", "domain", "family"]
    ).to_pylist()
    pool = [t for t in tasks if t["task_id"] in accepted]
    for name, column in (("worlds", "world_id"), ("domains", "domain"), ("families", "family")):
        out[f"pool/{name}"] = float(len({t[column] for t in pool if t[column] is not None}))

    predicted = {
        p["task_id"]: p["p"]
        for p in log.read("predictions", gens=[gen], columns=["task_id", "p"]).to_pylist()
    }
    pairs = [(predicted[e["task_id"]], e["reward"]) for e in train if e["task_id"] in predicted]
    if pairs:
        out["calibration/ece"] = expected_calibration_error(
            [p for p, _ in pairs], [o for _, o in pairs]
        )

    for update in log.read("updates", gens=[gen], columns=["loss", "entropy"]).to_pylist():
        for name in ("loss", "entropy"):
            if update[name] is not None:
                out[f"learner/{name}"] = float(update[name])

    usage = log.read(
        "usage", gens=[gen], columns=["role", "calls", "input_tokens", "output_tokens", "dollars"]
    ).to_pylist()
    if usage:
        out["spend/calls"] = float(sum(u["calls"] for u in usage))
        out["spend/tokens"] = float(sum(u["input_tokens"] + u["output_tokens"] for u in usage))
        out["spend/dollars"] = float(sum(u["dollars"] for u in usage))
        for role in sorted({u["role"] for u in usage}):
            mine = [u for u in usage if u["role"] == role]
            out[_key(f"spend/{role}/tokens")] = float(
                sum(u["input_tokens"] + u["output_tokens"] for u in mine)
            )
            out[_key(f"spend/{role}/dollars")] = float(sum(u["dollars"] for u in mine))
    return out


def report_metrics(report: GenerationReport) -> dict[str, float]:
    """The wall-clock metrics of :data:`METRICS` (``throughput/*``), which only the live report has."""
    out = {
        "throughput/seconds": float(report.seconds),
        "throughput/episodes_per_second": float(report.episodes_per_second),
    }
    for phase, seconds in report.phases.items():
        out[_key(f"throughput/{phase}_seconds")] = float(seconds)
    return out


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:_ERROR_CHARS]


def _png_size(png: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's header."""
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)


def report_figures(run_dir: str, folder: Path) -> dict[str, bytes]:
    """Render the run's report into ``folder`` (``report.html`` and one PNG per figure); returns id → PNG."""
    images = render_report([run_dir], str(folder / "report.html"))
    for key, png in images.items():
        (folder / f"{key}.png").write_bytes(png)
    return images


class _Tracker:
    """One destination: opened once, given each generation's scalars, the figures at the end, closed.

    ``record`` is what ``tracking.json`` keeps of it: its destination, its ids
    and ``next_gen``, the first generation it has not been sent yet.
    """

    name: ClassVar[str]

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record
        self.error: str | None = None

    @property
    def next_gen(self) -> int:
        """The first generation not sent yet."""
        return int(self.record.get("next_gen", 0))

    def where(self) -> str:
        """Where to look, in one line."""
        raise NotImplementedError

    def open(self, *, resumed: bool) -> None:
        """Connect (on a resume: to what ``record`` names)."""
        raise NotImplementedError

    def scalars(self, gen: int, metrics: Mapping[str, float]) -> None:
        """Send one generation's metrics."""
        raise NotImplementedError

    def figures(self, gen: int, images: Mapping[str, bytes], folder: Path) -> None:
        """Send the report's figures (``folder`` holds them as files, with ``report.html``)."""
        raise NotImplementedError

    def close(self, status: str) -> None:
        """End: ``FINISHED``, ``FAILED`` or ``KILLED``."""
        raise NotImplementedError

    def abandon(self) -> None:
        """Let go after an error (best effort)."""


class _TensorBoard(_Tracker):
    name = "tensorboard"

    def where(self) -> str:
        return f"tensorboard --logdir {self.record['logdir']}"

    def open(self, *, resumed: bool) -> None:
        # optional: the tracking extra, imported only when TensorBoard is configured
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._event, self._summary = event_pb2.Event, summary_pb2.Summary
        # a new event file in the same directory: TensorBoard shows a resumed run as one run
        self._writer = EventFileWriter(self.record["logdir"], max_queue_size=64, flush_secs=30)

    def _write(self, gen: int, values: list[Any]) -> None:
        self._writer.add_event(
            self._event(step=gen, wall_time=time.time(), summary=self._summary(value=values))
        )
        self._writer.flush()

    def scalars(self, gen: int, metrics: Mapping[str, float]) -> None:
        values = [self._summary.Value(tag=k, simple_value=v) for k, v in metrics.items()]
        self._write(gen, values)

    def figures(self, gen: int, images: Mapping[str, bytes], folder: Path) -> None:
        values = []
        for key, png in images.items():
            width, height = _png_size(png)
            image = self._summary.Image(
                height=height, width=width, colorspace=4, encoded_image_string=png
            )
            values.append(self._summary.Value(tag=f"figures/{key}", image=image))
        self._write(gen, values)

    def close(self, status: str) -> None:
        self._writer.close()

    def abandon(self) -> None:
        writer = getattr(self, "_writer", None)
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()


class _Mlflow(_Tracker):
    name = "mlflow"

    def __init__(
        self,
        record: dict[str, Any],
        *,
        experiment: str,
        run_name: str,
        tags: Mapping[str, str],
        params: Mapping[str, str],
        recorded: str,
    ) -> None:
        super().__init__(record)
        self.experiment = experiment
        self.run_name = run_name
        self.tags = dict(tags)
        self.params = dict(params)
        self.recorded = recorded

    def where(self) -> str:
        return (
            f"MLflow run {self.record.get('run_id')} (experiment {self.experiment!r}) "
            f"at {self.record['uri']}"
        )

    def _experiment_id(self) -> str:
        found = self._client.get_experiment_by_name(self.experiment)
        if found is not None:
            return str(found.experiment_id)
        try:
            return str(self._client.create_experiment(self.experiment))
        except Exception:
            # another run created it in the meantime (seeds started together)
            found = self._client.get_experiment_by_name(self.experiment)
            if found is None:
                raise
            return str(found.experiment_id)

    def open(self, *, resumed: bool) -> None:
        # optional: the tracking extra, imported only when MLflow is configured
        from mlflow.entities import Metric, Param
        from mlflow.tracking import MlflowClient

        self._metric = Metric
        self._client = MlflowClient(tracking_uri=self.record["uri"])
        run_id = self.record.get("run_id") if resumed else None
        if run_id:
            self._client.update_run(run_id, status="RUNNING")
            self.run_id = str(run_id)
            return
        experiment_id = self._experiment_id()
        run = self._client.create_run(experiment_id, run_name=self.run_name, tags=self.tags)
        self.run_id = run.info.run_id
        self.record.update(experiment_id=experiment_id, run_id=self.run_id, next_gen=0)
        params = [Param(k, v) for k, v in self.params.items()]
        for start in range(0, len(params), 100):  # MLflow takes at most 100 params a batch
            self._client.log_batch(self.run_id, params=params[start : start + 100])
        self._client.log_text(self.run_id, self.recorded, "experiment.json")

    def scalars(self, gen: int, metrics: Mapping[str, float]) -> None:
        stamp = int(time.time() * 1000)
        batch = [self._metric(k, v, stamp, gen) for k, v in metrics.items()]
        for start in range(0, len(batch), 1000):  # and at most 1000 metrics
            self._client.log_batch(self.run_id, metrics=batch[start : start + 1000])

    def figures(self, gen: int, images: Mapping[str, bytes], folder: Path) -> None:
        self._client.log_artifacts(self.run_id, str(folder), artifact_path="report")

    def close(self, status: str) -> None:
        self._client.set_terminated(self.run_id, status=status)


def _params(experiment: Experiment) -> dict[str, str]:
    """The experiment as MLflow params: dotted keys, JSON values (lists and role configs whole)."""
    out: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value and not prefix.endswith(".config"):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        else:
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            out[_key(prefix)] = text[:500]  # older MLflow servers take 500 characters

    walk("", experiment.model_dump(mode="json", exclude={"tracking"}))
    return out


def _is_file_store(uri: str) -> bool:
    return urlparse(uri).scheme in ("", "file") or len(urlparse(uri).scheme) == 1  # C:\...


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class _Finish:
    status: str
    figures: bool
    through: int


def require_installed(config: TrackingConfig) -> None:
    """Check that every tracker ``config`` turns on is installed.

    Raises:
        ExperimentError: naming the missing trackers and the extra that installs them.
    """
    wanted = [("tensorboard", config.tensorboard.enabled), ("mlflow", config.mlflow.enabled)]
    missing = [name for name, on in wanted if on and not _installed(name)]
    if missing:
        raise ExperimentError(
            f"[tracking] turns on {' and '.join(missing)}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed: "
            "pip install 'coevo[tracking]' (or set "
            f"{' and '.join(f'tracking.{m} = false' for m in missing)})"
        )


class Tracking:
    """The run's trackers, fed each :class:`~coevo.run.loop.GenerationReport` (``on_generation``).

    Created before Ray starts: a tracker whose package is missing, or whose
    default destination cannot be used, stops the run there. :meth:`start`
    opens the trackers on a background thread; calling the object queues a
    report and returns at once; :meth:`close` sends what is queued, the
    figures, and ends, waiting at most ``[tracking] timeout`` seconds. With no
    tracker configured every method does nothing.

    Args:
        experiment: the run's experiment (its ``tracking`` table says what to do).
        run_dir: the run directory.
        resume: this is ``coevo resume``: continue what ``tracking.json`` records.
        events: ``events(name, **fields)``; ``tracking_failed`` events are recorded through it,
            always from the thread that calls this object.

    Raises:
        ExperimentError: a configured tracker's package is not installed, or the run
            directory is not on this machine and no destination was set.
    """

    def __init__(
        self,
        experiment: Experiment,
        run_dir: str,
        *,
        resume: bool,
        events: Callable[..., None],
    ) -> None:
        self.config: TrackingConfig = experiment.tracking
        self.run_dir = run_dir
        self.events = events
        self.trackers: list[_Tracker] = []
        self._resume = resume
        self._thread: threading.Thread | None = None
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=_QUEUE_SIZE)
        self._lock = threading.Lock()
        self._failed: dict[str, str] = {}
        self._announced: set[str] = set()
        self._committed = -1
        self._seen = -1
        self._levels = TaskLevels()
        self._run = RunDir(run_dir)
        self._log = GameLog(self._run)
        if not self.config.enabled:
            return
        require_installed(self.config)
        run = self._run
        recorded = self._recorded() if resume else {}
        if self.config.tensorboard.enabled:
            record = dict(recorded.get("tensorboard") or {})
            if "logdir" not in record:
                record["logdir"] = self.config.tensorboard.logdir or self._default(
                    run, "tensorboard", "logdir", "tensorboard"
                )
            self.trackers.append(_TensorBoard(record))
        if self.config.mlflow.enabled:
            mlflow = self.config.mlflow
            record = dict(recorded.get("mlflow") or {})
            if "uri" not in record:
                uri = mlflow.uri or os.environ.get("MLFLOW_TRACKING_URI")
                if not uri:
                    uri = Path(self._default(run, "mlflow", "uri", "mlruns")).as_uri()
                record["uri"] = uri
            if _is_file_store(record["uri"]):
                # MLflow 3 refuses a file store unless told it is wanted; this one is (yours wins)
                os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            self.trackers.append(
                _Mlflow(
                    record,
                    experiment=mlflow.experiment or experiment.run.name,
                    run_name=mlflow.run_name or run.root.rstrip("/").rsplit("/", 1)[-1],
                    tags={
                        "coevo.run_dir": run.uri if not run.is_local else run.root,
                        "coevo.seed": str(experiment.run.seed),
                        "coevo.curriculum": experiment.curriculum.name,
                        **mlflow.tags,
                    },
                    params=_params(experiment),
                    recorded=experiment.model_dump_json(indent=1),
                )
            )
        if resume:
            self._committed = self._seen = GameLog(run).last_generation()
            for tracker in self.trackers:  # a log cut back (`coevo doctor --repair`) is sent again
                sent = int(tracker.record.get("next_gen", 0))
                tracker.record["next_gen"] = min(sent, self._committed + 1)

    def _default(self, run: RunDir, table: str, key: str, name: str) -> str:
        if not run.is_local:
            raise ExperimentError(
                f"tracking.{table}: the run directory {run.uri} is not on this machine, so it "
                f"has no default {key}: set tracking.{table}.{key}"
            )
        return str(Path(run.root) / name)

    def _recorded(self) -> dict[str, Any]:
        """What ``tracking.json`` says of an earlier session (nothing when it is missing or unreadable)."""
        if not self._run.exists(RECORD):
            return {}
        try:
            data = json.loads(self._run.read_bytes(RECORD))
        except (OSError, ValueError) as exc:
            self._fail(RECORD, f"cannot be read ({_describe(exc)}); the trackers start afresh")
            return {}
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            self._fail(RECORD, f"is not a {_FORMAT} record; the trackers start afresh")
            return {}
        return {k: v for k, v in data.items() if isinstance(v, dict)}

    # ---- the run's thread ------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """Whether any tracker is configured."""
        return bool(self.trackers)

    def start(self) -> None:
        """Open the trackers on a background thread (nothing when none is configured)."""
        if self.trackers and self._thread is None:
            self._thread = threading.Thread(target=self._work, name="coevo-tracking", daemon=True)
            self._thread.start()

    def __call__(self, report: GenerationReport) -> None:
        """Queue a committed generation's report and return at once.

        A full queue drops the report: the generation is sent later from the
        log, without its wall-clock figures.
        """
        self._announce()
        if self._thread is None:
            return
        self._seen = max(self._seen, report.gen)
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(report)

    def close(self, error: BaseException | None = None) -> dict[str, str]:
        """Send what is queued (and, after a whole run, the figures) and end; returns tracker → error.

        Waits at most ``[tracking] timeout`` seconds (10 after an error). Never raises
        for a tracker; what a tracker had not sent by then is reported as its failure.

        Args:
            error: what ended the run early (KeyboardInterrupt: the MLflow run is ``KILLED``,
                else ``FAILED``); None for a run that ended normally.
        """
        thread, self._thread = self._thread, None
        if thread is not None:
            status = "FINISHED" if error is None else "FAILED"
            if isinstance(error, KeyboardInterrupt):
                status = "KILLED"
            wait = self.config.timeout
            if error is not None:
                wait = min(wait, _INTERRUPTED_WAIT)
            deadline = time.monotonic() + wait
            finish = _Finish(status, self.config.figures and error is None, self._seen)
            with contextlib.suppress(queue.Full):
                self._queue.put(finish, timeout=wait)
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                for tracker in self.trackers:
                    if tracker.error is None:
                        self._fail(
                            tracker.name,
                            f"still sending {wait:g} s after the run ended; what it had not "
                            "sent is missing there (raise tracking.timeout)",
                        )
        with contextlib.suppress(OSError):  # the run's own error, if any, is the one to see
            self._announce()
        return self.failed

    @property
    def failed(self) -> dict[str, str]:
        """Tracker (or ``tracking.json``, ``game log``, ``figures``) → its first error, this session."""
        with self._lock:
            return dict(self._failed)

    def summary_lines(self) -> list[str]:
        """For the run's printed summary: where each tracker sent its metrics, or why it stopped."""
        lines = []
        for tracker in self.trackers:
            if tracker.error is None and tracker.name not in self.failed:
                lines.append(f"{tracker.name}: {tracker.where()}")
        for name, error in self.failed.items():
            lines.append(f"tracking: {name} failed and the run went on without it: {error}")
        return lines

    def _announce(self) -> None:
        """Record each new failure as a ``tracking_failed`` event (on the caller's thread)."""
        for name, error in self.failed.items():
            if name not in self._announced:
                self._announced.add(name)
                self.events("tracking_failed", tracker=name, error=error)

    def _fail(self, name: str, error: str) -> None:
        with self._lock:
            self._failed.setdefault(name, error)
        for tracker in self.trackers:
            if tracker.name == name and tracker.error is None:
                tracker.error = error
                tracker.abandon()

    # ---- the background thread -----------------------------------------------------------

    def _attempt(self, tracker: _Tracker, action: Callable[..., None], *args: Any) -> bool:
        """Run one tracker call; its first error disables it (the others and the run go on)."""
        if tracker.error is not None:
            return False
        try:
            action(*args)
        except Exception as exc:
            self._fail(tracker.name, _describe(exc))
            return False
        return True

    def _live(self) -> list[_Tracker]:
        return [t for t in self.trackers if t.error is None]

    def _work(self) -> None:
        try:
            self._serve()
        except Exception as exc:  # a bug here must not end the thread unnoticed
            for tracker in self._live():
                self._fail(tracker.name, f"tracking stopped: {_describe(exc)}")

    def _serve(self) -> None:
        for tracker in self.trackers:
            self._attempt(tracker, functools.partial(tracker.open, resumed=self._resume))
        self._save()
        self._send_through(self._committed, None)  # what an interrupted session had not sent
        while True:
            job = self._queue.get()
            if isinstance(job, _Finish):
                self._send_through(job.through, None)
                self._finish(job)
                return
            self._send_through(job.gen, job)

    def _send_through(self, gen: int, report: GenerationReport | None) -> None:
        """Send every generation up to ``gen`` that a live tracker has not had yet."""
        start = min((t.next_gen for t in self._live()), default=gen + 1)
        for g in range(start, gen + 1):
            metrics: dict[str, float] = {}
            try:
                metrics.update(generation_metrics(self._log, g, self._levels))
            except Exception as exc:
                self._fail("game log", f"generation {g} cannot be read: {_describe(exc)}")
            if report is not None and report.gen == g:
                metrics.update(report_metrics(report))
            for tracker in self._live():
                if tracker.next_gen <= g and self._attempt(tracker, tracker.scalars, g, metrics):
                    tracker.record["next_gen"] = g + 1
        if start <= gen:
            self._save()

    def _finish(self, job: _Finish) -> None:
        if job.figures and job.through >= 0 and self._live():
            with tempfile.TemporaryDirectory(prefix="coevo-figures-") as folder:
                try:
                    images = report_figures(self.run_dir, Path(folder))
                except Exception as exc:
                    self._fail("figures", f"the report cannot be drawn: {_describe(exc)}")
                else:
                    for tracker in self._live():
                        self._attempt(tracker, tracker.figures, job.through, images, Path(folder))
        for tracker in self._live():
            self._attempt(tracker, tracker.close, job.status)
        self._save()

    def _save(self) -> None:
        data = {"format": _FORMAT, **{t.name: t.record for t in self.trackers}}
        try:
            self._run.write_bytes(json.dumps(data, indent=1, sort_keys=True).encode(), RECORD)
        except OSError as exc:
            self._fail(RECORD, f"cannot be written ({_describe(exc)}); a resume starts afresh")
