"""The world runtime: build once, reset by deserialize, step tool calls; failures are observations."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from coevo.arena import (
    Episode,
    EpisodeError,
    Limits,
    SpecError,
    TaskSpec,
    ToolCall,
    World,
    WorldSpec,
    verify,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.factories import example, mini_task, mini_world, tool


def make(
    world: dict[str, Any] | None = None, *, limits: Limits | None = None, task_edit=None
) -> tuple[World, TaskSpec]:
    world = world or mini_world()
    built = World(world, limits=limits or Limits())
    task = mini_task(world=built.id)
    if task_edit:
        task_edit(task)
    return built, TaskSpec.model_validate(task)


@pytest.fixture
def mini():
    world, task = make()
    yield world, task
    world.close()


def test_read_tool_returns_columns_and_rows(mini):
    """A read tool returns the last statement's rows with column names."""
    world, task = mini
    assert world.reset(task).step == 0
    obs = world.step(ToolCall("find_account", {"email": "dana@acme.io"}))
    assert obs.ok and obs.step == 1 and obs.tool == "find_account"
    assert obs.columns == ("id", "name", "plan")
    assert obs.rows == [(1, "Dana Reyes", "pro")]
    assert obs.rowcount is None and not obs.done


def test_write_tool_returns_row_count_and_changes_state(mini):
    """A write whose last statement returns no rows reports how many rows it changed."""
    world, task = mini
    world.reset(task)
    obs = world.step(ToolCall("close_ticket", {"ticket_id": 10}))
    assert obs.ok and obs.rowcount == 1 and obs.columns is None
    rows = world.step(ToolCall("list_tickets", {"account_id": 1})).rows
    assert (10, "VPN outage", "closed", 2) in rows


def test_reset_restores_the_initial_state(mini):
    """After reset, nothing an earlier episode wrote is visible."""
    world, task = mini
    world.reset(task)
    world.step(ToolCall("close_ticket", {"ticket_id": 11}))
    world.reset(task)
    rows = world.step(ToolCall("list_tickets", {"account_id": 1})).rows
    assert (11, "Invoice copy", "open", 4) in rows


def test_submit_ends_the_episode_with_the_reward(mini):
    """submit verifies the state; the reference path earns 1, doing nothing earns 0."""
    world, task = mini
    episode = world.run(task, [ToolCall(c.tool, c.arguments) for c in task.solution])
    assert episode.reward.value == 1 and episode.success and episode.reward.submitted
    assert episode.observations[-1].done and episode.observations[-1].reward == episode.reward
    nothing = world.run(task, [ToolCall("submit")])
    assert nothing.reward.value == 0
    assert "closed" in nothing.reward.reason


def test_stepping_without_an_episode_raises_episode_error(mini):
    """step() before reset() or after the episode ended is a programming error."""
    world, task = mini
    with pytest.raises(EpisodeError, match="reset"):
        world.step(ToolCall("find_account", {"email": "x"}))
    world.reset(task)
    world.step(ToolCall("submit"))
    with pytest.raises(EpisodeError, match="over"):
        world.step(ToolCall("submit"))


def test_step_budget_ends_the_episode_with_reward_zero(mini):
    """Spending max_steps without submit ends the episode, reward 0, truncated."""
    world, task = mini
    episode = world.run(task, [ToolCall("count_open", {"account_id": 1})] * 5, max_steps=3)
    assert len(episode.calls) == 3
    assert episode.truncated and episode.reward.value == 0
    assert "step budget of 3" in episode.reward.reason


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (ToolCall("close_tiket", {"ticket_id": 10}), "did you mean 'close_ticket'"),
        (ToolCall("close_ticket", {}), "missing required argument 'ticket_id'"),
        (ToolCall("close_ticket", {"ticket_id": "ten"}), "must be integer, got 'ten' (string)"),
        (ToolCall("close_ticket", {"ticket_id": 10, "tickt": 1}), "unknown argument 'tickt'"),
        (ToolCall("set_priority", {"ticket_id": 10, "priority": 9}), "breaks maximum 5"),
        (ToolCall("close_ticket", {"ticket_id": 2**70}), "outside SQLite's 64-bit integer range"),
        (ToolCall("close_ticket", ["not", "a", "dict"]), "must be a JSON object"),  # type: ignore[arg-type]
        (ToolCall("submit", {"answer": 42}), "'answer' must be a string"),
        (ToolCall("submit", {"reply": "x"}), "submit takes only 'answer'"),
    ],
)
def test_bad_calls_are_observations_and_the_episode_goes_on(mini, call, expected):
    """An unknown tool or bad arguments give an error observation naming the problem; the episode continues."""
    world, task = mini
    world.reset(task)
    obs = world.step(call)
    assert not obs.ok and not obs.done
    assert expected in obs.error
    assert world.step(ToolCall("count_open", {"account_id": 1})).ok


def test_integral_float_binds_as_integer(mini):
    """JSON 10.0 is an integer in JSON Schema; it binds as 10."""
    world, task = mini
    world.reset(task)
    assert world.step(ToolCall("close_ticket", {"ticket_id": 10.0})).rowcount == 1


def _world_with(*extra_tools, schema=(), **limits) -> tuple[World, TaskSpec]:
    world = mini_world()
    world["schema"] = world["schema"] + list(schema)
    world["tools"] = world["tools"] + list(extra_tools)
    return make(world, limits=Limits(**limits))


def test_constraint_and_foreign_key_failures_change_nothing():
    """A CHECK or foreign-key failure is an observation; a multi-statement tool rolls back entirely."""
    world, task = _world_with(
        tool(
            "open_ticket",
            "INSERT INTO tickets(account_id, subject, status) VALUES (:account_id, :subject, 'open')",
            effect="write",
            properties={"account_id": {"type": "integer"}, "subject": {"type": "string"}},
            required=["account_id", "subject"],
        ),
        tool(
            "reopen_and_break",
            [
                "UPDATE tickets SET status = 'open' WHERE id = 13",
                "UPDATE tickets SET status = 'bogus' WHERE id = 10",
            ],
            effect="write",
        ),
    )
    world.reset(task)
    fk = world.step(ToolCall("open_ticket", {"account_id": 99, "subject": "ghost"}))
    assert (
        not fk.ok
        and "FOREIGN KEY constraint failed" in fk.error
        and "nothing was changed" in fk.error
    )
    broken = world.step(ToolCall("reopen_and_break", {}))
    assert not broken.ok and "CHECK constraint failed" in broken.error
    rows = dict((r[0], r[2]) for r in world.step(ToolCall("list_tickets", {"account_id": 1})).rows)
    assert rows[13] == "closed" and rows[10] == "open"
    ok = world.step(ToolCall("open_ticket", {"account_id": 1, "subject": "new"}))
    assert ok.ok and ok.rowcount == 1


def test_trigger_raise_reaches_the_agent_as_its_message():
    """RAISE(ABORT, msg) in a world trigger becomes the observation's error text."""
    task, world_spec = example("retail")
    with World(world_spec) as world:
        world.reset(task)
        obs = world.step(ToolCall("cancel_order", {"order_id": 19}))
        assert not obs.ok and "cannot be cancelled; open a return instead" in obs.error


def test_recursive_cte_bomb_ends_with_a_budget_observation():
    """An endless recursive CTE stops at the VM-instruction budget; the next call works."""
    world, task = _world_with(
        tool(
            "bomb",
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
        ),
        vm_instructions=200_000,
    )
    world.reset(task)
    obs = world.step(ToolCall("bomb", {}))
    assert not obs.ok and "budget of 200,000 SQLite VM instructions" in obs.error
    assert world.step(ToolCall("count_open", {"account_id": 1})).rows == [(2,)]


def test_huge_zeroblob_is_refused_by_the_length_limit():
    """zeroblob(1e9) fails at once with the size limit named."""
    world, task = _world_with(tool("blob", "SELECT length(zeroblob(1e9))"))
    world.reset(task)
    obs = world.step(ToolCall("blob", {}))
    assert not obs.ok and "exceed 1,000,000 bytes" in obs.error


@pytest.mark.slow  # a process of its own
def test_bombs_keep_memory_small_in_a_fresh_process():
    """In a separate process, the CTE bomb and zeroblob(1e9) end cleanly and peak memory stays small."""
    script = textwrap.dedent(
        """
        import json, resource
        from coevo.arena import World, TaskSpec, ToolCall
        from tests.factories import mini_world, mini_task, tool
        w = mini_world()
        w["tools"] += [tool("bomb", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"),
                       tool("blob", "SELECT zeroblob(1e9)"),
                       tool("wide", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT group_concat(printf('%.1000c', 'x')) FROM c")]
        world = World(w)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        world.reset(TaskSpec.model_validate(mini_task(world=world.id)))
        errors = [world.step(ToolCall(name, {})).error for name in ("bomb", "blob", "wide")]
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({"errors": errors, "grew_kib": after - before}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    report = json.loads(result.stdout)
    assert all(e and "failed" in e for e in report["errors"]), report
    assert report["grew_kib"] < 100_000, report  # < 100 MB growth, though zeroblob asked for 1 GB


def test_result_caps_truncate_rows_and_bytes():
    """More rows than max_rows, or more bytes than max_result_bytes, are cut and flagged."""
    world, task = _world_with(
        tool(
            "many",
            "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 1000) SELECT i FROM r",
        ),
        tool(
            "fat",
            "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 10) SELECT zeroblob(100000) FROM r",
        ),
        max_rows=50,
        max_result_bytes=250_000,
    )
    world.reset(task)
    many = world.step(ToolCall("many", {}))
    assert many.ok and many.truncated and len(many.rows) == 50 and many.rows[-1] == (50,)
    fat = world.step(ToolCall("fat", {}))
    assert fat.ok and fat.truncated and len(fat.rows) == 2
    assert "truncated" in many.text()


def test_the_world_clock_is_fixed():
    """'now', current_timestamp and the zero-argument date functions read the world's clock."""
    world, task = _world_with(
        tool(
            "clock",
            "SELECT datetime('now'), date('now', '+1 day'), current_timestamp, current_date, strftime('%Y-%m', 'now'), unixepoch(), julianday('now') = julianday('2026-11-29 12:00:00'), time()",
        )
    )
    world.reset(task)
    row = world.step(ToolCall("clock", {})).rows[0]
    assert row == (
        "2026-11-29 12:00:00",
        "2026-11-30",
        "2026-11-29 12:00:00",
        "2026-11-29",
        "2026-11",
        1795953600,
        1,
        "12:00:00",
    )


def test_column_default_current_timestamp_uses_the_world_clock():
    """A DEFAULT CURRENT_TIMESTAMP column gets the world's time, not the machine's."""
    task, spec = example("hr-payroll")
    with World(spec) as world:
        world.reset(task)
        world.step(
            ToolCall(
                "add_salary_history",
                {
                    "employee_id": 9,
                    "effective_on": "2027-01-01",
                    "old_salary": 99000,
                    "new_salary": 101000,
                    "reason": "merit",
                },
            )
        )
        conn = world.compiled.conn
        with world.compiled.guard.trust():
            stamp = conn.execute(
                "SELECT recorded_at FROM salary_history WHERE employee_id = 9"
            ).fetchone()[0]
        assert stamp == "2026-11-29 12:00:00"


def test_same_calls_same_observations_and_state_on_two_builds(examples):
    """Two independent builds of a world give identical observations and identical bytes."""
    tasks, worlds = examples
    for task in tasks:
        spec = worlds[task.world]
        a, b = World(spec), World(spec)
        ea = a.run(task, task.solution)
        eb = b.run(task, task.solution)
        assert [o.to_json() for o in ea.observations] == [o.to_json() for o in eb.observations]
        assert a.snapshot() == b.snapshot()
        a.close()
        b.close()


def test_seed_rows_violating_foreign_keys_are_a_warning_not_an_error():
    """Real databases have orphan rows: the world builds and says which rows."""
    world = mini_world()
    world["data"]["tickets"]["rows"].append([14, 77, "orphan", "open", 3])
    built = World(world)
    assert any("tickets" in w and "rowid 14" in w and "accounts" in w for w in built.warnings)


def test_invalid_world_raises_spec_error_naming_every_problem():
    """World() on an invalid record raises SpecError listing each problem with its path."""
    world = mini_world()
    world["data"]["tickets"]["rows"].append([15, 1, "short row"])
    world["data"]["nope"] = {"columns": ["x"], "rows": [[1]]}
    world["tools"].append(tool("submit", "SELECT 1"))
    world["now"] = "tomorrow"
    with pytest.raises(SpecError) as info:
        World(world)
    paths = {p.path for p in info.value.problems}
    assert {
        "world.now",
        "world.tools[5].name",
        "world.data.tickets.rows[4]",
        "world.data.nope",
    } <= paths
    assert "reserved" in str(info.value)


def test_episode_round_trips_through_json_with_blobs():
    """An episode, BLOB cells included, serialises to JSON and back unchanged."""
    world, task = _world_with(tool("bytes", "SELECT x'00ff10' AS raw, 1.5 AS r, NULL AS n"))
    episode = world.run(task, [ToolCall("bytes", {}), ToolCall("submit")])
    assert episode.observations[0].rows == [(b"\x00\xff\x10", 1.5, None)]
    text = episode.model_dump_json()
    assert '"$base64"' in text
    again = Episode.model_validate_json(text)
    assert again == episode


def test_verify_bytes_matches_the_live_reward(mini):
    """verify(task, snapshot bytes) gives the same reward as the episode did."""
    world, task = mini
    episode = world.run(task, task.solution)
    state = world.snapshot()
    spec = WorldSpec.model_validate(mini_world())
    assert verify(task, state, world=spec) == episode.reward


def test_tool_definitions_end_with_submit(mini):
    """The tools are exposed as function definitions, submit last."""
    world, _ = mini
    tools = world.tool_definitions()
    assert [t["name"] for t in tools][-1] == "submit"
    assert tools[0]["input_schema"]["properties"]["email"]["type"] == "string"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.sampled_from(
        [
            "find_account",
            "list_tickets",
            "close_ticket",
            "set_priority",
            "count_open",
            "submit",
            "nope",
            "",
        ]
    ),
    arguments=st.one_of(
        st.dictionaries(
            st.sampled_from(["email", "account_id", "ticket_id", "priority", "answer", "x"]),
            json_values,
            max_size=4,
        ),
        json_values,
    ),
)
def test_random_arguments_never_crash_step(mini, name, arguments):
    """Whatever the arguments, World.step returns an observation and never raises."""
    world, task = mini
    if world.done:
        world.reset(task)
    obs = world.step(ToolCall(name, arguments))
    assert obs.ok or obs.error
    json.dumps(obs.to_json(), default=str)


def test_step_accepts_a_mapping_and_rejects_odd_tool_names(mini):
    """A JSON-shaped call works like a ToolCall; a non-string tool name is an error observation."""
    world, task = mini
    world.reset(task)
    assert world.step({"tool": "count_open", "arguments": {"account_id": 1}}).rows == [(2,)]
    obs = world.step(ToolCall(["not", "a", "name"], {}))  # type: ignore[arg-type]
    assert not obs.ok and "unknown tool" in obs.error
    with pytest.raises(TypeError, match="ToolCall"):
        world.step("count_open")  # type: ignore[arg-type]


def test_table_valued_functions_survive_resets():
    """json_each/json_tree work across many resets (SQLite 3.40 crashed after deserialize; reset uses backup)."""
    world, task = _world_with(
        tool(
            "pick",
            "SELECT id, subject FROM tickets WHERE id IN (SELECT value FROM json_each(:ids)) ORDER BY id",
            properties={"ids": {"type": "string"}},
            required=["ids"],
        ),
        tool(
            "tree",
            "SELECT count(*) FROM json_tree(:doc)",
            properties={"doc": {"type": "string"}},
            required=["doc"],
        ),
    )
    for _ in range(50):
        world.reset(task)
        assert world.step(ToolCall("pick", {"ids": "[10, 12]"})).rows == [
            (10, "VPN outage"),
            (12, "VPN outage"),
        ]
        assert world.step(ToolCall("tree", {"doc": '{"a": [1, 2]}'})).rows == [(4,)]
        world.step(ToolCall("close_ticket", {"ticket_id": 10}))
    state = world.snapshot()
    world.verify_state(task, state)
    assert world.step is not None and world.reset(task).step == 0
    assert world.step(ToolCall("pick", {"ids": "[10]"})).rows == [(10, "VPN outage")]


def test_failed_write_keeps_nothing_even_with_raise_fail():
    """RAISE(FAIL) midway through an UPDATE leaves no partial write (each write call is atomic)."""
    world = mini_world()
    world["schema"].append(
        "CREATE TRIGGER no_low_priority BEFORE UPDATE OF priority ON tickets WHEN new.priority > 3 AND old.id = 12 BEGIN SELECT RAISE(FAIL, 'too low'); END"
    )
    world["tools"].append(tool("lower_all", "UPDATE tickets SET priority = 4", effect="write"))
    built, task = make(world)
    built.reset(task)
    obs = built.step(ToolCall("lower_all", {}))
    assert not obs.ok and "too low" in obs.error and "nothing was changed" in obs.error
    rows = {r[0]: r[3] for r in built.step(ToolCall("list_tickets", {"account_id": 1})).rows}
    assert rows == {10: 2, 11: 4, 13: 3}


def test_raise_rollback_undoes_only_the_failing_call():
    """RAISE(ROLLBACK) ends SQLite's transaction; the episode's earlier writes are kept (replayed)."""
    world = mini_world()
    world["schema"].append(
        "CREATE TRIGGER keep_closed BEFORE UPDATE OF status ON tickets WHEN old.status = 'closed' BEGIN SELECT RAISE(ROLLBACK, 'closed tickets stay closed'); END"
    )
    world["tools"].append(
        tool(
            "reopen",
            "UPDATE tickets SET status = 'open' WHERE id = :id",
            effect="write",
            properties={"id": {"type": "integer"}},
            required=["id"],
        )
    )
    built, task = make(world)
    built.reset(task)
    assert built.step(ToolCall("close_ticket", {"ticket_id": 10})).ok
    assert built.step(ToolCall("set_priority", {"ticket_id": 11, "priority": 1})).ok
    obs = built.step(ToolCall("reopen", {"id": 13}))
    assert not obs.ok and "closed tickets stay closed" in obs.error
    rows = {
        r[0]: (r[2], r[3]) for r in built.step(ToolCall("list_tickets", {"account_id": 1})).rows
    }
    assert rows == {10: ("closed", 2), 11: ("open", 1), 13: ("closed", 3)}
    reward = built.step(ToolCall("submit")).reward
    assert reward == built.verify_whole()


def test_deferred_foreign_keys_are_checked_after_each_write():
    """A DEFERRABLE INITIALLY DEFERRED foreign key still refuses a dangling row (episodes never commit)."""
    world = mini_world()
    world["schema"][1] = world["schema"][1].replace(
        "REFERENCES accounts(id)", "REFERENCES accounts(id) DEFERRABLE INITIALLY DEFERRED"
    )
    world["tools"].append(
        tool(
            "orphan",
            "INSERT INTO tickets(account_id, subject, status) VALUES (99, 'x', 'open')",
            effect="write",
        )
    )
    built, task = make(world)
    built.reset(task)
    obs = built.step(ToolCall("orphan", {}))
    assert not obs.ok and "FOREIGN KEY constraint failed (deferred)" in obs.error
    assert built.step(ToolCall("count_open", {"account_id": 99})).rows == [(0,)]


def test_loading_a_state_then_resetting_returns_to_the_initial_state(mini):
    """verify_state loads other bytes; the next reset is back at the initial state."""
    world, task = mini
    world.run(task, task.solution)
    closed = world.snapshot()
    assert world.verify_state(task, closed).value == 1
    world.reset(task)
    assert world.step(ToolCall("list_tickets", {"account_id": 1})).rows[0][2] == "open"
    assert world.run(task, [ToolCall("submit")]).reward.value == 0


def test_the_clock_cannot_be_escaped_by_blobs_or_time_zones():
    """'now' as a BLOB reads the world clock too; 'localtime'/'utc' are no-ops (the world clock has no zone)."""
    world, task = _world_with(
        tool(
            "escape",
            "SELECT datetime(CAST('now' AS BLOB)), strftime('%s', x'6e6f77'), datetime('now', 'localtime'), datetime('2026-01-01 10:00', 'utc'), date('now', x'6c6f63616c74696d65')",
        )
    )
    world.reset(task)
    row = world.step(ToolCall("escape", {})).rows[0]
    assert row == (
        "2026-11-29 12:00:00",
        "1795953600",
        "2026-11-29 12:00:00",
        "2026-01-01 10:00:00",
        "2026-11-29",
    )


@pytest.mark.slow  # a process of its own
def test_same_clock_in_every_time_zone():
    """A process in another time zone sees the same results."""
    script = textwrap.dedent(
        """
        from coevo.arena import World, TaskSpec, ToolCall
        from tests.factories import mini_world, mini_task, tool
        w = mini_world()
        w["tools"].append(tool("clock", "SELECT datetime('now', 'localtime'), datetime(x'6e6f77'), time('now', 'utc')"))
        world = World(w)
        world.reset(TaskSpec.model_validate(mini_task(world=world.id)))
        print(world.step(ToolCall("clock", {})).rows)
        """
    )
    outputs = set()
    for zone in ("UTC", "Asia/Tokyo", "America/Los_Angeles"):
        env = dict(__import__("os").environ, TZ=zone)
        result = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            env=env,
        )
        outputs.add(result.stdout)
    assert outputs == {"[('2026-11-29 12:00:00', '2026-11-29 12:00:00', '12:00:00')]\n"}


def test_only_core_functions_are_allowed():
    """Extension functions (FTS5's source id, R-Tree checks) differ between builds: refused."""
    world = mini_world()
    world["tools"].append(tool("build", "SELECT fts5_source_id()"))
    with pytest.raises(SpecError, match="fts5_source_id"):
        World(world)


def test_wall_clock_backstop_stops_heavy_work_per_instruction():
    """A call doing megabytes of work per instruction is stopped by the backstop, with that reason."""
    world, task = _world_with(
        tool(
            "grind",
            "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 100000) SELECT count(replace(printf('%900000c', 'x'), ' ', 'y')) FROM r",
        ),
        max_call_seconds=0.3,
    )
    world.reset(task)
    obs = world.step(ToolCall("grind", {}))
    assert not obs.ok and "wall-clock backstop" in obs.error
    assert world.step(ToolCall("count_open", {"account_id": 1})).ok


def test_a_deep_copy_of_an_episode_is_equal_and_shares_nothing_mutable(mini) -> None:
    """Observation and ToolCall copy field by field (the in-process hosts copy every episode): equal, independent, aliasing kept."""
    import copy

    world, task = mini
    episode = world.run(task, task.solution)
    seen = next(o for o in episode.observations if o.rows)
    copied = copy.deepcopy(episode)
    assert copied == episode
    twin = next(o for o in copied.observations if o.rows)
    assert twin.rows is not seen.rows and twin.rows == seen.rows
    call = ToolCall("find", {"ids": [1, 2], "where": {"name": "Ada"}})
    again = copy.deepcopy(call)
    assert again == call and again.arguments is not call.arguments
    assert again.arguments["ids"] is not call.arguments["ids"]
    pair = copy.deepcopy([seen, seen])
    assert pair[0] is pair[1], "one object copied once, as copy.deepcopy does"
