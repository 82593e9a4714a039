"""Dynamic sampling's rounds: when a generation asks for more tasks, how many, and which the curricula give."""

from __future__ import annotations

import pytest
from coevo.arena.gamelog.figures import informative
from coevo.curricula.base import Curriculum
from coevo.curricula.conformance import curriculum_tasks
from coevo.curricula.dynamic import budget, next_round
from coevo.curricula.registry import curriculum_config, make_curriculum


def _curriculum(**settings) -> Curriculum:
    return make_curriculum(curriculum_config({"tasks_per_gen": 4, **settings}), seed=3)


def _admitted(curriculum: Curriculum, predicted: list[float]) -> list[str]:
    """Admit len(predicted) tasks at generation 0 with those predictions; their ids."""
    tasks = curriculum_tasks(len(predicted))
    curriculum.admit(0, tasks, predicted)
    return [t.task_id for t in tasks]


def test_a_group_is_informative_when_its_rewards_differ_beyond_rounding() -> None:
    """Two rewards or more that differ; a group of one, or of equal rewards (0.1 + 0.2 against 0.3 too), is not."""
    assert informative([0, 1, 0, 0]) and informative([1.0, 0.5])
    assert not informative([1, 1, 1]) and not informative([0, 0]) and not informative([1])
    assert not informative([]) and not informative([0.1 + 0.2, 0.3])


def test_without_dynamic_sampling_there_is_no_further_round() -> None:
    """Off (the default): the batch is the curriculum's, however uninformative its groups."""
    curriculum = _curriculum(name="uniform")
    ids = _admitted(curriculum, [0.5] * 12)
    curriculum.batch(0)
    assert not curriculum.config.dynamic_sampling and budget(curriculum.config) == 4
    assert next_round(curriculum, 0, {t: [0, 0, 0, 0] for t in ids[:4]}) == []


def test_a_round_asks_for_what_is_missing_at_the_share_seen_within_the_budget() -> None:
    """Missing informative groups over the share so far, at least the number missing, at most the budget left; none once full or spent."""
    curriculum = _curriculum(name="uniform", dynamic_sampling=True, sampling_budget=3.0)
    ids = _admitted(curriculum, [0.5] * 24)
    played = {t: [0, 1] if i < 2 else [0, 0] for i, t in enumerate(ids[:4])}  # 2 of 4 teach
    assert budget(curriculum.config) == 12
    assert len(next_round(curriculum, 0, played)) == 4  # 2 missing at a share of 1/2
    played = {t: [0, 1] if i < 1 else [1, 1] for i, t in enumerate(ids[:4])}  # 1 of 4
    assert len(next_round(curriculum, 0, played)) == 8  # 3 missing at 1/4: 12, capped at 8 left
    none = {t: [0, 0] for t in ids[:4]}
    assert len(next_round(curriculum, 0, none)) == 8  # no share seen: the whole budget left
    full = {t: [0, 1] for t in ids[:4]}
    assert next_round(curriculum, 0, full) == []
    spent = {t: [0, 0] for t in ids[:12]}
    assert next_round(curriculum, 0, spent) == []
    chosen = next_round(curriculum, 0, none)
    assert not {t.task_id for t in chosen} & set(none), "a round never plays a task again"


def test_the_further_tasks_are_those_whose_estimate_is_nearest_the_curriculums_aim() -> None:
    """plr (and every curriculum by default): p̂ nearest 0.5 first, p̂ near 0 or 1 last; target-band: nearest its band's middle."""
    plr = _curriculum(name="plr", dynamic_sampling=True)
    ids = _admitted(plr, [0.02, 0.97, 0.45, 0.6, 0.5, 0.1])
    chosen = [t.task_id for t in plr.more(0, 3, {ids[4]})]
    assert chosen == [ids[2], ids[3], ids[5]]
    band = _curriculum(name="target-band", band=[0.1, 0.3], dynamic_sampling=True)
    ids = _admitted(band, [0.02, 0.97, 0.45, 0.6, 0.5, 0.22])
    assert band.aim() == pytest.approx(0.2)
    assert [t.task_id for t in band.more(0, 2, set())] == [ids[5], ids[0]]
    assert band.more(0, 0, set()) == []


def test_uniform_draws_further_tasks_never_played_with_no_preference_by_estimate() -> None:
    """uniform stays uniform: tasks not yet played, the newest admitted first, then by id; never a replay."""
    curriculum = _curriculum(name="uniform", dynamic_sampling=True)
    tasks = curriculum_tasks(12)
    curriculum.admit(0, tasks[:6], [0.01] * 6)
    curriculum.admit(1, tasks[6:], [0.5] * 6)
    batch = [t.task_id for t in curriculum.batch(1)]
    chosen = [t.task_id for t in curriculum.more(1, 20, set(batch))]
    newest = sorted(t.task_id for t in tasks[6:] if t.task_id not in batch)
    assert chosen[: len(newest)] == newest
    assert not set(chosen) & set(batch)
    curriculum.observe(1, batch + chosen, [0] * (len(batch) + len(chosen)))
    assert curriculum.more(1, 20, set()) == [], "a played task is never offered again"


@pytest.mark.parametrize("name", ["uniform", "plr", "accel", "target-band"])
def test_the_plan_asks_for_the_budgets_proposals_and_is_unchanged_without_it(name) -> None:
    """With dynamic sampling the fresh proposals scale by sampling_budget (its rounds need spares); off, the plan is what it was."""
    off = _curriculum(name=name, tasks_per_gen=5)
    on = _curriculum(name=name, tasks_per_gen=5, dynamic_sampling=True, sampling_budget=2.0)
    asked = sum(r.n for r in off.plan(0).requests)
    assert asked == {"target-band": 15}.get(name, 8)  # ceil(5 × 1.5), twice for the band
    assert sum(r.n for r in on.plan(0).requests) == {"target-band": 30}.get(name, 15)
