"""The warm start's data: what the Solver would have sampled, had it made the calls the Judge proved.

Every accepted task has a reference solution the Judge proved. Played
through the Solver's own dialogue code it is a supervised sequence: the
same system text, tool protocol, chat template and tokenizer, the tool
results the world returns, the loss mask on the assistant's tokens only.
:func:`replay` does exactly that: it runs :func:`coevo.agents.llm.solver.play`
(the Solver's episode loop, its :class:`~coevo.agents.llm.dialogue.Dialogue`,
the text protocol's parser, the wire format's readers) against
:class:`LocalServer`, an in-process stand-in for the two routes of vLLM's
API that token in, token out uses:

* ``POST /tokenize``: a conversation rendered by the model's own chat
  template (``apply_chat_template``, as vLLM renders it), or a text
  tokenized, with no special tokens added;
* ``POST /v1/completions``: instead of sampling, the next scripted
  completion: the call the reference solution makes next, written as the
  Solver writes calls (the text protocol: ``{"name": ..., "arguments":
  ...}</tool_call>`` after the ``<tool_call>`` the prompt opens with when a
  call is required), tokenized: the tokenizer's encoding of the call,
  which is the model's own wherever the model samples that encoding
  (byte-pair encoding allows others).

The episode that comes back is an ordinary Solver episode: its trajectory's
interleaved layout (:meth:`~coevo.arena.trajectory.Trajectory.interleaved`)
is the sequence and its loss mask, and its reward must be 1 (else the
reference did not survive the protocol, and the task is left out, counted).

The other source is what the Solver did sample: successful rollouts of any
logged run (rejection-sampling fine-tuning), as their trajectories recorded
them (:func:`logged_successes`).

Tasks of the eval suites and their worlds never enter the data
(:class:`HeldOut`): a run's eval tasks (``source = "eval"``, the ``evals``
table) and every database they are played in (:func:`database_id`: a world
narrowed to a few tools is the same database), and the tasks and databases
of any file given with ``--exclude``. Nothing read is executed or unpickled: tasks are
JSON validated by pydantic, the model's tokenizer is ``tokenizer.json``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, cast

from coevo.agents.llm.client import LLMClient
from coevo.agents.llm.solver import play
from coevo.agents.llm.text_tools import CALL_CLOSE, CALL_OPEN
from coevo.agents.llm.turns import Sampling
from coevo.arena.errors import ArenaError
from coevo.arena.gamelog import GameLog
from coevo.arena.gamelog.log import accepted_ids
from coevo.arena.records import load_records
from coevo.arena.spec import TaskSpec, ToolCall, WorldSpec
from coevo.arena.world import WorldPool
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DialogueSettings",
    "Example",
    "HeldOut",
    "LocalServer",
    "WarmStartData",
    "call_text",
    "logged_successes",
    "read_sources",
    "replay",
]

_CALL_SEED: Final = 0
"""The seed replayed episodes are played with (nothing is sampled)."""


class DialogueSettings(BaseModel):
    """How the Solver the warm start is for speaks to its model: the data must be what it would sample.

    Read from an experiment file's ``[solver].config`` (``--experiment``), or given.
    """

    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)

    tool_protocol: Literal["auto", "native", "text"] = Field(
        default="auto",
        description="the Solver's tool protocol (auto: text when the chat template has no tools section)",
    )
    tool_choice: Literal["auto", "required"] = Field(
        default="auto", description="required: each turn opens with the call's tag"
    )
    max_steps: int = Field(
        default=16, ge=1, le=10_000, description="the Solver's step budget (at most 10,000)"
    )
    max_tokens: int = Field(
        default=1024,
        ge=1,
        le=1 << 24,
        description="the Solver's output budget per turn (at most 16,777,216, beyond any context)",
    )
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of_solver(cls, config: dict[str, Any]) -> DialogueSettings:
        """The settings of an ``llm-solver``'s ``config`` table."""
        sampling = config.get("sampling") or {}
        extra = config.get("extra_body") or {}
        given = {
            k: v
            for k, v in config.items()
            if k in ("tool_protocol", "tool_choice", "max_steps", "max_tokens")
        }
        if isinstance(sampling, dict) and sampling.get("max_tokens"):
            given["max_tokens"] = sampling["max_tokens"]
        if isinstance(extra, dict) and isinstance(extra.get("chat_template_kwargs"), dict):
            given["chat_template_kwargs"] = extra["chat_template_kwargs"]
        return cls(**given)


def _describes_tools(tokenizer: Any, kwargs: dict[str, Any]) -> bool:
    hello = [{"role": "user", "content": "Hello"}]
    tool = {
        "type": "function",
        "function": {
            "name": "look_up_probe",
            "description": "Look a record up by its key.",
            "parameters": {"type": "object", "properties": {"key": {"type": "string"}}},
        },
    }
    plain = tokenizer.apply_chat_template(hello, tokenize=False, **kwargs)
    described = tokenizer.apply_chat_template(hello, tools=[tool], tokenize=False, **kwargs)
    return bool(plain != described)


def protocol_of(settings: DialogueSettings, tokenizer: Any) -> Literal["native", "text"]:
    """The protocol the Solver would speak to this model (``auto``: as its start-up probe decides)."""
    if settings.tool_protocol != "auto":
        return settings.tool_protocol
    return "native" if _describes_tools(tokenizer, settings.chat_template_kwargs) else "text"


def call_text(call: ToolCall, protocol: str, opened: bool) -> str:
    """How the Solver writes ``call`` in a completion: the text protocol's (or Hermes') JSON between the tags.

    Args:
        call: the call.
        protocol: ``text`` or ``native`` (a Hermes template: the JSON on a line of its own).
        opened: the prompt already ends with the opening tag (a call is required).
    """
    body = json.dumps({"name": call.tool, "arguments": call.arguments}, ensure_ascii=False)
    if protocol == "native":
        body = f"\n{body}\n"
    return f"{'' if opened else CALL_OPEN}{body}{CALL_CLOSE}"


class LocalServer:
    """The two routes of vLLM's API a token-in, token-out Solver uses, in this process (see the module docstring).

    Args:
        tokenizer: the model's tokenizer (``transformers``), with its chat template.
        model: the name the completions are signed with.
        script: the completions to give, in order.
    """

    base_url = "http://replay.local/v1"
    root = "http://replay.local"

    def __init__(self, tokenizer: Any, model: str, script: Sequence[str]):
        self.tokenizer = tokenizer
        self.model = model
        self.script = list(script)
        self.given = 0

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    async def post(self, url: str, body: dict[str, Any]) -> bytes:
        """Answer ``body`` sent to ``url`` as vLLM would (``/tokenize``, ``/v1/completions``)."""
        if url == f"{self.root}/tokenize":
            if "messages" in body:
                text = self.tokenizer.apply_chat_template(
                    body["messages"],
                    tools=body.get("tools"),
                    add_generation_prompt=body.get("add_generation_prompt", True),
                    tokenize=False,
                    **(body.get("chat_template_kwargs") or {}),
                )
            else:
                text = body["prompt"]
            return json.dumps({"tokens": self._encode(text)}).encode()
        if url == f"{self.base_url}/completions":
            if self.given >= len(self.script):
                raise ArenaError(
                    "the replay ran past its script: the Solver asked for another turn"
                )
            text = self.script[self.given]
            self.given += 1
            ids = self._encode(text)
            if len(ids) > body["max_tokens"]:
                ids, finish = ids[: body["max_tokens"]], "length"
                text = self.tokenizer.decode(ids)
            else:
                finish = "stop"
            choice = {
                "text": text,
                "token_ids": ids,
                "logprobs": {"token_logprobs": [0.0] * len(ids)},
                "finish_reason": finish,
                "prompt_token_ids": body["prompt"],
            }
            usage = {"prompt_tokens": len(body["prompt"]), "completion_tokens": len(ids)}
            return json.dumps({"model": self.model, "choices": [choice], "usage": usage}).encode()
        raise ArenaError(f"the replay serves no {url}")


class ReplayClient:
    """What :func:`~coevo.agents.llm.solver.play` asks of its client, answered by a :class:`LocalServer`."""

    provider = "openai"
    token_prompts = True
    openai_itself = False
    request_sampling = LLMClient.request_sampling
    recorded_sampling = LLMClient.recorded_sampling

    def __init__(
        self, server: LocalServer, settings: DialogueSettings, protocol: Literal["native", "text"]
    ):
        self.server = server
        self.model = server.model
        self.protocol = protocol
        self.max_tokens = settings.max_tokens
        self.sampling = Sampling(temperature=1.0, max_tokens=settings.max_tokens)
        self.extra_body: dict[str, Any] = (
            {"chat_template_kwargs": settings.chat_template_kwargs}
            if settings.chat_template_kwargs
            else {}
        )
        self.text_ids: dict[str, list[int]] = {}

    async def call(self, send: Any, *, role: str, task: str, model_call: bool = True) -> Any:
        """``send`` to the local server (no retries: nothing can fail but the script)."""
        del role, task, model_call
        return await send(self.server)

    def redact(self, text: str) -> str:
        """Nothing to hide: no key is involved."""
        return text


@dataclass(frozen=True)
class Example:
    """One warm-start sequence.

    Attributes:
        token_ids: every token, in order.
        mask: 1 for the tokens trained on (the assistant's), 0 for the rest.
        task_id: the task it plays.
        database: that task's world's database (:func:`database_id`).
        source: ``reference`` (a replayed solution) or ``rollout`` (a logged success).
    """

    token_ids: list[int]
    mask: list[int]
    task_id: str
    database: str
    source: str

    @property
    def positions(self) -> list[int]:
        """The indices trained on."""
        return [i for i, m in enumerate(self.mask) if m and i > 0]


def replay(
    task: TaskSpec,
    script: Sequence[str],
    tokenizer: Any,
    settings: DialogueSettings,
    *,
    model: str = "warm-start",
    worlds: WorldPool | None = None,
) -> Any:
    """The Solver's episode of ``task`` whose completions are ``script`` (an :class:`~coevo.arena.outcomes.Episode`)."""
    protocol = protocol_of(settings, tokenizer)
    client = ReplayClient(LocalServer(tokenizer, model, script), settings, protocol)
    return asyncio.run(
        play(
            cast(LLMClient, client),  # the part of a client play() uses (see ReplayClient)
            task,
            seed=_CALL_SEED,
            version=model,
            max_steps=settings.max_steps,
            worlds=worlds,
            tool_choice=settings.tool_choice,
        )
    )


def reference_script(task: TaskSpec, protocol: str, settings: DialogueSettings) -> list[str]:
    """The completions of ``task``'s reference solution, one call a turn, as the Solver writes them."""
    opened = protocol == "text" and settings.tool_choice == "required"
    return [call_text(call, protocol, opened) for call in task.solution]


def database_id(world: WorldSpec) -> str:
    """A world's database: its domain, clock, schema and rows, whatever tools it offers.

    A world narrowed to a few tools (``tool_subset``) is a record of its own,
    with an id of its own, over the same database: held out by database, a
    task in any narrowing of an eval world is held out too.
    """
    canonical = json.dumps(
        world.model_dump(mode="json", include={"domain", "now", "schema_sql", "data"}),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass
class HeldOut:
    """What never enters the warm start: eval tasks and every database they are played in.

    Attributes:
        tasks: task ids held out.
        databases: the databases (:func:`database_id`) of their worlds: every task in one
            is left out, whatever tools its world offers.
        said: where each came from, for the report.
    """

    tasks: set[str] = field(default_factory=set)
    databases: set[str] = field(default_factory=set)
    said: list[str] = field(default_factory=list)

    def add_log(self, log: GameLog, specs: dict[str, TaskSpec], where: str) -> None:
        """A run's eval tasks (``source = eval`` and the ``evals`` table) and their databases."""
        table = log.read("tasks", columns=["task_id", "source"]).to_pylist()
        evaluated = {r["task_id"] for r in table if r["source"] == "eval"}
        evaluated |= set(log.read("evals", columns=["task_id"]).column("task_id").to_pylist())
        self.add_tasks([specs[t] for t in sorted(evaluated) if t in specs], f"{where}'s eval suite")

    def add_tasks(self, tasks: Iterable[TaskSpec], where: str) -> None:
        """Tasks held out (an eval suite's), and their databases."""
        listed = list(tasks)
        databases = {database_id(t.world) for t in listed if isinstance(t.world, WorldSpec)}
        self.tasks |= {str(t.task_id) for t in listed}
        self.databases |= databases
        self.said.append(f"{where}: {len(listed)} tasks in {len(databases)} databases")

    def holds(self, task: TaskSpec) -> bool:
        """Whether ``task`` (or its world's database) is held out."""
        world = task.world
        return str(task.task_id) in self.tasks or (
            isinstance(world, WorldSpec) and database_id(world) in self.databases
        )


def _database_of(task: TaskSpec) -> str:
    return database_id(task.world) if isinstance(task.world, WorldSpec) else str(task.world)


def read_task_file(path: str) -> list[TaskSpec]:
    """The tasks of a ``.jsonl`` file (world records and tasks, as ``coevo synth --out`` writes them), worlds inline.

    Raises:
        RecordError: the file cannot be read, or a record is not one (its line named).
        ArenaError: it holds no task, or a task names a world the file does not hold.
    """
    tasks, worlds = load_records(path)
    if not tasks:
        raise ArenaError(f"{path} holds no task")
    out = []
    for task in tasks:
        if not isinstance(task.world, WorldSpec):
            world = worlds.get(str(task.world))
            if world is None:
                raise ArenaError(
                    f"{path}: task {task.task_id} names world {task.world}, not in the file"
                )
            task = task.model_copy(update={"world": world})
        out.append(task)
    return out


def read_sources(sources: Sequence[str], held: HeldOut) -> tuple[list[TaskSpec], list[str]]:
    """The accepted tasks of ``sources`` (run directories or task files), with each run's eval tasks added to ``held``.

    Returns:
        The tasks (sorted by id, each once, worlds inline), and the run directories among the sources.

    Raises:
        ArenaError: a source is neither a run directory nor a task file.
    """
    tasks: dict[str, TaskSpec] = {}
    runs: list[str] = []
    for source in sources:
        if Path(source).is_dir():
            log = GameLog(source)
            specs, _ = log.task_specs()
            held.add_log(log, specs, source)
            accepted = accepted_ids(log.read("verdicts", columns=["task_id", "accepted"]))
            for task_id, task in specs.items():
                if task_id in accepted:
                    tasks.setdefault(task_id, task)
            runs.append(source)
        elif Path(source).is_file():
            for task in read_task_file(source):
                tasks.setdefault(str(task.task_id), task)
        else:
            raise ArenaError(
                f"{source}: not a run directory or a task file (.jsonl); give the RUN_DIR a "
                "`coevo run` wrote, or a file `coevo synth --out` wrote"
            )
    return [tasks[k] for k in sorted(tasks)], runs


def logged_successes(run_dir: str, held: HeldOut) -> list[Example]:
    """The successful ``train`` rollouts of a run, as they were sampled (interleaved, with their loss masks)."""
    log = GameLog(run_dir)
    specs, _ = log.task_specs()
    rows = log.read(
        "trajectories",
        columns=["task_id", "purpose", "reward", "failure", "layout", "token_ids", "loss_mask"],
    ).to_pylist()
    out = []
    for row in rows:
        if row["purpose"] != "train" or row["reward"] != 1 or row["failure"] is not None:
            continue
        if row["layout"] != "interleaved" or not row["token_ids"] or not row["loss_mask"]:
            continue
        task = specs.get(row["task_id"])
        if task is None or held.holds(task):
            continue
        out.append(
            Example(
                list(row["token_ids"]),
                list(row["loss_mask"]),
                row["task_id"],
                _database_of(task),
                "rollout",
            )
        )
    return out


@dataclass
class WarmStartData:
    """The warm start's sequences, and what was left out and why.

    Attributes:
        examples: the sequences, in a fixed order (by task id, references first).
        held_out: the eval tasks left out, with the worlds they are in.
        held_out_tasks: tasks of the sources left out as eval tasks or in an eval world.
        failed: tasks whose replayed reference did not earn 1, by the first reason.
        too_long: tasks whose reference call does not fit the Solver's output budget.
    """

    examples: list[Example] = field(default_factory=list)
    held_out: HeldOut = field(default_factory=HeldOut)
    held_out_tasks: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    too_long: int = 0

    def digest(self) -> str:
        """A digest of the sequences (a checkpoint of another data set is not resumed)."""
        hashed = hashlib.sha256()
        for example in self.examples:
            hashed.update(json.dumps([example.token_ids, example.mask]).encode())
        return hashed.hexdigest()

    @classmethod
    def build(
        cls,
        sources: Sequence[str],
        tokenizer: Any,
        settings: DialogueSettings,
        *,
        exclude: Sequence[str] = (),
        rollouts: bool = False,
        limit: int | None = None,
    ) -> WarmStartData:
        """The sequences of ``sources``' accepted tasks (and, with ``rollouts``, their runs' successes).

        Args:
            sources: run directories and task files.
            tokenizer: the model's tokenizer.
            settings: how the Solver speaks.
            exclude: task files whose tasks and worlds are held out (an eval suite).
            rollouts: add each run's successful rollouts as sampled.
            limit: at most this many reference tasks (the first by id).

        Raises:
            ArenaError: a source or an excluded file cannot be read.
        """
        data = cls()
        for path in exclude:
            data.held_out.add_tasks(read_task_file(path), path)
        tasks, runs = read_sources(sources, data.held_out)
        protocol = protocol_of(settings, tokenizer)
        worlds = WorldPool()
        taken = 0
        for task in tasks:
            if data.held_out.holds(task):
                data.held_out_tasks += 1
                continue
            if limit is not None and taken >= limit:
                break
            episode = replay(
                task, reference_script(task, protocol, settings), tokenizer, settings, worlds=worlds
            )
            trajectory = episode.trajectory
            turns = trajectory.turns if trajectory is not None else []
            if any(t.finish == "length" for t in turns):
                data.too_long += 1
                continue
            laid = trajectory.interleaved()[0] if trajectory is not None else None
            if not episode.success or laid is None:
                key = episode.reward.reason.split(":")[0][:80]
                data.failed[key] = data.failed.get(key, 0) + 1
                continue
            data.examples.append(
                Example(
                    laid.token_ids,
                    laid.loss_mask,
                    str(task.task_id),
                    _database_of(task),
                    "reference",
                )
            )
            taken += 1
        if rollouts:
            for run in runs:
                data.examples += logged_successes(run, data.held_out)
        trained = {e.task_id for e in data.examples}
        for task in tasks:  # the promise, checked: no eval task or database is in the data
            if str(task.task_id) in trained and data.held_out.holds(task):
                raise ArenaError(
                    f"internal error: the held-out task {task.task_id} reached the warm start"
                )
        return data
