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
* **Learner step.** One learner step on those episodes, with the decisions
  rebuilt from the episodes and with the decisions the players shipped
  (``coevo.agents.decisions``), in CPU seconds of this process.
* **End to end.** The quickstart experiment for N generations with 1 and 2
  Solver actors, at ``run.max_staleness`` 0 (phases in order) and 1 (judging,
  solving, learning and the World model's update overlap): training episodes
  per second of wall time, everything included (synthesis, judging, learning,
  eval, writing the log), the ratio to 1 actor at staleness 0, and Ray's
  share of the wall time: the time when neither the driver (outside
  ``ray.get``) nor any actor (inside a role's call, as the actors record it)
  was working; and the driver's time per phase of a generation (the
  ``phases`` of each ``generation`` event, averaged: at staleness 1, ``learn``
  is the wait for the previous generation's learner step after solving) and
  each actor's time inside its role's calls per generation (the learner's is
  its step).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from typing import Any

import ray
from coevo.agents.linear_pg import LinearPGSolver
from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.run.actors.hosts import remote_host
from coevo.run.experiment import load_experiment
from coevo.run.generation.overlap import covered
from coevo.run.loop import run_experiment

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


def learner_step(chunks: list[list], state: bytes) -> dict[str, float]:
    """CPU seconds of one learner step on the chunks' episodes: rebuilding the decisions, or taking them shipped.

    Also the players' CPU seconds to pack what they ship (``drain_decisions``).
    CPU time of this process, so another job on the machine changes it little.
    """
    player = LinearPGSolver()
    player.set_state(state)
    episodes, blobs, packing = [], [], 0.0
    for i, chunk in enumerate(chunks):
        episodes += player.attempt(chunk, seed=i)
        start = time.process_time()
        blobs.append(player.drain_decisions())
        packing += time.process_time() - start
    out = {"packing": packing, "bytes": sum(len(b) for b in blobs)}
    for way in ("rebuilt", "shipped"):
        learner = LinearPGSolver()
        learner.set_state(state)
        learner.remember([t for chunk in chunks for t in chunk])
        start = time.process_time()
        if way == "shipped":
            learner.take_decisions(blobs)
        learner.learn(episodes)
        out[way] = time.process_time() - start
    return out


def with_actors(chunks: list[list], state: bytes, n: int) -> float:
    host = remote_host("solver")
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


class Waits:
    """The intervals the driver's main thread spends in ``ray.get`` (the rest of its time it works)."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []
        self._get = ray.get

    def __enter__(self) -> Waits:
        def timed_get(*args, **kwargs):
            if threading.current_thread() is not threading.main_thread():
                return self._get(*args, **kwargs)
            start = time.time()
            try:
                return self._get(*args, **kwargs)
            finally:
                self.spans.append((start, time.time()))

        ray.get = timed_get
        return self

    def __exit__(self, *exc) -> None:
        ray.get = self._get


def end_to_end(generations: int, actors: int, staleness: int) -> dict[str, Any]:
    """The quickstart with ``actors`` Solver actors at ``staleness``: episodes/s and Ray's share of wall time.

    Ray's share is the time, from the first generation to the end, when neither
    the driver (outside ``ray.get``) nor any actor (in a role's call) was working:
    scheduling, (de)serialising and moving objects.
    """
    exp = load_experiment(
        "experiments/quickstart.toml",
        [
            f"run.generations={generations}",
            f"solver.actors={actors}",
            f"run.max_staleness={staleness}",
        ],
    )
    timeline: list[tuple[str, float, float]] = []
    begun: list[float] = []

    def watch(arena) -> None:
        arena.timeline = timeline
        begun.append(time.time())

    with tempfile.TemporaryDirectory() as out, Waits() as waits:
        summary = run_experiment(exp, out, on_start=watch)
        end = time.time()
    start = begun[0]
    episodes = sum(r.row["train_episodes"] for r in summary.reports)
    waiting = covered(waits.spans, start, end)
    actor_spans = [(s, e) for _, s, e in timeline]
    driver_spans, last = [], start  # the driver works between its waits
    for s, e in sorted(waits.spans):
        if s > last:
            driver_spans.append((last, s))
        last = max(last, e)
    driver_spans.append((last, end))
    working = covered(actor_spans + driver_spans, start, end)
    wall = end - start
    phases: dict[str, float] = {}
    for report in summary.reports:
        for phase, seconds in report.phases.items():
            phases[phase] = phases.get(phase, 0.0) + seconds / len(summary.reports)
    labels = sorted({a for a, _, _ in timeline})
    busy = {
        a: covered([(s, e) for b, s, e in timeline if b == a], start, end) / len(summary.reports)
        for a in labels
    }
    return {
        "busy": busy,
        "episodes_per_s": episodes / wall,
        "seconds_per_gen": wall / len(summary.reports),
        "ray_share": 1 - working / wall,
        "driver_waiting": waiting / wall,
        "phases": phases,
    }


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
    step = learner_step(chunks, state)
    print(f"learner step on those {episodes} episodes (CPU seconds of this process):")
    print(
        f"  decisions rebuilt from the episodes: {step['rebuilt']:.2f} s   "
        f"shipped by the players: {step['shipped']:.2f} s "
        f"({step['rebuilt'] / step['shipped']:.1f}x less; packing them on the players: "
        f"{step['packing']:.2f} s, {step['bytes'] / 1e6:.1f} MB)"
    )
    print(f"end to end (quickstart, {args.generations} generations, Ray already up):")
    base = None
    for staleness in (0, 1):
        for actors in (1, 2):
            got = end_to_end(args.generations, actors, staleness)
            base = base or got["episodes_per_s"]
            print(
                f"  {actors} Solver actor{'s' if actors > 1 else ' '}, max_staleness {staleness}: "
                f"{got['episodes_per_s']:5.0f} training episodes/s "
                f"({got['seconds_per_gen']:.2f} s/generation)   "
                f"ratio to 1 actor at 0: {got['episodes_per_s'] / base:.2f}x   "
                f"Ray's share of wall time: {got['ray_share']:.1%}"
            )
            print(
                "      driver's phases, s/generation: "
                + ", ".join(f"{k} {v:.2f}" for k, v in got["phases"].items() if v >= 0.005)
            )
            print(
                "      actors busy, s/generation: "
                + ", ".join(f"{k} {v:.2f}" for k, v in got["busy"].items() if v >= 0.005)
            )
    ray.shutdown()


if __name__ == "__main__":
    main()
