"""How the loop plays a generation's episodes: fixed chunks over the Solver pool, derived seeds and ids, dynamic sampling's rounds.

Each task is played ``repeats`` times; the episodes go to the Solver actors in
chunks of ``run.chunk``, chunk ``i`` with the seed ``derive_seed(seed,
"solve", gen, purpose, i)``, and episode ``j`` of chunk ``i`` is named
``episode_id(seed, gen, purpose, i × chunk + j, task_id)``: the same
episodes and ids whatever the number of actors, and a retried chunk is never
logged twice. Dynamic sampling's further rounds (:mod:`coevo.curricula.dynamic`)
number their chunks on from the chunks played before them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from coevo.arena.ids import episode_id
from coevo.arena.outcomes import Episode
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import TaskSpec
from coevo.curricula.base import Curriculum
from coevo.curricula.dynamic import next_round
from coevo.run.actors.pool import Calls
from coevo.run.generation.state import Generation

__all__ = ["Players"]


@dataclass
class Players:
    """The Solver actors as a generation plays them.

    Attributes:
        solvers: the Solver actors' pool (its ``map`` submits ``attempt`` calls).
        seed: the run's seed.
        chunk: episodes per ``attempt`` call (``run.chunk``).
    """

    solvers: Any
    seed: int
    chunk: int

    def submit(
        self,
        gen: int,
        tasks: Sequence[TaskSpec],
        purpose: str,
        repeats: int,
        policy: tuple[int | None, Any],
        first: int = 0,
    ) -> Calls:
        """Submit each task ``repeats`` times, in chunks numbered from ``first``; :meth:`gather` names what they return.

        ``policy``: the learner's version and its state (a Ray ref, or None) to play with.
        """
        order = [t for t in tasks for _ in range(repeats)]
        chunks = [order[i : i + self.chunk] for i in range(0, len(order), self.chunk)]
        version, ref = policy
        state = [ref] if ref is not None else []
        seeds = [
            derive_seed(self.seed, "solve", gen, purpose, first + i) for i in range(len(chunks))
        ]
        ship = purpose == "train"  # the Solver's decisions: only the learner's episodes need them
        calls = [(version, state, c, s, ship) for c, s in zip(chunks, seeds, strict=True)]
        return self.solvers.map("attempt", calls)

    def gather(self, gen: int, purpose: str, parts: list[Any], first: int = 0) -> list[Episode]:
        """The episodes of the ``attempt`` calls' results (chunks numbered from ``first``), with their deterministic ids."""
        episodes: list[Episode] = []
        for i, (part, _decisions) in enumerate(parts, start=first):  # the calls, in order
            for j, episode in enumerate(part):
                named = episode_id(self.seed, gen, purpose, i * self.chunk + j, episode.task_id)
                episodes.append(episode.model_copy(update={"episode_id": named}))
        return episodes

    def further_rounds(
        self,
        done: Generation,
        curriculum: Curriculum,
        repeats: int,
        policy: tuple[int | None, Any],
        chunks: int,
    ) -> list[bytes]:
        """Dynamic sampling: rounds of further training tasks until the batch holds enough informative groups.

        Each round plays with ``policy``, as the first did, in chunks numbered on
        from ``chunks``; its tasks join ``done.batch`` and its episodes
        ``done.episodes``. Returns what the Solvers shipped for the learner.
        """
        shipped: list[bytes] = []
        first = len(done.batch)
        while tasks := next_round(curriculum, done.gen, done.groups()):
            parts = self.submit(done.gen, tasks, "train", repeats, policy, chunks).get()
            done.episodes += self.gather(done.gen, "train", parts, chunks)
            shipped += [decisions for _, decisions in parts if decisions is not None]
            done.batch += tasks
            chunks += len(parts)
        done.extra_tasks = len(done.batch) - first
        return shipped
