"""`coevo check` on hostile input: arbitrary bytes, JSON and SQL in every place a world or task holds SQL.

Each example is one file of records run through the real `coevo check` in a
subprocess with an address-space limit. Whatever the file holds, the
command must not raise past its error boundary, must print one verdict per
non-blank line, and no task may spend more than its budget (plus one
progress interval of 100 instructions).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.arena.test_cli import coevo
from tests.factories import call, mini_task, mini_world, tool

TASK_BUDGET = 2_000_000
MARGIN = 100  # the budget is checked every 100 instructions
MEMORY = 3 << 30  # address space for `coevo check` and its Judge worker

ATOMS = [
    "printf('%.*c', 2147483647, 'x')",
    "printf('%2147483647d', 1)",
    "format(:p, 1)",
    "zeroblob(2000000000)",
    "length(zeroblob(999999))",
    "random()",
    "randomblob(8)",
    "load_extension('/tmp/nothing')",
    "json_patch('{}', '{}')",
    "sqlite_version()",
    "length(replace(hex(zeroblob(400000)), '0', 'a'))",
    "instr(hex(zeroblob(450000)), hex(zeroblob(200000)) || 'x')",
    "(SELECT count(*) FROM (WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT i FROM r))",
    "(SELECT length(group_concat(hex(zeroblob(100000)))) FROM (WITH RECURSIVE r(i) AS "
    "(SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 50) SELECT i FROM r))",
    "('a' LIKE '%a%a%a%a%a%a%a%a%b')",
    "(SELECT count(*) FROM sqlite_master)",
    "(SELECT count(*) FROM initial.tickets)",
    "status = 'closed'",
    "1",
    "NULL",
    "'x'",
]
WRAPPERS = [
    "SELECT {e}",
    "SELECT {e} FROM tickets",
    "SELECT count(*) FROM tickets WHERE {e}",
    "UPDATE tickets SET subject = {e} WHERE id = 10",
    "DELETE FROM tickets WHERE {e}",
    "ATTACH {e} AS other",
    "PRAGMA {e}",
    "SELECT {e}; SELECT 1",
    "VACUUM INTO {e}",
]

_expression = st.one_of(st.sampled_from(ATOMS), st.text(max_size=40))
_statement = st.one_of(
    st.builds(lambda w, e: w.format(e=e), st.sampled_from(WRAPPERS), _expression),
    st.text(max_size=80),
)


def _place(where: str, statement: str, expression: str) -> dict[str, Any]:
    """A task record on the mini world with hostile SQL at ``where``."""
    world = mini_world()
    task = mini_task(world=world)
    if where == "tool":
        world["tools"] = world["tools"] + [tool("probe", statement)]
        task["solution"] = [call("probe"), *task["solution"]]
    elif where == "check":
        task["verifier"]["checks"].append({"name": "probe", "sql": statement})
    elif where == "frame":
        task["verifier"]["frame"] = {"tickets": {"where": expression, "columns": ["status"]}}
    elif where == "view":
        world["schema"] = world["schema"] + [f"CREATE VIEW probe AS {statement}"]
    elif where == "trigger":
        world["schema"] = world["schema"] + [
            f"CREATE TRIGGER probe AFTER UPDATE ON tickets BEGIN {statement}; END"
        ]
    elif where == "default":
        world["schema"] = world["schema"] + [
            f"CREATE TABLE extra(id INTEGER PRIMARY KEY, v DEFAULT ({expression}))"
        ]
        world["data"] = {
            **world["data"],
            "extra": {"columns": ["id"], "rows": [[i] for i in range(50)]},
        }
    return task


_record_line = st.builds(
    lambda where, statement, expression: json.dumps(_place(where, statement, expression)),
    st.sampled_from(["tool", "check", "frame", "view", "trigger", "default"]),
    _statement,
    _expression,
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_garbage_line = st.one_of(
    st.binary(max_size=120).map(lambda b: b.replace(b"\n", b" ").decode("latin-1")),
    _json.map(json.dumps),
)
_file = st.lists(st.one_of(_record_line, _record_line, _garbage_line), min_size=1, max_size=6)


def _check_file(lines: list[str], tmp: Path) -> None:
    path = tmp / "hostile.jsonl"
    path.write_bytes("".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape"))
    result = coevo(
        "check",
        str(path),
        "--json",
        "--task-budget",
        str(TASK_BUDGET),
        "--task-seconds",
        "30",
        memory=MEMORY,
        timeout=600,
    )
    assert result.returncode in (0, 1, 2), result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert all(
        not line or line.startswith("coevo check:") for line in result.stderr.splitlines()
    ), result.stderr
    verdicts = [json.loads(line) for line in result.stdout.splitlines()]
    expected = sum(1 for line in path.read_bytes().split(b"\n") if line.strip())
    assert len(verdicts) == expected, (len(verdicts), expected)
    for verdict in verdicts:
        spent = verdict["instructions"]
        assert spent is None or spent <= TASK_BUDGET + MARGIN, verdict


_SLOW_EXAMPLES = settings(
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


@settings(_SLOW_EXAMPLES, max_examples=4)
@given(lines=_file)
def test_check_survives_any_file(lines, tmp_path):
    """Any mix of hostile records and garbage: no traceback, one verdict per line, budgets held."""
    _check_file(lines, tmp_path)


def test_the_two_printf_attacks_are_rejected_naming_the_function(tmp_path):
    """The issue's file: printf in a tool the solution calls and in a verifier check; both rejected by name."""
    attack = "SELECT length(printf('%.*c', 2147483647, 'x'))"
    lines = [json.dumps(_place("tool", attack, "1")), json.dumps(_place("check", attack, "1"))]
    path = tmp_path / "printf.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    result = coevo("check", str(path), "--json")
    assert result.returncode == 1, result.stderr
    verdicts = [json.loads(line) for line in result.stdout.splitlines()]
    assert [v["accepted"] for v in verdicts] == [False, False]
    for verdict in verdicts:
        assert "printf('%.*c', ...)" in verdict["checks"]["valid"]["reason"]
