"""World runtime speed, each figure against a baseline measured in the same run.

    python benchmarks/bench_world.py [--quick]

1. Tool-call steps per second through ``World.step`` against the same
   statements with the same parameters on a raw ``sqlite3`` connection
   holding the same database (the ratio is the figure; aim <= 3x).
2. Reset time of a 10,000-row world after an episode that wrote
   (``World.reset``: a rollback) against a raw ``deserialize`` of the same
   bytes (aim <= 200 us), and the cost of the first step after a reset.
3. Episode cost: reset + the reference solution + verification.
4. The full Judge check time per task (every mechanical check).
5. The same Judge isolated in a worker process (``IsolatedJudge``, the Judge
   roles' default) against the Judge in this process, on the same tasks.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from coevo.arena import (
    Limits,
    TaskSpec,
    ToolCall,
    World,
    WorldCache,
    WorldSpec,
    assess_task,
    load_records,
)
from coevo.arena.isolation import IsolatedJudge

EXAMPLES = Path(str(resources.files("coevo.arena.examples") / "examples.jsonl"))


def best_of(fn: Callable[[], None], repeat: int, number: int) -> float:
    """Seconds per call: the best of ``repeat`` timings of ``number`` calls (least disturbed by noise)."""
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        timings.append((time.perf_counter() - start) / number)
    return min(timings)


def retail() -> tuple[TaskSpec, WorldSpec]:
    tasks, worlds = load_records(EXAMPLES)
    task = next(t for t in tasks if worlds[t.world].domain == "retail")
    return task, worlds[task.world]


def big_retail(rows: int = 10_000, seed: int = 7) -> tuple[TaskSpec, WorldSpec]:
    """The retail world with ``rows`` seed rows (customers and orders), deterministic by seed."""
    task, world = retail()
    rng = random.Random(seed)
    data = world.model_dump(mode="json", by_alias=True, exclude={"id"})
    customers = rows // 5
    data["data"]["customers"]["rows"] = [[1, "Ada Ode", "ada@ex.io", "gold"]] + [
        [i, f"Customer {i}", f"c{i}@ex.io", rng.choice(["standard", "gold"])]
        for i in range(2, customers + 1)
    ]
    orders = [[17, 1, "2026-11-21", "pending", 29400], [14, 1, "2026-10-20", "pending", 4900]]
    next_id = 100
    while len(orders) < rows - customers:
        orders.append(
            [
                next_id,
                rng.randint(2, customers),
                f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}",
                rng.choice(["pending", "shipped", "delivered", "cancelled"]),
                rng.randint(500, 90000),
            ]
        )
        next_id += 1
    data["data"]["orders"]["rows"] = orders
    data["data"]["order_items"]["rows"] = [[17, 4, 1], [14, 3, 1]]
    data["data"]["returns"]["rows"] = []
    big = WorldSpec.model_validate(data)
    task_data = task.model_dump(mode="json", by_alias=True, exclude={"id"})
    task_data["world"] = big.world_id
    return TaskSpec.model_validate(task_data), big


def raw_connection(world: World) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None, cached_statements=512)
    conn.deserialize(world.compiled.initial)
    return conn


def bench_steps(quick: bool) -> tuple[float, float]:
    task, spec = retail()
    world = World(spec, limits=Limits(max_steps=10**9))
    calls = [
        ToolCall("find_customer_by_email", {"email": "ada@ex.io"}),
        ToolCall("list_orders", {"customer_id": 1, "status": "pending"}),
        ToolCall("list_order_items", {"order_id": 17}),
        ToolCall("search_customers", {"name": "Ode"}),
        ToolCall("cancel_order", {"order_id": 17}),
        ToolCall("list_returns", {"order_id": 11}),
    ]
    world.reset(task)
    tools = world.compiled.tools
    statements = []
    for c in calls:
        binds, _ = tools[c.tool].binder.bind(c.arguments)
        statements.append((tools[c.tool].statements[-1], binds))
    raw = raw_connection(world)

    def run_world() -> None:
        for c in calls:
            world.step(c)

    def run_raw() -> None:
        for sql, binds in statements:
            raw.execute(sql, binds).fetchall()

    number = 300 if quick else 3000
    t_world = best_of(run_world, 5, number) / len(calls)
    t_raw = best_of(run_raw, 5, number) / len(calls)
    return t_world, t_raw


def bench_reset(quick: bool) -> dict[str, float]:
    """Reset after an episode that made the reference solution's writes, against raw deserialize."""
    task, spec = big_retail()
    world = World(spec)
    raw = raw_connection(world)
    initial = world.compiled.initial
    number = 200 if quick else 2000
    first = ToolCall("list_orders", {"customer_id": 1, "status": "pending"})
    sql = world.compiled.tools["list_orders"].statements[0]
    binds = {"customer_id": 1, "status": "pending"}
    calls = list(task.solution[:-1])

    def timed_reset(then_step: bool) -> float:
        best = float("inf")
        for _ in range(5):
            total = 0.0
            for _ in range(number):
                world.reset(task)
                for call in calls:  # the episode's writes, not timed
                    world.step(call)
                start = time.perf_counter()
                world.reset(task)
                if then_step:
                    world.step(first)
                total += time.perf_counter() - start
            best = min(best, total / number)
        return best

    def raw_reset_then_step() -> None:
        raw.deserialize(initial)
        raw.execute(sql, binds).fetchall()

    return {
        "bytes": float(len(initial)),
        "world": timed_reset(False),
        "raw": best_of(lambda: raw.deserialize(initial), 5, number),
        "world_first_step": timed_reset(True),
        "raw_first_step": best_of(raw_reset_then_step, 5, number),
    }


def bench_episode(quick: bool) -> dict[str, float]:
    out = {}
    for label, (task, spec) in (("example world", retail()), ("10,000-row world", big_retail())):
        world = World(spec)
        calls = list(task.solution)
        out[label] = best_of(lambda w=world, t=task, c=calls: w.run(t, c), 5, 50 if quick else 300)
    return out


def bench_judge(quick: bool) -> dict[str, float]:
    tasks, worlds = load_records(EXAMPLES)
    cache = WorldCache(specs=worlds)
    per_task = {}
    for task in tasks:
        assess_task(task, cache)  # build the worlds once
        per_task[task.instruction[:40]] = best_of(
            lambda t=task: assess_task(t, cache), 3, 5 if quick else 20
        )
    big_task, big_spec = big_retail()
    big_cache = WorldCache()
    big_cache.add(big_spec)
    assess_task(big_task, big_cache)
    per_task["(10,000-row retail world)"] = best_of(
        lambda: assess_task(big_task, big_cache), 3, 3 if quick else 10
    )
    return per_task


def bench_isolation(quick: bool) -> tuple[float, float]:
    """Seconds per task for the example tasks: in a worker process, and in this process."""
    tasks, worlds = load_records(EXAMPLES)
    cache = WorldCache(specs=worlds)
    number = 3 if quick else 20
    here = best_of(lambda: [assess_task(t, cache) for t in tasks], 3, number) / len(tasks)
    with IsolatedJudge() as judge:
        judge.assess(tasks, worlds)  # start the worker and build its worlds
        isolated = best_of(lambda: judge.assess(tasks, worlds), 3, number) / len(tasks)
    return isolated, here


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()

    t_world, t_raw = bench_steps(args.quick)
    print("1. tool-call steps (6-call mix of reads and a write, example retail world)")
    print(f"   World.step   {1 / t_world:>10,.0f} steps/s   {t_world * 1e6:6.2f} us/step")
    print(f"   raw sqlite3  {1 / t_raw:>10,.0f} steps/s   {t_raw * 1e6:6.2f} us/step")
    print(f"   ratio        {t_world / t_raw:10.2f}x raw cost (aim <= 3x)")

    reset = bench_reset(args.quick)
    print(
        f"\n2. reset of a 10,000-row world ({reset['bytes'] / 1024:,.0f} KiB) after an episode that wrote"
    )
    print(f"   World.reset              {reset['world'] * 1e6:8.1f} us   (aim <= 200 us)")
    print(
        f"   raw deserialize          {reset['raw'] * 1e6:8.1f} us   ratio {reset['world'] / reset['raw']:.2f}x"
    )
    print(f"   reset + first step       {reset['world_first_step'] * 1e6:8.1f} us")
    print(
        f"   raw: same                {reset['raw_first_step'] * 1e6:8.1f} us   ratio {reset['world_first_step'] / reset['raw_first_step']:.2f}x"
    )

    print("\n3. one episode: reset + reference solution + verification (reward 1)")
    for label, seconds in bench_episode(args.quick).items():
        print(f"   {label:<20} {seconds * 1e6:8.1f} us")

    print(
        "\n4. full Judge check time per task (valid, oracle, noop, unsolved, partial, determinism, grounded)"
    )
    for label, seconds in bench_judge(args.quick).items():
        print(f"   {label:<42} {seconds * 1e3:7.2f} ms")

    isolated, here = bench_isolation(args.quick)
    print(
        "\n5. the Judge isolated in a worker process (the default) against this process, per task"
    )
    print(f"   in a worker     {isolated * 1e3:7.2f} ms")
    print(f"   in-process      {here * 1e3:7.2f} ms")
    print(f"   ratio           {isolated / here:7.2f}x")


if __name__ == "__main__":
    main()
