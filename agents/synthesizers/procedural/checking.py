"""``check_domain``: the checker a procedural domain must pass (coevo's own tests run it on every domain).

Run it while writing a domain::

    python -m coevo.agents.synthesizers.procedural.checking coevo.agents.synthesizers.procedural.retail

It builds worlds, draws tasks of every family at every level the family
reaches, runs the Judge's mechanical checks on each, and prints every problem
with the task's instruction.
"""

from __future__ import annotations

import importlib
import random
import re
import sys
from collections.abc import Sequence
from dataclasses import is_dataclass

from coevo.agents.synthesizers.initial import initial_state
from coevo.agents.synthesizers.planner import FAMILY_LEVELS, Target, TaskSampler, Unfit
from coevo.agents.synthesizers.procedural.base import Domain
from coevo.arena.judge import CHECK_NAMES, WorldCache, assess_task
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import TaskSpec, WorldSpec
from coevo.arena.world import World

__all__ = ["check_domain", "stated_numbers"]

_STANDALONE = re.compile(r"(?<![\w.:-])\d+(?![\w:-]|\.\d)")


def stated_numbers(text: str) -> set[int]:
    """Whole numbers written on their own in ``text`` ("order 17"; not the 1 of "LDS1", nor the parts of "2026-03-12" or "14:30")."""
    return {int(m.group(0)) for m in _STANDALONE.finditer(text)}


def _world_problems(domain: Domain, seed: int) -> list[str]:
    spec = domain.build_world(seed)
    problems: list[str] = []
    if spec.domain != domain.name:
        problems.append(f"world.domain is {spec.domain!r}, not {domain.name!r}")
    if not 8 <= len(spec.tools) <= 20:
        problems.append(f"{len(spec.tools)} tools; a domain has 8–20")
    rows = sum(len(t.rows) for t in spec.data.values())
    if not 50 <= rows <= 10_000:
        problems.append(f"{rows} seed rows; a domain has tens to thousands")
    if domain.build_world(seed).world_id != spec.world_id:
        problems.append("build_world is not deterministic by seed")
    with World(spec) as world:
        problems += [f"world warning: {w}" for w in world.warnings]
    for table in spec.data:
        if table not in domain.catalog.keys:
            problems.append(f"table {table} has no key in the catalog")
    return problems


def check_domain(domain: Domain, *, seeds: Sequence[int] = (1, 2), per_level: int = 4) -> list[str]:
    """Every problem of ``domain``: its worlds, and tasks of every family at every level.

    Returns:
        One line per problem (empty when the domain passes).
    """
    problems: list[str] = []
    if not is_dataclass(domain.knobs) or isinstance(domain.knobs, type):
        problems.append(
            f"DOMAIN.knobs is {domain.knobs!r}; record an instance of the domain's knobs "
            "dataclass (like retail's RetailKnobs: the numbers that shape its worlds)"
        )
    cache = WorldCache()
    try:
        for seed in seeds:
            problems += [f"seed {seed}: {p}" for p in _world_problems(domain, seed)]
            spec = domain.build_world(seed)
            sampler = TaskSampler(domain.catalog, initial_state(spec), spec)
            for family, levels in FAMILY_LEVELS.items():
                for level in levels:
                    rng = random.Random(derive_seed("check", domain.name, seed, family, level))
                    target = Target.of(level, families=[family])
                    for _ in range(per_level):
                        where = f"seed {seed} {family} L{level}"
                        try:
                            task = sampler.sample(rng, target)
                        except Unfit as exc:
                            problems.append(f"{where}: {exc}")
                            break
                        problems += _task_problems(task, spec, cache, where)
    finally:
        cache.close()
    return problems


def _task_problems(task: TaskSpec, spec: WorldSpec, cache: WorldCache, where: str) -> list[str]:
    """The Judge's mechanical checks ``task`` fails, and the keys of its writes its instruction states."""
    problems: list[str] = []
    verdict = assess_task(task, cache)
    bad = {
        name: r.reason
        for name, r in verdict.checks.items()
        if name in CHECK_NAMES[:-1] and r.passed is not True
    }
    if bad:
        problems.append(f"{where}: {task.instruction}\n    {bad}")
    writes = {t.name for t in spec.tools if t.effect == "write"}
    stated = stated_numbers(task.instruction)
    for call in task.solution:
        for name, value in call.arguments.items():
            if (
                call.tool in writes
                and isinstance(value, int)
                and value in stated
                and name.endswith("id")
            ):
                problems.append(
                    f"{where}: {task.instruction}\n    key {name}={value} of a write is stated in the instruction"
                )
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Check the domain named on the command line (its package, with a ``DOMAIN``); exit 1 on any problem."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(
            "usage: python -m coevo.agents.synthesizers.procedural.checking MODULE", file=sys.stderr
        )
        return 2
    domain = importlib.import_module(args[0]).DOMAIN
    problems = check_domain(domain)
    for problem in problems:
        print(problem)
    print(f"{domain.name}: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
