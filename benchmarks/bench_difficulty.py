"""Is difficulty real? Success of simple baseline solvers by level, on procedural tasks.

    python benchmarks/bench_difficulty.py [--n 100] [--k 20]

This measures what the levels do to two fixed policies (the learning
Solver's figures are in ``bench_solver.py``), against the reference
solution (success 1.0 by construction, the baseline):

* **row guesser**: knows which tools to call in which order (the reference
  solution's tools) but not which row: every argument that is not stated in
  the instruction is copied from a uniformly chosen row of the latest
  observation that shows such a value. Its success measures the hidden
  state: namesakes, ranked lists, longer walks.
* **first row**: the same, but always copies from the first row shown (what
  an agent that ignores the instruction's details would do).

Both run in the real world runtime and are scored by the task's verifier.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.arena import WorldCache

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.agents.policies import guess_rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100, help="tasks per level (default %(default)s)")
    parser.add_argument(
        "--k", type=int, default=20, help="row-guesser episodes per task (default %(default)s)"
    )
    args = parser.parse_args()
    synth = ProceduralSynthesizer()
    worlds = WorldCache()  # each world built once
    print(
        f"{'level':>5} {'tasks':>6} {'difficulty':>10} {'reference':>9} {'row guesser':>11} {'first row':>9}"
    )
    for level in range(1, 6):
        tasks = synth.propose(ProposalRequest(n=args.n, seed=500 + level, level=level))
        guess, first, reference = [], [], []
        for i, task in enumerate(tasks):
            world = worlds.world(task.world)
            reference.append(world.run(task, task.solution).reward.value)
            rng = random.Random(f"bench:{level}:{i}")
            guess.append(
                statistics.mean(guess_rows(world, task, rng).reward.value for _ in range(args.k))
            )
            first.append(guess_rows(world, task, None).reward.value)
        print(
            f"{level:>5} {len(tasks):>6} {statistics.mean(t.features['difficulty'] for t in tasks):>10.2f} "
            f"{statistics.mean(reference):>9.2f} {statistics.mean(guess):>11.3f} {statistics.mean(first):>9.3f}"
        )


if __name__ == "__main__":
    main()
