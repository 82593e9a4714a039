"""An API answering 529 to everything: the role gives up after ``give_up_after``, the run stops after ``run.stop_after_failing`` generations with exit 3 and the cause.

The server is a loopback fake; what is asserted is what was asked of it
(requests counted), never how long it took (printed, as a figure).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from coevo.agents.llm.client import LLMClient
from coevo.agents.llm.turns import LLMCallError

from tests.agents.fake_anthropic import FakeMessages, LoopbackServer, error
from tests.factories import IN_PROCESS_FLAGS, run_cli


@pytest.fixture(autouse=True)
def _key(monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")


def overloaded(retry_after: str) -> Any:
    """A policy: 529 "overloaded" to every request, with a ``retry-after`` header."""

    def answer(body: dict[str, Any]) -> Any:
        return error(529, "overloaded_error", "Overloaded", {"retry-after": retry_after})

    return answer


def test_a_role_gives_up_when_the_server_asks_to_wait_past_its_time(monkeypatch) -> None:
    """A 529 asking to wait an hour: one request, the call fails at once naming the wait; later calls send nothing."""
    fake = FakeMessages(overloaded("3600"))
    client = LLMClient("anthropic", give_up_after=30, http_client=fake.client())

    async def ask() -> None:
        await client.create(role="solver", task="t", messages=[{"role": "user", "content": "hi"}])

    for _ in range(3):
        with pytest.raises(LLMCallError) as caught:
            client.run(ask())
    assert len(fake.requests) == 1
    assert "asked to wait 3600 s more" in str(caught.value) and "529" in str(caught.value)
    assert "give_up_after = 30 s" in str(caught.value)


@pytest.mark.slow
def test_an_overloaded_api_stops_the_run_after_two_failing_generations(
    monkeypatch, tmp_path
) -> None:
    """`coevo run claude` against 529 to everything (retry-after 1): the Synthesizer gives up within 1.5 s, the run stops after 2 of 6 generations with exit 3 naming the cause; few requests."""
    out = tmp_path / "run"
    with LoopbackServer(overloaded("1")) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        began = time.perf_counter()
        done = run_cli(
            "run",
            "experiments/claude.toml",
            "--out",
            str(out),
            *("--set", "ray.in_process=true"),
            *("--set", "run.generations=6"),
            *("--set", "synthesizer.config.give_up_after=1.5"),
            "--json",
        )
        requests = len(server.fake.requests)
    print(f"{requests} requests, exit {done.returncode} after {time.perf_counter() - began:.1f} s")
    assert done.returncode == 3, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "coevo run: stopped after 2 of 6 generations: every call of the synthesizer "
        "'claude-synth' failed in the last 2 generations (run.stop_after_failing = 2;"
    ), last
    assert "529" in last and "gave up after give_up_after = 1.5 s" in last, last
    assert f"`coevo resume {out}`" in last
    summary = json.loads(done.stdout)
    assert summary["generations"] == 2
    assert summary["stopped_by"]["role"] == "synthesizer"
    # the synthesizer's concurrency (4) times the tries within 1.5 s at retry-after 1 (2), at most:
    # before, every call was retried 2 times in each of the 6 generations
    assert 1 <= requests <= 8, requests
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert [e["gen"] for e in events if e["event"] == "run_halted"] == [1]


def test_the_breaker_closes_on_a_good_answer() -> None:
    """Error answers for less than give_up_after, then a good one: the client keeps calling (nothing is given up)."""
    answers = iter([error(529, "overloaded_error", "Overloaded", {"retry-after": "0"})] * 2)

    def policy(body: dict[str, Any]) -> Any:
        from tests.agents.fake_anthropic import message

        return next(answers, None) or message([{"type": "text", "text": "ok"}])

    fake = FakeMessages(policy)
    client = LLMClient("anthropic", give_up_after=30, http_client=fake.client())

    async def ask() -> Any:
        return await client.create(
            role="solver", task="t", messages=[{"role": "user", "content": "hi"}]
        )

    assert client.run(ask()).text == "ok"
    assert client.breaker.gave_up is None and client.breaker.failing_since is None
    assert len(fake.requests) == 3
    asyncio.run(asyncio.sleep(0))


@pytest.mark.slow
def test_an_openai_server_down_stops_the_llm_solver_run(monkeypatch, tmp_path) -> None:
    """openai-solver against a server answering 503 (retry-after 1) to every chat request: the Solver gives up within 1.5 s, the run stops after 2 of 6 generations, exit 3 naming the solver and the 503."""
    from tests.agents.fake_openai import FakeOpenAI, status

    out = tmp_path / "run"
    with FakeOpenAI(api_key="sk-fake-test-key") as server:
        server.outage = status(503, retry_after=1)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-test-key")
        began = time.perf_counter()
        done = run_cli(
            "run",
            "openai-solver",
            "--out",
            str(out),
            *IN_PROCESS_FLAGS,
            *("--set", "run.generations=6"),
            *("--set", "curriculum.tasks_per_gen=3"),
            *("--set", "eval.per_level=1"),
            *("--set", "solver.config.concurrency=4"),
            *("--set", "solver.config.give_up_after=1.5"),
            "--json",
        )
        requests = len(server.requests)
    print(f"{requests} requests, exit {done.returncode} after {time.perf_counter() - began:.1f} s")
    assert done.returncode == 3, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "coevo run: stopped after 2 of 6 generations: every call of the solver 'llm-solver' "
        "failed in the last 2 generations"
    ), last
    assert "503" in last, last
    assert json.loads(done.stdout)["stopped_by"]["role"] == "solver"
    # at most two tries (at 0 s and 1 s) of each of the 4 calls in flight before it gave up
    assert 1 <= requests <= 8, requests
