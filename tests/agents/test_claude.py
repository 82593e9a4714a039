"""Claude roles against a local fake Messages API: tool use, errors and retries, accounting, structured output."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import httpx2
import pytest
from coevo.agents.claude.client import ClaudeCallError, ClaudeClient, ClaudeConfigError, redact
from coevo.agents.claude.roles import ClaudeSolver
from coevo.run.testing import check_role, sample_tasks
from pydantic import BaseModel

from tests.agents.fake_anthropic import FakeMessages, error, message, tool_use
from tests.factories import IN_PROCESS_FLAGS, IN_PROCESS_SETS

KEY = "sk-ant-test-0000-not-a-real-key"


@pytest.fixture(autouse=True)
def api_key(monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


def competent(tasks) -> Any:
    """A policy that plays each task's reference solution, one tool call per turn (as a good model would)."""
    by_instruction = {t.instruction: t for t in tasks}

    def policy(body: dict[str, Any]) -> dict[str, Any]:
        task = by_instruction[body["messages"][0]["content"]]
        turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
        call = task.solution[turns]
        return message(tool_use(call.tool, call.arguments, "Let me look that up."), "tool_use")

    return policy


def assert_blind(requests: list[dict[str, Any]], tasks) -> None:
    """No request's text holds a task's verifier SQL or its reference solution's calls."""
    texts = []
    for request in requests:
        texts += [b["text"] for b in request.get("system", [])]
        for m in request["messages"]:
            content = m["content"]
            texts += [content] if isinstance(content, str) else [json.dumps(b) for b in content]
    text = "\n".join(texts)
    for task in tasks:
        for check in task.verifier.checks:
            assert check.sql not in text
        hidden = [c for c in task.solution if c.tool != "submit" and c.arguments]
        for call in hidden:
            for value in call.arguments.values():
                # a value the instruction states may be repeated; one only the solution knows must not
                if str(value) not in task.instruction and isinstance(value, int) and value > 99:
                    assert f'"{value}' not in text and f": {value}" not in text


def test_a_missing_key_stops_at_once_naming_the_variable(monkeypatch) -> None:
    """Without ANTHROPIC_API_KEY the Claude roles refuse to start and say which variable to set."""
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ClaudeConfigError, match="ANTHROPIC_API_KEY"):
        ClaudeSolver()


def test_the_solver_plays_tool_use_conversations_to_reward_1() -> None:
    """Tool calls are made in the world and answered as tool_result; submit ends the episode; the system is cached."""
    tasks = sample_tasks()
    fake = FakeMessages(competent(tasks))
    solver = ClaudeSolver(http_client=fake.client())
    episodes = solver.attempt(tasks, seed=0)
    assert [e.reward.value for e in episodes] == [1] * len(tasks)
    assert [len(e.calls) for e in episodes] == [len(t.solution) for t in tasks]
    first = fake.requests[0]
    assert first["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert {t["name"] for t in first["tools"]} >= {"submit"}
    assert all("input_schema" in t for t in first["tools"])
    later = [r for r in fake.requests if len(r["messages"]) > 2]
    assert later and later[0]["messages"][2]["content"][0]["type"] == "tool_result"
    assert KEY not in str(fake.requests)
    check_role(
        ClaudeSolver(http_client=FakeMessages(competent(sample_tasks())).client()), name="claude"
    )


def test_a_failing_tool_call_goes_back_as_an_error_result() -> None:
    """A call the world refuses is a tool_result with is_error and the world's message; the episode goes on."""
    task = sample_tasks()[0]

    def policy(body: dict[str, Any]) -> dict[str, Any]:
        turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if turns == 0:
            return message(tool_use("no_such_tool", {}), "tool_use")
        call = task.solution[turns - 1]
        return message(tool_use(call.tool, call.arguments), "tool_use")

    fake = FakeMessages(policy)
    (episode,) = ClaudeSolver(http_client=fake.client()).attempt([task], seed=0)
    result = fake.requests[1]["messages"][2]["content"][0]
    assert result["is_error"] is True and "no_such_tool" in result["content"]
    assert episode.reward.value == 1


@pytest.mark.parametrize(
    ("status", "kind", "headers"),
    [
        (429, "rate_limit_error", {"retry-after": "0"}),
        (529, "overloaded_error", {}),
        (500, "api_error", {}),
    ],
)
def test_transient_errors_are_retried(status: int, kind: str, headers: dict[str, str]) -> None:
    """429 (with retry-after), 529 and 500 once each: retried, the episode still earns 1."""
    task = sample_tasks()[0]
    play = competent([task])
    failed = []

    def policy(body: dict[str, Any]) -> Any:
        if not failed:
            failed.append(True)
            return error(status, kind, "try again", headers)
        return play(body)

    fake = FakeMessages(policy)
    (episode,) = ClaudeSolver(http_client=fake.client(), max_retries=2).attempt([task], seed=0)
    assert episode.reward.value == 1
    assert len(fake.requests) == len(task.solution) + 1


def test_a_call_that_keeps_failing_is_a_recorded_failure_and_the_batch_goes_on() -> None:
    """A task whose calls always fail (500) gets a reward-0 episode saying why; the other task is solved."""
    tasks = sample_tasks()[:2]
    play = competent(tasks)

    def policy(body: dict[str, Any]) -> Any:
        if body["messages"][0]["content"] == tasks[0].instruction:
            return error(500, "api_error", f"internal error (key {KEY})")
        return play(body)

    episodes = ClaudeSolver(http_client=FakeMessages(policy).client(), max_retries=1).attempt(
        tasks, seed=0
    )
    assert episodes[0].reward.value == 0
    assert "500" in episodes[0].reward.reason and KEY not in episodes[0].reward.reason
    assert "[redacted]" in episodes[0].reward.reason
    assert episodes[1].reward.value == 1


def test_a_timeout_is_retried_then_recorded() -> None:
    """Connection timeouts are retried by the SDK; when they persist the episode records the failure."""
    task = sample_tasks()[0]

    def handler(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("the fake server is asleep", request=request)

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    (episode,) = ClaudeSolver(http_client=client, max_retries=1, timeout=1).attempt([task], seed=0)
    assert episode.reward.value == 0 and "could not be reached" in episode.reward.reason


def test_tokens_and_dollars_add_up_to_what_the_api_reported() -> None:
    """Usage per role and task sums to the usage in the fake's responses; dollars follow the price table."""
    tasks = sample_tasks()
    play = competent(tasks)
    sent: list[tuple[int, int, int, int]] = []

    def policy(body: dict[str, Any]) -> dict[str, Any]:
        answer = play(body)
        usage = (100 + len(sent), 30 + len(sent), 50 if not sent else 0, 0 if not sent else 50)
        answer["usage"] = {
            "input_tokens": usage[0],
            "output_tokens": usage[1],
            "cache_creation_input_tokens": usage[2],
            "cache_read_input_tokens": usage[3],
        }
        sent.append(usage)
        return answer

    solver = ClaudeSolver(http_client=FakeMessages(policy).client())
    solver.attempt(tasks, seed=0)
    total = solver.client.total()
    assert total.calls == len(sent)
    assert total.input_tokens == sum(u[0] for u in sent)
    assert total.output_tokens == sum(u[1] for u in sent)
    assert total.cache_write_tokens == sum(u[2] for u in sent)
    assert total.cache_read_tokens == sum(u[3] for u in sent)
    expected = sum(u[0] * 3 + u[1] * 15 + u[2] * 3 * 1.25 + u[3] * 3 * 0.1 for u in sent) / 1e6
    assert total.dollars == pytest.approx(expected)
    per_task = {task for (_, task) in solver.client.usage}
    assert per_task == {t.task_id for t in tasks}
    assert solver.learn([]).extra["output_tokens"] == total.output_tokens


class Verdict(BaseModel):
    """A small structured answer."""

    ambiguous: bool
    reason: str


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (message(tool_use("verdict", {"ambiguous": "maybe"}), "tool_use"), "does not validate"),
        (
            message(tool_use("verdikt", {"ambiguous": True, "reason": "x"}), "tool_use"),
            "must call 'verdict'",
        ),
        (
            message([{"type": "text", "text": '{"ambiguous": tr'}], "max_tokens"),
            "cut off at max_tokens",
        ),
        (message([{"type": "text", "text": "I think it is fine."}], "end_turn"), "called no tool"),
    ],
)
def test_structured_output_problems_are_named_for_the_retry(
    reply: dict[str, Any], problem: str
) -> None:
    """Malformed input, a wrong tool, a cut-off answer and no tool call each raise with the exact problem."""
    client = ClaudeClient(http_client=FakeMessages(lambda body: reply).client())
    with pytest.raises(ClaudeCallError, match=problem):
        asyncio.run(
            client.structured(
                Verdict,
                role="judge",
                task="t",
                system="s",
                messages=[{"role": "user", "content": "?"}],
            )
        )


def test_structured_output_forces_the_tool_and_validates() -> None:
    """The request forces the model's tool, whose input_schema is the pydantic JSON Schema."""
    fake = FakeMessages(
        lambda body: message(
            tool_use("verdict", {"ambiguous": False, "reason": "one reading"}), "tool_use"
        )
    )
    client = ClaudeClient(http_client=fake.client())
    answer = asyncio.run(
        client.structured(
            Verdict, role="judge", task="t", system="s", messages=[{"role": "user", "content": "?"}]
        )
    )
    assert answer == Verdict(ambiguous=False, reason="one reading")
    assert fake.requests[0]["tool_choice"] == {"type": "tool", "name": "verdict"}
    assert fake.requests[0]["tools"][0]["input_schema"] == Verdict.model_json_schema()


def test_the_key_is_redacted_from_anything_logged() -> None:
    """redact() removes the key from text bound for logs and records."""
    assert redact(f"Authorization: Bearer {KEY}") == "Authorization: Bearer [redacted]"


def test_a_claude_run_without_a_key_fails_at_once(monkeypatch, tmp_path, capsys) -> None:
    """`coevo run experiments/claude-solver.toml` with no key exits 2 before Ray starts or the run directory exists, naming the variable."""
    from coevo.run.cli import main

    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert main(["run", "experiments/claude-solver.toml", "--out", str(tmp_path / "r")]) == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err
    assert not (tmp_path / "r").exists(), "nothing is written: no lock, no event, no log"


@pytest.mark.slow
def test_a_claude_run_goes_end_to_end_against_a_loopback_fake(monkeypatch, tmp_path) -> None:
    """With ANTHROPIC_BASE_URL at a loopback fake, the arena runs generations with Claude as the Solver."""
    from coevo.arena.gamelog import GameLog
    from coevo.run.experiment import load_experiment
    from coevo.run.loop import run_experiment

    from tests.agents.fake_anthropic import LoopbackServer, heuristic_agent

    with LoopbackServer(heuristic_agent) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        exp = load_experiment(
            "experiments/claude-solver.toml",
            [
                "run.generations=2",
                "curriculum.tasks_per_gen=3",
                "eval.per_level=2",
                *IN_PROCESS_SETS,
            ],
        )
        run_experiment(exp, str(tmp_path / "run"))
        requests = list(server.fake.requests)
    log = GameLog(str(tmp_path / "run"))
    episodes = log.read("episodes").to_pylist()
    assert [r["gen"] for r in log.read("generations").to_pylist()] == [0, 1]
    assert episodes and all(e["solver"] == "claude-sonnet-5" for e in episodes)  # the model plays
    assert all(not e["failure"] for e in episodes), [e["failure"] for e in episodes if e["failure"]]
    trajectories = log.read("trajectories").to_pylist()
    assert sorted(t["episode_id"] for t in trajectories) == sorted(
        e["episode_id"] for e in episodes
    )
    assert {t["provider"] for t in trajectories} == {"anthropic"}
    assert all(json.loads(t["messages"])[0]["role"] == "system" for t in trajectories)
    assert len(requests) >= len(episodes)
    assert all(KEY not in json.dumps(r) for r in requests)


def judge_policy(tasks, *, ambiguous: bool = False, solve: bool = True) -> Any:
    """Reviews by the forced `review` tool; everything else is an agent (competent, or one that gives up)."""
    play = competent(tasks)

    def policy(body: dict[str, Any]) -> dict[str, Any]:
        if body.get("tool_choice", {}).get("name") == "review":
            review = {
                "ambiguous": ambiguous,
                "readings": ["the most recent order", "the most recent pending order"]
                if ambiguous
                else [],
                "reason": "two orders qualify" if ambiguous else "one reading",
            }
            return message(tool_use("review", review), "tool_use")
        if not solve:
            return message(tool_use("submit", {}), "tool_use")
        return play(body)

    return policy


def test_the_claude_judge_proves_solvable_and_accepts_clear_tasks() -> None:
    """Mechanical checks pass, k attempts earn 1, the review finds one reading: accepted, with reasons."""
    from coevo.agents.claude.roles import ClaudeJudge
    from coevo.run.testing import broken_task

    tasks = sample_tasks()
    fake = FakeMessages(judge_policy(tasks))
    verdicts = ClaudeJudge(k=2, http_client=fake.client()).assess([*tasks, broken_task()])
    assert [v.accepted for v in verdicts] == [True] * len(tasks) + [False]
    for v in verdicts[:-1]:
        assert v.checks["solvable"].passed is True and "2 of 2" in v.checks["solvable"].reason
        assert v.checks["ambiguity"].passed is True
    reviews = [r for r in fake.requests if r.get("tool_choice", {}).get("name") == "review"]
    assert len(reviews) == len(tasks)
    assert_blind(reviews, tasks)
    assert "broken" not in json.dumps(fake.requests), "a mechanically rejected task costs no call"
    check_role(
        ClaudeJudge(k=1, http_client=FakeMessages(judge_policy(tasks)).client()),
        name="claude-judge",
    )


def test_an_ambiguous_or_unsolved_task_is_judged_so() -> None:
    """Two readings reject the task with them in the reason; k failed attempts leave solvable unproven."""
    from coevo.agents.claude.roles import ClaudeJudge

    tasks = sample_tasks()[:1]
    (ambiguous,) = ClaudeJudge(
        k=1, http_client=FakeMessages(judge_policy(tasks, ambiguous=True)).client()
    ).assess(tasks)
    assert not ambiguous.accepted
    assert ambiguous.checks["ambiguity"].passed is False
    assert "most recent pending order" in ambiguous.checks["ambiguity"].reason
    (unsolved,) = ClaudeJudge(
        k=3, http_client=FakeMessages(judge_policy(tasks, solve=False)).client()
    ).assess(tasks)
    assert unsolved.checks["solvable"].passed is None
    assert "0 in 3 attempts" in unsolved.checks["solvable"].reason


def test_the_claude_world_model_predicts_learns_from_outcomes_and_falls_back() -> None:
    """Predictions come from the forced `predict` tool; outcomes become examples; a failing call gives the running rate."""
    from coevo.agents.claude.roles import ClaudeWorldModel

    tasks = sample_tasks()

    def policy(body: dict[str, Any]) -> Any:
        content = body["messages"][0]["content"]
        if "solved:" in content and f"Task:\n{tasks[0].instruction}" in content:
            return error(500, "api_error", "down")
        return message(tool_use("predict", {"p": 0.25, "reason": "two lookups"}), "tool_use")

    fake = FakeMessages(policy)
    model = ClaudeWorldModel(http_client=fake.client(), max_retries=0)
    assert model.predict(tasks) == [0.25] * len(tasks)
    episodes = ClaudeSolver(http_client=FakeMessages(competent(tasks)).client()).attempt(
        tasks, seed=0
    )
    model.update(episodes)
    assert model.predict(tasks[:2]) == [pytest.approx((len(tasks) + 1) / (len(tasks) + 2)), 0.25]
    assert model.errors and "500" in model.errors[0]
    sent = json.dumps(fake.requests)
    assert all(check.sql not in sent for t in tasks for check in t.verifier.checks)
    assert all(
        json.dumps(c.arguments) not in sent for t in tasks for c in t.solution if c.arguments
    )
    check_role(
        ClaudeWorldModel(
            http_client=FakeMessages(
                lambda b: message(tool_use("predict", {"p": 0.5, "reason": "x"}), "tool_use")
            ).client()
        ),
        name="claude-world-model",
    )


def test_simulated_tool_results_are_compared_with_the_real_world() -> None:
    """A simulator that answers the true rows agrees on every call; one that answers nothing does not."""
    from coevo.agents.claude.roles import ClaudeWorldModel
    from coevo.agents.llm.world_model import simulation_agreement
    from coevo.arena import World

    tasks = sample_tasks()
    truth: dict[str, list[list[Any]]] = {}
    for task in tasks:
        with World(task.world) as world:
            world.reset(task)
            for call in task.solution:
                if call.tool != "submit":
                    obs = world.step(call)
                    truth[json.dumps([call.tool, call.arguments], sort_keys=True)] = [
                        list(r) for r in obs.rows or []
                    ]

    def oracle(body: dict[str, Any]) -> dict[str, Any]:
        asked = json.loads(body["messages"][0]["content"])
        rows = truth[json.dumps([asked["tool"], asked["arguments"]], sort_keys=True)]
        return message(tool_use("result", {"ok": True, "rows": rows}), "tool_use")

    assert (
        simulation_agreement(ClaudeWorldModel(http_client=FakeMessages(oracle).client()), tasks)
        == 1.0
    )
    empty = FakeMessages(
        lambda body: message(tool_use("result", {"ok": True, "rows": [["nothing"]]}), "tool_use")
    )
    assert simulation_agreement(ClaudeWorldModel(http_client=empty.client()), tasks) < 0.5


def synth_policy(task, *, first_verifier_wrong: bool = False) -> Any:
    """Stage by stage, answers that rebuild `task` (a sample task); optionally a wrong verifier first."""
    world = task.world.model_dump(mode="json", by_alias=True)
    wrong = [first_verifier_wrong]

    def policy(body: dict[str, Any]) -> dict[str, Any]:
        stage = body["tool_choice"]["name"]
        if stage == "scenario":
            answer: dict[str, Any] = {
                "domain": "retail",
                "setting": "an online shop's back office",
                "need": "cancel an order",
            }
        elif stage == "world":
            answer = {"schema_sql": world["schema"], "data": world["data"], "tools": world["tools"]}
        elif stage == "task":
            answer = {
                "instruction": task.instruction,
                "solution": [{"tool": c.tool, "arguments": c.arguments} for c in task.solution],
            }
        else:
            verifier = task.verifier.model_dump(mode="json")
            if wrong[0]:
                wrong[0] = False
                verifier = {"checks": [{"name": "always", "sql": "SELECT 1"}], "frame": {}}
            answer = verifier
        return message(tool_use(stage, answer), "tool_use", usage=(900, 600, 0, 0))

    return policy


def test_the_claude_synthesizer_builds_a_task_that_passes_the_judge() -> None:
    """Scenario, world, task, verifier: the assembled record passes every mechanical check."""
    from coevo.agents.claude.roles import ClaudeSynthesizer
    from coevo.agents.protocols import ProposalRequest

    task = sample_tasks()[0]
    fake = FakeMessages(synth_policy(task))
    synth = ClaudeSynthesizer(http_client=fake.client())
    (made,) = synth.propose(ProposalRequest(n=1, seed=3, level=2))
    assert made.task_id == task.task_id
    assert [a["stage"] for a in synth.attempts] == ["scenario", "world", "judge"]
    assert synth.client.total("synthesizer").calls == 4


def test_a_wrong_verifier_is_sent_back_with_the_judge_s_reason_and_never_sees_the_solution() -> (
    None
):
    """A verifier already true on the initial state fails `unsolved`; the reason goes back to the verifier stage only."""
    from coevo.agents.claude.roles import ClaudeSynthesizer
    from coevo.agents.protocols import ProposalRequest

    task = sample_tasks()[0]
    fake = FakeMessages(synth_policy(task, first_verifier_wrong=True))
    synth = ClaudeSynthesizer(http_client=fake.client())
    (made,) = synth.propose(ProposalRequest(n=1, seed=4))
    assert made.task_id == task.task_id
    judged = [a for a in synth.attempts if a["stage"] == "judge"]
    assert judged[0]["error"] and "unsolved" in judged[0]["error"] and judged[1]["error"] is None
    verifier_requests = [r for r in fake.requests if r["tool_choice"]["name"] == "verifier"]
    assert len(verifier_requests) == 2
    assert "unsolved" in verifier_requests[1]["messages"][0]["content"]
    task_requests = [r for r in fake.requests if r["tool_choice"]["name"] == "task"]
    assert len(task_requests) == 1, "the task stage was not asked again"
    for request in verifier_requests:
        text = request["messages"][0]["content"]
        assert all(call.tool not in text for call in task.solution if call.tool != "submit")
        assert "solution" not in text.lower()
    assert_blind(verifier_requests, [task])


def test_a_world_that_does_not_build_is_sent_back_with_the_errors() -> None:
    """A world whose tool reads a missing table is rejected by the arena's validation; the errors go back."""
    from coevo.agents.claude.roles import ClaudeSynthesizer
    from coevo.agents.protocols import ProposalRequest

    task = sample_tasks()[0]
    good = synth_policy(task)
    broken_once = [True]

    def policy(body: dict[str, Any]) -> dict[str, Any]:
        answer = good(body)
        if body["tool_choice"]["name"] == "world" and broken_once[0]:
            broken_once[0] = False
            block = answer["content"][0]
            block["input"] = {
                **block["input"],
                "tools": [{**block["input"]["tools"][0], "sql": ["SELECT * FROM nowhere"]}],
            }
        return answer

    fake = FakeMessages(policy)
    synth = ClaudeSynthesizer(http_client=fake.client())
    (made,) = synth.propose(ProposalRequest(n=1, seed=5))
    worlds = [a for a in synth.attempts if a["stage"] == "world"]
    assert worlds[0]["error"] and "nowhere" in worlds[0]["error"] and worlds[1]["error"] is None
    world_requests = [r for r in fake.requests if r["tool_choice"]["name"] == "world"]
    assert "nowhere" in world_requests[1]["messages"][0]["content"]
    assert made.task_id == task.task_id


@pytest.mark.slow
def test_claude_toml_runs_end_to_end_against_a_loopback_fake(monkeypatch, tmp_path) -> None:
    """experiments/claude.toml (Claude synthesizer and judge, offline solver) runs generations against the fake."""
    from coevo.arena.gamelog import GameLog, RunDir
    from coevo.run.driver.display import EventLog
    from coevo.run.experiment import load_experiment
    from coevo.run.loop import run_experiment

    from tests.agents.fake_anthropic import LoopbackServer

    tasks = sample_tasks()
    synth = synth_policy(tasks[0])
    judge = judge_policy(tasks)

    returned = {"input": 0, "output": 0}

    def policy(body: dict[str, Any]) -> dict[str, Any]:
        stage = (body.get("tool_choice") or {}).get("name")
        answer = synth(body) if stage in ("scenario", "world", "task", "verifier") else judge(body)
        returned["input"] += answer["usage"]["input_tokens"]
        returned["output"] += answer["usage"]["output_tokens"]
        return answer

    with LoopbackServer(policy) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        exp = load_experiment(
            "experiments/claude.toml",
            ["run.generations=2", "curriculum.tasks_per_gen=2", "ray.in_process=true"],
        )
        events = EventLog(RunDir(str(tmp_path / "run")), console=None)
        run_experiment(exp, str(tmp_path / "run"), events=events)
        requests = list(server.fake.requests)
    log = GameLog(str(tmp_path / "run"))
    generations = log.read("generations").to_pylist()
    assert [r["gen"] for r in generations] == [0, 1]
    verdicts = log.read("verdicts").to_pylist()
    assert verdicts and all(v["accepted"] for v in verdicts)
    checks = json.loads(verdicts[0]["checks"])
    assert checks["solvable"]["passed"] is True and checks["ambiguity"]["passed"] is True
    assert log.read("episodes").num_rows > 0
    stages = {(r.get("tool_choice") or {}).get("name") for r in requests}
    assert {"scenario", "world", "task", "verifier", "review"} <= stages
    assert all(KEY not in json.dumps(r) for r in requests)
    usage = log.read("usage").to_pylist()
    assert sum(u["input_tokens"] for u in usage) == returned["input"], (
        "tokens in the log = usage returned"
    )
    assert sum(u["output_tokens"] for u in usage) == returned["output"]
    assert sum(u["calls"] for u in usage) == len(requests)
    assert {u["role"] for u in usage} == {"synthesizer", "judge", "solver"}
    logged = [
        json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()
    ]
    attempts = [e for e in logged if e["event"] == "synthesis_attempt"]
    assert {e["stage"] for e in attempts} >= {"scenario", "world", "judge"}, (
        "every attempt is logged"
    )


def test_a_malformed_response_body_is_a_recorded_failure() -> None:
    """A 200 whose body is cut-off JSON cannot be a message: the episode records why, the batch goes on."""
    task = sample_tasks()[0]

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = b'{"id": "msg_1", "type": "mess'
        return httpx2.Response(200, content=body, headers={"content-type": "application/json"})

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    (episode,) = ClaudeSolver(http_client=client, max_retries=0).attempt([task], seed=0)
    assert episode.reward.value == 0 and "malformed response" in episode.reward.reason


def test_events_never_hold_the_key(tmp_path) -> None:
    """The structlog redaction processor replaces the key in every event field before it is written."""
    from coevo.arena.gamelog import RunDir
    from coevo.run.driver.display import EventLog

    events = EventLog(RunDir(str(tmp_path)), console=None)
    events("role_failed", error=f"401 for key {KEY}", detail={"header": f"x-api-key: {KEY}"})
    text = (tmp_path / "events.jsonl").read_text()
    assert KEY not in text and text.count("[redacted]") == 2


def test_a_200_html_page_is_a_malformed_response_not_an_attribute_error() -> None:
    """A proxy's HTML page with status 200 is no message: the episode records a malformed response."""
    from tests.agents.fake_anthropic import html_page

    task = sample_tasks()[0]
    fake = FakeMessages(lambda body: html_page())
    (episode,) = ClaudeSolver(http_client=fake.client(), max_retries=0).attempt([task], seed=0)
    assert episode.reward.reason.startswith("the solver failed: ")
    assert "malformed response" in episode.reward.reason and "<html>" in episode.reward.reason
    assert "AttributeError" not in episode.reward.reason


def test_a_refused_connection_says_so(monkeypatch) -> None:
    """With the base URL at a closed port, the failure names the host and says the connection was refused."""
    from tests.agents.fake_anthropic import closed_port_url

    url = closed_port_url()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    (episode,) = ClaudeSolver(max_retries=0).attempt([sample_tasks()[0]], seed=0)
    assert url.removeprefix("http://") in episode.reward.reason
    assert "connection refused" in episode.reward.reason


def test_a_synthesizer_whose_calls_all_failed_raises_rather_than_proposing_nothing() -> None:
    """Every proposal ended on a 500: propose raises with the last error (the host records a failure)."""
    from coevo.agents.claude.roles import ClaudeSynthesizer
    from coevo.agents.protocols import ProposalRequest

    fake = FakeMessages(lambda body: error(500, "api_error", "the API is down"))
    synth = ClaudeSynthesizer(http_client=fake.client(), max_retries=0)
    with pytest.raises(ClaudeCallError, match=r"2 of 2 proposals failed.*the API is down"):
        synth.propose(ProposalRequest(n=2, seed=1))
    assert [a["stage"] for a in synth.attempts] == ["call", "call"]


def test_a_judge_whose_calls_failed_gives_a_failed_verdict() -> None:
    """Mechanically sound tasks the Claude judge could not review are rejected as judge failures, never accepted unreviewed."""
    from coevo.agents.claude.roles import ClaudeJudge
    from coevo.arena.outcomes import JUDGE_FAILED_PREFIX

    tasks = sample_tasks()[:2]
    fake = FakeMessages(lambda body: error(500, "api_error", "the API is down"))
    verdicts = ClaudeJudge(k=2, http_client=fake.client(), max_retries=0).assess(tasks)
    assert [v.accepted for v in verdicts] == [False, False]
    assert all(v.error and v.error.startswith(JUDGE_FAILED_PREFIX) for v in verdicts)
    assert all("the API is down" in v.error for v in verdicts)


def test_a_judge_whose_attempts_ran_and_earned_0_has_not_failed() -> None:
    """Attempts that ran and earned 0 leave `solvable` unproven: the verdict is no failure."""
    from coevo.agents.claude.roles import ClaudeJudge

    tasks = sample_tasks()[:1]
    fake = FakeMessages(judge_policy(tasks, solve=False))
    (verdict,) = ClaudeJudge(k=2, http_client=fake.client()).assess(tasks)
    assert verdict.error is None and verdict.accepted
    assert verdict.checks["solvable"].passed is None


def test_a_world_model_whose_calls_all_failed_raises() -> None:
    """Every prediction's call failed: predict raises (the host predicts 0.5 and reports it), one success is enough not to."""
    from coevo.agents.claude.roles import ClaudeWorldModel

    tasks = sample_tasks()[:2]
    down = FakeMessages(lambda body: error(500, "api_error", "the API is down"))
    with pytest.raises(ClaudeCallError, match="all 2 predictions failed"):
        ClaudeWorldModel(http_client=down.client(), max_retries=0).predict(tasks)

    def half(body: dict[str, Any]) -> Any:
        if tasks[0].instruction in body["messages"][0]["content"]:
            return error(500, "api_error", "the API is down")
        return message(tool_use("predict", {"p": 0.25, "reason": "short"}), "tool_use")

    model = ClaudeWorldModel(http_client=FakeMessages(half).client(), max_retries=0)
    assert model.predict(tasks)[1] == 0.25


def _run_cli(args: list[str], capsys) -> tuple[int, str, dict[str, Any]]:
    """`coevo run ... --json` in this process: the status, standard error and the JSON summary."""
    from coevo.run.cli import main

    status = main([*args, "--json"])
    captured = capsys.readouterr()
    return status, captured.err, json.loads(captured.out) if captured.out.strip() else {}


def _events(run_dir) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_an_api_outage_ends_the_run_non_zero_with_the_cause(monkeypatch, tmp_path, capsys) -> None:
    """claude.toml with every connection refused: the failures are counted, each generation is an error event, exit 3 names the cause."""
    from coevo.run.commands import EXIT_ROLE_FAILED

    from tests.agents.fake_anthropic import closed_port_url

    monkeypatch.setenv("ANTHROPIC_BASE_URL", closed_port_url())
    out = tmp_path / "run"
    status, err, summary = _run_cli(
        [
            "run",
            "experiments/claude.toml",
            "--out",
            str(out),
            "--set",
            "run.generations=2",
            "--set",
            "synthesizer.config.max_retries=0",
            "--set",
            "judge.config.max_retries=0",
            "--set",
            "ray.in_process=true",
        ],
        capsys,
    )
    assert status == EXIT_ROLE_FAILED, err
    assert summary["accepted"] == 0 and summary["failures"] > 0, summary
    assert summary["roles_never_succeeded"] == ["synthesizer"]
    assert summary["roles_failing"]["synthesizer"]["generations"] == [0, 1]
    last = err.strip().splitlines()[-1]
    assert last.startswith(
        "coevo run: the synthesizer 'claude-synth' never returned without failure"
    )
    assert "connection refused" in last and "Traceback" not in err
    assert f"{summary['failures']} role failures recorded" in err
    assert "synthesizer: every call failed in 2 generations" in err
    failed = [e for e in _events(out) if e["event"] == "role_failed_every_call"]
    assert [(e["gen"], e["role"]) for e in failed] == [(0, "synthesizer"), (1, "synthesizer")]
    assert "connection refused" in failed[0]["error"]


_ONE_SHORT_GENERATION = (
    *IN_PROCESS_FLAGS,
    *("--set", "run.generations=1"),
    *("--set", "curriculum.tasks_per_gen=2"),
    *("--set", "eval.per_level=1"),
)


@pytest.mark.slow
def test_a_solver_whose_every_call_fails_ends_the_run_non_zero(
    monkeypatch, tmp_path, capsys
) -> None:
    """Claude as the Solver against a server that answers an HTML page (200) or a 500, in turn: every episode fails, exit 3."""
    from coevo.run.commands import EXIT_ROLE_FAILED

    from tests.agents.fake_anthropic import LoopbackServer, html_page

    calls = itertools.count()

    def policy(body: dict[str, Any]) -> Any:
        if next(calls) % 2:
            return error(500, "api_error", "internal error")
        return html_page()

    out = tmp_path / "run"
    with LoopbackServer(policy) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        status, err, summary = _run_cli(
            [
                "run",
                "experiments/claude-solver.toml",
                "--out",
                str(out),
                *_ONE_SHORT_GENERATION,
                "--set",
                "solver.config.max_retries=0",
            ],
            capsys,
        )
    assert status == EXIT_ROLE_FAILED, err
    assert summary["roles_never_succeeded"] == ["solver"]
    last = err.strip().splitlines()[-1]
    assert last.startswith("coevo run: the solver 'claude' never returned without failure")
    assert "malformed response" in last or "answered 500" in last
    assert "AttributeError" not in err and "Traceback" not in err
    assert summary["failures"] >= summary["episodes"] > 0
    failed = [e for e in _events(out) if e["event"] == "role_failed_every_call"]
    assert [(e["gen"], e["role"]) for e in failed] == [(0, "solver")]
    from coevo.arena.gamelog import GameLog

    log = GameLog(str(out))
    (row,) = log.read("generations").to_pylist()
    # nothing was played: no success rate, and no update learnt from the failures
    assert row["train_success"] is None and row["eval_success"] is None
    assert [u["episodes"] for u in log.read("updates").to_pylist()] == [0]
    trajectories = log.read("trajectories").to_pylist()
    assert trajectories and all(t["failure"] for t in trajectories)


@pytest.mark.slow
def test_a_solver_that_earns_0_everywhere_has_not_failed(monkeypatch, tmp_path, capsys) -> None:
    """Claude as a Solver that submits at once: every episode earns 0, none is a failure, the run exits 0."""
    from tests.agents.fake_anthropic import LoopbackServer

    def give_up(body: dict[str, Any]) -> Any:
        return message(tool_use("submit", {}), "tool_use")

    with LoopbackServer(give_up) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        status, err, summary = _run_cli(
            [
                "run",
                "experiments/claude-solver.toml",
                "--out",
                str(tmp_path / "run"),
                *_ONE_SHORT_GENERATION,
            ],
            capsys,
        )
    assert status == 0, err
    assert summary["episodes"] > 0 and summary["failures"] == 0
    assert summary["roles_failing"] == {} and summary["roles_never_succeeded"] == []
