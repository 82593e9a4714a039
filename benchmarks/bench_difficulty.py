"""Is difficulty real? Success of simple baseline solvers by level, on procedural tasks.

    python benchmarks/bench_difficulty.py [--n 60] [--k 20]

No learning solver exists yet (it comes with the roles issue); until then
this measures what the levels do to two fixed policies, against the
reference solution (success 1.0 by construction, the baseline):

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
from typing import Any

from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.agents.synthesizers.procedural.checking import stated_numbers
from coevo.arena import Observation, TaskSpec, ToolCall, World


def _where(observations: list[Observation], value: Any) -> tuple[int, int] | None:
    """(observation index, column) of the latest observation showing ``value``."""
    for index in range(len(observations) - 1, -1, -1):
        obs = observations[index]
        for row in obs.rows or ():
            for column, cell in enumerate(row):
                if cell == value or (isinstance(value, str) and str(cell) == value):
                    return index, column
    return None


def rollout(world: World, task: TaskSpec, rng: random.Random | None) -> float:
    """One episode of the row guesser (``rng``) or the first-row policy (``rng`` is None)."""
    world.reset(task)
    seen: list[Observation] = []
    obs = None
    for call in task.solution:
        arguments: dict[str, Any] = {}
        for name, value in call.arguments.items():
            stated = (isinstance(value, str) and value.lower() in task.instruction.lower()) or (
                isinstance(value, int) and value in stated_numbers(task.instruction)
            )
            found = None if stated else _where(seen, value)
            if found is None:
                if stated or not seen or not isinstance(value, int) or isinstance(value, bool):
                    arguments[name] = value  # stated in the instruction (or a choice it gives)
                    continue
                # a key the earlier guesses never showed: the walk went wrong; take what is there
                cells = [c for r in seen[-1].rows or () for c in r if type(c) is type(value)]
                arguments[name] = (rng.choice(cells) if rng else cells[0]) if cells else -1
                continue
            index, column = found
            rows = seen[index].rows or []
            row = rows[rng.randrange(len(rows))] if rng is not None else rows[0]
            arguments[name] = str(row[column]) if isinstance(value, str) else row[column]
        obs = world.step(ToolCall(call.tool, arguments))
        seen.append(obs)
    return obs.reward.value if obs is not None and obs.reward is not None else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=60, help="tasks per level (default 60)")
    parser.add_argument(
        "--k", type=int, default=20, help="row-guesser episodes per task (default 20)"
    )
    args = parser.parse_args()
    synth = ProceduralSynthesizer()
    worlds: dict[str, World] = {}
    print(
        f"{'level':>5} {'tasks':>6} {'difficulty':>10} {'reference':>9} {'row guesser':>11} {'first row':>9}"
    )
    for level in range(1, 6):
        tasks = synth.propose(ProposalRequest(n=args.n, seed=500 + level, level=level))
        guess, first, reference = [], [], []
        for i, task in enumerate(tasks):
            world = worlds.setdefault(task.world_id, World(task.world))
            reference.append(world.run(task, task.solution).reward.value)
            rng = random.Random(f"bench:{level}:{i}")
            guess.append(statistics.mean(rollout(world, task, rng) for _ in range(args.k)))
            first.append(rollout(world, task, None))
        print(
            f"{level:>5} {len(tasks):>6} {statistics.mean(t.features['difficulty'] for t in tasks):>10.2f} "
            f"{statistics.mean(reference):>9.2f} {statistics.mean(guess):>11.3f} {statistics.mean(first):>9.3f}"
        )


if __name__ == "__main__":
    main()
