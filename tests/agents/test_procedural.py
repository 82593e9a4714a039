"""The procedural Synthesizer: every domain, family and level passes the Judge; difficulty is real."""

from __future__ import annotations

import json
import re
import sqlite3
import statistics

import pytest
from coevo.agents.protocols import ProposalRequest, Synthesizer
from coevo.agents.synthesizers.planner import FAMILY_LEVELS, Target
from coevo.agents.synthesizers.procedural import DOMAINS, ProceduralSynthesizer
from coevo.agents.synthesizers.procedural.checking import stated_numbers
from coevo.arena import CHECK_NAMES, World, WorldCache, assess_task, dump_record
from coevo.arena.difficulty import LEVELS
from coevo.arena.errors import CoevoError

MECHANICAL = [c for c in CHECK_NAMES if c != "solvable"]


@pytest.fixture(scope="module")
def synth() -> ProceduralSynthesizer:
    return ProceduralSynthesizer()


@pytest.fixture(scope="module")
def cache() -> WorldCache:
    return WorldCache()


def _rejections(task, cache: WorldCache) -> dict[str, str]:
    verdict = assess_task(task, cache)
    return {
        name: result.reason
        for name, result in verdict.checks.items()
        if name in MECHANICAL and result.passed is not True
    }


CASES = [
    (domain, family, level)
    for domain in DOMAINS
    for family, levels in FAMILY_LEVELS.items()
    for level in levels
]


@pytest.mark.parametrize(("domain", "family", "level"), CASES)
def test_every_domain_family_and_level_passes_every_mechanical_check(
    synth: ProceduralSynthesizer, cache: WorldCache, domain: str, family: str, level: int
) -> None:
    """Tasks of every domain × family × level are valid, oracle-solvable, unsolved, prefix-proof, deterministic and grounded."""
    request = ProposalRequest(n=3, seed=11, level=level, domains=[domain], families=[family])
    tasks = synth.propose(request)
    assert len(tasks) == 3, f"{domain}/{family}/L{level}: only {len(tasks)} tasks: {synth.misses}"
    lo, hi = LEVELS[level]["difficulty"]
    for task in tasks:
        assert lo <= task.features["difficulty"] <= hi
        assert task.provenance["plan"]["family"] == family
        rejected = _rejections(task, cache)
        assert not rejected, f"{domain}/{family}/L{level}: {task.instruction}\n{rejected}"


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_domain_worlds_are_professional_sized_and_normalised(domain: str) -> None:
    """A domain's world has foreign keys, 8–20 tools with reads and writes, and tens to thousands of rows."""
    spec = DOMAINS[domain].build_world(5)
    assert 8 <= len(spec.tools) <= 20
    assert {t.effect for t in spec.tools} == {"read", "write"}
    rows = sum(len(t.rows) for t in spec.data.values())
    assert 50 <= rows <= 10_000
    with World(spec) as world:
        conn = world.compiled.conn
        with world.compiled.guard.trust():
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'coevo%'"
                )
            ]
            linked = [t for t in tables if conn.execute(f"PRAGMA foreign_key_list({t})").fetchall()]
        assert len(linked) >= 2, f"{domain}: too few tables with foreign keys ({linked})"
        assert not world.warnings, world.warnings


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_world_is_deterministic_by_seed(domain: str) -> None:
    """The same seed builds the same world; another seed builds another."""
    build = DOMAINS[domain].build_world
    assert build(3).world_id == build(3).world_id
    assert build(3).world_id != build(4).world_id


def _jsonl(tasks) -> str:
    return "".join(json.dumps(dump_record(t), ensure_ascii=False) + "\n" for t in tasks)


def test_same_seed_gives_byte_identical_records_and_another_seed_other_tasks() -> None:
    """Two synthesizers given the same request write the same bytes; other seeds give other tasks."""
    request = ProposalRequest(n=12, seed=7, level=3)
    first = _jsonl(ProceduralSynthesizer().propose(request))
    second = _jsonl(ProceduralSynthesizer().propose(request))
    assert first == second
    other = ProceduralSynthesizer().propose(request.model_copy(update={"seed": 8}))
    ids = {t.task_id for t in ProceduralSynthesizer().propose(request)}
    assert ids.isdisjoint({t.task_id for t in other})
    assert len(ids) == 12, "task ids within a batch are distinct"


def test_difficulty_rises_with_level(synth: ProceduralSynthesizer) -> None:
    """Mean difficulty, look-ups and distractors rise from level 1 to level 5."""
    means: dict[str, list[float]] = {"difficulty": [], "hops": [], "distractors": []}
    for level in sorted(LEVELS):
        tasks = synth.propose(ProposalRequest(n=40, seed=100 + level, level=level))
        for name, series in means.items():
            series.append(statistics.mean(t.features[name] for t in tasks))
    for name, series in means.items():
        assert series == sorted(series), f"{name} does not rise with level: {series}"
        assert series[-1] > series[0] + 1, f"{name} barely changes across levels: {series}"


def test_feature_ranges_are_honoured(synth: ProceduralSynthesizer) -> None:
    """A request for feature ranges gets tasks inside them."""
    request = ProposalRequest(n=10, seed=5, features={"hops": (3, None), "writes": (1, 1)})
    for task in synth.propose(request):
        assert task.features["hops"] >= 3
        assert task.features["writes"] == 1


def test_write_keys_are_never_in_the_instruction(synth: ProceduralSynthesizer) -> None:
    """Hidden state: every integer argument of a write is learnt from an observation, not stated."""
    tasks = synth.propose(
        ProposalRequest(n=60, seed=21, families=["action", "bulk", "conditional"])
    )
    for task in tasks:
        world = task.world
        writes = {t.name for t in world.tools if t.effect == "write"}
        stated = stated_numbers(task.instruction)
        for call in task.solution:
            if call.tool in writes:
                for name, value in call.arguments.items():
                    if isinstance(value, int) and name.endswith("_id"):
                        assert value not in stated, f"{task.instruction}: {call}"


def test_verifier_does_not_depend_on_the_solution_path(synth: ProceduralSynthesizer) -> None:
    """An equivalent solution by another path (extra look-ups first) earns the same reward."""
    tasks = synth.propose(ProposalRequest(n=10, seed=3, families=["action"], domains=["retail"]))
    for task in tasks:
        with World(task.world) as world:
            detour = [task.solution[0], *task.solution]
            assert world.run(task, detour).reward.value == 1


def test_impossible_targets_say_why(synth: ProceduralSynthesizer) -> None:
    """A family asked for below its first level, or an unknown domain, is a clear error."""
    with pytest.raises(ValueError, match="conditional: 3"):
        synth.propose(ProposalRequest(n=1, seed=1, level=1, families=["conditional"]))
    with pytest.raises(CoevoError, match="did you mean 'retail'"):
        synth.propose(ProposalRequest(n=1, seed=1, domains=["retial"]))
    with pytest.raises(CoevoError, match="relax the target"):
        synth.propose(ProposalRequest(n=1, seed=1, features={"hops": (40, None)}))


def test_synthesizer_satisfies_the_protocol(synth: ProceduralSynthesizer) -> None:
    """ProceduralSynthesizer is a Synthesizer and returns the number of tasks asked for."""
    assert isinstance(synth, Synthesizer)
    assert len(synth.propose(ProposalRequest(n=4, seed=2))) == 4
    assert synth.propose(ProposalRequest(n=0, seed=2)) == []


def test_target_rejects_bad_ranges() -> None:
    """An inverted range or unknown family is refused with the field named."""
    with pytest.raises(ValueError, match=r"features\.hops"):
        Target.of(features={"hops": (4, 2)})
    with pytest.raises(ValueError, match="unknown task family"):
        Target.of(families=["riddle"])


def test_initial_state_matches_the_world(synth: ProceduralSynthesizer) -> None:
    """The planner's copy of a world holds exactly the world's seed rows."""
    from coevo.agents.synthesizers.initial import initial_state

    spec = DOMAINS["retail"].build_world(2)
    conn = initial_state(spec)
    try:
        for table, data in spec.data.items():
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == len(data.rows)
    finally:
        conn.close()
    assert isinstance(conn, sqlite3.Connection)


def test_features_are_measured_on_the_task_itself(synth: ProceduralSynthesizer) -> None:
    """steps, hops, writes, question and branching agree with the solution and the verifier."""
    for task in synth.propose(ProposalRequest(n=40, seed=31, level=4)):
        writes = {t.name for t in task.world.tools if t.effect == "write"}
        calls = task.solution
        f = task.features
        assert f["steps"] == len(calls)
        assert f["writes"] == sum(c.tool in writes for c in calls)
        assert f["hops"] == sum(c.tool not in writes and c.tool != "submit" for c in calls)
        assert f["question"] == ("answer" in calls[-1].arguments)
        assert f["branching"] == ("; if " in task.instruction), task.instruction


def test_a_world_pool_shares_worlds_across_request_seeds() -> None:
    """With world_pool=2, seeds 1 and 3 draw in one world yet make different tasks; seed 2 uses another world."""
    synth = ProceduralSynthesizer(["retail"], world_pool=2)
    one = synth.propose(ProposalRequest(n=5, seed=1))
    three = synth.propose(ProposalRequest(n=5, seed=3))
    two = synth.propose(ProposalRequest(n=5, seed=2))
    assert {t.world_id for t in one} == {t.world_id for t in three}
    assert {t.world_id for t in one}.isdisjoint({t.world_id for t in two})
    assert {t.task_id for t in one}.isdisjoint({t.task_id for t in three})
    with pytest.raises(ValueError, match="world_pool"):
        ProceduralSynthesizer(world_pool=0)


def test_numeric_answers_compare_by_value_and_hedges_fail(synth: ProceduralSynthesizer) -> None:
    """A money or count answer is accepted as $1,234.50 or 1234.5; '12 or 13', '' and a neighbour fail."""
    from coevo.arena import ToolCall

    tasks = synth.propose(ProposalRequest(n=60, seed=12, families=["question"], domains=["retail"]))
    numeric = [t for t in tasks if re.fullmatch(r"\d+(\.\d+)?", t.solution[-1].arguments["answer"])]
    assert numeric
    for task in numeric[:8]:
        answer = task.solution[-1].arguments["answer"]
        value = float(answer)
        with World(task.world) as world:
            for given, earned in [
                (f"${value:,.2f}", 1),
                (f" {value:g} ", 1),
                (f"{answer} or {value + 1:g}", 0),
                ("", 0),
                (f"{value + 1:g}", 0),
            ]:
                calls = [*task.solution[:-1], ToolCall("submit", {"answer": given})]
                assert world.run(task, calls).reward.value == earned, (task.instruction, given)


def test_walks_never_return_to_a_row(synth: ProceduralSynthesizer) -> None:
    """No reference solution looks the same row up twice (no 'the department of the head of Finance')."""
    for task in synth.propose(ProposalRequest(n=80, seed=13, level=4)):
        reads = [
            (c.tool, tuple(sorted(c.arguments.items())))
            for c in task.solution
            if c.tool != "submit" and not c.tool.startswith(("cancel", "set", "open", "change"))
        ]
        assert len(reads) == len(set(reads)), task.instruction


def test_answer_checks_keep_codes_exact_and_integers_exact() -> None:
    """A code stored as text ('0417618938') is not a number; a huge integer compares exactly."""
    from coevo.agents.synthesizers.planner.realization import _answer_check

    conn = sqlite3.connect(":memory:")

    def passes(value, expected_sql: str, given: str) -> bool:
        return bool(
            conn.execute(_answer_check(value, expected_sql), {"answer": given}).fetchone()[0]
        )

    assert passes("0417618938", "'0417618938'", " 0417618938 ")
    assert not passes("0417618938", "'0417618938'", "417618938")
    big = 9_007_199_254_740_993
    assert passes(big, str(big), f"{big:,}")
    assert not passes(big, str(big), str(big - 1))
    assert passes("123.40", "'123.40'", "$123.4")
    assert not passes("123.40", "'123.40'", "123.4 or 124.4")


# ---- short worlds and relays, for small models ------------------------------------------------


def test_a_tool_subset_world_offers_the_solution_s_tools_and_that_many_more(cache) -> None:
    """tool_subset = 1: each task's world keeps its solution's tools and one other; the Judge accepts every task."""
    synth = ProceduralSynthesizer(["retail", "hr"], world_pool=2, tool_subset=1)
    tasks = synth.propose(ProposalRequest(n=12, seed=4, level=2))
    for task in tasks:
        called = {c.tool for c in task.solution} - {"submit"}
        offered = {t.name for t in task.world.tools}
        assert called <= offered and len(offered - called) == 1, (called, offered)
        assert not _rejections(task, cache), task.instruction
    again = ProceduralSynthesizer(["retail", "hr"], world_pool=2, tool_subset=1)
    assert [t.task_id for t in again.propose(ProposalRequest(n=12, seed=4, level=2))] == [
        t.task_id for t in tasks
    ]


def test_a_relay_states_its_answer_and_is_one_submit_at_level_1(cache) -> None:
    """relay_share = 1: every question becomes a relay: the answer in the instruction, submit alone, level 1, accepted."""
    from coevo.arena.difficulty import task_level

    synth = ProceduralSynthesizer(["retail"], world_pool=2, families=["question"], relay_share=1.0)
    tasks = synth.propose(ProposalRequest(n=6, seed=1, level=2))
    for task in tasks:
        (only,) = task.solution
        assert only.tool == "submit" and str(only.arguments["answer"]) in task.instruction
        assert task_level(task) == 1 and task.provenance["relay"] is True
        assert "plan" not in task.provenance
        assert not _rejections(task, cache), task.instruction


def test_the_synthesizer_s_families_are_drawn_when_a_request_names_none() -> None:
    """families = [question]: a level's requests give questions only; a bad family is refused before a run."""
    synth = ProceduralSynthesizer(["retail"], world_pool=2, families=["question"])
    assert all(
        t.features.get("question") for t in synth.propose(ProposalRequest(n=8, seed=0, level=1))
    )

    class Settings:
        def arguments(self) -> dict:
            return {"families": ["questions"], "relay_share": 2.0, "tool_subset": -1}

    with pytest.raises(CoevoError) as refused:
        ProceduralSynthesizer.preflight(Settings())
    assert "questions" in str(refused.value) and "relay_share" in str(refused.value)
    assert "tool_subset" in str(refused.value)
