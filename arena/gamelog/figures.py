"""The figures more than one reader of the game log shows, each computed here once.

The live table's row (:mod:`coevo.run.generation.record`), a run's summary
(:mod:`coevo.run.driver.summary`), the trackers (:mod:`coevo.run.tracking`),
``coevo analyze`` (:mod:`coevo.arena.analysis.metrics`) and ``coevo corpus
report`` (:mod:`coevo.arena.analysis.corpus`) all count rejections, success
and spend; they take them from these functions, over the log's tables (as
:meth:`~coevo.arena.gamelog.GameLog.write` returns them or
:meth:`~coevo.arena.gamelog.GameLog.read` reads them back), so that they
cannot disagree.

A *group* is the training episodes of one task in one generation (the loop
plays each training task ``run.rollouts`` times); it is *informative* when
its rewards differ (:func:`informative`): a group whose rewards are all
equal has advantage 0 under a group baseline and teaches a policy gradient
nothing. The loop counts them per generation (``generations.informative_groups``),
dynamic sampling fills a batch with them, and ``coevo analyze`` counts them
again from the ``episodes`` table (:func:`training_groups`), older logs too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from coevo.arena.outcomes import Verdict

if TYPE_CHECKING:
    from coevo.arena.gamelog.log import GameLog

__all__ = [
    "INFORMATIVE_TOLERANCE",
    "UNJUDGED",
    "TaskLevels",
    "accepted_tasks",
    "informative",
    "mean_success",
    "played",
    "predicted_outcomes",
    "rejection_counts",
    "scored_evals",
    "spend",
    "top_rejections",
    "training_groups",
]

UNJUDGED: Final = "error"
"""Where a rejected verdict that names no failed check is counted: its record could not be read,
or the Judge failed on it (``Verdict.error``)."""


INFORMATIVE_TOLERANCE: Final = 1e-9
"""How far apart a group's rewards must be to differ (rewards that are not exact binary
fractions, such as 0.1 summed, are equal within it)."""


def informative(rewards: Iterable[float]) -> bool:
    """Whether a group's rewards differ: at least two, the highest above the lowest by more than :data:`INFORMATIVE_TOLERANCE`.

    Such a group gives some of its episodes a non-zero advantage under a group
    baseline (reward minus the group's mean); one of equal rewards gives none.
    """
    values = [float(r) for r in rewards]
    return len(values) >= 2 and max(values) - min(values) > INFORMATIVE_TOLERANCE


def training_groups(episodes: pa.Table) -> list[dict[str, Any]]:
    """Per generation (sorted): its training groups (``groups``: distinct tasks played for training) and the ``informative`` ones.

    Args:
        episodes: ``episodes`` rows with ``gen``, ``task_id``, ``purpose``, ``reward`` and
            ``failure``; an episode the Solver could not play has no reward to compare
            (its group may still be informative by the others).
    """
    train = episodes.filter(pc.equal(episodes.column("purpose"), "train"))
    if train.num_rows == 0:
        return []
    groups = train.group_by(["gen", "task_id"]).aggregate([("task_id", "count")])
    scored = played(train)
    value = scored.append_column("value", pc.cast(scored.column("reward"), pa.float64()))
    spread = value.group_by(["gen", "task_id"]).aggregate(
        [("value", "min"), ("value", "max"), ("value", "count")]
    )
    per_gen: dict[int, dict[str, Any]] = {}
    for row in groups.to_pylist():
        per_gen.setdefault(row["gen"], {"gen": row["gen"], "groups": 0, "informative": 0})
        per_gen[row["gen"]]["groups"] += 1
    for row in spread.to_pylist():
        if informative([row["value_min"], row["value_max"]] if row["value_count"] >= 2 else []):
            per_gen[row["gen"]]["informative"] += 1
    return [per_gen[gen] for gen in sorted(per_gen)]


def rejection_counts(verdicts: pa.Table | Iterable[Verdict]) -> Counter[str]:
    """How many rejected tasks failed each check; a rejected one with no failed check counts once as :data:`UNJUDGED`.

    Args:
        verdicts: a ``verdicts`` table (its ``accepted`` and ``failed`` columns), or the
            Judge's verdicts themselves (the loop's, before they are written: their
            checks in the order the Judge ran them, which breaks ties in
            :func:`top_rejections` as the log always has).
    """
    if isinstance(verdicts, pa.Table):
        outcomes: Iterable[tuple[bool, Sequence[str] | None]] = zip(
            verdicts.column("accepted").to_pylist(),
            verdicts.column("failed").to_pylist(),
            strict=True,
        )
    else:
        outcomes = ((v.accepted, list(v.failed)) for v in verdicts)
    return Counter(
        name for accepted, failed in outcomes if not accepted for name in (failed or [UNJUDGED])
    )


def top_rejections(counts: Counter[str], n: int = 5) -> dict[str, int]:
    """The ``n`` checks most often failed, with their counts (the ``generations.rejections`` column keeps five)."""
    return dict(counts.most_common(n))


def played(episodes: pa.Table) -> pa.Table:
    """The episodes the Solver played: one it could not play (``failure``, its server down) measures nothing."""
    return episodes.filter(pc.is_null(episodes.column("failure")))


def scored_evals(evals: pa.Table, episodes: pa.Table) -> pa.Table:
    """The ``evals`` rows whose episode was played (:func:`played`)."""
    failed = episodes.filter(pc.invert(pc.is_null(episodes.column("failure"))))
    return evals.filter(
        pc.invert(pc.is_in(evals.column("episode_id"), value_set=failed.column("episode_id")))
    )


def mean_success(table: pa.Table, keys: Sequence[str]) -> list[dict[str, Any]]:
    """Success (mean ``reward``) and episodes per value of ``keys``, sorted by them (null last).

    Args:
        table: rows with a ``reward`` column (episodes or evals, already :func:`played`).
        keys: the columns to group by (``[]``: one row for the whole table, when it has rows).
    """
    if table.num_rows == 0:
        return []
    value = table.append_column("value", pc.cast(table.column("reward"), pa.float64()))
    grouped = value.group_by(list(keys)).aggregate([("value", "mean"), ("value", "count")])
    out = [
        {**{k: r[k] for k in keys}, "success": r["value_mean"], "episodes": r["value_count"]}
        for r in grouped.to_pylist()
    ]
    return sorted(out, key=lambda r: tuple((r[k] is None, r[k]) for k in keys))


def accepted_tasks(verdicts: pa.Table, tasks: pa.Table) -> pa.Table:
    """The accepted tasks of ``verdicts``: their ``task_id`` (and ``gen``, when read from the log) with their ``tasks`` columns.

    Args:
        verdicts: a ``verdicts`` table.
        tasks: ``tasks`` rows, at most one per task id, with the columns wanted (its ``gen`` is
            left out: the verdict's says when the task was accepted).
    """
    accepted = verdicts.filter(verdicts.column("accepted"))
    keep = [c for c in ("task_id", "gen") if c in accepted.column_names]
    wanted = tasks.drop_columns([c for c in ("gen",) if c in tasks.column_names])
    return accepted.select(keep).join(wanted, keys="task_id", join_type="left outer")


def predicted_outcomes(episodes: pa.Table, predictions: pa.Table) -> pa.Table:
    """The played training episodes of tasks the World model predicted in their generation: ``p`` and ``reward`` (calibration)."""
    train = played(episodes)
    train = train.filter(pc.equal(train.column("purpose"), "train"))
    keys = ["task_id", "gen"] if "gen" in train.column_names else ["task_id"]
    return train.select([*keys, "reward"]).join(
        predictions.select([*keys, "p"]), keys=keys, join_type="inner"
    )


def spend(usage: pa.Table, keys: Sequence[str]) -> list[dict[str, Any]]:
    """What the roles that report usage spent per value of ``keys``: calls, input and output tokens, their sum, dollars."""
    if usage.num_rows == 0:
        return []
    grouped = usage.group_by(list(keys)).aggregate(
        [("calls", "sum"), ("input_tokens", "sum"), ("output_tokens", "sum"), ("dollars", "sum")]
    )
    out = [
        {
            **{k: r[k] for k in keys},
            "calls": r["calls_sum"],
            "input_tokens": r["input_tokens_sum"],
            "output_tokens": r["output_tokens_sum"],
            "tokens": r["input_tokens_sum"] + r["output_tokens_sum"],
            "dollars": r["dollars_sum"],
        }
        for r in grouped.to_pylist()
    ]
    return sorted(out, key=lambda r: tuple(r[k] for k in keys))


class TaskLevels:
    """Task id → level, filled generation by generation from the ``tasks`` tables (each generation's once).

    A generation trains on tasks proposed in earlier ones; this keeps their
    levels so that no generation re-reads the whole ``tasks`` table. The
    trackers' per-level metrics and the trainer hand-off's batches (their
    ``level`` column) both take the levels from here.
    """

    def __init__(self) -> None:
        self.of: dict[str, int | None] = {}
        self.through = -1

    def up_to(self, log: GameLog, gen: int, tasks: pa.Table | None = None) -> dict[str, int | None]:
        """The levels of every task logged in generations up to ``gen``.

        Args:
            log: the run's game log, read for the generations not seen yet.
            gen: the generation.
            tasks: generation ``gen``'s ``tasks`` table, when the caller has it (not read again).
        """
        if gen <= self.through:
            return self.of
        unread = range(self.through + 1, gen if tasks is not None else gen + 1)
        parts = [log.read("tasks", gens=unread, columns=["task_id", "level"])] if unread else []
        for rows in [*parts, *([tasks] if tasks is not None else [])]:
            for task_id, level in zip(
                rows.column("task_id").to_pylist(), rows.column("level").to_pylist(), strict=True
            ):
                self.of.setdefault(task_id, level)
        self.through = gen
        return self.of
