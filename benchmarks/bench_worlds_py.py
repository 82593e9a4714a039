"""Code worlds: a tool call and a reset in a sandboxed worker, next to a SQL world and to the function in-process.

    python benchmarks/bench_worlds_py.py [--calls 2000] [--orders 200] [--tau2 CHECKOUT]

One core, one worker. The code world is a small shop whose tools are plain
functions over a JSON state (this file's ``SHOP``, a ``FunctionRuntime``),
run three ways:

* **in-process** (the baseline): the same function on a ``dict``, no
  process boundary, no argument check;
* **code world, sandboxed**: ``CodeWorlds`` with the default sandbox
  (arguments checked against the tool's JSON Schema, a JSON frame to the
  worker and back, the worker's per-job CPU allowance reset);
* **code world, no sandbox**: the same pool without the sandbox's layers.

and next to the same look-up as a tool of a SQL world (``World.step``:
the SQLite guard, the tool's statements, the observation). Reset: a new
episode from the world's serialized initial state (in the worker: a deep
copy of the state it holds, and the runtime's ``load``), against
``World.reset`` and against ``copy.deepcopy`` in-process. The aim for the
sandboxed step: at most 5x the in-process call.

With ``--tau2 CHECKOUT`` (a τ²-bench checkout with its code's small
dependencies installed), the same for a real tool: airline's
``get_user_details`` through the ``tau2`` runtime, against the domain's
toolkit called in-process (its result dumped to JSON, as any harness must
to show it to an agent).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from pathlib import Path
from typing import Any

from coevo.arena.codeworld import CodeWorlds, CodeWorldSpec, FunctionRuntime
from coevo.arena.sandbox import Sandbox

HERE = str(Path(__file__).parent)


def find_order(state: dict[str, Any], order_id: str) -> dict[str, Any]:
    """An order by id."""
    order = state["orders"].get(order_id)
    if order is None:
        raise ValueError(f"no order {order_id}")
    return order


SHOP = FunctionRuntime({"find_order": find_order})


def world(orders: int) -> CodeWorldSpec:
    state = {
        "orders": {
            f"#{i}": {"id": f"#{i}", "status": "pending", "total": i * 3, "items": ["tea", "cake"]}
            for i in range(orders)
        }
    }
    params = {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    }
    tool = {
        "name": "find_order",
        "description": "An order.",
        "parameters": params,
        "effect": "read",
    }
    return CodeWorldSpec.read(
        {"runtime": "shop", "domain": "shop", "state": state, "tools": [tool]}
    )


def per_second(seconds: list[float]) -> float:
    return 1 / statistics.median(seconds)


def timed(n: int, step: Any) -> list[float]:
    out = []
    for i in range(n):
        start = time.perf_counter()
        step(i)
        out.append(time.perf_counter() - start)
    return out


def code_world(
    spec: CodeWorldSpec, sandbox: Sandbox | None, calls: int, orders: int
) -> tuple[float, float]:
    with CodeWorlds(
        runtimes={"shop": "bench_worlds_py:SHOP"}, sandbox=sandbox, paths=[HERE]
    ) as worlds:
        episode = worlds.episode(spec)
        episode.step("find_order", {"order_id": "#1"})  # the worker is up
        steps = timed(calls, lambda i: episode.step("find_order", {"order_id": f"#{i % orders}"}))
        resets = timed(max(20, calls // 20), lambda i: worlds.episode(spec).close())
    return 1 / statistics.median(steps), 1 / statistics.median(resets)


def sql_world(calls: int) -> tuple[float, float]:
    from importlib import resources

    from coevo.arena.records import load_records
    from coevo.arena.world import World

    tasks, worlds = load_records(
        Path(str(resources.files("coevo.arena.examples") / "examples.jsonl"))
    )
    task = tasks[0]
    world = World(worlds[task.world_id] if isinstance(task.world, str) else task.world)
    world.reset(task, max_steps=10**9)
    call = next(c for c in task.solution if c.tool != "submit")
    steps = timed(calls, lambda i: world.step(call))
    resets = timed(max(20, calls // 20), lambda i: world.reset(task, max_steps=10**9))
    return 1 / statistics.median(steps), 1 / statistics.median(resets)


def tau2_rows(checkout: str, calls: int) -> list[tuple[str, float, float]]:
    """The airline domain's own tool in-process, and as a code world (sandboxed), after coevo's import."""
    import json
    import sys

    from coevo.arena.tau2 import read_domain
    from coevo.arena.tau2_import import TAU2, import_domain

    domain = read_domain(checkout, "airline")
    spec = import_domain(domain).worlds[0]
    users = sorted(spec.state["users"])[:200]
    sys.path.insert(0, str(Path(checkout) / "src"))
    kit = TAU2.load("airline", copy.deepcopy(spec.state))

    def call(i: int) -> Any:
        result = kit.use_tool("get_user_details", user_id=users[i % len(users)])
        return json.dumps(result.model_dump(mode="json"))

    base = per_second(timed(calls, call))
    base_reset = per_second(timed(10, lambda i: TAU2.load("airline", copy.deepcopy(spec.state))))
    with CodeWorlds(paths=[str(Path(checkout) / "src")]) as worlds:
        episode = worlds.episode(spec)
        episode.step("get_user_details", {"user_id": users[0]})
        boxed = per_second(
            timed(
                calls,
                lambda i: episode.step("get_user_details", {"user_id": users[i % len(users)]}),
            )
        )
        boxed_reset = per_second(timed(10, lambda i: worlds.episode(spec).close()))
    return [
        ("tau2 airline tool in-process", base, base_reset),
        ("tau2 airline, code world", boxed, boxed_reset),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="tool calls timed per setup")
    parser.add_argument("--orders", type=int, default=200, help="orders in the code world's state")
    parser.add_argument("--tau2", default=None, metavar="CHECKOUT", help="also a real τ² tool")
    args = parser.parse_args()
    spec = world(args.orders)
    state = spec.state
    in_steps = timed(args.calls, lambda i: find_order(state, f"#{i % args.orders}"))
    in_resets = timed(max(20, args.calls // 20), lambda i: copy.deepcopy(state))
    base_step, base_reset = per_second(in_steps), per_second(in_resets)
    boxed_step, boxed_reset = code_world(spec, Sandbox(), args.calls, args.orders)
    plain_step, plain_reset = code_world(spec, None, args.calls, args.orders)
    sql_step, sql_reset = sql_world(args.calls)
    print(f"code world of {args.orders} orders; median of {args.calls} calls each; one worker\n")
    print(f"{'setup':<32} {'step/s':>10} {'x in-process':>13} {'reset/s':>9} {'x in-process':>13}")
    rows = [
        ("in-process function (baseline)", base_step, base_reset),
        ("code world, sandboxed", boxed_step, boxed_reset),
        ("code world, no sandbox", plain_step, plain_reset),
        ("SQL world (World.step/reset)", sql_step, sql_reset),
    ]
    for name, step, reset in rows:
        print(
            f"{name:<32} {step:>10.0f} {base_step / step:>12.1f}x {reset:>9.0f} {base_reset / reset:>12.1f}x"
        )
    print(
        f"\naim: the sandboxed step at most 5x the in-process call; measured {base_step / boxed_step:.0f}x"
    )
    if args.tau2:
        (name, step, reset), (bname, bstep, breset) = tau2_rows(args.tau2, min(args.calls, 500))
        print(f"\n{name:<32} {step:>10.0f} {1:>12.1f}x {reset:>9.1f} {1:>12.1f}x")
        print(
            f"{bname:<32} {bstep:>10.0f} {step / bstep:>12.1f}x {breset:>9.1f} {reset / breset:>12.1f}x"
        )


if __name__ == "__main__":
    main()
