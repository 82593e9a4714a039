"""A real model learns coevo's tasks on two CPU cores: held-out success untrained, after the warm start, after the loop.

    python benchmarks/bench_real_learning.py [--quick] [--json OUT] [--plot PNG] [--work DIR]
        [--seeds 0,1,2] [--curricula uniform,target-band] [--generations 10]
        [--held-out 150,100] [--base-url URL --model-dir DIR]

SmolLM2-135M-Instruct (the tiny-model wheel) served by a real vLLM (CPU),
``experiments/tiny-pool.toml`` and ``experiments/tiny-real.toml`` as the
recipe in ``docs/training.md`` runs them, on the machine this runs on:

1. **The held-out suite**: level-1 and level-2 tasks of the tiny loop's
   domains (retail, hr) in worlds of their own (world seeds from 100,000;
   the loop's are 0–15), checked to share no database with anything
   trained on; written to ``WORK/heldout.jsonl``.
2. **Untrained**: the served model plays the suite with the Solver of
   ``tiny-real`` (text protocol, token in and token out, a call required
   each turn), one episode a task.
3. **The warm start**: ``coevo run tiny-pool`` (offline: tasks made and
   judged), then ``coevo sft`` on its accepted tasks' reference solutions,
   the suite's tasks and databases excluded; the adapter is loaded into vLLM
   as ``warm-start`` and plays the suite.
4. **The loop**: for each curriculum and seed, ``coevo run tiny-real``
   (generation 0 plays the warm start) beside ``coevo train --adapter`` on
   the task reward alone (no format reward), ``--generations`` generations;
   the last version plays the suite. Per generation: the train reward and
   the share of informative groups (rewards that differ).

Printed and written (``--json``): each stage's held-out success with its
95% Wilson interval, per level and overall; the loop's gain over the warm
start with a paired bootstrap interval over tasks; per curriculum, the mean
share of informative groups and held-out success per seed, pooled over the
seeds (Wilson) and its gain over the warm start; and target-band − uniform
paired over tasks (each task's success averaged over the seeds: every run
plays the same suite), the seeds it is ahead on, and the per-seed
difference (a bootstrap over three seeds cannot reach 95% coverage). ``--json FILE`` writes
``{"untrained": {"success", "low", "high", "n"}, "warm_start": {...},
"rl": {...}, ...}`` (``rl``: the first curriculum's runs, pooled over seeds).
``--plot FILE.png`` draws the curve: held-out success per stage with its
interval, and each loop's train success per generation.

Every stage's result is kept in ``WORK/results.json`` as it finishes, and a
second invocation with the same ``--work`` does only what is missing. Runs
everything in the real-model environment of ``tests/real_model.py``
(made and cached on first use). ``--quick``: a small suite, one seed, one
curriculum, three generations, a short warm start.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coevo.agents.protocols import ProposalRequest  # noqa: E402
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer  # noqa: E402
from coevo.arena.analysis.paired import paired_bootstrap, wilson_interval  # noqa: E402
from coevo.arena.gamelog import GameLog  # noqa: E402
from coevo.arena.outcomes import FAILED_PREFIX  # noqa: E402
from coevo.arena.records import load_records, write_records  # noqa: E402
from coevo.arena.spec import TaskSpec, WorldSpec  # noqa: E402
from coevo.run.experiment import load_experiment  # noqa: E402

from tests import real_model  # noqa: E402

HELD_OUT_SEED = 100_000
"""The held-out suite's world seeds start here (the loop's world_pool is 16: seeds 0–15)."""
DOMAINS = ["retail", "hr"]
JOURNALED = (
    "batch_id",
    "mean_reward",
    "informative_share",
    "sequences",
    "tokens",
    "loss",
    "entropy",
    "mean_abs_log_ratio",
    "importance_weight_mean",
    "importance_weight_max",
    "clipped_fraction",
    "grad_norm",
    "seconds",
)
"""What each trainer step's journal entry gives the report."""


def say(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)


class Results:
    """``WORK/results.json``: each stage's figures, kept as they come."""

    def __init__(self, path: Path):
        self.path = path
        self.data: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def put(self, key: str, value: Any) -> None:
        self.data[key] = value
        self.path.write_text(json.dumps(self.data, indent=1, sort_keys=True))


# ---- the held-out suite ------------------------------------------------------------------


def held_out_suite(path: Path, per_level: list[int]) -> list[TaskSpec]:
    """The suite: ``per_level[k]`` tasks of level k+1, in worlds of their own (made once, then read)."""
    if not path.is_file():
        synth = ProceduralSynthesizer(DOMAINS, tool_subset=0, families=["question", "action"])
        tasks: list[TaskSpec] = []
        for level, wanted in enumerate(per_level, start=1):
            made: list[TaskSpec] = []
            seed = HELD_OUT_SEED + 1000 * level
            while len(made) < wanted:
                made += synth.propose(ProposalRequest(n=4, seed=seed, level=level))
                seed += 1
            tasks += made[:wanted]
        write_records(path, tasks)
    tasks, worlds = load_records(path)
    return [
        t
        if isinstance(t.world, WorldSpec)
        else t.model_copy(update={"world": worlds[str(t.world)]})
        for t in tasks
    ]


def level_of(task: TaskSpec) -> int:
    return int(task.provenance.get("level") or 0)


# ---- the server ----------------------------------------------------------------------------


def post(url: str, body: dict[str, Any]) -> str:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=600) as answer:
        return answer.read().decode("utf-8", "replace")


def load_adapter(base_url: str, name: str, path: str) -> None:
    """Have vLLM serve the adapter at ``path`` as ``name`` (once)."""
    try:
        post(f"{base_url}/load_lora_adapter", {"lora_name": name, "lora_path": path})
    except urllib.error.HTTPError as exc:
        if "already" not in exc.read().decode("utf-8", "replace"):
            raise


# ---- a stage's held-out success ----------------------------------------------------------


def evaluate(base_url: str, model: str, suite: list[TaskSpec], seed: int) -> dict[str, Any]:
    """``model`` plays every task of the suite once with tiny-real's Solver: success per level and overall."""
    from coevo.agents.llm.solver import LLMSolver

    config = dict(load_experiment("tiny-real").solver.config)
    config["model"] = model
    solver = LLMSolver(base_url=base_url, **config)
    started = time.monotonic()
    episodes = solver.attempt(suite, seed=seed)
    seconds = time.monotonic() - started
    rows = [
        {"task_id": str(t.task_id), "level": level_of(t), "success": int(e.success)}
        for t, e in zip(suite, episodes, strict=True)
    ]
    why: dict[str, int] = {}
    for e in episodes:
        if e.failure is not None:
            # "the solver failed: WHY: detail": the why, not the prefix every failure shares
            kind = str(e.failure).removeprefix(FAILED_PREFIX).split(":")[0][:80]
            why[kind] = why.get(kind, 0) + 1
    return {
        "model": model,
        "episodes": rows,
        "failed": sum(why.values()),
        "failed_why": why,
        "seconds": round(seconds, 1),
    }


def figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Success, its Wilson interval and n, overall and per level."""

    def one(chosen: list[dict[str, Any]]) -> dict[str, Any]:
        wins = sum(r["success"] for r in chosen)
        low, high = wilson_interval(wins, len(chosen)) if chosen else (0.0, 1.0)
        return {"success": wins / max(len(chosen), 1), "low": low, "high": high, "n": len(chosen)}

    out = one(rows)
    out["levels"] = {
        str(level): one([r for r in rows if r["level"] == level])
        for level in sorted({r["level"] for r in rows})
    }
    return out


# ---- the stages ----------------------------------------------------------------------------


def coevo(*args: str | Path, env: dict[str, str] | None = None, log: Path | None = None) -> None:
    """``coevo ARGS`` in the real-model environment, to completion (its output to ``log``)."""
    command = [str(real_model.python()), "-m", "coevo.run.cli", *[str(a) for a in args]]
    with log.open("a") if log else open(os.devnull, "w") as out:
        done = subprocess.run(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **real_model.OFFLINE, **(env or {})},
        )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} exited {done.returncode}; see {log}")


def warm_start(work: Path, model_dir: Path, quick: bool, sft: list[str]) -> Path:
    """The pool run and ``coevo sft`` on it (once); the adapter's folder."""
    out = work / "warm-start"
    if (out / "sft.json").is_file():
        return out / "adapter"
    pool = work / "pool"
    if not (pool / "log" / "_manifests").is_dir() or not any(
        (pool / "log" / "_manifests").iterdir()
    ):
        generations = "2" if quick else "8"
        coevo(
            "run", "tiny-pool", "--out", pool, "--set", f"run.generations={generations}",
            "--set", "ray.in_process=true", "--set", "judge.config.isolate=false",
            log=work / "pool.log",
        )  # fmt: skip
    extra = ["--limit", "32", "--epochs", "1"] if quick else []
    coevo(
        "sft", pool, "--model", model_dir, "--experiment", "tiny-real",
        "--exclude", work / "heldout.jsonl", "--out", out, *extra, *sft,
        log=work / "sft.log",
    )  # fmt: skip
    return out / "adapter"


def loop(
    work: Path,
    base_url: str,
    model_dir: Path,
    adapter: Path,
    curriculum: str,
    seed: int,
    generations: int,
    quick: bool,
    train: list[str],
    more_sets: list[str],
) -> dict[str, Any]:
    """One ``coevo run tiny-real`` beside ``coevo train``; the generations' figures and the last version."""
    name = f"rl-{curriculum}-{seed}"
    run = work / name
    env = {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "bench"}
    sets = [
        f"run.seed={seed}",
        f"run.generations={generations}",
        f"curriculum.name={curriculum}",
        "ray.in_process=true",
        "judge.config.isolate=false",
        *(["curriculum.tasks_per_gen=4"] if quick else []),
        *more_sets,
    ]
    command = [
        str(real_model.python()),
        "-m",
        "coevo.run.cli",
        "run",
        "tiny-real",
        "--out",
        str(run),
    ]
    for item in sets:
        command += ["--set", item]
    trainer = [
        str(real_model.python()), "-m", "coevo.run.cli", "train", str(run),
        "--model", str(model_dir), "--adapter", str(adapter), "--prefix", name,
        "--wait", "3600", *train,
    ]  # fmt: skip
    full_env = {**os.environ, **real_model.OFFLINE, **env}
    started = time.monotonic()
    with (
        (work / f"{name}.run.log").open("a") as run_log,
        (work / f"{name}.train.log").open("a") as train_log,
    ):
        played = subprocess.Popen(command, stdout=run_log, stderr=subprocess.STDOUT, env=full_env)
        trained = subprocess.Popen(
            trainer, stdout=train_log, stderr=subprocess.STDOUT, env=full_env
        )
        try:
            if played.wait() != 0:
                raise RuntimeError(f"{name}: coevo run exited {played.returncode} ({run_log.name})")
            if trained.wait(timeout=3600) != 0:
                raise RuntimeError(f"{name}: coevo train exited {trained.returncode}")
        finally:
            for process in (played, trained):
                if process.poll() is None:
                    process.kill()
    journal = [
        json.loads(line)
        for line in (run / "trainer" / "lora" / "journal.jsonl").read_text().splitlines()
        if line.strip()
    ]
    log = GameLog(str(run))
    gens = log.read("generations").to_pylist()
    last = journal[-1]
    return {
        "seconds": round(time.monotonic() - started, 1),
        "generations": [
            {
                "gen": g["gen"],
                "train_success": g.get("train_success"),
                "informative_share": g.get("informative_share"),
            }
            for g in gens
        ],
        "trainer": [{k: e.get(k) for k in JOURNALED} for e in journal],
        "last_version": last["version"],
        "last_adapter": str(run / "trainer" / "lora" / "versions" / last["version"] / "adapter"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="print (and --json) what WORK/results.json holds, running nothing",
    )
    parser.add_argument("--json", default=None, help="write the figures here")
    parser.add_argument("--plot", default=None, help="draw the curve into this PNG")
    parser.add_argument("--work", default="runs/bench-real-learning", help="where everything goes")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--curricula", default="uniform,target-band")
    parser.add_argument("--generations", type=int, default=10)
    parser.add_argument("--held-out", default="150,100", help="held-out tasks of level 1, 2")
    parser.add_argument("--sft", default="", help="more coevo sft flags, in one string")
    parser.add_argument(
        "--train",
        default="--learning-rate 1e-4",
        help="coevo train's flags beyond the recipe's, in one string",
    )
    parser.add_argument(
        "--loop-set",
        action="append",
        default=[],
        help="a further coevo run --set for the loop (repeatable), e.g. curriculum.dynamic_sampling=true",
    )
    parser.add_argument(
        "--base-url", default=None, help="a vLLM serving SmolLM2 (else one is started)"
    )
    parser.add_argument("--model-dir", default=None, help="its model folder (with --base-url)")
    parser.add_argument(
        "--warm-start-only",
        action="store_true",
        help="stop after the warm start's suite (to compare warm starts: --sft '--adapter ...')",
    )
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    curricula = args.curricula.split(",")
    generations = args.generations
    per_level = [int(n) for n in args.held_out.split(",")]
    if args.quick:
        seeds, curricula, generations, per_level = seeds[:1], curricula[:1], 3, [16, 8]
    looped = [] if args.warm_start_only else seeds  # the seeds the loop runs for
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    results = Results(work / "results.json")
    if args.report_only:
        done = finished_seeds(results, curricula, seeds)
        report(results, curricula, done, work, args.json, args.plot)
        return
    suite = held_out_suite(work / "heldout.jsonl", per_level)
    say(f"held-out suite: {len(suite)} tasks in {len({t.world.world_id for t in suite})} worlds")
    os.environ.setdefault("OPENAI_API_KEY", "bench")
    server = None
    if args.base_url:
        base_url, model_dir = args.base_url, Path(args.model_dir or real_model.MODEL)
    else:
        server = real_model.VLLMServer()
        base_url, model_dir = server.url, server.model
    try:
        if "untrained" not in results:
            say("untrained: the served model plays the held-out suite")
            results.put("untrained", evaluate(base_url, real_model.SERVED, suite, seed=1))
        adapter = warm_start(work, model_dir, args.quick, args.sft.split())
        load_adapter(base_url, "warm-start", str(adapter))
        if "warm_start" not in results:
            say("warm start: the adapter plays the held-out suite")
            results.put("warm_start", evaluate(base_url, "warm-start", suite, seed=1))
        for seed in looped:  # seed by seed: paired runs
            for curriculum in curricula:
                key = f"rl/{curriculum}/{seed}"
                if key in results:
                    continue
                say(f"the loop: {curriculum}, seed {seed}, {generations} generations")
                ran = loop(
                    work, base_url, model_dir, adapter, curriculum, seed, generations,
                    args.quick, args.train.split(), args.loop_set,
                )  # fmt: skip
                load_adapter(base_url, ran["last_version"], ran["last_adapter"])
                ran["held_out"] = evaluate(base_url, ran["last_version"], suite, seed=1)
                results.put(key, ran)
    finally:
        if server is not None:
            server.stop()
    done = finished_seeds(results, curricula, looped)
    report(results, curricula, done, work, args.json, args.plot)


def finished_seeds(results: Results, curricula: list[str], seeds: list[int]) -> list[int]:
    """The seeds whose loop ran for every curriculum (the paired runs a report can hold)."""
    return [s for s in seeds if all(f"rl/{c}/{s}" in results for c in curricula)]


def plot(stages: dict[str, Any], by_curriculum: dict[str, Any], path: str) -> None:
    """The curve: held-out success per stage (95% Wilson; the loop's per curriculum, pooled over its seeds), and each loop's train success per generation (one colour a curriculum, one line a seed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    labels = {"untrained": "untrained", "warm_start": "warm start"}
    shown = [(labels[n], stages[n]) for n in labels if n in stages]
    shown += [
        (f"{curriculum}\n({len(v['held_out'])} seeds)", v["pooled"])
        for curriculum, v in by_curriculum.items()
        if v["pooled"] is not None
    ]
    left.errorbar(
        range(len(shown)),
        [f["success"] for _, f in shown],
        yerr=[
            [f["success"] - f["low"] for _, f in shown],
            [f["high"] - f["success"] for _, f in shown],
        ],
        fmt="o",
        capsize=4,
    )
    left.set_xticks(range(len(shown)), [name for name, _ in shown])
    left.set_ylim(0, 1)
    left.set_ylabel(f"held-out success, {stages['untrained']['n']} tasks")
    left.set_title("held-out tasks, worlds never trained on")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for c, (curriculum, v) in enumerate(by_curriculum.items()):
        for k, curve in enumerate(v["train_success"]):
            right.plot(
                range(len(curve)),
                [x if x is not None else float("nan") for x in curve],
                marker=".",
                color=colours[c % len(colours)],
                alpha=0.8,
                label=curriculum if k == 0 else None,
            )
    right.xaxis.get_major_locator().set_params(integer=True)
    right.set_xlabel("generation")
    right.set_ylabel("train success (the loop's rollouts)")
    right.set_ylim(0, 1)
    right.set_title("the loop: one line a seed")
    right.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def per_task_success(episodes: list[dict[str, Any]]) -> dict[str, float]:
    """Each task's success rate over the episodes that played it (one per seed here)."""
    plays: dict[str, list[int]] = {}
    for e in episodes:
        plays.setdefault(e["task_id"], []).append(e["success"])
    return {task: sum(v) / len(v) for task, v in plays.items()}


def report(
    results: Results,
    curricula: list[str],
    seeds: list[int],
    work: Path,
    out: str | None,
    drawn: str | None = None,
) -> None:
    """Print the table and write the JSON."""
    sft = json.loads((work / "warm-start" / "sft.json").read_text())
    stages: dict[str, Any] = {
        "untrained": figures(results["untrained"]["episodes"]),
        "warm_start": figures(results["warm_start"]["episodes"]),
    }
    warm = per_task_success(results["warm_start"]["episodes"])
    by_curriculum: dict[str, Any] = {}
    for curriculum in curricula:
        runs = [results[f"rl/{curriculum}/{seed}"] for seed in seeds]
        episodes = [e for r in runs for e in r["held_out"]["episodes"]]
        per_task = per_task_success(episodes)
        by_curriculum[curriculum] = {
            "pooled": figures(episodes) if episodes else None,
            "per_task": per_task,
            "gain_over_warm_start": paired_bootstrap([v - warm[t] for t, v in per_task.items()])
            if episodes
            else None,
            "held_out": [figures(r["held_out"]["episodes"])["success"] for r in runs],
            "informative_share": [
                sum(g["informative_share"] or 0 for g in r["generations"])
                / max(len(r["generations"]), 1)
                for r in runs
            ],
            "train_success": [[g["train_success"] for g in r["generations"]] for r in runs],
        }
    first = by_curriculum[curricula[0]]
    if first["pooled"] is not None:  # none yet (--report-only while it runs): two stages only
        stages["rl"] = first["pooled"]
        gain = first["gain_over_warm_start"]
        stages["rl_gain_over_warm_start"] = {"mean": gain[0], "low": gain[1], "high": gain[2]}
    stages["curricula"] = by_curriculum
    if len(curricula) > 1 and seeds:
        a, b = curricula[0], curricula[1]
        tasks_b, tasks_a = by_curriculum[b]["per_task"], by_curriculum[a]["per_task"]
        levels = {e["task_id"]: e["level"] for e in results["warm_start"]["episodes"]}
        stages["paired"] = {
            "setup": f"{b} - {a}",
            # each task's success averaged over the seeds: the suite is the same in every run
            "held_out_over_tasks": paired_bootstrap([tasks_b[t] - tasks_a[t] for t in tasks_a]),
            "levels_over_tasks": {
                str(level): paired_bootstrap(
                    [tasks_b[t] - tasks_a[t] for t in tasks_a if levels[t] == level]
                )
                for level in sorted(set(levels.values()))
            },
            "ahead_on_seeds": sum(
                x > y
                for x, y in zip(
                    by_curriculum[b]["held_out"], by_curriculum[a]["held_out"], strict=True
                )
            ),
            "seeds": len(seeds),
            "held_out": paired_bootstrap(
                [
                    x - y
                    for x, y in zip(
                        by_curriculum[b]["held_out"], by_curriculum[a]["held_out"], strict=True
                    )
                ]
            ),
            "informative_share": paired_bootstrap(
                [
                    x - y
                    for x, y in zip(
                        by_curriculum[b]["informative_share"],
                        by_curriculum[a]["informative_share"],
                        strict=True,
                    )
                ]
            ),
        }
    stages["warm_start_data"] = {
        "sequences": sft["sequences"],
        "left_out": sft["left_out"],
        "validation_nll_before": sft["validation_nll_before"],
        "validation_nll_after": sft["validation_nll_after"],
    }
    print()
    print(f"held-out success (95% Wilson) on {stages['untrained']['n']} tasks")
    print(
        f"{'stage':<12} {'all':>22} "
        + " ".join(f"{'level ' + k:>22}" for k in stages["untrained"]["levels"])
    )
    for stage in [s for s in ("untrained", "warm_start", "rl") if s in stages]:
        f = stages[stage]
        cells = [f"{f['success']:.3f} [{f['low']:.3f}, {f['high']:.3f}]"] + [
            f"{v['success']:.3f} [{v['low']:.3f}, {v['high']:.3f}]" for v in f["levels"].values()
        ]
        print(f"{stage:<12} " + " ".join(f"{c:>22}" for c in cells) + f"  ({f['n']} episodes)")
    if "rl_gain_over_warm_start" in stages:
        g = stages["rl_gain_over_warm_start"]
        print(
            f"loop − warm start: {g['mean']:+.3f} [{g['low']:+.3f}, {g['high']:+.3f}] "
            "(paired over tasks)"
        )
    else:
        print("the loop: no run finished yet")
    for curriculum, v in by_curriculum.items() if seeds else []:
        pooled, g = v["pooled"], v["gain_over_warm_start"]
        print(
            f"{curriculum:<12} held-out {', '.join(f'{x:.3f}' for x in v['held_out'])} "
            f"(seeds {', '.join(map(str, seeds))}; pooled {pooled['success']:.3f} "
            f"[{pooled['low']:.3f}, {pooled['high']:.3f}], {pooled['n']} episodes; "
            f"− warm start {g[0]:+.3f} [{g[1]:+.3f}, {g[2]:+.3f}]); "
            f"informative share {', '.join(f'{x:.2f}' for x in v['informative_share'])}"
        )
    if "paired" in stages:
        p = stages["paired"]
        t = p["held_out_over_tasks"]
        print(
            f"{p['setup']}: held-out {t[0]:+.3f} [{t[1]:+.3f}, {t[2]:+.3f}] (paired over "
            f"tasks, each averaged over the seeds); ahead on {p['ahead_on_seeds']} of "
            f"{p['seeds']} seeds; per seed {p['held_out'][0]:+.3f} [{p['held_out'][1]:+.3f}, "
            f"{p['held_out'][2]:+.3f}], informative share {p['informative_share'][0]:+.3f} "
            f"[{p['informative_share'][1]:+.3f}, {p['informative_share'][2]:+.3f}] (bootstrap "
            "over seeds: with three or fewer it cannot reach 95% coverage)"
        )
        for level, d in p["levels_over_tasks"].items():
            print(
                f"  level {level}: {d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}] (paired over its tasks)"
            )
    if out:
        Path(out).write_text(json.dumps(stages, indent=1, sort_keys=True))
    if drawn:
        plot(stages, by_curriculum, drawn)


if __name__ == "__main__":
    main()
