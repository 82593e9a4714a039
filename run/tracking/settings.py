"""``[tracking]``: which trackers a run sends its metrics to, and the check that they are installed."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Mapping
from typing import Any

from coevo.arena.errors import ExperimentError
from coevo.arena.settings import StrictNumbers
from pydantic import ConfigDict, Field, field_validator

__all__ = ["MlflowConfig", "TensorBoardConfig", "TrackingConfig", "require_installed"]


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


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


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
