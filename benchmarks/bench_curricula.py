"""Does the curriculum matter? The same budget of episodes under each setup, over several seeds.

    python benchmarks/bench_curricula.py [--quick] [--seeds 0,1,2,3,4] [--generations 30]
                                         [--setups uniform,plr,accel,target-band,learned-synth,learned-synth+plr]

Each run is ``experiments/curricula.toml`` (same solver, budget and eval
suite: 30 generations × 32 tasks × 4 rollouts) with one setup:

* a curriculum name (``uniform``, ``plr``, ``accel``, ``target-band``) over
  the procedural Synthesizer;
* ``learned-synth``: the learning Synthesizer, its proposals passed straight
  through (``uniform`` trains on the fresh proposals as they come, and the
  learned Synthesizer takes a request's level as a hint it ignores);
* ``learned-synth+plr``: the learning Synthesizer under PLR.

``uniform`` is the baseline, measured in the same invocation on the same
seeds. Printed per setup: the median and range over seeds of the final
held-out eval success (overall and on levels 2–3), and of the training
episodes each run needed for its eval success to first reach uniform's
final eval success on the same seed (``never`` when it did not within the
budget); then the ratio of that median to uniform's budget, and on how many
seeds the setup beat uniform on levels 2–3. The aim: an adaptive setup
reaches uniform's final eval success with at most half the episodes on the
median seed, and beats it on levels 2–3 on every seed.

``--quick`` (seeds 0 and 1, 12 generations) is for iterating.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import ray
from coevo.arena.gamelog import GameLog
from coevo.run.experiment import load_experiment
from coevo.run.loop import run_experiment

SETUPS = ("uniform", "plr", "accel", "target-band", "learned-synth", "learned-synth+plr")


def overrides(setup: str) -> list[str]:
    """The ``--set`` overrides of ``experiments/curricula.toml`` that make a setup."""
    if setup.startswith("learned-synth"):
        curriculum = setup.partition("+")[2] or "uniform"
        # every proposal is played when passed straight through (no spares to leave unplayed)
        spares = ["curriculum.oversample=1.0"] if curriculum == "uniform" else []
        return ['synthesizer.name="learned-synth"', f'curriculum.name="{curriculum}"', *spares]
    return [f'curriculum.name="{setup}"']


def one_run(setup: str, seed: int, generations: int) -> dict[str, Any]:
    """One run's curve: eval success (overall and levels 2–3) against training episodes."""
    exp = load_experiment(
        "experiments/curricula.toml",
        [*overrides(setup), f"run.seed={seed}", f"run.generations={generations}"],
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        run_experiment(exp, out)
        log = GameLog(out)
        gens = log.read("generations").to_pylist()
        evals = log.read("evals").to_pylist()
    total, episodes = 0, {}
    for row in gens:
        total += row["train_episodes"]
        episodes[row["gen"]] = total
    curve = []
    for gen in sorted({r["gen"] for r in evals}):
        rows = [r for r in evals if r["gen"] == gen]
        hard = [r for r in rows if (r["level"] or 0) >= 2]
        curve.append(
            (
                episodes[gen],
                sum(r["success"] for r in rows) / len(rows),
                sum(r["success"] for r in hard) / len(hard) if hard else 0.0,
            )
        )
    return {
        "curve": curve,
        "eval": curve[-1][1],
        "hard": curve[-1][2],
        "episodes": total,
        "seconds": time.perf_counter() - started,
    }


def reached(curve: list[tuple[int, float, float]], target: float) -> int | None:
    """Training episodes when eval success first reached ``target`` (None: never)."""
    return next((episodes for episodes, success, _ in curve if success >= target), None)


def spread(values: list[float]) -> str:
    """``median [min–max]``."""
    return f"{statistics.median(values):.2f} [{min(values):.2f}–{max(values):.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seeds 0,1 and 12 generations")
    parser.add_argument("--seeds", default=None, help="comma-separated (default 0,1,2,3,4)")
    parser.add_argument("--generations", type=int, default=None, help="default 30")
    parser.add_argument(
        "--setups", default="uniform,plr,accel,target-band,learned-synth,learned-synth+plr"
    )
    args = parser.parse_args()
    seeds = [int(s) for s in (args.seeds or ("0,1" if args.quick else "0,1,2,3,4")).split(",")]
    generations = args.generations or (12 if args.quick else 30)
    setups = args.setups.split(",")
    if "uniform" not in setups:
        setups.insert(0, "uniform")  # the baseline, measured in the same invocation
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    print(
        f"budget: {generations} generations of experiments/curricula.toml (32 tasks × 4 "
        f"rollouts each); seeds {seeds}\n"
    )
    results: dict[str, list[dict[str, Any]]] = {}
    for setup in setups:
        results[setup] = [one_run(setup, seed, generations) for seed in seeds]
        minutes = sum(r["seconds"] for r in results[setup]) / 60
        print(f"  ran {setup} on {len(seeds)} seeds in {minutes:.1f} min", flush=True)
    base = results["uniform"]
    budget = base[0]["episodes"]
    print(
        f"\n{'setup':<18} {'final eval':>18} {'levels 2–3':>18} {'episodes to uniform':>28} "
        f"{'ratio':>6} {'beats L2–3':>10}"
    )
    for setup, runs in results.items():
        needed = [reached(r["curve"], b["eval"]) for r, b in zip(runs, base, strict=True)]
        shown = "/".join("never" if n is None else str(n) for n in needed)
        # a run that never reached it counts as needing more than the budget
        median = statistics.median([n if n is not None else budget + 1 for n in needed])
        ratio = f"{median / budget:.2f}" if median <= budget else ">1"
        beats = sum(r["hard"] > b["hard"] for r, b in zip(runs, base, strict=True))
        print(
            f"{setup:<18} {spread([r['eval'] for r in runs]):>18} "
            f"{spread([r['hard'] for r in runs]):>18} "
            f"{(f'{median:.0f}' if median <= budget else 'never') + ' (' + shown + ')':>28} "
            f"{ratio:>6} {f'{beats}/{len(runs)}':>10}",
            flush=True,
        )
    print("\nper seed (final eval, levels 2–3):")
    for setup, runs in results.items():
        cells = ", ".join(
            f"{seed}: {r['eval']:.2f}/{r['hard']:.2f}" for seed, r in zip(seeds, runs, strict=True)
        )
        print(f"  {setup:<18} {cells}")
    ray.shutdown()


if __name__ == "__main__":
    main()
