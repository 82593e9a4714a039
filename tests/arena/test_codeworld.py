"""Code worlds: tools from an installed package's domain, run in sandboxed workers; states compared, not hashed.

Real worker processes and the real sandbox (no mocks). The runtimes are in
``codeworld_domains.py`` next to this file, named by the test (as a program
names them), never by a record.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from coevo.arena.codetask import CodeTaskSpec, assess_code_task, code_reward
from coevo.arena.codeworld import CodeWorlds, CodeWorldSpec, job, replay, state_diff
from coevo.arena.errors import SpecError
from coevo.arena.limits import DEFAULT_LIMITS
from coevo.arena.oversize import json_size
from coevo.arena.sandbox import Sandbox

HERE = str(Path(__file__).parent)
MISSING = Sandbox().missing()
RUNTIMES = {"shop": "codeworld_domains:SHOP", "hostile": "codeworld_domains:HOSTILE"}

_ORDER = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
}


def shop_world() -> CodeWorldSpec:
    return CodeWorldSpec.read(
        {
            "runtime": "shop",
            "domain": "shop",
            "system": "Cancel only pending orders.",
            "state": {
                "orders": [
                    {"id": "A1", "status": "pending", "tags": []},
                    {"id": "B2", "status": "delivered", "tags": ["gift"]},
                ]
            },
            "tools": [
                {
                    "name": "find_order",
                    "description": "An order.",
                    "parameters": _ORDER,
                    "effect": "read",
                },
                {
                    "name": "cancel_order",
                    "description": "Cancel a pending order.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "order_id": {"type": "string"},
                            "reason": {"type": "string"},
                        },
                        "required": ["order_id", "reason"],
                        "additionalProperties": False,
                    },
                    "effect": "write",
                },
                {
                    "name": "set_tags",
                    "description": "Replace an order's tags.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "order_id": {"type": "string"},
                            "tags": {"type": "array", "items": {"type": "string"}},
                        },
                        "required": ["order_id", "tags"],
                    },
                    "effect": "write",
                },
                {
                    "name": "note_visit",
                    "description": "Record a visit.",
                    "parameters": {"type": "object", "properties": {}},
                    "effect": "write",
                },
            ],
        }
    )


def hostile_world() -> CodeWorldSpec:
    def tool(name: str, props: dict[str, Any] | None = None) -> dict[str, Any]:
        params = {"type": "object", "properties": props or {}}
        return {"name": name, "description": name, "parameters": params, "effect": "write"}

    return CodeWorldSpec.read(
        {
            "runtime": "hostile",
            "domain": "hostile",
            "state": {},
            "tools": [
                tool("read_file", {"path": {"type": "string"}}),
                tool("connect", {"port": {"type": "integer"}}),
                tool("fork_bomb"),
                tool("allocate", {"gib": {"type": "integer"}}),
                tool("spin"),
                tool("hang"),
                tool("die"),
                tool("count"),
                tool("flood", {"megabytes": {"type": "integer"}}),
                tool("shout", {"megabytes": {"type": "integer"}}),
                tool("grow", {"megabytes": {"type": "integer"}}),
                tool("forge", {"megabytes": {"type": "integer"}}),
            ],
        }
    )


SANDBOX = Sandbox(cpu_seconds=1, memory_bytes=1 << 30, processes=32)


@pytest.fixture(scope="module")
def worlds():
    """A wall clock far past the CPU limit: a spinning tool meets its CPU limit even on a saturated machine."""
    with CodeWorlds(runtimes=RUNTIMES, seconds=60, sandbox=SANDBOX, paths=[HERE]) as pool:
        yield pool


def test_a_call_changes_the_state_and_a_reset_starts_from_the_record(worlds) -> None:
    """Each episode starts from the serialized initial state; a write in one is not seen by the next."""
    world = shop_world()
    first = worlds.episode(world)
    obs = first.step("cancel_order", {"order_id": "A1", "reason": "changed my mind"})
    assert obs.ok and obs.result["status"] == "cancelled"
    second = worlds.episode(world)
    assert second.step("find_order", {"order_id": "A1"}).result["status"] == "pending"
    assert first.state()["orders"][0]["status"] == "cancelled"
    assert second.state() == world.state
    first.close()
    second.close()


def test_a_tool_that_raises_and_bad_arguments_are_errors_the_agent_sees(worlds) -> None:
    episode = worlds.episode(shop_world())
    refused = episode.step("cancel_order", {"order_id": "B2", "reason": "x"})
    assert not refused.ok and refused.error == "ValueError: order B2 is delivered, not pending"
    bad = episode.step("cancel_order", {"order_id": "A1"})
    assert not bad.ok and "'reason' is a required property" in bad.error
    extra = episode.step("cancel_order", {"order_id": "A1", "reason": "x", "force": True})
    assert not extra.ok and "force" in extra.error
    unknown = episode.step("drop_table", {})
    assert (
        not unknown.ok and "no tool 'drop_table'" in unknown.error and "find_order" in unknown.error
    )
    assert episode.step("cancel_order", {"order_id": "A1", "reason": "x"}).ok  # and it goes on
    assert episode.failed is None


def test_equivalent_states_are_equal_and_a_difference_is_named() -> None:
    """Key order does not matter; the diff says where two states differ."""
    assert state_diff({"a": 1, "b": [1, {"c": 2}]}, {"b": [1.0, {"c": 2}], "a": 1}) == []
    assert state_diff({"a": {"s": "pending"}}, {"a": {"s": "cancelled"}}) == [
        '$.a.s: "pending" expected, "cancelled" found'
    ]
    assert state_diff({"a": [1, 2]}, {"a": [1]}) == ["$.a: 2 items expected, 1 found"]
    assert state_diff({"a": 1}, {"b": 1}) == ["$.a: missing", "$.b: not expected"]
    assert state_diff({"a": True}, {"a": 1}) == ["$.a: true expected, 1 found"]


def test_two_orders_of_independent_writes_reach_the_same_state(worlds) -> None:
    """A solution that does the same writes in another order is equivalent: its final state is the same."""
    world = shop_world()
    gold, _, failed = replay(
        worlds,
        world,
        [
            ("cancel_order", {"order_id": "A1", "reason": "late"}),
            ("set_tags", {"order_id": "B2", "tags": ["gift", "vip"]}),
        ],
    )
    other, _, _ = replay(
        worlds,
        world,
        [
            ("find_order", {"order_id": "B2"}),
            ("set_tags", {"order_id": "B2", "tags": ["vip", "gift", "vip"]}),
            ("cancel_order", {"order_id": "A1", "reason": "late"}),
        ],
    )
    assert failed is None and gold is not None and state_diff(gold, other) == []
    nothing, _, _ = replay(worlds, world, [])
    assert state_diff(gold, nothing) != []


def test_records_are_checked_and_runtimes_are_named_never_loaded_from_data(worlds) -> None:
    with pytest.raises(SpecError, match="parameters must be an object schema"):
        CodeWorldSpec.read(
            {
                "runtime": "shop",
                "domain": "d",
                "state": {},
                "tools": [
                    {
                        "name": "t",
                        "description": "",
                        "parameters": {"type": "string"},
                        "effect": "read",
                    }
                ],
            }
        )
    with pytest.raises(SpecError, match="tool names must be distinct and not 'submit'"):
        CodeWorldSpec.read(
            {
                "runtime": "shop",
                "domain": "d",
                "state": {},
                "tools": [
                    {"name": "submit", "description": "", "parameters": _ORDER, "effect": "read"}
                ],
            }
        )
    world = shop_world()
    with pytest.raises(SpecError, match=r"its id sha256:0+ is not the hash"):
        CodeWorldSpec.read({**world.model_dump(), "id": "sha256:" + "0" * 64})
    assert (
        CodeWorldSpec.read({**world.model_dump(), "id": world.world_id}).world_id == world.world_id
    )
    stranger = CodeWorldSpec.read({**world.model_dump(), "runtime": "codeworld_domains:SHOP"})
    with pytest.raises(
        SpecError, match="names the runtime 'codeworld_domains:SHOP', which is not installed"
    ):
        worlds.episode(stranger)


@pytest.mark.skipif(
    bool(MISSING), reason="sandbox layers not available here: " + "; ".join(MISSING)
)
@pytest.mark.slow
def test_tool_code_cannot_escape_and_the_run_goes_on(worlds, tmp_path) -> None:
    """A file outside the box, a socket, a fork bomb, 4 GiB, an endless loop: a clear per-call error each, then the next call works."""
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    received: list[bytes] = []
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def accept() -> None:
        server.settimeout(120)  # the test connects itself at the end
        try:
            conn, _ = server.accept()
            received.append(conn.recv(100))
        except OSError:
            pass

    listener = threading.Thread(target=accept, daemon=True)
    listener.start()
    episode = worlds.episode(hostile_world())
    attempts = {
        "read_file": ({"path": str(secret)}, ("PermissionError",)),
        "connect": ({"port": port}, ("PermissionError", "OSError")),  # Landlock, or no network
        "fork_bomb": ({}, ("BlockingIOError",)),
        "allocate": ({"gib": 4}, ("MemoryError",)),
        "spin": ({}, ("CpuTimeExceeded",)),
    }
    for tool, (arguments, error) in attempts.items():
        obs = episode.step(tool, arguments)
        assert not obs.ok and obs.error.startswith(error), (tool, obs)
        after = episode.step("count")
        assert after.ok, (tool, after)
    assert episode.failed is None and episode.state() == {"n": len(attempts)}
    assert worlds.restarts == 0
    # the first connection the listener takes must be the test's own
    with socket.create_connection(("127.0.0.1", port)) as own:
        own.sendall(b"the test's own")
    listener.join(60)
    server.close()
    assert received == [b"the test's own"]


@pytest.mark.slow
def test_a_worker_that_dies_or_hangs_fails_its_episode_and_is_restarted() -> None:
    """The episode is failed with the reason; other episodes and the next one go on."""
    with CodeWorlds(runtimes=RUNTIMES, seconds=2, sandbox=SANDBOX, paths=[HERE]) as worlds:
        for tool, reason in (("die", "the worker died"), ("hang", "ran past 2 s")):
            episode = worlds.episode(hostile_world())
            assert episode.step("count").ok
            obs = episode.step(tool)
            assert not obs.ok and episode.failed is not None and reason in episode.failed, (
                episode.failed
            )
            assert not episode.step("count").ok and episode.state() is None
            fresh = worlds.episode(hostile_world())
            assert fresh.step("count").result == 1
            fresh.close()
        assert worlds.restarts >= 2


def _task(solution: list[dict[str, Any]], **verifier: Any) -> CodeTaskSpec:
    return CodeTaskSpec.read(
        {
            "world": shop_world().model_dump(),
            "instruction": "Cancel order A1 (late) and tag B2 as a gift for a VIP.",
            "verifier": verifier,
            "solution": solution,
        }
    )


CANCEL = {"tool": "cancel_order", "arguments": {"order_id": "A1", "reason": "late"}}
TAG = {"tool": "set_tags", "arguments": {"order_id": "B2", "tags": ["gift", "vip"]}}
LOOK = {"tool": "find_order", "arguments": {"order_id": "B2"}}


def test_a_sound_code_task_passes_every_check_and_rewards_an_equivalent_solution(worlds) -> None:
    task = _task(
        [LOOK, CANCEL, TAG, {"tool": "respond", "arguments": {"answer": "Done, 2 orders"}}],
        communicate=["2 orders"],
    )
    verdict = assess_code_task(task, worlds)
    assert verdict.accepted, verdict.checks
    assert list(verdict.checks) == ["valid", "oracle", "noop", "unsolved", "partial", "determinism"]
    gold, _, _ = replay(
        worlds, task.world, [(c.tool, c.arguments) for c in task.solution if c.tool != "respond"]
    )
    other, _, _ = replay(
        worlds,
        task.world,
        [
            (TAG["tool"], {"order_id": "B2", "tags": ["vip", "gift"]}),
            (CANCEL["tool"], CANCEL["arguments"]),
        ],
    )
    assert code_reward(task, gold, other, ["done, 2 orders."]) == (
        1,
        "the state equals the reference's and everything to communicate was said",
    )
    assert code_reward(task, gold, other, ["done"])[0] == 0
    assert code_reward(task, gold, None, [], failed="its worker died") == (
        0,
        "the episode failed: its worker died",
    )


def test_the_judge_catches_no_op_partial_broken_and_nondeterministic_tasks(worlds) -> None:
    reads_only = assess_code_task(_task([LOOK]), worlds)
    assert set(reads_only.failed) == {"noop", "unsolved"}
    assert "doing nothing earns 1" in reads_only.checks["noop"].reason
    # the second write leaves B2 as it was: stopping after the first already earns 1
    same_tags = {"tool": "set_tags", "arguments": {"order_id": "B2", "tags": ["gift"]}}
    partial = assess_code_task(_task([CANCEL, same_tags]), worlds)
    assert set(partial.failed) == {"partial"}
    assert "the first 1 of 2 calls already earn 1" in partial.checks["partial"].reason
    broken = assess_code_task(
        _task([{"tool": "cancel_order", "arguments": {"order_id": "B2", "reason": "x"}}, CANCEL]),
        worlds,
    )
    assert broken.checks["oracle"].passed is False
    assert (
        "call 1 of the reference solution (cancel_order) fails: ValueError"
        in broken.checks["oracle"].reason
    )
    flaky = assess_code_task(_task([CANCEL, {"tool": "note_visit"}]), worlds)
    assert (
        flaky.checks["determinism"].passed is False
        and "different states" in flaky.checks["determinism"].reason
    )
    # ignoring the volatile field, the states agree, but the call's own result still differs
    steady = assess_code_task(_task([CANCEL, {"tool": "note_visit"}], ignore=["$.visits"]), worlds)
    assert steady.checks["determinism"].passed is False
    assert "returned something else" in steady.checks["determinism"].reason
    invalid = assess_code_task(
        _task([{"tool": "cancel_order", "arguments": {"order_id": "A1"}}, {"tool": "fly"}]), worlds
    )
    assert invalid.checks["valid"].passed is False
    assert (
        "'reason' is a required property" in invalid.checks["valid"].reason
        and "'fly'" in invalid.checks["valid"].reason
    )
    assert all(invalid.checks[c].passed is None for c in ("oracle", "noop", "partial"))


def test_a_world_a_worker_let_go_of_is_sent_again(worlds) -> None:
    """A worker keeps the initial states of its 16 most recent worlds; an older one is sent again when needed."""
    base = shop_world()
    many = [
        CodeWorldSpec.read({**base.model_dump(), "state": {**base.state, "n": i}})
        for i in range(18)
    ]
    for world in many:
        worlds.episode(world).close()
    again = worlds.episode(many[0])
    assert again.failed is None and again.state()["n"] == 0
    again.close()


def test_a_result_or_an_error_over_the_cap_is_refused_in_the_worker_and_the_episode_goes_on(
    worlds, monkeypatch
) -> None:
    """A tool returning 3 MiB (or raising a 3 MiB message) gives the agent an error naming the cap; the worker's answer stays small."""
    cap = DEFAULT_LIMITS.max_result_bytes
    episode = worlds.episode(hostile_world())
    big = episode.step("flood", {"megabytes": 3})
    assert not big.ok and f"flood returned {(3 << 20) + 2:,} bytes" in big.error
    assert f"the limit of {cap:,} bytes" in big.error
    loud = episode.step("shout", {"megabytes": 3})
    assert not loud.ok and loud.error.startswith("ValueError: AAA")
    assert len(loud.error) < cap + 100 and loud.error.endswith(
        f"[cut: {(3 << 20) + 12:,} bytes in all]"
    )
    assert episode.step("count", {}).ok and episode.failed is None  # it goes on
    episode.close()
    # what crosses the pipe is what the worker's function answers: the error, not the result
    monkeypatch.syspath_prepend(HERE)
    opened = job(
        {
            "op": "open",
            "episode": "e",
            "world": "w",
            "state": {},
            "runtime": RUNTIMES["hostile"],
            "domain": "hostile",
        }
    )
    assert opened == {"ok": True}
    answer = job({"op": "call", "episode": "e", "tool": "flood", "arguments": {"megabytes": 3}})
    assert answer["ok"] is False and json_size(answer) < 1_000
    job({"op": "close", "episode": "e"})


def test_arguments_over_the_limit_are_refused_before_any_code_runs(worlds) -> None:
    """A call sending 2 MiB of arguments is an error the agent reads; the tool never ran."""
    episode = worlds.episode(hostile_world())
    assert episode.step("count", {}).result == 1
    refused = episode.step("count", {"pad": "x" * (2 << 20)})
    assert not refused.ok and "its arguments are 2,097," in refused.error
    assert "nothing was run" in refused.error
    assert episode.step("count", {}).result == 2  # the refused call changed nothing
    episode.close()


def test_a_state_over_the_cap_fails_its_episode_saying_so_and_never_crosses_the_pipe(
    worlds, monkeypatch
) -> None:
    """A 17 MiB state is refused in the worker: the episode fails (reward 0, the reason names the cap) and the next works."""
    cap = DEFAULT_LIMITS.max_state_bytes
    task = CodeTaskSpec.read(
        {
            "world": hostile_world().model_dump(mode="json"),
            "instruction": "Count once.",
            "solution": [{"tool": "count", "arguments": {}}],
        }
    )
    episode = worlds.episode(task.world)
    assert episode.step("grow", {"megabytes": 17}).ok
    assert episode.state() is None
    assert f"its state is {(17 << 20) + 12:,} bytes of JSON, more than the limit of {cap:,}" in str(
        episode.failed
    )
    reward, reason = code_reward(task, {"n": 1}, None, failed=episode.failed)
    assert reward == 0 and "Limits.max_state_bytes" in reason
    again = worlds.episode(task.world)  # the same worker goes on
    assert again.step("count", {}).result == 1 and again.state() == {"n": 1}
    again.close()
    # what crosses the pipe is what the worker's function answers: the error, not the state
    monkeypatch.syspath_prepend(HERE)
    opening = {"op": "open", "episode": "e", "world": "w", "state": {}, "domain": "hostile"}
    assert job({**opening, "runtime": RUNTIMES["hostile"]}) == {"ok": True}
    job({"op": "call", "episode": "e", "tool": "grow", "arguments": {"megabytes": 17}})
    answer = job({"op": "state", "episode": "e"})
    assert answer["ok"] is False and json_size(answer) < 1_000
    job({"op": "close", "episode": "e"})


def test_an_answer_tool_code_writes_on_the_pipe_past_the_cap_is_not_read(worlds) -> None:
    """Tool code that writes an 18 MiB answer on its worker's pipe itself fails its episode; nothing of it is read."""
    restarts = worlds.restarts
    episode = worlds.episode(hostile_world())
    forged = episode.step("forge", {"megabytes": 18})
    assert not forged.ok and forged.result is None
    assert "this pool reads from a worker" in str(episode.failed)
    assert worlds.restarts == restarts + 1
    again = worlds.episode(hostile_world())
    assert again.step("count", {}).result == 1
    again.close()
