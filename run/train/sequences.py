"""A training batch's rows as the sequences a trainer takes its step on, every number checked first (no torch here).

A batch row (``docs/trainer.md``) holds one rollout. Laid out ``interleaved``
it is one sequence: the whole episode's ``token_ids``, the ``loss_mask`` on
the model's own tokens, and the behaviour policy's ``logprobs`` there. Laid
out ``per-turn`` (each turn's prompt re-rendered earlier turns) each turn is
a sequence of its own: its prompt, then its completion under the mask.

Every sequence of a row carries the row's advantage (``advantage``: the
reward less its group's mean), optionally divided by the group's standard
deviation (``scale = "group"``, as GRPO's paper does; Dr. GRPO argues against
it, and the default is not to).

A batch comes from outside the trainer, so nothing in it is trusted
(:func:`sequences_of`). A row is left out, and counted by its reason
(:class:`Skipped`), when:

* its advantage is 0 within :data:`ADVANTAGE_TOLERANCE` (every rollout of its
  group earned the same: no policy gradient; ``0.1`` three times leaves
  ``1e-17``, which is no signal);
* any of its numbers is not finite, or a recorded log-prob is not one
  (positive, or at vLLM's ``-9999`` floor for ``-inf``);
* it is malformed: token ids that are not in the model's vocabulary, a mask
  or log-probs of another length than the tokens;
* it has no token ids, nothing under its mask, or no behaviour log-prob for
  a token under the mask (the importance weight cannot be taken: it is not
  made up as 1);
* it was sampled in a way the trainer cannot reproduce (:func:`unreproducible`):
  greedy (temperature 0), or truncated or penalised sampling (``top_p < 1``,
  ``top_k``, ``min_p``, a repetition, presence or frequency penalty), whose
  recorded log-probs come from a distribution the trainer never computes.

With ``mask_truncated`` (on by default), each turn cut at its ``max_tokens``
or the context limit (its finish reason ``length``) is taken out of the loss
(overlong masking: DAPO; TRL's ``mask_truncated_completions``), counted.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from coevo.arena.gamelog.figures import INFORMATIVE_TOLERANCE
from coevo.arena.trajectory import LOGPROB_FLOOR, carried_out_turns, is_logprob
from coevo.run.handoff.transports import unreproducible_sampling

__all__ = [
    "ADVANTAGE_TOLERANCE",
    "LOGPROB_FLOOR",
    "Sequence",
    "Skipped",
    "group_of",
    "sampled_temperature",
    "sequences_of",
    "unreproducible",
    "with_format_reward",
]

ADVANTAGE_TOLERANCE: Final = INFORMATIVE_TOLERANCE
"""An advantage (or a group's reward spread) at most this far from 0 is 0: the loop's own tolerance for an informative group."""


@dataclass(frozen=True)
class Sequence:
    """One sequence to train on.

    Attributes:
        token_ids: every token, in order.
        positions: the indices of the model's own tokens trained on (the loss mask's ones,
            less any turn cut at its output limit).
        behaviour: the behaviour policy's log-probability of each of those tokens.
        advantage: the advantage every one of its tokens is weighted by.
        episode_id: the rollout it comes from.
        policy_version: the policy that sampled it.
        temperature: the temperature it was sampled at (its row's ``sampling``; 1 when unsaid).
        group: its group (``(role, task)``): the rollouts whose rewards made its advantage.
    """

    token_ids: list[int]
    positions: list[int]
    behaviour: list[float]
    advantage: float
    episode_id: str
    policy_version: str
    temperature: float = 1.0
    group: tuple[str, str] = ("solver", "")


@dataclass
class Skipped:
    """What a batch held that is not trained on, by reason (rows; ``cut_turns``: turns)."""

    no_tokens: int = 0
    """Rows with no token ids (the server returned none)."""
    no_mask: int = 0
    """Rows with nothing under their loss mask (after overlong masking)."""
    zero_advantage: int = 0
    """Rows whose advantage is 0 (every rollout of their group earned the same)."""
    not_finite: int = 0
    """Rows with a number that is not finite: the reward, the advantage, or a recorded log-prob."""
    malformed: int = 0
    """Rows whose tokens, mask or log-probs do not fit together or the model's vocabulary."""
    no_logprobs: int = 0
    """Rows with a token under the mask that has no recorded log-prob."""
    unreproducible: int = 0
    """Rows sampled in a way the trainer cannot reproduce (greedy, top-p, top-k, penalties)."""
    cut_turns: int = 0
    """Turns cut at their output limit, taken out of the loss (overlong masking)."""
    why: dict[str, str] = field(default_factory=dict)
    """The first reason given for each count, as an example for the report."""

    def count(self, reason: str, example: str) -> None:
        """Count one row left out for ``reason`` (a field), keeping the first ``example``."""
        setattr(self, reason, getattr(self, reason) + 1)
        self.why.setdefault(reason, example)

    def counts(self) -> dict[str, int]:
        """Every count, by name (what the journal records)."""
        return {k: v for k, v in self.__dict__.items() if isinstance(v, int)}


def group_of(row: Mapping[str, Any]) -> tuple[str, str]:
    """A row's group: ``(role, task)`` for a solver row, ``("proposer", "")`` for every proposer row."""
    role = str(row.get("role") or "solver")
    return (role, "" if role == "proposer" else str(row.get("task_id")))


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _group_scales(rows: list[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """Each group's reward standard deviation (groups: a solver row's task, every proposer row)."""
    rewards: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in rows:
        if _finite(row.get("reward")):
            rewards[group_of(row)].append(float(row["reward"]))
    out = {}
    for key, values in rewards.items():
        mean = sum(values) / len(values)
        out[key] = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return out


def _messages(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for column in ("prompt_messages", "completion_messages"):
        try:
            value = json.loads(row.get(column) or "[]")
        except (ValueError, RecursionError, TypeError):
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
    coevo's reward; this is the trainer's. A row whose reward is not finite is
    kept as it is (:func:`sequences_of` leaves it out).

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
        if _finite(row.get("reward")):
            row["reward"] = float(row["reward"]) + bonus * shares[-1]
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in listed:
        if _finite(row.get("reward")):
            groups[group_of(row)].append(row["reward"])
    for row in listed:
        members = groups.get(group_of(row))
        if members and _finite(row.get("reward")):
            row["advantage"] = row["reward"] - sum(members) / len(members)
    return listed, sum(shares) / len(shares)


def _sampling(sampling: Any) -> dict[str, Any]:
    try:
        value = json.loads(sampling) if isinstance(sampling, str) else None
    except (ValueError, RecursionError):
        value = None
    return value if isinstance(value, dict) else {}


def sampled_temperature(sampling: Any) -> float:
    """The temperature a row's ``sampling`` (JSON) records: 1 when it records none, 0 for greedy (never read as 1)."""
    value = _sampling(sampling).get("temperature")
    if value is None:
        return 1.0
    return float(value) if _finite(value) and value >= 0 else float("nan")


def unreproducible(sampling: Any) -> str | None:
    """Why log-probs sampled with ``sampling`` (a row's JSON) are not the trainer's to reproduce, or None.

    The rule is the hand-off's (:func:`coevo.run.handoff.transports.unreproducible_sampling`,
    which the run's preflight applies too): the trainer computes
    ``log_softmax(logits / T)``; a distribution the sampler truncated or
    penalised is another one, and greedy decoding (temperature 0) none. A
    setting the row does not record is taken as neutral (what coevo's client
    sends unless told otherwise).
    """
    problems = unreproducible_sampling(_sampling(sampling))
    if not problems:
        return None
    name, value, why = problems[0]
    return f"{name} = {value!r}: {why}"


@dataclass(frozen=True)
class _Checks:
    scale: str
    keep_zero: bool
    vocab_size: int | None
    mask_truncated: bool
    temperature: float | None


def sequences_of(
    rows: Iterable[Mapping[str, Any]],
    *,
    scale: str = "none",
    keep_zero: bool = False,
    vocab_size: int | None = None,
    mask_truncated: bool = True,
    temperature: float | None = None,
) -> tuple[list[Sequence], Skipped]:
    """The sequences of a batch's rows, and what was left out (see the module docstring).

    Args:
        rows: the batch's rows (``pyarrow.Table.to_pylist()``).
        scale: ``none`` (the advantage as the batch gives it) or ``group`` (divided by
            its group's reward standard deviation; a group with none keeps 0).
        keep_zero: keep sequences whose advantage is 0 (they add nothing to the policy
            gradient, only to a KL term).
        vocab_size: the model's vocabulary: a token id outside ``[0, vocab_size)`` makes its
            row malformed (None: not checked).
        mask_truncated: take turns cut at their output limit out of the loss.
        temperature: the trainer's temperature setting (None: each row's own); a row's
            sampling is still checked for what the trainer cannot reproduce.
    """
    listed = list(rows)
    checks = _Checks(scale, keep_zero, vocab_size, mask_truncated, temperature)
    scales = _group_scales(listed) if scale == "group" else {}
    skipped = Skipped()
    out: list[Sequence] = []
    for row in listed:
        made = _checked(row, checks, scales, skipped)
        if made is not None:
            out += made
    return out, skipped


def _checked(
    row: Mapping[str, Any],
    checks: _Checks,
    scales: dict[tuple[str, str], float],
    skipped: Skipped,
) -> list[Sequence] | None:
    """A row's sequences, or None with the reason counted."""
    episode = str(row.get("episode_id"))
    if not _finite(row.get("advantage")) or not _finite(row.get("reward")):
        skipped.count(
            "not_finite",
            f"{episode}: reward {row.get('reward')!r}, advantage {row.get('advantage')!r}",
        )
        return None
    advantage = float(row["advantage"])
    if checks.scale == "group":
        std = scales.get(group_of(row), 0.0)
        advantage = advantage / (std + 1e-6) if std > ADVANTAGE_TOLERANCE else 0.0
    if abs(advantage) <= ADVANTAGE_TOLERANCE and not checks.keep_zero:
        skipped.count("zero_advantage", f"{episode}: advantage {row['advantage']!r}")
        return None
    why = unreproducible(row.get("sampling"))
    if why is not None:
        skipped.count("unreproducible", f"{episode}: {why}")
        return None
    made = _row_sequences(row, advantage, checks, skipped)
    if isinstance(made, tuple):
        reason, example = made
        skipped.count(reason, f"{episode}: {example}")
        return None
    return made


def _ints(values: Any, vocab_size: int | None) -> list[int] | None:
    """Token ids as ints, or None when any is not an id of the vocabulary."""
    if not isinstance(values, list):
        return None
    out = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return None
        if vocab_size is not None and value >= vocab_size:
            return None
        out.append(value)
    return out


def _logprob(value: Any) -> float | None:
    """A recorded log-prob, or None when it is not a finite log-probability (NaN, ±inf, positive, the -9999 floor)."""
    return float(value) if is_logprob(value) else None


def _turn_spans(mask: list[int], completions: Any) -> list[tuple[int, int]] | None:
    """The ``[start, end)`` of each turn's completion in an interleaved mask (None: they do not line up)."""
    runs: list[tuple[int, int]] = []
    start = None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i))
            start = None
    if not isinstance(completions, list):
        return runs
    lengths = [len(c) if isinstance(c, list) else -1 for c in completions]
    spans: list[tuple[int, int]] = []
    for length in lengths:
        if length == 0:
            spans.append((0, 0))
            continue
        if not runs or runs[0][1] - runs[0][0] != length:
            return None
        spans.append(runs.pop(0))
    return spans if not runs else None


def _cut(finishes: Any, count: int, mask_truncated: bool) -> list[bool]:
    """Whether each of ``count`` turns was cut at its output limit."""
    if not mask_truncated or not isinstance(finishes, list) or len(finishes) != count:
        return [False] * count
    return [f == "length" for f in finishes]


def _row_sequences(
    row: Mapping[str, Any], advantage: float, checks: _Checks, skipped: Skipped
) -> list[Sequence] | tuple[str, str]:
    """A row's sequences, or ``(reason, example)`` when it cannot be trained on."""
    episode, version = str(row.get("episode_id")), str(row.get("policy_version"))
    temperature = checks.temperature or sampled_temperature(row.get("sampling"))
    group = group_of(row)
    if row.get("layout") == "interleaved" and row.get("token_ids") is not None:
        ids = _ints(row["token_ids"], checks.vocab_size)
        if ids is None:
            return "malformed", "a token id outside the model's vocabulary"
        mask = row.get("loss_mask")
        given = row.get("logprobs")
        if (
            not isinstance(mask, list)
            or len(mask) != len(ids)
            or any(m not in (0, 1) for m in mask)
        ):
            return "malformed", "its loss mask is not 0s and 1s, one per token"
        if given is None:
            given = [None] * len(ids)
        if not isinstance(given, list) or len(given) != len(ids):
            return "malformed", "its log-probs are not one per token"
        finishes = row.get("finish_reasons")
        spans = _turn_spans(mask, row.get("turn_completion_ids"))
        keep = list(mask)
        if spans is not None:
            for (start, end), cut in zip(
                spans, _cut(finishes, len(spans), checks.mask_truncated), strict=True
            ):
                if cut and end > start:
                    keep[start:end] = [0] * (end - start)
                    skipped.cut_turns += 1
        positions = [i for i, m in enumerate(keep) if m and i > 0]
        if not positions:
            return "no_mask", "nothing under its loss mask"
        behaviour = [_logprob(given[i]) for i in positions]
        if any(given[i] is None for i in positions):
            return "no_logprobs", "a token under the mask has no recorded log-prob"
        if any(b is None for b in behaviour):
            bad = next(given[i] for i, b in zip(positions, behaviour, strict=True) if b is None)
            return "not_finite", f"a recorded log-prob of {bad!r}"
        return [
            Sequence(
                ids,
                positions,
                [float(b) for b in behaviour if b is not None],
                advantage,
                episode,
                version,
                temperature,
                group,
            )
        ]
    prompts, completions = row.get("turn_prompt_ids"), row.get("turn_completion_ids")
    if prompts is None or completions is None:
        return "no_tokens", "no token ids"
    scored = row.get("turn_logprobs")
    if not isinstance(prompts, list) or not isinstance(completions, list):
        return "malformed", "its per-turn ids are not lists"
    if scored is None:
        scored = [None] * len(prompts)
    if not isinstance(scored, list) or not (len(prompts) == len(completions) == len(scored)):
        return "malformed", "its per-turn prompts, completions and log-probs differ in number"
    cuts = _cut(row.get("finish_reasons"), len(prompts), checks.mask_truncated)
    out = []
    for prompt, completion, logprobs, cut in zip(prompts, completions, scored, cuts, strict=True):
        if not completion or not prompt:
            continue
        if cut:
            skipped.cut_turns += 1
            continue
        head, tail = _ints(prompt, checks.vocab_size), _ints(completion, checks.vocab_size)
        if head is None or tail is None:
            return "malformed", "a token id outside the model's vocabulary"
        if not isinstance(logprobs, list) or len(logprobs) != len(tail):
            return "no_logprobs", "a turn's completion has no log-prob per token"
        behaviour = [_logprob(v) for v in logprobs]
        if any(b is None for b in behaviour):
            bad = next(v for v, b in zip(logprobs, behaviour, strict=True) if b is None)
            return "not_finite", f"a recorded log-prob of {bad!r}"
        ids = head + tail
        out.append(
            Sequence(
                ids,
                list(range(len(head), len(ids))),
                [float(b) for b in behaviour if b is not None],
                advantage,
                episode,
                version,
                temperature,
                group,
            )
        )
    if not out:
        return "no_mask", "no turn with a completion to train on"
    return out
