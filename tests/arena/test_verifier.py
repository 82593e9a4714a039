"""The verifier: checks pass on one non-zero number; the frame compares rows as values, tracked or whole."""

from __future__ import annotations

from typing import Any

import pytest
from coevo.arena import Limits, TaskSpec, ToolCall, World
from coevo.arena.verifier import REPORTED_ROWS_PER_TABLE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.factories import call, mini_task, mini_world, tool


def world_and_task(
    checks=None, frame=None, *, world: dict[str, Any] | None = None
) -> tuple[World, TaskSpec]:
    built = World(world or mini_world())
    task = mini_task(world=built.id)
    if checks is not None:
        task["verifier"]["checks"] = checks
    if frame is not None:
        task["verifier"]["frame"] = frame
    return built, TaskSpec.model_validate(task)


@pytest.mark.parametrize(
    ("sql", "passed", "reason"),
    [
        ("SELECT 1", True, "returned 1"),
        ("SELECT -2.5", True, "returned -2.5"),
        ("SELECT 0", False, "returned 0"),
        ("SELECT 0.0", False, "returned 0"),
        ("SELECT NULL", False, "returned NULL"),
        ("SELECT '1'", False, "returned text '1', not a number"),
        ("SELECT x'01'", False, "BLOB"),
        ("SELECT 1, 1", False, "returned 2 columns"),
        ("SELECT 1 FROM tickets", False, "more than one row"),
        ("SELECT 1 FROM tickets WHERE 0", False, "returned no row"),
        ("SELECT count(*) = 4 FROM initial.tickets", True, "returned 1"),
        ("SELECT :answer IS NULL", True, "returned 1"),
    ],
)
def test_check_passes_only_on_one_nonzero_number(sql, passed, reason):
    """A check passes exactly when it returns one row, one column, an INTEGER or REAL ≠ 0."""
    world, task = world_and_task([{"name": "c", "sql": sql}], {})
    reward = world.run(task, [ToolCall("submit")]).reward
    outcome = reward.checks[0]
    assert outcome.passed is passed and reason in outcome.reason
    assert reward.value == int(passed)


def test_answer_is_bound_as_text():
    """:answer is the submitted text; every failed check is named in the detail."""
    world, task = world_and_task(
        [
            {"name": "typed", "sql": "SELECT typeof(:answer) = 'text'"},
            {"name": "exact", "sql": "SELECT :answer = '2'"},
        ],
        {},
    )
    reward = world.run(task, [ToolCall("submit", {"answer": "3"})]).reward
    assert [c.passed for c in reward.checks] == [True, False]
    assert "check 'exact' failed" in reward.detail()


def test_checks_see_final_state_as_main_and_initial_state_as_initial():
    """main is the final state; initial is the state before the episode."""
    world, task = world_and_task(
        [
            {
                "name": "moved",
                "sql": "SELECT (SELECT status FROM initial.tickets WHERE id = 10) = 'open' AND (SELECT status FROM tickets WHERE id = 10) = 'closed'",
            }
        ]
    )
    assert world.run(task, task.solution).reward.value == 1


def _violations(world, task, calls):
    reward = world.run(task, [*calls, ToolCall("submit")]).reward
    return reward, {
        (v.table, v.change, tuple(v.columns), v.row.get("id")) for v in reward.violations
    }


def test_tables_not_in_the_frame_must_be_unchanged():
    """Changing an unlisted table is a violation naming the removed and added rows."""
    world, task = world_and_task(frame={"tickets": "*"})
    world_spec = mini_world()
    del world_spec
    reward, found = _violations(world, task, [ToolCall("close_ticket", {"ticket_id": 10})])
    assert reward.frame_ok
    world2, task2 = world_and_task(frame={})
    reward, found = _violations(world2, task2, [ToolCall("close_ticket", {"ticket_id": 10})])
    assert not reward.frame_ok and reward.violation_count == 2
    assert found == {("tickets", "removed", (), 10), ("tickets", "added", (), 10)}


def test_condition_frame_requires_old_and_new_versions_to_match():
    """With a condition, a row may change only if it matches before and after."""
    world, task = world_and_task(frame={"tickets": "account_id = 1"})
    reward, _ = _violations(world, task, [ToolCall("close_ticket", {"ticket_id": 11})])
    assert reward.frame_ok
    reward, found = _violations(world, task, [ToolCall("close_ticket", {"ticket_id": 12})])
    assert not reward.frame_ok and ("tickets", "added", (), 12) in found
    world3, task3 = world_and_task(frame={"tickets": "status = 'open'"})
    reward, found = _violations(world3, task3, [ToolCall("close_ticket", {"ticket_id": 10})])
    assert ("tickets", "added", (), 10) in found  # the new version no longer matches


def test_columns_frame_allows_only_listed_columns_of_matching_rows():
    """The columns form matches rows by key; other columns, other rows, inserts and deletes are violations."""
    extra = mini_world()
    extra["tools"] += [
        tool(
            "open_ticket",
            "INSERT INTO tickets(id, account_id, subject, status) VALUES (:id, 1, 'new', 'open')",
            effect="write",
            properties={"id": {"type": "integer"}},
            required=["id"],
        ),
        tool(
            "drop_ticket",
            "DELETE FROM tickets WHERE id = :id",
            effect="write",
            properties={"id": {"type": "integer"}},
            required=["id"],
        ),
    ]
    world, task = world_and_task(
        frame={"tickets": {"where": "id = 10", "columns": ["status"]}}, world=extra
    )
    assert _violations(world, task, [ToolCall("close_ticket", {"ticket_id": 10})])[0].frame_ok
    _, found = _violations(
        world, task, [ToolCall("set_priority", {"ticket_id": 10, "priority": 5})]
    )
    assert found == {("tickets", "changed", ("priority",), 10)}
    _, found = _violations(world, task, [ToolCall("close_ticket", {"ticket_id": 11})])
    assert found == {("tickets", "changed", ("status",), 11)}
    _, found = _violations(
        world, task, [ToolCall("open_ticket", {"id": 50}), ToolCall("drop_ticket", {"id": 13})]
    )
    assert found == {("tickets", "added", (), 50), ("tickets", "removed", (), 13)}


def test_frame_compares_values_not_paths():
    """Writing a value back to what it was is no change; an upper-cased NOCASE value is one."""
    world_spec = mini_world()
    world_spec["schema"][0] = world_spec["schema"][0].replace(
        "name TEXT NOT NULL", "name TEXT NOT NULL COLLATE NOCASE"
    )
    world_spec["tools"].append(
        tool(
            "rename",
            "UPDATE accounts SET name = :name WHERE id = 1",
            effect="write",
            properties={"name": {"type": "string"}},
            required=["name"],
        )
    )
    world, task = world_and_task(frame={}, world=world_spec)
    there_and_back = [
        ToolCall("set_priority", {"ticket_id": 10, "priority": 5}),
        ToolCall("set_priority", {"ticket_id": 10, "priority": 2}),
    ]
    assert _violations(world, task, there_and_back)[0].frame_ok
    reward, found = _violations(world, task, [ToolCall("rename", {"name": "DANA REYES"})])
    assert not reward.frame_ok and ("accounts", "added", (), 1) in found


def test_mass_change_is_counted_in_full_and_reported_in_part():
    """A change of many rows counts them all but lists at most a few per table."""
    world_spec = mini_world()
    world_spec["schema"].append("CREATE TABLE log(n INTEGER)")
    world_spec["data"]["log"] = {"columns": ["n"], "rows": [[i] for i in range(500)]}
    world_spec["tools"].append(tool("wipe", "DELETE FROM log", effect="write"))
    world, task = world_and_task(world=world_spec)
    reward = world.run(task, [*task.solution[:-1], ToolCall("wipe", {}), ToolCall("submit")]).reward
    assert reward.violation_count == 500 and len(reward.violations) == REPORTED_ROWS_PER_TABLE
    assert "500 row(s) outside the frame" in reward.reason
    assert "and 480 more" in reward.detail()


def test_replace_deleting_a_row_outside_the_frame_is_caught():
    """REPLACE deletes conflicting rows without firing delete triggers; the row count gives it away."""
    world_spec = mini_world()
    world_spec["tools"].append(
        tool(
            "claim_email",
            "INSERT OR REPLACE INTO accounts(id, name, email) VALUES (:id, 'New', :email)",
            effect="write",
            properties={"id": {"type": "integer"}, "email": {"type": "string"}},
            required=["id", "email"],
        )
    )
    world_spec["schema"][1] = world_spec["schema"][1].replace("REFERENCES accounts(id)", "")
    world, task = world_and_task(frame={"accounts": "id = 3"}, world=world_spec)
    reward, found = _violations(
        world, task, [ToolCall("claim_email", {"id": 3, "email": "dan@acme.io"})]
    )
    assert ("accounts", "removed", (), 2) in found
    assert reward == world.verify_state(task, world.snapshot())


# -- tracked vs whole-table comparison must always agree ------------------------------

DIFF_WORLD: dict[str, Any] = {
    "format": "coevo.world/1",
    "domain": "test",
    "now": "2026-11-29T12:00:00",
    "schema": [
        "CREATE TABLE a(id INTEGER PRIMARY KEY, k TEXT UNIQUE, v INTEGER)",
        "CREATE TABLE b(x INTEGER, y TEXT)",
        "CREATE TABLE c(p INTEGER, q INTEGER, w TEXT, PRIMARY KEY (p, q)) WITHOUT ROWID",
        "CREATE TABLE d(id INTEGER PRIMARY KEY, a_id INTEGER REFERENCES a(id) ON DELETE CASCADE, note TEXT)",
        "CREATE TABLE e(code TEXT PRIMARY KEY, qty INTEGER)",
        "CREATE TRIGGER a_audit AFTER UPDATE OF v ON a WHEN new.v > 4 BEGIN INSERT INTO b VALUES (new.v, 'audit'); END",
    ],
    "data": {
        "a": {"columns": ["id", "k", "v"], "rows": [[1, "k1", 1], [2, "k2", 2], [3, "k3", 3]]},
        "b": {"columns": ["x", "y"], "rows": [[1, "one"], [1, "one"], [2, "two"]]},
        "c": {"columns": ["p", "q", "w"], "rows": [[1, 1, "a"], [1, 2, "b"]]},
        "d": {"columns": ["id", "a_id", "note"], "rows": [[1, 1, "n1"], [2, 2, "n2"]]},
        "e": {"columns": ["code", "qty"], "rows": [["A", 1], ["B", 2]]},
    },
    "tools": [
        tool(
            "upsert_a",
            "INSERT OR REPLACE INTO a VALUES (:id, :k, :v)",
            effect="write",
            properties={
                "id": {"type": "integer"},
                "k": {"type": "string"},
                "v": {"type": "integer"},
            },
            required=["id", "k", "v"],
        ),
        tool(
            "update_a",
            "UPDATE a SET v = :v WHERE id = :id",
            effect="write",
            properties={"id": {"type": "integer"}, "v": {"type": "integer"}},
            required=["id", "v"],
        ),
        tool(
            "move_a",
            "UPDATE a SET id = :to WHERE id = :id",
            effect="write",
            properties={"id": {"type": "integer"}, "to": {"type": "integer"}},
            required=["id", "to"],
        ),
        tool(
            "delete_a",
            "DELETE FROM a WHERE id = :id",
            effect="write",
            properties={"id": {"type": "integer"}},
            required=["id"],
        ),
        tool(
            "insert_b",
            "INSERT INTO b VALUES (:x, :y)",
            effect="write",
            properties={"x": {"type": "integer"}, "y": {"type": "string"}},
            required=["x", "y"],
        ),
        tool(
            "delete_b",
            "DELETE FROM b WHERE x = :x",
            effect="write",
            properties={"x": {"type": "integer"}},
            required=["x"],
        ),
        tool(
            "update_b",
            "UPDATE b SET y = :y WHERE x = :x",
            effect="write",
            properties={"x": {"type": "integer"}, "y": {"type": "string"}},
            required=["x", "y"],
        ),
        tool(
            "put_c",
            "INSERT OR REPLACE INTO c VALUES (:p, :q, :w)",
            effect="write",
            properties={
                "p": {"type": "integer"},
                "q": {"type": "integer"},
                "w": {"type": "string"},
            },
            required=["p", "q", "w"],
        ),
        tool(
            "delete_c",
            "DELETE FROM c WHERE p = :p",
            effect="write",
            properties={"p": {"type": "integer"}},
            required=["p"],
        ),
        tool(
            "insert_d",
            "INSERT INTO d(a_id, note) VALUES (:a_id, :note)",
            effect="write",
            properties={"a_id": {"type": "integer"}, "note": {"type": "string"}},
            required=["a_id", "note"],
        ),
        tool(
            "put_e",
            "INSERT INTO e VALUES (:code, :qty) ON CONFLICT(code) DO UPDATE SET qty = excluded.qty",
            effect="write",
            properties={"code": {"type": "string"}, "qty": {"type": "integer"}},
            required=["code", "qty"],
        ),
        tool(
            "replace_e",
            "REPLACE INTO e VALUES (:code, :qty)",
            effect="write",
            properties={"code": {"type": "string"}, "qty": {"type": "integer"}},
            required=["code", "qty"],
        ),
    ],
}

FRAMES: list[dict[str, Any]] = [
    {},
    {"a": "v > 2", "b": "y = 'audit'"},
    {
        "a": {"where": "k LIKE 'k%'", "columns": ["v"]},
        "c": "*",
        "e": {"where": "code = 'A'", "columns": ["qty"]},
    },
    {
        "b": "x < 3",
        "d": {"where": "1", "columns": ["note"]},
        "c": {"where": "p = 1", "columns": ["w"]},
    },
]

small = st.integers(min_value=1, max_value=5)
text = st.sampled_from(["k1", "k2", "k3", "k4", "x", "audit"])
operations = st.lists(
    st.one_of(
        st.builds(
            lambda i, k, v: ToolCall("upsert_a", {"id": i, "k": k, "v": v}), small, text, small
        ),
        st.builds(lambda i, v: ToolCall("update_a", {"id": i, "v": v}), small, small),
        st.builds(lambda i, t: ToolCall("move_a", {"id": i, "to": t + 5}), small, small),
        st.builds(lambda i: ToolCall("delete_a", {"id": i}), small),
        st.builds(lambda x, y: ToolCall("insert_b", {"x": x, "y": y}), small, text),
        st.builds(lambda x: ToolCall("delete_b", {"x": x}), small),
        st.builds(lambda x, y: ToolCall("update_b", {"x": x, "y": y}), small, text),
        st.builds(lambda p, q, w: ToolCall("put_c", {"p": p, "q": q, "w": w}), small, small, text),
        st.builds(lambda p: ToolCall("delete_c", {"p": p}), small),
        st.builds(lambda a, n: ToolCall("insert_d", {"a_id": a, "note": n}), small, text),
        st.builds(
            lambda c, q: ToolCall("put_e", {"code": c, "qty": q}),
            st.sampled_from(["A", "B", "C"]),
            small,
        ),
        st.builds(
            lambda c, q: ToolCall("replace_e", {"code": c, "qty": q}),
            st.sampled_from(["A", "B", "C"]),
            small,
        ),
    ),
    max_size=8,
)


@pytest.fixture(scope="module")
def diff_world():
    built = World(DIFF_WORLD, limits=Limits(max_steps=100))
    tasks = [
        TaskSpec.model_validate(
            {
                "format": "coevo.task/1",
                "world": built.id,
                "instruction": f"frame {i}",
                "verifier": {"checks": [{"name": "any", "sql": "SELECT 1"}], "frame": frame},
                "solution": [call("submit")],
            }
        )
        for i, frame in enumerate(FRAMES)
    ]
    yield built, tasks
    built.close()


def _summary(reward):
    return reward.violation_count, sorted(
        (v.table, v.change, tuple(v.columns), tuple(sorted(v.row.items())), v.count)
        for v in reward.violations
    )


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(calls=operations, frame_index=st.integers(min_value=0, max_value=len(FRAMES) - 1))
def test_row_tracked_frame_equals_whole_table_frame(diff_world, calls, frame_index):
    """For any sequence of writes (REPLACE, cascades, triggers, key moves, WITHOUT ROWID), both comparisons agree."""
    world, tasks = diff_world
    task = tasks[frame_index]
    episode = world.run(task, [*calls, ToolCall("submit")])
    tracked = episode.reward
    whole = world.verify_state(task, world.snapshot())
    assert _summary(tracked) == _summary(whole)


def test_quoted_identifiers_work_end_to_end():
    """Tables and columns with spaces and mixed case work in tools, views, tracking and every frame form."""
    world = {
        "format": "coevo.world/1",
        "domain": "test",
        "now": "2026-11-29T12:00:00",
        "schema": [
            'CREATE TABLE "Order Items"("Item Id" INTEGER PRIMARY KEY, "Unit Price" REAL, "Note" TEXT)',
            'CREATE VIEW "Cheap Items" AS SELECT "Item Id", "Unit Price" FROM "Order Items" WHERE "Unit Price" < 10',
        ],
        "data": {
            "Order Items": {
                "columns": ["Item Id", "Unit Price", "Note"],
                "rows": [[1, 5.5, "a"], [2, 12.0, "b"]],
            }
        },
        "tools": [
            tool("cheap", 'SELECT * FROM "Cheap Items"'),
            tool(
                "reprice",
                'UPDATE "Order Items" SET "Unit Price" = :price WHERE "Item Id" = :id',
                effect="write",
                properties={"id": {"type": "integer"}, "price": {"type": "number"}},
                required=["id", "price"],
            ),
            tool(
                "annotate",
                'UPDATE "Order Items" SET "Note" = :note WHERE "Item Id" = :id',
                effect="write",
                properties={"id": {"type": "integer"}, "note": {"type": "string"}},
                required=["id", "note"],
            ),
        ],
    }
    built = World(world)
    for frame, calls, count in [
        (
            {"Order Items": {"where": '"Item Id" = 2', "columns": ["Unit Price"]}},
            [ToolCall("reprice", {"id": 2, "price": 8})],
            0,
        ),
        (
            {"Order Items": {"where": '"Item Id" = 2', "columns": ["Unit Price"]}},
            [ToolCall("annotate", {"id": 2, "note": "z"})],
            1,
        ),
        ({"Order Items": '"Unit Price" > 1'}, [ToolCall("reprice", {"id": 1, "price": 0.5})], 1),
        ({}, [ToolCall("reprice", {"id": 1, "price": 5.5})], 0),
    ]:
        task = TaskSpec.model_validate(
            {
                "format": "coevo.task/1",
                "world": built.id,
                "instruction": "x",
                "verifier": {"checks": [{"name": "c", "sql": "SELECT 1"}], "frame": frame},
                "solution": [call("submit")],
            }
        )
        reward = built.run(task, [ToolCall("cheap", {}), *calls, ToolCall("submit")]).reward
        assert reward.violation_count == count, (frame, reward.detail())
        assert reward == built.verify_state(task, built.snapshot())
    assert built.run(task, [ToolCall("cheap", {})]).observations[0].rows == [(1, 5.5)]


def test_frame_comparison_over_budget_fails_closed():
    """A table too large to compare within the verifier budget makes the frame not hold, with the reason."""
    world_spec = mini_world()
    world_spec["schema"].append("CREATE TABLE log(n INTEGER)")
    world_spec["data"]["log"] = {"columns": ["n"], "rows": [[i] for i in range(5000)]}
    built = World(world_spec, limits=Limits(verifier_vm_instructions=20_000))
    task = TaskSpec.model_validate(mini_task(world=built.id))
    episode = built.run(task, task.solution)
    assert episode.reward.value == 1  # row-tracked: the log table was not touched
    whole = built.verify_state(task, built.snapshot())
    assert whole.value == 0 and not whole.frame_ok
    assert (
        "log: the frame could not be checked" in whole.reason and "budget of 20,000" in whole.reason
    )


def test_rows_with_null_primary_keys_are_matched_by_rowid():
    """A nullable TEXT primary key (rowid table) cannot match rows: inserts and deletes of NULL-key rows are caught."""
    world = {
        "format": "coevo.world/1",
        "domain": "test",
        "now": "2026-11-29T12:00:00",
        "schema": ["CREATE TABLE k(code TEXT PRIMARY KEY, v TEXT)"],
        "data": {"k": {"columns": ["code", "v"], "rows": [[None, "a"], [None, "b"], ["x", "c"]]}},
        "tools": [
            tool("drop_b", "DELETE FROM k WHERE v = 'b'", effect="write"),
            tool("add_null", "INSERT INTO k VALUES (NULL, 'd')", effect="write"),
            tool("touch_x", "UPDATE k SET v = 'z' WHERE code = 'x'", effect="write"),
        ],
    }
    built = World(world)
    task = TaskSpec.model_validate(
        {
            "format": "coevo.task/1",
            "world": built.id,
            "instruction": "x",
            "verifier": {
                "checks": [{"name": "c", "sql": "SELECT 1"}],
                "frame": {"k": {"where": "code IS NULL OR code = 'x'", "columns": ["v"]}},
            },
            "solution": [call("submit")],
        }
    )
    for name, expected in (("drop_b", 1), ("add_null", 1), ("touch_x", 0)):
        tracked = built.run(task, [ToolCall(name, {}), ToolCall("submit")]).reward
        assert tracked.violation_count == expected, (name, tracked.detail())
        assert tracked == built.verify_whole()


def test_tables_differing_only_in_non_ascii_case_are_distinct():
    """SQLite folds only ASCII letters: tables "Ä" and "ä" are two tables, each framed and tracked."""
    world = {
        "format": "coevo.world/1",
        "domain": "test",
        "now": "2026-11-29T12:00:00",
        "schema": [
            'CREATE TABLE "Ä"(id INTEGER PRIMARY KEY)',
            'CREATE TABLE "ä"(id INTEGER PRIMARY KEY)',
        ],
        "tools": [tool("fill_upper", 'INSERT INTO "Ä" VALUES (1)', effect="write")],
    }
    built = World(world)
    assert set(built.compiled.tables) == {"Ä", "ä"}
    task = TaskSpec.model_validate(
        {
            "format": "coevo.task/1",
            "world": built.id,
            "instruction": "x",
            "verifier": {"checks": [{"name": "c", "sql": "SELECT 1"}], "frame": {}},
            "solution": [call("submit")],
        }
    )
    reward = built.run(task, [ToolCall("fill_upper", {}), ToolCall("submit")]).reward
    assert reward.value == 0 and reward.violations[0].table == "Ä"


def test_whole_table_comparison_of_many_changed_rows_with_huge_rowids() -> None:
    """20,000 changed rows with rowids near 4e18: tracked, whole-table and state verification all agree."""
    from coevo.arena import TaskSpec, ToolCall, World, WorldSpec

    rows = [[i * 1_000_003 + 4_000_000_000_000_000_000, i] for i in range(20_000)]
    spec = WorldSpec(
        domain="t",
        now="2026-01-01T00:00:00",
        schema_sql=["CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER)"],
        data={"t": {"columns": ["id", "v"], "rows": rows}},
        tools=[
            {
                "name": "bump",
                "description": "Add one to every value.",
                "parameters": {"type": "object", "properties": {}},
                "sql": ["UPDATE t SET v = v + 1"],
                "effect": "write",
            }
        ],
    )
    task = TaskSpec(
        world=spec,
        instruction="Add one to every value.",
        verifier={
            "checks": [
                {
                    "name": "c",
                    "sql": "SELECT (SELECT sum(v) FROM t) > (SELECT sum(v) FROM initial.t)",
                }
            ],
            "frame": {"t": {"where": "1", "columns": ["v"]}},
        },
        solution=[ToolCall("bump"), ToolCall("submit")],
    )
    with World(spec) as world:
        assert world.run(task, task.solution).reward.value == 1
        assert world.verify_whole().value == 1
        assert world.verify_state(task, world.snapshot()).value == 1


def test_after_a_check_is_stopped_by_its_budget_the_rest_are_not_run():
    """A verifier of slow checks costs one budget, not one per check: the first stopped, the rest 'not run', the reward 0."""
    built = World(mini_world(), limits=Limits(verifier_vm_instructions=20_000))
    endless = "SELECT count(*) >= 0 FROM (WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r)"
    checks = [{"name": f"slow{i}", "sql": endless} for i in range(3)]
    task = TaskSpec.model_validate(
        {**mini_task(world=built.id), "verifier": {"checks": checks, "frame": {}}}
    )
    reward = built.verify_state(task, built.snapshot())
    assert reward.value == 0
    assert [c.reason.split(" ")[0] for c in reward.checks] == ["stopped", "not", "not"]
    assert "budget of 20,000" in reward.checks[0].reason


def test_a_verifier_of_more_than_64_checks_is_not_a_task():
    """Every check runs on every episode: a task file with 65 is refused when read."""
    checks = [{"name": f"c{i}", "sql": "SELECT 1"} for i in range(65)]
    with pytest.raises(ValueError, match="at most 64"):
        TaskSpec.model_validate(
            {**mini_task(world="w"), "verifier": {"checks": checks, "frame": {}}}
        )
