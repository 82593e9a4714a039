"""What a trainer needs of an LLM episode: the whole conversation, how it was sampled, and its tokens.

An LLM Solver attaches a :class:`Trajectory` to each :class:`~coevo.arena.outcomes.Episode`
it plays; the game log keeps it in the ``trajectories`` table. The
conversation is in the OpenAI Chat Completions format whatever the provider
(system, user, assistant turns with their ``tool_calls``, ``tool`` results,
the ``submit``), so it can be replayed or rendered with any chat template.

When the server returned token ids (vLLM and SGLang do when asked), every
assistant turn keeps its prompt's ids, its completion's ids and the
completion's per-token log-probabilities (:class:`TurnTokens`), and
:meth:`Trajectory.interleaved` lays the episode out as one sequence with a
loss mask that marks the model's own tokens across turns, so a trainer
never retokenizes. That layout needs each turn's prompt to begin with the
previous turn's prompt and completion, token for token; a chat template
that re-renders earlier turns differently breaks it, and then the per-turn
ids are the rollout (each turn a sample of its own).

A log-probability is a number in ``[LOGPROB_FLOOR, LOGPROB_CEILING]``
(:func:`is_logprob`); what a server writes outside it (NaN, an infinity,
vLLM's ``-9999`` for a token it could not score) is no log-probability, and
neither the client that reads an answer nor a trainer that reads a batch
takes it as one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "LOGPROB_CEILING",
    "LOGPROB_FLOOR",
    "Interleaved",
    "Trajectory",
    "TurnTokens",
    "carried_out_turns",
    "is_logprob",
]

LOGPROB_FLOOR: Final = -1000.0
"""A log-prob below this is a floor standing in for ``-inf`` (vLLM writes ``-9999``), not a number."""
LOGPROB_CEILING: Final = 1e-3
"""A log-prob above this is no log-probability (a certain token's is 0, give or take rounding)."""

_FAILED: Final = "error: "
"""How a tool message reporting a failed call begins (``Observation.text``)."""


def is_logprob(value: Any) -> bool:
    """Whether ``value`` is a log-probability: a finite number (no bool) from :data:`LOGPROB_FLOOR` to :data:`LOGPROB_CEILING`."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and LOGPROB_FLOOR <= value <= LOGPROB_CEILING
    )


def carried_out_turns(messages: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """``(turns whose every call the world carried out, assistant turns)`` of a conversation.

    A turn counts when it made at least one call and no answer to its calls
    begins ``error: `` (a call that was not JSON, named no tool of the world,
    missed a parameter, or that the world refused). The share is the first
    thing a model that cannot call tools yet learns: the tiny real loop's
    first signal (``coevo analyze``, ``coevo train --format-reward``).
    """
    carried = turns = 0
    current: bool | None = None  # the turn being answered: None, no calls; True while all succeed
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            if current:
                carried += 1
            turns += 1
            current = True if message.get("tool_calls") else None
        elif role == "tool" and current is not None:
            content = message.get("content")
            if isinstance(content, str) and content.startswith(_FAILED):
                current = False
    if current:
        carried += 1
    return carried, turns


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TurnTokens(_Model):
    """One assistant turn as the server saw and produced it.

    Attributes:
        finish: why the turn ended: ``stop``, ``tool_calls``, ``length`` (cut at the output budget), ...
        input_tokens: prompt tokens (the server's usage; null when it sent none).
        output_tokens: completion tokens (likewise).
        prompt_ids: the prompt's token ids, when the server returned them.
        completion_ids: the completion's token ids, when the server returned them.
        logprobs: each completion token's log-probability, when the server returned them.
    """

    finish: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None
    logprobs: list[float] | None = None


class Interleaved(NamedTuple):
    """An episode as one token sequence: the first prompt, then each completion and what came between.

    Attributes:
        token_ids: every token, in order.
        logprobs: each token's log-probability where the model sampled it, else None.
        loss_mask: 1 for the model's own tokens (its completions), 0 for the rest.
    """

    token_ids: list[int]
    logprobs: list[float | None]
    loss_mask: list[int]


class Trajectory(_Model):
    """An LLM episode as a trainer reads it.

    Attributes:
        messages: the whole conversation, system message first (Chat Completions format).
        tools: the tools offered, as OpenAI function tools.
        sampling: the sampling parameters sent (``max_tokens`` included).
        policy_version: the policy that played: the model's name, or its adapter's.
        provider: ``anthropic`` or ``openai``.
        model: the model as the server named it in its answers.
        turns: one per assistant turn, in order.
        bad_steps: turns whose tool calls could not be made as written (arguments
            that are not JSON, a text answer where a tool call was wanted, a cut-off answer).
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    sampling: dict[str, Any] = Field(default_factory=dict)
    policy_version: str
    provider: str
    model: str
    turns: list[TurnTokens] = Field(default_factory=list)
    bad_steps: int = 0

    @property
    def has_tokens(self) -> bool:
        """Whether every turn has its prompt's and its completion's token ids."""
        return bool(self.turns) and all(
            t.prompt_ids is not None and t.completion_ids is not None for t in self.turns
        )

    def interleaved(self) -> tuple[Interleaved | None, str | None]:
        """The episode as one sequence with its loss mask, or None and why it cannot be laid out so."""
        if not self.turns:
            return None, "no assistant turn"
        if not self.has_tokens:
            return None, "the server returned no token ids"
        ids: list[int] = []
        logprobs: list[float | None] = []
        mask: list[int] = []
        for n, turn in enumerate(self.turns):
            prompt = turn.prompt_ids or []
            if prompt[: len(ids)] != ids:
                return None, (
                    f"turn {n + 1}'s prompt does not begin with turn {n}'s prompt and completion "
                    "(the chat template re-renders earlier turns): use the per-turn token ids"
                )
            between = prompt[len(ids) :]
            ids += between
            logprobs += [None] * len(between)
            mask += [0] * len(between)
            completion = turn.completion_ids or []
            sampled = (  # a turn with a log-prob that is no number (NaN, the -9999 floor) has none
                turn.logprobs
                if turn.logprobs
                and len(turn.logprobs) == len(completion)
                and all(is_logprob(v) for v in turn.logprobs)
                else None
            )
            ids += completion
            logprobs += list(sampled) if sampled else [None] * len(completion)
            mask += [1] * len(completion)
        return Interleaved(ids, logprobs, mask), None
