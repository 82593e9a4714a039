"""The records of the trainer hand-off: the training batch (``coevo.batch/1``), its id, and a trainer's announcement (``coevo.policy/1``).

:mod:`coevo.run.handoff.transports` moves them (the transports, the loop's side);
``docs/trainer.md`` is the protocol a trainer author reads. A batch is one
row per training rollout of a generation, made from its ``trajectories``
rows (:func:`batch_of`), by the run as it commits the generation or, after a
crash, from the committed log (:func:`training_batch`): the same table either way.
In self-play the proposer's rollouts are rows too (``role = proposer``), paid
their proposal's reward from the ``proposals`` rows, with a baseline of their own.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Final, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from coevo.arena.bounded import loads_json, read_parquet_bytes
from coevo.arena.errors import ArenaError, FileRefusedError, LogError
from coevo.arena.gamelog import GameLog, RunDir
from coevo.arena.gamelog.figures import TaskLevels, informative
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

__all__ = [
    "BATCH_FORMAT",
    "BATCH_ID",
    "BATCH_SCHEMA",
    "MAX_METRICS",
    "METRIC_NAME",
    "NEEDED",
    "POLICY_FORMAT",
    "PROPOSAL_COLUMNS",
    "ROLES",
    "Announcement",
    "batch_gen",
    "batch_id",
    "batch_markdown",
    "batch_of",
    "dynamic_sampling",
    "parquet_bytes",
    "read_announcement",
    "read_batch_bytes",
    "run_identity",
    "training_batch",
]

BATCH_FORMAT: Final = "coevo.batch/1"
"""The format of a training batch (its Parquet file's ``coevo.format`` metadata)."""
POLICY_FORMAT: Final = "coevo.policy/1"
"""The format of a trainer's announcement of a policy version."""
MAX_METRICS: Final = 64
"""The most metrics an announcement carries (more are left out)."""
METRIC_NAME: Final = re.compile(r"[A-Za-z0-9_./-]{1,64}")
"""What a metric's name may be."""

BATCH_ID: Final = re.compile(r"batch-(\d{6,})")
"""What a batch id looks like: ``batch-`` and the generation, six digits or more."""


def run_identity(run: RunDir) -> str:
    """Which run a transport serves: its filesystem and resolved path (``runs/t``, ``./runs/t/`` and the absolute path are one run)."""
    return f"{run.fs.type_name}:{run.root}"


def batch_id(gen: int) -> str:
    """The id of generation ``gen``'s batch: ``batch-000003`` (ids sort in generation order)."""
    return f"batch-{gen:06d}"


def batch_gen(batch: str) -> int:
    """The generation of a batch id.

    Raises:
        ArenaError: not a batch id.
    """
    matched = BATCH_ID.fullmatch(batch)
    if matched is None:
        raise ArenaError(f"{batch!r} is not a batch id (batch- and six or more digits)")
    return int(matched.group(1))


class Announcement(BaseModel):
    """A trainer's announcement: the policy it made from a batch (``versions/<batch_id>.json``).

    Attributes:
        format: ``coevo.policy/1``.
        batch_id: the batch it was trained through (every earlier batch too).
        version: the policy's name: the trajectories it plays are signed with it.
        model: the model name the Solver sends; default: ``version``.
        lora_path: a LoRA adapter's folder, as the server sees it: the server loads
            it as ``model`` before the next rollouts. Absent: ``model`` is served already.
        metrics: what the trainer reports of the step that made it (``loss``, ``entropy``,
            ``grad_norm``, ...): at most :data:`MAX_METRICS` names of letters, digits and
            ``_./-``, each a number; one that is not finite, or a name that is not one, is
            left out (:attr:`dropped` counts them). The run keeps them in its ``policies``
            table and sends them to the trackers as ``trainer/<name>``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["coevo.policy/1"] = POLICY_FORMAT
    batch_id: str
    version: str = Field(min_length=1, max_length=256)
    model: str | None = Field(default=None, min_length=1, max_length=256)
    lora_path: str | None = Field(default=None, min_length=1)
    metrics: dict[str, float] | None = None
    dropped: int = Field(default=0, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _finite_metrics(cls, data: Any) -> Any:
        """Keep the metrics that are numbers with names; count the rest (a trainer's NaN loss is not the run's failure)."""
        if not isinstance(data, dict) or data.get("metrics") is None:
            return data
        given = data["metrics"]
        if not isinstance(given, dict):
            raise ValueError("metrics must be an object of names to numbers")
        kept = {
            name: float(value)
            for name, value in list(given.items())[:MAX_METRICS]
            if isinstance(name, str)
            and METRIC_NAME.fullmatch(name)
            and isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
        }
        return {**data, "metrics": kept, "dropped": len(given) - len(kept)}

    @field_validator("batch_id")
    @classmethod
    def _a_batch_id(cls, value: str) -> str:
        batch_gen(value)
        return value

    @property
    def served_as(self) -> str:
        """The model name the Solver sends."""
        return self.model or self.version

    @property
    def trained_through(self) -> int:
        """The generation of the batch it was trained through."""
        return batch_gen(self.batch_id)


def read_announcement(data: bytes | str | dict[str, Any], where: str) -> Announcement:
    """An announcement parsed and checked (data only).

    Raises:
        ArenaError: not an announcement (naming ``where`` and the problem, with the format's page).
    """
    try:
        parsed = loads_json(data, where) if isinstance(data, bytes | str) else data
        return Announcement.model_validate(parsed)
    except RecursionError:  # a dict nested past what validation follows
        raise ArenaError(
            f"{where} is not a policy announcement (it is nested too deep to read); "
            "docs/trainer.md gives the format"
        ) from None
    except (ValueError, ValidationError, ArenaError) as exc:
        detail = (
            "; ".join(f"{'.'.join(map(str, e['loc'])) or 'it'}: {e['msg']}" for e in exc.errors())
            if isinstance(exc, ValidationError)
            else str(exc)
        )
        raise ArenaError(
            f"{where} is not a policy announcement ({detail}); docs/trainer.md gives the format: "
            '{"format": "coevo.policy/1", "batch_id": ..., "version": ..., "model"?, "lora_path"?}'
            "; fix the file (or the trainer that wrote it), then `coevo resume RUN_DIR`"
        ) from None


# ---- the batch ------------------------------------------------------------------------------

_COLUMNS: Final = (
    ("batch_id", pa.string(), False, "`batch-{gen:06d}`"),
    ("gen", pa.int32(), False, "the generation that played it"),
    (
        "role",
        pa.string(),
        False,
        "`solver`: the Solver played the task; `proposer`: the Synthesizer's rollout that "
        "proposed it (self-play: the same policy in its other role)",
    ),
    (
        "episode_id",
        pa.string(),
        False,
        "the episode (a row of the log's `episodes` and `trajectories`); a proposer row's is "
        "its rollout's (`prop-…`, a row of `trajectories`)",
    ),
    ("task_id", pa.string(), False, "the task played, or proposed"),
    ("level", pa.int64(), True, "the task's difficulty level"),
    (
        "group_size",
        pa.int64(),
        False,
        "its group: a solver row's, the rollouts of its task in this generation; a proposer "
        "row's, every proposer row of the batch",
    ),
    (
        "reward",
        pa.float64(),
        False,
        "a solver row: coevo's verifier, 0 or 1; a proposer row: its task's `proposer_reward` "
        "(the log's `proposals`; a rejected task's is a penalty)",
    ),
    (
        "advantage",
        pa.float64(),
        False,
        "`reward` minus the mean reward of its group (GRPO's numerator, per role; divide by the "
        "group's std if you want it)",
    ),
    (
        "policy_version",
        pa.string(),
        False,
        "the policy that played it (the off-policy correction's input: compare with the version "
        "you are training)",
    ),
    ("model", pa.string(), False, "the model name the server answered with"),
    (
        "prompt_messages",
        pa.string(),
        False,
        "JSON: the conversation before the first assistant turn (system, user)",
    ),
    (
        "completion_messages",
        pa.string(),
        False,
        "JSON: the rest, assistant turns with their `tool_calls` and the `tool` results, Chat "
        "Completions format",
    ),
    ("tools", pa.string(), False, "JSON: the tools offered, as OpenAI function tools"),
    ("sampling", pa.string(), False, "JSON: the sampling parameters sent"),
    (
        "layout",
        pa.string(),
        True,
        "`interleaved` (use `token_ids`), `per-turn` (use the `turn_*` columns), null (the "
        "server returned no token ids)",
    ),
    (
        "token_ids",
        pa.list_(pa.int64()),
        True,
        "the episode as one sequence: the first prompt, each completion and the tokens between",
    ),
    (
        "logprobs",
        pa.list_(pa.float64()),
        True,
        "the sampling log-probability of each token of `token_ids` the model produced (null "
        "elsewhere)",
    ),
    (
        "loss_mask",
        pa.list_(pa.int64()),
        True,
        "1 for each token of `token_ids` the model produced, 0 for prompt and tool tokens",
    ),
    ("turn_prompt_ids", pa.list_(pa.list_(pa.int64())), True, "each turn's prompt token ids"),
    (
        "turn_completion_ids",
        pa.list_(pa.list_(pa.int64())),
        True,
        "each turn's completion token ids",
    ),
    (
        "turn_logprobs",
        pa.list_(pa.list_(pa.float64())),
        True,
        "each turn's completion log-probabilities",
    ),
    (
        "finish_reasons",
        pa.list_(pa.string()),
        True,
        "each turn's finish reason (`length`: cut at its `max_tokens` or the context limit, a turn "
        "to leave out of the loss: overlong masking); each turn's completion is one run of 1s in "
        "`loss_mask`, of `turn_completion_ids`' length",
    ),
)

BATCH_SCHEMA: Final = pa.schema(
    [
        pa.field(name, kind, metadata={"description": about})
        for name, kind, _nullable, about in _COLUMNS
    ],
    metadata={"coevo.format": BATCH_FORMAT},
)
"""A training batch: one row per training rollout of a generation; each column says what it is (its ``description``), as :func:`batch_markdown` and ``docs/trainer.md`` do."""


def batch_markdown() -> str:
    """The batch's columns as a Markdown table (``docs/trainer.md`` holds it, checked by a test)."""
    lines = ["| column | type | meaning |", "|---|---|---|"]
    for name, kind, nullable, about in _COLUMNS:
        shown = str(kind).replace("<item: ", "<").replace("list<", "list<")
        lines.append(f"| `{name}` | {shown}{' or null' if nullable else ''} | {about} |")
    return "\n".join(lines)


_FROM_TRAJECTORIES: Final = (
    "episode_id",
    "task_id",
    "policy_version",
    "model",
    "tools",
    "sampling",
    "layout",
    "token_ids",
    "logprobs",
    "loss_mask",
    "turn_prompt_ids",
    "turn_completion_ids",
    "turn_logprobs",
    "finish_reasons",
)


NEEDED: Final = ["purpose", "failure", "reward", "messages", *_FROM_TRAJECTORIES]
"""The columns of ``trajectories`` a batch is made of."""

PROPOSAL_COLUMNS: Final = ["task_id", "proposer_reward"]
"""The columns of ``proposals`` a batch is made of (the proposer rows' rewards)."""

ROLES: Final = {"train": "solver", "propose": "proposer"}
"""The ``trajectories`` purpose of each role's rows in a batch (other purposes are no training data)."""


def _split(messages: str) -> tuple[str, str]:
    """A conversation as its prompt (up to the first assistant turn) and its completion (the rest), JSON."""
    conversation = json.loads(messages)
    first = next(
        (i for i, m in enumerate(conversation) if m.get("role") == "assistant"), len(conversation)
    )
    return (
        json.dumps(conversation[:first], ensure_ascii=False),
        json.dumps(conversation[first:], ensure_ascii=False),
    )


def training_batch(log: GameLog, gen: int) -> pa.Table:
    """Generation ``gen``'s batch, from its committed log (see :func:`batch_of`).

    Raises:
        LogError: the generation is not committed, or its parts cannot be read.
    """
    if gen > log.last_generation():
        raise LogError(f"generation {gen} of {log.run.uri} is not committed: it has no batch yet")
    trajectories = log.read("trajectories", gens=[gen], columns=NEEDED)
    proposals = log.read("proposals", gens=[gen], columns=PROPOSAL_COLUMNS)
    generations = log.read("generations", gens=[gen], columns=["dynamic_sampling"])
    return batch_of(
        trajectories,
        TaskLevels().up_to(log, gen),
        gen,
        proposals,
        informative_only=dynamic_sampling(generations),
    )


def dynamic_sampling(generations: pa.Table) -> bool:
    """Whether a generation's ``generations`` row says dynamic sampling was on (its batch: informative groups only; null in older logs: off)."""
    return any(bool(v) for v in generations.column("dynamic_sampling").to_pylist())


def batch_of(
    trajectories: pa.Table,
    levels: Mapping[str, int | None],
    gen: int,
    proposals: pa.Table | None = None,
    *,
    informative_only: bool = False,
) -> pa.Table:
    """Generation ``gen``'s batch from its ``trajectories`` rows: the training rollouts of both roles.

    Solver rows are the ``train`` rollouts that were played (one the Solver could
    not play, its server down, is left out); each one's ``advantage`` is its
    reward minus the mean reward of its group (the rollouts of its task in this
    generation, ``group_size`` of them). With ``informative_only`` (the
    generation ran dynamic sampling), a group whose rewards are all equal
    (:func:`~coevo.arena.gamelog.figures.informative`; its advantages all 0)
    is left out. Proposer rows (self-play) are the
    ``propose`` rollouts of tasks in ``proposals`` (rows of the ``proposals``
    table: ``task_id``, ``proposer_reward``) that were paid, rejected tasks'
    included (an accepted task the Solver did not play was not paid): each is
    paid its task's proposer reward, and its advantage is that minus the mean over
    every proposer row (the role's own baseline, as SPIRAL's role-conditioned
    advantage). Nothing is divided by a standard deviation.
    """
    paid: dict[str, float] = {}
    if proposals is not None:
        # a proposal accepted but not played was not paid (its reward is null): nothing to learn
        paid = {
            task: reward
            for task, reward in zip(
                proposals.column("task_id").to_pylist(),
                proposals.column("proposer_reward").to_pylist(),
                strict=True,
            )
            if reward is not None
        }
    purpose = trajectories.column("purpose")
    solver = pc.and_(pc.equal(purpose, "train"), pc.is_null(trajectories.column("failure")))
    proposer = pc.and_(
        pc.equal(purpose, "propose"),
        pc.is_in(trajectories.column("task_id"), value_set=pa.array(list(paid), pa.string())),
    )
    if informative_only:
        solver = pc.and_(solver, _in_informative_groups(trajectories))
    kept = pc.or_(solver, proposer)
    # every row a rollout to train on (the usual case): no copy of the token columns
    rows = trajectories if pc.all(kept).as_py() is not False else trajectories.filter(kept)
    task_ids = rows.column("task_id").to_pylist()
    roles = [ROLES[p] for p in rows.column("purpose").to_pylist()]
    rewards = [
        paid[t] if role == "proposer" else float(r)
        for t, r, role in zip(task_ids, rows.column("reward").to_pylist(), roles, strict=True)
    ]
    # a solver row's group is its task's rollouts; a proposer row's, every proposer row
    group_of = [t if role == "solver" else None for t, role in zip(task_ids, roles, strict=True)]
    groups: dict[str | None, list[float]] = {}
    for group, reward in zip(group_of, rewards, strict=True):
        groups.setdefault(group, []).append(reward)
    means = {group: sum(r) / len(r) for group, r in groups.items()}
    split = [_split(messages) for messages in rows.column("messages").to_pylist()]
    count = rows.num_rows
    columns: dict[str, Any] = {
        "batch_id": [batch_id(gen)] * count,
        "gen": [gen] * count,
        "role": roles,
        "level": [levels.get(t) for t in task_ids],
        "group_size": [len(groups[g]) for g in group_of],
        "reward": rewards,
        "advantage": [r - means[g] for r, g in zip(rewards, group_of, strict=True)],
        "prompt_messages": [prompt for prompt, _ in split],
        "completion_messages": [completion for _, completion in split],
    }
    arrays = [
        rows.column(f.name).cast(f.type)
        if f.name in _FROM_TRAJECTORIES
        else pa.chunked_array([pa.array(columns[f.name], f.type)])
        for f in BATCH_SCHEMA
    ]
    return pa.Table.from_arrays(arrays, schema=BATCH_SCHEMA)


def _in_informative_groups(trajectories: pa.Table) -> pa.Array:
    """Per row: whether it is a ``train`` rollout that was played, of a task whose played rollouts' rewards differ."""
    purpose = trajectories.column("purpose").to_pylist()
    failure = trajectories.column("failure").to_pylist()
    task_ids = trajectories.column("task_id").to_pylist()
    rewards = trajectories.column("reward").to_pylist()
    groups: dict[str, list[float]] = {}
    for p, f, t, r in zip(purpose, failure, task_ids, rewards, strict=True):
        if p == "train" and f is None:
            groups.setdefault(t, []).append(float(r))
    kept = {t for t, group in groups.items() if informative(group)}
    return pa.array([t in kept for t in task_ids], pa.bool_())


def parquet_bytes(table: pa.Table) -> bytes:
    """A table as the bytes of a Parquet file."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def read_batch_bytes(data: bytes, where: str) -> pa.Table:
    """A batch file's table, checked to be a batch.

    Raises:
        ArenaError: not a coevo batch (naming ``where``).
    """
    try:
        table = read_parquet_bytes(data, where)
    except FileRefusedError as exc:
        raise ArenaError(str(exc)) from None
    except (OSError, pa.ArrowException) as exc:
        raise ArenaError(f"{where} is not a readable Parquet batch: {exc}") from None
    fmt = (table.schema.metadata or {}).get(b"coevo.format", b"").decode()
    if fmt != BATCH_FORMAT:
        raise ArenaError(
            f"{where} is not a {BATCH_FORMAT} batch (its format is {fmt or 'unset'!r})"
        )
    return table
