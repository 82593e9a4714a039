"""Imported tasks as an experiment's pool: LLM Solvers with an LLM user simulator, pass^k, resume and export.

The models are loopback fakes (an OpenAI-compatible server, and Anthropic's
Messages API on a loopback port); the tools are the runnable "kiosk" τ²
checkout's code, run in the sandbox; Ray, the game log and the analysis are
the real ones.
"""

from __future__ import annotations

import json
import re
from math import comb
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from coevo.agents.llm.user import GREETING, GUIDELINES
from coevo.arena.analysis.export import read_tasks
from coevo.arena.codetask import CodeTaskSpec, read_code_tasks
from coevo.arena.gamelog import GameLog
from coevo.run.cli import main

from tests.agents.fake_anthropic import LoopbackServer, message
from tests.agents.fake_openai import FakeOpenAI, Reply, calls, text
from tests.arena.tau2_runnable import TASKS, build_runnable_checkout

KEY = "sk-fake-benchmark"
WRITES = {"cancel_order", "refund", "add_items"}


def _scenario(body: dict[str, Any], system: str) -> int | None:
    found = re.search(r"scenario (\d+)", system)
    return int(found.group(1)) if found else None


def _user_says(system: str, heard: list[str]) -> str:
    """The fake customer: opens with its scenario's number, thanks and stops after the agent's answer."""
    assert system.startswith(GUIDELINES), "the user simulator's system text is the guidelines"
    if heard == [GREETING]:
        number = _scenario({}, system)
        return f"Hello, I am calling about scenario {number}."
    return "Thank you, that is all. ###STOP###"


class Kiosk:
    """One fake model answering both roles: the agent (plays the gold actions) and the customer.

    The agent skips every write when its episode's sampling seed is odd: a
    flaky agent, so that the trials differ and pass^k falls with k.
    """

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        if system.startswith(GUIDELINES):
            heard = [m["content"] for m in messages[1:] if m["role"] == "user"]
            return text(_user_says(system, heard))
        opening = next(m["content"] for m in messages if m["role"] == "user")
        number = int(re.search(r"scenario (\d+)", opening).group(1))
        actions = TASKS[number]["evaluation_criteria"]["actions"]
        if body.get("seed", 0) % 2:
            actions = [a for a in actions if a["name"] not in WRITES]
        made = sum(len(m.get("tool_calls") or []) for m in messages if m["role"] == "assistant")
        if made < len(actions):
            action = actions[made]
            return calls((action["name"], action["arguments"]))
        return text("Done: order #K2 holds cake and tea.")


def anthropic_customer(body: dict[str, Any]) -> dict[str, Any]:
    """The customer on Anthropic's Messages API (the system text is a top-level field there)."""
    system = body.get("system")
    if isinstance(system, list):
        system = "".join(block.get("text", "") for block in system)
    heard = []
    for m in body["messages"]:
        if m["role"] == "user":
            content = m["content"]
            heard.append(
                content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
            )
    return message([{"type": "text", "text": _user_says(system or "", heard)}])


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> tuple[Path, Path]:
    """The kiosk domain imported by `coevo import tau2`: (the tasks file, the code's folder)."""
    root = build_runnable_checkout(tmp_path_factory.mktemp("kiosk"))
    out = root / "kiosk.jsonl"
    assert main(["import", "tau2", str(root), "--domain", "kiosk", "--out", str(out)]) == 0
    return out, root / "src"


def _experiment(
    where: Path,
    pool: tuple[Path, Path],
    url: str,
    user: str,
    in_process: bool = True,
    **extra: Any,
) -> Path:
    """A benchmark experiment file; its Solver hosts in this process unless ``in_process=False``."""
    tasks, code = pool
    bench = {"trials": 3, **extra}
    lines = [
        '[run]\nname = "kiosk-bench"\nseed = 3\nchunk = 4',
        f'out = "{where / "run"}"',
        '[solver]\nname = "llm-solver"\nactors = 2',
        f'config = {{ base_url = "{url}", sampling = {{ seed = 11 }} }}',
        "[benchmark]",
        f'tasks = "{tasks}"',
        f'code = ["{code}"]',
        *(f"{k} = {json.dumps(v)}" for k, v in bench.items()),
        f"user = {user}",
        f"[ray]\nin_process = {json.dumps(in_process)}",
    ]
    path = where / "bench.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _expected_pass_k(rewards: dict[str, list[int]]) -> dict[int, float]:
    n = min(len(r) for r in rewards.values())
    return {
        k: sum(comb(sum(r), k) / comb(len(r), k) for r in rewards.values()) / len(rewards)
        for k in range(1, n + 1)
    }


def test_a_benchmark_run_plays_every_imported_task_k_times_and_analyze_gives_pass_k(
    pool, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAI(Kiosk(), api_key=KEY) as server:
        user = f'{{ base_url = "{server.url}" }}'
        exp = _experiment(tmp_path, pool, server.url, user)
        assert main(["run", str(exp)]) == 0
        chats = list(server.requests)
    summary = capsys.readouterr().err
    run = tmp_path / "run"
    log = GameLog(str(run))
    assert log.last_generation() == 2  # one generation per trial
    tasks = log.read("tasks").to_pylist()
    assert {t["source"] for t in tasks} == {"imported"} and len(tasks) == len(TASKS)
    assert all(v["accepted"] for v in log.read("verdicts").to_pylist())
    episodes = log.read("episodes").to_pylist()
    assert len(episodes) == 3 * len(TASKS) and not any(e["failure"] for e in episodes)
    assert len({e["episode_id"] for e in episodes}) == len(episodes)
    # the agent saw what the benchmark's agent sees: the policy, its greeting, the customer
    trajectory = log.read("trajectories").to_pylist()[0]
    conversation = json.loads(trajectory["messages"])
    assert conversation[0] == {
        "role": "system",
        "content": "# Kiosk policy\nCancel only pending orders.\n",
    }
    assert conversation[1] == {"role": "assistant", "content": GREETING}
    assert conversation[2]["role"] == "user" and "scenario" in conversation[2]["content"]
    assert {"solver", "user"} <= {u["role"] for u in log.read("usage").to_pylist()}
    # no request to the customer carries the reference solution or the verifier
    customer = [c for c in chats if c["messages"][0]["content"].startswith(GUIDELINES)]
    assert customer and not any("cancel_order" in json.dumps(c) for c in customer)
    # rewards: a read-only task is always solved; a task with a write only when the agent wrote
    names = {t["task_id"]: json.loads(t["spec"])["provenance"]["task"] for t in tasks}
    rewards: dict[str, list[int]] = {}
    for e in episodes:
        rewards.setdefault(e["task_id"], []).append(e["reward"])
        writes = any(c["tool"] in WRITES for c in json.loads(e["calls"]))
        if names[e["task_id"]] == "0":
            assert e["reward"] == int(writes), e["reason"]
        if names[e["task_id"]] in ("1", "2", "4"):
            assert e["reward"] == 1, e["reason"]
    expected = _expected_pass_k(rewards)
    assert expected[1] > expected[3], "the flaky agent's trials differ"
    # analyze says the same, and the run's summary printed it
    assert main(["analyze", str(run), "--json", "--no-irt"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    got = {int(k): v for k, v in metrics["pass_k"]["pass_k"].items()}
    assert got == pytest.approx(expected)
    assert metrics["pass_k"]["domains"]["kiosk"]["tasks"] == len(TASKS)
    assert f"k=3 {expected[3]:.2f}" in summary and "3 trials of 6 tasks" in summary
    assert main(["analyze", str(run), "--no-irt"]) == 0
    table = capsys.readouterr().out
    assert "a benchmark run, 3 trials of 6 tasks" in table and "pass^3" in table
    assert f"{expected[3]:.2f}" in table.splitlines()[-3]  # the "all" row


def test_the_user_simulator_can_be_claude_and_a_run_resumes_at_the_next_trial(
    pool, tmp_path, monkeypatch
) -> None:
    from coevo.arena.gamelog import GameLog as Log
    from coevo.run.benchmark import run_benchmark
    from coevo.run.experiment import load_experiment

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake")
    with FakeOpenAI(Kiosk(), api_key=KEY) as server, LoopbackServer(anthropic_customer) as claude:
        user = (
            f'{{ provider = "anthropic", model = "claude-haiku-4-5", base_url = "{claude.url}" }}'
        )
        exp = _experiment(tmp_path, pool, server.url, user, ids=["0", "1"])
        experiment = load_experiment(exp)
        lock = Log(str(tmp_path / "run")).claim(resume=False)
        try:
            first = run_benchmark(experiment, lock, resume=False, stop_after=1)
        finally:
            lock.release()
        assert first.generations == 1
        moved = tmp_path / "elsewhere.jsonl"
        pool[0].rename(moved)  # a resumed run plays the pool it logged: the file is not read
        try:
            assert main(["resume", str(tmp_path / "run")]) == 0
        finally:
            moved.rename(pool[0])
        assert claude.fake.requests, "the customer was played by the Anthropic backend"
    log = GameLog(str(tmp_path / "run"))
    episodes = log.read("episodes").to_pylist()
    assert log.last_generation() == 2 and len(episodes) == 3 * 2
    assert sorted({e["gen"] for e in episodes}) == [0, 1, 2]
    assert {r["role"] for r in log.read("usage").to_pylist()} >= {"user"}


def test_a_pool_with_user_scenarios_and_no_user_simulator_is_refused_before_it_starts(
    pool, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAI(Kiosk(), api_key=KEY) as server:
        exp = _experiment(tmp_path, pool, server.url, "{}")
        text_ = exp.read_text().replace("user = {}\n", "")
        exp.write_text(text_)
        assert main(["run", str(exp)]) == 2
    err = capsys.readouterr().err
    assert "user scenarios" in err and "[benchmark.user]" in err
    assert not (tmp_path / "run" / "log").exists()


def test_a_benchmark_runs_pool_exports_as_code_task_records_that_read_back(
    pool, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAI(Kiosk(), api_key=KEY) as server:
        user = f'{{ base_url = "{server.url}" }}'
        exp = _experiment(tmp_path, pool, server.url, user, trials=1, limit=3)
        assert main(["run", str(exp)]) == 0
    out = tmp_path / "export"
    assert main(["export", str(tmp_path / "run"), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["domain"] == "kiosk" for r in rows)
    assert rows[0]["system"].startswith("# Kiosk policy") and rows[0]["episodes"] == 1
    # the records are the imported ones, and read back as code tasks with their worlds
    back = read_tasks(out)
    original = {t.task_id: t for t in read_code_tasks(pool[0])}
    assert [t.task_id for t in back] == [r["task_id"] for r in rows]
    assert all(isinstance(t, CodeTaskSpec) and t == original[t.task_id] for t in back)
    # and the log's tables read as a dataset, each task once
    table = ds.dataset(str(tmp_path / "run" / "log" / "tasks"), format="parquet").to_table()
    assert len(set(table.column("task_id").to_pylist())) == table.num_rows == 3


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_a_solver_actor_killed_mid_trial_is_restarted_and_the_log_is_complete(
    pool, tmp_path, monkeypatch
) -> None:
    """kill -9 of this run's Solver actor while its episodes are in flight: Ray rebuilds it, the chunk is played again."""
    import os
    import signal
    import threading
    import time

    import ray
    from coevo.run.benchmark import run_benchmark
    from coevo.run.experiment import load_experiment

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    killed: list[int] = []

    def kill_one(server: FakeOpenAI, actor: Any) -> None:
        pid = ray.get(actor.pid.remote())
        deadline = time.monotonic() + 60
        while len(server.requests) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    with FakeOpenAI(Kiosk(), api_key=KEY, latency=0.1) as server:
        user = f'{{ base_url = "{server.url}" }}'
        experiment = load_experiment(
            _experiment(tmp_path, pool, server.url, user, in_process=False, trials=2)
        )
        threads: list[threading.Thread] = []

        def started(actors: list[Any]) -> None:
            threads.append(threading.Thread(target=kill_one, args=(server, actors[0])))
            threads[0].start()

        lock = GameLog(str(tmp_path / "run")).claim(resume=False)
        try:
            summary = run_benchmark(experiment, lock, resume=False, on_start=started)
        finally:
            lock.release()
        threads[0].join()
    assert killed and summary.generations == 2, "this run's Solver actor was killed while it played"
    episodes = GameLog(str(tmp_path / "run")).read("episodes").to_pylist()
    assert len(episodes) == 2 * len(TASKS) and not any(e["failure"] for e in episodes)
    assert len({e["episode_id"] for e in episodes}) == len(episodes)


def test_a_pool_that_cannot_be_played_is_refused_before_anything_is_written(
    pool, tmp_path, monkeypatch, capsys
) -> None:
    """The checkout's root given for its code; every task rejected by the Judge: exit 2, naming the fix."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAI(Kiosk(), api_key=KEY) as server:
        user = f'{{ base_url = "{server.url}" }}'
        exp = _experiment(tmp_path, pool, server.url, user, trials=1)
        wrong = str(pool[1].parent)  # the checkout, not its src
        assert main(["run", str(exp), "--set", f'benchmark.code=["{wrong}"]']) == 2
        err = capsys.readouterr().err
        assert "does not run from benchmark.code" in err and "CHECKOUT/src" in err, err
        assert not (tmp_path / "run").exists()
        # a do-nothing trajectory passes task 1 (it only reads): the replay Judge rejects it
        assert (
            main(
                [
                    "run",
                    str(exp),
                    "--set",
                    'benchmark.ids=["1"]',
                    "--set",
                    'benchmark.judge="replay"',
                ]
            )
            == 2
        )
        err = capsys.readouterr().err
        assert "rejected every task" in err and "noop" in err, err


class SilentCustomer(Kiosk):
    """The customer of scenario 1 answers with nothing (a model whose output could not be read)."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        system = body["messages"][0]["content"]
        if system.startswith(GUIDELINES) and "scenario 1\n" in system + "\n":
            return text("")
        return super().__call__(body)


def test_a_silent_user_simulator_fails_the_episode_and_it_is_left_out_of_pass_k(
    pool, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAI(SilentCustomer(), api_key=KEY) as server:
        user = f'{{ base_url = "{server.url}" }}'
        exp = _experiment(tmp_path, pool, server.url, user, trials=2, ids=["1", "2"])
        assert main(["run", str(exp), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    episodes = GameLog(str(tmp_path / "run")).read("episodes").to_pylist()
    silent = [e for e in episodes if e["failure"]]
    assert len(silent) == 2 and all("answered with nothing" in e["failure"] for e in silent)
    assert summary["pass_k"]["failed"] == 2 and summary["pass_k"]["tasks"] == 1
    assert summary["failures"] == 2 and summary["episodes"] == 4


def test_a_conversation_the_agent_opens_reaches_anthropic_behind_a_user_turn() -> None:
    """The Messages API begins with the user: a greeting agent's conversation gets a user turn first."""
    from coevo.agents.llm.anthropic_api import OPENING, to_messages

    out = to_messages(
        [{"role": "assistant", "content": GREETING}, {"role": "user", "content": "scenario 1"}]
    )
    assert [m["role"] for m in out] == ["user", "assistant", "user"]
    assert out[0]["content"] == OPENING and out[1]["content"][0]["text"] == GREETING
    assert to_messages([{"role": "user", "content": "x"}]) == [{"role": "user", "content": "x"}]
