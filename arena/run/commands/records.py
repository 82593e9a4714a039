"""``coevo check``, ``coevo play`` and ``coevo schema``: task and world records on the command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from coevo.arena.errors import CommandError, RecordError, SpecError
from coevo.arena.judge import CHECK_NAMES, WorldCache, assess_task, check_world_valid
from coevo.arena.outcomes import Observation
from coevo.arena.records import BadRecord, Record, iter_records, json_schema, load_records
from coevo.arena.run.commands import EXIT_OK, EXIT_REJECTED, EXIT_UNREADABLE
from coevo.arena.spec import TaskSpec, ToolCall, WorldSpec
from coevo.arena.world import World

__all__ = ["add_commands"]


def _not_run(reason: str) -> dict[str, Any]:
    return {"passed": None, "reason": reason}


def _check_line(item: Record | BadRecord, cache: WorldCache) -> dict[str, Any]:
    """One line of ``coevo check --json`` output."""
    if isinstance(item, BadRecord):
        checks: dict[str, Any] = {"valid": {"passed": False, "reason": item.error}}
        if item.kind == "task":
            checks |= {
                name: _not_run("not run: the record could not be read") for name in CHECK_NAMES[1:]
            }
        return {
            "line": item.line,
            "kind": item.kind,
            "id": None,
            "accepted": False,
            "checks": checks,
            "error": item.error,
        }
    if isinstance(item.spec, WorldSpec):
        world_id = cache.add(item.spec)
        valid = check_world_valid(item.spec, cache)
        return {
            "line": item.line,
            "kind": "world",
            "id": world_id,
            "accepted": bool(valid.passed),
            "checks": {"valid": valid.model_dump()},
            "error": None,
        }
    verdict = assess_task(item.spec, cache)
    return {
        "line": item.line,
        "kind": "task",
        "id": item.spec.task_id,
        "accepted": verdict.accepted,
        "checks": {name: result.model_dump() for name, result in verdict.checks.items()},
        "error": None,
    }


def _print_human(result: dict[str, Any], out: TextIO) -> None:
    mark = "accepted" if result["accepted"] else ("unreadable" if result["error"] else "rejected")
    if result["kind"] == "world" and result["accepted"]:
        mark = "valid"
    short = (result["id"] or "-")[:19]
    out.write(f"{result['line']:>5}  {result['kind']:<5}  {short:<19}  {mark}\n")
    for name, check in result["checks"].items():
        if check["passed"] is False:
            for i, line in enumerate(str(check["reason"]).splitlines()):
                prefix = f"{name:>13}: " if i == 0 else " " * 15
                out.write(f"{'':>7}{prefix}{line}\n")
        elif check["passed"] is True and "warning" in check["reason"]:
            out.write(f"{'':>7}{name:>13}: {check['reason']}\n")


def cmd_check(args: argparse.Namespace) -> int:
    """Run the Judge's checks on every record of a file."""
    path = args.file
    if path != "-" and not Path(path).is_file():
        raise CommandError(f"no such file: {path}")
    cache = WorldCache()
    unreadable = rejected = 0
    counts = {"world": 0, "task": 0}
    out = sys.stdout
    if not args.json:
        out.write(f"{'line':>5}  {'kind':<5}  {'id':<19}  result\n")
    try:
        for item in iter_records(path):
            result = _check_line(item, cache)
            counts[result["kind"]] = counts.get(result["kind"], 0) + 1
            if result["error"]:
                unreadable += 1
            elif not result["accepted"]:
                rejected += 1
            if args.json:
                out.write(json.dumps(result, ensure_ascii=False) + "\n")
            else:
                _print_human(result, out)
            out.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc}") from exc
    finally:
        cache.close()
    if not args.json:
        total = sum(counts.values())
        out.write(
            f"\n{total} record(s): {counts['world']} world(s), {counts['task']} task(s); "
            f"{rejected} rejected, {unreadable} unreadable\n"
        )
    if unreadable:
        return EXIT_UNREADABLE
    return EXIT_REJECTED if rejected else EXIT_OK


_PLAY_HELP = """commands:
  TOOL {"arg": value, ...}   call a tool with JSON arguments (TOOL alone = no arguments)
  submit {"answer": "..."}   end the episode (answer only for questions)
  :tools                     list the tools again
  :reset                     start the task over
  :quit                      leave
"""


def _pick_task(tasks: list[TaskSpec], wanted: str | None) -> TaskSpec:
    if not tasks:
        raise CommandError("the file holds no task records")
    if wanted is None:
        return tasks[0]
    if wanted.isdigit():
        index = int(wanted)
        if 1 <= index <= len(tasks):
            return tasks[index - 1]
        raise CommandError(
            f"--task {wanted}: the file holds {len(tasks)} task(s); number them from 1"
        )
    matches = [
        t for t in tasks if t.task_id.startswith(wanted) or t.task_id.startswith("sha256:" + wanted)
    ]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise CommandError(f"no task id starts with {wanted!r}")
    raise CommandError(f"{len(matches)} task ids start with {wanted!r}; give more of the id")


def _describe_tools(world: World) -> str:
    lines = []
    for tool in world.tool_definitions():
        schema = tool["input_schema"]
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        params = ", ".join(
            f"{name}{'' if name in required else '?'}: {'|'.join(p['type']) if isinstance(p.get('type'), list) else p.get('type', 'any')}"
            for name, p in props.items()
        )
        lines.append(f"  {tool['name']}({params})  — {tool['description']}")
    return "\n".join(lines)


def _parse_command(line: str) -> ToolCall | str:
    name, _, rest = line.strip().partition(" ")
    rest = rest.strip()
    if not rest:
        return ToolCall(name, {})
    try:
        arguments = json.loads(rest)
    except json.JSONDecodeError as exc:
        return f'arguments are not JSON ({exc.msg} at column {exc.colno}); write e.g. {name} {{"id": 17}}'
    if not isinstance(arguments, dict):
        return 'arguments must be a JSON object, e.g. {"id": 17}'
    return ToolCall(name, arguments)


def _show(obs: Observation, as_json: bool, out: TextIO) -> None:
    if as_json:
        out.write(json.dumps(obs.to_json(), ensure_ascii=False, default=str) + "\n")
        return
    out.write(obs.text() + "\n")
    if obs.done and obs.reward is not None:
        out.write("\n" + obs.reward.detail() + "\n")


def cmd_play(args: argparse.Namespace) -> int:
    """Attempt a task interactively."""
    try:
        tasks, worlds = load_records(args.file)
    except (RecordError, OSError) as exc:
        raise CommandError(str(exc)) from exc
    task = _pick_task(tasks, args.task)
    spec = task.world if isinstance(task.world, WorldSpec) else worlds.get(task.world)
    if spec is None:
        raise CommandError(f"the task's world {task.world} is not in the file")
    out = sys.stdout
    try:
        world = World(spec)
        world.reset(task, max_steps=args.max_steps)
    except SpecError as exc:
        raise CommandError(f"the task is not valid:\n{exc.summary()}", EXIT_REJECTED) from exc
    if not args.json:
        out.write(
            f"task {task.task_id[:19]} in world {world.id[:19]} ({spec.domain}, now {spec.now})\n\n"
        )
        out.write(
            f"instruction: {task.instruction}\n\ntools:\n{_describe_tools(world)}\n\n{_PLAY_HELP}\n"
        )
    interactive = sys.stdin.isatty()
    while True:
        if interactive:
            out.write("> ")
            out.flush()
        line = sys.stdin.readline()
        if not line:
            break
        line = line.strip()
        if not line:
            continue
        if line in (":quit", ":q", "quit", "exit"):
            break
        if line in (":help", "help", "?"):
            out.write(_PLAY_HELP)
            continue
        if line == ":tools":
            out.write(_describe_tools(world) + "\n")
            continue
        if line == ":reset":
            world.reset(task, max_steps=args.max_steps)
            out.write("reset: back to the initial state\n")
            continue
        call = _parse_command(line)
        if isinstance(call, str):
            out.write(f"error: {call}\n")
            continue
        obs = world.step(call)
        _show(obs, args.json, out)
        if obs.done:
            world.close()
            return EXIT_OK
    world.close()
    if not args.json:
        out.write("left without submitting (reward 0)\n")
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema."""
    sys.stdout.write(json.dumps(json_schema(args.record), indent=2, ensure_ascii=False) + "\n")
    return EXIT_OK


def add_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``check``, ``play`` and ``schema`` to the ``coevo`` command."""
    check = sub.add_parser(
        "check",
        help="run the Judge's checks on every record of a file",
        formatter_class=fmt,
        description=(
            "Check every world and task record of FILE (.jsonl: one record per line; .json: one\n"
            "record or an array; - reads standard input, as JSON lines).\n\n"
            "Exit status: 2 if any record could not be read (malformed JSON, wrong shape or\n"
            "types), else 1 if any record was rejected, else 0."
        ),
        epilog="examples:\n  coevo check arena/examples/examples.jsonl\n  coevo check tasks.jsonl --json | jq 'select(.accepted | not)'",
    )
    check.add_argument(
        "file", metavar="FILE", help=".jsonl or .json file of records, or - for stdin"
    )
    check.add_argument(
        "--json", action="store_true", help="one JSON object per record, in input order"
    )
    check.set_defaults(func=cmd_check)

    play = sub.add_parser(
        "play",
        help="attempt a task yourself in the terminal",
        formatter_class=fmt,
        description="See the instruction and the tools, call tools with JSON arguments, submit,\nand see the reward with every failed check and every row outside the frame.",
        epilog=(
            "example:\n  coevo play arena/examples/examples.jsonl --task 1\n"
            '  > find_customer_by_email {"email": "ada@ex.io"}\n  > submit'
        ),
    )
    play.add_argument("file", metavar="FILE", help=".jsonl or .json file of records")
    play.add_argument(
        "--task", help="which task: its number in the file (from 1) or the start of its id"
    )
    play.add_argument("--max-steps", type=int, default=None, help="tool calls allowed (default 40)")
    play.add_argument("--json", action="store_true", help="print each observation as one JSON line")
    play.set_defaults(func=cmd_play)

    schema = sub.add_parser(
        "schema",
        help="print the JSON Schema of the record formats",
        formatter_class=fmt,
        epilog="example:\n  coevo schema --record task > coevo-task.schema.json",
    )
    schema.add_argument(
        "--record",
        choices=["all", "task", "world"],
        default="all",
        help="which record format (default: both)",
    )
    schema.add_argument("--json", action="store_true", help="(the output is always JSON)")
    schema.set_defaults(func=cmd_schema)
