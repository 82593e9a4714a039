"""coevo tasks served to OpenEnv's own clients, over a real server on 127.0.0.1 (the `openenv` extra).

OpenEnv's modules are imported inside the fixtures and tests: importing any of
them loads gradio (about 4 s), which a quick `-m "not slow"` collection should not pay.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from coevo.arena import TaskSpec, WorldSpec
from coevo.arena.errors import RecordError
from coevo.arena.examples import EXAMPLES

pytest.importorskip("openenv", reason="the openenv extra is not installed")
pytestmark = pytest.mark.slow

Examples = tuple[list[TaskSpec], dict[str, WorldSpec]]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """The example tasks served by OpenEnv's FastAPI app under uvicorn, on a free loopback port."""
    import uvicorn
    from coevo.run.interfaces.openenv_server import TaskPool, create_openenv_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app = create_openenv_app(TaskPool.from_source(EXAMPLES), max_sessions=4)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


def _call(tool: str, arguments: dict) -> dict:
    return {"type": "call_tool", "tool_name": tool, "arguments": arguments}


def _text(value: object) -> str:
    """call_tool's value: the result text (openenv <= 0.4) or the whole observation (later, over /mcp)."""
    return value["result"] if isinstance(value, dict) else str(value)


def test_every_reference_solution_earns_1_and_an_immediate_submit_earns_0(
    url: str, examples: Examples
) -> None:
    """Through GenericEnvClient, each example's solution ends done with reward 1, and submit() alone with 0."""
    from openenv.core.generic_client import GenericEnvClient

    tasks, _ = examples
    with GenericEnvClient(base_url=url).sync() as env:
        for index, task in enumerate(tasks):
            start = env.reset(index=index)
            assert start.observation["task_id"] == task.task_id
            assert task.instruction in start.observation["instruction"]
            assert start.observation["tools"][-1]["name"] == "submit"
            rewards = []
            for call in task.solution:
                result = env.step(_call(call.tool, call.arguments))
                rewards.append(result.reward)
            assert result.done and result.reward == 1.0, result.observation
            assert sum(rewards) == 1.0, "rewards before submit must be 0"
            assert env.state()["task_id"] == task.task_id
            assert env.state()["step_count"] == len(task.solution)

            env.reset(task_id=task.task_id)
            result = env.step(_call("submit", {}))
            assert result.done and result.reward == 0.0
            assert result.observation["reason"], "the reward's reason must reach the client"


def test_mcp_tool_client_lists_and_calls_the_tools_of_the_world(
    url: str, examples: Examples
) -> None:
    """MCPToolClient sees the world's tools and gets a failed call back as an error text, not an exception."""
    from openenv.core.mcp_client import MCPToolClient

    tasks, worlds = examples
    task = tasks[0]
    with MCPToolClient(base_url=url, mode="production").sync() as env:
        env.reset(task_id=task.task_id)
        names = [tool.name for tool in env.list_tools(use_cache=False)]
        assert names == [t.name for t in worlds[task.world_id].tools] + ["submit"]
        call = task.solution[0]
        assert _text(env.call_tool(call.tool, **call.arguments)).startswith('{"columns"')
        assert _text(env.call_tool("no_such_tool")).startswith("error: unknown tool")


def test_two_sessions_play_one_task_on_separate_databases(url: str, examples: Examples) -> None:
    """A session's writes are invisible to another session on the same task: each plays its own world."""
    from openenv.core.generic_client import GenericEnvClient

    task = next(t for t in examples[0] if len(t.solution) > 1)
    with (
        GenericEnvClient(base_url=url).sync() as a,
        GenericEnvClient(base_url=url).sync() as b,
    ):
        a.reset(task_id=task.task_id)
        b.reset(task_id=task.task_id)
        for call in task.solution[:-1]:
            a.step(_call(call.tool, call.arguments))
        assert b.step(_call("submit", {})).reward == 0.0
        final = task.solution[-1]
        assert a.step(_call(final.tool, final.arguments)).reward == 1.0


def test_driving_errors_are_named(url: str) -> None:
    """A step before reset is an error observation; an unknown task id fails the reset with its reason."""
    from openenv.core.generic_client import GenericEnvClient

    with GenericEnvClient(base_url=url).sync() as env:
        result = env.step(_call("submit", {}))
        assert result.observation["result"].startswith("error: no episode has started")
        with pytest.raises(RuntimeError, match="no served task has id"):
            env.reset(task_id="sha256:nope")


def test_a_seed_picks_the_same_task_every_time(url: str) -> None:
    """reset(seed=s) is deterministic across sessions."""
    from openenv.core.generic_client import GenericEnvClient

    picked = set()
    for _ in range(2):
        with GenericEnvClient(base_url=url).sync() as env:
            picked.add(env.reset(seed=7).observation["task_id"])
    assert len(picked) == 1


def test_the_server_passes_openenv_runtime_validation(url: str) -> None:
    """`openenv validate --url` (its runtime check) accepts the server as a simulation-mode environment."""
    from openenv.cli._validation import validate_running_environment  # what the CLI calls

    report = validate_running_environment(url)
    assert report["passed"], report["summary"]
    assert report["mode"] == "simulation"


def test_a_task_whose_world_is_missing_is_refused(examples: Examples) -> None:
    """The pool reads tasks as data and names a world reference it cannot resolve."""
    from coevo.run.interfaces.openenv_server import TaskPool

    with pytest.raises(RecordError, match="does not define"):
        TaskPool(examples[0][:1], {})


def test_a_session_keeps_clones_of_the_worlds_it_played_last_only(
    examples: Examples, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session holds at most worlds_per_session clones: the least recently played is closed, and cloned anew if played again."""
    from coevo.arena.world import World
    from coevo.run.interfaces.openenv_server import CoevoEnvironment, TaskPool, ToolResult
    from openenv.core.env_server.mcp_types import CallToolAction

    tasks, _ = examples
    pool = TaskPool.from_source(EXAMPLES)
    closed: list[str] = []
    real_close = World.close

    def close(world: World) -> None:
        closed.append(world.id)
        real_close(world)

    monkeypatch.setattr(World, "close", close)
    env = CoevoEnvironment(pool, worlds_per_session=2)
    played = [tasks[i].world_id for i in (0, 2, 3)]
    assert len(set(played)) == 3, "the examples span three worlds"
    for index in (0, 2, 3):
        env.reset(index=index)
    assert env.held == tuple(played[1:]) and closed == played[:1]
    env.reset(index=1)  # the first world again, on a fresh clone
    assert env.held == (played[2], played[0]) and closed == played[:2]
    for call in tasks[1].solution:
        result = env.step(CallToolAction(tool_name=call.tool, arguments=call.arguments))
    assert isinstance(result, ToolResult) and result.done and result.reward == 1.0
    env.close()
    assert env.held == () and sorted(closed[2:]) == sorted([played[2], played[0]])
    with pytest.raises(ValueError, match="worlds_per_session must be at least 1"):
        CoevoEnvironment(pool, worlds_per_session=0)


def test_reset_arguments_of_a_wrong_type_or_name_are_refused_by_name() -> None:
    """reset names the argument of a wrong type, and refuses a name it does not take (suggesting the close one)."""
    from coevo.run.interfaces.openenv_server import CoevoEnvironment, TaskPool

    env = CoevoEnvironment(TaskPool.from_source(EXAMPLES))
    refused: dict[str, dict[str, object]] = {
        "index must be an integer from 0 to 3, not str '1'": {"index": "1"},
        "index must be an integer from 0 to 3, not bool True": {"index": True},
        "task_id must be the task_id of a served task .* not list": {"task_id": ["sha256:x"]},
        "seed must be an integer, not float 1.5": {"seed": 1.5},
        "episode_id must be a string, not int 3": {"episode_id": 3},
        r"taskid \(did you mean task_id\?\).* it takes task_id, index, seed, episode_id": {
            "taskid": "sha256:x"
        },
    }
    for message, arguments in refused.items():
        with pytest.raises(RecordError, match=message):
            env.reset(**arguments)
    assert env.state.task_id is None, "no refused reset started an episode"


def test_a_refused_reset_reaches_the_client_with_its_reason(url: str) -> None:
    """Over the WebSocket, a reset with a misspelt argument fails with the message naming it; the session goes on."""
    from openenv.core.generic_client import GenericEnvClient

    with GenericEnvClient(base_url=url).sync() as env:
        with pytest.raises(RuntimeError, match=r"taskid .*did you mean task_id"):
            env.reset(taskid="sha256:nope")
        with pytest.raises(RuntimeError, match="index must be an integer"):
            env.reset(index="1")
        assert env.reset(index=0).observation["task_id"]
