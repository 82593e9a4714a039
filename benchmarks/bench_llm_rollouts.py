"""LLM Solver rollouts against a slow server: episodes per second for 1-64 concurrent rollouts, and coevo's CPU per model call.

    python benchmarks/bench_llm_rollouts.py [--quick] [--concurrency 1,4,16,64] [--latency 0.2]
        [--episodes-per-slot 4] [--steps 3] [--handoff-episodes 1024]

The model is the fake vLLM server of ``tests/agents/fake_openai.py``, run as
a separate process (so its CPU is not counted as coevo's) that answers every
chat call after ``--latency`` seconds; its explorer policy makes ``--steps``
calls per episode (a tool, another, then ``submit``).

For each N of ``--concurrency``, an ``llm-solver`` with ``concurrency=N``
plays N × ``--episodes-per-slot`` level-1 retail tasks in one ``attempt``,
twice: the first batch builds the solver's worlds and opens its connections
(its rate is printed as ``first batch/s``), the second is timed, as every
later batch of a run would be (the constructor and its model listing are
outside the timing). Printed per N:

* episodes per second, and the speed-up over N = 1 measured in the same run
  (the baseline), against the aim of 0.8 × N: rollouts should wait on the
  model, not on coevo;
* the ideal, latency-bound rate ``N / (calls per episode × latency)`` and
  the efficiency ``measured / ideal``, which says where the time goes;
* coevo's CPU time per model call (``time.process_time`` of this process
  only: the world, the conversation, the HTTP client, the parsing).

Then the trainer hand-off's overhead per batch (``--handoff-episodes``, 1,024
by default): the episodes of the largest N, repeated under new ids to that
many, are committed to a game log (untimed: the log is written with or without
a trainer); then coevo's hand-out is timed — the batch built from the committed
log and written whole to a trainer folder — next to the baseline, writing the
same rows (already in memory as Python rows) with plain pyarrow
(``Table.from_pylist`` and ``parquet.write_table``). Both are the median of 5.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from coevo.agents.llm.solver import LLMSolver
from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.arena import TaskSpec
from coevo.arena.gamelog import EpisodeRow, GameLog, GenerationRecord, TaskRow, TrajectoryRow
from coevo.arena.outcomes import Episode
from coevo.run.handoff.transports import BATCH_SCHEMA, Handoff, TrainerConfig, training_batch

ROOT = Path(__file__).resolve().parents[1]
FAKE_SERVER = ROOT / "tests" / "agents" / "fake_openai.py"
AIM = 0.8  # speed-up at least 0.8 × N


@dataclass
class Batch:
    """One N's measurement."""

    concurrency: int
    episodes: int
    calls: int
    failed: int
    seconds: float
    cpu: float
    server_cpu: float | None
    first: (
        float  # episodes/s of the solver's first batch (its worlds built, its connections opened)
    )
    played: list[Episode] = field(default_factory=list, repr=False)

    @property
    def rate(self) -> float:
        return self.episodes / self.seconds


def start_server(latency: float, steps: int) -> tuple[subprocess.Popen[str], str]:
    """The fake server in its own process, and its base URL (read from the line it prints)."""
    server = subprocess.Popen(
        [
            sys.executable,
            str(FAKE_SERVER),
            "--port",
            "0",
            "--latency",
            str(latency),
            "--model",
            "fake-model",
            "--policy",
            "explorer",
            "--steps",
            str(steps),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline().strip()
    if not line.startswith("listening on "):
        server.kill()
        raise RuntimeError(f"the fake server did not start (it printed {line!r})")
    return server, line.removeprefix("listening on ")


def process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) another process has used so far; None where /proc is missing."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def retail_tasks(n: int) -> list[TaskSpec]:
    """``n`` level-1 retail tasks (distinct ones, from a few worlds)."""
    synth = ProceduralSynthesizer(["retail"], world_pool=4)
    tasks: list[TaskSpec] = []
    seed = 0
    while len(tasks) < n:
        tasks += synth.propose(ProposalRequest(n=16, seed=seed, level=1))
        seed += 1
    return tasks[:n]


def measure(
    url: str, server: int, concurrency: int, tasks: list[TaskSpec], max_steps: int
) -> Batch:
    """One ``attempt`` of ``tasks`` by a solver allowed ``concurrency`` calls in flight (``server``: its pid)."""
    solver = LLMSolver(base_url=url, max_steps=max_steps, concurrency=concurrency)
    start = time.perf_counter()
    solver.attempt(tasks, seed=1)  # the first batch builds the worlds and opens the connections
    first = len(tasks) / (time.perf_counter() - start)
    calls0 = solver.client.total().calls
    server0 = process_cpu(server)
    cpu0 = time.process_time()
    start = time.perf_counter()
    episodes = solver.attempt(tasks, seed=0)
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    server1 = process_cpu(server)
    served = None if server0 is None or server1 is None else server1 - server0
    calls = solver.client.total().calls - calls0
    turns = sum(len(e.trajectory.turns) for e in episodes if e.trajectory is not None)
    assert turns == calls, f"{turns} turns in the trajectories but {calls} calls accounted"
    failed = sum(1 for e in episodes if not e.reward.submitted)
    return Batch(concurrency, len(episodes), calls, failed, seconds, cpu, served, first, episodes)


def handoff_overhead(
    episodes: list[Episode], tasks: list[TaskSpec], size: int, repeats: int = 5
) -> tuple[float, float, float, int]:
    """Median seconds of coevo's hand-out of a ``size``-episode batch (in a run; after a resume, from the log), of plain pyarrow writing its rows; the rows."""
    copies = [
        episodes[i % len(episodes)].model_copy(update={"episode_id": f"ep-{i:06d}"})
        for i in range(size)
    ]
    played = {e.task_id for e in copies}
    record = GenerationRecord(
        0,
        tasks=[TaskRow.of(t, "fresh") for t in tasks if t.task_id in played],
        episodes=[EpisodeRow.of(e, "train") for e in copies],
        trajectories=[TrajectoryRow.of(e, "train") for e in copies],
    )
    handoff, resumed, plain = [], [], []
    with tempfile.TemporaryDirectory() as where:
        log = GameLog(f"{where}/run")
        tables: dict[str, pa.Table] = {}
        parts = log.write(record, tables)
        log.commit(0, parts, {name: len(rows) for name, rows in record.tables()}, {})
        rows = training_batch(log, 0).to_pylist()
        for i in range(repeats):
            start = time.perf_counter()
            handed = Handoff(TrainerConfig(uri=f"{where}/trainer-{i}"), log, 0)
            handed.stage(0, tables)  # what a run does: the batch from the rows it just wrote
            handed.hand_out(0)
            handoff.append(time.perf_counter() - start)
            start = time.perf_counter()
            Handoff(TrainerConfig(uri=f"{where}/resumed-{i}"), log, 0).hand_out(0)
            resumed.append(time.perf_counter() - start)  # after a crash: from the committed log
            start = time.perf_counter()
            pq.write_table(
                pa.Table.from_pylist(rows, schema=BATCH_SCHEMA), f"{where}/plain-{i}.parquet"
            )
            plain.append(time.perf_counter() - start)
    return (
        statistics.median(handoff),
        statistics.median(resumed),
        statistics.median(plain),
        len(rows),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: N up to 16, 1 episode per slot, 0.05 s latency",
    )
    parser.add_argument(
        "--concurrency", default="1,4,16,64", help="comma-separated N (default: 1,4,16,64)"
    )
    parser.add_argument(
        "--latency", type=float, default=0.2, help="seconds the server takes per call"
    )
    parser.add_argument(
        "--episodes-per-slot",
        type=int,
        default=4,
        help="episodes per slot: each N plays N times this many",
    )
    parser.add_argument(
        "--steps", type=int, default=3, help="calls per episode (the fake's turns, submit included)"
    )
    parser.add_argument(
        "--handoff-episodes",
        type=int,
        default=1024,
        help="the size of the trainer hand-off's batch whose overhead is measured",
    )
    args = parser.parse_args()
    levels = [int(n) for n in args.concurrency.split(",")]
    per_slot, latency = args.episodes_per_slot, args.latency
    if args.quick:
        levels, per_slot, latency = [n for n in levels if n <= 16], 1, 0.05
    os.environ.setdefault("OPENAI_API_KEY", "bench-key")  # the fake accepts any key
    max_steps = args.steps + 5  # room to spare: every episode submits at its last call
    tasks = retail_tasks(max(levels) * per_slot)

    server, url = start_server(latency, args.steps)
    try:
        measure(url, server.pid, 1, tasks[:1], max_steps)  # imports, first connection: untimed
        batches = [measure(url, server.pid, n, tasks[: n * per_slot], max_steps) for n in levels]
    finally:
        server.terminate()
        server.wait(timeout=10)

    print(
        f"fake server in its own process: {latency:g} s per call, {args.steps} calls per episode; "
        f"{per_slot} episodes per slot; level-1 retail tasks; {os.cpu_count()} cores\n"
    )
    base = batches[0]
    header = (
        f"{'N':>4} {'episodes':>8} {'calls':>6} {'seconds':>7} {'episodes/s':>10} "
        f"{'ideal/s':>8} {'efficiency':>10} {'speed-up':>8} {'aim':>6} {'met':>4} "
        f"{'CPU ms/call':>11} {'CPU busy':>8} {'server ms/call':>14} {'first batch/s':>13}"
    )
    print(header)
    for b in batches:
        per_episode = b.calls / b.episodes
        ideal = b.concurrency / (per_episode * latency)
        speedup = b.rate / base.rate
        aim = AIM * b.concurrency / base.concurrency
        label = "  (baseline)" if b is base else ""
        failed = f"  ({b.failed} episodes did not submit)" if b.failed else ""
        served = "n/a" if b.server_cpu is None else f"{1000 * b.server_cpu / b.calls:.2f}"
        print(
            f"{b.concurrency:4d} {b.episodes:8d} {b.calls:6d} {b.seconds:7.2f} {b.rate:10.2f} "
            f"{ideal:8.2f} {b.rate / ideal:10.0%} {speedup:7.2f}x {aim:5.1f}x "
            f"{'yes' if speedup >= aim else 'no':>4} {1000 * b.cpu / b.calls:11.2f} "
            f"{b.cpu / b.seconds:8.0%} {served:>14} {b.first:13.2f}{label}{failed}"
        )
    print(
        "\nideal = N / (calls per episode x latency); efficiency = episodes/s / ideal; "
        "speed-up = episodes/s / episodes/s at N = "
        f"{base.concurrency}; aim = {AIM} x N;\nCPU ms/call = coevo's CPU time per model call; "
        "CPU busy = coevo's CPU seconds / wall seconds; server ms/call = the fake server's own CPU time;\n"
        "first batch/s = episodes/s of the solver's first batch, which builds its worlds"
    )
    top = batches[-1]
    wanted = AIM * top.concurrency / base.concurrency * base.rate * top.calls / top.episodes
    print(
        f"to meet the aim at N = {top.concurrency}, {wanted:.0f} calls/s: at most "
        f"{1000 / wanted:.1f} ms of coevo's CPU per call, on one core (the event loop's)"
    )
    size = args.handoff_episodes
    if size <= 0:
        print("\ntrainer hand-off: not measured (--handoff-episodes 0)")
        return
    coevo, resumed, plain, rows = handoff_overhead(top.played, tasks, size)
    print(
        f"\ntrainer hand-off, a batch of {rows} episodes (median of 5):\n"
        f"  coevo's hand-out in a run {1000 * coevo:.1f} ms (the batch made from the rows the log "
        "just wrote, written whole to a trainer folder, moved into place)\n"
        f"  after a resume {1000 * resumed:.1f} ms (the batch made from the committed log, read back)\n"
        f"  plain pyarrow writing the same rows {1000 * plain:.1f} ms (the baseline: from_pylist, "
        "write_table)\n"
        f"  ratio {coevo / plain:.2f}x in a run, {resumed / plain:.2f}x after a resume; "
        f"{1000 * coevo / rows:.3f} ms per episode, {coevo / (rows / top.rate):.1%} of the time "
        f"to play them at N = {top.concurrency}"
    )


if __name__ == "__main__":
    main()
