"""Sampling parameters are pinned on every request: a server's defaults never choose the distribution a rollout is sampled from, and the trajectory records what was sent."""

from __future__ import annotations

import asyncio

import pytest
from coevo.agents.llm import openai_api
from coevo.agents.llm.solver import LLMSolver
from coevo.agents.llm.turns import Request, Sampling, TokenRequest
from coevo.run.testing import sample_tasks

from tests.agents.fake_openai import FakeOpenAI, ScriptedPolicy, SolutionPolicy, encode, text

KEY = "sk-fake-test-key"

NEUTRAL = {
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": -1,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
}
"""What vLLM's ``--generation-config auto`` would otherwise fill from the model's ``generation_config.json``."""


@pytest.fixture(autouse=True)
def api_key(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _sampling_of(body: dict) -> dict:
    return {k: body.get(k, "absent") for k in NEUTRAL}


def test_a_role_that_sets_nothing_sends_every_parameter_neutral_and_records_what_it_sent() -> None:
    """No sampling set: every chat request carries temperature 1, top_p 1, top_k −1, min_p 0, repetition_penalty 1 and no penalties, and the trajectory records exactly those."""
    task = sample_tasks()[0]
    with FakeOpenAI(SolutionPolicy([task])) as server:
        (episode,) = LLMSolver(base_url=server.url).attempt([task], seed=0)
        sent = server.requests
    assert episode.reward.value == 1, episode.reward.reason
    assert sent and all(_sampling_of(body) == NEUTRAL for body in sent)
    assert all("stop" not in body for body in sent)  # native tool calls: nothing to stop at
    assert episode.trajectory is not None
    assert episode.trajectory.sampling == {**NEUTRAL, "max_tokens": 1024}


def test_what_a_role_sets_is_sent_the_rest_pinned_and_extra_body_has_the_last_word() -> None:
    """Set values go out as set, unset ones neutral; a sampling field in extra_body wins over both, and the record says what was sent."""
    task = sample_tasks()[0]
    with FakeOpenAI(SolutionPolicy([task])) as server:
        solver = LLMSolver(
            base_url=server.url,
            sampling={"temperature": 0.6, "top_p": 0.95, "top_k": 40, "seed": 4},
            extra_body={"top_k": 7, "min_tokens": 2},
        )
        (episode,) = solver.attempt([task], seed=0)
        sent = server.requests
    expected = {**NEUTRAL, "temperature": 0.6, "top_p": 0.95, "top_k": 7}
    assert sent and all(_sampling_of(body) == expected for body in sent)
    assert all(body["min_tokens"] == 2 for body in sent)
    assert episode.trajectory is not None
    recorded = episode.trajectory.sampling
    assert {k: v for k, v in recorded.items() if k != "seed"} == {**expected, "max_tokens": 1024}
    assert {body["seed"] for body in sent} == {recorded["seed"]}  # the episode's own seed


def test_a_token_prompt_sends_the_same_pinned_parameters() -> None:
    """Token in, token out (/v1/completions): the unset parameters go out neutral too, beside the one set."""
    with FakeOpenAI(ScriptedPolicy([text("hello")])) as server:

        async def ask() -> None:
            connection = openai_api.Connection(server.url, KEY, 10)
            try:
                request = TokenRequest(
                    model="fake-model", prompt_ids=encode("hi"), sampling=Sampling(top_k=5)
                )
                turn = await openai_api.complete_tokens(connection, request)
                assert turn.text == "hello"
            finally:
                await connection.close()

        asyncio.run(ask())
        (body,) = server.requests
    assert body["prompt"] == encode("hi")
    assert _sampling_of(body) == {**NEUTRAL, "top_k": 5}
    assert "include_stop_str_in_output" not in body and "stop" not in body


def test_openai_itself_is_sent_only_what_the_role_set() -> None:
    """OpenAI's own API has no generation config to override and its reasoning models refuse even default values: it gets only what was set."""
    assert openai_api.sent_sampling(Sampling(), openai_itself=True) == {}
    assert openai_api.sent_sampling(Sampling(temperature=0.5), openai_itself=True) == {
        "temperature": 0.5
    }
    with FakeOpenAI(ScriptedPolicy([text("hello")])) as server:

        async def ask() -> None:
            connection = openai_api.Connection(server.url, KEY, 10)
            connection.openai_itself = True  # as for https://api.openai.com/v1, on loopback
            try:
                request = Request(
                    model="fake-model",
                    messages=[{"role": "user", "content": "hi"}],
                    sampling=Sampling(temperature=0.5),
                    keep_stop=True,
                )
                await openai_api.complete(connection, request)
            finally:
                await connection.close()

        asyncio.run(ask())
        (body,) = server.requests
    assert body["temperature"] == 0.5 and "max_completion_tokens" in body
    unset = {"top_p", "top_k", "min_p", "repetition_penalty", "include_stop_str_in_output"}
    assert not unset & set(body)
