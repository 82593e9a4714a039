"""The loop's side of the inbox: rollouts an external trainer drove, replayed, verified and logged, each part once.

At the start of each generation the loop takes the parts of
``RUN_DIR/inbox`` (:mod:`coevo.arena.gamelog.inbox`) that no committed
generation ingested, in name order. For each rollout it replays the calls in
a fresh copy of the task's world and scores them with coevo's own verifier:
the producer's ``reward`` is only compared (a disagreement is counted), never
trusted. The episodes go into the generation's ``episodes`` (purpose
``external``) and ``trajectories`` tables, and to the World model and the
curriculum with the Solver's own; the ``ingested`` table has a row per part.

Exactly once: a part is ingested in the generation whose commit records it
(its ``ingested`` row). A driver killed before that commit ingests it again on
resume, in the replayed generation, and never twice: the parts already
ingested are read from the committed log when the run starts.

Once per rollout too: the same rollout under a second part name (a part
copied, a producer that wrote a batch twice under two names) is not logged
again. A rollout is known by its producer's ``rollout_id`` when it has one,
else by its whole content (every column but its index in the part); its
episode id is derived from that, so it is the same whichever part brings
it, and a rollout whose episode is in the committed log, or was taken from
an earlier part, is rejected as a duplicate. Rows of one part are never
duplicates of one another (a trainer may play the same calls twice).

What a part cannot give is counted, never fatal: a part that cannot be read
or is refused (a link, a device, too big on disk, decompressed or decoded:
its ``error``), a rollout of a task the run does not know, whose world
cannot be built, or that was ingested before (``rejected``). Each counts as
a failure of the generation.

A part that kills the reader is set aside too: while a part is read,
:data:`READING` names it, and it is removed once the read ends, whatever the
outcome. A driver killed meanwhile (out of memory, by a part the size checks
let through) leaves it behind, and the next run records that part's ``error``
without reading it again, so ``coevo resume`` goes on.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from coevo.arena.errors import LogError
from coevo.arena.gamelog import GameLog, IngestedRow, accepted_ids
from coevo.arena.gamelog.inbox import INBOX, InboxRollout, list_parts, read_part
from coevo.arena.ids import episode_id
from coevo.arena.limits import Limits
from coevo.arena.outcomes import Episode, Observation
from coevo.arena.spec import TaskSpec, ToolCall, WorldSpec
from coevo.arena.trajectory import Trajectory, TurnTokens
from coevo.arena.world import WorldPool

__all__ = ["MAX_CALLS", "READING", "Inbox", "Ingested", "known_tasks"]

MAX_CALLS: Final = Limits().max_steps
"""Calls an ingested rollout may make at most, ``submit`` included: a world's step budget."""

READING: Final = f"{INBOX}/_reading"
"""The file that names the part being read (in the inbox, where readers of parts ignore it)."""


@dataclass
class Ingested:
    """What one generation took from the inbox."""

    episodes: list[Episode] = field(default_factory=list)
    rows: list[IngestedRow] = field(default_factory=list)

    @property
    def failures(self) -> int:
        """Rollouts rejected and parts that could not be read."""
        return sum(r.rejected + (r.error is not None) for r in self.rows)


class Inbox:
    """Ingests a run's inbox, a generation at a time.

    Args:
        log: the run's game log (its run directory holds the inbox).
        events: ``events(name, **fields)``.
    """

    def __init__(self, log: GameLog, events: Callable[..., None] | None = None):
        self.log = log
        self.events = events or (lambda event, **kw: None)
        self.done: set[str] = set(log.read("ingested", columns=["part_id"]).column(0).to_pylist())
        self.worlds = WorldPool(keep=16)
        self._logged: set[str] | None = None  # the external episodes' ids, read on the first part
        self.interrupted = self._interrupted()  # set aside unread when its turn comes

    def _interrupted(self) -> str | None:
        """The part the last run was reading when it was killed, if any (:data:`READING`)."""
        if not self.log.run.exists(READING):
            return None
        try:
            return self.log.run.read_bytes(READING, limit=1024).decode()
        except (OSError, UnicodeDecodeError):  # not what the loop writes: no part to set aside
            return None

    def _seen(self) -> set[str]:
        """The ids of the external episodes logged (committed, and taken since), read once."""
        if self._logged is None:
            episodes = self.log.read("episodes", columns=["episode_id", "purpose"])
            self._logged = {
                e
                for e, purpose in zip(
                    episodes.column("episode_id").to_pylist(),
                    episodes.column("purpose").to_pylist(),
                    strict=True,
                )
                if purpose == "external"
            }
        return self._logged

    def take(self, gen: int, tasks: Callable[[str], TaskSpec | None]) -> Ingested:
        """Ingest every part not ingested yet (it is marked ingested at once: the caller commits it with ``gen``).

        Args:
            gen: the generation that logs them.
            tasks: a task by id, with its world inline (None: the run does not know it).
        """
        out = Ingested()
        for part in list_parts(self.log.run):
            if part in self.done:
                continue
            try:
                rollouts = self._read(part)
            except OSError as exc:  # the disk or the store, not the part: looked at again next time
                self.events("inbox_part_unreachable", gen=gen, part=part, error=str(exc))
                continue
            except LogError as exc:  # the part itself: recorded, and never read again
                self.done.add(part)
                out.rows.append(_row(part, "", 0, 0, 0, 0, str(exc)))
                self.events("inbox_part_unreadable", gen=gen, part=part, error=str(exc))
                continue
            self.done.add(part)
            episodes, rejected, disagreed = self._replay(gen, part, rollouts, tasks)
            out.episodes += episodes
            source = rollouts[0].source if rollouts else ""
            out.rows.append(
                _row(part, source, len(rollouts), len(episodes), rejected, disagreed, None)
            )
            self.events(
                "inbox_ingested",
                gen=gen,
                part=part,
                rollouts=len(rollouts),
                episodes=len(episodes),
                rejected=rejected,
                disagreed=disagreed,
            )
        return out

    def _read(self, part: str) -> list[InboxRollout]:
        """A part's rollouts, read with :data:`READING` naming it (not read: the part the last run was killed reading).

        Raises:
            LogError: the part is refused or malformed, or the last run was killed reading it.
            OSError: the run directory cannot be reached.
        """
        if part == self.interrupted:
            raise LogError(
                f"inbox part {part!r}: the last run was killed while reading it (out of memory, "
                "most likely: see 'Size limits' in docs/security.md), so it is set aside unread; "
                f"if something else killed it, move {INBOX}/{part}.parquet to another part id to "
                "have it read"
            )
        self.log.run.write_bytes(part.encode(), READING)
        try:
            return read_part(self.log.run, part)
        finally:
            self.log.run.delete(READING)

    def _replay(
        self,
        gen: int,
        part: str,
        rollouts: list[InboxRollout],
        tasks: Callable[[str], TaskSpec | None],
    ) -> tuple[list[Episode], int, int]:
        episodes: list[Episode] = []
        rejected = disagreed = 0
        seen = self._seen()
        ids = _episode_ids(rollouts)
        for rollout, ep_id in zip(rollouts, ids, strict=True):
            task = tasks(rollout.task_id)
            why = None
            if ep_id in seen:
                why = (
                    f"it was ingested before (episode {ep_id}), from another part: "
                    "the same rollout is logged once"
                )
            elif task is None or not isinstance(task.world, WorldSpec):
                why = f"{rollout.task_id} is not an accepted training task of this run"
            elif len(rollout.tool_calls) > MAX_CALLS:
                why = (
                    f"{len(rollout.tool_calls)} calls, more than an episode may make ({MAX_CALLS})"
                )
            else:
                try:
                    episode = self._played(task, rollout, ep_id)
                except Exception as exc:  # a rollout coevo cannot replay is counted, never fatal
                    why = f"it could not be replayed: {type(exc).__name__}: {exc}"
            if why is not None:
                rejected += 1
                self.events(
                    "inbox_rollout_rejected", gen=gen, part=part, rollout=rollout.rollout, why=why
                )
                continue
            disagreed += episode.reward.value != round(rollout.reward)
            episodes.append(episode)
        seen.update(e.episode_id for e in episodes)
        return episodes, rejected, disagreed

    def _played(self, task: TaskSpec, rollout: InboxRollout, episode_id: str) -> Episode:
        """The rollout's calls replayed in a fresh copy of the task's world, scored by coevo's verifier."""
        assert isinstance(task.world, WorldSpec)
        world = self.worlds.take(task.world)
        try:
            world.reset(task, max_steps=MAX_CALLS)
            made: list[ToolCall] = []
            seen: list[Observation] = []
            for call in rollout.tool_calls:
                if world.done:
                    break
                made.append(call)
                seen.append(world.step(call))
            signed = rollout.policy_version or rollout.model or rollout.source
            episode = world.episode(
                made,
                seen,
                solver=signed,
                seed=None,
                episode_id=episode_id,
                unfinished="the rollout ended without submit",
            )
        finally:
            self.worlds.give_back(world)
        return episode.model_copy(update={"trajectory": _trajectory(rollout, signed)})


def _episode_ids(rollouts: list[InboxRollout]) -> list[str]:
    """Each rollout's episode id: from its producer's ``rollout_id`` (else its content) and how many rows of its part came before with the same.

    The same rollout gets the same id whichever part brings it; two equal rows
    of one part get two ids.
    """
    counts: Counter[str] = Counter()
    out = []
    for rollout in rollouts:
        if rollout.rollout_id is not None:
            key = json.dumps(["id", rollout.source, rollout.rollout_id])
        else:
            cells = {k: v for k, v in rollout.cells().items() if k != "rollout"}
            key = json.dumps(["content", cells], sort_keys=True)
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
        out.append(episode_id("inbox", digest, counts[digest]))
        counts[digest] += 1
    return out


def _trajectory(rollout: InboxRollout, signed: str) -> Trajectory | None:
    """The rollout's conversation and tokens, as the ``trajectories`` table keeps them (None: no conversation)."""
    if rollout.messages is None:
        return None
    messages: list[dict[str, Any]] = json.loads(rollout.messages)
    tools: list[dict[str, Any]] = json.loads(rollout.tools) if rollout.tools else []
    prompts, completions = rollout.turn_prompt_ids, rollout.turn_completion_ids
    logprobs = rollout.turn_logprobs
    turns: list[TurnTokens] = []
    if prompts is not None and completions is not None:
        turns = [
            TurnTokens(
                finish="unknown",
                prompt_ids=p,
                completion_ids=c,
                logprobs=None if logprobs is None else logprobs[i],
            )
            for i, (p, c) in enumerate(zip(prompts, completions, strict=True))
        ]
    else:
        turns = [TurnTokens(finish="unknown") for m in messages if m.get("role") == "assistant"]
    return Trajectory(
        messages=messages,
        tools=tools,
        sampling={},
        policy_version=signed,
        provider=rollout.source,
        model=rollout.model or "",
        turns=turns,
    )


def _row(
    part: str,
    source: str,
    rollouts: int,
    episodes: int,
    rejected: int,
    disagreed: int,
    error: str | None,
) -> IngestedRow:
    return IngestedRow(
        part_id=part,
        source=source,
        rollouts=rollouts,
        episodes=episodes,
        rejected=rejected,
        disagreed=disagreed,
        error=error,
    )


def known_tasks(current: Mapping[str, TaskSpec], log: GameLog) -> Callable[[str], TaskSpec | None]:
    """The tasks a trainer may have played: the curriculum's ``current`` ones, then (read once, on the first miss) every task of the log the Judge accepted, the eval suite excepted."""
    logged: dict[str, TaskSpec] | None = None

    def lookup(task_id: str) -> TaskSpec | None:
        nonlocal logged
        if task_id in current:
            return current[task_id]
        if logged is None:
            logged = _accepted_training_tasks(log)
        return logged.get(task_id)

    return lookup


def _accepted_training_tasks(log: GameLog) -> dict[str, TaskSpec]:
    """Every task of the log the Judge accepted that is not in the eval suite, by id."""
    tasks, _ = log.task_specs()
    listed = log.read("tasks", columns=["task_id", "source"])
    held_out = {
        t
        for t, source in zip(
            listed.column("task_id").to_pylist(), listed.column("source").to_pylist(), strict=True
        )
        if source == "eval"
    }
    accepted = accepted_ids(log.read("verdicts", columns=["task_id", "accepted"]))
    return {t: task for t, task in tasks.items() if t in accepted and t not in held_out}
