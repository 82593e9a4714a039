"""Curricula: what they ask for, what they replay, and that their state is enough to go on."""

from __future__ import annotations

import numpy as np
import pytest
from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.arena import TaskSpec
from coevo.arena.difficulty import task_level
from coevo.curricula.accel import ACCEL
from coevo.curricula.plr import PLR
from coevo.curricula.registry import curriculum_config, make_curriculum
from coevo.curricula.scorers import absolute_zero, learnability, r_zero, scorer_named
from coevo.curricula.target_band import TargetBand
from coevo.curricula.uniform import Uniform


def CurriculumConfig(**settings):
    return curriculum_config(settings)


@pytest.fixture(scope="module")
def pool() -> list[TaskSpec]:
    synth = ProceduralSynthesizer(["retail"])
    return [
        t
        for level in (1, 2, 3)
        for t in synth.propose(ProposalRequest(n=20, seed=level, level=level))
    ]


def test_scorers_peak_where_the_solver_is_unsure() -> None:
    """Learnability and R-Zero peak at p = 0.5 and vanish at 0 and 1; Absolute Zero favours hard but solvable."""
    assert learnability(0.5) == 1.0 and learnability(0.0) == learnability(1.0) == 0.0
    assert r_zero(0.5) == 1.0 and r_zero(0.25) == 0.5 and r_zero(1.0) == 0.0
    assert (
        absolute_zero(0.1) > absolute_zero(0.9) > 0
        and absolute_zero(0.0) == absolute_zero(1.0) == 0
    )
    with pytest.raises(KeyError, match="learnability"):
        scorer_named("learnabilty")


def test_levels_are_read_off_the_measured_difficulty(pool) -> None:
    """A task's level is the band of its difficulty feature, which is what the synthesizer aimed at."""
    assert [task_level(t) for t in pool] == [t.provenance["level"] for t in pool]


def test_uniform_asks_for_every_level_and_trains_on_fresh_tasks_only(pool) -> None:
    """Uniform spreads its requests over the levels, deterministically, and never replays."""
    config = CurriculumConfig(name="uniform", tasks_per_gen=8, levels=[1, 2, 3])
    first, again = Uniform(config, 3), Uniform(config, 3)
    plan = first.plan(0)
    assert plan == again.plan(0)
    assert sum(r.n for r in plan.requests) == 12  # 8 × oversample 1.5
    assert {r.level for r in plan.requests} <= {1, 2, 3}
    first.admit(0, pool[:10], [0.5] * 10)
    batch = first.batch(0)
    assert [t.task_id for t in batch] == [t.task_id for t in pool[:8]]
    first.observe(0, [t.task_id for t in batch], [1] * 8)
    first.admit(1, pool[10:20], [0.5] * 10)
    assert {t.task_id for t in first.batch(1)} <= {t.task_id for t in pool[10:20]}


def _play(curriculum, gen: int, tasks: list[TaskSpec], success: dict[str, float]) -> list[TaskSpec]:
    curriculum.admit(gen, tasks, [0.5] * len(tasks))
    batch = curriculum.batch(gen)
    ids, rewards = [], []
    for task in batch:
        p = success.get(task.task_id, 0.0)
        for k in range(4):
            ids.append(task.task_id)
            rewards.append(int(k < round(p * 4)))
    curriculum.observe(gen, ids, rewards)
    return batch


def test_plr_replays_the_tasks_the_solver_is_unsure_about(pool) -> None:
    """Once min_fill tasks were played, PLR replays mostly high-learnability tasks, never the solved or hopeless ones first."""
    config = CurriculumConfig(
        name="plr", tasks_per_gen=10, min_fill=10, replay_prob=0.5, staleness=0.1, temperature=0.3
    )
    plr = PLR(config, 0)
    unsure = {t.task_id: 0.5 for t in pool[:5]}
    solved = {t.task_id: 1.0 for t in pool[5:10]}
    assert plr.replay_slots(0) == 0
    _play(plr, 0, pool[:10], {**unsure, **solved})
    assert plr.replay_slots(1) == 5 and plr.fresh_slots(1) == 5
    weights = dict(zip(plr.buffer, plr.replay_distribution(1), strict=True))
    assert sum(weights[t] for t in unsure) >= 0.9, "the unsure tasks carry most of the replay mass"
    batch = _play(plr, 1, pool[10:20], {})
    replayed = [t.task_id for t in batch[:5]]
    # five draws without replacement from that distribution: three or more unsure ones 99% of the time
    assert sum(t in unsure for t in replayed) >= 3
    p = plr.replay_distribution(2)
    assert p.sum() == pytest.approx(1.0) and (p > 0).all()


def test_accel_mutates_its_best_tasks_harder_when_solved(pool) -> None:
    """ACCEL plans mutations of high-scoring buffer tasks: harder operators for tasks mostly solved."""
    config = CurriculumConfig(name="accel", tasks_per_gen=10, min_fill=4, mutations=0.5)
    accel = ACCEL(config, 0)
    _play(accel, 0, pool[:10], {t.task_id: 0.75 for t in pool[:10]})
    plan = accel.plan(1)
    assert plan.mutations
    assert {m.operator for m in plan.mutations} <= {"add_hop", "add_distractor", "add_condition"}
    assert {m.parent for m in plan.mutations} <= {t.task_id for t in pool[:10]}


def test_target_band_moves_the_frontier_with_the_predictions(pool) -> None:
    """The frontier goes up when its tasks are predicted above the band, and down when below."""
    config = CurriculumConfig(name="target-band", tasks_per_gen=8, levels=[1, 2, 3])
    band = TargetBand(config, 0)
    assert {r.level for r in band.plan(0).requests} <= {1, 2}
    level1 = [t for t in pool if task_level(t) == 1]
    band.admit(0, level1, [0.9] * len(level1))
    assert band.level == 2
    level2 = [t for t in pool if task_level(t) == 2]
    band.admit(1, level2, [0.05] * len(level2))
    assert band.level == 2, "a level just reached is predicted low: it is not left at once"
    band.admit(1 + band.config.patience, level2, [0.05] * len(level2))
    assert band.level == 1
    with pytest.raises(ValueError, match="band"):
        TargetBand(CurriculumConfig(name="target-band", band=(0.8, 0.2)), 0)


def test_state_is_enough_to_go_on(pool) -> None:
    """A curriculum restored from state() and the task records makes the same next plan and batch."""
    for name in ("uniform", "plr", "accel", "target-band"):
        replay = {"min_fill": 4} if name in ("plr", "accel") else {}
        config = CurriculumConfig(name=name, tasks_per_gen=6, **replay)
        a = make_curriculum(config, 5)
        success = {t.task_id: float(np.random.default_rng(i).random()) for i, t in enumerate(pool)}
        _play(a, 0, pool[:12], success)
        _play(a, 1, pool[12:24], success)
        b = make_curriculum(config, 5)
        b.load(a.state(), {t.task_id: t for t in pool})
        assert a.plan(2) == b.plan(2), name
        a.admit(2, pool[24:36], [0.5] * 12)
        b.admit(2, pool[24:36], [0.5] * 12)
        assert [t.task_id for t in a.batch(2)] == [t.task_id for t in b.batch(2)], name
        with pytest.raises(ValueError, match="curriculum"):
            make_curriculum(
                CurriculumConfig(name="uniform" if name != "uniform" else "plr"), 5
            ).load(a.state(), {t.task_id: t for t in pool})


def test_a_key_the_named_curriculum_does_not_take_is_an_error_naming_both() -> None:
    """`band` given to uniform, or a misspelt key, is refused with the key, the curriculum and what it takes."""
    with pytest.raises(
        ValueError, match=r"'curriculum\.band' is a setting of 'target-band', not of 'uniform'"
    ):
        CurriculumConfig(name="uniform", band=[0.3, 0.7])
    with pytest.raises(
        ValueError, match=r"(?s)the curriculum 'uniform'.*unknown key 'curriculum\.bnad'"
    ):
        CurriculumConfig(name="uniform", bnad=[0.3, 0.7])
    with pytest.raises(ValueError, match=r"did you mean 'curriculum\.replay_prob'"):
        CurriculumConfig(name="plr", replay_prop=0.3)
    assert type(CurriculumConfig(name="accel", mutations=0.2)).__name__ == "ACCELConfig"


def _play_levels(band, gen: int, pool: list[TaskSpec], success: dict[int, float]) -> list[TaskSpec]:
    """One generation of target-band against a Solver whose success depends only on the level."""
    fresh = [t for t in pool if task_level(t) in (band.level, band.level + 1)]
    band.admit(gen, fresh, [0.5] * len(fresh))
    batch = band.batch(gen)
    ids, rewards = [], []
    for i, task in enumerate(batch):
        p = success.get(task_level(task) or 0, 0.0)
        for k in range(4):
            ids.append(task.task_id)
            rewards.append(int((i * 4 + k) % 20 < round(p * 20)))
    band.observe(gen, ids, rewards)
    return batch


def test_target_band_moves_up_on_observed_mastery_and_back_when_the_level_cannot_be_learnt(
    pool,
) -> None:
    """With predictions stuck mid-band, observed success moves the frontier: up once the level above is learnable, back down when the new level stays out of reach."""
    config = CurriculumConfig(name="target-band", tasks_per_gen=8, levels=[1, 2, 3], patience=3)
    band = TargetBand(config, 0)
    levels = []
    for gen in range(12):
        _play_levels(band, gen, pool, {1: 0.6, 2: 0.2, 3: 0.0})
        levels.append(band.level)
    assert 2 in levels, (
        f"level 1 solved 60% and level 2 20% of the time: the frontier must move up ({levels})"
    )
    first = levels.index(2)
    assert levels[first : first + config.patience - 1] == [2] * (config.patience - 1), levels
    band = TargetBand(config, 0)
    levels = []
    for gen in range(12):
        _play_levels(band, gen, pool, {1: 0.6, 2: 0.2, 3: 0.0} if gen < 4 else {1: 0.6, 2: 0.0})
        levels.append(band.level)
    assert levels[-1] == 1 and 2 in levels, (
        f"a level the Solver never solves is left after patience generations ({levels})"
    )
    band = TargetBand(config, 0)
    levels = []
    for gen in range(16):
        # level 1 is mastered (above the band), level 2 learnable at first, then out of reach
        _play_levels(band, gen, pool, {1: 0.9, 2: 0.2} if gen < 2 else {1: 0.9, 2: 0.0})
        levels.append(band.level)
    down = next(i for i in range(1, len(levels)) if levels[i] < levels[i - 1])
    assert levels[down : down + config.patience] == [1] * config.patience, (
        f"after moving back it stays patience generations, though the level is mastered ({levels})"
    )


def test_target_band_trains_an_exploration_share_above_the_frontier(pool) -> None:
    """`explore` of each batch is fresh tasks above the frontier, even when all are predicted in band."""
    config = CurriculumConfig(
        name="target-band", tasks_per_gen=8, levels=[1, 2, 3], explore=0.25, distinct=False
    )
    band = TargetBand(config, 0)
    level1 = [t for t in pool if task_level(t) == 1][:20]
    level2 = [t for t in pool if task_level(t) == 2][:20]
    band.admit(0, [*level1, *level2], [0.5] * len(level1) + [0.1] * len(level2))
    batch = band.batch(0)
    above = [t for t in batch if task_level(t) == 2]
    assert len(batch) == 8 and len(above) == 2, [task_level(t) for t in batch]


def test_target_band_trains_on_distinct_task_shapes_first(pool) -> None:
    """With `distinct` (the default), no fresh task repeats the signature of one chosen while a task of a new shape is left out."""
    from coevo.arena.novelty import signature

    level1 = [t for t in pool if task_level(t) == 1]
    keys = {t.task_id: signature(t).key() for t in level1}
    assert len(set(keys.values())) < len(level1), "the pool repeats shapes (the case that matters)"
    size = len(set(keys.values())) - 1
    for distinct in (True, False):
        config = CurriculumConfig(
            name="target-band", tasks_per_gen=size, levels=[1], explore=0.0, distinct=distinct
        )
        band = TargetBand(config, 0)
        band.admit(0, level1, [0.5] * len(level1))
        chosen = [keys[t.task_id] for t in band.batch(0)]
        if distinct:
            assert len(set(chosen)) == len(chosen) == size, chosen
        else:
            assert len(set(chosen)) < size, "without it, repeats crowd out new shapes"
