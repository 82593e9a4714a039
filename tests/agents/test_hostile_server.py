"""What an OpenAI-compatible server sends is not trusted: answers past the size limit, gzip bombs, lying lengths, redirects, log-probs that are no log-probabilities.

Each fault is made by the loopback vLLM fake (``tests/agents/fake_openai.py``)
over real HTTP, and read through the client's public path: an LLM Solver's
episode, or :mod:`~coevo.agents.llm.openai_api`'s calls (their HTTP is
:mod:`~coevo.agents.llm.openai_http`'s). What the client
read is judged by what the server got out before the client hung up
(``FakeOpenAI.streamed``: at most the kernel's socket buffers past what
was read) and by the number the client's error states.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from typing import Any

import pytest
from coevo.agents.llm import openai_api
from coevo.agents.llm.openai_http import MAX_REDIRECTS, MAX_RESPONSE_BYTES
from coevo.agents.llm.solver import LLMSolver
from coevo.agents.llm.turns import LLMConfigError, TokenRequest, Turn
from coevo.arena.gamelog.rows import TrajectoryRow
from coevo.arena.outcomes import Episode
from coevo.arena.trajectory import is_logprob
from coevo.run.testing import sample_tasks
from hypothesis import given
from hypothesis import strategies as st

from tests.agents.fake_openai import (
    FakeOpenAI,
    Reply,
    ScriptedPolicy,
    SolutionPolicy,
    call,
    encode,
    endless,
    gzip_bomb,
    lying_length,
    redirect,
)

KEY = "sk-fake-test-key"

SLACK = 32 * 2**20
"""What a server gets out beyond what the client read: the kernel's socket buffers on loopback (a few MiB), with room."""


@pytest.fixture(autouse=True)
def api_key(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def play_one(server: FakeOpenAI, **settings: Any) -> tuple[Episode, LLMSolver]:
    """One episode of the first sample task, by a Solver on ``server`` that does not retry."""
    solver = LLMSolver(base_url=server.url, max_retries=0, **settings)
    (episode,) = solver.attempt(sample_tasks()[:1], seed=0)
    return episode, solver


def stopped_at(reason: str) -> int:
    """The byte count an over-long answer's error says reading stopped at."""
    found = re.search(r"stopped reading at ([\d,]+) bytes", reason)
    assert found, f"the reason names where reading stopped: {reason}"
    return int(found.group(1).replace(",", ""))


def test_an_answer_streamed_past_the_limit_fails_its_episode_and_reading_stops_there() -> None:
    """A 1 GiB completion, chunked with no Content-Length: read up to the limit, then the connection is closed; the episode fails saying why, counted as a failed call."""
    with FakeOpenAI() as server:
        server.faults.append(endless())
        episode, solver = play_one(server)
        (sent,) = server.wait_streamed(1)
    reason = episode.reward.reason
    assert episode.failure is not None and "longer than 67,108,864 bytes" in reason, reason
    assert MAX_RESPONSE_BYTES < stopped_at(reason) <= MAX_RESPONSE_BYTES + 2**20
    assert sent < MAX_RESPONSE_BYTES + SLACK, f"the server got {sent:,} of 1 GiB out"
    (row,) = solver.drain_usage()
    assert (row.failed_calls, row.calls) == (1, 0)


def test_a_gzip_bomb_is_counted_decompressed() -> None:
    """About 1 MB of gzip on the wire, a Content-Length well under the limit, that holds 1 GiB: reading stops at the limit of decompressed bytes."""
    with FakeOpenAI() as server:
        server.faults.append(gzip_bomb(2**30))
        episode, _ = play_one(server)
        server.wait_streamed(1)
    reason = episode.reward.reason
    assert episode.failure is not None and "longer than" in reason, reason
    assert MAX_RESPONSE_BYTES < stopped_at(reason) <= MAX_RESPONSE_BYTES + 2**20


def test_a_content_length_past_the_limit_is_refused_before_the_body_is_read() -> None:
    """A Content-Length of 2 GiB (the body streams on): refused from the header, the connection closed, not drained."""
    with FakeOpenAI() as server:
        server.faults.append(lying_length(2**31))
        episode, _ = play_one(server)
        (sent,) = server.wait_streamed(1)
    reason = episode.reward.reason
    assert episode.failure is not None, reason
    assert "its Content-Length says 2,147,483,648 bytes" in reason, reason
    assert sent < SLACK, f"the server got {sent:,} bytes out"


def test_a_start_up_answer_past_the_limit_is_a_start_up_error() -> None:
    """GET /v1/models (no event loop) reads the same way: an endless list of models stops the role before it starts."""
    with FakeOpenAI() as server:
        server.models_faults.append(endless())
        with pytest.raises(LLMConfigError, match="longer than 67,108,864 bytes"):
            LLMSolver(base_url=server.url, max_retries=0)
        (sent,) = server.wait_streamed(1)
    assert sent < MAX_RESPONSE_BYTES + SLACK


def test_a_redirect_to_another_origin_is_not_followed() -> None:
    """A 307 to another server (another port of loopback): the episode fails saying where it pointed, without its credentials or query, and that server hears nothing."""
    with FakeOpenAI() as server, FakeOpenAI() as elsewhere:
        pointed = elsewhere.url.replace("//", "//ada:hunter2-secret@") + "/chat/completions"
        server.faults.append(redirect(307, pointed + "?token=opensesame"))
        episode, _ = play_one(server)
        heard = elsewhere.connections
    reason = episode.reward.reason
    assert episode.failure is not None, reason
    assert f"(307) to another origin, {elsewhere.url}/chat/completions" in reason, reason
    assert "hunter2" not in reason and "opensesame" not in reason and KEY not in reason
    assert heard == 0, "the other server got no connection"


@pytest.mark.parametrize(
    "where",
    [
        "http://localhost:{port}/v1/chat/completions",  # another host name is another origin
        "https://127.0.0.1:{port}/v1/chat/completions",  # as is another scheme
        "//127.0.0.1:{other}/v1/chat/completions",  # a scheme-relative address to another port
    ],
)
def test_every_other_origin_is_refused(where: str) -> None:
    """Same host by another name, another scheme, another port: each is another origin."""
    with FakeOpenAI() as server:
        server.faults.append(redirect(308, where.format(port=server.port, other=server.port + 1)))
        episode, _ = play_one(server)
        asked = len(server.requests)
    assert "to another origin" in episode.reward.reason, episode.reward.reason
    assert asked == 1, "nothing was sent again"


def test_a_redirect_within_the_server_is_followed() -> None:
    """A relative 307 and an absolute 308 to the same origin carry the request there, body and key; the episode plays to reward 1."""
    task = sample_tasks()[0]
    with FakeOpenAI(SolutionPolicy([task])) as server:
        server.faults.extend(
            [redirect(307, "/v1/chat/completions"), redirect(308, f"{server.url}/chat/completions")]
        )
        solver = LLMSolver(base_url=server.url, max_retries=0)
        (episode,) = solver.attempt([task], seed=0)
        sent, headers = server.requests, server.headers
    assert episode.reward.value == 1, episode.reward.reason
    assert len(sent) == len(task.solution) + 2 and sent[0] == sent[1] == sent[2]
    assert all(h["authorization"] == f"Bearer {KEY}" for h in headers)


def test_a_redirect_loop_within_the_server_ends() -> None:
    """A server that redirects every request to itself: the call fails after the redirects aiohttp would follow."""
    with FakeOpenAI() as server:
        server.outage = redirect(307, "/v1/chat/completions")
        episode, _ = play_one(server)
        asked = len(server.requests)
    assert f"more than {MAX_REDIRECTS} times" in episode.reward.reason, episode.reward.reason
    assert asked == MAX_REDIRECTS + 1


@pytest.mark.parametrize("written", [math.nan, -math.inf, math.inf, -9999.0, 0.5])
def test_a_log_prob_that_is_no_log_probability_leaves_its_turn_without_log_probs(
    written: float,
) -> None:
    """NaN, ±Infinity (as JSON writes them), vLLM's -9999 floor or a positive value: that turn keeps its tokens but no log-probs, the others keep theirs, and the usage row counts it."""
    task = sample_tasks()[0]
    replies = [call(c.tool, **c.arguments) for c in task.solution]
    replies[0] = Reply(tool_calls=replies[0].tool_calls, last_logprob=written)
    with FakeOpenAI(ScriptedPolicy(replies)) as server:
        solver = LLMSolver(base_url=server.url)
        (episode,) = solver.attempt([task], seed=0)
    assert episode.reward.value == 1, episode.reward.reason
    assert episode.trajectory is not None
    first, *rest = episode.trajectory.turns
    assert first.completion_ids and first.logprobs is None
    assert rest and all(t.logprobs and len(t.logprobs) == len(t.completion_ids or []) for t in rest)
    (row,) = solver.drain_usage()
    assert (row.refused_logprobs, row.failed_calls) == (1, 0)
    logged = TrajectoryRow.of(episode.model_copy(update={"episode_id": "ep-0"}), "train")
    assert logged.turn_logprobs is None and logged.turn_completion_ids is not None
    assert logged.logprobs is not None and not any(
        isinstance(v, float) and not math.isfinite(v) for v in logged.logprobs
    )


def complete_tokens(server: FakeOpenAI) -> Turn:
    """One token-in, token-out call to ``server`` through a connection of its own."""

    async def ask() -> Turn:
        connection = openai_api.Connection(server.url, KEY, 10)
        try:
            request = TokenRequest(model="fake-model", prompt_ids=encode("hi"))
            return await openai_api.complete_tokens(connection, request)
        finally:
            await connection.close()

    return asyncio.run(ask())


def test_a_token_prompt_s_log_probs_are_checked_the_same_way() -> None:
    """/v1/completions with a token prompt: vLLM's -9999 floor leaves the turn without log-probs and says why; the edges of the range are kept."""
    replies = [Reply(content="hello", last_logprob=v) for v in (-9999.0, -1000.0, 0.0)]
    with FakeOpenAI(ScriptedPolicy(replies)) as server:
        floor, lowest, certain = (complete_tokens(server) for _ in replies)
    assert floor.text == "hello" and floor.completion_ids and floor.logprobs is None
    assert floor.logprobs_refused is not None and "-9999.0" in floor.logprobs_refused
    for kept, edge in ((lowest, -1000.0), (certain, 0.0)):
        assert kept.logprobs is not None and kept.logprobs[-1] == edge
        assert kept.logprobs_refused is None


@given(st.lists(st.floats(), min_size=1, max_size=8))
def test_an_answer_s_log_probs_are_kept_exactly_when_every_one_is_a_log_probability(
    values: list[float],
) -> None:
    """Whatever floats a server writes (JSON's NaN and Infinity too), the reader keeps them all or none, as is_logprob says of each."""
    scored = [{"token": f"token_id:{n}", "logprob": v} for n, v in enumerate(values)]
    body = {
        "model": "m",
        "choices": [{"message": {"content": "ok"}, "logprobs": {"content": scored}}],
    }
    turn = openai_api._turn(json.dumps(body).encode())
    if all(is_logprob(v) for v in values):
        assert turn.logprobs == values and turn.logprobs_refused is None
    else:
        assert turn.logprobs is None and turn.logprobs_refused is not None
    assert turn.completion_ids == list(range(len(values)))
