"""A benchmark run on τ²-bench's real data: episodes per second with 1 and 2 Solver actors, and a gold agent's reward.

    python benchmarks/bench_tau2_run.py --tau2 ~/tau2-bench [--domain airline] [--limit 20]
        [--trials 2] [--latency 0.05] [--actors 1,2] [--workers 2]

Imports ``--domain`` from the checkout (``coevo import tau2``), then runs a
``[benchmark]`` experiment over its first ``--limit`` tasks, ``--trials``
times each, the tools run by the domain's own code in the sandbox. The
models are the loopback fake OpenAI-compatible server of
``tests/agents/fake_openai.py`` (``--latency`` seconds per answer): the
agent plays each task's gold actions, then says what the task must
communicate; the customer opens with its case and stops after the agent's
answer. So the run's reward is the benchmark's own check of the gold
actions in a full conversation (expected: every task whose gold actions
pass ``oracle``), and its speed is coevo's: Ray, the sandbox, the domain's
code, the log.

Printed per actor count: episodes per second, seconds per episode, mean
reward, and the speed-up over 1 actor (the baseline, measured in the same
run).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coevo.agents.llm.user import GUIDELINES, scenario_text  # noqa: E402
from coevo.arena.codetask import RESPOND, read_code_tasks  # noqa: E402
from coevo.arena.gamelog import GameLog  # noqa: E402

from tests.agents.fake_openai import FakeOpenAI, Reply, calls, text  # noqa: E402

KEY = "sk-bench-fake"


class GoldPolicy:
    """The agent plays the gold actions of the case the customer names; the customer names it, then stops."""

    def __init__(self, tasks: list[Any]):
        self.tasks = tasks
        self.case = {scenario_text(t.user_scenario, t.instruction): i for i, t in enumerate(tasks)}

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        system = messages[0]["content"]
        if system.startswith(GUIDELINES):
            spoken = sum(1 for m in messages if m["role"] == "assistant")
            if spoken == 0:
                return text(f"Hello, this is case {self.case[system[len(GUIDELINES) :]]}.")
            return text("Thank you. ###STOP###")
        opening = next(m["content"] for m in messages if m["role"] == "user")
        task = self.tasks[int(re.search(r"case (\d+)", opening).group(1))]
        gold = [c for c in task.solution if c.tool != RESPOND]
        made = sum(len(m.get("tool_calls") or []) for m in messages if m["role"] == "assistant")
        if made < len(gold):
            return calls((gold[made].tool, gold[made].arguments))
        said = [c.arguments.get("answer", "") for c in task.solution if c.tool == RESPOND]
        return text(" ".join(said) or "Done.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tau2", required=True, help="a τ²-bench checkout")
    parser.add_argument("--domain", default="airline")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--actors", default="1,2")
    parser.add_argument("--workers", type=int, default=2, help="sandboxed tool workers per actor")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-tau2-run-"))
    pool = work / f"{args.domain}.jsonl"
    subprocess.run(
        ["coevo", "import", "tau2", args.tau2, "--domain", args.domain, "--out", str(pool)],
        check=True,
    )
    tasks = read_code_tasks(pool)[: args.limit]
    code = str(Path(args.tau2).expanduser() / "src")
    results = {}
    with FakeOpenAI(GoldPolicy(tasks), api_key=KEY, latency=args.latency) as server:
        for n in [int(x) for x in args.actors.split(",")]:
            out = work / f"run-{n}"
            toml = work / f"bench-{n}.toml"
            toml.write_text(
                f'[run]\nname = "bench"\nseed = 0\nchunk = 4\nout = "{out}"\n'
                f'[solver]\nname = "llm-solver"\nactors = {n}\n'
                f'config = {{ base_url = "{server.url}" }}\n'
                f'[benchmark]\ntasks = "{pool}"\ncode = ["{code}"]\ntrials = {args.trials}\n'
                f'limit = {args.limit}\nworkers = {args.workers}\nuser = {{ base_url = "{server.url}" }}\n'
                f"[ray]\nnum_cpus = 2\n"
            )
            started = time.perf_counter()
            subprocess.run(
                ["coevo", "run", str(toml)],
                check=True,
                env={**__import__("os").environ, "OPENAI_API_KEY": KEY},
            )
            seconds = time.perf_counter() - started
            episodes = GameLog(str(out)).read("episodes").to_pylist()
            rewards = [e["reward"] for e in episodes]
            results[n] = (len(episodes), seconds, sum(rewards) / len(rewards))
            failed = [e["reason"] for e in episodes if e["reward"] == 0]
            for why in failed[:5]:
                print(f"  reward 0: {why}")
    base = results[min(results)]
    print(
        f"\n{args.domain}: {len(tasks)} tasks × {args.trials} trials, latency {args.latency} s, "
        f"{args.workers} tool workers per actor"
    )
    print(f"{'actors':>6} {'episodes':>8} {'s':>7} {'ep/s':>6} {'s/ep':>6} {'reward':>6} {'×':>5}")
    for n, (count, seconds, reward) in sorted(results.items()):
        rate = count / seconds
        print(
            f"{n:>6} {count:>8} {seconds:>7.1f} {rate:>6.2f} {seconds / count:>6.2f} "
            f"{reward:>6.2f} {rate / (base[0] / base[1]):>5.2f}"
        )
    print("(wall time includes Ray's start and the pool's import into the log)")


if __name__ == "__main__":
    main()
