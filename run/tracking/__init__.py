"""Metrics where users already look: each generation's figures to TensorBoard and MLflow.

``[tracking]`` in an experiment file (off by default: ``tensorboard = true``,
``mlflow = true``) turns trackers on. After each committed generation the
run hands its :class:`~coevo.run.generation.state.GenerationReport` to
:class:`Tracking`, which queues it and returns at once; a background thread
computes :data:`METRICS` (step = the generation) from the tables the
generation wrote (the report carries them; a generation sent after a resume
is read back from the log) and sends them; at the end, the report's figures
(:mod:`coevo.arena.analysis.report`). A tracker's first error disables it and
becomes a ``tracking_failed`` event: the run, its log and its exit status go on
as without tracking. ``RUN_DIR/tracking.json`` (data only) lets ``coevo
resume`` continue the same MLflow run and TensorBoard directory. See
``docs/tracking.md``.

One module a concern:

* :mod:`~coevo.run.tracking.settings`: the ``[tracking]`` table and :func:`require_installed`;
* :mod:`~coevo.run.tracking.metrics`: :data:`METRICS` and how each is computed;
* :mod:`~coevo.run.tracking.tracker`: the contract of one destination;
* :mod:`~coevo.run.tracking.tensorboard`, :mod:`~coevo.run.tracking.mlflow`: the two destinations;
* :mod:`~coevo.run.tracking.sender`: :class:`Tracking`, the queue and the thread that sends.
"""

from __future__ import annotations

from coevo.run.tracking.metrics import (
    METRICS,
    TaskLevels,
    generation_metrics,
    report_figures,
    report_metrics,
)
from coevo.run.tracking.sender import RECORD, Tracking
from coevo.run.tracking.settings import (
    MlflowConfig,
    TensorBoardConfig,
    TrackingConfig,
    require_installed,
)

__all__ = [
    "METRICS",
    "RECORD",
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
