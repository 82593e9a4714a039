"""Mutation operators: children pass the Judge, move difficulty the promised way, and record lineage."""

from __future__ import annotations

import pytest
from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.mutation import OPERATORS, Mutator
from coevo.agents.synthesizers.planner import Unfit
from coevo.agents.synthesizers.procedural import DOMAINS, ProceduralSynthesizer
from coevo.arena import CHECK_NAMES, TaskSpec, WorldCache, assess_task

MECHANICAL = [c for c in CHECK_NAMES if c != "solvable"]


@pytest.fixture(scope="module")
def parents() -> dict[str, list[TaskSpec]]:
    synth = ProceduralSynthesizer()
    parents: dict[str, list[TaskSpec]] = {}
    for domain in DOMAINS:
        mixed = [
            task
            for level in (1, 2, 3, 4)
            for task in synth.propose(
                ProposalRequest(n=4, seed=40 + level, level=level, domains=[domain])
            )
        ]
        actions = synth.propose(
            ProposalRequest(n=10, seed=7, level=2, domains=[domain], families=["action"])
        )
        conditionals = synth.propose(
            ProposalRequest(n=6, seed=8, level=3, domains=[domain], families=["conditional"])
        )
        # actions on tables where a condition can be added: the conditionals without their branch
        unconditioned = [Mutator().mutate(t, "drop_condition", seed=0) for t in conditionals]
        parents[domain] = mixed + actions + conditionals + unconditioned
    return parents


@pytest.mark.parametrize("domain", list(DOMAINS))
@pytest.mark.parametrize("operator", list(OPERATORS))
def test_every_operator_makes_accepted_children_that_move_difficulty(
    parents: dict[str, list[TaskSpec]], domain: str, operator: str
) -> None:
    """Children pass every mechanical check, name parent and operator, and are harder/easier as promised."""
    mutator, cache = Mutator(), WorldCache()
    made = 0
    for seed, parent in enumerate(parents[domain]):
        try:
            child = mutator.mutate(parent, operator, seed=seed)
        except Unfit:
            continue
        made += 1
        verdict = assess_task(child, cache)
        bad = {
            n: r.reason
            for n, r in verdict.checks.items()
            if n in MECHANICAL and r.passed is not True
        }
        assert not bad, f"{operator}: {parent.instruction} => {child.instruction}\n{bad}"
        assert child.lineage.parent == parent.task_id
        assert child.lineage.operator == operator
        assert child.task_id != parent.task_id
        before, after = parent.features["difficulty"], child.features["difficulty"]
        direction = OPERATORS[operator].direction
        if direction == "harder":
            assert after > before
        elif direction == "easier":
            assert after < before
    assert made >= 2, f"{operator} applied to only {made} of {len(parents[domain])} {domain} tasks"


def test_mutation_is_deterministic_by_seed(parents: dict[str, list[TaskSpec]]) -> None:
    """The same parent, operator and seed give the same child; children chain (grandchildren)."""
    parent = parents["retail"][0]
    first = Mutator().mutate(parent, "swap_target", seed=3)
    assert first == Mutator().mutate(parent, "swap_target", seed=3)
    assert first.task_id != Mutator().mutate(parent, "swap_target", seed=4).task_id
    grandchild = Mutator().mutate(first, "swap_target", seed=1)
    assert grandchild.lineage.parent == first.task_id


def test_mutating_a_task_that_refers_to_its_world_by_id(parents: dict[str, list[TaskSpec]]) -> None:
    """A task stored with a world id is mutated given the world record, and keeps referring by id."""
    parent = parents["retail"][1]
    world = parent.world
    by_id = parent.model_copy(update={"world": parent.world_id})
    with pytest.raises(Unfit, match="pass its world record"):
        Mutator().mutate(by_id, "swap_target", seed=0)
    child = Mutator().mutate(by_id, "swap_target", seed=0, world=world)
    assert child.world == parent.world_id


def test_unknown_operator_and_plain_tasks_are_refused(examples) -> None:
    """An unknown operator names the operators; a hand-written task (no plan) says it cannot be mutated."""
    tasks, worlds = examples
    with pytest.raises(KeyError, match="add_hop"):
        Mutator().mutate(tasks[0], "add_wings", seed=0)
    with pytest.raises(Unfit, match=r"keeps no plan|pass its world"):
        Mutator().mutate(tasks[0], "add_hop", seed=0, world=worlds[tasks[0].world_id])
