"""`coevo export` on a real run: size and time of each layout, against worlds inline in every row.

    coevo run experiments/quickstart.toml --out runs/quickstart   # once, about a minute
    python benchmarks/bench_export.py [RUN_DIR] [--repeat 3]

Reads the run's log once, then exports it four ways (JSONL and Parquet, each
with the worlds apart — the default — and inline) into a temporary
directory, best of ``--repeat`` each. The baseline, measured in the same
run, is JSONL with every task's world inline: the layout of every row being
self-contained, as the export was before ``coevo.export/1``. Printed per
layout: the bytes written (every file, the manifest included), bytes per
task row, and seconds. The aim is at most 8 KB per task row by default.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from coevo.arena.analysis import load_run
from coevo.arena.analysis.export import export_run

LAYOUTS = (
    ("jsonl, worlds inline (baseline)", "jsonl", True),
    ("jsonl (default)", "jsonl", False),
    ("parquet", "parquet", False),
    ("parquet, worlds inline", "parquet", True),
)


def written(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir() if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", nargs="?", default="runs/quickstart", metavar="RUN_DIR")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many exports each")
    args = parser.parse_args()
    if not (Path(args.run_dir) / "experiment.json").exists():
        sys.exit(
            f"{args.run_dir} holds no run: make one with `coevo run experiments/quickstart.toml`"
        )
    start = time.perf_counter()
    run = load_run(args.run_dir)
    print(f"load_run({args.run_dir}): {time.perf_counter() - start:.2f} s")
    results = []
    with tempfile.TemporaryDirectory() as root:
        for label, fmt, inline in LAYOUTS:
            best = float("inf")
            for i in range(args.repeat):
                out = Path(root) / f"{fmt}-{inline}-{i}"
                start = time.perf_counter()
                manifest = export_run(run, out, fmt=fmt, inline_worlds=inline)
                best = min(best, time.perf_counter() - start)
                size = written(out)
            results.append((label, manifest.tasks.rows, size, best))
    base_size, base_time = results[0][2], results[0][3]
    print(f"{'layout':<34} {'rows':>6} {'bytes':>13} {'bytes/row':>10} {'seconds':>8}  vs baseline")
    for label, rows, size, seconds in results:
        print(
            f"{label:<34} {rows:>6} {size:>13,} {size / max(rows, 1):>10,.0f} {seconds:>8.2f}  "
            f"{size / base_size:6.3f}× size, {seconds / base_time:5.2f}× time"
        )


if __name__ == "__main__":
    main()
