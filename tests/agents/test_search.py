"""The search Judge: proves solvability without the reference solution, and says 'unproven' otherwise."""

from __future__ import annotations

import pytest
from coevo.agents.action_space import ActionSpace, instruction_values
from coevo.agents.judges import SearchJudge
from coevo.agents.protocols import ProposalRequest
from coevo.agents.registry import REGISTRY
from coevo.agents.search import search_solve
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.arena import CheckSpec, TaskSpec, World
from coevo.arena.testing import check_role


@pytest.fixture(scope="module")
def synth() -> ProceduralSynthesizer:
    return ProceduralSynthesizer()


def _solved(tasks: list[TaskSpec]) -> int:
    worlds: dict[str, World] = {}
    solved = 0
    for task in tasks:
        world = worlds.setdefault(task.world_id, World(task.world))
        result = search_solve(task, world)
        if result.solved:
            assert result.calls is not None
            # the calls it found really earn 1 in a fresh episode
            assert world.run(task, result.calls).reward.value == 1
            solved += 1
    for world in worlds.values():
        world.close()
    return solved


def test_the_search_solves_low_level_tasks_without_the_solution(
    synth: ProceduralSynthesizer,
) -> None:
    """Every sampled level-1 task of every domain is solved, and the found calls earn 1 on replay."""
    tasks = synth.propose(ProposalRequest(n=20, seed=61, level=1))
    assert _solved(tasks) >= 19


def test_the_search_solves_most_middle_level_tasks(synth: ProceduralSynthesizer) -> None:
    """At level 2 the search proves a good share within its budget (measured: 16–20 of 30)."""
    tasks = synth.propose(ProposalRequest(n=12, seed=62, level=2, families=["question", "action"]))
    assert _solved(tasks) >= 6


def test_an_unsolvable_task_is_unproven_with_the_budget_stated(
    synth: ProceduralSynthesizer,
) -> None:
    """A task whose goal no tool can reach (a status the schema forbids) is not solved; the reason names the budget."""
    task = synth.propose(
        ProposalRequest(n=1, seed=3, level=1, domains=["retail"], families=["action"])
    )[0]
    impossible = task.model_copy(
        update={
            "verifier": task.verifier.model_copy(
                update={
                    "checks": [CheckSpec(name="gone", sql="SELECT count(*) = -1 FROM customers")]
                }
            )
        }
    )
    with World(task.world) as world:
        result = search_solve(impossible, world, budget=300)
    assert not result.solved and result.calls is None
    assert result.spent >= 300
    assert "budget of 300 tool calls" in result.reason


def test_the_search_judge_records_solvable_and_conforms(synth: ProceduralSynthesizer) -> None:
    """The `search` judge fills `solvable` (solved with its call count, or unproven) and passes check_role."""
    judge = SearchJudge(budget=2000)
    tasks = synth.propose(ProposalRequest(n=4, seed=64, level=1))
    for verdict in judge.assess(tasks):
        assert verdict.accepted
        solvable = verdict.checks["solvable"]
        assert solvable.passed is True, solvable.reason
        assert "earned 1 in" in solvable.reason
    check_role(REGISTRY.create("search", budget=500), name="search")


def test_instruction_values_are_pointers_into_the_text() -> None:
    """Quoted strings, emails, codes, numbers and names are read off the instruction."""
    values = dict(
        instruction_values(
            "Open a return for the most recent order of Ada Ode (ada@ex.io) with the reason "
            "'changed mind'; booking VPVGLG, SKU PKG-7520, 3 units."
        )
    )
    assert values["changed mind"] == "quoted"
    assert values["ada@ex.io"] == "email"
    assert values["VPVGLG"] == "code" and values["PKG-7520"] == "code"
    assert values[3] == "number"
    assert values["Ada Ode"] == "name"


def test_actions_copy_values_and_say_where_from(synth: ProceduralSynthesizer) -> None:
    """Every candidate argument comes from the instruction, an observation or the parameter's enum."""
    task = synth.propose(ProposalRequest(n=1, seed=5, level=2, domains=["retail"]))[0]
    space = ActionSpace(task.world)
    with World(task.world) as world:
        world.reset(task)
        observations = [world.step(task.solution[0])]
    for action in space.actions(task.instruction, observations):
        for name, source in action.sources.items():
            assert source.origin in {"instruction", "observation", "enum"}
            if source.origin == "observation":
                assert source.column in observations[-1].columns
            assert name in action.call.arguments
