"""`coevo analyze` on a big log: a million episode rows, timed per metric.

    python benchmarks/bench_analysis.py [--episodes 1000000] [--generations 100]

Builds a game log of that size in a temporary run directory (synthetic rows
in the real schema, committed generation by generation with manifests), then
times reading it and each metric of :func:`coevo.arena.analysis.analyze`
and the lineage graph. The baseline, measured in the same run, is a plain
pyarrow read of the episodes table: the metrics should cost a small multiple
of just reading the rows.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from coevo.arena.analysis import metrics as analysis
from coevo.arena.analysis.lineage import lineage_graph, lineage_summary
from coevo.arena.gamelog import SCHEMAS, GameLog, RunDir


def _table(name: str, columns: dict[str, Any]) -> pa.Table:
    """Table ``name`` of ``columns``; a column of a later schema the benchmark does not fill is null."""
    rows = len(next(iter(columns.values())))
    schema = SCHEMAS[name]
    return pa.table(
        {f.name: columns[f.name] if f.name in columns else pa.nulls(rows, f.type) for f in schema},
        schema=schema,
    )


def build(run_dir: str, episodes: int, generations: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    log = GameLog(run_dir)
    run = RunDir(run_dir)
    run.write_bytes(
        json.dumps({"run": {"name": "synthetic"}, "curriculum": {"name": "plr"}}).encode(),
        "experiment.json",
    )
    per_gen = episodes // generations
    tasks_per_gen = max(1, per_gen // 8)
    domains = np.array(["retail", "airline", "clinic", "hr", "warehouse"])
    for gen in range(generations):
        ids = np.array([f"t{gen}-{i}" for i in range(tasks_per_gen)])
        level = rng.integers(1, 6, size=tasks_per_gen)
        mutated = rng.random(tasks_per_gen) < 0.2
        parents = np.where(
            rng.random(tasks_per_gen) < 0.2,
            np.array([f"t{max(gen - 1, 0)}-{i}" for i in range(tasks_per_gen)]),
            None,
        )
        tables = {
            "tasks": _table(
                "tasks",
                {
                    "task_id": ids,
                    "world_id": np.array([f"w{i % 7}" for i in range(tasks_per_gen)]),
                    "source": np.where(mutated & (gen > 0), "mutation", "fresh"),
                    "level": level,
                    "family": rng.choice(["question", "action", "bulk"], size=tasks_per_gen),
                    "domain": rng.choice(domains, size=tasks_per_gen),
                    "parent": parents if gen else np.full(tasks_per_gen, None),
                    "operator": np.where(mutated, "add_hop", None)
                    if gen
                    else np.full(tasks_per_gen, None),
                    "spec": np.full(tasks_per_gen, "{}"),
                },
            ),
            "verdicts": _table(
                "verdicts",
                {
                    "task_id": ids,
                    "accepted": rng.random(tasks_per_gen) < 0.9,
                    "failed": [["oracle"] if x < 0.1 else [] for x in rng.random(tasks_per_gen)],
                    "checks": np.full(tasks_per_gen, "{}"),
                    "solve_calls": rng.integers(1, 500, size=tasks_per_gen),
                    "error": np.full(tasks_per_gen, None),
                },
            ),
            "predictions": _table(
                "predictions",
                {
                    "task_id": ids,
                    "version": np.full(tasks_per_gen, f"v{gen}"),
                    "p": rng.random(tasks_per_gen),
                },
            ),
        }
        which = rng.integers(0, tasks_per_gen, size=per_gen)
        tables["episodes"] = _table(
            "episodes",
            {
                "episode_id": np.array([f"e{gen}-{i}" for i in range(per_gen)]),
                "task_id": ids[which],
                "purpose": np.where(rng.random(per_gen) < 0.9, "train", "eval"),
                "solver": np.full(per_gen, f"v{gen}"),
                "seed": rng.integers(0, 2**31, size=per_gen),
                "reward": (
                    rng.random(per_gen) < 0.5 - 0.08 * level[which] + gen / generations / 2
                ).astype(np.int64),
                "steps": rng.integers(1, 9, size=per_gen),
                "truncated": np.zeros(per_gen, dtype=bool),
                "calls": np.full(per_gen, "[]"),
                "reason": np.full(per_gen, ""),
                "failure": np.full(per_gen, None),
            },
        )
        evals = 200
        tables["evals"] = _table(
            "evals",
            {
                "task_id": np.array([f"x{i}" for i in range(evals)]),
                "episode_id": np.array([f"x{gen}-{i}" for i in range(evals)]),
                "level": np.repeat(np.arange(1, 6), evals // 5),
                "domain": rng.choice(domains, size=evals),
                "reward": (rng.random(evals) < 0.6).astype(np.int64),
                "success": rng.random(evals) < 0.6,
            },
        )
        gen_row = {name: [None] for name in SCHEMAS["generations"].names}
        gen_row.update(train_episodes=[per_gen], accepted=[tasks_per_gen], proposed=[tasks_per_gen])
        tables["generations"] = pa.table(gen_row, schema=SCHEMAS["generations"])
        parts = {}
        for name, table in tables.items():
            relative = f"log/{name}/gen={gen}/part-0.parquet"
            run.fs.create_dir(run.path(f"log/{name}/gen={gen}"), recursive=True)
            pq.write_table(table, run.path(relative), filesystem=run.fs)
            parts[name] = relative
        log.commit(gen, parts, {k: v.num_rows for k, v in tables.items()}, {})


def timed(label: str, fn, results: dict[str, float]):
    start = time.perf_counter()
    value = fn()
    results[label] = time.perf_counter() - start
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1_000_000)
    parser.add_argument("--generations", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        build(out, args.episodes, args.generations)
        print(
            f"built a log of {args.episodes:,} episode rows in {args.generations} generations ({time.perf_counter() - start:.1f} s)"
        )
        times: dict[str, float] = {}
        timed(
            "baseline: pyarrow read of episodes",
            lambda: ds.dataset(
                f"{out}/log/episodes", format="parquet", partitioning="hive"
            ).to_table(),
            times,
        )
        run = timed("load_run (every table)", lambda: analysis.load_run(out), times)
        tasks = timed("tasks (one row per task)", lambda: analysis._tasks(run), times)
        success = timed(
            "success (gen, level, domain)", lambda: analysis._success(run, tasks), times
        )
        timed("mastered level", lambda: analysis._mastered(success["eval_by_level"]), times)
        timed("pool diversity", lambda: analysis._pool(run, tasks), times)
        timed("rejections per check", lambda: analysis._rejections(run), times)
        timed(
            "calibration (Brier, ECE, AUC, reliability)",
            lambda: analysis.calibration(run["episodes"], run["predictions"], tasks),
            times,
        )
        timed("throughput", lambda: analysis._throughput(run), times)
        timed("irt (a Rasch fit to every episode)", lambda: analysis._irt(run), times)
        graph = timed("lineage graph", lambda: lineage_graph(run), times)
        timed("lineage summary", lambda: lineage_summary(graph), times)
        base = times["baseline: pyarrow read of episodes"]
        for label, seconds in times.items():
            print(f"  {label:<40} {seconds:7.2f} s  ({seconds / base:5.1f}x the baseline)")
        total = sum(v for k, v in times.items() if not k.startswith("baseline"))
        print(f"  {'analyze, everything':<40} {total:7.2f} s")


if __name__ == "__main__":
    main()
