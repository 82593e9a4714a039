"""The arena on Ray: episodes per second with 1 and 2 Solver actors, and the share of time Ray costs.

    python benchmarks/bench_arena.py [--generations N]

Two measurements, each against a baseline from the same run:

* **Solving phase.** The same chunks of episodes (64 tasks × 4 rollouts, in
  chunks of 64, with a trained policy) played three ways:
  - in this process, with no Ray at all (the baseline);
  - by 1 Solver actor, the weights sent with the calls as in the arena;
  - by 2 Solver actors.

  Ray's share of the time is ``(1 actor − in process) / 1 actor``; the
  speed-up is ``1 actor / 2 actors``.
* **End to end.** The quickstart experiment for N generations with 1 and with
  2 Solver actors: training episodes per second of wall time, everything
  included (synthesis, judging, learning, eval, writing the log).
"""

from __future__ import annotations

import argparse
import tempfile
import time

import ray
from coevo.agents.linear_pg import LinearPGSolver
from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.arena.run.experiment import load_experiment
from coevo.arena.run.hosts import SolverHost
from coevo.arena.run.loop import run_experiment

CHUNK = 64


def chunks_and_state() -> tuple[list[list], bytes]:
    synth = ProceduralSynthesizer(["retail"], world_pool=4)
    tasks = [
        t
        for seed in range(8)
        for t in synth.propose(ProposalRequest(n=8, seed=seed, level=1 + seed % 2))
    ]
    solver = LinearPGSolver(lr=0.2)
    for step in range(20):
        batch = tasks[(step * 8) % len(tasks) :][:8]
        solver.learn(solver.attempt([t for t in batch for _ in range(4)], seed=step))
    order = [t for t in tasks for _ in range(4)]
    return [order[i : i + CHUNK] for i in range(0, len(order), CHUNK)], solver.get_state()


def in_process(chunks: list[list], state: bytes) -> tuple[float, int]:
    solver = LinearPGSolver()
    solver.set_state(state)
    for chunk in chunks:  # worlds built before timing, as an actor that has played before
        solver.attempt(chunk[:1], seed=0)
    start = time.perf_counter()
    episodes = sum(len(solver.attempt(chunk, seed=i)) for i, chunk in enumerate(chunks))
    return time.perf_counter() - start, episodes


def with_actors(chunks: list[list], state: bytes, n: int) -> float:
    host = ray.remote(SolverHost)
    actors = [host.options(num_cpus=0).remote("linear-pg", {}) for _ in range(n)]
    ref = ray.put(state)
    warm = [actors[i % n].attempt.remote(1, [ref], chunk[:1], 0) for i, chunk in enumerate(chunks)]
    ray.get(warm)
    start = time.perf_counter()
    refs = [actors[i % n].attempt.remote(1, [ref], chunk, i) for i, chunk in enumerate(chunks)]
    ray.get(refs)
    seconds = time.perf_counter() - start
    for actor in actors:
        ray.kill(actor)
    return seconds


def end_to_end(generations: int, actors: int) -> float:
    exp = load_experiment(
        "experiments/quickstart.toml",
        [f"run.generations={generations}", f"solver.actors={actors}"],
    )
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        summary = run_experiment(exp, out)
        seconds = time.perf_counter() - start
    episodes = sum(r.row["train_episodes"] for r in summary.reports)
    return episodes / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--generations", type=int, default=10, help="generations per end-to-end run"
    )
    args = parser.parse_args()
    chunks, state = chunks_and_state()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    base, episodes = in_process(chunks, state)
    one = with_actors(chunks, state, 1)
    two = with_actors(chunks, state, 2)
    print(f"solving phase: {episodes} episodes in chunks of {CHUNK}")
    print(f"  in process (baseline): {episodes / base:7.0f} episodes/s")
    print(
        f"  1 Solver actor:        {episodes / one:7.0f} episodes/s   Ray's share of the time: {(one - base) / one:.0%}"
    )
    print(
        f"  2 Solver actors:       {episodes / two:7.0f} episodes/s   speed-up over 1 actor: {one / two:.2f}x"
    )
    e1 = end_to_end(args.generations, 1)
    e2 = end_to_end(args.generations, 2)
    print(f"end to end (quickstart, {args.generations} generations, Ray already up):")
    print(f"  1 Solver actor:  {e1:6.0f} training episodes/s")
    print(f"  2 Solver actors: {e2:6.0f} training episodes/s   ratio {e2 / e1:.2f}x")
    ray.shutdown()


if __name__ == "__main__":
    main()
