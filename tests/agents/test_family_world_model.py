"""The family-irt World model: deterministic, conformant, and sharper than irt where a Solver has learnt some kinds of task and not others."""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import pytest
from coevo.agents.family_world_model import FamilyWorldModel, reference_path, task_kinds
from coevo.agents.protocols import ProposalRequest
from coevo.agents.registry import REGISTRY
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.agents.world_models import IRTWorldModel
from coevo.arena import Episode, TaskSpec
from coevo.arena.calibration import auc
from coevo.arena.errors import StateError
from coevo.arena.gamelog import GameLog
from coevo.arena.outcomes import Reward
from coevo.run.testing import check_role

from tests.factories import IN_PROCESS_FLAGS, run_cli

ROLLOUTS = 4
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def generations() -> list[list[TaskSpec]]:
    """Six generations of 15 fresh procedural tasks, levels 1–3."""
    synth = ProceduralSynthesizer()
    return [
        [
            t
            for level in (1, 2, 3)
            for t in synth.propose(ProposalRequest(n=5, seed=100 * gen + level, level=level))
        ]
        for gen in range(6)
    ]


def _mastery(task: TaskSpec) -> float:
    """A Solver that has learnt some tool sequences and not others, whatever their surface features."""
    sequence = task_kinds(task)[1]
    return 0.85 if zlib.crc32(sequence.encode()) % 2 else 0.15


def _episodes(tasks: list[TaskSpec], gen: int) -> list[Episode]:
    rng = random.Random(gen)
    return [
        Episode(
            task_id=t.task_id,
            world_id=t.world_id,
            calls=[],
            observations=[],
            reward=Reward(
                value=int(rng.random() < _mastery(t)), submitted=True, reason="simulated"
            ),
            solver="solver-v1",
        )
        for t in tasks
        for _ in range(ROLLOUTS)
    ]


def _replay(model, generations) -> tuple[list[float], list[int]]:
    """Predict each generation's fresh tasks, then learn their outcomes, as the loop does."""
    predicted, outcomes = [], []
    for gen, tasks in enumerate(generations):
        p = model.predict(tasks)
        episodes = _episodes(tasks, gen)
        if gen >= 1:  # once both models have seen some outcomes
            predicted += [x for x in p for _ in range(ROLLOUTS)]
            outcomes += [e.reward.value for e in episodes]
        model.update(episodes)
    return predicted, outcomes


def test_family_irt_ranks_tasks_better_than_irt_when_success_depends_on_the_kind(
    generations,
) -> None:
    """Success that depends on which tool sequence a task needs: family-irt's AUC beats irt's on fresh tasks."""
    irt = auc(*_replay(IRTWorldModel(), generations))
    family = auc(*_replay(FamilyWorldModel(), generations))
    assert family > irt + 0.05, (family, irt)


def test_family_irt_is_deterministic_and_its_state_round_trips(generations) -> None:
    """The same outcomes give the same predictions and state; a model loaded from that state predicts the same."""
    a, b = FamilyWorldModel(), FamilyWorldModel()
    for model in (a, b):
        for gen, tasks in enumerate(generations[:3]):
            model.predict(tasks)
            model.update(_episodes(tasks, gen))
    fresh = generations[3]
    assert a.predict(fresh) == b.predict(fresh)
    assert a.get_state() == b.get_state()
    loaded = FamilyWorldModel()
    loaded.set_state(a.get_state())
    assert loaded.predict(fresh) == a.predict(fresh)
    with pytest.raises(StateError, match="other task features or settings"):
        FamilyWorldModel(decay=0.5).set_state(a.get_state())


def test_reference_path_scores_the_solution_as_the_solver_sees_it(generations) -> None:
    """The prior's surprisal of a reference path is positive and the same each time; its buckets lie in range."""
    task = generations[0][0]
    surprisal, buckets = reference_path(task, 64)
    assert surprisal > 0 and len(buckets) and buckets.min() >= 0 and buckets.max() < 64
    assert reference_path(task, 64)[0] == surprisal


@pytest.mark.parametrize("path", ["none", "surprisal"])
def test_the_family_irt_role_conforms(path: str) -> None:
    """The registered `family-irt` World model passes check_role (with and without the reference path)."""
    check_role(REGISTRY.create("family-irt", path=path), name="family-irt")


def test_an_experiment_selects_family_irt_and_analyze_reports_its_discrimination(tmp_path) -> None:
    """`[world_model] name = "family-irt"` runs through the CLI, and `coevo analyze` prints its AUC line."""
    out = tmp_path / "run"
    ran = run_cli(
        "run",
        "experiments/curricula.toml",
        *IN_PROCESS_FLAGS,
        "--set",
        'world_model.name="family-irt"',
        "--set",
        "run.generations=3",
        "--set",
        "curriculum.tasks_per_gen=8",
        "--set",
        "eval.per_level=2",
        "--out",
        str(out),
        cwd=ROOT,
    )
    assert ran.returncode == 0, ran.stderr
    predicted = GameLog(str(out)).read("predictions").column("p").to_pylist()
    assert predicted and len(set(predicted)) > 1, "the model's predictions are logged"
    analyzed = run_cli("analyze", str(out))
    assert analyzed.returncode == 0, analyzed.stderr
    assert "AUC at the frontier" in analyzed.stdout
