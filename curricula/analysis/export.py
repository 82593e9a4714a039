"""Export a run's curriculum as training data: one row per accepted task, ready for an RL trainer.

Each row holds:

* ``task_id``, ``gen``, ``level``, ``domain``, ``family``, ``source``;
* ``predicted``: the World model's P(success) when it was accepted, and
  ``success``: the mean reward of its training episodes (None if never played);
* ``system`` and ``instruction``, and ``prompt`` (the two joined) to start an episode with;
* ``tools``: the world's tools plus ``submit``, as function definitions
  (``name``, ``description``, ``input_schema`` — the Anthropic tool format;
  ``openai_tools`` has the same in the OpenAI ``{"type": "function", ...}`` form);
* ``spec``: the whole ``coevo.task/1`` record with its world inline, so
  ``coevo.arena`` recreates the world and computes the reward of any trajectory.

``--where`` filters rows with a small, safe expression over those fields:
comparisons, ``and``/``or``/``not``, numbers, strings, ``None`` and ``in``
lists, e.g. ``gen >= 10 and level >= 2 and 0.2 <= success <= 0.8``.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from coevo.arena.errors import CoevoError
from coevo.arena.gamelog import GameLog
from coevo.arena.rendering import SYSTEM, openai_tools, prompt, tool_definitions
from coevo.arena.spec import TaskSpec, WorldSpec
from coevo.curricula.analysis.metrics import Run

__all__ = ["compile_where", "export_run", "task_row"]

_FIELDS = (
    "task_id",
    "gen",
    "level",
    "domain",
    "family",
    "source",
    "predicted",
    "success",
)


def task_row(task: TaskSpec, **fields: Any) -> dict[str, Any]:
    """The export row of one task (its world inline); ``fields`` fill gen, level, success, ...

    Raises:
        CoevoError: the task's world is not inline.
    """
    if not isinstance(task.world, WorldSpec):
        raise CoevoError(f"task {task.task_id}: give it with its world inline")
    tools = tool_definitions(task.world)
    row: dict[str, Any] = dict.fromkeys(_FIELDS)
    row.update(fields)
    row.update(
        {
            "task_id": task.task_id,
            "system": SYSTEM,
            "instruction": task.instruction,
            "prompt": prompt(task),
            "tools": tools,
            "openai_tools": openai_tools(tools),
            "spec": task.model_dump(mode="json", exclude_none=True),
        }
    )
    return row


_COMPARE: Mapping[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


def compile_where(expression: str) -> Callable[[Mapping[str, Any]], bool]:
    """A row filter from a ``--where`` expression (see the module docstring).

    A comparison with a missing value (None) is false.

    Raises:
        CoevoError: a syntax error, or anything but names, constants, comparisons and and/or/not.
    """
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise CoevoError(f"--where {expression!r} is not an expression: {exc.msg}") from exc

    def value(node: ast.AST, row: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in _FIELDS:
                raise CoevoError(
                    f"--where: unknown field {node.id!r}; fields: {', '.join(_FIELDS)}"
                )
            return row.get(node.id)
        if isinstance(node, (ast.List, ast.Tuple)):
            return [value(e, row) for e in node.elts]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand, row)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not truth(node.operand, row)
        return truth(node, row)

    def truth(node: ast.AST, row: Mapping[str, Any]) -> bool:
        if isinstance(node, ast.BoolOp):
            parts = (truth(v, row) for v in node.values)
            return all(parts) if isinstance(node.op, ast.And) else any(parts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not truth(node.operand, row)
        if isinstance(node, ast.Compare):
            left = value(node.left, row)
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = value(right_node, row)
                compare = _COMPARE.get(type(op))
                if compare is None:
                    raise CoevoError(f"--where: operator {type(op).__name__} is not allowed")
                is_identity = isinstance(op, (ast.Is, ast.IsNot))
                if not is_identity and (left is None or right is None):
                    return False
                if not compare(left, right):
                    return False
                left = right
            return True
        if isinstance(node, (ast.Constant, ast.Name)):
            return bool(value(node, row))
        raise CoevoError(
            f"--where: {ast.unparse(node)!r} is not allowed (use fields, constants, "
            "comparisons, and, or, not)"
        )

    # check the shape once, on an empty row
    truth(tree.body, dict.fromkeys(_FIELDS))
    return lambda row: truth(tree.body, row)


def export_run(
    run: Run, out: str | Path, *, fmt: str = "jsonl", where: str | None = None
) -> tuple[Path, int]:
    """Write the accepted tasks of ``run`` to ``out/tasks.<fmt>``; returns the path and the row count.

    Raises:
        CoevoError: an unknown format or a bad ``where``.
    """
    if fmt not in ("jsonl", "parquet"):
        raise CoevoError(f"--format must be jsonl or parquet, not {fmt!r}")
    keep = compile_where(where) if where else (lambda row: True)
    tasks, _ = GameLog(run.run_dir).task_specs()
    accepted = run["verdicts"].filter(run["verdicts"].column("accepted"))
    first_gen: dict[str, int] = {}
    for row in accepted.select(["task_id", "gen"]).to_pylist():
        first_gen.setdefault(row["task_id"], row["gen"])
    meta = {r["task_id"]: r for r in run["tasks"].to_pylist()}
    predicted = {r["task_id"]: r["p"] for r in run["predictions"].to_pylist()}
    episodes = run["episodes"]
    train = episodes.filter(pc.equal(episodes.column("purpose"), "train"))
    success = {
        r["task_id"]: r["reward_mean"]
        for r in train.group_by("task_id").aggregate([("reward", "mean")]).to_pylist()
    }
    rows = []
    for task_id, gen in first_gen.items():
        info = meta.get(task_id, {})
        if info.get("source") == "eval":
            continue
        row = task_row(
            tasks[task_id],
            gen=gen,
            level=info.get("level"),
            domain=info.get("domain"),
            family=info.get("family"),
            source=info.get("source"),
            predicted=predicted.get(task_id),
            success=success.get(task_id),
        )
        if keep(row):
            rows.append(row)
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"tasks.{fmt}"
    if fmt == "jsonl":
        with path.open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
        flat = [
            {
                **{k: row[k] for k in (*_FIELDS, "system", "instruction", "prompt")},
                "tools": json.dumps(row["tools"], ensure_ascii=False),
                "openai_tools": json.dumps(row["openai_tools"], ensure_ascii=False),
                "spec": json.dumps(row["spec"], ensure_ascii=False),
            }
            for row in rows
        ]
        schema = pa.schema(
            [
                ("task_id", pa.string()),
                ("gen", pa.int64()),
                ("level", pa.int64()),
                ("domain", pa.string()),
                ("family", pa.string()),
                ("source", pa.string()),
                ("predicted", pa.float64()),
                ("success", pa.float64()),
                ("system", pa.string()),
                ("instruction", pa.string()),
                ("prompt", pa.string()),
                ("tools", pa.string()),
                ("openai_tools", pa.string()),
                ("spec", pa.string()),
            ]
        )
        pq.write_table(pa.Table.from_pylist(flat, schema=schema), path)
    return path, len(rows)
