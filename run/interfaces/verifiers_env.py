"""coevo's tasks as a ``verifiers`` environment, so prime-rl (or any verifiers consumer) trains on them.

verifiers (0.4, ``verifiers.v1``) builds an environment from a taskset, a
harness and an env class, which it imports by a plugin id; coevo's are
exported by the package ``coevo_verifiers``, whose id is ``coevo-verifiers``
(``vf-eval coevo-verifiers ...``):

* :class:`CoevoTaskset`: the tasks of a *source* (a run directory, a
  snapshot of its live pool taken when the tasks are listed; an export; a
  file of records; see :mod:`~coevo.run.interfaces.sources`), each a
  :class:`CoevoTask` whose data is the whole ``coevo.task/1`` record
  with its world inline, so a rollout needs nothing but its task (verifiers'
  env servers never read the source);
* :class:`CoevoHarness`: the agent's program, run in-process. It plays an
  episode as coevo's own LLM Solver does (``coevo.agents.llm.solver``): the
  system text and the instruction, the world's tools and ``submit`` as
  function tools; every call the model makes is made in a coevo
  :class:`~coevo.arena.world.World` and answered with a ``tool`` message;
  arguments that are not a JSON object are a refused step; a turn with no
  call gets a reminder (at most ``nudges``); the model is asked for another
  turn only while the calls made and the reminders sent are fewer than
  ``max_steps``, and the calls of a turn are made until ``max_steps`` calls
  in all; the episode ends at ``submit``, at that budget, or when the model
  stops (a turn with no call after ``nudges`` reminders). Every
  model call goes through verifiers' interception endpoint, so the trace
  (and in training, its tokens) is verifiers' own;
* :class:`CoevoEnv`: one agent per episode; the reward is coevo's verifier
  (:meth:`CoevoTask.coevo`): the tool calls of the trace's model turns,
  replayed in a fresh world, then verified. With ``inbox`` (a run
  directory), each scored rollout is written to the run's inbox
  (:mod:`coevo.arena.gamelog.inbox`) in batches; the loop ingests them, so
  the episodes reach the game log, the curriculum and the World model.

:func:`load_environment` is the Python entry point; :func:`environment_config`
gives the config verifiers' own entry points take (``vf-eval``, prime-rl).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Final, cast

import openai
from coevo.agents.llm.turns import ERROR_PREFIX, parse_arguments
from coevo.arena.difficulty import task_level
from coevo.arena.errors import CoevoError, LogError
from coevo.arena.gamelog import RunDir
from coevo.arena.gamelog.inbox import InboxRollout, batch_part_id, write_part
from coevo.arena.limits import DEFAULT_LIMITS
from coevo.arena.outcomes import Episode, Observation
from coevo.arena.rendering import SYSTEM, openai_tools, tool_definitions
from coevo.arena.spec import TaskSpec, ToolCall, WorldSpec
from coevo.arena.world import World, WorldPool
from coevo.run.interfaces.sources import accepted_tasks
from pydantic import Field

try:
    import verifiers.v1 as vf
    from verifiers.v1.runtimes import ProgramResult
except ImportError as exc:  # the optional extra
    raise ImportError(
        f"coevo's verifiers environment needs verifiers 0.4 ({exc}); install it with "
        "pip install 'coevo[verifiers]'"
    ) from exc

__all__ = [
    "PLUGIN_ID",
    "REWARD",
    "SOURCE",
    "CoevoEnv",
    "CoevoEnvConfig",
    "CoevoHarness",
    "CoevoState",
    "CoevoTask",
    "CoevoTaskData",
    "CoevoTaskset",
    "CoevoTasksetConfig",
    "environment_config",
    "inbox_row",
    "load_environment",
    "make_call",
    "replay",
    "trace_calls",
]

PLUGIN_ID: Final = "coevo-verifiers"
"""coevo's plugin id in verifiers: the taskset, the harness and the env (the package ``coevo_verifiers``)."""

SOURCE: Final = "verifiers"
"""The ``source`` of the inbox rows this environment writes."""

REWARD: Final = "coevo"
"""The name of coevo's reward on a trace (``trace.rewards["coevo"]``)."""

_log = logging.getLogger(__name__)

_WORLDS: Final = WorldPool(keep=64)
"""Built worlds for this process's rollouts and replays, each world validated once and then cloned."""


# --------------------------------------------------------------------------- playing and replaying


@lru_cache(maxsize=256)
def _task_of(record: str) -> TaskSpec:
    """The task of a rollout's data (its record, world inline), parsed once per record."""
    return TaskSpec.model_validate_json(record)


def make_call(world: World, name: str, written: str | None) -> tuple[ToolCall, Observation]:
    """One tool call as the model wrote it, made in ``world`` as coevo's LLM Solver makes it.

    Arguments that are not a JSON object are a refused step (the call keeps
    the text as ``{"$raw": ...}``); the rest is the world's to judge.
    """
    arguments, error = parse_arguments(written)
    if arguments is None:
        call = ToolCall(name, {"$raw": written or ""})
        refusal = f"{error}; call {name} again with a JSON object of its parameters"
        return call, world.refuse(call, refusal)
    call = ToolCall(name, arguments)
    return call, world.step(call)


def replay(
    task: TaskSpec,
    written: Sequence[tuple[str, str | None]],
    max_steps: int,
    unfinished: str = "the model stopped calling tools without submit",
) -> Episode:
    """The episode of the calls a model wrote (name, arguments text), replayed in a fresh world and verified.

    The calls are made until the episode ends (``submit``, or ``max_steps``);
    the reward is coevo's verifier on the final state (0, with ``unfinished``
    as the reason, when the calls end before ``submit``).
    """
    assert isinstance(task.world, WorldSpec)
    world = _WORLDS.take(task.world)
    try:
        world.reset(task, max_steps=max_steps)
        made: list[ToolCall] = []
        seen: list[Observation] = []
        for name, arguments in written:
            if world.done:
                break
            call, observation = make_call(world, name, arguments)
            made.append(call)
            seen.append(observation)
        return world.episode(made, seen, unfinished=unfinished)
    finally:
        _WORLDS.give_back(world)


def trace_calls(trace: vf.Trace) -> list[tuple[str, str | None]]:
    """The function calls of a trace's model turns, in order: (name, arguments as written)."""
    return [
        (call.name, call.arguments)
        for message in trace.assistant_messages
        for call in message.tool_calls or []
        if call.type == "function"
    ]


def _sent(message: dict[str, Any]) -> dict[str, Any]:
    """A message as it goes back to the server: arguments that are no JSON object become ``{}``.

    Servers parse the calls of earlier turns and refuse a request whose
    arguments do not parse; the tool error the model saw says what was wrong.
    """
    calls = message.get("tool_calls")
    if message["role"] != "assistant" or not calls:
        return message
    fixed = []
    for call in calls:
        arguments, _ = parse_arguments(call["function"]["arguments"])
        if arguments is None:
            call = {**call, "function": {**call["function"], "arguments": "{}"}}
        fixed.append(call)
    return {**message, "tool_calls": fixed}


def _reminder(finish: str | None) -> str:
    if finish == "length":
        return (
            f"{ERROR_PREFIX}your answer was cut off at the output limit before it called a tool; "
            "answer with one tool call"
        )
    return (
        f"{ERROR_PREFIX}answer with a tool call: use the tools to carry out the request, "
        "and call submit when it is done"
    )


# --------------------------------------------------------------------------- the verifiers plugin


class CoevoTaskData(vf.TaskData):
    """One coevo task as verifiers carries it: the record (world inline) and how an episode of it is played."""

    task: str = Field(description="the whole coevo.task/1 record, its world inline, as JSON")
    world_id: str = Field(description="its world's id")
    domain: str = Field(description="its world's domain")
    level: int | None = Field(default=None, description="its difficulty level (1–5)")
    max_steps: int = Field(default=16, ge=1, description="tool calls per episode, submit included")
    nudges: int = Field(default=2, ge=0, description="reminders after a turn with no tool call")


class CoevoState(vf.State):
    """What the harness leaves for the inbox: the whole conversation (tool results after the last turn too)."""

    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    calls: list[dict[str, Any]] = Field(default_factory=list)


class CoevoTask(vf.Task[CoevoTaskData, CoevoState]):
    """A coevo task; its reward is coevo's verifier on the trace's calls."""

    @property
    def key(self) -> str:
        """The task's content id (``sha256:...``): durable across runs and sources."""
        return self.data.id or self.hash

    @property
    def spec(self) -> TaskSpec:
        """The coevo task, its world inline."""
        return _task_of(self.data.task)

    @vf.reward
    async def coevo(self, trace: vf.Trace) -> float:
        """Coevo's verifier: the trace's calls replayed in a fresh world, the final state checked (0 or 1)."""
        written = trace_calls(trace)
        data = self.data
        idle = sum(
            not any(c.type == "function" for c in m.tool_calls or [])
            for m in trace.assistant_messages
        )  # turns with no call: each reminded one counted against the budget, as the harness did
        unfinished = (
            f"the step budget of {data.max_steps} ran out before submit"
            if len(written) + min(idle, data.nudges) >= data.max_steps
            else "the model stopped calling tools without submit"
        )
        episode = replay(self.spec, written, data.max_steps, unfinished)
        state = cast(CoevoState, trace.state)
        state.calls = [{"tool": c.tool, "arguments": c.arguments} for c in episode.calls]
        trace.info["coevo"] = {
            "task_id": episode.task_id,
            "steps": len(episode.calls),
            "truncated": episode.truncated,
            "reason": episode.reward.reason,
        }
        return float(episode.reward.value)


class CoevoTasksetConfig(vf.TasksetConfig):
    """Which tasks (``--env.taskset.*``) and how an episode of one is played."""

    source: str = Field(
        default="",
        description="a run directory (a snapshot of its live pool), an export, or a file of task records",
    )
    levels: list[int] | None = Field(default=None, description="only these levels")
    domains: list[str] | None = Field(default=None, description="only worlds of these domains")
    limit: int | None = Field(default=None, ge=1, description="at most this many tasks")
    seed: int | None = Field(
        default=0,
        description="the order: shuffled by this seed, so `limit` samples every generation and domain (None: the source's order)",
    )
    max_steps: int = Field(default=16, ge=1, description="tool calls per episode, submit included")
    nudges: int = Field(default=2, ge=0, description="reminders after a turn with no tool call")


def _task_data(task: TaskSpec, config: CoevoTasksetConfig) -> CoevoTaskData:
    assert isinstance(task.world, WorldSpec)
    level = task_level(task)
    return CoevoTaskData(
        id=task.task_id,
        name=task.world.domain if level is None else f"{task.world.domain} level {level}",
        prompt=task.instruction,
        system_prompt=SYSTEM,
        task=task.model_dump_json(),
        world_id=task.world_id,
        domain=task.world.domain,
        level=level,
        max_steps=config.max_steps,
        nudges=config.nudges,
    )


class CoevoTaskset(vf.Taskset[CoevoTask, CoevoTasksetConfig]):
    """The accepted tasks of ``source``, read when the tasks are listed (a run directory: a snapshot of its live pool)."""

    def load(self) -> list[CoevoTask]:
        """The tasks, filtered, ordered by ``seed`` and cut at ``limit``.

        A run directory's pool is read here, as committed now: ``vf-eval``
        lists the tasks once, at its start, and a trainer when it loads the
        environment, so what they play is a snapshot (tasks the curriculum no
        longer picks included, tasks accepted later not).

        Raises:
            CoevoError: the source cannot be read or holds no task that passes the filters.
        """
        config = self.config
        if not config.source:
            raise CoevoError(
                f"the {PLUGIN_ID} taskset needs a source: --env.taskset.source RUN_DIR (a run "
                "directory, its live pool), an export or a file of task records"
            )
        tasks = accepted_tasks(config.source, levels=config.levels, domains=config.domains)
        if config.seed is not None:
            random.Random(config.seed).shuffle(tasks)
        if config.limit is not None:
            tasks = tasks[: config.limit]
        return [CoevoTask(_task_data(task, config), config.task) for task in tasks]


class CoevoHarness(vf.Harness[vf.HarnessConfig]):
    """coevo's agent loop, in-process: the model behind verifiers' endpoint plays one task in a coevo world."""

    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False  # the model calls the world's SQL tools only, never code on this machine
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
    ) -> ProgramResult:
        """Play one episode (see the module docstring); every model call goes to ``endpoint``.

        A turn the interception refuses (a verifiers limit such as
        ``max_turns`` or a ``@stop``) ends the episode; any other failed call
        fails the rollout (verifiers records why), and it is not sent to the inbox.
        """
        if not isinstance(data, CoevoTaskData):
            raise TypeError(
                f"the {PLUGIN_ID} harness plays coevo tasks, not {type(data).__name__}: "
                f"use it with the {PLUGIN_ID} taskset"
            )
        task = _task_of(data.task)
        assert isinstance(task.world, WorldSpec)
        system, instruction = self.resolve_text_prompt(data)
        tools = openai_tools(tool_definitions(task.world))
        messages: list[dict[str, Any]] = [
            *([{"role": "system", "content": system}] if system else []),
            {"role": "user", "content": instruction},
        ]
        state = cast(CoevoState, trace.state)
        state.tools = tools
        state.messages = messages
        world = _WORLDS.take(task.world)
        try:
            world.reset(task, max_steps=data.max_steps)
            async with openai.AsyncOpenAI(base_url=endpoint, api_key=secret) as client:
                await _play(client, ctx.model, world, messages, tools, data, trace)
        finally:
            _WORLDS.give_back(world)
        return ProgramResult(exit_code=0, stdout="", stderr="")


async def _play(
    client: openai.AsyncOpenAI,
    model: str,
    world: World,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    data: CoevoTaskData,
    trace: vf.Trace,
) -> None:
    """The episode's turns, appended to ``messages`` (the loop of ``coevo.agents.llm.solver``)."""
    made = reminded = 0
    while not world.done and made + reminded < data.max_steps:
        try:
            completion = await client.chat.completions.create(
                model=model,
                messages=cast(Any, [_sent(m) for m in messages]),  # Chat Completions JSON, as sent
                tools=cast(Any, tools),
            )
        except openai.APIStatusError:
            if trace.stop_condition is not None:
                return  # verifiers refused the turn (a limit or a @stop): the episode ends here
            raise
        choice = completion.choices[0]
        calls = [c for c in choice.message.tool_calls or [] if c.type == "function"]
        said: dict[str, Any] = {"role": "assistant", "content": choice.message.content}
        if calls:
            said["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in calls
            ]
        elif said["content"] is None:
            said["content"] = ""  # a turn with neither text nor calls says so in an empty text
        messages.append(said)
        if not calls:
            if reminded == data.nudges:
                return
            reminded += 1
            messages.append({"role": "user", "content": _reminder(choice.finish_reason)})
            continue
        for c in calls:
            if world.done:
                break  # after submit, or the step budget: the rest are not made
            _, observation = make_call(world, c.function.name, c.function.arguments)
            made += 1
            messages.append({"role": "tool", "tool_call_id": c.id, "content": observation.text()})


def _turn_tokens(
    trace: vf.Trace,
) -> tuple[list[list[int]], list[list[int]], list[list[float]] | None] | None:
    """Each model turn's prompt ids, completion ids and log-probs from the trace's graph (None: it has no tokens)."""
    prompts, completions, logprobs = [], [], []
    scored = True
    for node in trace.nodes:
        if not node.sampled:
            continue
        if not node.token_ids:
            return None
        before: list[int] = []
        parent = node.parent
        while parent is not None:
            before[:0] = trace.nodes[parent].token_ids
            parent = trace.nodes[parent].parent
        prompts.append(
            before + [t for t, m in zip(node.token_ids, node.mask, strict=False) if not m]
        )
        completions.append([t for t, m in zip(node.token_ids, node.mask, strict=False) if m])
        logprobs.append(list(node.logprobs))
        scored = scored and len(node.logprobs) == len(completions[-1])
    if not completions:
        return None
    return prompts, completions, logprobs if scored else None


def inbox_row(trace: vf.Trace, rollout: int = 0) -> InboxRollout:
    """The inbox row of a scored rollout of a :class:`CoevoTask` (``rollout``: its index in the part).

    Raises:
        ValueError: the trace was not scored by coevo's verifier.
    """
    scored = trace.rewards.get(REWARD)
    if scored is None:
        raise ValueError(f"trace {trace.id} has no {REWARD!r} reward: it was not scored")
    state = cast(CoevoState, trace.state)
    tokens = _turn_tokens(trace)
    model = trace.agent.config.model if trace.agent is not None else None
    return InboxRollout(
        rollout=rollout,
        task_id=str(trace.task.data.id),
        calls=json.dumps(state.calls, ensure_ascii=False),
        reward=float(scored.score),
        messages=json.dumps(state.messages, ensure_ascii=False) if state.messages else None,
        tools=json.dumps(state.tools, ensure_ascii=False) if state.tools else None,
        policy_version=model,
        model=model,
        source=SOURCE,
        rollout_id=trace.id,
        turn_prompt_ids=tokens[0] if tokens else None,
        turn_completion_ids=tokens[1] if tokens else None,
        turn_logprobs=tokens[2] if tokens else None,
    )


class _InboxBatch:
    """Scored rollouts waiting for the inbox, written as one part per batch.

    A batch is sealed, and written, when it holds ``size`` rollouts, when its
    first is ``seconds`` old as another comes in, and when the environment
    stops. Sealing fixes its rows and its part id
    (:func:`~coevo.arena.gamelog.inbox.batch_part_id`); rollouts that come in
    later go to the next batch. A write that fails keeps the sealed batch,
    rows and id unchanged, and tries it again before the next batch is
    written (a warning): if the failed write did land (a put whose answer was
    lost), the retry replaces that same part, so no rollout is ingested twice.
    What cannot be written when the environment stops is an error.
    """

    def __init__(self, run: str, size: int, seconds: float):
        self.run = RunDir(run)
        self.size = size
        self.seconds = seconds
        self._rows: list[InboxRollout] = []  # the open batch
        self._started: datetime | None = None
        self._clock = 0.0
        self._sealed: list[tuple[str, list[InboxRollout]]] = []  # (part id, rows), not yet written
        self._lock = asyncio.Lock()
        self.parts: list[str] = []

    async def add(self, rows: Sequence[InboxRollout]) -> None:
        """Queue scored rollouts; write the batch when it is full or old."""
        if not rows:
            return
        if self._started is None:
            self._started, self._clock = datetime.now(UTC), time.monotonic()
        self._rows.extend(rows)
        if self._due():
            await self.flush(final=False)

    def _due(self) -> bool:
        return bool(self._rows) and (
            len(self._rows) >= self.size or time.monotonic() - self._clock >= self.seconds
        )

    def _seal(self) -> None:
        """The open batch becomes a part to write: its rows numbered, its id fixed."""
        assert self._started is not None
        rows = [row.model_copy(update={"rollout": n}) for n, row in enumerate(self._rows)]
        part_id = batch_part_id(SOURCE, [str(r.rollout_id) for r in rows], self._started)
        self._sealed.append((part_id, rows))
        self._rows, self._started = [], None

    async def flush(self, *, final: bool) -> None:
        """Write the sealed batches, in order, after sealing the open one if it is due (``final``: in any case).

        Raises:
            LogError: with ``final``, a batch could not be written (its rollouts would be lost).
        """
        async with self._lock:
            # due is checked again: a flush that held the lock before may have sealed the batch
            if self._rows and (final or self._due()):
                self._seal()
            failed: list[tuple[str, list[InboxRollout]]] = []
            error: Exception | None = None
            for part_id, rows in self._sealed:
                if failed and not final:  # the store is failing: the rest wait for the next write
                    failed.append((part_id, rows))
                    continue
                try:
                    self.parts.append(await asyncio.to_thread(write_part, self.run, part_id, rows))
                except Exception as exc:
                    failed.append((part_id, rows))
                    error = exc
                    _log.warning(
                        "inbox part %s: %d rollout(s) could not be written to %s/inbox "
                        "(%s: %s); kept, with its id, for the next write",
                        part_id,
                        len(rows),
                        self.run.uri,
                        type(exc).__name__,
                        exc,
                    )
            self._sealed = failed
            if final and failed:
                lost = sum(len(rows) for _, rows in failed)
                raise LogError(
                    f"{lost} rollout(s) could not be written to {self.run.uri}/inbox (parts "
                    f"{', '.join(part_id for part_id, _ in failed)}); they are lost: check that "
                    "the run directory is writable"
                ) from error


class CoevoEnvConfig(vf.EnvConfig):
    """coevo's environment (``--env.*``): one agent, and where its rollouts go back to."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The one seat; its harness runs in-process (the runtime only hosts verifiers' bookkeeping)."""
    inbox: str | None = Field(
        default=None,
        description="the run directory whose inbox receives the scored rollouts (None: none is written)",
    )
    inbox_batch: int = Field(default=64, ge=1, description="rollouts per inbox part")
    inbox_seconds: float = Field(
        default=60.0, gt=0, description="a batch older than this is written with the next rollout"
    )


class CoevoEnv(vf.Env[CoevoEnvConfig]):
    """One agent plays each task; with ``inbox``, the scored rollouts go back to the run.

    Raises:
        CoevoError: ``inbox`` is not a run directory, or ``max_steps`` is above
            what the run ingests (a world's default step budget).
    """

    def __init__(self, config: CoevoEnvConfig) -> None:
        super().__init__(config)
        self.inbox: _InboxBatch | None = None
        if config.inbox is not None:
            run = RunDir(config.inbox)
            if not run.exists("experiment.json"):
                raise CoevoError(
                    f"inbox: {run.no_run(config.inbox)}; the inbox is the run directory of the "
                    "coevo run that should learn from these rollouts"
                )
            steps = self.taskset.config.max_steps if isinstance(self.taskset, CoevoTaskset) else 0
            if steps > DEFAULT_LIMITS.max_steps:
                raise CoevoError(
                    f"max_steps is {steps}, but the run ingests rollouts of at most "
                    f"{DEFAULT_LIMITS.max_steps} calls (a world's step budget) and would reject "
                    f"longer ones: set max_steps to {DEFAULT_LIMITS.max_steps} or less, or play "
                    "without an inbox"
                )
            self.inbox = _InboxBatch(config.inbox, config.inbox_batch, config.inbox_seconds)

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        """One rollout of ``task`` by the one agent."""
        await agents.agent.run(task)

    async def finalize(self, task: vf.Task, episode: vf.Episode) -> None:
        """Queue the episode's scored rollouts for the inbox (failed rollouts are not sent)."""
        if self.inbox is None:
            return
        scored = [t for t in episode.traces if t.ok and t.rewards.get(REWARD) is not None]
        await self.inbox.add([inbox_row(trace) for trace in scored])

    async def stop(self) -> None:
        """Write what is still queued for the inbox."""
        if self.inbox is not None:
            await self.inbox.flush(final=True)


# --------------------------------------------------------------------------- entry points


def environment_config(
    source: str,
    *,
    inbox: str | None = None,
    max_steps: int = 16,
    nudges: int = 2,
    levels: Sequence[int] | None = None,
    domains: Sequence[str] | None = None,
    limit: int | None = None,
    seed: int | None = 0,
    inbox_batch: int = 64,
    inbox_seconds: float = 60.0,
) -> CoevoEnvConfig:
    """The config of coevo's environment, as verifiers' entry points take it (``EvalConfig(env=...)``).

    Arguments as :func:`load_environment`'s.
    """
    return CoevoEnvConfig(
        taskset=CoevoTasksetConfig(
            id=PLUGIN_ID,
            source=source,
            levels=None if levels is None else list(levels),
            domains=None if domains is None else list(domains),
            limit=limit,
            seed=seed,
            max_steps=max_steps,
            nudges=nudges,
        ),
        inbox=inbox,
        inbox_batch=inbox_batch,
        inbox_seconds=inbox_seconds,
    )


def load_environment(
    source: str,
    *,
    inbox: str | None = None,
    max_steps: int = 16,
    nudges: int = 2,
    levels: Sequence[int] | None = None,
    domains: Sequence[str] | None = None,
    limit: int | None = None,
    seed: int | None = 0,
    inbox_batch: int = 64,
    inbox_seconds: float = 60.0,
) -> CoevoEnv:
    """Coevo's tasks as a verifiers multi-turn tool environment.

    Args:
        source: a run directory (a snapshot of its live pool: the accepted, non-eval tasks
            of the generations committed when the tasks are listed), an export, or a file
            of task records.
        inbox: a run directory: its inbox receives every scored rollout (None: none is written).
        max_steps: tool calls per episode, ``submit`` included; the model gets another
            turn only while the calls made plus the reminders sent are fewer. With
            ``inbox``, at most a world's default step budget (40): the run ingests no
            longer rollout.
        nudges: reminders to call a tool after a turn with none, per episode.
        levels: only tasks of these levels.
        domains: only tasks whose world is of these domains.
        limit: at most this many tasks.
        seed: the tasks' order is shuffled by it (None: the source's order).
        inbox_batch: rollouts per inbox part.
        inbox_seconds: a batch older than this is written with the next rollout.

    Raises:
        CoevoError: ``inbox`` is not a run directory, or ``max_steps`` is above the
            run's ingestion budget with ``inbox``.
        ModuleNotFoundError: the plugin package ``coevo_verifiers`` is not installed
            (install coevo with ``pip install 'coevo[verifiers]'``).
    """
    config = environment_config(
        source,
        inbox=inbox,
        max_steps=max_steps,
        nudges=nudges,
        levels=levels,
        domains=domains,
        limit=limit,
        seed=seed,
        inbox_batch=inbox_batch,
        inbox_seconds=inbox_seconds,
    )
    return cast(CoevoEnv, vf.load_environment(config))
