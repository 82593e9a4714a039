"""``accel``: PLR whose fresh slots are partly filled by mutations of the highest-scoring tasks.

Harder children (``add_hop``, ``add_distractor``, ``add_condition``) of tasks
the Solver mostly solves, easier ones (``drop_step``, ``drop_condition``,
``swap_target``) of tasks it mostly fails, made by the synthesis operators
(Parker-Holder et al., 2022).
"""

from __future__ import annotations

import math
from typing import ClassVar

from coevo.arena.seeding import derive_seed
from coevo.curricula.base import CurriculumConfig, GenerationPlan, Mutation
from coevo.curricula.plr import PLR, PLRConfig
from pydantic import Field

__all__ = ["ACCEL", "ACCELConfig"]

_HARDER = ("add_hop", "add_distractor", "add_condition")
_EASIER = ("drop_step", "drop_condition", "swap_target")


class ACCELConfig(PLRConfig):
    """The settings of ``accel``: PLR's, and the share of fresh slots given to mutations.

    Attributes:
        mutations: share of the fresh slots filled by mutations instead.
    """

    mutations: float = Field(default=0.5, ge=0.0, le=1.0)


class ACCEL(PLR):
    """PLR whose fresh slots are partly filled by mutations of high-scoring tasks."""

    name: ClassVar[str] = "accel"
    Config: ClassVar[type[CurriculumConfig]] = ACCELConfig
    config: ACCELConfig

    def plan(self, gen: int) -> GenerationPlan:
        """Fresh proposals for part of the slots, mutations of the best buffer tasks for the rest."""
        slots = self.fresh_slots(gen)
        candidates = sorted(
            (t for t in self.buffer if self.stats[t].score > 0),
            key=lambda t: (-self.stats[t].score, t),
        )
        n_mut = min(len(candidates), round(self.config.mutations * slots))
        rng = self.rng(gen, "mutate")
        mutations = []
        for i, parent in enumerate(candidates[:n_mut]):
            p = self.stats[parent].success or 0.0
            ops = _HARDER if p >= 0.5 else _EASIER
            for j in range(math.ceil(self.config.oversample)):
                op = ops[int(rng.integers(0, len(ops)))]
                mutations.append(
                    Mutation(parent, op, seed=derive_seed(self.seed, "mutation", gen, i, j))
                )
        need = self.proposals_for(slots - n_mut)
        return GenerationPlan(self.spread(gen, need, self.config.levels), mutations)
