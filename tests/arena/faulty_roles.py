"""Roles that fail on purpose, imported by Ray workers by path ("tests.arena.faulty_roles:...")."""

from __future__ import annotations

from collections.abc import Sequence

from coevo.agents.judges import MechanicalJudge
from coevo.agents.linear_pg import LinearPGSolver
from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.arena import Episode, TaskSpec, Verdict
from coevo.arena.outcomes import CheckResult
from pydantic import BaseModel


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


class StrictJudge:
    """The mechanical Judge (unisolated), stricter by task id: one task in three also fails ``oracle``, one in five is rejected naming no failed check (a plugin Judge's verdict)."""

    kind = "judge"

    def __init__(self) -> None:
        self.judge = MechanicalJudge(isolate=False)

    def assess(self, tasks: Sequence[TaskSpec]) -> list[Verdict]:
        out = []
        for verdict in self.judge.assess(tasks):
            mark = int((verdict.task_id or "0")[-4:], 16)
            if mark % 5 == 0:
                passed = {
                    k: c.model_copy(update={"passed": True}) for k, c in verdict.checks.items()
                }
                verdict = verdict.model_copy(update={"accepted": False, "checks": passed})
            elif mark % 3 == 0:
                failed = CheckResult(passed=False, reason="rejected on purpose")
                checks = {**verdict.checks, "oracle": failed}
                verdict = verdict.model_copy(update={"accepted": False, "checks": checks})
            out.append(verdict)
        return out


class _Level(BaseModel):
    level: int


class MisconfiguredSolver(LinearPGSolver):
    """A solver whose constructor raises a pydantic ValidationError (a plugin checking its settings)."""

    def __init__(self) -> None:
        _Level.model_validate({"level": "high"})


class ValidatingSynthesizer(ProceduralSynthesizer):
    """A procedural synthesizer whose level-1 requests raise a pydantic ValidationError."""

    def propose(self, request: ProposalRequest) -> list[TaskSpec]:
        if request.level == 1:
            _Level.model_validate({"level": "high"})
        return super().propose(request)
