"""Export a run's curriculum as training data, ``coevo.export/1``: tasks, worlds and a manifest.

``export_run(run, DIR)`` writes

* ``DIR/tasks.jsonl``: one row per accepted task (not the eval suite's): its
  ids, its features (generation, level, domain, family, source, the World
  model's prediction, the success it reached), the prompt as text and as chat
  ``messages``, its verifier, and the whole ``coevo.task/1`` record with its
  world *by id*;
* ``DIR/worlds.jsonl``: each world those tasks use, once: the
  ``coevo.world/1`` record and its tools as function definitions, in the
  Anthropic and in the OpenAI shape;
* ``DIR/export.json``: the manifest (:class:`ExportManifest`), written last.

``fmt="parquet"`` writes the same tables as ``tasks.parquet`` and
``worlds.parquet``; ``inline_worlds=True`` puts each task's world and tools in
its row instead (no worlds table), for tools that need self-contained rows.
Records, verifiers and tool lists are JSON text in both formats, so the two
have one schema and load as they are (``datasets``, pandas, polars, DuckDB).

:func:`read_tasks` reads an export back, each task with its world resolved
(a benchmark run's imported tasks as ``coevo.codetask/1`` records, their
worlds ``coevo.codeworld/1``: :func:`code_task_row`),
so a trainer recreates the world and the reward of any trajectory with
:class:`coevo.arena.World`; :func:`task_from_row` does it for one row.

``where`` filters rows with a small, safe expression over :data:`WHERE_FIELDS`:
comparisons, ``and``/``or``/``not``, numbers, strings, ``None`` and ``in``
lists, e.g. ``gen >= 10 and level >= 2 and 0.2 <= success <= 0.8``.
"""

from __future__ import annotations

import ast
import json
import operator
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Final, Literal, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from coevo.arena.analysis.metrics import Run
from coevo.arena.bounded import (
    MAX_FILE_BYTES,
    MAX_JSON_BYTES,
    loads_json,
    open_to_write,
    read_parquet_bytes,
    read_regular,
)
from coevo.arena.codetask import CODETASK_FORMAT, CodeTaskSpec
from coevo.arena.codeworld import CODEWORLD_FORMAT, CodeWorldSpec
from coevo.arena.errors import CoevoError
from coevo.arena.gamelog.corpus import held_out
from coevo.arena.gamelog.log import has_format
from coevo.arena.rendering import SYSTEM, openai_tools, prompt, tool_definitions
from coevo.arena.spec import TaskSpec, WorldSpec
from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "EXPORT_FORMAT",
    "MANIFEST",
    "TASK_FIELDS",
    "WHERE_FIELDS",
    "WORLD_FIELDS",
    "ExportField",
    "ExportFile",
    "ExportManifest",
    "code_task_row",
    "compile_where",
    "export_run",
    "markdown_tables",
    "read_manifest",
    "read_tasks",
    "read_worlds",
    "task_from_row",
    "task_row",
    "world_row",
]

EXPORT_FORMAT: Final = "coevo.export/1"
"""The version of the export's layout: its files, their columns and the manifest."""

MANIFEST: Final = "export.json"
"""The manifest's file name in an export directory."""


@dataclass(frozen=True, slots=True)
class ExportField:
    """One column of an export table.

    Attributes:
        name: the column's name.
        type: its Arrow type (the Parquet column's; JSONL holds the same values).
        about: what it holds, for the docs.
        json: the value is JSON text (a record, a verifier, a list of tools).
        inline: only in the tasks table of an export with its worlds inline.
    """

    name: str
    type: pa.DataType
    about: str
    json: bool = False
    inline: bool = False


_MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])

_FEATURES: Final = (
    ExportField("task_id", pa.string(), "the task's content id (`sha256:...`)"),
    ExportField("world_id", pa.string(), "its world's content id: a row of the worlds table"),
    ExportField("gen", pa.int64(), "the generation that first accepted it"),
    ExportField("level", pa.int64(), "its difficulty level, 1–5 (null if unknown)"),
    ExportField("domain", pa.string(), "its world's domain (`retail`, ...)"),
    ExportField(
        "family",
        pa.string(),
        "`question`, `action`, `bulk` or `conditional`, when the synthesizer recorded a plan",
    ),
    ExportField("source", pa.string(), "`fresh` (proposed) or `mutation` (made from `parent`)"),
    ExportField("parent", pa.string(), "for a mutation, the parent task's id"),
    ExportField("operator", pa.string(), "for a mutation, the operator that made it"),
    ExportField(
        "predicted",
        pa.float64(),
        "the World model's P(success) when the task was first accepted (null if none)",
    ),
    ExportField(
        "success",
        pa.float64(),
        "the mean reward of its training episodes in the run (null if never played)",
    ),
    ExportField("episodes", pa.int64(), "how many training episodes played it"),
    ExportField(
        "split",
        pa.string(),
        "`train`, or `eval` for a corpus's held-out worlds (its split rule; a run's eval suite is "
        "never exported)",
    ),
)

_CONTENT: Final = (
    ExportField("system", pa.string(), "the system text of every episode"),
    ExportField("instruction", pa.string(), "the user's request"),
    ExportField("prompt", pa.string(), "`system` and `instruction`, joined by a blank line"),
    ExportField(
        "messages",
        pa.list_(_MESSAGE),
        "the same as chat messages: `[{role: system, content}, {role: user, content}]`",
    ),
    ExportField(
        "verifier",
        pa.string(),
        "the verifier, `{checks, frame}`: what decides the binary reward",
        json=True,
    ),
    ExportField(
        "task",
        pa.string(),
        "the whole `coevo.task/1` record, its world by id (`world_id`)",
        json=True,
    ),
    ExportField("world", pa.string(), "the whole `coevo.world/1` record", json=True, inline=True),
    ExportField(
        "tools",
        pa.string(),
        "its world's tools and `submit` as Anthropic function definitions",
        json=True,
        inline=True,
    ),
    ExportField(
        "openai_tools",
        pa.string(),
        "the same in the OpenAI shape",
        json=True,
        inline=True,
    ),
)

TASK_FIELDS: Final = _FEATURES + _CONTENT
"""The tasks table: one row per accepted task (the ``inline`` fields only with ``inline_worlds``)."""

WORLD_FIELDS: Final = (
    ExportField("world_id", pa.string(), "the world's content id (`sha256:...`)"),
    ExportField("domain", pa.string(), "its domain"),
    ExportField("tasks", pa.int64(), "how many exported tasks use it"),
    ExportField(
        "tools",
        pa.string(),
        "its tools and `submit` as Anthropic function definitions "
        "(`[{name, description, input_schema}]`)",
        json=True,
    ),
    ExportField(
        "openai_tools",
        pa.string(),
        "the same in the OpenAI shape (`[{type: function, function: {name, description, parameters}}]`)",
        json=True,
    ),
    ExportField("world", pa.string(), "the whole `coevo.world/1` record", json=True),
)
"""The worlds table: one row per world the exported tasks use."""

WHERE_FIELDS: Final = tuple(f.name for f in _FEATURES)
"""The fields ``where`` may name: the tasks table's ids and features."""


def _schema(fields: Iterable[ExportField]) -> pa.Schema:
    return pa.schema([(f.name, f.type) for f in fields])


def _tasks_fields(inline_worlds: bool) -> tuple[ExportField, ...]:
    return tuple(f for f in TASK_FIELDS if inline_worlds or not f.inline)


def markdown_tables() -> str:
    """The two tables' columns as Markdown (docs/analysis.md holds this text verbatim)."""

    def kind(f: ExportField) -> str:
        if f.json:
            return "JSON text"
        if pa.types.is_list(f.type):
            return "list of `{role, content}`"
        return {"int64": "integer", "double": "number"}.get(str(f.type), str(f.type))

    def table(title: str, fields: Iterable[ExportField]) -> str:
        lines = [f"| {title} | type | what |", "|---|---|---|"]
        for f in fields:
            note = " (only with `--inline-worlds`)" if f.inline else ""
            lines.append(f"| `{f.name}` | {kind(f)} | {f.about}{note} |")
        return "\n".join(lines)

    return table("tasks", TASK_FIELDS) + "\n\n" + table("worlds", WORLD_FIELDS) + "\n"


class ExportFile(BaseModel):
    """One table of an export, as written."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str = Field(description="the file's name inside the export directory")
    rows: int = Field(description="its rows")
    bytes: int = Field(description="its size")


class ExportManifest(BaseModel):
    """``DIR/export.json``: what an export holds, written after its tables."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["coevo.export/1"] = EXPORT_FORMAT
    coevo: str | None = Field(default=None, description="the coevo version that wrote it")
    run: dict[str, Any] = Field(
        description="the source run: `run_dir`, `name`, `curriculum`, `generations`"
    )
    where: str | None = Field(default=None, description="the row filter, when one was given")
    table_format: Literal["jsonl", "parquet"] = Field(description="`jsonl` or `parquet`")
    inline_worlds: bool = Field(description="whether each task row holds its world")
    tasks: ExportFile
    worlds: ExportFile | None = Field(
        default=None, description="the worlds table (none when the worlds are inline)"
    )

    @property
    def files(self) -> list[ExportFile]:
        """The tables written, tasks first."""
        return [self.tasks] + ([self.worlds] if self.worlds is not None else [])

    @property
    def bytes(self) -> int:
        """The tables' total size."""
        return sum(f.bytes for f in self.files)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _messages(instruction: str) -> list[dict[str, str]]:
    # the chat form of what the Claude Solver sends: SYSTEM as the system text, the request as the user's turn
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": instruction}]


def _world(record: str) -> WorldSpec | CodeWorldSpec:
    """A logged or exported world record: SQL (``coevo.world/1``) or code (``coevo.codeworld/1``)."""
    if has_format(record, CODEWORLD_FORMAT):
        return CodeWorldSpec.model_validate_json(record)
    return WorldSpec.model_validate_json(record)


def world_row(
    world: WorldSpec | CodeWorldSpec, *, tasks: int = 0, record: str | None = None
) -> dict[str, Any]:
    """The worlds-table row of ``world`` (``record``: its JSON text, when already at hand).

    A code world's tools are its agent tools (it has no ``submit``: a code
    task's episode ends with the conversation).
    """
    if isinstance(world, CodeWorldSpec):
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in world.tools
            if t.side == "agent"
        ]
    else:
        tools = tool_definitions(world)
    return {
        "world_id": world.world_id,
        "domain": world.domain,
        "tasks": tasks,
        "tools": _json(tools),
        "openai_tools": _json(openai_tools(tools)),
        "world": record if record is not None else world.model_dump_json(exclude_none=True),
    }


def task_row(
    task: TaskSpec, *, inline_world: bool = False, record: str | None = None, **fields: Any
) -> dict[str, Any]:
    """The tasks-table row of ``task``; ``fields`` fill the features (gen, level, success, ...).

    Works for any task, logged or not. ``record`` is the task's ``coevo.task/1``
    JSON with its world by id, when already at hand.

    Raises:
        CoevoError: ``inline_world`` for a task whose world is only an id; an unknown field.
    """
    unknown = set(fields) - set(WHERE_FIELDS)
    if unknown:
        raise CoevoError(
            f"task_row: unknown fields {sorted(unknown)}; fields: {', '.join(WHERE_FIELDS)}"
        )
    row: dict[str, Any] = dict.fromkeys(WHERE_FIELDS)
    row.update(fields)
    if record is None:
        record = task.model_copy(update={"world": task.world_id}).model_dump_json(exclude_none=True)
    row.update(
        {
            "task_id": task.task_id,
            "world_id": task.world_id,
            "system": SYSTEM,
            "instruction": task.instruction,
            "prompt": prompt(task),
            "messages": _messages(task.instruction),
            "verifier": task.verifier.model_dump_json(),
            "task": record,
        }
    )
    if inline_world:
        if not isinstance(task.world, WorldSpec):
            raise CoevoError(
                f"task {task.task_id}: its world is only an id; give the task with its world "
                "inline, or export without inline_worlds"
            )
        world = world_row(task.world)
        row.update({k: world[k] for k in ("world", "tools", "openai_tools")})
    return row


def code_task_row(record: str, world: CodeWorldSpec, **fields: Any) -> dict[str, Any]:
    """The tasks-table row of a code task (an imported benchmark's): its logged record (world by id) and its world.

    ``system`` is the world's (the domain's policy); ``instruction`` the
    task's (for a task with a user scenario, the scenario a user simulator
    plays: then ``messages`` holds only the system message, as the agent's
    conversation starts with the user, and ``prompt`` only the system text).
    """
    data = json.loads(record)
    task = CodeTaskSpec.read(data | {"world": world.model_dump(mode="json")})
    row: dict[str, Any] = dict.fromkeys(WHERE_FIELDS)
    row.update(fields)
    simulated = task.user_scenario is not None
    messages = [{"role": "system", "content": world.system}]
    if not simulated:
        messages.append({"role": "user", "content": task.instruction})
    row.update(
        {
            "task_id": task.task_id,
            "world_id": world.world_id,
            "system": world.system,
            "instruction": task.instruction,
            "prompt": world.system if simulated else f"{world.system}\n\n{task.instruction}",
            "messages": messages,
            "verifier": task.verifier.model_dump_json(),
            "task": record,
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
    """A row filter from a ``where`` expression over :data:`WHERE_FIELDS` (see the module docstring).

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
            if node.id not in WHERE_FIELDS:
                raise CoevoError(
                    f"--where: unknown field {node.id!r}; fields: {', '.join(WHERE_FIELDS)}"
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
                try:
                    holds = compare(left, right)
                except TypeError:
                    raise CoevoError(
                        f"--where {expression!r}: cannot compare {left!r} and {right!r} "
                        f"({type(left).__name__} and {type(right).__name__}); compare numbers "
                        "with numbers and text with quoted text"
                    ) from None
                if not holds:
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
    truth(tree.body, dict.fromkeys(WHERE_FIELDS))
    return lambda row: truth(tree.body, row)


def _features(run: Run) -> list[dict[str, Any]]:
    """The accepted tasks' ids and features, in the order they were first accepted; no eval task."""
    verdicts = run["verdicts"]
    accepted = verdicts.filter(verdicts.column("accepted")).select(["task_id", "gen"])
    first_gen: dict[str, int] = {}
    for task_id, gen in zip(
        accepted.column("task_id").to_pylist(), accepted.column("gen").to_pylist(), strict=True
    ):
        first_gen.setdefault(task_id, gen)
    meta: dict[str, dict[str, Any]] = {}
    suite = set()  # the eval suite's tasks stay out, even when a synthesizer proposed one again
    for row in run["tasks"].drop_columns(["spec"]).to_pylist():
        if row["source"] == "eval":
            suite.add(row["task_id"])
        else:
            meta.setdefault(row["task_id"], row)
    predictions = run["predictions"]
    predicted: dict[str, float] = {}
    for task_id, p in zip(
        predictions.column("task_id").to_pylist(), predictions.column("p").to_pylist(), strict=True
    ):
        predicted.setdefault(task_id, p)  # the prediction made when it was first accepted
    episodes = run["episodes"]
    episodes = episodes.filter(pc.is_null(episodes.column("failure")))  # played ones only
    # a benchmark run's episodes are its trials (eval); a co-evolution run's, its training
    purpose = "eval" if run.experiment.get("benchmark") else "train"
    train = episodes.filter(pc.equal(episodes.column("purpose"), purpose))
    played = {
        r["task_id"]: (r["reward_mean"], r["reward_count"])
        for r in train.group_by("task_id")
        .aggregate([("reward", "mean"), ("reward", "count")])
        .to_pylist()
    }
    # a corpus's split is a rule on the world id, with the manifest's share (arena.gamelog.corpus)
    share = float(((run.experiment.get("corpus") or {}).get("split") or {}).get("eval_share", 0))
    out = []
    for task_id, gen in first_gen.items():
        if task_id in suite:
            continue
        info = meta.get(task_id, {})
        success, count = played.get(task_id, (None, 0))
        out.append(
            {
                "task_id": task_id,
                "world_id": info.get("world_id"),
                "gen": gen,
                "level": info.get("level"),
                "domain": info.get("domain"),
                "family": info.get("family"),
                "source": info.get("source"),
                "parent": info.get("parent"),
                "operator": info.get("operator"),
                "predicted": predicted.get(task_id),
                "success": success,
                "episodes": count,
                "split": "eval"
                if share and held_out(info.get("world_id") or "", share)
                else "train",
            }
        )
    return out


def _first_by_id(table: pa.Table, key: str, wanted: set[str]) -> dict[str, str]:
    """``key`` → the ``spec`` JSON text of its first row, for the ids in ``wanted``."""
    out: dict[str, str] = {}
    for item, spec in zip(
        table.column(key).to_pylist(), table.column("spec").to_pylist(), strict=True
    ):
        if item in wanted and item not in out:
            out[item] = spec
    return out


def _write(
    rows: Iterable[dict[str, Any]], fields: tuple[ExportField, ...], path: Path
) -> ExportFile:
    """Write ``rows`` to ``path`` (JSONL as they come; Parquet in one table), through no link."""
    count = 0
    fd = open_to_write(
        path, path.parent
    )  # a planted tasks.jsonl -> elsewhere is refused, unwritten
    if path.suffix == ".jsonl":
        names = [f.name for f in fields]
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(_json({name: row[name] for name in names}) + "\n")
                count += 1
            handle.flush()
            size = os.fstat(handle.fileno()).st_size
    else:
        with os.fdopen(fd, "wb") as stream:
            table = pa.Table.from_pylist(list(rows), schema=_schema(fields))
            pq.write_table(table, stream)
            count = table.num_rows
            stream.flush()
            size = os.fstat(stream.fileno()).st_size
    return ExportFile(path=path.name, rows=count, bytes=size)


def _clear(target: Path) -> None:
    """Remove an earlier export's manifest and tables from ``target`` (only files it names)."""
    manifest = target / MANIFEST
    if not manifest.is_file():
        return
    try:
        earlier = ExportManifest.model_validate_json(read_regular(manifest, limit=MAX_JSON_BYTES))
    except (ValidationError, OSError):  # a link, a FIFO, too big: no manifest this coevo wrote
        earlier = None
    manifest.unlink()  # first: a directory with no manifest holds no finished export
    tables = {f"{table}.{fmt}" for table in ("tasks", "worlds") for fmt in ("jsonl", "parquet")}
    for file in earlier.files if earlier is not None else []:
        if Path(file.path).name in tables:  # what a manifest names is data: never anything else
            (target / Path(file.path).name).unlink(missing_ok=True)


def export_run(
    run: Run,
    out: str | Path,
    *,
    fmt: str = "jsonl",
    where: str | None = None,
    inline_worlds: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ExportManifest:
    """Write the accepted tasks of ``run`` to the directory ``out`` (see the module docstring).

    The manifest is written last; an earlier export in ``out`` is replaced
    (the files its manifest names are removed first).

    Args:
        run: the run, from :func:`~coevo.arena.analysis.load_run`.
        out: the export directory (made if missing).
        fmt: ``jsonl`` or ``parquet``.
        where: keep only the tasks for which this expression holds (:func:`compile_where`).
        inline_worlds: put each task's world and tools in its row; no worlds table.
        progress: called with (tasks done, tasks in all) as the task rows are made and written.

    Returns:
        The manifest, as written to ``out/export.json``.

    Raises:
        CoevoError: an unknown format, a bad ``where``, or a task whose world is not in the log.
    """
    if fmt not in ("jsonl", "parquet"):
        raise CoevoError(f"--format must be jsonl or parquet, not {fmt!r}")
    keep = compile_where(where) if where else (lambda row: True)
    chosen = [row for row in _features(run) if keep(row)]
    specs = _first_by_id(run["tasks"], "task_id", {row["task_id"] for row in chosen})
    records = _first_by_id(run["worlds"], "world_id", {row["world_id"] for row in chosen})
    missing = next((row for row in chosen if row["world_id"] not in records), None)
    if missing is not None:
        raise CoevoError(
            f"task {missing['task_id']} refers to world {missing['world_id']}, which is not in "
            f"the log of {run.run_dir}; the log is damaged (`coevo doctor` says where)"
        )
    worlds = {w: _world(record) for w, record in records.items()}
    inline = (  # each world's row, made once and shared by its tasks
        {w: world_row(worlds[w], record=records[w]) for w in worlds} if inline_worlds else {}
    )

    def task_rows() -> Iterable[dict[str, Any]]:
        for done, features in enumerate(chosen, start=1):
            record = specs[features["task_id"]]
            world = worlds[features["world_id"]]
            if isinstance(world, CodeWorldSpec):
                row = code_task_row(record, world, **features)
            else:
                row = task_row(TaskSpec.model_validate_json(record), record=record, **features)
            if inline_worlds:
                shared = inline[features["world_id"]]
                row.update({k: shared[k] for k in ("world", "tools", "openai_tools")})
            yield row
            if progress is not None:
                progress(done, len(chosen))

    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    _clear(target)
    tasks_file = _write(task_rows(), _tasks_fields(inline_worlds), target / f"tasks.{fmt}")
    worlds_file = None
    if not inline_worlds:
        uses = Counter(row["world_id"] for row in chosen)
        world_rows = (
            world_row(worlds[w], tasks=uses[w], record=records[w]) for w in sorted(worlds)
        )
        worlds_file = _write(world_rows, WORLD_FIELDS, target / f"worlds.{fmt}")
    manifest = ExportManifest(
        coevo=_version(),
        run={
            "run_dir": run.run_dir,
            "name": run.experiment.get("run", {}).get("name"),
            "curriculum": run.experiment.get("curriculum", {}).get("name"),
            "generations": run.generations,
        },
        where=where,
        table_format=cast(Literal["jsonl", "parquet"], fmt),
        inline_worlds=inline_worlds,
        tasks=tasks_file,
        worlds=worlds_file,
    )
    with os.fdopen(open_to_write(target / MANIFEST, target), "w", encoding="utf-8") as handle:
        handle.write(manifest.model_dump_json(indent=1) + "\n")
    return manifest


def _version() -> str | None:
    try:
        return metadata.version("coevo")
    except metadata.PackageNotFoundError:
        return None


def read_manifest(directory: str | Path) -> ExportManifest:
    """The manifest of the export in ``directory``.

    Raises:
        CoevoError: no manifest, or one this coevo cannot read.
    """
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise CoevoError(
            f"{directory} holds no export (no {MANIFEST}); write one with `coevo export RUN --out {directory}`"
        )
    try:
        return ExportManifest.model_validate_json(read_regular(path, limit=MAX_JSON_BYTES))
    except OSError as exc:  # a link, a FIFO, a device, too big: refused unread
        raise CoevoError(f"{path} cannot be read: {exc}") from exc
    except ValidationError as exc:
        raise CoevoError(
            f"{path} is not a {EXPORT_FORMAT} manifest ({exc.error_count()} problems, first: "
            f"{exc.errors()[0]['msg']}); export the run again with this coevo"
        ) from exc


def _rows(directory: Path, file: ExportFile) -> list[dict[str, Any]]:
    path = directory / file.path
    try:
        data = read_regular(path, limit=MAX_FILE_BYTES)
        if path.suffix == ".jsonl":
            return [
                loads_json(line, str(path))
                for line in data.decode("utf-8").splitlines()
                if line.strip()
            ]
        return read_parquet_bytes(data, str(path)).to_pylist()
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise CoevoError(f"{path} cannot be read: {exc}") from exc


def _worlds_of(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    worlds: dict[str, Any] = {}
    for row in rows:
        if row["world_id"] not in worlds:
            worlds[row["world_id"]] = _world(row["world"])
    return worlds


def read_worlds(directory: str | Path) -> dict[str, WorldSpec]:
    """The worlds of the export in ``directory``, by id (from the task rows when they are inline).

    Raises:
        CoevoError: no export there.
    """
    manifest = read_manifest(directory)
    return _worlds_of(_rows(Path(directory), manifest.worlds or manifest.tasks))


def task_from_row(row: Mapping[str, Any], worlds: Mapping[str, Any] | None = None) -> Any:
    """The task of one tasks-table row, its world resolved: from ``worlds`` by id, or from the row.

    ``row`` may come from the JSONL or Parquet file, ``datasets``, pandas or
    polars: any mapping with the ``task`` column (and ``world``, when the
    export has its worlds inline and ``worlds`` is not given).

    Raises:
        CoevoError: the world is neither in ``worlds`` nor in the row.
    """
    if has_format(row["task"], CODETASK_FORMAT):
        return _code_task_from_row(row, worlds)
    task = TaskSpec.model_validate_json(row["task"])
    world = (worlds or {}).get(task.world_id)
    if world is None and row.get("world"):
        world = WorldSpec.model_validate_json(row["world"])
    if world is None:
        raise CoevoError(
            f"task {task.task_id}: its world {task.world_id} is not given; pass the export's "
            "worlds (read_worlds(DIR)), or export with --inline-worlds"
        )
    return task.model_copy(update={"world": world})


def read_tasks(directory: str | Path) -> list[Any]:
    """Every task of the export in ``directory``, in its order, each with its world inline (a ``TaskSpec``, or a ``CodeTaskSpec`` for a code task).

    Each world is read once and shared by its tasks.

    Raises:
        CoevoError: no export there, or a task whose world is missing from it.
    """
    manifest = read_manifest(directory)
    rows = _rows(Path(directory), manifest.tasks)
    worlds = _worlds_of(
        rows if manifest.worlds is None else _rows(Path(directory), manifest.worlds)
    )
    return [task_from_row(row, worlds) for row in rows]


def _code_task_from_row(row: Mapping[str, Any], worlds: Mapping[str, Any] | None) -> Any:
    record = json.loads(row["task"])
    world = (worlds or {}).get(str(record.get("world")))
    if world is None and row.get("world"):
        world = _world(row["world"])
    if not isinstance(world, CodeWorldSpec):
        raise CoevoError(
            f"task {record.get('id')}: its code world {record.get('world')} is not given; pass the "
            "export's worlds (read_worlds(DIR)), or export with --inline-worlds"
        )
    return CodeTaskSpec.read(record | {"world": world.model_dump(mode="json")})
