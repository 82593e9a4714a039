"""Offline synthesis throughput, against baselines measured in the same run.

    python benchmarks/bench_synth.py [--quick] [--n N]

For every procedural domain and for the miner (on a 120,000-row database
built here), one core:

* accepted tasks per second, generation + every mechanical Judge check
  (valid, oracle, noop, unsolved, partial, determinism, grounded): the figure
  (aim >= 200/s for procedural domains);
* the two parts alone: generation only, and the Judge only on the same tasks
  (the baseline: the ratio ``judge-only / total`` is the share of the time
  spent proving tasks rather than making them);
* the world build (once per world, not in the per-task figures);
* the Judge isolated in a worker process (:class:`coevo.arena.isolation.IsolatedJudge`,
  the Judge roles' default: a task that overruns the wall clock costs a
  worker, not the run) against the same Judge in this process: the ratio is
  the cost of the isolation.

Each part is timed three times and the fastest kept.

Worlds are built before timing (a long run reuses a few worlds); the first
task of each world pays for compiling its tools, as in a real run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.mining import Miner
from coevo.agents.synthesizers.procedural import DOMAINS, ProceduralSynthesizer
from coevo.arena import WorldCache, assess_task
from coevo.arena.isolation import IsolatedJudge

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.agents.databases import build_shop


def _judge_isolated(tasks, worlds) -> tuple[float, int]:
    with IsolatedJudge() as judge:
        judge.assess(tasks[:1], {w.world_id: w for w in worlds})  # start the worker
        start = time.perf_counter()
        accepted = sum(v.accepted for v in judge.assess(tasks, {w.world_id: w for w in worlds}))
        return time.perf_counter() - start, accepted


def _judge(tasks, worlds) -> tuple[float, int]:
    cache = WorldCache(specs={w.world_id: w for w in worlds})
    start = time.perf_counter()
    accepted = sum(assess_task(t, cache).accepted for t in tasks)
    seconds = time.perf_counter() - start
    cache.close()
    return seconds, accepted


REPEATS = 3
"""Each part is timed this many times and the fastest run kept (the least disturbed by noise)."""


def bench_domain(name: str, n: int) -> dict[str, float]:
    builds, generates, judges, isolated = [], [], [], []
    for _ in range(REPEATS):
        synth = ProceduralSynthesizer([name])
        start = time.perf_counter()
        world = synth.world(name, 1)
        builds.append(time.perf_counter() - start)
        tasks = []
        start = time.perf_counter()
        for level in range(1, 6):
            tasks += synth.propose(ProposalRequest(n=n // 5, seed=1, level=level))
        generates.append(time.perf_counter() - start)
        seconds, accepted = _judge(tasks, [world])
        judges.append(seconds)
        isolated.append(_judge_isolated(tasks, [world])[0])
    build, generate, judge = min(builds), min(generates), min(judges)
    return {
        "tasks": len(tasks),
        "accepted": accepted,
        "build_ms": build * 1e3,
        "gen_per_s": len(tasks) / generate,
        "judge_per_s": len(tasks) / judge,
        "total_per_s": accepted / (generate + judge),
        "judge_share": judge / (generate + judge),
        "isolated_per_s": accepted / (generate + min(isolated)),
        "isolation_cost": min(isolated) / judge,
    }


def bench_miner(n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        db = build_shop(Path(folder) / "shop.sqlite")
        mines, generates, judges, isolated = [], [], [], []
        for _ in range(REPEATS):
            start = time.perf_counter()
            miner = Miner(db, seed=1)
            mines.append(time.perf_counter() - start)
            start = time.perf_counter()
            tasks = []
            for level in (None, 1, 2, 3, 4):
                tasks += miner.propose(ProposalRequest(n=n // 5, seed=2, level=level))
            generates.append(time.perf_counter() - start)
            seconds, accepted = _judge(tasks, [miner.world])
            judges.append(seconds)
            isolated.append(_judge_isolated(tasks, [miner.world])[0])
        mine, generate, judge = min(mines), min(generates), min(judges)
    return {
        "tasks": len(tasks),
        "accepted": accepted,
        "build_ms": mine * 1e3,
        "gen_per_s": len(tasks) / generate,
        "judge_per_s": len(tasks) / judge,
        "total_per_s": accepted / (generate + judge),
        "judge_share": judge / (generate + judge),
        "isolated_per_s": accepted / (generate + min(isolated)),
        "isolation_cost": min(isolated) / judge,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer tasks (a smoke run)")
    parser.add_argument("--n", type=int, default=500, help="tasks per source (default %(default)s)")
    args = parser.parse_args()
    n = 50 if args.quick else args.n
    print(
        f"{'source':<12} {'tasks':>6} {'accepted':>8} {'world ms':>9} {'gen/s':>8} {'judge/s':>8} {'accepted/s':>10} {'judge share':>11}"
        f" {'isolated acc/s':>14} {'isolation cost':>14}"
    )
    rows = {name: bench_domain(name, n) for name in DOMAINS}
    rows["miner(shop)"] = bench_miner(n)
    for name, r in rows.items():
        print(
            f"{name:<12} {r['tasks']:>6.0f} {r['accepted']:>8.0f} {r['build_ms']:>9.1f} {r['gen_per_s']:>8.0f} "
            f"{r['judge_per_s']:>8.0f} {r['total_per_s']:>10.0f} {r['judge_share']:>10.0%}"
            f" {r['isolated_per_s']:>14.0f} {r['isolation_cost']:>13.2f}x"
        )
    procedural = [r["total_per_s"] for name, r in rows.items() if name in DOMAINS]
    print(
        f"\nprocedural: {min(procedural):.0f}–{max(procedural):.0f} accepted tasks/s per core "
        f"(aim >= 200); the Judge alone would allow {min(r['judge_per_s'] for r in rows.values()):.0f}–"
        f"{max(r['judge_per_s'] for r in rows.values()):.0f}/s"
    )
    isolated = [r["isolated_per_s"] for name, r in rows.items() if name in DOMAINS]
    print(
        f"isolated Judge (the default): {min(isolated):.0f}–{max(isolated):.0f} accepted tasks/s "
        f"(the Judge in a worker costs {min(r['isolation_cost'] for r in rows.values()):.2f}–"
        f"{max(r['isolation_cost'] for r in rows.values()):.2f}x the Judge in-process)"
    )


if __name__ == "__main__":
    main()
