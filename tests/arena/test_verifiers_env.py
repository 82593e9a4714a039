"""coevo's verifiers environment: played through verifiers' own entry points, scored by coevo's verifier, sent back through the inbox."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import verifiers.v1 as vf
from coevo.arena import TaskSpec, ToolCall, World, WorldSpec, write_records
from coevo.arena.analysis import load_run
from coevo.arena.analysis.export import export_run
from coevo.arena.errors import CoevoError, LogError
from coevo.arena.gamelog import GameLog
from coevo.arena.gamelog.inbox import list_parts, read_part
from coevo.arena.limits import DEFAULT_LIMITS
from coevo.run.interfaces import verifiers_env
from coevo.run.interfaces.sources import accepted_tasks, source_kind
from coevo.run.interfaces.verifiers_env import (
    PLUGIN_ID,
    CoevoEnv,
    CoevoHarness,
    CoevoState,
    CoevoTask,
    CoevoTaskset,
    environment_config,
    inbox_row,
    load_environment,
    replay,
    trace_calls,
)
from coevo.run.loop import resume_run
from verifiers.v1.cli.eval.runner import run_eval
from verifiers.v1.configs.cli.eval import EvalConfig, RunConfig
from verifiers.v1.utils.loaders import environment_class, harness_class, taskset_class

from tests.agents.fake_openai import ExplorerPolicy, FakeOpenAI, MalformedPolicy, SolutionPolicy
from tests.factories import EXAMPLES, call, load_examples, variant

KEY_VARIABLE = "COEVO_TEST_FAKE_KEY"
STORED_RUN = Path(__file__).resolve().parents[1] / "data" / "logs" / "v1-383f438"
VF_EVAL = Path(sys.executable).with_name("vf-eval")


def _examples() -> list[TaskSpec]:
    tasks, worlds = load_examples()
    return [t.model_copy(update={"world": worlds[t.world]}) for t in tasks]


def _verified(task: TaskSpec, written: list[tuple[str, str]], max_steps: int = 16) -> int:
    """coevo's verifier on a trajectory's calls, recomputed here in a fresh World (arguments are JSON objects)."""
    assert isinstance(task.world, WorldSpec)
    calls = [ToolCall(name, json.loads(arguments or "{}")) for name, arguments in written]
    with World(task.world) as world:
        return world.run(task, calls, max_steps=max_steps).reward.value


def _evaluate(server: FakeOpenAI, tmp_path: Path, env: Any, rollouts: int = 1) -> list[vf.Episode]:
    """verifiers' evaluation runner (what `vf-eval` runs), in this process, against the fake server."""
    config = EvalConfig(
        env=env,
        model="fake-model",
        client=vf.EvalClientConfig(base_url=server.url, api_key_var=KEY_VARIABLE),
        num_rollouts=rollouts,
        rich=None,
        push=False,
        output_dir=tmp_path / "vf",
        run=RunConfig(name="eval"),
    )
    return asyncio.run(run_eval(config))


@pytest.fixture
def fake_key(monkeypatch) -> Iterator[None]:
    monkeypatch.setenv(KEY_VARIABLE, "sk-fake-test-key")
    yield


@pytest.fixture
def live_run(finished_small_run, tmp_path) -> Path:
    """A copy of a finished three-generation run: its live pool is the source, its inbox the target."""
    copy = tmp_path / "run"
    shutil.copytree(finished_small_run, copy)
    return copy


# ---- through vf-eval, on a run's live pool, back through its inbox ------------------------------


def _trajectories(output: Path) -> list[dict[str, Any]]:
    """Each trace vf-eval wrote: its id, task, reward and the calls of its model turns, from traces.jsonl."""
    (traces_file,) = output.glob("*/traces.jsonl")
    out = []
    for line in traces_file.read_text().splitlines():
        episode = json.loads(line)
        assert episode["ok"], episode.get("errors")
        for trace in episode["traces"]:
            written = [
                (call["name"], call["arguments"])
                for node in trace["nodes"]
                if node.get("sampled") and node["message"]["role"] == "assistant"
                for call in node["message"].get("tool_calls") or []
            ]
            out.append(
                {
                    "id": trace["id"],
                    "task_id": trace["task"]["data"]["id"],
                    "reward": trace["rewards"]["coevo"]["score"],
                    "written": written,
                }
            )
    return out


@pytest.mark.slow
def test_vf_eval_plays_the_live_pool_scores_with_coevo_and_fills_the_inbox(
    live_run: Path, tmp_path: Path
) -> None:
    """`vf-eval coevo-verifiers` plays a run's accepted tasks; rewards are coevo's verifier; each rollout reaches the inbox once."""
    tasks = {t.task_id: t for t in accepted_tasks(str(live_run))}
    before = {p.relative_to(live_run) for p in live_run.rglob("*") if p.is_file()}
    with FakeOpenAI(SolutionPolicy(tasks.values())) as server:
        argv = [
            str(VF_EVAL),
            PLUGIN_ID,
            "--env.taskset.source",
            str(live_run),
            "--env.inbox",
            str(live_run),
            "--env.inbox-batch",
            "3",
            "--env.inbox-seconds",
            "3600",  # batches sealed by size only, however slow the machine
            "--model",
            "fake-model",
            "--client.base-url",
            server.url,
            "--client.api-key-var",
            KEY_VARIABLE,
            "-r",
            "2",
            "--no-push",
            "--no-rich",
            "--output-dir",
            str(tmp_path / "vf"),
        ]
        env = {**os.environ, KEY_VARIABLE: "sk-fake-test-key", "HOME": str(tmp_path)}
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    played = _trajectories(tmp_path / "vf")
    assert len(played) == 2 * len(tasks) and {p["task_id"] for p in played} == set(tasks)
    for trajectory in played:
        task = tasks[trajectory["task_id"]]
        assert trajectory["reward"] == _verified(task, trajectory["written"]) == 1, trajectory

    parts = list_parts(live_run)
    assert 1 < len(parts) <= len(played) // 3 + 1, "the rollouts come in batches of three or more"
    rows = [row for part in parts for row in read_part(live_run, part)]
    assert sorted(r.rollout_id for r in rows) == sorted(p["id"] for p in played), (
        "every rollout is in the inbox exactly once"
    )
    by_id = {p["id"]: p for p in played}
    for row in rows:
        trajectory = by_id[row.rollout_id]
        assert row.source == "verifiers" and row.task_id == trajectory["task_id"]
        assert row.reward == trajectory["reward"]
        assert (
            _verified(
                tasks[row.task_id], [(c.tool, json.dumps(c.arguments)) for c in row.tool_calls], 40
            )
            == 1
        )
        assert [(c.tool, c.arguments) for c in row.tool_calls] == [
            (name, json.loads(arguments)) for name, arguments in trajectory["written"]
        ]
        messages = json.loads(row.messages or "[]")
        assert messages[1] == {"role": "user", "content": tasks[row.task_id].instruction}
        assert messages[-1]["role"] == "tool", "the answer to the last call is kept too"
    after = {p.relative_to(live_run) for p in live_run.rglob("*") if p.is_file()}
    assert {p.parts[0] for p in after - before} == {"inbox"}, "only the inbox is written"
    assert not [p for p in after - before if p.name.startswith(".")], "no temporary file is left"

    # the run goes on one more generation, which ingests the inbox into its log, once
    record = json.loads((live_run / "experiment.json").read_text())
    record["run"]["generations"] += 1
    (live_run / "experiment.json").write_text(json.dumps(record))
    resume_run(str(live_run))
    log = GameLog(str(live_run))
    last = log.last_generation()
    ingested = log.read("ingested").to_pylist()
    assert sorted(r["part_id"] for r in ingested) == parts and {r["gen"] for r in ingested} == {
        last
    }
    assert sum(r["episodes"] for r in ingested) == len(rows)
    assert all(r["rejected"] == r["disagreed"] == 0 and r["error"] is None for r in ingested)
    external = [e for e in log.read("episodes").to_pylist() if e["purpose"] == "external"]
    assert sorted(e["task_id"] for e in external) == sorted(r.task_id for r in rows)
    assert all(e["reward"] == 1 and e["gen"] == last for e in external)
    kept = log.read("trajectories").to_pylist()
    assert sum(t["purpose"] == "external" for t in kept) == len(rows)


# ---- in-process: rewards, policies, malformed turns ------------------------------------------------


def test_explorer_rollouts_mostly_fail_and_every_reward_is_the_verifiers(
    tmp_path: Path, fake_key: None
) -> None:
    """A generic explorer rarely solves a task; each reward equals coevo's verifier on the trace's calls."""
    tasks = {t.task_id: t for t in _examples()}
    with FakeOpenAI(ExplorerPolicy(steps=3)) as server:
        episodes = _evaluate(server, tmp_path, environment_config(str(EXAMPLES)), rollouts=2)
    traces = [trace for episode in episodes for trace in episode.traces]
    assert len(traces) == 2 * len(tasks) and all(t.ok for t in traces)
    for trace in traces:
        task = tasks[str(trace.task.data.id)]
        written = trace_calls(trace)
        assert len(written) == 3 and written[-1][0] == "submit"
        assert trace.rewards["coevo"].score == _verified(task, written)
        assert inbox_row(trace).reward == trace.rewards["coevo"].score
    assert sum(t.reward for t in traces) <= len(traces) / 4, "an explorer solves few tasks"


def test_malformed_turns_are_refused_steps_and_the_reward_still_replays(
    tmp_path: Path, fake_key: None
) -> None:
    """Unparseable arguments, unknown tools and turns with no call are steps of the episode, never failures."""
    tasks = {t.task_id: t for t in _examples()}
    with FakeOpenAI(MalformedPolicy()) as server:
        episodes = _evaluate(
            server, tmp_path, environment_config(str(EXAMPLES), max_steps=8, nudges=2)
        )
    for episode in episodes:
        (trace,) = episode.traces
        assert trace.ok, trace.errors
        row = inbox_row(trace)
        calls = [c.arguments for c in row.tool_calls]
        assert any("$raw" in arguments for arguments in calls), "a refused call keeps its text"
        assert len(calls) == 6, "six calls and two reminders spend the budget of 8"
        assert trace.info["coevo"]["reason"] == "the step budget of 8 ran out before submit"
        again = replay(tasks[row.task_id], trace_calls(trace), 8)
        assert trace.rewards["coevo"].score == again.reward.value == 0
        # what the loop does with the row: its calls made in the world as they are (the default budget)
        world = tasks[row.task_id].world
        assert isinstance(world, WorldSpec)
        with World(world) as fresh:
            assert fresh.run(tasks[row.task_id], row.tool_calls).reward.value == row.reward
        assert [(c.tool, c.arguments) for c in again.calls] == [
            (c.tool, c.arguments) for c in row.tool_calls
        ]
        reminders = [m for m in json.loads(row.messages or "[]") if m["role"] == "user"][1:]
        assert len(reminders) == 2 and all(m["content"].startswith("error:") for m in reminders)


def test_solution_rollouts_earn_one_and_keep_the_conversation(
    tmp_path: Path, fake_key: None
) -> None:
    """Playing each task's reference solution earns 1; the inbox row holds the whole conversation and tools."""
    tasks = _examples()
    with FakeOpenAI(SolutionPolicy(tasks, parallel=2)) as server:
        episodes = _evaluate(server, tmp_path, environment_config(str(EXAMPLES)))
    for episode in episodes:
        (trace,) = episode.traces
        row = inbox_row(trace, rollout=4)
        assert row.reward == 1 and row.rollout == 4 and row.rollout_id == trace.id
        task = next(t for t in tasks if t.task_id == row.task_id)
        assert row.tool_calls == task.solution
        assert [t["function"]["name"] for t in json.loads(row.tools or "[]")][-1] == "submit"
        assert row.model == row.policy_version == "fake-model"
        assert row.turn_prompt_ids is None, "an eval client returns no token ids"


# ---- the environment and its sources ------------------------------------------------------------------


def test_verifiers_finds_the_plugin_by_its_id() -> None:
    """verifiers' own loader resolves `coevo-verifiers` to coevo's taskset, harness and env."""
    assert environment_class(PLUGIN_ID) is CoevoEnv
    assert taskset_class(PLUGIN_ID) is CoevoTaskset
    assert harness_class(PLUGIN_ID) is CoevoHarness
    assert CoevoTaskset.task_type() is CoevoTask


def test_load_environment_reads_records_filters_and_orders_by_seed(tmp_path: Path) -> None:
    """Records are judged and served; domains, limit and seed choose the tasks, deterministically."""
    env = load_environment(str(EXAMPLES), seed=None)
    assert isinstance(env, CoevoEnv) and env.inbox is None
    served = list(env.taskset)
    assert [t.key for t in served] == [t.task_id for t in _examples()]
    first = served[0].data
    assert first.prompt == _examples()[0].instruction and first.max_steps == 16
    retail = [t.data.domain for t in load_environment(str(EXAMPLES), domains=["retail"]).taskset]
    assert retail == ["retail", "retail"]
    picks = [
        [t.key for t in load_environment(str(EXAMPLES), limit=2, seed=s).taskset] for s in (1, 1, 2)
    ]
    assert picks[0] == picks[1] and len(picks[0]) == 2
    with pytest.raises(CoevoError, match="none of its 4 accepted tasks is of domains"):
        list(load_environment(str(EXAMPLES), domains=["airline"]).taskset)


def test_sources_that_are_not_sources_and_inboxes_that_are_not_runs_are_refused(
    tmp_path: Path,
) -> None:
    """A missing source, a folder that is no run or export, a rejected record and a non-run inbox say what to give."""
    with pytest.raises(CoevoError, match="no such file or directory"):
        source_kind(str(tmp_path / "missing"))
    with pytest.raises(CoevoError, match="neither a run directory"):
        source_kind(str(tmp_path))
    with pytest.raises(CoevoError, match="holds no run"):
        load_environment(str(EXAMPLES), inbox=str(tmp_path))
    with pytest.raises(CoevoError, match="needs a source"):
        list(load_environment("").taskset)
    task = _examples()[1]
    assert isinstance(task.world, WorldSpec)
    unsolved = variant(task, task.world, lambda data: data.update(solution=[call("submit")]))
    write_records(tmp_path / "rejected.jsonl", [unsolved])
    with pytest.raises(CoevoError, match=r"rejected by the Judge: .*oracle.*coevo check"):
        list(load_environment(str(tmp_path / "rejected.jsonl")).taskset)


@pytest.mark.slow
def test_a_run_and_its_export_serve_the_same_tasks(live_run: Path, tmp_path: Path) -> None:
    """The live pool of a run directory is its accepted, non-eval tasks: what `coevo export` exports."""
    out = tmp_path / "export"
    export_run(load_run(str(live_run)), out)
    assert source_kind(str(live_run)) == "run" and source_kind(str(out)) == "export"
    pool = [t.task_id for t in accepted_tasks(str(live_run))]
    assert pool and pool == [t.task_id for t in accepted_tasks(str(out))]
    assert [t.task_id for t in accepted_tasks(str(out / "tasks.jsonl"))] == pool
    served = [t.key for t in load_environment(str(live_run), seed=None).taskset]
    assert served == pool


# ---- the inbox rows and their batches ---------------------------------------------------------------


def _trained_trace(task: CoevoTask) -> vf.Trace:
    """A scored trace as verifiers' training client leaves it: two turns, each node with its tokens."""
    nodes = [
        vf.MessageNode(
            message=vf.SystemMessage(content="s"), token_ids=[1, 2], mask=[False, False]
        ),
        vf.MessageNode(parent=0, message=vf.UserMessage(content="u"), token_ids=[3], mask=[False]),
        vf.MessageNode(
            parent=1,
            message=vf.AssistantMessage(
                tool_calls=[vf.ToolCall(id="c1", name="submit", arguments="{}")]
            ),
            sampled=True,
            token_ids=[4, 5, 6],
            mask=[False, True, True],
            logprobs=[-0.1, -0.2],
        ),
        vf.MessageNode(
            parent=2,
            message=vf.ToolMessage(tool_call_id="c1", content="ok"),
            token_ids=[7],
            mask=[False],
        ),
        vf.MessageNode(
            parent=3,
            message=vf.AssistantMessage(content="done"),
            sampled=True,
            token_ids=[8, 9],
            mask=[False, True],
            logprobs=[-0.3],
        ),
    ]
    trace = vf.Trace(
        task=vf.TraceTask(type="CoevoTask", data=task.data),
        agent=vf.AgentInfo(config=vf.AgentConfig(model="policy-7")),
        nodes=nodes,
        state=CoevoState(calls=[{"tool": "submit", "arguments": {}}]),
    )
    trace.record_reward("coevo", 0.0)
    return trace


def test_an_inbox_row_keeps_each_turns_tokens() -> None:
    """With token ids on the trace, each model turn's prompt, completion and log-probs go to the inbox row."""
    (task,) = load_environment(str(EXAMPLES), limit=1).taskset
    row = inbox_row(_trained_trace(task))
    assert row.turn_prompt_ids == [[1, 2, 3, 4], [1, 2, 3, 4, 5, 6, 7, 8]]
    assert row.turn_completion_ids == [[5, 6], [9]]
    assert row.turn_logprobs == [[-0.1, -0.2], [-0.3]]
    assert row.model == "policy-7" and row.tool_calls == [ToolCall("submit", {})]
    with pytest.raises(ValueError, match="not scored"):
        inbox_row(_trained_trace(task).model_copy(update={"rewards": {}}))


def test_a_batch_whose_write_failed_is_retried_under_its_own_id_with_its_own_rows(
    tmp_path: Path, monkeypatch
) -> None:
    """A failed write is retried with the same part id and rows, so a put that did land is replaced, not doubled."""
    run = tmp_path / "run"
    shutil.copytree(STORED_RUN, run)
    env = load_environment(str(EXAMPLES), inbox=str(run), inbox_batch=2)
    assert env.inbox is not None
    (task,) = load_environment(str(EXAMPLES), limit=1).taskset
    rows = [inbox_row(_trained_trace(task)) for _ in range(5)]
    assert len({r.rollout_id for r in rows}) == 5
    real = verifiers_env.write_part
    attempts: list[tuple[str, list[str]]] = []
    lost_answer = iter([True])

    def landed_but_failed(run_dir: Any, part_id: str, batch: list) -> str:
        attempts.append((part_id, [r.rollout_id for r in batch]))
        written = real(run_dir, part_id, batch)
        if next(lost_answer, False):
            raise OSError("the put timed out after the store took it")
        return written

    monkeypatch.setattr(verifiers_env, "write_part", landed_but_failed)
    asyncio.run(env.inbox.add(rows[:2]))
    (first,) = list_parts(run)
    asyncio.run(env.inbox.add(rows[2:3]))
    assert len(attempts) == 1, "a rollout that comes in after the failure waits in the next batch"
    asyncio.run(env.inbox.add(rows[3:4]))
    assert attempts[1] == attempts[0], "the retry writes the same part id with the same rows"
    parts = list_parts(run)
    assert len(parts) == 2 and parts[0] == first and attempts[2][0] == parts[1]
    written = [[r.rollout_id for r in read_part(run, part)] for part in parts]
    assert written == [[r.rollout_id for r in rows[:2]], [r.rollout_id for r in rows[2:4]]], (
        "every rollout is in the inbox exactly once"
    )
    assert [r.rollout for r in read_part(run, parts[1])] == [0, 1]

    monkeypatch.setattr(
        verifiers_env, "write_part", lambda *_: (_ for _ in ()).throw(OSError("gone"))
    )
    asyncio.run(env.inbox.add(rows[4:]))
    with pytest.raises(LogError, match=r"1 rollout.* could not be written .*they are lost"):
        asyncio.run(env.inbox.flush(final=True))


def test_an_inbox_refuses_a_step_budget_the_run_would_not_ingest(tmp_path: Path) -> None:
    """With an inbox, max_steps above a world's default budget (what ingestion accepts) is refused up front."""
    run = tmp_path / "run"
    shutil.copytree(STORED_RUN, run)
    budget = DEFAULT_LIMITS.max_steps
    assert load_environment(str(EXAMPLES), inbox=str(run), max_steps=budget).inbox is not None
    assert load_environment(str(EXAMPLES), max_steps=budget + 1).inbox is None
    with pytest.raises(CoevoError, match=rf"max_steps is {budget + 1}.* set max_steps to {budget}"):
        load_environment(str(EXAMPLES), inbox=str(run), max_steps=budget + 1)
