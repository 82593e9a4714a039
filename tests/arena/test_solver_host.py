"""The Solver's host: what a Solver that ships its decisions hands the learner, and a Solver that ships none."""

from __future__ import annotations

from collections.abc import Sequence

from coevo.agents.linear_pg import LinearPGSolver
from coevo.agents.protocols import LearnStats, ShipsDecisions
from coevo.arena import Episode, TaskSpec
from coevo.arena.outcomes import Reward
from coevo.run.actors.hosts import SolverHost
from coevo.run.testing import sample_tasks


class _Idle:
    """A Solver with no decisions to ship (as an API-backed one): it submits nothing."""

    def __init__(self) -> None:
        self.learnt: list[int] = []

    def attempt(self, tasks: Sequence[TaskSpec], seed: int) -> list[Episode]:
        return [
            Episode(
                task_id=t.task_id,
                world_id=t.world_id,
                calls=[],
                observations=[],
                reward=Reward(value=0, submitted=False, reason="did nothing"),
            )
            for t in tasks
        ]

    def learn(self, episodes: Sequence[Episode]) -> LearnStats:
        self.learnt.append(len(episodes))
        return LearnStats(episodes=len(episodes))


def test_linear_pg_players_ship_decisions_and_the_learner_uses_them() -> None:
    """attempt returns the episodes and a blob; a learner given the blob learns from every episode without the tasks."""
    tasks = sample_tasks()
    player, learner = SolverHost("linear-pg", {}), SolverHost("linear-pg", {})
    assert isinstance(player.role, ShipsDecisions)
    episodes, shipped = player.attempt(None, [], [t for t in tasks for _ in range(2)], 3)
    assert len(episodes) == 2 * len(tasks) and isinstance(shipped, bytes)
    assert not player.role._traces, "a player keeps nothing once it has shipped it"
    stats, state, error = learner.learn(episodes, [], [shipped])
    assert error is None and state is not None
    assert stats.extra["skipped"] == 0 and stats.updates == 1
    blind = SolverHost("linear-pg", {})
    assert blind.learn(episodes, [])[0].extra["skipped"] == len(episodes)


def test_a_damaged_blob_is_left_out_and_the_step_is_the_same() -> None:
    """Bytes that are not decisions are a cache miss: the learner rebuilds, and takes the very step it would have taken."""
    tasks = sample_tasks()
    episodes, shipped = SolverHost("linear-pg", {}).attempt(None, [], tasks, 1)
    assert shipped is not None
    damaged, whole = SolverHost("linear-pg", {}), SolverHost("linear-pg", {})
    stats, state, error = damaged.learn(episodes, tasks, [b"not decisions"])
    assert error is None and stats.updates == 1 and stats.extra["skipped"] == 0
    assert state == whole.learn(episodes, tasks, [shipped])[1]


def test_an_eval_batch_ships_nothing() -> None:
    """``ship=False`` (an eval suite's batch: nobody learns from it) returns no decisions and keeps none."""
    host = SolverHost("linear-pg", {})
    episodes, shipped = host.attempt(None, [], sample_tasks(), 1, False)
    assert shipped is None and episodes and not host.role._traces


def test_a_solver_without_decisions_ships_none_and_learns_as_before() -> None:
    """A Solver that is not ShipsDecisions: attempt gives (episodes, None), and learn ignores what it is not given."""
    host = SolverHost("linear-pg", {})
    host.role = idle = _Idle()
    assert not isinstance(idle, ShipsDecisions)
    tasks = sample_tasks()
    episodes, shipped = host.attempt(None, [], tasks, 0)
    assert shipped is None and [e.task_id for e in episodes] == [t.task_id for t in tasks]
    stats, state, error = host.learn(episodes, tasks, [b"from someone else"])
    assert (stats.episodes, state, error) == (len(tasks), None, None)
    assert idle.learnt == [len(tasks)]


class _PlaysThenRaises(LinearPGSolver):
    """Plays the batch (recording its decisions), then raises."""

    def attempt(self, tasks: Sequence[TaskSpec], seed: int) -> list[Episode]:
        super().attempt(tasks, seed)
        raise RuntimeError("lost the connection after playing")


def test_a_failed_batch_ships_nothing_and_forgets_what_it_recorded() -> None:
    """A Solver that raises after playing: failed episodes, no blob, and nothing left over for the next batch."""
    host = SolverHost("linear-pg", {})
    host.role = _PlaysThenRaises()
    episodes, shipped = host.attempt(None, [], sample_tasks(), 3)
    assert shipped is None and all(e.failure for e in episodes)
    assert not host.role._traces
