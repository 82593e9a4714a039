"""``llm-world-model`` (and ``claude-world-model``): a model predicts P(success) before any rollout, and can simulate the world's tools.

* ``predict(tasks)``: one structured call per task. It shows the
  instruction, the tools, and a few recent outcomes of the current Solver on
  other tasks (the model's memory, filled by ``update``). It never shows the
  solution or the verifier. The answer is a probability; a call that fails
  gives the running success rate instead, so the batch goes on.
* ``simulate(task, calls)`` (DreamGym-style): for each tool call of a
  trajectory, the model answers with the rows the tool would return, from the
  world's schema, the tool's SQL and the conversation so far. A Solver can
  be rolled out against the model instead of the database.
  :func:`simulation_agreement` measures how often the simulated rows equal
  the real world's.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Sequence
from typing import Any, ClassVar

from coevo.agents.llm.role import LLMRole
from coevo.agents.llm.turns import LLMCallError
from coevo.arena.outcomes import Episode
from coevo.arena.spec import TaskSpec, ToolCall, WorldSpec
from coevo.arena.state import pack_state, unpack_state
from coevo.arena.world import World
from pydantic import BaseModel, Field

__all__ = ["LLMWorldModel", "Prediction", "SimulatedResult", "simulation_agreement"]

PREDICT_SYSTEM = (
    "You predict whether an AI agent will complete a task in a company's systems through the tools "
    "listed, from the task alone (you do not see a solution). Answer with a calibrated probability."
)
SIMULATE_SYSTEM = (
    "You simulate a SQL-backed tool API. Given the database schema, a tool's SQL and its arguments, "
    "and what earlier calls returned, answer with exactly the rows the tool would return."
)


class Prediction(BaseModel):
    """A probability that the Solver succeeds, with a reason."""

    p: float = Field(ge=0.0, le=1.0, description="P(the agent earns reward 1)")
    reason: str = Field(description="one sentence")


class SimulatedResult(BaseModel):
    """What a tool call would return."""

    ok: bool = Field(description="false if the call would fail")
    rows: list[list[Any]] = Field(default_factory=list, description="the rows returned, in order")
    error: str | None = Field(default=None, description="why it fails, when it fails")


class LLMWorldModel(LLMRole):
    """A model as the World model (see the module docstring).

    Args:
        model: the model (or adapter) name (see :class:`~coevo.agents.llm.role.LLMRole`
            for the settings every LLM role takes).
        memory: recent outcomes shown as examples.
        **client: the settings every LLM role takes.
    """

    kind = "world model"
    name: ClassVar[str] = "llm-world-model"

    def __init__(self, model: str | None = None, *, memory: int = 12, **client: Any):
        super().__init__(model, **client)
        self.memory: deque[tuple[str, int]] = deque(maxlen=memory)
        self.instructions: dict[str, str] = {}
        self.outcomes = [0, 0]  # successes, episodes
        self.errors: list[str] = []

    def _fallback(self) -> float:
        successes, episodes = self.outcomes
        return (successes + 1) / (episodes + 2)

    def predict(self, tasks: Sequence[TaskSpec]) -> list[float]:
        """P(success) per task, in order (a task whose call failed gets the running success rate).

        Raises:
            LLMCallError: every call of the batch failed (the last error): the model
                predicted nothing, and that is a failure, not a batch of fallbacks.
        """
        for task in tasks:
            self.instructions[task.task_id] = task.instruction
        before = len(self.errors)
        predicted = self.client.run(self._predict_all(list(tasks)))
        if tasks and len(self.errors) - before == len(tasks):
            raise LLMCallError(
                f"the calls of all {len(tasks)} predictions failed, the last: {self.errors[-1]}"
            )
        return predicted

    async def _predict_all(self, tasks: list[TaskSpec]) -> list[float]:
        return list(await asyncio.gather(*(self._predict(t) for t in tasks)))

    async def _predict(self, task: TaskSpec) -> float:
        world = task.world if isinstance(task.world, WorldSpec) else None
        tools = [
            {"name": t.name, "description": t.description} for t in (world.tools if world else [])
        ]
        examples = (
            "\n".join(f"- {'solved' if r else 'failed'}: {text}" for text, r in self.memory)
            or "- none yet"
        )
        prompt = (
            f"Recent outcomes of this agent:\n{examples}\n\nTask:\n{task.instruction}\n\n"
            f"Tools:\n{json.dumps(tools, indent=1)}"
        )
        try:
            answer = await self.client.structured(
                Prediction,
                role="world_model",
                task=task.task_id,
                system=PREDICT_SYSTEM,
                messages=[{"role": "user", "content": prompt}],
                name="predict",
            )
        except LLMCallError as exc:
            self.errors.append(str(exc))
            return self._fallback()
        return float(answer.p)

    def update(self, episodes: Sequence[Episode]) -> None:
        """Remember the outcomes (recent ones become examples for the next predictions)."""
        for episode in episodes:
            self.outcomes[0] += episode.reward.value
            self.outcomes[1] += 1
            text = self.instructions.get(episode.task_id)
            if text is not None:
                self.memory.append((text, episode.reward.value))

    def get_state(self) -> bytes:
        """What it remembers (recent outcomes, instructions seen, the running rate) as ``coevo.state/1``."""
        meta = {
            "memory": [[text, reward] for text, reward in self.memory],
            "instructions": dict(self.instructions),
            "outcomes": list(self.outcomes),
        }
        return pack_state(self.name, 1, meta)

    def set_state(self, state: bytes) -> None:
        """Load what :meth:`get_state` returned.

        Raises:
            StateError: the bytes are not a state of this role.
        """
        meta = unpack_state(state, role=self.name, versions={1}).meta
        self.memory.clear()
        self.memory.extend((str(text), int(reward)) for text, reward in meta["memory"])
        self.instructions = {str(k): str(v) for k, v in meta["instructions"].items()}
        self.outcomes = [int(n) for n in meta["outcomes"]]

    def simulate(self, task: TaskSpec, calls: Sequence[ToolCall]) -> list[SimulatedResult | str]:
        """The simulated result of each call in turn (a string: the call failed, with why)."""
        return self.client.run(self._simulate(task, list(calls)))

    async def _simulate(self, task: TaskSpec, calls: list[ToolCall]) -> list[SimulatedResult | str]:
        world = task.world if isinstance(task.world, WorldSpec) else None
        if world is None:
            return ["the task's world is not inline"] * len(calls)
        tools = {t.name: t for t in world.tools}
        history: list[dict[str, Any]] = []
        out: list[SimulatedResult | str] = []
        for call in calls:
            tool = tools.get(call.tool)
            prompt = json.dumps(
                {
                    "schema": world.schema_sql,
                    "tool": call.tool,
                    "sql": tool.sql if tool else None,
                    "arguments": call.arguments,
                    "earlier_calls": history[-6:],
                },
                default=str,
            )
            try:
                result = await self.client.structured(
                    SimulatedResult,
                    role="world_model",
                    task=task.task_id,
                    system=SIMULATE_SYSTEM,
                    messages=[{"role": "user", "content": prompt}],
                    name="result",
                )
            except LLMCallError as exc:
                out.append(str(exc))
                continue
            out.append(result)
            history.append(
                {"tool": call.tool, "arguments": call.arguments, "rows": result.rows[:5]}
            )
        return out


def simulation_agreement(model: LLMWorldModel, tasks: Sequence[TaskSpec]) -> float:
    """The share of reference-solution tool calls whose simulated rows equal the real world's (submit excluded)."""
    agree = total = 0
    for task in tasks:
        calls = [c for c in task.solution if c.tool != "submit"]
        if not calls or not isinstance(task.world, WorldSpec):
            continue
        simulated = model.simulate(task, calls)
        with World(task.world) as world:
            world.reset(task)
            for call, guess in zip(calls, simulated, strict=True):
                real = world.step(call)
                total += 1
                if isinstance(guess, SimulatedResult) and guess.ok == real.ok:
                    rows = [list(r) for r in (real.rows or [])]
                    agree += int(not real.ok or guess.rows == rows)
    return agree / total if total else 0.0
