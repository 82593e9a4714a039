"""Does a World model discriminate at the frontier? Brier, AUC (overall and at the frontier) and ECE per level, against ``irt``.

    python benchmarks/bench_world_model.py [--quick] [--seeds 0,1,2,3,4] [--generations 30]
                                           [--models irt,family-irt] [--setting experiments/curricula.toml]
                                           [--set KEY=VALUE ...]

Per seed, ``experiments/curricula.toml`` (uniform curriculum: the World
model's predictions change nothing the run does) is run in process once per
World model named in ``--models``; ``irt``, today's default, is always run
and is the baseline. Each run's figures are those ``coevo analyze`` shows
(:func:`coevo.arena.analysis.metrics.calibration`): on the training episodes
of the tasks the model predicted in their generation, the Brier score, the
ROC AUC of its predictions against the rewards, the AUC at the frontier (the
tasks whose observed success in that generation lies in 0.2–0.8), and the
expected calibration error — per level, pooled over the seeds. Printed per
model and level: each figure, and its difference against ``irt`` from the
same invocation, with the number of seeds on which the model's frontier AUC
beat ``irt``'s.

The runs of one seed must play the same episodes (a uniform curriculum does
not read predictions); the script checks it, so the comparison is paired.

``--quick`` (seeds 0 and 1, 10 generations) is for iterating.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

import pyarrow as pa
from coevo.arena.analysis.metrics import calibration
from coevo.arena.gamelog import GameLog
from coevo.run.experiment import load_experiment
from coevo.run.loop import run_experiment

BASELINE = "irt"
IN_PROCESS = ["ray.in_process=true", "judge.config.isolate=false"]
FIGURES = ("brier", "auc", "auc_frontier", "ece")


def one_run(
    setting: str, model: str, seed: int, generations: int, sets: list[str]
) -> dict[str, Any]:
    """One run of ``setting`` with World model ``model``: its tables for the figures, and its episodes' ids."""
    exp = load_experiment(
        setting,
        [
            *IN_PROCESS,
            *sets,
            f'world_model.name="{model}"',
            f"run.seed={seed}",
            f"run.generations={generations}",
        ],
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        run_experiment(exp, out)
        log = GameLog(out)
        episodes = log.read("episodes")
        predictions = log.read("predictions", columns=["task_id", "gen", "p"])
        tasks = log.read("tasks", columns=["task_id", "level"])
    seconds = time.perf_counter() - started
    return {
        "episodes": episodes,
        "predictions": predictions,
        "tasks": tasks,
        "played": (
            episodes.column("episode_id").to_pylist(),
            episodes.column("reward").to_pylist(),
        ),
        "seconds": seconds,
    }


def pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures over several runs' predictions at once (generations of each run kept apart)."""
    episodes: list[pa.Table] = []
    predictions: list[pa.Table] = []
    tasks: list[pa.Table] = []
    for i, run in enumerate(runs):
        # offset the generations so that run i's generation g never meets run j's
        shift = 1_000 * i
        for rows, out in ((run["episodes"], episodes), (run["predictions"], predictions)):
            gen = pa.array([g + shift for g in rows.column("gen").to_pylist()], pa.int64())
            out.append(rows.set_column(rows.column_names.index("gen"), "gen", gen))
        tasks.append(run["tasks"])
    every_task = pa.concat_tables(tasks)
    first: dict[str, int | None] = {}
    for t, level in zip(
        every_task.column("task_id").to_pylist(),
        every_task.column("level").to_pylist(),
        strict=True,
    ):
        first.setdefault(t, level)
    levels = pa.table({"task_id": list(first), "level": pa.array(list(first.values()), pa.int64())})
    return calibration(
        pa.concat_tables(episodes, promote_options="default"),
        pa.concat_tables(predictions, promote_options="default"),
        levels,
    )


def _f(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def main() -> None:
    """Run the comparison and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", default=None)
    parser.add_argument("--generations", type=int, default=None)
    parser.add_argument("--models", default="irt,family-irt")
    parser.add_argument("--setting", default="experiments/curricula.toml")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an override of the setting, as `coevo run --set` takes (repeatable)",
    )
    args = parser.parse_args()
    seeds = [int(s) for s in (args.seeds or ("0,1" if args.quick else "0,1,2,3,4")).split(",")]
    generations = args.generations or (10 if args.quick else 30)
    models = [BASELINE, *[m for m in args.models.split(",") if m and m != BASELINE]]

    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in models}
    seconds: dict[str, float] = dict.fromkeys(models, 0.0)
    beats: dict[str, int] = dict.fromkeys(models, 0)
    for seed in seeds:
        for model in models:
            run = one_run(args.setting, model, seed, generations, args.set)
            runs[model].append(run)
            seconds[model] += run["seconds"]
            if run["played"] != runs[BASELINE][-1]["played"]:
                raise SystemExit(
                    f"seed {seed}: the run with {model} played other episodes than with "
                    f"{BASELINE}; the comparison would not be paired (does the curriculum read "
                    "the predictions?)"
                )
        base = pooled([runs[BASELINE][-1]])["overall"]["auc_frontier"]
        for model in models:
            mine = pooled([runs[model][-1]])["overall"]["auc_frontier"]
            beats[model] += int(mine is not None and base is not None and mine > base)

    print(
        f"{args.setting} {' '.join(args.set)}: seeds {','.join(map(str, seeds))}, {generations} generations; "
        f"pooled over seeds; Δ: against {BASELINE} in the same invocation"
    )
    figures = {m: pooled(runs[m]) for m in models}
    header = f"{'model':<12} {'level':>5} {'episodes':>8} {'frontier':>8} " + " ".join(
        f"{name:>12} {'Δ':>7}" for name in FIGURES
    )
    print(header)
    for model in models:
        rows = [*figures[model]["per_level"], {"level": "all", **figures[model]["overall"]}]
        base_rows = {
            r["level"]: r
            for r in [
                *figures[BASELINE]["per_level"],
                {"level": "all", **figures[BASELINE]["overall"]},
            ]
        }
        for row in rows:
            base = base_rows[row["level"]]
            cells = []
            for name in FIGURES:
                delta = None if row[name] is None or base[name] is None else row[name] - base[name]
                cells.append(f"{_f(row[name]):>12} {_f(delta, signed=True):>7}")
            print(
                f"{model:<12} {row['level']!s:>5} {row['episodes']:>8} "
                f"{row['frontier_episodes']:>8} " + " ".join(cells)
            )
    print(
        "frontier: episodes of tasks whose observed success in their generation lies in 0.2–0.8; "
        "auc_frontier: the AUC over those; lower Brier and ECE, higher AUC are better"
    )
    for model in models:
        print(
            f"{model}: frontier AUC above {BASELINE}'s on {beats[model]} of {len(seeds)} seeds; "
            f"{seconds[model]:.0f} s of runs"
        )


if __name__ == "__main__":
    main()
