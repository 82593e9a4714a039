"""The linear-pg Solver: episodes per second, and learning curves per level on worlds it never trained on.

    python benchmarks/bench_solver.py [--quick] [--updates N] [--seeds 0,1,2] [--domains retail]

One process, one core. Two configurations are measured side by side in the
same run, on the same tasks and seeds:

* **current**: ``LinearPGSolver(lr=0.2)`` with today's defaults (what
  ``coevo run quickstart`` plays);
* **old** (the baseline): ``LinearPGSolver(lr=0.2, prior=0, adam_eps=1e-8)``,
  the configuration before the prior and the Adam floor (see docs/roles.md).

**Speed**: episodes per second of ``attempt`` (an untrained and a trained
policy) and of ``learn`` (decisions rebuilt from episodes made elsewhere, the
learner's real path), against the environment alone (replaying each task's
reference solution in the same worlds: SQLite, the tool guard and the
verifier).

**Learning**: the quickstart's budget. Each update is 32 tasks of levels
1–3 (about a third each) drawn in 4 training worlds (``world_pool=4``),
attempted 4 times (group-mean baseline); 30 updates are 3,840 episodes.
Held-out success per level is the mean reward of 2 sampled episodes on each
of 36 tasks per level from worlds of seeds never trained on (ids, names and
amounts differ, so memorised values are no help). The untrained policies are
the rows at 0 episodes; the last rows are the ratio current / old per level.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from typing import Any

from coevo.agents.linear_pg import LinearPGSolver
from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.arena import TaskSpec, World

K = 4
PER_UPDATE = 32
LEVELS = (1, 2, 3)
CONFIGS: Mapping[str, Mapping[str, Any]] = {
    "current": {"lr": 0.2},
    "old": {"lr": 0.2, "prior": 0.0, "adam_eps": 1e-8},
}


def held_out(domains: list[str]) -> dict[int, list[TaskSpec]]:
    """36 tasks per level in worlds of seeds 500–505 (plus 1000 × level): never trained on."""
    synth = ProceduralSynthesizer(domains)
    return {
        level: [
            t
            for seed in range(500, 506)
            for t in synth.propose(ProposalRequest(n=6, seed=seed + 1000 * level, level=level))
        ]
        for level in LEVELS
    }


def batch(synth: ProceduralSynthesizer, run_seed: int, step: int) -> list[TaskSpec]:
    """Update ``step``'s 32 tasks: about a third of each level, in the synthesizer's 4 worlds."""
    tasks: list[TaskSpec] = []
    for i, level in enumerate(LEVELS):
        n = PER_UPDATE // len(LEVELS) + (1 if i < PER_UPDATE % len(LEVELS) else 0)
        request = ProposalRequest(n=n, seed=run_seed * 100_000 + step * 10 + i, level=level)
        tasks += synth.propose(request)
    return tasks


def success(solver: LinearPGSolver, tasks: list[TaskSpec]) -> float:
    """Mean reward of two sampled episodes per task."""
    episodes = solver.attempt(tasks, seed=777) + solver.attempt(tasks, seed=778)
    return sum(e.reward.value for e in episodes) / len(episodes)


def curve(
    config: Mapping[str, Any],
    domains: list[str],
    held: dict[int, list[TaskSpec]],
    run_seed: int,
    updates: int,
    every: int,
) -> tuple[list[tuple[int, dict[int, float], float]], LinearPGSolver]:
    """Held-out success per level every ``every`` updates: ``(episodes, {level: success}, seconds)``."""
    synth = ProceduralSynthesizer(domains, world_pool=4)
    solver = LinearPGSolver(**config)
    points = [(0, {lv: success(solver, held[lv]) for lv in LEVELS}, 0.0)]
    seconds = 0.0
    for step in range(updates):
        tasks = batch(synth, run_seed, step)
        start = time.perf_counter()
        solver.learn(
            solver.attempt([t for t in tasks for _ in range(K)], seed=run_seed * 1000 + step)
        )
        seconds += time.perf_counter() - start
        if (step + 1) % every == 0 or step + 1 == updates:
            rates = {lv: success(solver, held[lv]) for lv in LEVELS}
            points.append(((step + 1) * PER_UPDATE * K, rates, seconds))
    return points, solver


def replay_rate(tasks: list[TaskSpec]) -> float:
    """Episodes per second of replaying the reference solutions (worlds built before timing)."""
    worlds = {t.world_id: World(t.world) for t in tasks}
    start = time.perf_counter()
    for task in tasks:
        worlds[task.world_id].run(task, task.solution)
    seconds = time.perf_counter() - start
    for world in worlds.values():
        world.close()
    return len(tasks) / seconds


def solver_rates(
    solver: LinearPGSolver, config: Mapping[str, Any], tasks: list[TaskSpec]
) -> tuple[float, float]:
    """(attempt, learn) episodes per second; the solver's worlds are built before timing."""
    solver.attempt(tasks[:: max(1, len(tasks) // 20)], seed=0)  # builds every world once
    repeated = [t for t in tasks for _ in range(K)]
    start = time.perf_counter()
    episodes = solver.attempt(repeated, seed=1)
    act = len(repeated) / (time.perf_counter() - start)
    learner = LinearPGSolver(**config)
    learner.set_state(solver.get_state())
    learner.remember(tasks)
    start = time.perf_counter()
    learner.learn(
        episodes
    )  # decisions rebuilt from episodes made elsewhere: the learner's real path
    learn = len(repeated) / (time.perf_counter() - start)
    return act, learn


def _row(cells: list[str]) -> str:
    return "  " + "  ".join(cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 updates, one seed (a smoke run)")
    parser.add_argument("--updates", type=int, default=30, help="updates per learning curve")
    parser.add_argument("--seeds", default="0", help="comma-separated run seeds (default: 0)")
    parser.add_argument("--domains", default="retail", help="procedural domains (default: retail)")
    args = parser.parse_args()
    updates = 10 if args.quick else args.updates
    seeds = [0] if args.quick else [int(s) for s in args.seeds.split(",")]
    domains = args.domains.split(",")
    every = max(1, updates // 3)
    held = held_out(domains)

    print(f"domains: {args.domains}; one process; configurations: {dict(CONFIGS)}\n")
    finals: dict[str, list[dict[int, float]]] = {name: [] for name in CONFIGS}
    trained: dict[str, LinearPGSolver] = {}
    for seed in seeds:
        curves = {}
        for name, config in CONFIGS.items():
            curves[name], trained[name] = curve(config, domains, held, seed, updates, every)
            finals[name].append(curves[name][-1][1])
        print(f"learning curve, run seed {seed}: held-out success per level (current | old)")
        header = ["episodes"] + [f"L{lv} cur  old" for lv in LEVELS] + ["seconds cur  old"]
        print(_row([f"{h:>14}" for h in header]))
        for (episodes, cur, t_cur), (_, old, t_old) in zip(
            curves["current"], curves["old"], strict=True
        ):
            cells = [f"{episodes:>14d}"] + [f"{cur[lv]:8.2f} {old[lv]:5.2f}" for lv in LEVELS]
            cells.append(f"{t_cur:9.1f} {t_old:4.1f}")
            label = "  (untrained)" if episodes == 0 else ""
            print(_row(cells) + label)
        print()

    print(f"after {updates * PER_UPDATE * K} episodes, mean over run seeds {seeds}:")
    for lv in LEVELS:
        cur = sum(f[lv] for f in finals["current"]) / len(seeds)
        old = sum(f[lv] for f in finals["old"]) / len(seeds)
        ratio = f"{cur / old:5.1f}x" if old else "  n/a (old 0)"
        print(f"  level {lv}: current {cur:.2f}  old {old:.2f}  ratio current/old {ratio}")

    print("\nspeed (level 1-3 tasks, each attempted 4 times)")
    speed = [t for level in LEVELS for t in batch(ProceduralSynthesizer(domains), 9, level)]
    environment = replay_rate(speed)
    print(f"  environment alone (reference replay): {environment:7.0f} episodes/s")
    for name, config in CONFIGS.items():
        for state, solver in (("untrained", LinearPGSolver(**config)), ("trained", trained[name])):
            act, learn = solver_rates(solver, config, speed)
            print(
                f"  {name:>7} {state:>9}: attempt {act:5.0f} episodes/s, learn {learn:5.0f} "
                f"episodes/s  (environment / attempt = {environment / act:.0f}x)"
            )


if __name__ == "__main__":
    main()
