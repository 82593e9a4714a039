"""The functions untrusted SQL may call: the allow-list, checked formats, linear string search."""

from __future__ import annotations

import sqlite3

import pytest
from coevo.arena import SpecError, TaskSpec, World, WorldSpec
from coevo.arena.judge import WorldCache, assess_task
from coevo.arena.limits import DEFAULT_LIMITS
from coevo.arena.sqlfunctions import FUNCTION_POLICY, LIKE_PATTERN_BYTES, format_problem
from coevo.arena.sqlguard import FORBIDDEN_FUNCTIONS, explain, open_world_connection
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.factories import call, mini_task, mini_world, tool

HUGE_PRINTF = "SELECT length(printf('%.*c', 2147483647, 'x'))"


def _connection() -> tuple[sqlite3.Connection, object]:
    conn, guard = open_world_connection("2026-01-01T00:00:00", DEFAULT_LIMITS)
    with guard.trust():
        conn.execute("CREATE TABLE t(a INTEGER, b TEXT)")
    return conn, guard


def test_every_core_function_is_decided():
    """Every built-in function of this SQLite is on the allow-list with a reason, or refused on purpose."""
    probe = sqlite3.connect(":memory:")
    core = {name for name, builtin, *_ in probe.execute("PRAGMA function_list") if builtin}
    refused_on_purpose = FORBIDDEN_FUNCTIONS | {"json_patch", "subtype", "sqlite_log"}
    undecided = sorted(core - set(FUNCTION_POLICY) - refused_on_purpose)
    assert undecided == [], f"decide these functions in coevo.arena.sqlfunctions: {undecided}"
    assert all(reason.strip() for reason in FUNCTION_POLICY.values())
    assert not set(FUNCTION_POLICY) & refused_on_purpose


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (HUGE_PRINTF, "printf('%.*c', ...) takes a width or precision from an argument"),
        ("SELECT printf('%2147483647d', 1)", "has a width of 2,147,483,647"),
        ("SELECT format('%.5000000c', 'x')", "has a precision of 5,000,000"),
        ("SELECT printf('" + "%.999999c" * 100 + "')", "adding up to 99,999,900"),
        ("SELECT printf(b, a) FROM t", "printf() with a format that is not a literal string"),
        ("SELECT printf(:fmt, 1)", "printf() with a format that is not a literal string"),
        (
            "SELECT printf(CASE WHEN a THEN '%d' ELSE :f END, a) FROM t",
            "not a literal string",
        ),
        ("SELECT printf('%' || '.*c', 5, 'x')", "not a literal string"),
        ("SELECT printf((SELECT b FROM t LIMIT 1), 5) FROM t ORDER BY a", "not a literal string"),
        ("SELECT printf(substr('%.*c', 1), 5, 'x')", "not a literal string"),
    ],
)
def test_unbounded_formats_are_refused_when_compiled(sql, expected):
    """A printf/format whose widths cannot be bounded before it runs is refused, naming the function."""
    conn, guard = _connection()
    facts = explain(conn, guard, sql)
    assert facts.error is None
    assert any(expected in reason for reason in facts.unbounded_calls), facts.unbounded_calls


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT printf('%.2f', a / 100.0), format('%d-%s', a, b) FROM t",
        "SELECT printf('%5d|%-10s|%.3f', a, b, 1.5) FROM t WHERE b = :name",
        "SELECT printf('%%')",
        "SELECT a FROM t ORDER BY printf('%05d', a)",
        "SELECT printf('%05d', a) AS k FROM t ORDER BY k",
        "SELECT 1 WHERE EXISTS (SELECT printf('%d', a) FROM t)",
        "SELECT b, printf('%d', count(*)) FROM t GROUP BY b HAVING printf('%d', count(*)) > '0'",
    ],
)
def test_literal_formats_pass(sql):
    """Ordinary literal formats compile with no objection."""
    conn, guard = _connection()
    facts = explain(conn, guard, sql)
    assert facts.error is None and facts.unbounded_calls == ()


def test_format_problem_reads_every_conversion():
    """Flags, widths and precisions of every conversion are read; `%%` is not a conversion."""
    assert format_problem("printf", "%-08.3f and %,d and %%", 1000) is None
    assert "precision of 1,001" in format_problem("printf", "%d %.1001s", 1000)
    assert "(*)" in format_problem("format", "%*d", 1000)
    assert "adding up to 1,200" in format_problem("printf", "%600d%.600c", 1000)


def test_a_world_whose_tool_or_check_calls_a_huge_printf_is_rejected():
    """The attack from the issue is refused at compile time, naming printf, for tools and checks alike."""
    world = mini_world()
    world["tools"] = world["tools"] + [tool("pad", HUGE_PRINTF)]
    with pytest.raises(SpecError) as info:
        World(world)
    assert "printf('%.*c', ...)" in str(info.value) and "tools[5]" in str(info.value)

    task = mini_task()
    task["verifier"]["checks"].append({"name": "pad", "sql": HUGE_PRINTF})
    verdict = assess_task(TaskSpec.model_validate(task), WorldCache())
    assert not verdict.accepted
    assert "printf('%.*c', ...)" in verdict.checks["valid"].reason


@pytest.mark.parametrize(
    ("where", "sql"),
    [
        ("view", "CREATE VIEW padded AS SELECT printf('%.*c', id, 'x') AS p FROM accounts"),
        (
            "trigger",
            "CREATE TRIGGER pad AFTER UPDATE ON tickets BEGIN "
            "UPDATE accounts SET name = printf('%.*c', 2147483647, 'x') WHERE id = new.account_id; END",
        ),
        (
            "default",
            "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT DEFAULT (printf('%.*c', 9, 'x')))",
        ),
    ],
)
def test_views_triggers_and_defaults_are_checked_too(where, sql):
    """A printf that would run implicitly (a view, a trigger, a column default) is refused as well."""
    world = mini_world()
    world["schema"] = world["schema"] + [sql]
    with pytest.raises(SpecError) as info:
        World(world)
    assert "printf(" in str(info.value), where


def test_refused_functions_are_named():
    """A function off the allow-list (json_patch: quadratic) is refused, naming it."""
    world = mini_world()
    world["tools"] = world["tools"] + [tool("merge", "SELECT json_patch('{}', '{}')")]
    with pytest.raises(SpecError, match=r"json_patch\(\)"):
        World(world)


def test_like_patterns_are_limited():
    """A LIKE pattern longer than the limit is an error, not seconds of matching."""
    world = mini_world()
    world["tools"] = world["tools"] + [
        tool(
            "search",
            "SELECT id FROM accounts WHERE name LIKE :pattern",
            properties={"pattern": {"type": "string"}},
            required=["pattern"],
        )
    ]
    task = mini_task(world=world)
    built = World(world)
    built.reset(TaskSpec.model_validate(task))
    assert built.step(call("search", pattern="%Reyes")).ok
    obs = built.step(call("search", pattern="%" + "a%" * LIKE_PATTERN_BYTES))
    assert not obs.ok and "pattern too complex" in obs.error


def test_quadratic_search_is_linear_now():
    """instr/replace on a 900 KB text and a 400 KB pattern answer as SQLite would (and at once)."""
    conn, guard = _connection()
    guard.budget(5_000_000)
    text = "(SELECT replace(hex(zeroblob(450000)), '0', 'a'))"
    needle = "(SELECT replace(hex(zeroblob(200000)), '0', 'a') || 'b')"
    assert conn.execute(f"SELECT instr({text}, {needle})").fetchone() == (0,)
    assert conn.execute(f"SELECT length(replace({text}, {needle}, 'c'))").fetchone() == (900000,)
    assert guard.stopped_by == ""
    # a result over the length limit fails before it is built, as SQLite's own replace does
    huge = f"SELECT length(replace({text}, 'a', hex(zeroblob(500))))"
    with pytest.raises(sqlite3.DataError, match="too big"):
        conn.execute(huge).fetchone()


_TEXT = st.text(alphabet="ab c\u00e9\u4e2d\x00\U0001f600", max_size=12)
_BYTES = st.binary(max_size=6) | st.lists(  # also UTF-8 pieces, stray continuation and lead bytes
    st.sampled_from([b"\x80", b"\xc3", b"\xa9", b"a", b"\x00", b"\xe4\xb8\xad", b"\xf0"]),
    max_size=6,
).map(b"".join)
_VALUE = st.one_of(
    _TEXT, st.none(), st.integers(-50, 50), _BYTES, st.sampled_from([2.5, -0.0, 1e20, 3.0])
)


@settings(max_examples=500, deadline=None)
@given(x=_VALUE, y=_VALUE, z=_VALUE)
def test_linear_functions_agree_with_sqlite(x, y, z):
    """coevo's instr, replace and two-argument trims give SQLite's own results (value and type) for any arguments."""
    conn, _guard = _connection()
    plain = sqlite3.connect(":memory:")
    for sql, args in [
        ("SELECT instr(?, ?)", (x, y)),
        ("SELECT replace(?, ?, ?)", (x, y, z)),
        ("SELECT trim(?, ?)", (x, y)),
        ("SELECT ltrim(?, ?)", (x, y)),
        ("SELECT rtrim(?, ?)", (x, y)),
    ]:
        ours, theirs = _outcome(conn, sql, args), _outcome(plain, sql, args)
        assert ours == theirs and type(ours[0]) is type(theirs[0]), (sql, args, ours, theirs)


def _outcome(conn: sqlite3.Connection, sql: str, args: tuple) -> tuple:
    try:
        return conn.execute(sql, args).fetchone()
    except sqlite3.Error:  # text that is not UTF-8 (a BLOB read as text) cannot reach Python
        return ("error",)


def test_a_world_too_large_to_build_is_a_clear_error_and_bounded():
    """Seed rows whose defaults would blow up the world fail with the size limit named, before memory runs out."""
    world = mini_world()
    world["schema"] = world["schema"] + [
        "CREATE TABLE blobs(id INTEGER PRIMARY KEY, payload BLOB DEFAULT (zeroblob(900000)))"
    ]
    world["data"] = dict(world["data"])
    world["data"]["blobs"] = {"columns": ["id"], "rows": [[i] for i in range(3000)]}
    with pytest.raises(SpecError) as info:
        World(WorldSpec.model_validate(world))
    message = str(info.value)
    assert "world.data.blobs" in message and "max_world_bytes" in message
