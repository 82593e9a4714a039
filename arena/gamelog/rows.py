"""The game log's tables, one typed row model each: the one owner of the log's schema.

Each table is a pydantic model whose fields are the table's columns, in
order, each with its type and a description. Everything else is derived from
these models: the Arrow schemas the writer and the reader use
(:data:`SCHEMAS`), the table in ``docs/game-log.md``
(:func:`markdown_table`, checked by a test), and the rows the loop writes
(:class:`GenerationRecord`, one generation's rows of every table).

Every table also has a ``gen`` column, from its hive partition. Changing a
model changes the log's format: bump :data:`SCHEMA_VERSION` in
:mod:`coevo.arena.gamelog.log` and keep older logs readable (a column a
log lacks reads as null).
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Final

import pyarrow as pa
from coevo.arena.codetask import CodeTaskSpec
from coevo.arena.codeworld import CodeWorldSpec
from coevo.arena.difficulty import task_level
from coevo.arena.outcomes import Episode, Verdict
from coevo.arena.spec import TaskSpec, WorldSpec
from coevo.arena.trajectory import Trajectory, is_logprob
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "SCHEMAS",
    "TABLES",
    "EpisodeRow",
    "EvalRow",
    "GenerationRecord",
    "GenerationRow",
    "IngestedRow",
    "PolicyRow",
    "PredictionRow",
    "ProposalRow",
    "Row",
    "TaskRow",
    "TrajectoryRow",
    "UpdateRow",
    "UsageRow",
    "VerdictRow",
    "WorldRow",
    "markdown_table",
]


class Row(BaseModel):
    """A row of a game-log table; subclasses name their table and describe it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    table: ClassVar[str]
    """The table's name."""
    about: ClassVar[str]
    """One sentence: what one row of the table is."""

    def cells(self) -> dict[str, Any]:
        """The row as the writer takes it: column → value."""
        return {name: getattr(self, name) for name in type(self).model_fields}


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


class WorldRow(Row):
    """One world, logged the first time a task brings it."""

    table: ClassVar[str] = "worlds"
    about: ClassVar[str] = "a world, once, in the generation whose tasks first used it"

    world_id: str = Field(description="the world's content id (`sha256:...`)")
    domain: str = Field(description="its domain (retail, airline, a mined database's name, ...)")
    spec: str = Field(description="the whole `coevo.world/1` record, as JSON")

    @classmethod
    def of(cls, world: WorldSpec) -> WorldRow:
        """The row of ``world``."""
        return cls(world_id=world.world_id, domain=world.domain, spec=world.model_dump_json())

    @classmethod
    def of_code(cls, world: CodeWorldSpec) -> WorldRow:
        """The row of a code world (its ``spec`` a ``coevo.codeworld/1`` record)."""
        return cls(world_id=world.world_id, domain=world.domain, spec=world.model_dump_json())


def _family(task: TaskSpec) -> str | None:
    plan = (task.provenance or {}).get("plan")
    family = plan.get("family") if isinstance(plan, dict) else None
    return str(family) if family is not None else None


class TaskRow(Row):
    """One task as proposed (accepted or not), or one task of the held-out eval suite."""

    table: ClassVar[str] = "tasks"
    about: ClassVar[str] = "every proposed task, and (in generation 0) the eval suite"

    task_id: str = Field(description="the task's content id")
    world_id: str = Field(description="its world (a row of `worlds`)")
    source: str = Field(
        description="`fresh` (proposed), `mutation` (a child of a logged task), `eval`, or "
        "`imported` (a benchmark run's pool: a `coevo.codetask/1` record)"
    )
    level: int | None = Field(
        description="its difficulty level (1–5), from its measured difficulty"
    )
    family: str | None = Field(
        description="question, action, bulk or conditional, when the synthesizer recorded a plan"
    )
    domain: str | None = Field(description="its world's domain")
    parent: str | None = Field(description="for a mutation, the parent task's id")
    operator: str | None = Field(description="for a mutation, the operator that made it")
    spec: str = Field(
        description="the whole `coevo.task/1` (or `coevo.codetask/1`) record, as JSON, its world by id"
    )

    @classmethod
    def of(cls, task: TaskSpec, source: str) -> TaskRow:
        """The row of ``task``, proposed as ``source`` (given with its world inline; the row keeps the world's id)."""
        return cls(
            task_id=task.task_id,
            world_id=task.world_id,
            source=source,
            level=task_level(task),
            family=_family(task),
            domain=task.world.domain if isinstance(task.world, WorldSpec) else None,
            parent=task.lineage.parent if task.lineage else None,
            operator=task.lineage.operator if task.lineage else None,
            spec=task.model_copy(update={"world": task.world_id}).model_dump_json(),
        )

    @classmethod
    def of_code(cls, task: CodeTaskSpec) -> TaskRow:
        """The row of a benchmark run's code task (source ``imported``; its world by id)."""
        record = task.model_dump(mode="json", exclude={"world"})
        record |= {"id": task.task_id, "world": task.world.world_id}
        return cls(
            task_id=task.task_id,
            world_id=task.world.world_id,
            source="imported",
            level=None,
            family=None,
            domain=task.world.domain,
            parent=None,
            operator=None,
            spec=json.dumps(record, sort_keys=True, ensure_ascii=False),
        )


class VerdictRow(Row):
    """The Judge's verdict on one proposed task."""

    table: ClassVar[str] = "verdicts"
    about: ClassVar[str] = "the Judge's verdict on each proposed task, in the order of `tasks`"

    task_id: str | None = Field(description="the task (null when its record could not be read)")
    accepted: bool = Field(description="whether the task may enter the curriculum")
    failed: list[str] = Field(description="the names of the checks it failed, sorted")
    checks: str = Field(description="every check: `{name: {passed, reason}}`, as JSON")
    solve_calls: int | None = Field(
        description="tool calls a solvability search spent before earning 1"
    )
    error: str | None = Field(description="why the record could not be judged at all")

    @classmethod
    def of(cls, verdict: Verdict) -> VerdictRow:
        """The row of ``verdict``."""
        return cls(
            task_id=verdict.task_id,
            accepted=verdict.accepted,
            failed=sorted(verdict.failed),
            checks=_json({k: v.model_dump() for k, v in verdict.checks.items()}),
            solve_calls=verdict.solve_calls,
            error=verdict.error,
        )


class EpisodeRow(Row):
    """One episode a Solver played, for training or for the eval suite."""

    table: ClassVar[str] = "episodes"
    about: ClassVar[str] = "every episode played: training rollouts and eval episodes"

    episode_id: str = Field(
        description="unique and deterministic: from the seed, generation, purpose, index and task (`external`: from the rollout's `rollout_id`, else its content, so the same rollout in two inbox parts is one episode)"
    )
    task_id: str = Field(description="the task played")
    purpose: str = Field(
        description="`train`, `eval`, or `external` (a rollout an external trainer drove, from the inbox)"
    )
    solver: str | None = Field(
        description="the policy version that played it (e.g. `linear-pg@12`)"
    )
    seed: int | None = Field(description="the seed the Solver used")
    reward: int = Field(description="the binary reward, 0 or 1")
    steps: int = Field(description="tool calls made, `submit` included")
    truncated: bool = Field(description="the step budget ran out before `submit`")
    calls: str = Field(description="the tool calls, `[{tool, arguments}]`, as JSON")
    reason: str = Field(description="why the reward is what it is (one line)")
    failure: str | None = Field(
        description="when the Solver could not play the task at all: why (the same text as `reason`)"
    )

    @classmethod
    def of(cls, episode: Episode, purpose: str) -> EpisodeRow:
        """The row of ``episode``, played for ``purpose``."""
        reason = episode.reward.reason
        return cls(
            episode_id=episode.episode_id,
            task_id=episode.task_id,
            purpose=purpose,
            solver=episode.solver,
            seed=episode.seed,
            reward=episode.reward.value,
            steps=len(episode.calls),
            truncated=episode.truncated,
            calls=json.dumps(
                [{"tool": c.tool, "arguments": c.arguments} for c in episode.calls], default=str
            ),
            reason=reason,
            failure=episode.failure,
        )


class PredictionRow(Row):
    """The World model's prediction for one accepted task, before any rollout."""

    table: ClassVar[str] = "predictions"
    about: ClassVar[str] = "the World model's P(success) of each accepted task, before any rollout"

    task_id: str = Field(description="the task")
    version: str = Field(
        description="the policy version the prediction is for: the one that plays this generation"
    )
    p: float = Field(description="P(the Solver succeeds)")


class UpdateRow(Row):
    """One learner step."""

    table: ClassVar[str] = "updates"
    about: ClassVar[str] = (
        "one row per learner step; at run.max_staleness ≥ 1 generation g's row is the step on "
        "g − 1's episodes (none in generation 0)"
    )

    version: str = Field(
        description="the policy version the step started from (at staleness 0 it played the episodes)"
    )
    episodes: int = Field(description="episodes learnt from")
    loss: float | None = Field(description="the objective after the step, when the Solver has one")
    success: float | None = Field(
        description="the success rate of those episodes, as the learner saw it"
    )
    entropy: float | None = Field(description="the policy's mean entropy, when it reports one")
    skipped: int | None = Field(description="episodes the learner could not use")


class GenerationRow(Row):
    """What one generation did, in one row."""

    table: ClassVar[str] = "generations"
    about: ClassVar[str] = "one row per generation: what was proposed, accepted, trained and learnt"

    proposed: int = Field(description="tasks proposed (fresh and mutations, distinct)")
    accepted: int = Field(description="of those, accepted by the Judge")
    rejected: int = Field(description="of those, rejected")
    mutations: int = Field(description="proposals that were mutations of earlier tasks")
    trained_tasks: int = Field(
        description="distinct tasks played for training, each a group of `run.rollouts` "
        "episodes (with dynamic sampling, every round's)"
    )
    train_episodes: int = Field(description="training episodes played")
    train_success: float | None = Field(
        description="their mean reward (episodes the Solver could not play, counted in `failures`, left out)"
    )
    eval_success: float | None = Field(
        description="mean reward on the eval suite (null when it was not played; failed episodes left out)"
    )
    frontier: float | None = Field(
        description="the curriculum's level after this generation (its own measure)"
    )
    accepted_level: float | None = Field(description="mean level of the accepted tasks")
    trained_level: float | None = Field(description="mean level of the tasks trained on")
    brier: float | None = Field(
        description="the World model's Brier score on this generation's fresh tasks"
    )
    version: str = Field(description="the policy version that played this generation")
    rejections: str = Field(
        description="the five most frequent failed checks, `{check: count}`, as JSON"
    )
    failures: int = Field(
        description="role failures: synthesizer requests that raised, tasks the Judge could not assess, World-model and learner calls that raised, and episodes (training or eval) the Solver could not play"
    )
    proposer_reward: float | None = Field(
        default=None,
        description="the mean proposer reward of the generation's proposals (`proposals` table)",
    )
    pool_diversity: float | None = Field(
        default=None,
        description="the diversity of the generation's accepted tasks: their mean pairwise "
        "signature distance (docs/novelty.md); null for fewer than two",
    )
    informative_groups: int | None = Field(
        default=None,
        description="of the groups played (`trained_tasks`), those whose rewards differ: the "
        "ones a group-baseline policy gradient learns from (failed episodes left out; null in "
        "logs older than schema 4)",
    )
    informative_share: float | None = Field(
        default=None,
        description="`informative_groups` / `trained_tasks` (null when no task was played)",
    )
    extra_tasks: int | None = Field(
        default=None,
        description="tasks dynamic sampling played beyond the curriculum's batch, in its "
        "further rounds (0 when it is off)",
    )
    dynamic_sampling: bool | None = Field(
        default=None,
        description="whether dynamic sampling was on (`curriculum.dynamic_sampling`): the "
        "learner's step and the trainer's batch then hold the informative groups only",
    )


class EvalRow(Row):
    """One episode of a held-out eval suite, with the task's level and domain and the suite."""

    table: ClassVar[str] = "evals"
    about: ClassVar[str] = (
        "the eval suites' episodes (the synthesized one's, and each `[[eval.suites]]` suite's), "
        "with each task's level and domain"
    )

    task_id: str = Field(description="the eval task")
    episode_id: str = Field(description="its episode (a row of `episodes`)")
    level: int | None = Field(description="the task's level")
    domain: str | None = Field(description="its world's domain")
    reward: int = Field(description="the reward, 0 or 1")
    success: bool = Field(description="reward = 1")
    suite: str | None = Field(
        default=None,
        description="the suite: null for the synthesized held-out suite (and in logs older than "
        "this column), else the name of an `[[eval.suites]]` suite (a file of tasks, a corpus's "
        "held-out split)",
    )

    @classmethod
    def of(
        cls, episode: Episode, task: TaskSpec | CodeTaskSpec | None, suite: str | None = None
    ) -> EvalRow:
        """The row of an eval ``episode`` of ``task`` (of the suite named ``suite``; None: the synthesized one)."""
        return cls(
            task_id=episode.task_id,
            episode_id=episode.episode_id,
            level=task_level(task) if isinstance(task, TaskSpec) else None,
            domain=task.world.domain
            if task is not None and isinstance(task.world, WorldSpec | CodeWorldSpec)
            else None,
            reward=episode.reward.value,
            success=episode.reward.value == 1,
            suite=suite,
        )


class UsageRow(Row):
    """What an API-backed role spent on one task this generation."""

    table: ClassVar[str] = "usage"
    about: ClassVar[str] = "calls, tokens and dollars API-backed roles spent, per role and task"

    role: str = Field(
        description="what spent it: `synthesizer`, `solver`, `judge`, `world_model` or `user` (a benchmark run's user simulator; a Judge's solve attempts count as `solver`)"
    )
    task_id: str | None = Field(description="the task it was spent on (null: not for one task)")
    calls: int = Field(description="API calls")
    input_tokens: int = Field(description="input tokens")
    output_tokens: int = Field(description="output tokens")
    cache_write_tokens: int = Field(description="input tokens written to the prompt cache")
    cache_read_tokens: int = Field(description="input tokens read from the prompt cache")
    dollars: float = Field(description="the cost at the provider's list price")
    retries: int | None = Field(
        default=None,
        description="requests made again after an error status or no answer (a rate limit, a restarting server)",
    )
    failed_calls: int | None = Field(
        default=None, description="calls that still failed after the retries"
    )
    refused_logprobs: int | None = Field(
        default=None,
        description="answers whose log-probs were left out as no log-probabilities (NaN, an infinity, vLLM's -9999 floor): their turns were recorded without them",
    )


class TrajectoryRow(Row):
    """An LLM episode as a trainer reads it: the conversation, the sampling, the policy and the tokens."""

    table: ClassVar[str] = "trajectories"
    about: ClassVar[str] = (
        "one row per episode an LLM Solver played (a row of `episodes` by `episode_id`), and in "
        "self-play one per task the proposer proposed (purpose `propose`): what a trainer learns from"
    )

    episode_id: str = Field(
        description="the episode (a row of `episodes`); for `propose`, the proposal's rollout "
        "(`prop-...`, no row of `episodes`)"
    )
    task_id: str = Field(description="the task played (for `propose`: the task proposed)")
    purpose: str = Field(
        description="`train`, `eval` or `external` (as in `episodes`), or `propose`: the "
        "Synthesizer's rollout that proposed the task (self-play)"
    )
    policy_version: str = Field(
        description="the policy that played: the model's name, or the adapter's it was given"
    )
    provider: str = Field(
        description="`anthropic` or `openai` (any Chat Completions server); for an ingested rollout, its source (`verifiers`)"
    )
    model: str = Field(description="the model as the server named it in its answers")
    reward: int = Field(
        description="the episode's reward, 0 or 1; for `propose`, 1 when the Judge accepted the "
        "task (what the proposal earned is its `proposer_reward` in `proposals`)"
    )
    failure: str | None = Field(
        description="when the Solver could not play the episode (its server down, ...): why; not a rollout to learn from"
    )
    messages: str = Field(
        description="the whole conversation, system message first, in the Chat Completions format, as JSON"
    )
    tools: str = Field(description="the tools offered, as OpenAI function tools, as JSON")
    sampling: str = Field(description="the sampling parameters sent (with `max_tokens`), as JSON")
    turns: int = Field(description="assistant turns")
    bad_steps: int = Field(
        description="turns whose calls could not be made as written (arguments not JSON, text where a tool call was wanted, cut off)"
    )
    finish_reasons: list[str] = Field(description="each assistant turn's finish reason")
    input_tokens: int | None = Field(
        description="prompt tokens over every turn (null when the server reported no usage and no ids)"
    )
    output_tokens: int | None = Field(description="completion tokens over every turn (likewise)")
    turn_prompt_ids: list[list[int]] | None = Field(
        description="each turn's prompt token ids (null: the server returned none)"
    )
    turn_completion_ids: list[list[int]] | None = Field(
        description="each turn's completion token ids"
    )
    turn_logprobs: list[list[float]] | None = Field(
        description="each turn's completion log-probabilities"
    )
    token_ids: list[int] | None = Field(
        description="the episode as one sequence: the first prompt, then each completion and the tokens between (null when the turns do not chain; see `layout`)"
    )
    logprobs: list[float | None] | None = Field(
        description="the log-probability of each token of `token_ids` the model sampled (null elsewhere)"
    )
    loss_mask: list[int] | None = Field(
        description="1 for each token of `token_ids` the model produced, 0 for prompt and tool tokens"
    )
    layout: str | None = Field(
        description="`interleaved` (use `token_ids`), `per-turn` (a turn's prompt re-renders earlier turns: use the `turn_*` columns), or null (no token ids)"
    )
    note: str | None = Field(
        description="why the episode has no interleaved layout, when it has none"
    )

    @classmethod
    def of(cls, episode: Episode, purpose: str) -> TrajectoryRow:
        """The row of ``episode`` (which has a trajectory), played for ``purpose``."""
        trajectory = episode.trajectory
        assert trajectory is not None and episode.episode_id is not None
        return cls._of(
            trajectory,
            episode.episode_id,
            episode.task_id,
            purpose,
            episode.reward.value,
            episode.failure,
        )

    @classmethod
    def proposed(
        cls, rollout_id: str, task_id: str, trajectory: Trajectory, accepted: bool
    ) -> TrajectoryRow:
        """The row of a Synthesizer's rollout that proposed ``task_id`` (purpose ``propose``; self-play).

        Its turns are separate calls (each stage a fresh conversation), so it is
        laid out per turn; ``reward`` says whether the Judge accepted the task.
        """
        row = cls._of(trajectory, rollout_id, task_id, "propose", int(accepted), None)
        if row.layout != "per-turn":
            return row
        why = "each call of the proposal is a conversation of its own: use the per-turn token ids"
        return row.model_copy(update={"note": why})

    @classmethod
    def _of(
        cls,
        trajectory: Trajectory,
        episode_id: str,
        task_id: str,
        purpose: str,
        reward: int,
        failure: str | None,
    ) -> TrajectoryRow:
        turns = trajectory.turns
        interleaved, why = trajectory.interleaved()
        tokens = trajectory.has_tokens
        scored = tokens and all(
            t.logprobs is not None
            and len(t.logprobs) == len(t.completion_ids or [])
            and all(is_logprob(v) for v in t.logprobs)
            for t in turns
        )  # one usable log-prob per completion token on every turn, or none kept (a NaN is none)
        logprobs = [t.logprobs or [] for t in turns] if scored else None

        def total(counts: list[int | None], ids: list[list[int] | None]) -> int | None:
            if all(c is not None for c in counts):
                return sum(c or 0 for c in counts)
            if all(i is not None for i in ids):
                return sum(len(i or []) for i in ids)
            return None

        return cls(
            episode_id=episode_id,
            task_id=task_id,
            purpose=purpose,
            policy_version=trajectory.policy_version,
            provider=trajectory.provider,
            model=trajectory.model,
            reward=reward,
            failure=failure,
            messages=json.dumps(trajectory.messages, ensure_ascii=False, default=str),
            tools=json.dumps(trajectory.tools, ensure_ascii=False),
            sampling=_json(trajectory.sampling),
            turns=len(turns),
            bad_steps=trajectory.bad_steps,
            finish_reasons=[t.finish for t in turns],
            input_tokens=total([t.input_tokens for t in turns], [t.prompt_ids for t in turns]),
            output_tokens=total(
                [t.output_tokens for t in turns], [t.completion_ids for t in turns]
            ),
            turn_prompt_ids=[t.prompt_ids or [] for t in turns] if tokens else None,
            turn_completion_ids=[t.completion_ids or [] for t in turns] if tokens else None,
            turn_logprobs=logprobs,
            token_ids=interleaved.token_ids if interleaved else None,
            logprobs=interleaved.logprobs if interleaved else None,
            loss_mask=interleaved.loss_mask if interleaved else None,
            layout="interleaved" if interleaved else "per-turn" if tokens else None,
            note=why,
        )


class PolicyRow(Row):
    """The policy a generation played when an external trainer trains the Solver (the trainer hand-off)."""

    table: ClassVar[str] = "policies"
    about: ClassVar[str] = (
        "with a `[trainer]`, one row per generation: the policy its rollouts used, which batch "
        "it was trained through, and the batch the generation handed out"
    )

    version: str = Field(description="the policy version that played (the trainer's name for it)")
    model: str = Field(description="the model the Solver named in its requests (an adapter's name)")
    lora_path: str | None = Field(
        description="where the server loaded it from, when it is a LoRA adapter"
    )
    announced_for: str | None = Field(
        description="the batch whose announcement named it (null: the served model before any training)"
    )
    trained_through: int = Field(
        description="the last generation whose batch it was trained on (-1: none)"
    )
    staleness: int = Field(
        description="batches handed out that it was not yet trained on (at most `run.max_staleness`)"
    )
    batch_id: str = Field(description="the batch this generation's training episodes make")
    batch_rows: int = Field(description="rollouts in that batch")
    trainer_metrics: str | None = Field(
        default=None,
        description="what the trainer announced of the step that made this version (`loss`, "
        "`entropy`, `grad_norm`, ...), finite numbers by name, as JSON (null: it announced none)",
    )


class IngestedRow(Row):
    """One part of the run's inbox, ingested: rollouts an external trainer drove, replayed and verified by coevo."""

    table: ClassVar[str] = "ingested"
    about: ClassVar[str] = (
        "one row per inbox part the generation ingested (its episodes are rows of `episodes` "
        "with purpose `external`); a part is ingested once"
    )

    part_id: str = Field(description="the part (`inbox/<part_id>.parquet`)")
    source: str = Field(description="what produced it (`verifiers`, ...); empty if unreadable")
    rollouts: int = Field(description="rollouts in the part")
    episodes: int = Field(description="of those, replayed and logged")
    rejected: int = Field(
        description="rollouts not logged: a task the run does not know, a world that does not build"
    )
    disagreed: int = Field(
        description="logged rollouts whose reward by coevo's verifier differs from the producer's"
    )
    error: str | None = Field(description="why the part could not be read (then nothing of it is)")


class ProposalRow(Row):
    """One proposed task and what it earned its Synthesizer (self-play's proposer reward)."""

    table: ClassVar[str] = "proposals"
    about: ClassVar[str] = (
        "one row per task proposed in the generation (fresh and mutations): the Judge's verdict, "
        "the Solver's observed success on it and the proposer reward the objective of "
        "`[proposer]` paid for it (docs/self-play.md)"
    )

    task_id: str = Field(description="the proposed task (a row of `tasks`)")
    proposer: str = Field(
        description="who proposed it: the Synthesizer's policy version (`learned-synth@12`), "
        "its name, or `mutation` for a curriculum's mutation"
    )
    accepted: bool = Field(description="whether the Judge accepted it")
    p_hat: float | None = Field(
        description="the Solver's observed success on it this generation (null: not played)"
    )
    plays: int = Field(description="training episodes of it this generation")
    predicted: float | None = Field(
        description="the World model's P(success) of it (null: rejected)"
    )
    proposer_reward: float | None = Field(
        description="the reward the objective paid for it (null: accepted but not played, "
        "so nothing was observed or paid)"
    )
    novelty: float = Field(
        description="its distance to the tasks proposed before it (0 a repeat, 1 nothing shared)"
    )
    flaky: str | None = Field(
        description="why its reward is not trusted (the Judge's determinism or ambiguity check "
        "failed; attempts with the same calls disagreed), else null"
    )
    objective: str = Field(description="the proposer objective (`learnability`, `r-zero`, ...)")
    level: int | None = Field(description="its difficulty level")
    family: str | None = Field(
        description="its task family (question, action, conditional, bulk), when its plan says"
    )
    domain: str | None = Field(description="its world's domain")


TABLES: Final[Mapping[str, type[Row]]] = {
    model.table: model
    for model in (
        WorldRow,
        TaskRow,
        VerdictRow,
        EpisodeRow,
        PredictionRow,
        UpdateRow,
        GenerationRow,
        UsageRow,
        EvalRow,
        TrajectoryRow,
        PolicyRow,
        IngestedRow,
        ProposalRow,
    )
}
"""Every table's row model, by table name."""


def _arrow_type(annotation: Any) -> tuple[pa.DataType, bool]:
    """The Arrow type of a field's annotation, and whether it may be null."""
    nullable = False
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable = len(members) < len(typing.get_args(annotation))
        (annotation,) = members
    if typing.get_origin(annotation) is list:
        (inner,) = typing.get_args(annotation)
        return pa.list_(_arrow_type(inner)[0]), nullable
    scalar = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
    return scalar[annotation], nullable


def _schema(model: type[Row]) -> pa.Schema:
    hints = typing.get_type_hints(model)
    return pa.schema([pa.field(name, _arrow_type(hints[name])[0]) for name in model.model_fields])


SCHEMAS: Final[Mapping[str, pa.Schema]] = {name: _schema(model) for name, model in TABLES.items()}
"""The Arrow schema of every table (``gen`` comes from the partition), derived from the row models."""


def markdown_table() -> str:
    """The documentation of every table and column, as Markdown (``docs/game-log.md`` holds it)."""
    lines = []
    for name, model in TABLES.items():
        hints = typing.get_type_hints(model)
        lines += [f"### `{name}`", "", model.about[0].upper() + model.about[1:] + ".", ""]
        lines += ["| column | type | meaning |", "|---|---|---|"]
        for column, info in model.model_fields.items():
            arrow, nullable = _arrow_type(hints[column])
            kind = f"{arrow}{' or null' if nullable else ''}"
            lines.append(f"| `{column}` | {kind} | {info.description} |")
        lines.append("| `gen` | int32 | the generation (from the partition) |")
        lines.append("")
    return "\n".join(lines)


@dataclass
class GenerationRecord:
    """One generation's rows of every table: what the loop fills and the log writes, then commits.

    A field per table, named after it (see :data:`TABLES`).
    """

    gen: int
    worlds: list[WorldRow] = field(default_factory=list)
    tasks: list[TaskRow] = field(default_factory=list)
    verdicts: list[VerdictRow] = field(default_factory=list)
    episodes: list[EpisodeRow] = field(default_factory=list)
    predictions: list[PredictionRow] = field(default_factory=list)
    updates: list[UpdateRow] = field(default_factory=list)
    generations: list[GenerationRow] = field(default_factory=list)
    usage: list[UsageRow] = field(default_factory=list)
    evals: list[EvalRow] = field(default_factory=list)
    trajectories: list[TrajectoryRow] = field(default_factory=list)
    policies: list[PolicyRow] = field(default_factory=list)
    ingested: list[IngestedRow] = field(default_factory=list)
    proposals: list[ProposalRow] = field(default_factory=list)

    def tables(self) -> Iterator[tuple[str, Sequence[Row]]]:
        """``(table, rows)`` for every table, in the order of :data:`TABLES`."""
        by_name = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "gen"}
        for name in TABLES:
            yield name, by_name[name]
