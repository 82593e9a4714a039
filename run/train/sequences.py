"""A training batch's rows as the sequences a trainer takes its step on (no torch here).

A batch row (``docs/trainer.md``) holds one rollout. Laid out ``interleaved``
it is one sequence: the whole episode's ``token_ids``, the ``loss_mask`` on
the model's own tokens, and the behaviour policy's ``logprobs`` there. Laid
out ``per-turn`` (each turn's prompt re-rendered earlier turns) each turn is
a sequence of its own: its prompt, then its completion under the mask. A row
with no token ids (the server returned none) cannot be trained on by token:
it is counted and left out, as is a row whose mask covers nothing.

Every sequence of a row carries the row's advantage (``advantage``: the
reward less its group's mean), optionally divided by the group's standard
deviation (``scale = "group"``, as GRPO's paper does; Dr. GRPO argues against
it, and the default is not to).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from coevo.arena.trajectory import carried_out_turns

__all__ = ["Sequence", "Skipped", "sampled_temperature", "sequences_of", "with_format_reward"]


@dataclass(frozen=True)
class Sequence:
    """One sequence to train on.

    Attributes:
        token_ids: every token, in order.
        positions: the indices of the model's own tokens (the loss mask's ones).
        behaviour: the behaviour policy's log-probability of each of those tokens (None where
            the server sent none: the trainer's own log-prob stands in, a ratio of 1).
        advantage: the advantage every one of its tokens is weighted by.
        episode_id: the rollout it comes from.
        policy_version: the policy that sampled it.
        temperature: the temperature it was sampled at (its row's ``sampling``; 1 when unsaid).
    """

    token_ids: list[int]
    positions: list[int]
    behaviour: list[float | None]
    advantage: float
    episode_id: str
    policy_version: str
    temperature: float = 1.0


@dataclass
class Skipped:
    """What a batch held that is not trained on, by reason (rows)."""

    no_tokens: int = 0
    """Rows with no token ids (the server returned none)."""
    no_mask: int = 0
    """Rows with nothing under their loss mask."""
    zero_advantage: int = 0
    """Rows whose advantage is 0 (every rollout of their group earned the same)."""


def _group_scales(rows: list[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """Each group's reward standard deviation (groups: a solver row's task, every proposer row)."""
    rewards: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in rows:
        rewards[_group(row)].append(float(row["reward"]))
    out = {}
    for key, values in rewards.items():
        mean = sum(values) / len(values)
        out[key] = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return out


def _group(row: Mapping[str, Any]) -> tuple[str, str]:
    role = str(row.get("role") or "solver")
    return (role, "" if role == "proposer" else str(row["task_id"]))


def _messages(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for column in ("prompt_messages", "completion_messages"):
        try:
            value = json.loads(row.get(column) or "[]")
        except (ValueError, RecursionError):
            value = []
        out += [m for m in value if isinstance(m, dict)] if isinstance(value, list) else []
    return out


def with_format_reward(
    rows: Iterable[Mapping[str, Any]], bonus: float
) -> tuple[list[dict[str, Any]], float | None]:
    """Rows paid ``bonus`` × the share of their turns the world carried out, their advantages made again.

    A format reward, as DeepSeek-R1's: for a model that earns no task reward
    yet (every group all 0, so no gradient), the share of turns whose calls
    the world carried out (:func:`~coevo.arena.trajectory.carried_out_turns`)
    is the signal it can learn first. Each row's ``reward`` becomes its own
    plus the bonus, and its ``advantage`` that less its group's mean (solver
    rows: their task's; proposer rows: all of them). The run's log keeps
    coevo's reward; this is the trainer's.

    Returns:
        The rows, and the mean share of carried-out turns over them (None: no rows).
    """
    listed = [dict(r) for r in rows]
    if not listed:
        return listed, None
    shares = []
    for row in listed:
        carried, turns = carried_out_turns(_messages(row))
        shares.append(carried / turns if turns else 0.0)
        row["reward"] = float(row["reward"]) + bonus * shares[-1]
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in listed:
        groups[_group(row)].append(row["reward"])
    for row in listed:
        members = groups[_group(row)]
        row["advantage"] = row["reward"] - sum(members) / len(members)
    return listed, sum(shares) / len(shares)


def sequences_of(
    rows: Iterable[Mapping[str, Any]], *, scale: str = "none", keep_zero: bool = False
) -> tuple[list[Sequence], Skipped]:
    """The sequences of a batch's rows, and what was left out.

    Args:
        rows: the batch's rows (``pyarrow.Table.to_pylist()``).
        scale: ``none`` (the advantage as the batch gives it) or ``group`` (divided by
            its group's reward standard deviation; a group with none keeps 0).
        keep_zero: keep sequences whose advantage is 0 (they add nothing to the policy
            gradient, only to a KL term).
    """
    listed = list(rows)
    scales = _group_scales(listed) if scale == "group" else {}
    skipped = Skipped()
    out: list[Sequence] = []
    for row in listed:
        advantage = float(row["advantage"])
        if scale == "group":
            std = scales[_group(row)]
            advantage = advantage / (std + 1e-6) if std > 0 else 0.0
        if advantage == 0.0 and not keep_zero:
            skipped.zero_advantage += 1
            continue
        made = _row_sequences(row, advantage)
        if made is None:
            skipped.no_tokens += 1
            continue
        if not made:
            skipped.no_mask += 1
            continue
        out += made
    return out, skipped


def sampled_temperature(sampling: Any) -> float:
    """The temperature a row's ``sampling`` (JSON) records; 1 when it records none."""
    try:
        value = json.loads(sampling).get("temperature") if isinstance(sampling, str) else None
    except (ValueError, AttributeError, RecursionError):
        value = None
    return float(value) if isinstance(value, (int, float)) and value > 0 else 1.0


def _row_sequences(row: Mapping[str, Any], advantage: float) -> list[Sequence] | None:
    """A row's sequences (None: it has no token ids; empty: nothing under its mask)."""
    episode, version = str(row["episode_id"]), str(row["policy_version"])
    temperature = sampled_temperature(row.get("sampling"))
    if row.get("layout") == "interleaved" and row.get("token_ids") is not None:
        ids = [int(t) for t in row["token_ids"]]
        mask = row.get("loss_mask") or [0] * len(ids)
        given = row.get("logprobs") or [None] * len(ids)
        positions = [i for i, m in enumerate(mask) if m and i > 0]
        if not positions:
            return []
        recorded: list[float | None] = [
            None if given[i] is None else float(given[i]) for i in positions
        ]
        return [Sequence(ids, positions, recorded, advantage, episode, version, temperature)]
    prompts, completions = row.get("turn_prompt_ids"), row.get("turn_completion_ids")
    if prompts is None or completions is None:
        return None
    scored = row.get("turn_logprobs") or [None] * len(prompts)
    out = []
    for prompt, completion, logprobs in zip(prompts, completions, scored, strict=False):
        if not completion or not prompt:
            continue
        ids = [int(t) for t in prompt] + [int(t) for t in completion]
        positions = list(range(len(prompt), len(ids)))
        behaviour: list[float | None] = (
            [float(v) for v in logprobs]
            if logprobs is not None and len(logprobs) == len(completion)
            else [None] * len(completion)
        )
        out.append(Sequence(ids, positions, behaviour, advantage, episode, version, temperature))
    return out
