"""A generation's rows: what the loop (:mod:`coevo.run.loop`) commits for it, made from its :class:`Generation`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from coevo.arena.calibration import brier
from coevo.arena.codetask import CodeTaskSpec
from coevo.arena.difficulty import task_level
from coevo.arena.gamelog import (
    EpisodeRow,
    EvalRow,
    GenerationRecord,
    GenerationRow,
    PredictionRow,
    TaskRow,
    TrajectoryRow,
    UpdateRow,
    VerdictRow,
    WorldRow,
)
from coevo.arena.gamelog.figures import rejection_counts, top_rejections
from coevo.arena.spec import TaskSpec, WorldSpec
from coevo.curricula.dynamic import informative_count
from coevo.run.generation.state import Generation, Proposals
from coevo.run.generation.suites import Suite
from coevo.run.handoff.transports import policy_row

__all__ = ["generation_record", "summary_row"]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def generation_record(
    done: Generation,
    *,
    seed: int,
    eval_tasks: Sequence[TaskSpec],
    logged_worlds: set[str],
    frontier: Any,
    policies: bool,
    suites: Sequence[Suite] = (),
) -> GenerationRecord:
    """The generation's rows of every table but ``usage``.

    Args:
        done: the generation, every phase filled.
        seed: the run's seed (the proposer's rollouts' ids).
        eval_tasks: the held-out suite (generation 0 logs it first).
        logged_worlds: the world ids already logged; the new ones are added.
        frontier: the curriculum's frontier now.
        policies: whether a trainer hands policies (a ``policies`` row).
        suites: the further held-out suites (``[[eval.suites]]``; generation 0 logs their tasks).
    """
    record = GenerationRecord(done.gen)
    _log_proposals(record, done.proposals, eval_tasks, logged_worlds, suites)
    version = done.version
    predictions = dict(zip([t.task_id for t in done.accepted], done.predicted, strict=True))
    record.predictions = [
        PredictionRow(task_id=t, version=version, p=float(p)) for t, p in predictions.items()
    ]
    record.episodes = [EpisodeRow.of(e, "train") for e in done.episodes]
    record.episodes += [EpisodeRow.of(e, "eval") for e in done.evals]
    suite_evals = done.suite_episodes()
    record.episodes += [EpisodeRow.of(e, "eval") for e in suite_evals]
    external = done.external.episodes
    record.episodes += [EpisodeRow.of(e, "external") for e in external]
    record.trajectories = [
        TrajectoryRow.of(e, purpose)
        for purpose, played in (
            ("train", done.episodes),
            ("eval", done.evals),
            ("eval", suite_evals),
            ("external", external),
        )
        for e in played
        if e.trajectory is not None
    ] + done.proposer_rows(seed)
    record.ingested = done.external.rows
    by_id = {t.task_id: t for t in eval_tasks}
    record.evals = [EvalRow.of(e, by_id.get(e.task_id)) for e in done.evals]
    for suite in suites:
        in_suite = {t.task_id: t for t in suite.tasks}
        record.evals += [
            EvalRow.of(e, in_suite.get(e.task_id), suite.name)
            for e in done.suite_evals.get(suite.name, [])
        ]
    extra = done.stats.extra or {}
    record.updates = (
        [
            UpdateRow(
                version=done.learnt_from,
                episodes=done.stats.episodes,
                loss=done.stats.loss,
                success=extra.get("success"),
                entropy=extra.get("entropy"),
                skipped=extra.get("skipped"),
            )
        ]
        if done.learnt_from is not None
        else []
    )
    record.generations = [summary_row(done, predictions, frontier)]
    record.proposals = done.scored.rows
    if policies:
        record.policies = [
            policy_row(
                done.gen,
                done.version,
                done.policy,
                done.episodes,
                done.paid_rollouts(),
                batch=done.learnt_on(),
            )
        ]
    return record


def summary_row(done: Generation, predictions: dict[str, float], frontier: Any) -> GenerationRow:
    """The ``generations`` row: what the generation proposed, accepted, trained and learnt."""
    proposals, episodes, evals = done.proposals, done.episodes, done.evals
    played = [e for e in episodes if not e.failure]
    scored = [e for e in evals if not e.failure]
    fresh = [(predictions[e.task_id], e.reward.value) for e in played if e.task_id in predictions]
    groups = done.groups()
    found = informative_count(groups)
    return GenerationRow(
        proposed=len(proposals.tasks),
        accepted=len(done.accepted),
        rejected=sum(not v.accepted for v in proposals.verdicts),
        mutations=proposals.sources.count("mutation"),
        trained_tasks=len(done.batch),
        train_episodes=len(episodes),
        train_success=_mean([e.reward.value for e in played]),
        eval_success=_mean([e.reward.value for e in scored]),
        frontier=frontier,
        proposer_reward=done.scored.reward,
        pool_diversity=done.scored.diversity,
        accepted_level=_mean([lv for t in done.accepted if (lv := task_level(t)) is not None]),
        trained_level=_mean([lv for t in done.batch if (lv := task_level(t)) is not None]),
        brier=brier([p for p, _ in fresh], [o for _, o in fresh]) if fresh else None,
        version=done.version,
        rejections=json.dumps(top_rejections(rejection_counts(proposals.verdicts)), sort_keys=True),
        failures=done.failures
        + sum(bool(e.failure) for e in [*episodes, *evals])
        + sum(bool(e.failure) for e in done.suite_episodes()),
        informative_groups=found,
        informative_share=found / len(groups) if groups else None,
        extra_tasks=done.extra_tasks,
        dynamic_sampling=done.dynamic,
    )


def _log_proposals(
    record: GenerationRecord,
    proposals: Proposals,
    eval_tasks: Sequence[TaskSpec],
    logged_worlds: set[str],
    suites: Sequence[Suite] = (),
) -> None:
    """The generation's worlds, tasks and verdicts (generation 0 logs the eval suites first: source ``eval``)."""
    tasks, sources = proposals.tasks, proposals.sources
    code: list[CodeTaskSpec] = []
    if record.gen == 0:
        held: dict[str, TaskSpec] = {t.task_id: t for t in eval_tasks}
        for suite in suites:
            for task in suite.tasks:
                if isinstance(task, CodeTaskSpec):
                    code.append(task)
                else:
                    held.setdefault(task.task_id, task)
        tasks = [*held.values(), *tasks]
        sources = ["eval"] * len(held) + sources
    for task in tasks:
        world = task.world
        if isinstance(world, WorldSpec) and world.world_id not in logged_worlds:
            logged_worlds.add(world.world_id)
            record.worlds.append(WorldRow.of(world))
    record.tasks = [TaskRow.of(t, s) for t, s in zip(tasks, sources, strict=True)]
    for task in {t.task_id: t for t in code}.values():
        if task.world.world_id not in logged_worlds:
            logged_worlds.add(task.world.world_id)
            record.worlds.append(WorldRow.of_code(task.world))
        record.tasks.append(TaskRow.of_code(task).model_copy(update={"source": "eval"}))
    record.verdicts = [VerdictRow.of(v) for v in proposals.verdicts]
