"""How much of each level the search Judge proves solvable, and at what cost.

    python benchmarks/bench_search.py [--quick] [--seeds N] [--n N] [--levels 1,2,3,4] [--budget B]

For every level, ``--n`` procedural tasks (every domain) from each of seeds
1..``--seeds`` go to :func:`coevo.agents.search.search_solve`, which never
reads their solution or verifier. Per level, one core:

* solved / attempted, and solved / attempted per family (question, action,
  bulk, conditional);
* tool calls spent on the tasks solved (replays included): mean, p90, max;
* the length of the calls found against the reference solution's (the
  baseline, from the same tasks: what a solver that knew the way would make);
* seconds per task (all tasks; an unsolved one spends the whole budget) and
  the slowest task.

Every solution found is replayed in a fresh episode and must earn 1 again.
Worlds are built before timing, once per (domain, seed).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field

from coevo.agents.protocols import ProposalRequest
from coevo.agents.search import search_solve
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.arena import TaskSpec, World

FAMILIES = ("question", "action", "bulk", "conditional")


@dataclass
class LevelFigures:
    """What the search made of one level's tasks."""

    attempted: Counter[str] = field(default_factory=Counter)
    solved: Counter[str] = field(default_factory=Counter)
    spent: list[int] = field(default_factory=list)
    found_length: list[int] = field(default_factory=list)
    reference_length: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


def p90(values: list[int]) -> float:
    """The 90th percentile (nearest rank), 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))])


def bench_level(
    synth: ProceduralSynthesizer, level: int, seeds: range, n: int, budget: int
) -> LevelFigures:
    figures = LevelFigures()
    tasks: list[TaskSpec] = []
    for seed in seeds:
        tasks += synth.propose(ProposalRequest(n=n, seed=seed, level=level))
    worlds = {task.world_id: World(task.world) for task in tasks}
    for task in tasks:
        world = worlds[task.world_id]
        family = task.provenance["plan"]["family"]
        start = time.perf_counter()
        result = search_solve(task, world, budget=budget)
        figures.seconds.append(time.perf_counter() - start)
        figures.attempted[family] += 1
        if result.solved and result.calls is not None:
            replay = world.run(task, result.calls)
            if replay.reward.value != 1:
                raise AssertionError(f"the calls found for {task.instruction!r} do not earn 1")
            figures.solved[family] += 1
            figures.spent.append(result.spent)
            figures.found_length.append(len(result.calls))
            figures.reference_length.append(len(task.solution))
    for world in worlds.values():
        world.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2 seeds of 10 tasks (a smoke run)")
    parser.add_argument(
        "--seeds", type=int, default=7, help="request seeds 1..N (default %(default)s)"
    )
    parser.add_argument(
        "--n", type=int, default=30, help="tasks per seed and level (default %(default)s)"
    )
    parser.add_argument(
        "--levels", default="1,2,3,4", help="levels, comma-separated (default %(default)s)"
    )
    parser.add_argument(
        "--budget", type=int, default=5000, help="tool calls per task (default %(default)s)"
    )
    args = parser.parse_args()
    seeds, n = (range(1, 3), 10) if args.quick else (range(1, args.seeds + 1), args.n)
    levels = [int(level) for level in args.levels.split(",")]
    synth = ProceduralSynthesizer()
    print(
        f"seeds {seeds.start}..{seeds.stop - 1}, {n} tasks per seed and level, every domain, "
        f"budget {args.budget} tool calls per task"
    )
    header = (
        f"{'level':>5} {'solved':>9} "
        + " ".join(f"{f:>11}" for f in FAMILIES)
        + f" {'mean calls':>10} {'p90':>6} {'max':>6} {'found/ref len':>13} {'s/task':>7} {'max s':>6}"
    )
    print(header)
    for level in levels:
        r = bench_level(synth, level, seeds, n, args.budget)
        attempted, solved = sum(r.attempted.values()), sum(r.solved.values())
        per_family = " ".join(
            f"{f'{r.solved[f]}/{r.attempted[f]}' if r.attempted[f] else '-':>11}" for f in FAMILIES
        )
        mean_spent = statistics.fmean(r.spent) if r.spent else 0.0
        lengths = (
            f"{statistics.fmean(r.found_length):.1f}/{statistics.fmean(r.reference_length):.1f}"
            if r.found_length
            else "-"
        )
        print(
            f"{level:>5} {f'{solved}/{attempted}':>9} {per_family} {mean_spent:>10.0f} "
            f"{p90(r.spent):>6.0f} {max(r.spent, default=0):>6} {lengths:>13} "
            f"{statistics.fmean(r.seconds):>7.3f} {max(r.seconds):>6.2f}"
        )


if __name__ == "__main__":
    main()
