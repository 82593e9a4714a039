"""A design as a task: what each choice point asks of the planner, how a design is relaxed, what a task realised.

A design (one value per choice point, :mod:`.policy`) becomes a
:class:`~coevo.agents.synthesizers.planner.Target` and two sampler knobs:

============== ===================================================================
choice point   asks the planner for
============== ===================================================================
domain         the world to draw in (a procedural domain or a mined database)
hops           the look-ups (``hops = [h, h]``: the anchor look-up and h − 1
               foreign-key hops); 1–5, those the world's walks reach
family         the task family (``Target.families``), among those that reach h
writes         the rows written (``writes = [w, w]``; 0 for a question, 1 for an
               action or a conditional, 2–4 for a bulk task)
filters        ``yes``: every hop that can states a condition ("the *pending* order");
               ``no``: none does (``filter_share`` 1 or 0)
superlatives   ``yes``: every hop that can picks by an extreme value ("the *most
               recent* order"); ``no``: none does (``order_share`` 1 or 0)
distractors    ``yes``: look-alike rows to rule out (``distractors ≥ 1``: twin
               anchors, ranked lists); ``no``: none (``distractors = 0``)
============== ===================================================================

``filters`` and ``superlatives`` are offered only when the walk has a pick
they steer (a down hop that is not a bulk task's last, which takes every
row, nor, for filters, a conditional task's last); otherwise they are ``no``.

When the planner cannot realise a design in its world (``attempts`` draws,
then a quarter of that per step), the design is relaxed one point at a time,
in :data:`RELAXATION` order, each step keeping the ones before it relaxed:
filters and superlatives (back to the sampler's defaults), distractors
(free), writes (free), hops (to within one of the drawn value), and last
the family (any family the world reaches, hops free). The domain is never
relaxed, and neither is a hard constraint (a request's explicit feature
ranges; the level's difficulty band when requests are followed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

from coevo.agents.synthesizers.planner import Target
from coevo.agents.synthesizers.planner.sampler import TaskSampler
from coevo.arena.spec import TaskSpec

__all__ = [
    "RELAXATION",
    "WRITES_OF_FAMILY",
    "Design",
    "Realisation",
    "feasible_hops",
    "realisations",
    "realised",
]

WRITES_OF_FAMILY: Final[Mapping[str, tuple[int, ...]]] = {
    "question": (0,),
    "action": (1,),
    "conditional": (1,),
    "bulk": (2, 3, 4),
}
"""The rows a task of each family writes (a bulk task's last pick takes 2–4 rows)."""

RELAXATION: Final = ("filters", "superlatives", "distractors", "writes", "hops", "family")
"""The order choice points are given up in when a design cannot be realised (see the module)."""


@dataclass(frozen=True)
class Design:
    """One value per choice point.

    Attributes:
        domain: the world (a procedural domain's name, or a mined world's ``mined:<name>``).
        hops: the look-ups the task takes.
        family: the task family.
        writes: the rows the task writes.
        filters: ``yes`` or ``no``.
        superlatives: ``yes`` or ``no``.
        distractors: ``yes`` or ``no``.
    """

    domain: str
    hops: int
    family: str
    writes: int
    filters: str
    superlatives: str
    distractors: str

    def to_json(self) -> dict[str, Any]:
        """The design as JSON-ready data."""
        return asdict(self)


@dataclass(frozen=True)
class Realisation:
    """One attempt at realising a design: the target, the sampler knobs, and the points given up.

    Attributes:
        target: what the planner is asked for.
        filter_share: the sampler's ``filter_share``.
        order_share: the sampler's ``order_share``.
        relaxed: the choice points given up (in :data:`RELAXATION` order).
    """

    target: Target
    filter_share: float
    order_share: float | None
    relaxed: tuple[str, ...]


def feasible_hops(sampler: TaskSampler, family: str) -> list[int]:
    """The look-up counts (1–5) a walk of ``family`` can take in the sampler's world (from some anchor with rows)."""
    reach = sampler.reach(family)
    tables = {a.table for a in sampler.catalog.anchors if sampler.db.keys_of(a.table)}
    return [h for h in range(1, 6) if h - 1 < len(reach) and tables & reach[h - 1]]


def _merge(
    ranges: dict[str, tuple[float, float]], hard: Mapping[str, tuple[float, float]]
) -> dict[str, tuple[float, float]]:
    """The design's ranges within the hard ones (a hard range wins where they do not meet)."""
    out = dict(ranges)
    for name, (lo, hi) in hard.items():
        if name in out:
            low, high = max(out[name][0], lo), min(out[name][1], hi)
            out[name] = (low, high) if low <= high else (lo, hi)
        else:
            out[name] = (lo, hi)
    return out


def realisations(design: Design, hard: Target, families: Sequence[str]) -> list[Realisation]:
    """The design as drawn, then relaxed step by step (:data:`RELAXATION`), each as a :class:`Realisation`.

    Args:
        design: the design drawn.
        hard: what may never be relaxed: its ranges (the request's features; the
            level's when requests are followed).
        families: the families the last step may use (every one the world reaches).
    """
    out: list[Realisation] = []
    for step in range(len(RELAXATION) + 1):
        relaxed = RELAXATION[:step]
        ranges: dict[str, tuple[float, float]] = {}
        if "writes" not in relaxed:
            ranges["writes"] = (design.writes, design.writes)
        if "hops" not in relaxed:
            ranges["hops"] = (design.hops, design.hops)
        elif "family" not in relaxed:
            ranges["hops"] = (design.hops - 1, design.hops + 1)
        if "distractors" not in relaxed:
            ranges["distractors"] = (1, math.inf) if design.distractors == "yes" else (0, 0)
        chosen = tuple(families) if "family" in relaxed else (design.family,)
        out.append(
            Realisation(
                target=Target(ranges=_merge(ranges, hard.ranges), families=chosen),
                filter_share=0.6
                if "filters" in relaxed
                else (1.0 if design.filters == "yes" else 0.0),
                order_share=None
                if "superlatives" in relaxed
                else (1.0 if design.superlatives == "yes" else 0.0),
                relaxed=relaxed,
            )
        )
    return out


def realised(task: TaskSpec, domain: str) -> dict[str, Any]:
    """What a task drawn in ``domain`` realised of each choice point, from its plan and features.

    A value is None where the point did not apply: ``filters`` and ``superlatives`` apply when the walk has a down hop whose
    pick the knobs steer (not a bulk task's last pick of every row).
    """
    provenance = task.provenance or {}
    plan = provenance.get("plan") or {}
    features = task.features or {}
    picks = [p for p in plan.get("picks", []) if p is not None and not p.get("every")]

    def switch(found: bool) -> str | None:
        return ("yes" if found else "no") if picks else None

    return {
        "domain": domain,
        "family": plan.get("family"),
        "writes": int(features.get("writes", 0)),
        "hops": int(features.get("hops", 0)),
        "filters": switch(any(p.get("filter") is not None for p in picks)),
        "superlatives": switch(any(p.get("order") is not None for p in picks)),
        "distractors": "yes" if features.get("distractors", 0) > 0 else "no",
    }
