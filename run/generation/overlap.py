"""What runs beside solving when ``run.max_staleness`` ≥ 1, and how busy each actor was.

At ``run.max_staleness = 0`` a generation's phases run one after another
(judge, predict, solve, learn, update the World model, evaluate, commit). At
1 or more, three things run at the same time where the data allows:

* the judging of generation n + 1 (in a driver thread, :class:`Background`),
  whose proposals were planned before anything of n was solved;
* the solving of generation n, with the policy learnt through n − 2;
* the learner's step on generation n − 1's episodes and the World model's
  update on its outcomes (:class:`Deferred`: submitted right after
  generation n's predictions and rollouts, so the actors take them next).

Every input is fixed by the generation, never by timing, so the log is the
same for the same seed and staleness. The learner and the World model are
one actor each and take one step at a time: more than one generation of lag
would gain nothing, so every staleness ≥ 1 gives this one schedule (with an
external ``[trainer]`` the staleness also bounds the trainer, see
:mod:`coevo.run.handoff.transports`). The deferred step of the last generation is
kept in the checkpoint (``deferred.json``, data only; with what the Solvers
shipped for it, :class:`~coevo.agents.protocols.ShipsDecisions`, beside it
in ``deferred-decisions.state``) and taken by ``coevo resume``.

:func:`drain_busy` asks every actor for the intervals it was busy (its hosts
answer beside a running call); :func:`busy_shares` makes them the share of a
generation's wall time, which each ``generation`` event reports.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
from coevo.arena.bounded import loads_json
from coevo.arena.errors import ArenaError, StateError
from coevo.arena.outcomes import Episode
from coevo.arena.spec import TaskSpec
from coevo.arena.state import pack_state, unpack_state
from coevo.run.actors.inprocess import get, wait
from ray.exceptions import GetTimeoutError, RayActorError

__all__ = [
    "DEFERRED_DECISIONS_FILE",
    "DEFERRED_FILE",
    "Background",
    "Deferred",
    "busy_shares",
    "covered",
    "drain_busy",
]

DEFERRED_FILE: Final = "deferred.json"
"""The checkpoint file of the learner step and World model update still to run."""

DEFERRED_DECISIONS_FILE: Final = "deferred-decisions.state"
"""The checkpoint file of what the Solvers shipped for that learner step (written only when they shipped any)."""

Interval = tuple[float, float]


@dataclass
class Deferred:
    """Generation ``gen``'s learner step and World model update, run beside the next generation's solving.

    Attributes:
        gen: the generation whose episodes they are.
        learn: the episodes the learner learns from (those played without failure).
        batch: the tasks they played (the learner remembers them).
        update: the outcomes the World model sees (with ingested rollouts).
        decisions: what the Solver actors shipped with the episodes, one blob per
            batch, for the learner (empty: the Solver ships nothing).
    """

    gen: int
    learn: list[Episode]
    batch: list[TaskSpec]
    update: list[Episode]
    decisions: list[bytes] = field(default_factory=list)

    def to_json(self) -> bytes:
        """The checkpoint file: episodes as data, tasks by id."""
        return json.dumps(
            {
                "gen": self.gen,
                "learn": [e.model_dump(mode="json") for e in self.learn],
                "batch": [t.task_id for t in self.batch],
                "update": [e.model_dump(mode="json") for e in self.update],
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def of_json(cls, data: bytes, tasks: Mapping[str, TaskSpec]) -> Deferred:
        """Read :meth:`to_json`'s file; ``tasks``: the run's tasks by id (from its log).

        Raises:
            ValueError: the file is not one this coevo wrote, or names a task the log lacks.
        """
        raw = loads_json(data, DEFERRED_FILE)
        try:
            batch = [tasks[t] for t in raw["batch"]]
        except KeyError as exc:
            raise ValueError(f"it names task {exc.args[0]}, which the log does not hold") from None
        return cls(
            gen=int(raw["gen"]),
            learn=[Episode.model_validate(e) for e in raw["learn"]],
            batch=batch,
            update=[Episode.model_validate(e) for e in raw["update"]],
        )

    @property
    def learner_args(self) -> tuple[list[Episode], list[TaskSpec], list[bytes]]:
        """What the learner's ``learn`` takes: the episodes, their tasks and the decisions shipped with them."""
        return self.learn, self.batch, self.decisions

    def checkpoint(self) -> dict[str, tuple[str, bytes]]:
        """The step's checkpoint files, by their key in the manifest's ``checkpoint_files``: (file name, bytes)."""
        files = {"deferred": (DEFERRED_FILE, self.to_json())}
        if self.decisions:
            files["deferred_decisions"] = (DEFERRED_DECISIONS_FILE, self.decisions_blob())
        return files

    @staticmethod
    def files_in(checkpoint_files: Mapping[str, str | None]) -> list[tuple[str, str]]:
        """The (key, file name) of the step's files among a manifest's ``checkpoint_files``, ``deferred`` first."""
        names = [(key, checkpoint_files.get(key)) for key in ("deferred", "deferred_decisions")]
        return [(key, name) for key, name in names if name] if names[0][1] else []

    @classmethod
    def read(
        cls, step: Deferred | None, key: str, data: bytes, tasks: Mapping[str, TaskSpec]
    ) -> Deferred:
        """The step with one of its checkpoint files read (``key``, in :meth:`files_in`'s order).

        Raises:
            ValueError: the file is not one this coevo wrote (a
                :class:`~coevo.arena.errors.StateError` for the decisions).
        """
        if key == "deferred" or step is None:
            return cls.of_json(data, tasks)
        step.decisions = cls.decisions_of(data)
        return step

    def decisions_blob(self) -> bytes:
        """The checkpoint file of :attr:`decisions`: the blobs, opaque, as ``coevo.state/1`` byte arrays."""
        arrays = {
            f"blob-{i}": np.frombuffer(b, dtype=np.uint8) for i, b in enumerate(self.decisions)
        }
        return pack_state("deferred-decisions", 1, {"blobs": len(self.decisions)}, arrays)

    @staticmethod
    def decisions_of(data: bytes) -> list[bytes]:
        """Read :meth:`decisions_blob`'s file (the learner checks each blob when it takes it).

        Raises:
            StateError: the file is not one this coevo wrote, or is damaged.
        """
        held = unpack_state(data, role="deferred-decisions", versions={1})
        count = held.meta.get("blobs")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise StateError("its header does not say how many blobs it holds")
        try:
            blobs = [held.arrays[f"blob-{i}"] for i in range(count)]
        except KeyError as exc:
            raise StateError(f"it lacks {exc.args[0]}") from None
        if any(b.dtype != np.uint8 or b.ndim != 1 for b in blobs):
            raise StateError("its blobs are not byte arrays")
        return [b.tobytes() for b in blobs]


class Background:
    """One driver thread for the judging of the next generation; its events are replayed on the main thread."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="coevo-judging")

    def start(
        self,
        work: Callable[[Callable[..., None]], Any],
        events: Callable[..., None],
    ) -> Callable[[], Any]:
        """Run ``work(emit)`` in the thread; returns a call that waits for its result and replays what it emitted."""
        said: list[tuple[str, dict[str, Any]]] = []

        def emit(event: str, **fields: Any) -> None:
            said.append((event, fields))

        future: Future[Any] = self._pool.submit(work, emit)

        def result() -> Any:
            value = future.result()
            for event, fields in said:
                events(event, **fields)
            return value

        return result

    def close(self) -> None:
        """Stop taking work (a call in flight finishes on its own; the actors it waits on are killed)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def drain_busy(
    actors: Sequence[tuple[str, Any]], timeout: float = 10.0
) -> dict[str, list[Interval]]:
    """Every actor's busy intervals since the last drain, by label; an actor that does not answer within ``timeout`` seconds (all told) is left out."""
    refs = {label: actor.drain_busy.remote() for label, actor in actors}
    ready, _ = wait(list(refs.values()), num_returns=len(refs), timeout=timeout)
    answered = set(ready)
    out: dict[str, list[Interval]] = {}
    for label, ref in refs.items():
        if ref not in answered:
            continue  # a restarting actor: its share is unknown, not zero
        try:
            out[label] = [(float(s), float(e)) for s, e in get(ref)]
        except (RayActorError, GetTimeoutError, ArenaError):
            continue  # a dead actor: the same
    return out


def covered(intervals: Sequence[Interval], start: float, end: float) -> float:
    """Seconds of ``[start, end]`` covered by the union of ``intervals``."""
    total, reach = 0.0, start
    for s, e in sorted(intervals):
        s, e = max(s, reach), min(e, end)
        if e > s:
            total += e - s
            reach = e
    return total


def busy_shares(
    intervals: Mapping[str, Sequence[Interval]], start: float, end: float
) -> dict[str, float]:
    """Each actor's share of ``[start, end]`` spent in its role's calls (rounded to 3 places)."""
    wall = end - start
    if wall <= 0:
        return {}
    return {
        label: round(covered(spans, start, end) / wall, 3) for label, spans in intervals.items()
    }
