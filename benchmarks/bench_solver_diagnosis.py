"""Why does linear-pg stop learning? Capacity against exploration, per level and per task family.

    python benchmarks/bench_solver_diagnosis.py [--domains retail] [--levels 1,2,3]
                                                [--updates 30] [--seed 0] [--quick]

One process, one core. The same budget is spent two ways on the same
training tasks (32 a step, about a share each of the levels, in 4 worlds):

* **policy gradient** (the baseline, what a run does): each task attempted
  4 times, ``learn`` on the episodes;
* **imitation** of the tasks' reference solutions (one a task, greedy
  held-out): what the same features and prior can represent when the
  right decisions are shown. A solver never sees a reference; this is a
  measurement of the policy class, not a way to train.

Printed: held-out success per level for both (greedy, one episode on each
of 48 tasks a level in worlds never trained on) and imitation / policy
gradient; then, per task family (the synthesizer's family and the tools of
its reference, e.g. ``bulk: search_customers list_orders open_return``),
held-out success untrained and after policy gradient (4 sampled episodes a
task). A family at 0.00 both times was never solved by chance: its groups
all fail alike, their advantage is zero and nothing is learnt — an
exploration ceiling, which the prior (``role_features``) sets.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np
from coevo.agents.linear_pg import LinearPGSolver
from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.arena import TaskSpec, WorldCache


def held_out(domains: list[str], levels: list[int]) -> dict[int, list[TaskSpec]]:
    """48 tasks a level in worlds of seeds 500–505 (+1000 × level): never trained on."""
    synth = ProceduralSynthesizer(domains)
    return {
        lv: [
            t
            for seed in range(500, 506)
            for t in synth.propose(ProposalRequest(n=8, seed=seed + 1000 * lv, level=lv))
        ]
        for lv in levels
    }


def batch(synth: ProceduralSynthesizer, levels: list[int], seed: int, step: int) -> list[TaskSpec]:
    """Step ``step``'s 32 training tasks, about a share each of the levels."""
    tasks: list[TaskSpec] = []
    for i, lv in enumerate(levels):
        n = 32 // len(levels) + (1 if i < 32 % len(levels) else 0)
        tasks += synth.propose(ProposalRequest(n=n, seed=seed * 100_000 + step * 10 + i, level=lv))
    return tasks


def greedy(solver: LinearPGSolver, tasks: list[TaskSpec]) -> float:
    """Mean reward of one greedy episode a task."""
    solver.greedy = True
    try:
        return float(np.mean([e.reward.value for e in solver.attempt(tasks, seed=777)]))
    finally:
        solver.greedy = False


def family(task: TaskSpec) -> str:
    """The task's family and its reference's tools, in order, repeats folded."""
    tools: list[str] = []
    for call in task.solution:
        if call.tool != "submit" and (not tools or tools[-1] != call.tool):
            tools.append(call.tool)
    return f"{task.provenance.get('plan', {}).get('family', '?')}: {' '.join(tools)}"


def by_family(solver: LinearPGSolver, tasks: list[TaskSpec]) -> dict[str, float]:
    """Held-out success per family, 4 sampled episodes a task."""
    rewards: dict[str, list[int]] = defaultdict(list)
    for seed in range(4):
        for task, episode in zip(tasks, solver.attempt(tasks, seed=900 + seed), strict=True):
            rewards[family(task)].append(episode.reward.value)
    return {f: float(np.mean(r)) for f, r in rewards.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", default="retail")
    parser.add_argument("--levels", default="1,2,3")
    parser.add_argument("--updates", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="5 updates (a smoke run)")
    args = parser.parse_args()
    domains = args.domains.split(",")
    levels = [int(x) for x in args.levels.split(",")]
    updates = 5 if args.quick else args.updates
    held = held_out(domains, levels)
    every = [t for lv in levels for t in held[lv]]
    print(f"domains {domains}, levels {levels}, {updates} updates, seed {args.seed}\n")

    started = time.perf_counter()
    pg = LinearPGSolver(lr=0.2)
    untrained = by_family(pg, every)
    synth = ProceduralSynthesizer(domains, world_pool=4)
    for step in range(updates):
        tasks = batch(synth, levels, args.seed, step)
        pg.learn(pg.attempt([t for t in tasks for _ in range(4)], seed=args.seed * 1000 + step))
    pg_seconds = time.perf_counter() - started

    started = time.perf_counter()
    imitator = LinearPGSolver(lr=0.2, replay=0.0)
    synth = ProceduralSynthesizer(domains, world_pool=4)
    worlds = WorldCache()  # each world built once
    for step in range(updates):
        tasks = batch(synth, levels, args.seed, step)
        imitator.remember(tasks)
        references = [worlds.world(t.world).run(t, t.solution) for t in tasks]
        # a reference episode with reward 1 against a group of one at baseline 0: the imitation step
        imitator.baseline = 0.0
        imitator.learn([e for e in references if e.reward.value])
    bc_seconds = time.perf_counter() - started
    worlds.close()

    print("held-out success, greedy (policy gradient | imitation of the references)")
    for lv in levels:
        a, b = greedy(pg, held[lv]), greedy(imitator, held[lv])
        ratio = f"{b / a:4.1f}x" if a else " n/a"
        print(f"  level {lv}: {a:.2f} | {b:.2f}   imitation / policy gradient {ratio}")
    print(f"  ({pg_seconds:.0f} s | {bc_seconds:.0f} s)\n")

    trained = by_family(pg, every)
    print("per family: held-out success untrained -> after policy gradient (tasks)")
    counts: dict[str, int] = defaultdict(int)
    for task in every:
        counts[family(task)] += 1
    for name in sorted(trained, key=lambda f: (trained[f], untrained[f])):
        mark = "   never solved by chance" if untrained[name] == 0 == trained[name] else ""
        print(f"  {untrained[name]:.2f} -> {trained[name]:.2f} ({counts[name]:3d})  {name}{mark}")


if __name__ == "__main__":
    main()
