"""Roles that fail on purpose, imported by Ray workers by path ("tests.arena.faulty_roles:...")."""

from __future__ import annotations

from collections.abc import Sequence

from coevo.agents.judges import MechanicalJudge
from coevo.agents.linear_pg import LinearPGSolver
from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.arena import Episode, TaskSpec, Verdict


class FlakySolver(LinearPGSolver):
    """A linear-pg solver whose ``attempt`` raises for every third seed."""

    def attempt(self, tasks: Sequence[TaskSpec], seed: int) -> list[Episode]:
        if seed % 3 == 0:
            raise RuntimeError(f"flaky solver gave up on seed {seed}")
        return super().attempt(tasks, seed)


class PickySynthesizer(ProceduralSynthesizer):
    """A procedural synthesizer that raises on every level-3 request."""

    def propose(self, request: ProposalRequest) -> list[TaskSpec]:
        if request.level == 3:
            raise ValueError("level 3 is not my thing")
        return super().propose(request)


class ForgetfulModel:
    """A World model with no saved state (not Stateful): P(success) is the running success rate."""

    kind = "world model"

    def __init__(self) -> None:
        self.outcomes = [1, 2]

    def predict(self, tasks: Sequence[TaskSpec]) -> list[float]:
        return [self.outcomes[0] / self.outcomes[1]] * len(tasks)

    def update(self, episodes: Sequence[Episode]) -> None:
        self.outcomes[0] += sum(e.reward.value for e in episodes)
        self.outcomes[1] += len(episodes)


class ShortModel(ForgetfulModel):
    """A World model that returns one prediction too few (it breaks the batch contract)."""

    def predict(self, tasks: Sequence[TaskSpec]) -> list[float]:
        return super().predict(tasks)[:-1]


class MuddledJudge:
    """A Judge that answers a batch with its verdicts reversed (the wrong task in each place)."""

    kind = "judge"

    def __init__(self) -> None:
        self.judge = MechanicalJudge(isolate=False)

    def assess(self, tasks: Sequence[TaskSpec]) -> list[Verdict]:
        verdicts = self.judge.assess(tasks)
        return verdicts[::-1] if len(tasks) > 1 else verdicts
