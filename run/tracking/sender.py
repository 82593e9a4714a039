"""The run's side of tracking: :class:`Tracking` queues each committed generation's report and a thread sends it.

After each committed generation the run hands its
:class:`~coevo.run.generation.state.GenerationReport` to :class:`Tracking`, which
queues it and returns at once; a background thread computes the
generation's :data:`~coevo.run.tracking.metrics.METRICS` from the tables
the report carries (those not reported, from the log) and sends them to each
tracker; at the end, the report's figures. A tracker's first error disables
it and becomes a ``tracking_failed`` event. ``RUN_DIR/tracking.json`` keeps
each tracker's destination and progress for ``coevo resume``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from coevo.arena.errors import ExperimentError
from coevo.arena.gamelog import GameLog, RunDir
from coevo.arena.secrets import REDACTED, redact, redact_value
from coevo.run.tracking.metrics import (
    TaskLevels,
    generation_metrics,
    report_figures,
    report_metrics,
)
from coevo.run.tracking.mlflow import MlflowTracker, is_file_store, mlflow_params
from coevo.run.tracking.settings import TrackingConfig, require_installed
from coevo.run.tracking.tensorboard import TensorBoardTracker
from coevo.run.tracking.tracker import Tracker, describe

if TYPE_CHECKING:  # both import this package (an experiment has a [tracking] table)
    from coevo.run.experiment import Experiment
    from coevo.run.generation.state import GenerationReport

__all__ = ["RECORD", "Tracking"]

RECORD: Final = "tracking.json"
"""The file in the run directory that keeps each tracker's destination and progress."""

_FORMAT: Final = "coevo.tracking/1"
_QUEUE_SIZE: Final = 64
_INTERRUPTED_WAIT: Final = 10.0


@dataclass(frozen=True)
class _Finish:
    status: str
    figures: bool
    through: int


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
        self.trackers: list[Tracker] = []
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
            self.trackers.append(TensorBoardTracker(record))
        if self.config.mlflow.enabled:
            mlflow = self.config.mlflow
            record = dict(recorded.get("mlflow") or {})
            if REDACTED in str(
                record.get("uri", REDACTED)
            ):  # none recorded, or its password left out
                uri = mlflow.uri or os.environ.get("MLFLOW_TRACKING_URI")
                if not uri:
                    uri = Path(self._default(run, "mlflow", "uri", "mlruns")).as_uri()
                record["uri"] = uri
            if is_file_store(record["uri"]):
                # MLflow 3 refuses a file store unless told it is wanted; this one is (yours wins)
                os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            self.trackers.append(
                MlflowTracker(
                    record,
                    experiment=mlflow.experiment or experiment.run.name,
                    run_name=mlflow.run_name or run.root.rstrip("/").rsplit("/", 1)[-1],
                    tags={
                        "coevo.run_dir": run.uri if not run.is_local else run.root,
                        "coevo.seed": str(experiment.run.seed),
                        "coevo.curriculum": experiment.curriculum.name,
                        **redact_value(mlflow.tags),
                    },
                    params=mlflow_params(experiment),
                    recorded=experiment.recorded_json(),
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
            data = self._run.read_json(RECORD)
        except (OSError, ValueError) as exc:
            self._fail(RECORD, f"cannot be read ({describe(exc)}); the trackers start afresh")
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
                lines.append(redact(f"{tracker.name}: {tracker.where()}"))
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

    def _attempt(self, tracker: Tracker, action: Callable[..., None], *args: Any) -> bool:
        """Run one tracker call; its first error disables it (the others and the run go on)."""
        if tracker.error is not None:
            return False
        try:
            action(*args)
        except Exception as exc:
            self._fail(tracker.name, describe(exc))
            return False
        return True

    def _live(self) -> list[Tracker]:
        return [t for t in self.trackers if t.error is None]

    def _work(self) -> None:
        try:
            self._serve()
        except Exception as exc:  # a bug here must not end the thread unnoticed
            for tracker in self._live():
                self._fail(tracker.name, f"tracking stopped: {describe(exc)}")

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
            # the tables just written, when this is the generation reported; else the log's
            written = report.tables if report is not None and report.gen == g else None
            try:
                metrics.update(generation_metrics(self._log, g, self._levels, written or None))
            except Exception as exc:
                self._fail("game log", f"generation {g} cannot be read: {describe(exc)}")
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
                    self._fail("figures", f"the report cannot be drawn: {describe(exc)}")
                else:
                    for tracker in self._live():
                        self._attempt(tracker, tracker.figures, job.through, images, Path(folder))
        for tracker in self._live():
            self._attempt(tracker, tracker.close, job.status)
        self._save()

    def _save(self) -> None:
        # no secret on disk: a URI's password is given again by the experiment or the environment
        data = redact_value({"format": _FORMAT, **{t.name: t.record for t in self.trackers}})
        try:
            self._run.write_bytes(json.dumps(data, indent=1, sort_keys=True).encode(), RECORD)
        except OSError as exc:
            self._fail(RECORD, f"cannot be written ({describe(exc)}); a resume starts afresh")
