"""The IRT world model: calibrated predictions before any rollout, for tasks and solver versions it has not seen."""

from __future__ import annotations

import random
import statistics

import pytest
from coevo.agents.protocols import ProposalRequest
from coevo.agents.registry import REGISTRY
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.agents.world_models import (
    FEATURE_NAMES,
    IRTWorldModel,
    task_features,
)
from coevo.arena import Episode, TaskSpec, WorldCache
from coevo.arena.calibration import brier, expected_calibration_error, reliability
from coevo.run.testing import check_role

from tests.agents.policies import guess_rows

RUNS = 4


@pytest.fixture(scope="module")
def split() -> tuple[list[TaskSpec], list[TaskSpec]]:
    synth = ProceduralSynthesizer()
    tasks = [
        t
        for level in range(1, 6)
        for t in synth.propose(ProposalRequest(n=50, seed=900 + level, level=level))
    ]
    random.Random(0).shuffle(tasks)
    return tasks[:170], tasks[170:]


def _runs(
    tasks: list[TaskSpec], version: str, read: bool, seed: int, worlds: WorldCache
) -> list[Episode]:
    """Each task played :data:`RUNS` times; ``worlds`` keeps each world built once across calls (each episode resets it)."""
    episodes = []
    for i, task in enumerate(tasks):
        for j in range(RUNS):
            rng = random.Random(f"{seed}:{i}:{j}")
            episodes.append(
                guess_rows(worlds.world(task.world), task, rng, read=read, solver=version)
            )
    return episodes


def _baselines(tasks: list[TaskSpec], episodes: list[Episode]) -> tuple[float, dict[int, float]]:
    outcomes = [e.reward.value for e in episodes]
    by_level: dict[int, list[int]] = {}
    for task, episode in zip([t for t in tasks for _ in range(RUNS)], episodes, strict=True):
        by_level.setdefault(task.provenance["level"], []).append(episode.reward.value)
    return statistics.mean(outcomes), {k: statistics.mean(v) for k, v in by_level.items()}


@pytest.mark.slow
def test_predictions_beat_constant_and_per_level_baselines_on_held_out_tasks_and_a_new_version(
    split,
) -> None:
    """On real runs, held-out Brier beats a constant and the per-level mean, for version 1 and the next version."""
    train, held = split
    # each world built once: the train tasks' are played twice, the held-out's twice
    worlds = WorldCache()
    model = IRTWorldModel()
    model.predict(train)
    v1 = _runs(train, "guesser@1", False, seed=1, worlds=worlds)
    model.update(v1)
    results = {}
    for version, read, seen_tasks, seed in (
        ("guesser@1", False, train, 1),
        ("guesser@2", True, train[:60], 3),
    ):
        if version == "guesser@2":
            v2 = _runs(seen_tasks, version, read, seed=seed, worlds=worlds)
            model.update(v2)
            trained_on = v2
        else:
            trained_on = v1
        constant, per_level = _baselines(seen_tasks, trained_on)
        outcomes = [
            e.reward.value for e in _runs(held, version, read, seed=seed + 1, worlds=worlds)
        ]
        predicted = [p for p in model.predict(held, version) for _ in range(RUNS)]
        levels = [per_level.get(t.provenance["level"], constant) for t in held for _ in range(RUNS)]
        results[version] = (
            brier(predicted, outcomes),
            brier([constant] * len(outcomes), outcomes),
            brier(levels, outcomes),
            expected_calibration_error(predicted, outcomes),
        )
    worlds.close()
    for version, (model_b, constant_b, level_b, ece) in results.items():
        assert model_b < constant_b, (version, results[version])
        assert model_b < level_b, (version, results[version])
        assert ece < 0.2, (version, results[version])
    assert model.theta["guesser@2"] > model.theta["guesser@1"], (
        "the stronger version has the higher ability"
    )


@pytest.mark.slow
def test_on_the_learning_solver_its_versions_are_predicted_better_than_by_level(
    split,
) -> None:
    """linear-pg after 20 and after 60 updates: held-out Brier beats the constant and the per-level mean.

    Measured: version 20: model 0.005, constant 0.060, per level 0.053 (held-out success
    0.062, predicted 0.054); version 60 (fitted on episodes of 50 tasks): 0.010, 0.062,
    0.053 (0.067, predicted 0.042). The two versions differ little on these tasks (their
    fitted abilities, 6.4 and 5.5, are within the fit's noise), so no order is asserted.
    """
    from coevo.agents.linear_pg import LinearPGSolver

    from tests.agents.test_linear_pg import train

    synth = ProceduralSynthesizer(["retail", "hr"])
    tasks = [
        t
        for level in range(1, 4)
        for t in synth.propose(ProposalRequest(n=60, seed=900 + level, level=level))
    ]
    random.Random(0).shuffle(tasks)
    seen, held = tasks[:120], tasks[120:]
    practice = [t for s in range(6) for t in synth.propose(ProposalRequest(n=10, seed=s, level=1))]
    solver = LinearPGSolver(lr=0.2)
    model = IRTWorldModel()
    model.predict(seen)
    for step, (updates, attempted) in enumerate(((20, seen), (40, seen[:50]))):
        train(solver, practice, updates=updates)
        episodes = solver.attempt([t for t in attempted for _ in range(RUNS)], seed=step)
        model.update(episodes)
        constant, per_level = _baselines(attempted, episodes)
        outcomes = [
            e.reward.value
            for e in solver.attempt([t for t in held for _ in range(RUNS)], seed=100 + step)
        ]
        predicted = [p for p in model.predict(held, solver.name) for _ in range(RUNS)]
        levels = [per_level.get(t.provenance["level"], constant) for t in held for _ in range(RUNS)]
        figures = (
            solver.name,
            brier(predicted, outcomes),
            brier([constant] * len(outcomes), outcomes),
            brier(levels, outcomes),
        )
        assert figures[1] < figures[2], figures
        assert figures[1] < figures[3], figures
        assert expected_calibration_error(predicted, outcomes) < 0.15, figures
        # each version's held-out success is predicted as a whole, not only task by task
        assert abs(sum(predicted) - sum(outcomes)) / len(outcomes) < 0.05, figures


def test_a_new_version_starts_from_the_latest_ability_plus_the_drift() -> None:
    """An unseen version is predicted with the latest ability plus the average step between versions."""
    model = IRTWorldModel()
    model.theta = {"a": -1.0, "b": 0.0, "c": 1.0}
    model.order = ["a", "b", "c"]
    assert model.ability("d") == pytest.approx(2.0)
    assert model.ability("b") == 0.0


def test_features_are_read_off_the_task_record(split) -> None:
    """The feature vector has one entry per documented name and depends only on the record."""
    task = split[0][0]
    phi = task_features(task)
    assert len(phi) == len(FEATURE_NAMES)
    assert (phi == task_features(task.model_copy())).all()


def test_calibration_metrics() -> None:
    """Brier and ECE of known cases; reliability bins count every prediction."""
    assert brier([1.0, 0.0], [1, 0]) == 0.0
    assert brier([0.5, 0.5], [1, 0]) == 0.25
    assert expected_calibration_error([0.9, 0.9, 0.1, 0.1], [1, 1, 0, 0]) == pytest.approx(0.1)
    assert sum(n for _, _, n in reliability([0.05, 0.5, 0.95], [0, 1, 1])) == 3


def test_the_world_model_role_conforms() -> None:
    """The registered `irt` world model passes check_role."""
    check_role(REGISTRY.create("irt"), name="irt")
