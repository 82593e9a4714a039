"""`coevo serve`: a task served over MCP, played by the official SDK's own clients on loopback (no mocks).

Over stdio the client spawns `coevo serve` as a subprocess; over streamable
HTTP the server runs in this process on 127.0.0.1 and a free port.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from coevo.arena import TaskSpec
from coevo.arena.examples import EXAMPLES
from coevo.arena.judge import WorldCache, assess_task
from coevo.arena.outcomes import Episode
from coevo.run.cli import main
from coevo.run.interfaces.mcp_server import EPISODES_FILE, EpisodeRecorder, TaskServer
from coevo.run.testing import sample_tasks
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.factories import run_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cancel() -> TaskSpec:
    """The retail task "cancel Ada's most recent pending order" (a write), whose immediate submit earns 0."""
    task = next(t for t in sample_tasks() if "cancelled" in t.instruction)
    verdict = assess_task(task, WorldCache())
    assert verdict.accepted and verdict.checks["noop"].passed, verdict.checks["noop"]
    return task


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content)


async def _play(session: ClientSession, task: TaskSpec) -> Any:
    result = None
    for call in task.solution:
        result = await session.call_tool(call.tool, call.arguments)
        assert not result.is_error, _text(result)
    return result


@asynccontextmanager
async def _http(server: TaskServer) -> AsyncIterator[str]:
    """``server`` on streamable HTTP under uvicorn in this process, on a free loopback port."""
    http, sock = server.http_server("127.0.0.1", 0)
    serving = asyncio.create_task(http.serve(sockets=[sock]))
    while not http.started:
        assert not serving.done(), "the server did not start"
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        http.should_exit = True
        await serving
        sock.close()


@asynccontextmanager
async def _session(url: str) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _run(server: TaskServer, body: Callable[[str], Awaitable[None]]) -> None:
    async def go() -> None:
        async with _http(server) as url:
            await asyncio.wait_for(body(url), timeout=20)

    asyncio.run(go())


@pytest.mark.slow  # a process of its own
def test_over_stdio_the_solution_earns_1_and_the_episode_is_recorded(
    cancel: TaskSpec, tmp_path: Path
) -> None:
    """`coevo serve` as a subprocess: the tools and instruction, the solution's reward 1, then "the episode is over"."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "coevo.run.cli",
            "serve",
            str(EXAMPLES),
            "--task",
            cancel.task_id[:19],
            "--record",
            str(tmp_path),
        ],
        cwd=str(ROOT),
    )

    async def go() -> tuple[Any, ...]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            tools = (await session.list_tools()).tools
            prompt = await session.get_prompt("task")
            final = await _play(session, cancel)
            after = await session.call_tool("list_orders", {"customer_id": 1})
            return init, tools, prompt, final, after

    init, tools, prompt, final, after = asyncio.run(asyncio.wait_for(go(), timeout=30))
    assert cancel.instruction in init.instructions
    assert cancel.instruction in prompt.messages[0].content.text
    world = cancel.world
    assert [t.name for t in tools] == [t.name for t in world.tools] + ["submit"]
    by_name = {t.name: t for t in tools}
    assert by_name["submit"].input_schema["properties"]["answer"]["type"] == "string"
    first = world.tools[0]
    assert by_name[first.name].input_schema == first.parameters
    assert by_name[first.name].description == first.description
    assert not final.is_error and final.structured_content["reward"] == 1, _text(final)
    assert _text(final).startswith("reward 1: ")
    assert after.is_error and "the episode is over; start a new session" in _text(after)
    [episode] = EpisodeRecorder(tmp_path).read()
    assert episode.reward.value == 1 and episode.task_id == cancel.task_id
    assert [c.tool for c in episode.calls] == [c.tool for c in cancel.solution]
    assert episode.solver.startswith("mcp")


def test_over_http_the_solution_earns_1_and_an_immediate_submit_0(
    cancel: TaskSpec, tmp_path: Path
) -> None:
    """Two sessions one after the other, each its own episode: the solution earns 1, submit alone 0 (with the reason)."""
    server = TaskServer(cancel, record=tmp_path)

    async def body(url: str) -> None:
        async with _session(url) as session:
            final = await _play(session, cancel)
            assert final.structured_content["reward"] == 1, _text(final)
        async with _session(url) as session:
            nothing = await session.call_tool("submit", {})
            assert not nothing.is_error
            assert nothing.structured_content["reward"] == 0
            assert nothing.structured_content["reason"] in _text(nothing)

    _run(server, body)
    episodes = EpisodeRecorder(tmp_path).read()
    assert [e.reward.value for e in episodes] == [1, 0]
    assert episodes[0].episode_id != episodes[1].episode_id


def test_concurrent_http_sessions_do_not_see_each_others_writes(cancel: TaskSpec) -> None:
    """Session A cancels the order; session B, open at the same time, still sees it pending and earns 0."""
    server = TaskServer(cancel)
    order = next(c.arguments["order_id"] for c in cancel.solution if c.tool == "cancel_order")

    def status(result: Any) -> str:
        rows = json.loads(_text(result))["rows"]
        return next(row[2] for row in rows if row[0] == order)

    async def body(url: str) -> None:
        async with _session(url) as a, _session(url) as b:
            before = await b.call_tool("list_orders", {"customer_id": 1})
            assert status(before) == "pending"
            done = await _play(a, cancel)
            assert done.structured_content["reward"] == 1
            after = await b.call_tool("list_orders", {"customer_id": 1})
            assert status(after) == "pending", "session B sees session A's write"
            mine = await b.call_tool("submit", {})
            assert mine.structured_content["reward"] == 0

    _run(server, body)
    assert server.sessions == 2


def test_bad_calls_are_error_results_and_the_session_goes_on(cancel: TaskSpec) -> None:
    """A wrong type, an unknown argument, an unknown tool, a bad answer: is_error results; the solution still earns 1."""
    server = TaskServer(cancel)

    async def body(url: str) -> None:
        async with _session(url) as session:
            wrong = await session.call_tool("list_orders", {"customer_id": "one"})
            assert wrong.is_error and "invalid arguments" in _text(wrong)
            assert "customer_id" in _text(wrong)
            extra = await session.call_tool("list_orders", {"customer_id": 1, "colour": "red"})
            assert extra.is_error and "colour" in _text(extra)
            unknown = await session.call_tool("list_ordres", {})
            assert unknown.is_error and "did you mean 'list_orders'" in _text(unknown)
            answer = await session.call_tool("submit", {"answer": 3})
            assert answer.is_error and "answer" in _text(answer)
            final = await _play(session, cancel)
            assert final.structured_content["reward"] == 1
            assert final.structured_content["steps"] == 4 + len(cancel.solution)

    _run(server, body)


def test_the_step_budget_ends_the_episode_with_0(cancel: TaskSpec) -> None:
    """With --max-steps 2, the second call ends the episode with reward 0 and says why."""
    server = TaskServer(cancel, max_steps=2)

    async def body(url: str) -> None:
        async with _session(url) as session:
            await session.call_tool("list_orders", {"customer_id": 1})
            last = await session.call_tool("list_orders", {"customer_id": 1})
            assert last.structured_content["reward"] == 0
            assert "step budget of 2 calls ran out" in _text(last)
            over = await session.call_tool("submit", {})
            assert over.is_error and "the episode is over" in _text(over)

    _run(server, body)


def test_a_session_that_ends_without_submit_is_recorded_with_0(
    cancel: TaskSpec, tmp_path: Path
) -> None:
    """Closing the session (HTTP DELETE) ends its episode: recorded with reward 0; a session with no call is not."""
    server = TaskServer(cancel, record=tmp_path)

    async def body(url: str) -> None:
        async with _session(url) as session:
            await session.call_tool("list_orders", {"customer_id": 1})
        async with _session(url) as session:
            await session.list_tools()
        for _ in range(200):
            if (tmp_path / EPISODES_FILE).exists():
                break
            await asyncio.sleep(0.01)

    _run(server, body)
    [episode] = EpisodeRecorder(tmp_path).read()
    assert episode.reward.value == 0 and episode.reward.reason == "the session ended without submit"
    assert len(episode.calls) == 1


def test_the_sdks_auto_mode_client_gets_one_episode_per_session(cancel: TaskSpec) -> None:
    """`mcp.Client(url)` (mode auto) is refused the sessionless era and falls back: its calls share an episode."""
    server = TaskServer(cancel)

    async def body(url: str) -> None:
        async with Client(url) as client:
            final = None
            for call in cancel.solution:
                final = await client.call_tool(call.tool, call.arguments)
            assert final is not None and final.structured_content["reward"] == 1, _text(final)

    _run(server, body)
    assert server.sessions == 1


def test_an_unknown_task_id_says_how_to_find_the_ids(capsys: pytest.CaptureFixture[str]) -> None:
    """Exit status 2, the ids of the file and `coevo check` named."""
    assert main(["serve", str(EXAMPLES), "--task", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "coevo serve: no task of" in err and "'nosuch'" in err
    assert sample_tasks()[0].task_id in err and "coevo check" in err


def test_a_file_of_many_tasks_needs_task(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", str(EXAMPLES)]) == 2
    assert "holds 4 tasks" in capsys.readouterr().err


def test_a_malformed_file_gives_the_record_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A line that is not JSON: the reader's own error, naming the line; exit status 2."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text(EXAMPLES.read_text().splitlines()[0] + "\n{not json\n")
    assert main(["serve", str(bad), "--task", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("coevo serve: ") and "line 2" in err


def test_host_and_port_go_with_http(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", str(EXAMPLES), "--task", "1", "--port", "9"]) == 2
    assert "--transport http" in capsys.readouterr().err


def test_recorded_lines_are_episodes(tmp_path: Path, cancel: TaskSpec) -> None:
    """Each line of episodes.jsonl is an Episode (reward, reason, calls, observations)."""
    server = TaskServer(cancel, record=tmp_path)

    async def body(url: str) -> None:
        async with _session(url) as session:
            await session.call_tool("submit", {})

    _run(server, body)
    line = (tmp_path / EPISODES_FILE).read_text().splitlines()[0]
    episode = Episode.model_validate_json(line)
    assert episode.reward.reason and episode.observations[0].tool == "submit"


def test_an_oversized_argument_is_refused_and_recorded_cut_with_its_size(
    cancel: TaskSpec, tmp_path: Path
) -> None:
    """A 2 MiB argument over HTTP: an error result naming the limit; the record keeps its start and its size, not the whole."""
    server = TaskServer(cancel, record=tmp_path)
    huge = "a" * (2 << 20)

    async def body(url: str) -> None:
        async with _session(url) as session:
            refused = await session.call_tool("find_customer_by_email", {"email": huge})
            assert refused.is_error and "1,000,000 bytes" in _text(refused)
            final = await _play(session, cancel)  # the session goes on
            assert final.structured_content["reward"] == 1

    _run(server, body)
    line = (tmp_path / EPISODES_FILE).read_text()
    assert len(line) < 20_000, "the record holds the whole argument"
    [episode] = EpisodeRecorder(tmp_path).read()
    recorded = episode.calls[0].arguments["email"]
    assert recorded.startswith("aaaa") and recorded.endswith(f"[cut: {2 << 20:,} bytes in all]")


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda tmp: Path("/dev/zero"), "it is a character device"),
        (lambda tmp: _fifo(tmp / "tasks.jsonl"), "it is a FIFO"),
        (
            lambda tmp: _link(tmp / "tasks.jsonl", "/dev/zero"),
            "a link to /dev/zero, a character device",
        ),
        (lambda tmp: _link(tmp / "tasks.jsonl", str(tmp / "gone")), "which does not exist"),
    ],
    ids=["device", "fifo", "link-to-device", "dangling-link"],
)
def test_serve_refuses_what_is_not_a_regular_file_saying_what_it_is(
    tmp_path: Path, make: Callable[[Path], Path], said: str
) -> None:
    """`coevo serve /dev/zero` (a FIFO, a link to a device): status 2, "not a regular file" and what it is, never "no such file"."""
    source = make(tmp_path)
    result = run_cli("serve", str(source), "--task", "1")
    assert result.returncode == 2, result.stderr
    assert f"{source} is not a regular file (" in result.stderr and said in result.stderr
    assert "no such file" not in result.stderr


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _link(path: Path, target: str) -> Path:
    path.symlink_to(target)
    return path
