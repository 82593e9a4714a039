"""``coevo serve`` of a code task (an imported τ²-format task): the mcp SDK's own client plays it, tools in a sandbox."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from coevo.arena.codetask import CodeTaskSpec
from coevo.arena.codeworld import CodeWorlds
from coevo.arena.tau2 import read_domain
from coevo.arena.tau2_import import import_domain
from coevo.run.interfaces.mcp_codeworld import CodeTaskServer
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.arena.tau2_runnable import build_runnable_checkout
from tests.arena.test_mcp_server import _http, _session, _text


@pytest.fixture(scope="module")
def kiosk(tmp_path_factory) -> tuple[Path, list[CodeTaskSpec]]:
    root = build_runnable_checkout(tmp_path_factory.mktemp("tau2"))
    return root, import_domain(read_domain(root, "kiosk")).tasks


def test_over_http_the_reference_earns_1_doing_nothing_0_and_sessions_are_apart(
    kiosk, tmp_path
) -> None:
    root, tasks = kiosk
    task = tasks[0]  # cancel the pending order #K1
    with CodeWorlds(paths=[str(root / "src")]) as worlds:
        server = CodeTaskServer(task, worlds, record=tmp_path / "rec")

        async def body(url: str) -> None:
            async with _session(url) as a, _session(url) as b:
                names = [t.name for t in (await a.list_tools()).tools]
                assert names == ["get_order", "cancel_order", "refund", "add_items", "submit"]
                for call in task.solution:
                    result = await a.call_tool(call.tool, call.arguments)
                    assert not result.is_error, _text(result)
                # b's world is its own: the order a cancelled is still pending there
                seen = await b.call_tool("get_order", {"order_id": "#K1"})
                assert json.loads(_text(seen))["status"] == "pending"
                refused = await b.call_tool("cancel_order", {"order_id": "#K2"})
                assert refused.is_error and "Non-pending order cannot be cancelled" in _text(
                    refused
                )
                bad = await b.call_tool("refund", {"user": "ana"})
                assert bad.is_error and "'amount' is a required property" in _text(bad)
                done = await a.call_tool("submit", {})
                assert done.structured_content["reward"] == 1, _text(done)
                nothing = await b.call_tool("submit", {})
                assert nothing.structured_content["reward"] == 0
                assert "differs from the reference's" in nothing.structured_content["reason"]
                again = await a.call_tool("get_order", {"order_id": "#K1"})
                assert again.is_error and "the episode is over" in _text(again)

        async def go() -> None:
            async with _http(server) as url:
                await asyncio.wait_for(body(url), timeout=30)

        asyncio.run(go())
    lines = [
        json.loads(line) for line in (tmp_path / "rec" / "episodes.jsonl").read_text().splitlines()
    ]
    assert sorted(line["reward"] for line in lines) == [0, 1]
    assert all(line["task_id"] == task.task_id for line in lines)


@pytest.mark.slow  # a process of its own
def test_coevo_serve_runs_an_imported_task_over_stdio(kiosk, tmp_path) -> None:
    """The file coevo import wrote, served by `coevo serve --code SRC`, played by the SDK's stdio client."""
    root, _ = kiosk
    out = tmp_path / "kiosk.jsonl"
    records = import_domain(read_domain(root, "kiosk")).records()
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "coevo.run.cli",
            "serve",
            str(out),
            "--task",
            "2",
            "--code",
            str(root / "src"),
        ],
    )

    async def go() -> tuple[Any, Any]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            await session.call_tool("get_order", {"order_id": "#K2"})
            return init, await session.call_tool(
                "submit", {"answer": "Your order has cake and tea."}
            )

    init, result = asyncio.run(asyncio.wait_for(go(), timeout=60))
    assert "scenario 2" in init.instructions and "Kiosk policy" in init.instructions
    assert result.structured_content["reward"] == 1, _text(result)


@pytest.mark.slow  # a process of its own
def test_coevo_serve_refuses_a_task_the_judge_rejects_and_asks_which_task(kiosk, tmp_path) -> None:
    """Task 1 only reads: doing nothing earns 1, so it is not served (status 1); several tasks need --task."""
    import subprocess

    root, _ = kiosk
    out = tmp_path / "kiosk.jsonl"
    out.write_text(
        "".join(json.dumps(r) + "\n" for r in import_domain(read_domain(root, "kiosk")).records())
    )
    base = [
        sys.executable,
        "-m",
        "coevo.run.cli",
        "serve",
        str(out),
        "--code",
        str(root / "src"),
    ]
    rejected = subprocess.run(
        [*base, "--task", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert rejected.returncode == 1
    assert "task 1 of" in rejected.stderr and "rejected by the Judge" in rejected.stderr
    assert "noop (doing nothing earns 1" in rejected.stderr and "coevo audit" in rejected.stderr
    which = subprocess.run(
        base, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert which.returncode == 2 and "holds 6 tasks: pick one with --task" in which.stderr
    nowhere = subprocess.run(
        [*base[:-1], str(tmp_path / "nope"), "--task", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert nowhere.returncode == 2 and "no such folder" in nowhere.stderr


def test_a_code_tools_oversized_result_and_argument_are_errors_and_records_stay_small(
    tmp_path,
) -> None:
    """Over MCP, a tool returning 3 MiB is an error naming the cap, a 2 MiB argument is refused, and the record line holds neither."""
    from tests.arena.test_codeworld import HERE, RUNTIMES, hostile_world

    task = CodeTaskSpec.read(
        {
            "world": hostile_world().model_dump(mode="json"),
            "instruction": "Count once.",
            "solution": [{"tool": "count", "arguments": {}}],
        }
    )
    with CodeWorlds(runtimes=RUNTIMES, paths=[HERE]) as worlds:
        server = CodeTaskServer(task, worlds, record=tmp_path)

        async def body(url: str) -> None:
            async with _session(url) as session:
                big = await session.call_tool("flood", {"megabytes": 3})
                assert big.is_error and "more than the limit of 256,000 bytes" in _text(big)
                sent = await session.call_tool("count", {"pad": "x" * (2 << 20)})
                assert sent.is_error and "1,000,000 bytes" in _text(sent)
                assert not (await session.call_tool("count", {})).is_error
                done = await session.call_tool("submit", {})
                assert done.structured_content["reward"] == 1, _text(done)

        async def go() -> None:
            async with _http(server) as url:
                await asyncio.wait_for(body(url), timeout=60)

        asyncio.run(go())
    line = (tmp_path / "episodes.jsonl").read_text()
    assert len(line) < 20_000, "the record holds the whole result or argument"
    calls = json.loads(line)["calls"]
    assert calls[1]["arguments"]["pad"].endswith(f"[cut: {2 << 20:,} bytes in all]")


def test_a_submit_over_the_argument_limit_is_refused_and_a_state_over_its_cap_scores_0(
    tmp_path,
) -> None:
    """Over MCP, a 2 MiB answer is refused as a step (recorded cut) and the episode goes on; a 17 MiB final state scores 0, naming the cap."""
    from tests.arena.test_codeworld import HERE, RUNTIMES, hostile_world

    task = CodeTaskSpec.read(
        {
            "world": hostile_world().model_dump(mode="json"),
            "instruction": "Count once.",
            "solution": [{"tool": "count", "arguments": {}}],
        }
    )
    with CodeWorlds(runtimes=RUNTIMES, paths=[HERE]) as worlds:
        server = CodeTaskServer(task, worlds, record=tmp_path)

        async def body(url: str) -> None:
            async with _session(url) as a, _session(url) as b:
                said = await a.call_tool("submit", {"answer": "Z" * (2 << 20)})
                assert said.is_error and "submit: its arguments are 2,097,1" in _text(said)
                assert "more than the limit of 1,000,000 bytes" in _text(said)
                assert not (await a.call_tool("count", {})).is_error
                done = await a.call_tool("submit", {"answer": "counted"})
                assert done.structured_content["reward"] == 1, _text(done)
                assert not (await b.call_tool("grow", {"megabytes": 17})).is_error
                grown = await b.call_tool("submit", {})
                assert grown.structured_content["reward"] == 0
                assert "more than the limit of 16,777,216 bytes" in _text(grown)

        async def go() -> None:
            async with _http(server) as url:
                await asyncio.wait_for(body(url), timeout=60)

        asyncio.run(go())
    text = (tmp_path / "episodes.jsonl").read_text()
    assert len(text) < 20_000, "a record holds the whole answer or state"
    first, second = (json.loads(line) for line in text.splitlines())
    assert first["reward"] == 1 and first["said"] == ["counted"]
    assert first["calls"][0]["tool"] == "submit" and not first["calls"][0]["ok"]
    assert first["calls"][0]["arguments"]["answer"].endswith(f"[cut: {2 << 20:,} bytes in all]")
    assert second["reward"] == 0 and "Limits.max_state_bytes" in second["reason"]
