"""The Judge's mechanical checks: every example is accepted, every broken task is rejected by the right check."""

from __future__ import annotations

from typing import Any

import pytest
from coevo.arena import CHECK_NAMES, TaskSpec, WorldCache, assess_task
from coevo.arena.judge import perturb_answer
from coevo.arena.limits import Limits

from tests.factories import call, example, mini_task, mini_world, tool, variant


@pytest.fixture(scope="module")
def cache():
    built = WorldCache()
    yield built
    built.close()


def assess(task: TaskSpec | dict[str, Any], cache: WorldCache):
    if isinstance(task, dict):
        task = TaskSpec.model_validate(task)
    return assess_task(task, cache)


def test_every_example_task_is_accepted(examples, cache):
    """Each shipped example passes every mechanical check (solvable is left for the roles)."""
    tasks, worlds = examples
    for world in worlds.values():
        cache.add(world)
    assert len(tasks) >= 3
    for task in tasks:
        verdict = assess_task(task, cache)
        failed = {k: v.reason for k, v in verdict.checks.items() if v.passed is False}
        assert verdict.accepted, f"{task.instruction!r} rejected: {failed}"
        assert list(verdict.checks) == list(CHECK_NAMES)
        assert verdict.checks["solvable"].passed is None


def test_examples_cover_question_distractor_and_two_writes_with_columns_frame(examples):
    """The examples include a question task, a distractor entity and a two-write task framed by columns."""
    tasks, worlds = examples
    assert len({worlds[t.world].domain for t in tasks}) >= 3
    assert any(":answer" in c.sql for t in tasks for c in t.verifier.checks)
    assert any(t.features.get("distractors", 0) >= 1 for t in tasks)
    two_writes = [t for t in tasks if t.features.get("writes") == 2]
    assert two_writes and any(
        not isinstance(rule, str) for t in two_writes for rule in t.verifier.frame.values()
    )


def test_mini_task_is_accepted(cache):
    """The fixture task used by the catalogue below is itself accepted."""
    verdict = assess(mini_task(), cache)
    assert verdict.accepted, verdict.failed


def _failed(verdict, check: str) -> str:
    result = verdict.checks[check]
    assert result.passed is False, f"{check} should fail, got {result}"
    assert not verdict.accepted
    return result.reason


def test_always_true_verifier_fails_noop(cache):
    """A verifier that holds on the initial state is caught by noop (and unsolved)."""
    task = mini_task()
    task["verifier"]["checks"] = [{"name": "trivial", "sql": "SELECT 1"}]
    verdict = assess(task, cache)
    assert "submit() at once earns 1" in _failed(verdict, "noop")
    assert "already passes" in _failed(verdict, "unsolved")


def test_verifier_the_reference_fails_is_caught_by_oracle(cache):
    """A check the reference solution cannot satisfy fails oracle, naming the check."""
    task = mini_task()
    task["verifier"]["checks"] = [
        {"name": "priority_raised", "sql": "SELECT priority = 1 FROM tickets WHERE id = 10"}
    ]
    reason = _failed(assess(task, cache), "oracle")
    assert "priority_raised" in reason and "returned 0" in reason


def test_verifier_a_prefix_satisfies_is_caught_by_partial():
    """Checking only the first of two writes lets a prefix earn 1: partial fails."""
    task, world = example("hr-payroll")

    def edit(data):
        data["verifier"]["checks"] = [data["verifier"]["checks"][0]]  # new_position only

    broken = variant(task, world, edit)
    verdict = assess_task(broken, WorldCache())
    reason = _failed(verdict, "partial")
    assert "before the last write" in reason and "add_salary_history" in reason
    assert verdict.checks["oracle"].passed is True


def test_loose_answer_check_is_caught_by_partial():
    """A question whose check accepts any non-empty answer fails partial (perturbed answer earns 1)."""
    task, world = example("clinic")

    def edit(data):
        data["verifier"]["checks"] = [
            {"name": "said_something", "sql": "SELECT length(:answer) > 0"}
        ]

    reason = _failed(assess_task(variant(task, world, edit), WorldCache()), "partial")
    assert "does not pin the answer" in reason


def test_random_in_a_check_is_invalid(cache):
    """A check calling random() fails valid with the function named."""
    task = mini_task()
    task["verifier"]["checks"] = [{"name": "coin", "sql": "SELECT random() > 0"}]
    verdict = assess(task, cache)
    reason = _failed(verdict, "valid")
    assert "random()" in reason and "deterministic" in reason
    assert all(verdict.checks[name].passed is None for name in CHECK_NAMES[1:])


def test_solution_changing_rows_outside_the_frame_fails_oracle_naming_the_rows(cache):
    """Closing a second ticket is outside the frame: oracle fails and names the row."""
    task = mini_task()
    task["solution"] = [*task["solution"][:3], call("close_ticket", ticket_id=11), call("submit")]
    reason = _failed(assess(task, cache), "oracle")
    assert "outside the frame" in reason and "id=11" in reason and "Invoice copy" in reason


def test_solution_changing_a_column_outside_the_frame_fails_oracle_naming_the_column(cache):
    """Changing the framed row's priority (only status may change) fails oracle, naming the column."""
    task = mini_task()
    task["solution"] = [
        *task["solution"][:3],
        call("set_priority", ticket_id=10, priority=1),
        call("submit"),
    ]
    reason = _failed(assess(task, cache), "oracle")
    assert "changed in priority" in reason and "id=10" in reason


def test_guessed_argument_fails_grounded(cache):
    """Cancelling by an id that nothing showed (skipping the look-up) fails grounded, though oracle passes."""
    task = mini_task()
    task["solution"] = [
        call("find_account", email="dana@acme.io"),
        call("close_ticket", ticket_id=10),
        call("submit"),
    ]
    verdict = assess(task, cache)
    reason = _failed(verdict, "grounded")
    assert "ticket_id=10" in reason
    assert verdict.checks["oracle"].passed is True


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("ATTACH DATABASE 'x.db' AS other", "attaches a database"),
        ("PRAGMA writable_schema = 1", "PRAGMA writable_schema"),
        ("DROP TABLE tickets", "DDL"),
        ("SELECT 1; SELECT 2", "more than one SQL statement"),
        ("SELECT name FROM sqlite_master", "reads sqlite_master"),
        ("SELECT load_extension('evil')", "load_extension()"),
        ("SELECT * FROM tickets WHERE id = :undeclared", "undeclared parameter ':undeclared'"),
        ("SELECT randomblob(8)", "randomblob()"),
        ("SELECT * FROM tickets WHERE id = ?", "positional"),
        ("SELECT * FROM tickets WHERE id = $id", "write it :id"),
        ("VACUUM", "VACUUM"),
        ("BEGIN", "transactions"),
        ("SELECT * FROM pragma_table_info('tickets')", "pragma_table_info"),
        ("SELECT * FROM initial.tickets", "no such table"),
    ],
)
def test_hostile_tool_sql_is_invalid(cache, sql, expected):
    """Each forbidden construct in a tool makes the world invalid, with the construct named."""
    world = mini_world()
    world["tools"].append(tool("hostile", sql, properties={"id": {"type": "integer"}}))
    verdict = assess(mini_task(world), cache)
    reason = _failed(verdict, "valid")
    assert "hostile" in reason or "tools[5]" in reason
    assert expected in reason, reason


def test_read_tool_that_writes_is_invalid(cache):
    """A tool declared read that updates is rejected and told to declare write."""
    world = mini_world()
    world["tools"].append(tool("sneaky", "UPDATE tickets SET priority = 1"))
    reason = _failed(assess(mini_task(world), cache), "valid")
    assert "effect is 'read'" in reason and "tickets" in reason


def test_read_tool_that_writes_through_a_trigger_on_a_view_is_invalid(cache):
    """Writes through triggers count: a DELETE on a view with an INSTEAD OF trigger is a write."""
    world = mini_world()
    world["schema"] += [
        "CREATE VIEW open_tickets AS SELECT * FROM tickets WHERE status = 'open'",
        "CREATE TRIGGER open_tickets_delete INSTEAD OF DELETE ON open_tickets BEGIN DELETE FROM tickets WHERE id = old.id; END",
    ]
    world["tools"].append(tool("purge", "DELETE FROM open_tickets"))
    reason = _failed(assess(mini_task(world), cache), "valid")
    assert "effect is 'read'" in reason


def test_verifier_that_writes_is_invalid(cache):
    """A check that updates the world is rejected."""
    task = mini_task()
    task["verifier"]["checks"] = [{"name": "sneaky", "sql": "UPDATE tickets SET status = 'closed'"}]
    reason = _failed(assess(task, cache), "valid")
    assert "sneaky" in reason or "checks[0]" in reason
    assert "read-only" in reason or "writes" in reason


def test_column_default_with_random_is_invalid(cache):
    """random() hidden in a column DEFAULT is found through the compiled program."""
    world = mini_world()
    world["schema"][1] = world["schema"][1].replace(
        "priority INTEGER NOT NULL DEFAULT 3",
        "priority INTEGER NOT NULL DEFAULT (abs(random()) % 5)",
    )
    reason = _failed(assess(mini_task(world), cache), "valid")
    assert "random()" in reason


def test_trigger_with_random_is_invalid(cache):
    """A trigger body calling random() is rejected at the schema statement that created it."""
    world = mini_world()
    world["schema"].append(
        "CREATE TRIGGER jitter AFTER UPDATE ON tickets BEGIN UPDATE accounts SET plan = plan || random() WHERE id = new.account_id; END"
    )
    reason = _failed(assess(mini_task(world), cache), "valid")
    assert "schema[2]" in reason and "random()" in reason


def test_unknown_world_reference_is_invalid(cache):
    """A task naming a world id that was never defined says where to put the world."""
    task = mini_task(world="sha256:" + "ab" * 32)
    reason = _failed(assess(task, cache), "valid")
    assert "not defined" in reason and "world record before the task" in reason


def test_unsolved_passes_question_tasks_without_state_checks(examples, cache):
    """A pure question task has no state checks, so unsolved passes with that reason."""
    task, world = example("clinic")
    cache.add(world)
    verdict = assess_task(task, cache)
    assert verdict.checks["unsolved"].passed is True
    assert "no state checks" in verdict.checks["unsolved"].reason


def test_failing_reference_step_fails_oracle_even_with_reward_one(cache):
    """A reference solution with a failing step is rejected even when it still ends with reward 1."""
    task = mini_task()
    task["solution"] = [
        call("find_account", email="dana@acme.io"),
        call("list_tickets", account_id=1),
        call("set_priority", ticket_id=10, priority=9),
        call("close_ticket", ticket_id=10),
        call("submit"),
    ]
    verdict = assess(task, cache)
    # the bad argument is caught statically, before anything runs
    assert "priority" in _failed(verdict, "valid")


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("2026-12-03 14:30", "2026-12-03 14:31"),
        ("$12.50", "$13.50"),
        ("Ada Ode", "Ada Od"),
        ("7", "8"),
        ("A", "B"),
        ("", "x"),
    ],
)
def test_perturbed_answers_differ(answer, expected):
    """The perturbation changes the last number, or else drops a character."""
    assert perturb_answer(answer) == expected


def test_reserved_names_are_invalid(cache):
    """Tables, triggers and columns named coevo_* would collide with the change log: rejected."""
    world = mini_world()
    world["schema"].append("CREATE TABLE coevo_changes(x)")
    world["schema"][0] = world["schema"][0].replace("plan TEXT", "coevo_m TEXT")
    world["data"]["accounts"]["columns"][3] = "coevo_m"
    reason = _failed(assess(mini_task(world), cache), "valid")
    assert "coevo_changes" in reason and "accounts.coevo_m" in reason and "reserves" in reason


def test_trigger_referencing_a_missing_table_is_invalid(cache):
    """A trigger whose body cannot compile makes the world invalid, pointing at the trigger."""
    world = mini_world()
    world["schema"].append(
        "CREATE TRIGGER log_close AFTER UPDATE ON tickets BEGIN INSERT INTO audit_log VALUES (new.id); END"
    )
    reason = _failed(assess(mini_task(world), cache), "valid")
    assert "schema[2]" in reason and "no such table" in reason and "audit_log" in reason


@pytest.mark.parametrize(
    ("check", "wrong"),
    [
        ("SELECT instr(:answer, '2026-12-03 14:30') > 0", "or"),
        (
            "SELECT CAST(substr(:answer, 12, 2) AS INTEGER) BETWEEN 1 AND 14 AND :answer LIKE '2026-12-03%'",
            "14:30",
        ),
    ],
)
def test_answer_checks_that_accept_hedges_or_one_sided_bounds_fail_partial(check, wrong):
    """A 'contains' check passes a hedged answer; a one-sided bound passes a smaller one: partial catches both."""
    task, world = example("clinic")

    def edit(data):
        data["verifier"]["checks"] = [{"name": "loose", "sql": check}]

    reason = _failed(assess_task(variant(task, world, edit), WorldCache()), "partial")
    assert "does not pin the answer" in reason


def test_wrong_answers_cover_missing_empty_up_down_and_hedge():
    """The wrong answers tried for a question include both neighbours of a number and a hedge."""
    from coevo.arena.judge import wrong_answers

    assert wrong_answers("42") == [None, "", "43", "41", "42 or 43"]
    assert wrong_answers("Ada Ode") == [None, "", "Ada Od", "Ada Ode or Ada Od"]


def test_star_frame_for_a_one_row_change_is_a_warning(cache):
    """A '*' frame where the solution changes one row is accepted with a warning in oracle and the verdict."""
    task = mini_task()
    task["verifier"]["frame"] = {"tickets": "*"}
    verdict = assess(task, cache)
    assert verdict.accepted
    assert (
        "warning" in verdict.checks["oracle"].reason
        and "changes 1 row(s)" in verdict.checks["oracle"].reason
    )
    assert any("tickets" in w for w in verdict.warnings)


def test_verdict_lists_each_warning_once():
    """World, task and oracle warnings each appear once in the verdict."""
    world = mini_world()
    world["data"]["tickets"]["rows"].append([14, 77, "orphan", "open", 3])
    task = mini_task(world)
    task["verifier"]["frame"] = {"tickets": "*"}
    verdict = assess(task, WorldCache())
    assert len(verdict.warnings) == 2 and len(set(verdict.warnings)) == 2
    assert any("foreign key" in w for w in verdict.warnings) and any(
        "anything in tickets" in w for w in verdict.warnings
    )


ENDLESS = "SELECT count(*) > 0 FROM (WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT i FROM r)"


def test_a_task_has_one_budget_for_all_its_checks_and_passes():
    """Thirty never-ending checks share the task's budget: the verdict names it and is the same every time."""
    task = mini_task()
    task["verifier"]["checks"] += [{"name": f"endless_{i}", "sql": ENDLESS} for i in range(30)]
    spec = TaskSpec.model_validate(task)
    limits = Limits(verifier_vm_instructions=1_000_000, task_vm_instructions=3_000_000)
    verdicts = [assess_task(spec, WorldCache(limits)) for _ in range(2)]
    verdict = verdicts[0]
    assert not verdict.accepted
    reasons = " ".join(r.reason for r in verdict.checks.values())
    assert "the task's budget of 3,000,000 VM instructions" in reasons
    assert any("budget of 3,000,000" in w for w in verdict.warnings)
    # deterministic budgets only: the same verdict on every pass, whatever the machine's load
    assert verdicts[0].model_dump() == verdicts[1].model_dump()
    determinism = verdict.checks["determinism"]
    assert determinism.passed is not False or determinism.reason.startswith(
        "not decided: the task's budget"
    )


def test_the_task_budget_is_not_spent_by_an_ordinary_task():
    """The default task budget leaves ordinary tasks untouched (they need well under 1% of it)."""
    verdict = assess_task(TaskSpec.model_validate(mini_task()), WorldCache())
    assert verdict.accepted, verdict.checks
    assert not any("budget" in w for w in verdict.warnings)
