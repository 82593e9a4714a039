"""What the trackers are sent: :data:`METRICS`, from a generation's tables of the game log and its live report.

The figures they share with the live table, the summary and ``coevo
analyze`` (rejections, success, calibration, spend) come from
:mod:`coevo.arena.gamelog.figures`. A generation the run has just written
is measured from the tables :meth:`~coevo.arena.gamelog.GameLog.write`
returned (:attr:`GenerationReport.tables`); one sent later (after a resume,
or when the queue was full) is read back from the log.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.compute as pc
from coevo.arena.analysis.report import render_report
from coevo.arena.calibration import prediction_figures
from coevo.arena.gamelog import GameLog
from coevo.arena.gamelog.figures import (
    TaskLevels,
    accepted_tasks,
    mean_success,
    played,
    predicted_outcomes,
    rejection_counts,
    scored_evals,
    spend,
)

if TYPE_CHECKING:
    from coevo.run.generation.state import GenerationReport

__all__ = [
    "METRICS",
    "TABLES",
    "TaskLevels",
    "generation_metrics",
    "metric_key",
    "report_figures",
    "report_metrics",
]

METRICS: Final[Mapping[str, str]] = {
    "train/success": "mean reward of the training episodes (`generations.train_success`)",
    "train/success_level_<L>": "mean reward of the training episodes of level-L tasks (failed episodes left out)",
    "train/episodes": "training episodes played (`train_episodes`)",
    "train/tasks": "distinct tasks trained on (`trained_tasks`)",
    "train/level": "mean level of the tasks trained on (`trained_level`)",
    "train/informative_groups": "training groups whose rewards differ (`informative_groups`): "
    "the ones a group-baseline policy gradient learns from",
    "train/informative_share": "their share of the groups played (`informative_share`)",
    "train/extra_tasks": "tasks dynamic sampling played beyond the curriculum's batch "
    "(`extra_tasks`; 0 when it is off)",
    "eval/success": "mean reward on the held-out suite (`eval_success`), when it was played",
    "eval/success_level_<L>": "the same, of its level-L tasks (the `evals` table)",
    "eval/<suite>/success": "mean reward on a further held-out suite (`[[eval.suites]]`: its "
    "pass^1, failed episodes left out), when it was played",
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
    "calibration/auc": "its discrimination there: the ROC AUC of its predictions against the rewards",
    "calibration/auc_frontier": "the same AUC over the tasks whose observed success lies in 0.2–0.8",
    "learner/loss": "the learner's objective after its step (`updates.loss`), when it has one",
    "learner/entropy": "the policy's mean entropy (`updates.entropy`), when reported",
    "trainer/<name>": "with a `[trainer]`: each figure the trainer announced with the version "
    "this generation played (`policies.trainer_metrics`; coevo train's: `loss`, `entropy`, "
    "`grad_norm`, `lr`, `importance_weight_mean`, `clipped_fraction`, `informative_share`, ...)",
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
"""Every metric sent, by name (``<L>``, ``<suite>``, ``<check>``, ``<phase>``, ``<role>`` stand for each one there is).

Every name but ``throughput/*`` is computed from the game log alone, so a
generation sent after a resume has them all.
"""

_ROW_METRICS: Final = {
    "train/success": "train_success",
    "train/episodes": "train_episodes",
    "train/tasks": "trained_tasks",
    "train/level": "trained_level",
    "train/informative_groups": "informative_groups",
    "train/informative_share": "informative_share",
    "train/extra_tasks": "extra_tasks",
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


def metric_key(name: str) -> str:
    """A metric name both trackers take (MLflow allows letters, digits, ``_-./`` and spaces)."""
    return _NAME.sub("_", name)


TABLES: Final[Mapping[str, list[str]]] = {
    "generations": list(_ROW_METRICS.values()),
    "episodes": ["episode_id", "task_id", "purpose", "reward", "failure"],
    "evals": ["episode_id", "level", "reward", "suite"],
    "verdicts": ["task_id", "accepted", "failed"],
    "tasks": ["task_id", "world_id", "domain", "family", "level"],
    "predictions": ["task_id", "p"],
    "updates": ["loss", "entropy"],
    "usage": ["role", "calls", "input_tokens", "output_tokens", "dollars"],
    "policies": ["trainer_metrics"],
}
"""The tables (and their columns) a generation's metrics are computed from."""


def _trainer_metrics(text: str | None) -> dict[str, float]:
    """A ``policies`` row's ``trainer_metrics``: its finite numbers by name (written checked; read again so)."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {
        str(k): float(v)
        for k, v in value.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }


def _by_level(table: pa.Table, prefix: str) -> dict[str, float]:
    """``prefix<L>`` → the success of ``table``'s rows of level L (rows of no level left out)."""
    return {
        f"{prefix}{r['level']}": r["success"]
        for r in mean_success(table, ["level"])
        if r["level"] is not None
    }


def generation_metrics(
    log: GameLog,
    gen: int,
    levels: TaskLevels | None = None,
    tables: Mapping[str, pa.Table] | None = None,
) -> dict[str, float]:
    """The metrics of :data:`METRICS` that come from the game log, for committed generation ``gen``.

    Args:
        log: the run's game log.
        gen: a committed generation.
        levels: a cache kept across calls (one per run); None reads afresh.
        tables: the generation's tables as written (:data:`TABLES` at least); None reads
            only that generation's parts (and, for the levels of the tasks it trained on,
            the ``task_id`` and ``level`` columns of earlier ``tasks`` parts, once per
            ``levels`` cache).

    Raises:
        LogError: (reading) the generation is not committed, or its manifest cannot be read.
    """
    levels = TaskLevels() if levels is None else levels
    if tables is None:
        log.manifest(
            gen
        )  # a generation that is not committed (or whose manifest is damaged) says so
        tables = {name: log.read(name, gens=[gen], columns=cols) for name, cols in TABLES.items()}
    out: dict[str, float] = {}
    (row,) = tables["generations"].select(TABLES["generations"]).to_pylist()
    for name, column in _ROW_METRICS.items():
        if row[column] is not None:
            out[name] = float(row[column])
    if row["proposed"]:
        out["proposals/acceptance_rate"] = row["accepted"] / row["proposed"]

    episodes = tables["episodes"]
    train = played(episodes)
    train = train.filter(pc.equal(train.column("purpose"), "train"))
    level_of = levels.up_to(log, gen, tables["tasks"])
    leveled = pa.table(
        {
            "level": pa.array(
                [level_of.get(t) for t in train.column("task_id").to_pylist()], pa.int64()
            ),
            "reward": train.column("reward"),
        }
    )
    out.update(_by_level(leveled, "train/success_level_"))
    evals = scored_evals(tables["evals"], episodes)
    synthesized = pc.is_null(evals.column("suite"))
    out.update(_by_level(evals.filter(synthesized), "eval/success_level_"))
    for r in mean_success(evals.filter(pc.invert(synthesized)), ["suite"]):
        out[metric_key(f"eval/{r['suite']}/success")] = r["success"]

    verdicts = tables["verdicts"]
    checks = rejection_counts(verdicts)
    out.update({metric_key(f"rejections/{check}"): float(n) for check, n in sorted(checks.items())})
    pool = accepted_tasks(
        verdicts, tables["tasks"].select(["task_id", "world_id", "domain", "family"])
    )
    for name, column in (("worlds", "world_id"), ("domains", "domain"), ("families", "family")):
        out[f"pool/{name}"] = float(len(pc.unique(pool.column(column).drop_null())))

    pairs = predicted_outcomes(episodes, tables["predictions"])
    if pairs.num_rows:
        figures = prediction_figures(
            pairs.column("p").to_pylist(),
            pairs.column("reward").to_pylist(),
            pairs.column("task_id").to_pylist(),
        )
        out["calibration/ece"] = figures["ece"]
        for name in ("auc", "auc_frontier"):
            if figures[name] is not None:
                out[f"calibration/{name}"] = figures[name]

    for update in tables["updates"].select(["loss", "entropy"]).to_pylist():
        for name in ("loss", "entropy"):
            if update[name] is not None:
                out[f"learner/{name}"] = float(update[name])

    policies = tables.get("policies")
    for row in [] if policies is None else policies.select(["trainer_metrics"]).to_pylist():
        for name, value in _trainer_metrics(row["trainer_metrics"]).items():
            out[metric_key(f"trainer/{name}")] = value

    usage = tables["usage"]
    for total in spend(usage, []):
        out["spend/calls"] = float(total["calls"])
        out["spend/tokens"] = float(total["tokens"])
        out["spend/dollars"] = float(total["dollars"])
    for role in spend(usage, ["role"]):
        out[metric_key(f"spend/{role['role']}/tokens")] = float(role["tokens"])
        out[metric_key(f"spend/{role['role']}/dollars")] = float(role["dollars"])
    return out


def report_metrics(report: GenerationReport) -> dict[str, float]:
    """The wall-clock metrics of :data:`METRICS` (``throughput/*``), which only the live report has."""
    out = {
        "throughput/seconds": float(report.seconds),
        "throughput/episodes_per_second": float(report.episodes_per_second),
    }
    for phase, seconds in report.phases.items():
        out[metric_key(f"throughput/{phase}_seconds")] = float(seconds)
    return out


def report_figures(run_dir: str, folder: Path) -> dict[str, bytes]:
    """Render the run's report into ``folder`` (``report.html`` and one PNG per figure); returns id → PNG."""
    images = render_report([run_dir], str(folder / "report.html"))
    for key, png in images.items():
        (folder / f"{key}.png").write_bytes(png)
    return images
