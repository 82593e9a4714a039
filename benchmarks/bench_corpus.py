"""Corpus builds: accepted tasks per second with 1 and 2 workers, duplicates found, and the driver's memory.

    python benchmarks/bench_corpus.py [--worlds 1000] [--tasks-per-world 10] [--databases 40]

Builds, each into a fresh folder and each in its own process (so that Ray
starts afresh and the driver's peak memory is its own):

* a procedural corpus of ``--worlds`` worlds × ``--tasks-per-world`` tasks
  (the five domains, levels 1–5), with 1 worker (the baseline) and with 2;
* a corpus mined from a folder of ``--databases`` SQLite databases (made
  here: coevo's sample shop with different page-view counts, the tests'
  library, and a tenth of them copies of another under a new name, which
  the build must find), with 1 and 2 workers.

Printed per build: accepted tasks per second (this build's own figure:
shard work and commits, Ray's start excluded), the speed-up of 2 workers
over 1 measured in the same run (aim ≥ 1.8×), duplicates dropped (tasks and
worlds), and the driver's peak resident memory, next to a build of a tenth
of the size: it must not grow with the corpus.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AIM = 1.8

_DRIVER = """
import json, resource, sys
from coevo.run.cli import main
status = main(sys.argv[1:] + ["--json"])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"status": status, "peak_mib": peak}))
"""


def build(args: list[str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, "corpus", "build", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"coevo corpus build {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    report, driver = json.loads(lines[-2]), json.loads(lines[-1])
    return {**report, **driver}


def databases(folder: Path, count: int) -> Path:
    sys.path.insert(0, str(ROOT))
    from coevo.arena.examples.shop import build_shop  # lazy: only the mined corpus needs them

    from tests.agents.databases import build_library

    folder.mkdir(parents=True)
    build_library(folder / "library.sqlite")
    copies = max(1, count // 10)  # a tenth are copies of another database under a new name
    for i in range(count - 1 - copies):
        build_shop(folder / f"shop_{i:03d}.sqlite", views=2_000 + 500 * i)  # distinct content
    for i in range(copies):
        shutil.copy(folder / f"shop_{i:03d}.sqlite", folder / f"zz_copy_{i:03d}.sqlite")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", type=int, default=1000)
    parser.add_argument("--tasks-per-world", type=int, default=10)
    parser.add_argument("--databases", type=int, default=40)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-corpus-"))
    rows = []
    procedural = ["--worlds", str(args.worlds), "--tasks-per-world", str(args.tasks_per_world)]
    small = [
        "--worlds",
        str(max(10, args.worlds // 10)),
        "--tasks-per-world",
        str(args.tasks_per_world),
    ]
    mined = databases(work / "databases", args.databases)
    setups = [
        ("procedural, a tenth", small, 1),
        ("procedural", procedural, 1),
        ("procedural", procedural, 2),
        ("mined", ["--mine", str(mined), "--tasks-per-world", str(args.tasks_per_world)], 1),
        ("mined", ["--mine", str(mined), "--tasks-per-world", str(args.tasks_per_world)], 2),
    ]
    for i, (name, flags, workers) in enumerate(setups):
        out = work / f"corpus-{i}"
        result = build([*flags, "--workers", str(workers), "--out", str(out)])
        rate = result["accepted"] / result["seconds"] if result["seconds"] else 0.0
        rows.append((name, workers, result, rate))
        print(f"built {name} with {workers} worker(s): {result['accepted']} accepted", flush=True)
    base = {name: rate for name, workers, _, rate in rows if workers == 1}
    print(
        f"\n{'corpus':<20} {'workers':>7} {'worlds':>6} {'tasks':>6} {'accepted':>8} "
        f"{'acc/s':>7} {'×':>5} {'dup tasks':>9} {'dup worlds':>10} {'driver MiB':>10}"
    )
    for name, workers, r, rate in rows:
        ratio = rate / base[name] if base.get(name) else float("nan")
        print(
            f"{name:<20} {workers:>7} {r['worlds']:>6} {r['tasks']:>6} {r['accepted']:>8} "
            f"{rate:>7.1f} {ratio:>5.2f} {r['duplicates']:>9} {r['duplicate_worlds']:>10} "
            f"{r['peak_mib']:>10.0f}"
        )
    print(
        f"aim: ≥ {AIM}× with 2 workers; the driver's memory flat from a tenth of the corpus to all of it"
    )


if __name__ == "__main__":
    main()
