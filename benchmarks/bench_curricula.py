"""Does the curriculum matter? The same budget of episodes under each setup, over many seeds, paired.

    python benchmarks/bench_curricula.py [--setting easy|hard] [--quick] [--seeds 0,...,9]
                                         [--generations 30] [--jobs 2]
                                         [--setups uniform,plr,accel,target-band,learned-synth,learned-synth+plr]

Settings (the same Solver and budget: 30 generations × 32 tasks × 4
rollouts = 3,840 training episodes):

* ``easy`` (the control): ``experiments/curricula.toml``, retail, levels 1–3,
  all reachable, where sampling at random wastes little;
* ``hard``: ``experiments/curricula-hard.toml``, levels 1–5 across the five
  procedural domains, where most of what uniform draws early is out of reach
  or already mastered.

Setups: a curriculum name (``uniform``, ``plr``, ``accel``, ``target-band``)
over the procedural Synthesizer; ``learned-synth`` (the learning
Synthesizer, its proposals passed straight through); ``learned-synth+plr``.
``uniform`` is the baseline, run in the same invocation on the same seeds.

**The eval suite.** Each seed has its own held-out suite
(``eval.seed = 10**6 + seed``), the same for every setup of that seed: the
script checks that every setup of a seed played the same eval task ids and
stops if not (a learned Synthesizer makes the suite as the procedural one
does: a binding request is the procedural synthesizer's). Its size: a
success rate near 0.5 measured on n episodes has a binomial standard error
of 0.5/√n; for one run's figure to be within ±0.05 at 95% (1.96·SE ≤ 0.05)
n ≥ 385, and for the difference of two runs on independent suites
(√2·SE) n ≥ 769 — on a shared suite the task difficulty cancels and fewer
do. The easy setting holds 3 levels × 160 = 480 tasks (SE 0.023, ±0.045),
the hard 5 × 100 = 500 (SE 0.022, ±0.044); the Judge keeps slightly fewer
distinct tasks (about 450–500). A bare world episode costs about a
millisecond, but a linear-pg episode costs about 10 ms (its features and
the in-process host's copies), so the suite costs about 5 s each time it is
played: ``eval.every = 2`` plays it 16 times a run, ``--eval-every 5``
seven (generations 0, 5, …, 25 and the last), about half the run's play.

**Printed per setup**, as the paired difference from uniform on the same
seed, the mean over seeds with a 95% bootstrap interval (seeds resampled,
10,000 times, bootstrap seed 0; :func:`coevo.arena.analysis.paired.paired_bootstrap`):

* ``AUC``: the area under the eval-success curve against training episodes
  (trapezoids between the eval points, divided by the episodes between the
  first and the last: the mean eval success over the run);
* ``final``: the eval success after the last generation;
* ``top``: the final eval success on the upper levels (2–3 easy, 4–5 hard).

An interval above zero is a setup that beat uniform on these seeds. Every run
is in process (``ray.in_process``: no Ray workers; the same log as on Ray),
``--jobs`` of them at a time in worker processes.

``--quick`` (seeds 0–2, 8 generations) is for iterating.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from typing import Any

import numpy as np
from coevo.arena.analysis.paired import paired_bootstrap
from coevo.arena.gamelog import GameLog
from coevo.run.experiment import load_experiment
from coevo.run.loop import run_experiment

SETUPS = ("uniform", "plr", "accel", "target-band", "learned-synth", "learned-synth+plr")
SETTINGS = {
    "easy": ("experiments/curricula.toml", 2),  # the file, and the lowest of the "top" levels
    "hard": ("experiments/curricula-hard.toml", 4),
}
IN_PROCESS = ("ray.in_process=true", "judge.config.isolate=false")
EVAL_SEED = 10**6


def overrides(setup: str) -> list[str]:
    """The ``--set`` overrides of the setting's experiment file that make a setup."""
    if setup.startswith("learned-synth"):
        curriculum = setup.partition("+")[2] or "uniform"
        # every proposal is played when passed straight through (no spares to leave unplayed)
        spares = ["curriculum.oversample=1.0"] if curriculum == "uniform" else []
        return ['synthesizer.name="learned-synth"', f'curriculum.name="{curriculum}"', *spares]
    if setup not in SETUPS:
        raise SystemExit(f"unknown setup {setup!r}; choose from {', '.join(SETUPS)}")
    return [f'curriculum.name="{setup}"']


def auc(curve: list[tuple[int, float, float]]) -> float:
    """The mean eval success over the run: trapezoids between eval points over training episodes, divided by their span."""
    x = np.array([c[0] for c in curve], dtype=float)
    y = np.array([c[1] for c in curve], dtype=float)
    if len(x) < 2 or x[-1] == x[0]:
        return float(y[-1])
    return float(np.trapezoid(y, x) / (x[-1] - x[0]))


def one_run(
    setting: str, setup: str, seed: int, generations: int, every: int | None = None
) -> dict[str, Any]:
    """One run's curve (training episodes, eval success, eval success on the top levels) and its eval suite's digest."""
    path, top = SETTINGS[setting]
    every_set = [] if every is None else [f"eval.every={every}"]
    exp = load_experiment(
        path,
        [
            *overrides(setup),
            *IN_PROCESS,
            *every_set,
            f"run.seed={seed}",
            f"run.generations={generations}",
            f"eval.seed={EVAL_SEED + seed}",
        ],
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        run_experiment(exp, out)
        log = GameLog(out)
        gens = log.read("generations").to_pylist()
        # the synthesized suite (a further [[eval.suites]] suite has its name in ``suite``)
        evals = [r for r in log.read("evals").to_pylist() if r.get("suite") is None]
    total, episodes = 0, {}
    for row in sorted(gens, key=lambda r: r["gen"]):
        total += row["train_episodes"]
        episodes[row["gen"]] = total
    curve = []
    for gen in sorted({r["gen"] for r in evals}):
        rows = [r for r in evals if r["gen"] == gen]
        upper = [r for r in rows if (r["level"] or 0) >= top]
        curve.append(
            (
                episodes[gen],
                sum(r["success"] for r in rows) / len(rows),
                sum(r["success"] for r in upper) / len(upper) if upper else 0.0,
            )
        )
    suite = sorted({r["task_id"] for r in evals})
    return {
        "setup": setup,
        "seed": seed,
        "curve": curve,
        "auc": auc(curve),
        "final": curve[-1][1],
        "top": curve[-1][2],
        "episodes": total,
        "suite": hashlib.sha256("\n".join(suite).encode()).hexdigest()[:16],
        "suite_size": len(suite),
        "seconds": time.perf_counter() - started,
    }


def _one(job: tuple[str, str, int, int, int | None]) -> dict[str, Any]:
    return one_run(*job)


def interval(diffs: list[float]) -> str:
    """``+0.031 [-0.004, +0.066]``: the mean paired difference and its 95% bootstrap interval."""
    mean, low, high = paired_bootstrap(diffs, n=10_000, seed=0)
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", choices=sorted(SETTINGS), default="hard")
    parser.add_argument("--quick", action="store_true", help="seeds 0–2 and 8 generations")
    parser.add_argument("--seeds", default=None, help="comma-separated (default 0–9)")
    parser.add_argument("--generations", type=int, default=None, help="default 30")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (worker processes)")
    parser.add_argument(
        "--setups", default="uniform,plr,accel,target-band,learned-synth,learned-synth+plr"
    )
    parser.add_argument(
        "--eval-every",
        type=int,
        default=None,
        help="play the eval suite every N generations "
        "(default: the file's, 2); fewer eval points cost less",
    )
    parser.add_argument(
        "--results",
        default=None,
        help="append each run's result here (JSON lines); the runs it already holds "
        "(same setting, generations and --eval-every) are read, not run again",
    )
    parser.add_argument(
        "--report", default=None, help="print the table of a --results file instead of running"
    )
    args = parser.parse_args()
    if args.report:
        report(args.report)
        return
    default_seeds = "0,1,2" if args.quick else ",".join(str(s) for s in range(10))
    seeds = [int(s) for s in (args.seeds or default_seeds).split(",")]
    generations = args.generations or (8 if args.quick else 30)
    setups = [s for s in args.setups.split(",") if s]
    for setup in setups:
        overrides(setup)  # an unknown name stops here, before any run
    if "uniform" not in setups:
        setups.insert(0, "uniform")  # the baseline, measured in the same invocation
    path, _ = SETTINGS[args.setting]
    started = time.perf_counter()
    print(
        f"setting {args.setting}: {generations} generations of {path} (32 tasks × 4 rollouts "
        f"each); seeds {seeds}; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, {args.jobs} jobs\n",
        flush=True,
    )
    results: dict[str, dict[int, dict[str, Any]]] = {s: {} for s in setups}
    for run in done_runs(args.results, args.setting, generations, args.eval_every):
        if run["setup"] in results and run["seed"] in seeds:
            results[run["setup"]][run["seed"]] = run  # made by an earlier invocation: kept
    jobs = [
        (args.setting, setup, seed, generations, args.eval_every)
        for seed in seeds
        for setup in setups
        if seed not in results[setup]
    ]
    if len(jobs) < len(seeds) * len(setups):
        print(f"{len(seeds) * len(setups) - len(jobs)} runs read from {args.results}", flush=True)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for run in pool.map(_one, jobs):
            run = {**run, "generations": generations, "eval_every": args.eval_every}
            results[run["setup"]][run["seed"]] = run
            print(
                f"  {run['setup']:<18} seed {run['seed']:>2}: AUC {run['auc']:.3f}, final "
                f"{run['final']:.3f}, top {run['top']:.3f} ({run['seconds']:.0f} s)",
                flush=True,
            )
            if args.results:
                with open(args.results, "a") as out:
                    out.write(json.dumps({"setting": args.setting, **run}) + "\n")
    table(results, seeds, args.setting, (time.perf_counter() - started) / 60)


def done_runs(
    path: str | None, setting: str, generations: int, every: int | None
) -> list[dict[str, Any]]:
    """The runs a ``--results`` file holds with the same setting, generations and eval spacing (none if no file)."""
    if path is None or not os.path.exists(path):
        return []
    with open(path) as lines:
        runs = [json.loads(line) for line in lines if line.strip()]
    return [
        r
        for r in runs
        if r.get("setting") == setting
        and r.get("generations") == generations
        and r.get("eval_every", "absent") == every
    ]


def report(path: str) -> None:
    """The table of the runs a ``--results`` file holds (the seeds every setup completed)."""
    results: dict[str, dict[int, dict[str, Any]]] = {}
    settings = set()
    with open(path) as lines:
        for line in lines:
            run = json.loads(line)
            settings.add(run["setting"])
            results.setdefault(run["setup"], {})[run["seed"]] = run
    if len(settings) != 1 or "uniform" not in results:
        sys.exit(f"{path}: one setting's runs, uniform among them, are needed (found {settings})")
    seeds = sorted(set.intersection(*(set(r) for r in results.values())))
    setups = ["uniform", *(s for s in results if s != "uniform")]
    print(f"{path}: setting {settings.pop()}, seeds {seeds}")
    table({s: results[s] for s in setups}, seeds, run["setting"], None)


def table(
    results: dict[str, dict[int, dict[str, Any]]],
    seeds: list[int],
    setting: str,
    minutes_wall: float | None,
) -> None:
    """Print the paired comparison with uniform."""
    setups = list(results)
    for seed in seeds:
        digests = {results[s][seed]["suite"] for s in setups}
        if len(digests) != 1:
            sys.exit(f"seed {seed}: the setups played different eval suites ({digests})")
    sizes = sorted({results["uniform"][s]["suite_size"] for s in seeds})
    base = results["uniform"]
    levels = "2–3" if setting == "easy" else "4–5"
    print(
        f"\neval suite: {'/'.join(map(str, sizes))} tasks per seed, the same task ids for every "
        f"setup of a seed (checked); uniform's budget {base[seeds[0]]['episodes']:,} episodes"
        + ("" if minutes_wall is None else f"; {minutes_wall:.1f} min wall")
        + "\n"
    )
    print(
        f"{'setup':<18} {'AUC':>5} {'final':>5} {'top':>5}  {'Δ AUC vs uniform [95%]':>25} "
        f"{'Δ final':>25} {'Δ top (levels ' + levels + ')':>25}"
    )
    for setup in setups:
        runs = [results[setup][s] for s in seeds]
        cells = [
            "–" if setup == "uniform" else interval([r[k] - base[r["seed"]][k] for r in runs])
            for k in ("auc", "final", "top")
        ]
        print(
            f"{setup:<18} {statistics.mean(r['auc'] for r in runs):>5.3f} "
            f"{statistics.mean(r['final'] for r in runs):>5.3f} "
            f"{statistics.mean(r['top'] for r in runs):>5.3f}  "
            f"{cells[0]:>25} {cells[1]:>25} {cells[2]:>25}"
        )
    print(
        "\nAUC, final, top: means over seeds; Δ: the mean paired difference from uniform on the "
        "same seed, with its 95% bootstrap interval over seeds"
    )
    minutes = {s: sum(results[s][x]["seconds"] for x in seeds) / 60 for s in setups}
    print(
        "run time (CPU-minutes of runs): " + ", ".join(f"{s} {m:.1f}" for s, m in minutes.items())
    )


if __name__ == "__main__":
    main()
