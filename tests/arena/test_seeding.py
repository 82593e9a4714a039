"""Derived seeds: stable, distinct by every part, and the run's seed in every one the loop uses."""

from __future__ import annotations

import pytest
from coevo.arena.seeding import derive_seed
from coevo.curricula.registry import make_curriculum
from hypothesis import given
from hypothesis import strategies as st

parts = st.lists(
    st.integers(min_value=-(2**70), max_value=2**70) | st.text(max_size=12), max_size=5
)


@given(parts)
def test_a_derived_seed_is_a_stable_63_bit_number(values):
    """The same parts give the same seed, in [0, 2**63) (it fits an int64 column)."""
    seed = derive_seed(*values)
    assert seed == derive_seed(*values)
    assert 0 <= seed < 2**63


def test_every_part_counts_and_parts_do_not_run_together():
    """Changing any part changes the seed; ("a", "b:c") and ("a:b", "c") and 1 vs "1" differ."""
    base = derive_seed(7, "solve", 3, "train", 0)
    variants = [
        derive_seed(8, "solve", 3, "train", 0),
        derive_seed(7, "solve", 4, "train", 0),
        derive_seed(7, "solve", 3, "eval", 0),
        derive_seed(7, "solve", 3, "train", 1),
    ]
    assert len({base, *variants}) == 5
    assert derive_seed("a", "b:c") != derive_seed("a:b", "c")
    assert derive_seed(1) != derive_seed("1")
    with pytest.raises(TypeError, match="ints and strings"):
        derive_seed(1.5)


def test_two_runs_with_different_seeds_share_no_curriculum_draw():
    """Proposal and mutation seeds include the run's seed: two run seeds never ask for the same tasks."""
    requests = {}
    for run_seed in (0, 1):
        curriculum = make_curriculum({"name": "uniform", "tasks_per_gen": 16}, run_seed)
        requests[run_seed] = {r.seed for gen in range(5) for r in curriculum.plan(gen).requests}
    assert requests[0] and requests[1] and not requests[0] & requests[1]


def test_accel_mutation_seeds_follow_the_run_seed():
    """ACCEL's mutations of the same parents get other seeds under another run seed (they used not to)."""
    from coevo.run.testing import curriculum_tasks

    tasks = curriculum_tasks(8)
    seeds = {}
    for run_seed in (0, 1):
        accel = make_curriculum({"name": "accel", "tasks_per_gen": 4, "min_fill": 2}, run_seed)
        accel.admit(0, tasks, [0.5] * len(tasks))
        played = [t.task_id for t in accel.batch(0) for _ in range(2)]
        accel.observe(0, played, [1, 0] * (len(played) // 2))
        seeds[run_seed] = [m.seed for m in accel.plan(1).mutations]
    assert seeds[0] and len(seeds[0]) == len(seeds[1])
    assert not set(seeds[0]) & set(seeds[1])
