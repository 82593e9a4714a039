"""A Synthesizer that learns, imported by Ray workers by path ("tests.arena.selfplay_roles:...")."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from coevo.agents.protocols import LearnStats, ProposalFeedback, ProposalRequest
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.arena.spec import TaskSpec
from coevo.arena.state import pack_state, unpack_state


class CountingSynthesizer:
    """Proposes level 1 after an even number of updates, level 2 after an odd one (unless binding).

    Its proposals therefore depend on its state, so a run that gave it the
    wrong state (on resume, or on another actor) writes another log.
    """

    kind = "synthesizer"

    def __init__(self, domains: list[str] | None = None, world_pool: int = 2):
        self.inner = ProceduralSynthesizer(domains or ["retail"], world_pool=world_pool)
        self.updates = 0
        self.earned = 0.0

    def propose(self, request: ProposalRequest) -> list[TaskSpec]:
        level = request.level if request.binding else 1 + self.updates % 2
        return self.inner.propose(request.model_copy(update={"level": level}))

    def learn(self, feedback: Sequence[ProposalFeedback]) -> LearnStats:
        if feedback:
            self.updates += 1
            self.earned += sum(f.reward for f in feedback)
        return LearnStats(episodes=len(feedback), updates=1 if feedback else 0)

    def policy_version(self) -> str:
        return f"counting@{self.updates}"

    def get_state(self) -> bytes:
        meta = {"updates": self.updates, "earned": self.earned}
        return pack_state("counting-synth", 1, meta, {"none": np.zeros(1)})

    def set_state(self, state: bytes) -> None:
        loaded = unpack_state(state, role="counting-synth", versions={1})
        self.updates = int(loaded.meta["updates"])
        self.earned = float(loaded.meta["earned"])
