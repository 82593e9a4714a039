"""A trajectory's token layout: one sequence whose mask marks the model's own tokens, or per-turn ids when turns do not chain."""

from __future__ import annotations

from coevo.arena.gamelog.rows import TrajectoryRow
from coevo.arena.outcomes import Episode, Reward
from coevo.arena.trajectory import (
    LOGPROB_CEILING,
    LOGPROB_FLOOR,
    Trajectory,
    TurnTokens,
    is_logprob,
)
from hypothesis import given
from hypothesis import strategies as st

ids = st.lists(st.integers(min_value=0, max_value=50_000), max_size=12)


def chained(prompt: list[int], steps: list[tuple[list[int], list[int]]]) -> list[TurnTokens]:
    """Turns whose prompts each extend the previous prompt and completion (a stable chat template)."""
    turns = []
    seen = list(prompt)
    for completion, between in steps:
        turns.append(
            TurnTokens(
                finish="tool_calls",
                prompt_ids=list(seen),
                completion_ids=completion,
                logprobs=[-0.5] * len(completion),
            )
        )
        seen += completion + between
    return turns


def trajectory(turns: list[TurnTokens]) -> Trajectory:
    return Trajectory(messages=[], policy_version="p", provider="openai", model="m", turns=turns)


@given(ids, st.lists(st.tuples(ids, ids), min_size=1, max_size=5))
def test_chained_turns_interleave_with_the_mask_on_the_completions(prompt, steps) -> None:
    """The sequence is the last prompt plus the last completion; the mask is 1 exactly on every completion's tokens, with their log-probs."""
    turns = chained(prompt, steps)
    laid, why = trajectory(turns).interleaved()
    assert why is None and laid is not None
    assert laid.token_ids == (turns[-1].prompt_ids or []) + (turns[-1].completion_ids or [])
    assert len(laid.token_ids) == len(laid.logprobs) == len(laid.loss_mask)
    assert sum(laid.loss_mask) == sum(len(c) for c, _ in steps)
    assert all(
        (lp is not None) == bool(m) for lp, m in zip(laid.logprobs, laid.loss_mask, strict=True)
    )
    marked = [t for t, m in zip(laid.token_ids, laid.loss_mask, strict=True) if m]
    assert marked == [t for c, _ in steps for t in c]


def test_turns_that_do_not_chain_are_per_turn_with_the_reason() -> None:
    """A prompt that re-renders the previous completion: no sequence, and the row keeps every turn's ids."""
    turns = [
        TurnTokens(
            finish="tool_calls", prompt_ids=[1, 2], completion_ids=[3, 4], logprobs=[-1.0, -2.0]
        ),
        TurnTokens(finish="stop", prompt_ids=[1, 2, 4, 3, 9], completion_ids=[5], logprobs=[-0.1]),
    ]
    laid, why = trajectory(turns).interleaved()
    assert laid is None and why is not None and "turn 2" in why
    episode = Episode(
        task_id="t",
        world_id="w",
        calls=[],
        observations=[],
        reward=Reward(value=0, submitted=False, reason="x"),
        episode_id="ep",
        trajectory=trajectory(turns),
    )
    row = TrajectoryRow.of(episode, "train")
    assert row.layout == "per-turn" and row.token_ids is None
    assert row.turn_prompt_ids == [[1, 2], [1, 2, 4, 3, 9]] and row.turn_logprobs == [
        [-1.0, -2.0],
        [-0.1],
    ]
    assert (
        row.input_tokens == 7 and row.output_tokens == 3
    )  # counted from the ids: no usage was sent


def test_a_trajectory_without_token_ids_keeps_its_conversation() -> None:
    """A server that returned no ids: layout null, counts from usage, the messages kept."""
    turns = [TurnTokens(finish="stop", input_tokens=40, output_tokens=7)]
    laid, why = trajectory(turns).interleaved()
    assert laid is None and why == "the server returned no token ids"
    episode = Episode(
        task_id="t",
        world_id="w",
        calls=[],
        observations=[],
        reward=Reward(value=0, submitted=False, reason="x"),
        episode_id="ep",
        trajectory=trajectory(turns),
    )
    row = TrajectoryRow.of(episode, "eval")
    assert row.layout is None and row.turn_prompt_ids is None
    assert (row.input_tokens, row.output_tokens, row.finish_reasons) == (40, 7, ["stop"])


def test_a_turn_counts_as_carried_out_when_it_called_and_no_answer_was_an_error() -> None:
    """Text, a failed call among several, and an unanswered call: only turns whose every call worked count."""
    from coevo.arena.trajectory import carried_out_turns

    calls = [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    conversation = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": None, "tool_calls": calls * 2},
        {"role": "tool", "tool_call_id": "c", "content": "{}"},
        {"role": "tool", "tool_call_id": "c", "content": "error: unknown tool"},
        {"role": "assistant", "content": "I think it is gold."},
        {"role": "user", "content": "error: answer with a tool call"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c", "content": '{"rows": []}'},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c", "content": "submitted"},
    ]
    assert carried_out_turns(conversation) == (2, 4)
    assert carried_out_turns([]) == (0, 0)


def test_a_turn_whose_log_probs_are_not_numbers_is_kept_without_them() -> None:
    """A server's NaN, -inf or -9999 floor enters no record: that turn's log-probs are null (the trainer counts it), the other turn's kept."""
    for bad in (float("nan"), float("-inf"), -9999.0, float("inf")):
        turns = chained([1, 2], [([3, 4], [5]), ([6, 7], [])])
        turns[1] = turns[1].model_copy(update={"logprobs": [-0.5, bad]})
        laid, _ = trajectory(turns).interleaved()
        assert laid is not None
        assert laid.logprobs == [None, None, -0.5, -0.5, None, None, None]
        episode = Episode(
            task_id="t",
            world_id="w",
            calls=[],
            observations=[],
            reward=Reward(value=1, submitted=True, reason="x"),
            episode_id="ep",
            trajectory=trajectory(turns),
        )
        row = TrajectoryRow.of(episode, "train")
        assert row.turn_logprobs is None and row.logprobs == laid.logprobs


@given(st.one_of(st.floats(), st.integers(), st.booleans(), st.none(), st.text(max_size=3)))
def test_a_log_probability_is_a_finite_number_from_the_floor_to_the_ceiling(value) -> None:
    """NaN, ±inf, bools, strings, vLLM's -9999 floor and positive values are no log-probabilities; -1000 to 0 (with rounding) are."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    inside = number and LOGPROB_FLOOR <= value <= LOGPROB_CEILING  # False for NaN
    assert is_logprob(value) == inside, value
    assert is_logprob(-0.25) and is_logprob(0) and not is_logprob(-9999.0)
