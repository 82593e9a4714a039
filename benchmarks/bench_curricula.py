"""Does the curriculum matter? The same budget of episodes under each curriculum, several seeds.

    python benchmarks/bench_curricula.py [--seeds 0,1,2] [--curricula uniform,plr,target-band]
                                         [--generations 30] [--threshold 0.4]

Each run is ``experiments/curricula.toml`` with ``curriculum.name`` set
(same synthesizer, solver, budget and eval suite). Printed per curriculum,
as mean over seeds (and the per-seed values):

* held-out eval success at the end, overall and on the hard levels (2 and 3);
* training episodes until eval success first reaches ``--threshold``
  (``never`` if it does not within the budget);
* the mean level trained on in the last third of the run.

``uniform`` is the baseline; the adaptive curricula should reach the same
eval success with fewer episodes.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from typing import Any

import ray
from coevo.arena.gamelog import GameLog
from coevo.arena.run.experiment import load_experiment
from coevo.arena.run.loop import run_experiment


def one_run(curriculum: str, seed: int, generations: int, threshold: float) -> dict[str, Any]:
    exp = load_experiment(
        "experiments/curricula.toml",
        [f'curriculum.name="{curriculum}"', f"run.seed={seed}", f"run.generations={generations}"],
    )
    with tempfile.TemporaryDirectory() as out:
        run_experiment(exp, out)
        log = GameLog(out)
        gens = log.read("generations").to_pylist()
        evals = log.read("evals").to_pylist()
    episodes_by_gen: dict[int, int] = {}
    total = 0
    for row in gens:
        total += row["train_episodes"]
        episodes_by_gen[row["gen"]] = total
    last_gen = max(r["gen"] for r in evals)
    final = [r for r in evals if r["gen"] == last_gen]
    hard = [r for r in final if (r["level"] or 0) >= 2]
    reached = None
    for row in gens:
        if row["eval_success"] is not None and row["eval_success"] >= threshold:
            reached = episodes_by_gen[row["gen"]]
            break
    third = max(1, len(gens) // 3)
    levels = [r["trained_level"] for r in gens[-third:] if r["trained_level"] is not None]
    return {
        "eval": sum(r["success"] for r in final) / len(final),
        "hard": sum(r["success"] for r in hard) / len(hard) if hard else 0.0,
        "reached": reached,
        "level": statistics.mean(levels) if levels else None,
        "episodes": total,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--curricula", default="uniform,plr,target-band")
    parser.add_argument("--generations", type=int, default=30)
    parser.add_argument("--threshold", type=float, default=0.4)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    print(
        f"budget: {args.generations} generations of experiments/curricula.toml; seeds {seeds}; "
        f"threshold {args.threshold}\n"
    )
    print(
        f"{'curriculum':<12} {'eval':>6} {'hard (L2-3)':>12} {'episodes to threshold':>24} {'level (last third)':>19}"
    )
    for name in args.curricula.split(","):
        runs = [one_run(name, seed, args.generations, args.threshold) for seed in seeds]
        reached = [r["reached"] for r in runs]
        shown = "/".join("never" if r is None else str(r) for r in reached)
        done = [r for r in reached if r is not None]
        mean_reached = f"{statistics.mean(done):.0f}" if len(done) == len(runs) else "–"
        print(
            f"{name:<12} {statistics.mean(r['eval'] for r in runs):6.2f} "
            f"{statistics.mean(r['hard'] for r in runs):12.2f} "
            f"{mean_reached + ' (' + shown + ')':>24} "
            f"{statistics.mean(r['level'] or 0 for r in runs):19.2f}",
            flush=True,
        )
        for seed, r in zip(seeds, runs, strict=True):
            print(
                f"    seed {seed}: eval {r['eval']:.2f}, hard {r['hard']:.2f}, level {r['level']:.2f}"
            )
    ray.shutdown()


if __name__ == "__main__":
    main()
