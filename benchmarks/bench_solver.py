"""The linear-pg Solver: episodes per second, and learning curves on worlds it never trained on.

    python benchmarks/bench_solver.py [--quick] [--updates N] [--domains retail,hr]

One process, one core.

* **Speed**: episodes per second of ``attempt`` (an untrained and a trained
  policy) and of ``learn``, against the baseline measured in the same run:
  replaying each task's reference solution in the same worlds (the
  environment alone: SQLite, the tool guard and the verifier). The ratio
  ``environment / solver`` is what the policy itself costs.
* **Learning**: for two task families (level-1 questions and level-1
  actions), held-out success (one sampled episode per task, worlds of seeds
  never trained on) against episodes trained, starting from the untrained
  policy (uniform over the action space: the baseline). Each update is 8
  tasks attempted 4 times (group-mean baseline).
"""

from __future__ import annotations

import argparse
import time

from coevo.agents.linear_pg import LinearPGSolver
from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.arena import TaskSpec, World

K = 4
PER_UPDATE = 8


def tasks_of(
    synth: ProceduralSynthesizer, seeds: range, level: int, family: str | None, n: int = 8
) -> list[TaskSpec]:
    families = [family] if family else None
    return [
        t
        for seed in seeds
        for t in synth.propose(ProposalRequest(n=n, seed=seed, level=level, families=families))
    ]


def success(solver: LinearPGSolver, tasks: list[TaskSpec]) -> float:
    episodes = solver.attempt(tasks, seed=7)
    return sum(e.reward.value for e in episodes) / len(episodes)


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


def solver_rates(solver: LinearPGSolver, tasks: list[TaskSpec]) -> tuple[float, float]:
    """(attempt, learn) episodes per second; the solver's worlds are built before timing."""
    solver.attempt(tasks[:: max(1, len(tasks) // 20)], seed=0)  # builds every world once
    batch = [t for t in tasks for _ in range(K)]
    start = time.perf_counter()
    episodes = solver.attempt(batch, seed=1)
    act = len(batch) / (time.perf_counter() - start)
    probe = LinearPGSolver()
    probe.set_state(solver.get_state())
    probe.remember(tasks)
    start = time.perf_counter()
    probe.learn(
        episodes
    )  # from episodes made elsewhere: decisions rebuilt, the learner's real path
    learn = len(batch) / (time.perf_counter() - start)
    return act, learn


def curve(
    synth: ProceduralSynthesizer, family: str, updates: int, every: int
) -> list[tuple[int, float, float]]:
    train = tasks_of(synth, range(0, 12), 1, family)
    held = tasks_of(synth, range(500, 505), 1, family)
    solver = LinearPGSolver(lr=0.2)
    points = [(0, success(solver, held), 0.0)]
    start = time.perf_counter()
    for step in range(updates):
        first = (step * PER_UPDATE) % len(train)
        chosen = train[first : first + PER_UPDATE]
        solver.learn(solver.attempt([t for t in chosen for _ in range(K)], seed=step))
        if (step + 1) % every == 0:
            points.append(
                ((step + 1) * PER_UPDATE * K, success(solver, held), time.perf_counter() - start)
            )
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer updates (a smoke run)")
    parser.add_argument("--updates", type=int, default=120, help="updates per learning curve")
    parser.add_argument(
        "--domains",
        default="retail,hr",
        help="comma-separated procedural domains (default: retail,hr)",
    )
    args = parser.parse_args()
    updates = 20 if args.quick else args.updates
    every = max(1, updates // 6)
    synth = ProceduralSynthesizer(args.domains.split(","))

    print(f"domains: {args.domains}; one process\n")
    print("speed (level 1-2 tasks, each attempted 4 times)")
    speed_tasks = tasks_of(synth, range(900, 904), 1, None, n=10) + tasks_of(
        synth, range(910, 914), 2, None, n=10
    )
    environment = replay_rate(speed_tasks)
    fresh = LinearPGSolver(lr=0.2)
    act0, learn0 = solver_rates(fresh, speed_tasks)
    trained = LinearPGSolver(lr=0.2)
    practice = tasks_of(synth, range(0, 12), 1, None)
    for step in range(30):
        first = (step * PER_UPDATE) % len(practice)
        chosen = practice[first : first + PER_UPDATE]
        trained.learn(trained.attempt([t for t in chosen for _ in range(K)], seed=step))
    act1, learn1 = solver_rates(trained, speed_tasks)
    print(f"  environment alone (reference replay): {environment:9.0f} episodes/s")
    print(
        f"  untrained policy: attempt {act0:6.0f} episodes/s, learn {learn0:6.0f} episodes/s"
        f"  (environment / attempt = {environment / act0:.0f}x)"
    )
    print(
        f"  trained policy:   attempt {act1:6.0f} episodes/s, learn {learn1:6.0f} episodes/s"
        f"  (environment / attempt = {environment / act1:.0f}x)"
    )

    for family in ("question", "action"):
        print(f"\nlearning curve: level-1 {family}s, held-out worlds (seeds 500-504)")
        print(f"  {'episodes':>8}  {'held-out success':>16}  {'seconds':>7}")
        for episodes, rate, seconds in curve(synth, family, updates, every):
            label = "  (untrained: the baseline)" if episodes == 0 else ""
            print(f"  {episodes:8d}  {rate:16.2f}  {seconds:7.1f}{label}")


if __name__ == "__main__":
    main()
