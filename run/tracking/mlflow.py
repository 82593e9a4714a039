"""MLflow: one MLflow run per coevo run, its params the experiment, its metrics each generation's."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from coevo.run.tracking.metrics import metric_key
from coevo.run.tracking.tracker import Tracker

if TYPE_CHECKING:  # the experiment imports the tracking settings
    from coevo.run.experiment import Experiment

__all__ = ["MlflowTracker", "is_file_store", "mlflow_params"]


class MlflowTracker(Tracker):
    """An MLflow run: created (with the experiment as params) or, on a resume, continued."""

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
        """The MLflow run, its experiment and the tracking URI."""
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
        """Create the MLflow run (params, tags, ``experiment.json``), or continue the recorded one."""
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
        """Log the metrics, their step the generation (in batches MLflow takes)."""
        stamp = int(time.time() * 1000)
        batch = [self._metric(k, v, stamp, gen) for k, v in metrics.items()]
        for start in range(0, len(batch), 1000):  # and at most 1000 metrics
            self._client.log_batch(self.run_id, metrics=batch[start : start + 1000])

    def figures(self, gen: int, images: Mapping[str, bytes], folder: Path) -> None:
        """Log the report's folder as the run's ``report`` artifacts."""
        self._client.log_artifacts(self.run_id, str(folder), artifact_path="report")

    def close(self, status: str) -> None:
        """Mark the MLflow run terminated with ``status``."""
        self._client.set_terminated(self.run_id, status=status)


def mlflow_params(experiment: Experiment) -> dict[str, str]:
    """The experiment as MLflow params: dotted keys, JSON values (lists and role configs whole)."""
    out: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value and not prefix.endswith(".config"):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        else:
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            out[metric_key(prefix)] = text[:500]  # older MLflow servers take 500 characters

    walk("", experiment.public(exclude={"tracking"}))  # no secret in a param
    return out


def is_file_store(uri: str) -> bool:
    """Whether ``uri`` is an MLflow file store (a path, ``file:``, or a Windows drive)."""
    return urlparse(uri).scheme in ("", "file") or len(urlparse(uri).scheme) == 1  # C:\...
