"""LLM roles on an OpenAI-compatible server: a loopback fake that behaves like vLLM (tool calls, token ids, failures)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from coevo.agents.llm.judge import LLMJudge
from coevo.agents.llm.solver import LLMSolver
from coevo.agents.llm.synthesizer import LLMSynthesizer
from coevo.agents.llm.turns import LLMCallError, LLMConfigError
from coevo.agents.llm.world_model import LLMWorldModel
from coevo.agents.protocols import ProposalRequest
from coevo.arena.gamelog.rows import TrajectoryRow
from coevo.run.testing import check_role, sample_tasks

from tests.agents.fake_openai import (
    ExplorerPolicy,
    FakeOpenAI,
    MalformedPolicy,
    Reply,
    ScriptedPolicy,
    SolutionPolicy,
    StructuredPolicy,
    call,
    decode,
    raw_call,
    status,
    text,
)
from tests.factories import IN_PROCESS_FLAGS

KEY = "sk-fake-test-key"


@pytest.fixture(autouse=True)
def api_key(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def solver(server: FakeOpenAI, **settings: Any) -> LLMSolver:
    return LLMSolver(base_url=server.url, **settings)


def test_the_solver_plays_a_multi_turn_episode_to_reward_1_with_its_tokens() -> None:
    """Each reference call is a turn; the trajectory keeps the conversation, the sampling and one token sequence whose mask marks the model's tokens."""
    task = sample_tasks()[0]
    with FakeOpenAI(SolutionPolicy([task]), models=["qwen-7b"]) as server:
        played = solver(server, sampling={"temperature": 0.7, "top_k": 20, "seed": 3})
        (episode,) = played.attempt([task], seed=0)
        sent = server.requests
    assert episode.reward.value == 1 and episode.solver == "qwen-7b"
    trajectory = episode.trajectory
    assert trajectory is not None and trajectory.policy_version == "qwen-7b"
    assert len(trajectory.turns) == len(task.solution) == len(sent)
    roles = [m["role"] for m in trajectory.messages]
    assert roles[:2] == ["system", "user"] and roles[-1] == "tool"
    assert roles.count("assistant") == len(task.solution)
    last_call = trajectory.messages[-2]["tool_calls"][0]["function"]
    assert last_call["name"] == "submit"
    # what was sent is recorded: the parameters set, and every other one pinned to its neutral value
    assert {k: v for k, v in trajectory.sampling.items() if k != "seed"} == {
        "temperature": 0.7,
        "top_k": 20,
        "top_p": 1.0,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "max_tokens": 1024,
    }
    assert sent[0]["temperature"] == 0.7 and sent[0]["top_k"] == 20
    # the episode's seed, derived from the one set, is what every call sent and what is recorded
    assert {r["seed"] for r in sent} == {trajectory.sampling["seed"]} != {3}
    assert sent[0]["return_token_ids"] is True and sent[0]["logprobs"] is True
    laid, why = trajectory.interleaved()
    assert why is None and laid is not None
    assert len(laid.token_ids) == len(laid.loss_mask) == len(laid.logprobs)
    completions = [t.completion_ids or [] for t in trajectory.turns]
    assert sum(laid.loss_mask) == sum(len(c) for c in completions)
    mine = [i for i, m in zip(laid.token_ids, laid.loss_mask, strict=True) if m]
    assert mine == [i for c in completions for i in c], "the mask marks exactly the completions"
    assert all(
        lp is not None and lp < 0 for lp, m in zip(laid.logprobs, laid.loss_mask, strict=True) if m
    )
    assert (
        laid.token_ids[: len(trajectory.turns[-1].prompt_ids or [])]
        == trajectory.turns[-1].prompt_ids
    )
    assert "find_customer" in decode(laid.token_ids) or task.solution[0].tool in decode(
        laid.token_ids
    )


def test_a_template_that_re_renders_earlier_turns_gives_per_turn_tokens() -> None:
    """When turn k+1's prompt does not extend turn k's ids, the row says `per-turn` and keeps every turn's ids."""
    task = sample_tasks()[0]
    with FakeOpenAI(SolutionPolicy([task]), template="reformat") as server:
        (episode,) = solver(server).attempt([task], seed=0)
    episode = episode.model_copy(update={"episode_id": "ep-1"})
    row = TrajectoryRow.of(episode, "train")
    assert row.layout == "per-turn" and row.token_ids is None and row.loss_mask is None
    assert row.note and "re-renders" in row.note
    assert row.turn_prompt_ids is not None and len(row.turn_prompt_ids) == row.turns
    assert row.turn_logprobs is not None
    assert [len(c) for c in row.turn_completion_ids or []] == [len(lp) for lp in row.turn_logprobs]


def test_parallel_tool_calls_are_made_in_order_and_each_answered() -> None:
    """Two calls per turn: both are made in the world, each gets its own tool message, the episode earns 1."""
    task = next(t for t in sample_tasks() if len(t.solution) >= 3)
    with FakeOpenAI(SolutionPolicy([task], parallel=2)) as server:
        (episode,) = solver(server).attempt([task], seed=0)
        second = server.requests[1]["messages"]
    assert episode.reward.value == 1
    assistant = next(m for m in second if m["role"] == "assistant")
    ids = [c["id"] for c in assistant["tool_calls"]]
    answered = [m["tool_call_id"] for m in second if m["role"] == "tool"]
    assert len(ids) == 2 and answered == ids


def test_malformed_turns_are_bad_steps_the_model_sees_never_role_failures() -> None:
    """Arguments that are not JSON, a missing required parameter, text instead of a call and a cut-off answer are each answered as an error; the episode then goes on to reward 1."""
    task = sample_tasks()[0]
    first = task.solution[0]
    replies = [
        raw_call(first.tool, '{"email": "ada@ex'),
        call(first.tool),
        text("Sure, I will look into that for you."),
        Reply(content='<tool_call>{"name": "find', finish_reason="length"),
        *[call(c.tool, **c.arguments) for c in task.solution],
    ]
    with FakeOpenAI(ScriptedPolicy(replies)) as server:
        (episode,) = solver(server, max_steps=12, nudges=3).attempt([task], seed=0)
        sent = server.requests
    assert episode.reward.value == 1, episode.reward.reason
    assert not episode.reward.reason.startswith("the solver failed")
    assert episode.calls[0].arguments == {"$raw": '{"email": "ada@ex'}
    assert not episode.observations[0].ok and "not valid JSON" in (
        episode.observations[0].error or ""
    )
    assert not episode.observations[1].ok
    answers = [m for m in sent[-1]["messages"] if m["role"] in ("tool", "user")][1:5]
    assert [a["content"].startswith("error: ") for a in answers] == [True] * 4
    assert "not valid JSON" in answers[0]["content"]
    assert "answer with a tool call" in answers[2]["content"]
    assert "cut off" in answers[3]["content"]
    # the call without its required parameter was made, and the world refused it: not a bad step
    assert episode.trajectory is not None and episode.trajectory.bad_steps == 3


def test_missing_usage_is_counted_from_the_token_ids() -> None:
    """A server that sends no usage: the tokens are counted from the ids it returned."""
    task = sample_tasks()[0]
    plays = SolutionPolicy([task])

    def policy(body: dict[str, Any]) -> Reply:
        answer = plays(body)
        return Reply(answer.content, answer.tool_calls, answer.finish_reason, usage=False)

    with FakeOpenAI(policy) as server:
        played = solver(server)
        (episode,) = played.attempt([task], seed=0)
    assert episode.reward.value == 1
    turns = episode.trajectory.turns if episode.trajectory else []
    assert all(t.input_tokens is None for t in turns)
    used = played.client.total()
    assert used.calls == len(turns)
    assert used.output_tokens == sum(len(t.completion_ids or []) for t in turns) > 0


@pytest.mark.parametrize(
    "faults",
    [
        [status(429, retry_after=0.2)],
        [status(429)],
        [status(500), status(503, retry_after=0.1)],
        [status(503)],
    ],
    ids=["429-retry-after", "429", "500-then-503-retry-after", "503"],
)
def test_transient_statuses_are_retried(faults) -> None:
    """429, 500 and 503, with and without retry-after, are retried; the episode still earns 1."""
    task = sample_tasks()[0]
    with FakeOpenAI(SolutionPolicy([task])) as server:
        played = solver(server, max_retries=3)
        server.faults.extend(faults)
        (episode,) = played.attempt([task], seed=0)
        sent = len(server.requests)
    assert episode.reward.value == 1
    assert sent == len(task.solution) + len(faults)


def test_a_retry_after_is_waited_for() -> None:
    """A 429 with retry-after: 1 holds the next call back about a second (not the 0.5 s backoff)."""
    task = sample_tasks()[0]
    with FakeOpenAI(SolutionPolicy([task])) as server:
        played = solver(server)
        server.faults.append(status(429, retry_after=1.0))
        start = time.monotonic()
        (episode,) = played.attempt([task], seed=0)
        waited = time.monotonic() - start
    assert episode.reward.value == 1 and waited >= 0.95


def test_a_status_that_keeps_failing_is_a_recorded_failure_and_the_batch_goes_on() -> None:
    """Persistent 500s end that episode as a failure naming the status; the key never appears."""
    tasks = sample_tasks()[:2]
    plays = SolutionPolicy(tasks[1:])
    with FakeOpenAI(plays) as server:
        played = solver(server, max_retries=1)
        server.faults.extend([status(500, message=f"internal error (key {KEY})")] * 2)
        episodes = played.attempt(tasks[:1], seed=0) + played.attempt(tasks[1:], seed=0)
    assert episodes[0].reward.reason.startswith("the solver failed: ")
    assert "500" in episodes[0].reward.reason and KEY not in episodes[0].reward.reason
    assert episodes[1].reward.value == 1


def test_a_server_that_restarts_mid_episode_is_waited_for() -> None:
    """Connections refused while the server restarts: the calls wait and the episode completes."""
    task = sample_tasks()[0]
    plays = SolutionPolicy([task])
    with FakeOpenAI(plays) as server:
        played = solver(server, reconnect=20)
        turns = [0]

        def policy(body: dict[str, Any]) -> Reply:
            turns[0] += 1
            if turns[0] == 2:
                server.stop()  # after this answer the port is closed: the next call is refused
                threading.Timer(1.5, server.start).start()
            return plays(body)

        server.policy = policy
        (episode,) = played.attempt([task], seed=0)
    assert episode.reward.value == 1, episode.reward.reason


def test_a_server_that_never_answered_fails_fast_naming_the_url_and_the_role() -> None:
    """An unreachable base_url at start-up: an error naming the URL and the role, at once."""
    with FakeOpenAI() as server:
        url = server.url
    start = time.monotonic()
    with pytest.raises(LLMConfigError) as raised:
        LLMSolver(base_url=url)
    assert time.monotonic() - start < 15
    assert url in str(raised.value) and "the solver 'llm-solver'" in str(raised.value)
    assert "could not be reached" in str(raised.value)


def test_a_model_the_server_does_not_serve_is_a_start_up_error_naming_both() -> None:
    """The model named is not among /v1/models: the error names it and what the server serves."""
    with FakeOpenAI(models=["qwen-7b", "qwen-7b-lora-3"]) as server:
        with pytest.raises(
            LLMConfigError, match=r"does not serve the model 'llama-3'.*qwen-7b, qwen-7b-lora-3"
        ):
            LLMSolver("llama-3", base_url=server.url)
        adapter = LLMSolver("qwen-7b-lora-3", base_url=server.url)
    assert adapter.policy_version() == "qwen-7b-lora-3"


def test_an_unset_key_variable_is_named(monkeypatch) -> None:
    """A role whose api_key_env is unset stops at once naming the variable, never a value."""
    monkeypatch.delenv("MY_VLLM_KEY", raising=False)
    with FakeOpenAI() as server, pytest.raises(LLMConfigError, match="MY_VLLM_KEY"):
        LLMSolver(base_url=server.url, api_key_env="MY_VLLM_KEY")


def test_a_wrong_key_is_named_by_its_variable_not_its_value(monkeypatch) -> None:
    """A 401 at start-up names the variable to check and never the key."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-value-123")
    with FakeOpenAI() as server, pytest.raises(LLMConfigError) as raised:
        LLMSolver(base_url=server.url)
    assert "OPENAI_API_KEY" in str(raised.value) and "sk-wrong-value-123" not in str(raised.value)


def test_several_endpoints_share_the_calls_within_their_limits() -> None:
    """Two servers, two calls in flight each at most: both serve, neither goes over its limit."""
    tasks = sample_tasks() * 2
    with (
        FakeOpenAI(SolutionPolicy(tasks), latency=0.05) as one,
        FakeOpenAI(SolutionPolicy(tasks), latency=0.05) as two,
    ):
        played = LLMSolver(
            endpoints=[
                {"base_url": one.url, "concurrency": 2},
                {"base_url": two.url, "concurrency": 2},
            ]
        )
        episodes = played.attempt(tasks, seed=0)
        served = (len(one.requests), len(two.requests))
        peaks = (one.max_in_flight, two.max_in_flight)
    assert all(e.reward.value == 1 for e in episodes)
    assert min(served) > 0 and max(peaks) <= 2


def test_a_server_that_goes_down_leaves_its_calls_to_the_other() -> None:
    """One of two servers stops: the calls it refuses go to the other and every episode completes."""
    tasks = sample_tasks()
    with FakeOpenAI(SolutionPolicy(tasks)) as one, FakeOpenAI(SolutionPolicy(tasks)) as two:
        played = LLMSolver(base_url=[one.url, two.url], reconnect=30)
        two.stop()
        episodes = played.attempt(tasks, seed=0)
    assert all(e.reward.value == 1 for e in episodes), [e.reward.reason for e in episodes]


def test_a_server_that_refuses_token_ids_is_asked_again_without_them() -> None:
    """A 400 naming return_token_ids turns token capture off for that client, and the call is made again."""
    task = sample_tasks()[0]
    with FakeOpenAI(SolutionPolicy([task])) as server:
        played = solver(server)
        server.faults.append(status(400, message="Unrecognized request argument: return_token_ids"))
        (episode,) = played.attempt([task], seed=0)
        sent = server.requests
    assert episode.reward.value == 1
    assert sent[0].get("return_token_ids") is True and "return_token_ids" not in sent[1]
    assert episode.trajectory is not None and not episode.trajectory.has_tokens


def test_the_llm_solver_conforms() -> None:
    """check_role passes on llm-solver against the fake (trajectories aside, episodes repeat)."""
    with FakeOpenAI(SolutionPolicy(sample_tasks())) as server:
        check_role(solver(server), name="llm-solver")


def structured(answers: dict[str, Any], tasks) -> Any:
    """Answers forced functions from ``answers``; plays ``tasks``' solutions otherwise."""
    forced = StructuredPolicy(answers)
    plays = SolutionPolicy(tasks)

    def policy(body: dict[str, Any]) -> Reply:
        return forced(body) if isinstance(body.get("tool_choice"), dict) else plays(body)

    return policy


def test_the_llm_judge_proves_solvable_and_reviews_on_the_server() -> None:
    """k attempts earn 1 and the review finds one reading: accepted with both checks."""
    tasks = sample_tasks()[:2]
    review = {"ambiguous": False, "readings": [], "reason": "one reading"}
    with FakeOpenAI(structured({"review": review}, tasks)) as server:
        verdicts = LLMJudge(k=2, base_url=server.url).assess(tasks)
    assert all(v.accepted for v in verdicts)
    assert all(v.checks["solvable"].passed and v.checks["ambiguity"].passed for v in verdicts)


def test_the_llm_world_model_predicts_on_the_server() -> None:
    """predict asks the forced `predict` function and returns its probability."""
    tasks = sample_tasks()[:3]
    answers = {"predict": {"p": 0.7, "reason": "it looks routine"}}
    with FakeOpenAI(StructuredPolicy(answers)) as server:
        model = LLMWorldModel(base_url=server.url)
        assert model.predict(tasks) == [0.7, 0.7, 0.7]
        sent = server.requests
    assert all(r["tool_choice"]["function"]["name"] == "predict" for r in sent)


def synth_answers(task) -> dict[str, Any]:
    """Stage by stage, answers that rebuild ``task`` (a sample task)."""
    world = task.world.model_dump(mode="json", by_alias=True)
    return {
        "scenario": {"domain": "retail", "setting": "an online shop", "need": "cancel an order"},
        "world": {"schema_sql": world["schema"], "data": world["data"], "tools": world["tools"]},
        "task": {
            "instruction": task.instruction,
            "solution": [{"tool": c.tool, "arguments": c.arguments} for c in task.solution],
        },
        "verifier": task.verifier.model_dump(mode="json"),
    }


def test_the_llm_synthesizer_builds_a_task_that_passes_the_judge() -> None:
    """Scenario, world, task, verifier through forced functions on the server: a task the mechanical checks accept."""
    task = sample_tasks()[0]
    with FakeOpenAI(StructuredPolicy(synth_answers(task)), models=["synth-model"]) as server:
        made = LLMSynthesizer(base_url=server.url).propose(ProposalRequest(n=1, seed=0))
    assert [t.task_id for t in made] == [task.task_id]
    assert made[0].provenance == {"synthesizer": "llm-synth", "model": "synth-model"}


SLOW_CHECK = (
    "SELECT count(*) = 0 FROM (WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r "
    "LIMIT 1000000) SELECT n FROM r) WHERE substr(printf('%.999999c', 'a'), n % 2 + 1) "
    "LIKE '%" + "a" * 254 + "b'"
)
"""A check within every instruction budget that does about 0.5 s of work per LIKE call, a million times."""


def test_the_llm_synthesizer_checks_its_drafts_under_the_judge_s_wall_clock() -> None:
    """A draft whose check does too much work per SQLite instruction is stopped by the Judge's wall clock, in a worker, and rejected saying so."""
    answers = synth_answers(sample_tasks()[0])
    answers["verifier"]["checks"].append({"name": "slow", "sql": SLOW_CHECK})
    with FakeOpenAI(StructuredPolicy(answers)) as server:
        synth = LLMSynthesizer(base_url=server.url, retries=0, task_seconds=1.5)
        assert synth.propose(ProposalRequest(n=1, seed=0)) == []
    errors = {a["stage"]: a["error"] for a in synth.drain_attempts()}
    assert errors["world"] is None, "the world itself builds"
    assert "stopped after 1.5 seconds (the Judge's wall-clock backstop per task" in errors["judge"]


def test_a_structured_answer_written_as_text_is_taken_and_a_wrong_one_is_sent_back() -> None:
    """A server that cannot force a tool answers with JSON text: it is read. A wrong answer is sent back with its problem once."""
    tasks = sample_tasks()[:1]
    replies = [
        text('Here you go: {"p": 0.25, "reason": "hard"}'),
        call("predict", p=3.0, reason="x"),
        call("predict", p=0.5, reason="ok"),
    ]
    with FakeOpenAI(ScriptedPolicy(replies)) as server:
        model = LLMWorldModel(base_url=server.url)
        assert model.predict(tasks) == [0.25]
        assert model.predict(tasks) == [0.5]
        repaired = server.requests[-1]["messages"]
    assert repaired[-1]["role"] == "tool" and "does not validate" in repaired[-1]["content"]


def test_an_episode_s_row_and_the_key_never_meet() -> None:
    """Nothing the solver records about an episode holds the key."""
    task = sample_tasks()[0]
    with FakeOpenAI(MalformedPolicy()) as server:
        (episode,) = solver(server, max_steps=6).attempt([task], seed=0)
    row = TrajectoryRow.of(episode.model_copy(update={"episode_id": "ep-1"}), "train")
    assert episode.reward.value == 0 and not episode.reward.reason.startswith("the solver failed")
    assert KEY not in row.model_dump_json() and KEY not in episode.model_dump_json()


def test_the_explorer_policy_plays_every_sample_task_without_failing() -> None:
    """A generic model that calls a tool and submits: reward 0 or 1, never a failure, three turns each."""
    tasks = sample_tasks()
    with FakeOpenAI(ExplorerPolicy(steps=3)) as server:
        episodes = solver(server).attempt(tasks, seed=0)
    assert all(not e.reward.reason.startswith("the solver failed") for e in episodes)
    assert all(e.trajectory is not None and len(e.trajectory.turns) == 3 for e in episodes)


def _files_hold(root, secret: str) -> list[str]:
    """The files under ``root`` whose bytes hold ``secret`` (Parquet included)."""
    return [
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and secret.encode() in p.read_bytes()
    ]


@pytest.mark.slow
def test_openai_solver_toml_runs_with_a_malformed_model_and_logs_its_trajectories(
    monkeypatch, tmp_path, capsys
) -> None:
    """experiments/openai-solver.toml from the SDK's variables alone, against a model whose every turn is malformed: three generations, exit 0, every episode 0 and none a failure, one trajectory per episode, and the key in no file."""
    from coevo.arena.gamelog import GameLog
    from coevo.run.cli import main

    with FakeOpenAI(MalformedPolicy(), models=["policy-v0"], api_key=KEY) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.chdir(tmp_path)
        code = main(
            [
                "run",
                "openai-solver",
                "--out",
                "run",
                "--set",
                "solver.config.max_steps=4",
                "--set",
                "curriculum.tasks_per_gen=3",
                "--set",
                "eval.per_level=1",
                *IN_PROCESS_FLAGS,
            ]
        )
        sent = len(server.requests)
    shown = capsys.readouterr()
    assert code == 0
    assert KEY not in shown.out and KEY not in shown.err
    log = GameLog(str(tmp_path / "run"))
    episodes = log.read("episodes").to_pylist()
    trajectories = log.read("trajectories").to_pylist()
    assert sorted({r["gen"] for r in episodes}) == [0, 1, 2]
    assert episodes and all(e["reward"] == 0 and e["failure"] is None for e in episodes)
    assert sorted(t["episode_id"] for t in trajectories) == sorted(
        e["episode_id"] for e in episodes
    )
    assert {t["policy_version"] for t in trajectories} == {"policy-v0"}
    assert all(t["bad_steps"] > 0 and t["failure"] is None for t in trajectories)
    # a malformed call goes back to the server as {}: the next prompt no longer holds what was
    # sampled, so those episodes are laid out per turn; the others as one sequence
    assert {t["layout"] for t in trajectories} <= {"interleaved", "per-turn"}
    for t in trajectories:
        completions = sum(len(c) for c in t["turn_completion_ids"])
        if t["layout"] == "interleaved":
            assert sum(t["loss_mask"]) == completions
        else:
            assert t["token_ids"] is None and "re-renders" in t["note"] and completions > 0
    assert sum(t["turns"] for t in trajectories) <= sent
    assert [g["failures"] for g in log.read("generations").to_pylist()] == [0, 0, 0]
    assert _files_hold(tmp_path / "run", KEY) == []
    # what the model's calls cost is in the summary and in `coevo analyze`'s text, not only --json
    usage = log.read("usage").to_pylist()
    tokens = sum(u["input_tokens"] + u["output_tokens"] for u in usage)
    assert tokens > 0
    lines = shown.err.splitlines()
    (at,) = [i for i, ln in enumerate(lines) if ln.startswith("tokens: ")]
    calls = sum(u["calls"] for u in usage)
    assert lines[at].startswith(f"tokens: {tokens:,} in {calls:,} calls ("), (lines[at], tokens)
    assert f"{tokens / 3:,.0f} per generation, " in lines[at + 1], lines[at + 1]
    assert lines[at + 1].endswith(" per second"), "tokens/s over this invocation's generations"
    assert main(["analyze", str(tmp_path / "run")]) == 0
    text = capsys.readouterr().out
    spent = text.split(" tokens/s ")[1].splitlines()[1:4]
    for gen, row in enumerate(spent):
        mine = [u for u in usage if u["gen"] == gen]
        cells = row.split()
        assert cells[0] == str(gen) and int(cells[1].replace(",", "")) == sum(
            u["calls"] for u in mine
        ), row
        assert int(cells[2].replace(",", "")) == sum(u["input_tokens"] for u in mine), row
        assert int(cells[3].replace(",", "")) == sum(u["output_tokens"] for u in mine), row
        assert cells[4] != "–", "each generation's wall time is in events.jsonl"
    assert f"{tokens:,} tokens" in text


@pytest.mark.slow
def test_selfhosted_toml_runs_every_role_on_one_model(monkeypatch, tmp_path) -> None:
    """experiments/selfhosted.toml: the model writes, judges, plays and predicts; tasks are accepted, episodes earn 1, predictions are the model's."""
    from coevo.arena.gamelog import GameLog
    from coevo.run.experiment import load_experiment
    from coevo.run.loop import run_experiment

    tasks = sample_tasks()
    staged = [synth_answers(t) for t in tasks]

    def pick(body: dict[str, Any]) -> int:
        """Which sample task a synthesis call is about: the variation seed, then the need it became."""
        prompt = body["messages"][-1]["content"]
        if "Variation seed: " in prompt:
            return sum(map(ord, prompt.split("Variation seed: ")[1])) % len(tasks)
        return next(
            i for i in range(len(tasks)) if f"need #{i}" in prompt or tasks[i].instruction in prompt
        )

    def stage(name: str) -> Any:
        def answer(body: dict[str, Any]) -> dict[str, Any]:
            i = pick(body)
            if name == "scenario":
                return {**staged[i]["scenario"], "need": f"need #{i}"}
            return staged[i][name]

        return answer

    answers = {
        **{name: stage(name) for name in ("scenario", "world", "task", "verifier")},
        "review": {"ambiguous": False, "readings": [], "reason": "one reading"},
        "predict": {"p": 0.8, "reason": "a routine request"},
    }
    with FakeOpenAI(structured(answers, tasks), models=["selfhosted-7b"]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        exp = load_experiment(
            "experiments/selfhosted.toml",
            ["run.generations=2", "curriculum.tasks_per_gen=2", "ray.in_process=true"],
        )
        run_experiment(exp, str(tmp_path / "run"))
        named = {
            (r.get("tool_choice") or {}).get("function", {}).get("name") for r in server.requests
        }
    log = GameLog(str(tmp_path / "run"))
    assert {"scenario", "world", "task", "verifier", "review", "predict", None} <= named
    verdicts = log.read("verdicts").to_pylist()
    assert verdicts and all(v["accepted"] for v in verdicts)
    assert sum(g["accepted"] for g in log.read("generations").to_pylist()) > 0
    episodes = log.read("episodes").to_pylist()
    assert {e["purpose"] for e in episodes} == {"train", "eval"}
    assert all(e["reward"] == 1 and e["solver"] == "selfhosted-7b" for e in episodes)
    assert {p["p"] for p in log.read("predictions").to_pylist()} == {0.8}
    usage = log.read("usage").to_pylist()
    assert {u["role"] for u in usage} == {"synthesizer", "judge", "solver", "world_model"}
    assert log.read("trajectories").num_rows == len(episodes)
    assert _files_hold(tmp_path / "run", KEY) == []


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("unreachable", ["the solver 'llm-solver'", "could not be reached"]),
        ("no-key", ["OPENAI_API_KEY"]),
        ("wrong-model", ["does not serve the model 'llama-3'", "policy-v0"]),
    ],
)
def test_openai_solver_stops_before_anything_starts_with_a_clear_error(
    monkeypatch, tmp_path, capsys, setup: str, expected: list[str]
) -> None:
    """An unreachable server, an unset key and a model the server does not serve each stop `coevo run` with exit 2, naming what to fix, before a run directory exists."""
    from coevo.run.cli import main

    monkeypatch.chdir(tmp_path)
    with FakeOpenAI(models=["policy-v0"]) as server:
        url = server.url
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        if setup == "unreachable":
            server.stop()
            expected = [*expected, url]
        if setup == "no-key":
            monkeypatch.delenv("OPENAI_API_KEY")
        extra = ["--set", "solver.config.model=llama-3"] if setup == "wrong-model" else []
        code = main(["run", "openai-solver", "--out", "run", *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert all(part in err for part in expected), err
    assert KEY not in err and not (tmp_path / "run").exists()


def test_the_world_pool_validates_each_world_once_and_lends_idle_clones() -> None:
    """Concurrent episodes of one world get distinct worlds; a returned world is lent again; keep bounds what stays built."""
    from coevo.agents.llm.solver import WorldPool

    task = sample_tasks()[0]
    pool = WorldPool(keep=2)
    first, second = pool.take(task.world), pool.take(task.world)
    assert first is not second and first.id == second.id == task.world.world_id
    pool.give_back(first)
    assert pool.take(task.world) is first, "an idle world is lent again"
    pool.give_back(first)
    pool.give_back(second)
    third = pool.take(sample_tasks()[2].world)  # another world: a template of its own
    pool.give_back(third)
    assert len(pool._idle) == 2 and len(pool._templates) == 2


def test_every_rollout_has_seeds_of_its_own_and_a_rerun_sends_the_same() -> None:
    """Four rollouts of one task in a batch get four seeds; the same batch seed sends the same seeds again."""
    task = sample_tasks()[0]
    with FakeOpenAI(SolutionPolicy([task])) as server:
        played = solver(server, sampling={"seed": 7})
        first = played.attempt([task] * 4, seed=11)
        again = played.attempt([task] * 4, seed=11)
        other = played.attempt([task] * 4, seed=12)

    def seeds(episodes):
        return [e.trajectory.sampling["seed"] for e in episodes if e.trajectory]

    assert len(set(seeds(first))) == 4 and seeds(first) == seeds(again)
    assert not set(seeds(first)) & set(seeds(other))


def test_a_malformed_call_is_sent_back_as_an_empty_object_so_the_server_takes_the_next_turn() -> (
    None
):
    """Servers parse earlier calls' arguments: invalid JSON goes back as {} (the model saw the error), never a 400."""
    task = sample_tasks()[0]
    replies = [
        raw_call(task.solution[0].tool, '{"email": '),
        *[call(c.tool, **c.arguments) for c in task.solution],
    ]
    with FakeOpenAI(ScriptedPolicy(replies)) as server:
        (episode,) = solver(server).attempt([task], seed=0)
        second = server.requests[1]["messages"]
    assert episode.reward.value == 1, episode.reward.reason
    sent = next(m for m in second if m["role"] == "assistant")["tool_calls"][0]["function"]
    assert sent["arguments"] == "{}"
    assert episode.trajectory is not None
    kept = next(m for m in episode.trajectory.messages if m["role"] == "assistant")
    assert kept["tool_calls"][0]["function"]["arguments"] == '{"email": '  # the trajectory keeps it


def test_answers_of_unexpected_shape_are_recorded_failures_never_crashes() -> None:
    """Content as a list of parts is read; deeply nested arguments, a 200 with an error body and an empty choice fail one episode each, and the batch goes on."""
    from coevo.agents.llm import openai_api

    listed = openai_api._turn(
        b'{"model": "m", "choices": [{"message": {"content": [{"type": "text", "text": "hi"}]}, "finish_reason": "stop"}]}'
    )
    assert listed.text == "hi" and listed.message["content"] == "hi"
    deep = openai_api._turn(
        b'{"model": "m", "choices": [{"message": {"content": null, "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "'
        + b"[" * 5000
        + b'"}}]}}]}'
    )
    assert deep.tool_calls[0].arguments is None and "nested too deep" in (
        deep.tool_calls[0].error or ""
    )
    for body, said in (
        (b'{"error": {"message": "the engine died"}}', "the engine died"),
        (b'{"choices": [{}]}', "malformed"),
        (b"<html>gateway</html>", "not a completion"),
    ):
        with pytest.raises(LLMCallError, match=said):
            openai_api._turn(body)


def test_a_key_with_a_line_ending_is_refused_without_quoting_it(monkeypatch) -> None:
    """A key copied with its CRLF cannot go in a header; the error names the variable, never the key."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123\r")
    with FakeOpenAI() as server, pytest.raises(LLMConfigError) as raised:
        LLMSolver(base_url=server.url)
    assert "OPENAI_API_KEY" in str(raised.value) and "sk-secret" not in str(raised.value)


def test_a_key_pasted_where_its_variable_s_name_goes_is_never_shown(
    monkeypatch, tmp_path, capsys
) -> None:
    """api_key_env = the key itself, or the key given as a setting: exit 2, and no message quotes it."""
    from coevo.run.cli import main

    secret = "sk-trial-secret-123"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.chdir(tmp_path)
    for setting in (f"solver.config.api_key_env={secret}", f"solver.config.api_key={secret}"):
        assert main(["run", "openai-solver", "--out", "run", "--set", setting]) == 2
        err = capsys.readouterr().err
        assert secret not in err and "api_key" in err, err


def test_retries_and_failed_calls_are_counted_in_the_usage_rows() -> None:
    """A 429 and a 503 retried, then a call that keeps failing: the usage rows count both."""
    tasks = sample_tasks()[:2]
    with FakeOpenAI(SolutionPolicy(tasks)) as server:
        played = solver(server, max_retries=2)
        server.faults.extend([status(429, retry_after=0.05), status(503, retry_after=0.05)])
        played.attempt(tasks[:1], seed=0)
        server.faults.extend([status(500, retry_after=0.05)] * 3)
        played.attempt(tasks[1:], seed=0)
        rows = {r.task_id: r for r in played.drain_usage()}
    first, second = rows[tasks[0].task_id], rows[tasks[1].task_id]
    assert (first.retries, first.failed_calls) == (2, 0) and first.calls == len(tasks[0].solution)
    assert (second.retries, second.failed_calls, second.calls) == (2, 1, 0)  # 3 tries, 2 again


def test_token_ids_are_read_where_vllm_and_sglang_put_them() -> None:
    """vLLM: the prompt's ids beside the choices; SGLang: in the choice; either: the completion's in the choice, or token_id:N tokens."""
    from coevo.agents.llm import openai_api

    message = b'"message": {"content": "ok"}, "finish_reason": "stop"'
    scores = b'"logprobs": {"content": [{"token": "token_id:7", "logprob": -0.5}, {"token": "token_id:9", "logprob": -1.5}]}'
    vllm = openai_api._turn(
        b'{"model": "m", "prompt_token_ids": [1, 2], "choices": [{'
        + message
        + b', "token_ids": [7, 9]}]}'
    )
    sglang = openai_api._turn(
        b'{"model": "m", "choices": [{'
        + message
        + b', "prompt_token_ids": [1, 2], "token_ids": [7, 9], '
        + scores
        + b"}]}"
    )
    named = openai_api._turn(
        b'{"model": "m", "prompt_token_ids": [1, 2], "choices": [{'
        + message
        + b", "
        + scores
        + b"}]}"
    )
    for turn in (vllm, sglang, named):
        assert (turn.prompt_ids, turn.completion_ids) == ([1, 2], [7, 9])
    assert sglang.logprobs == named.logprobs == [-0.5, -1.5]


def test_without_a_sampling_seed_no_seed_is_sent() -> None:
    """Unset, the server samples as it likes: no seed in the requests, none recorded."""
    task = sample_tasks()[0]
    with FakeOpenAI(SolutionPolicy([task])) as server:
        (episode,) = solver(server).attempt([task], seed=0)
        sent = server.requests
    assert all("seed" not in r for r in sent)
    assert episode.trajectory is not None and "seed" not in episode.trajectory.sampling


def test_every_call_gets_its_own_retries_when_a_server_is_down() -> None:
    """Three calls at once to a server that never answers: each tries 1 + max_retries times before it fails."""
    import asyncio

    from coevo.agents.llm.client import LLMClient

    with FakeOpenAI() as server:
        url = server.url  # closed on leaving: every connection refused
    client = LLMClient("openai", "fake-model", base_url=url, max_retries=1)

    async def three() -> list[BaseException | object]:
        calls = (
            client.create(role="solver", task=f"t{i}", messages=[{"role": "user", "content": "hi"}])
            for i in range(3)
        )
        return await asyncio.gather(*calls, return_exceptions=True)

    outcomes = client.run(three())
    assert all(isinstance(o, LLMCallError) and "after 1 retries" in str(o) for o in outcomes)
    rows = client.drain()
    assert [(r.retries, r.failed_calls) for r in rows] == [(1, 1)] * 3


def test_extra_body_fields_reach_the_server_as_written() -> None:
    """extra_body (e.g. vLLM's chat_template_kwargs) goes into every request body; anthropic refuses it."""
    task = sample_tasks()[0]
    thinking = {"chat_template_kwargs": {"enable_thinking": False}, "min_tokens": 2}
    with FakeOpenAI(SolutionPolicy([task])) as server:
        (episode,) = solver(server, extra_body=thinking).attempt([task], seed=0)
        sent = server.requests
    assert episode.reward.value == 1
    assert all(r["chat_template_kwargs"] == {"enable_thinking": False} for r in sent)
    assert all(r["min_tokens"] == 2 for r in sent)
    with pytest.raises(LLMConfigError, match="extra_body"):
        LLMSolver(provider="anthropic", extra_body=thinking)
