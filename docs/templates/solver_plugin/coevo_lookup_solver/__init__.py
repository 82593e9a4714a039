"""A coevo Solver plugin: it plays each task in closed loop, one tool call after another, and submits.

coevo finds the role through the entry point in this package's ``pyproject.toml``
(group ``coevo.roles``), so an experiment file names it with no change to coevo::

    [solver]
    name = "lookup-solver"
    config = { max_steps = 8 }

To make your own Solver, copy this package, rename it (the distribution, the
package and the entry point) and replace :meth:`LookupSolver._play` with your
policy. Keep the habits it shows: one episode per task, in order; the same
episodes for the same tasks and seed; built worlds kept for the next episode
(a world built per episode costs more than the play); and a task that cannot
be played at all returns :func:`~coevo.arena.outcomes.failed_episode`, never
an exception.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from coevo.agents.protocols import LearnStats
from coevo.arena import Episode, Observation, SpecError, TaskSpec, ToolCall, WorldSpec
from coevo.arena.outcomes import failed_episode
from coevo.arena.world import World, WorldPool

__all__ = ["LookupSolver"]

_WORDS = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+|\b\d+\b|\b[A-Z][a-z]+ [A-Z][a-z]+\b")
"""What the instruction may name: an email address, a number, a first and last name."""


class LookupSolver:
    """Looks up what the instruction names with each read tool of one argument, and submits the first value found.

    It does not learn (:meth:`learn` changes nothing); it is the skeleton of a
    Solver that does: :meth:`attempt` plays, in closed loop, each call chosen
    after the last one's observation, and ends the episode with ``submit``.

    Args:
        max_steps: tool calls allowed per episode, ``submit`` included.
        keep_worlds: built worlds kept between calls (``WorldPool``).
    """

    kind = "solver"

    def __init__(self, max_steps: int = 8, keep_worlds: int = 64):
        if max_steps < 1 or keep_worlds < 0:
            raise ValueError(
                f"max_steps must be 1 or more and keep_worlds 0 or more, not {max_steps} and {keep_worlds}"
            )
        self.name = "lookup-solver"
        self.max_steps = max_steps
        self.worlds = WorldPool(keep=keep_worlds)

    def attempt(self, tasks: Sequence[TaskSpec], seed: int) -> list[Episode]:
        """One episode per task, in order; a task whose world does not build is a failed episode (reward 0)."""
        episodes = []
        for task in tasks:
            if not isinstance(task.world, WorldSpec):  # a task that names its world by id only
                episodes.append(failed_episode(task, seed, "its world is not inline", self.name))
                continue
            try:
                world = self.worlds.take(task.world)
            except (
                SpecError
            ) as exc:  # the task's own fault: an episode that says so, not an exception
                why = f"the world could not be built: {exc.summary()}"
                episodes.append(failed_episode(task, seed, why, self.name))
                continue
            try:
                episodes.append(self._play(task, world, seed))
            finally:
                self.worlds.give_back(world)
        return episodes

    def _play(self, task: TaskSpec, world: World, seed: int) -> Episode:
        """The policy: each read tool of one required argument, tried with each word the instruction names."""
        world.reset(task, max_steps=self.max_steps)
        calls: list[ToolCall] = []
        observations: list[Observation] = []

        def step(tool: str, arguments: dict[str, Any]) -> Observation:
            call = ToolCall(tool, arguments)
            observation = world.step(call)  # the world runs the tool; the reward comes with submit
            calls.append(call)
            observations.append(observation)
            return observation

        answer: str | None = None
        words = _WORDS.findall(task.instruction)
        for tool in world.spec.tools:
            required = tool.parameters.get("required", [])
            if tool.effect != "read" or len(required) != 1:
                continue
            kind = tool.parameters.get("properties", {}).get(required[0], {}).get("type")
            for word in words:
                if world.done or answer is not None:
                    break
                if kind == "integer" and not word.isdigit():
                    continue
                observation = step(
                    tool.name, {required[0]: int(word) if kind == "integer" else word}
                )
                if observation.ok and observation.rows:
                    answer = str(observation.rows[0][-1])
        if not world.done:
            step("submit", {"answer": answer})
        # the reward is the last observation's (submit, or the step budget running out)
        return world.episode(calls, observations, solver=self.name, seed=seed)

    def learn(self, episodes: Sequence[Episode]) -> LearnStats:
        """Nothing to learn: a learning Solver updates its policy here from the episodes' rewards."""
        return LearnStats(episodes=len(episodes))
