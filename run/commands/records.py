"""``coevo check``, ``coevo play`` and ``coevo schema``: task and world records on the command line."""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import replace
from typing import Any, TextIO

from coevo.arena.errors import CommandError, RecordError, SpecError
from coevo.arena.isolation import DEFAULT_TASK_SECONDS, IsolatedJudge
from coevo.arena.judge import CHECK_NAMES, WorldCache
from coevo.arena.limits import DEFAULT_LIMITS
from coevo.arena.outcomes import Observation
from coevo.arena.records import (
    MAX_DOCUMENT_BYTES,
    MAX_LINE_BYTES,
    BadRecord,
    Record,
    iter_records,
    json_schema,
    load_records,
)
from coevo.arena.spec import TaskSpec, ToolCall, WorldSpec
from coevo.arena.world import World
from coevo.run.commands import EXIT_OK, EXIT_REJECTED, EXIT_UNREADABLE

__all__ = ["add_commands", "add_read_limits", "read_all_records"]


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _not_run(reason: str) -> dict[str, Any]:
    return {"passed": None, "reason": reason}


def _check_line(
    item: Record | BadRecord, cache: WorldCache, judge: IsolatedJudge
) -> dict[str, Any]:
    """One line of ``coevo check --json`` output (``cache`` holds the world records seen so far)."""
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
            "instructions": None,
        }
    if isinstance(item.spec, WorldSpec):
        world_id = cache.add(item.spec)
        valid = judge.check_world(item.spec)
        return {
            "line": item.line,
            "kind": "world",
            "id": world_id,
            "accepted": bool(valid.passed),
            "checks": {"valid": valid.model_dump()},
            "error": None,
            "instructions": None,
        }
    (verdict,) = judge.assess([item.spec], cache.specs)
    return {
        "line": item.line,
        "kind": "task",
        "id": item.spec.task_id,
        "accepted": verdict.accepted,
        "checks": {name: result.model_dump() for name, result in verdict.checks.items()},
        "error": None,
        "instructions": judge.instructions[0],
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
    # Raises RecordError (a missing path, a directory, a device) before the table starts.
    items = iter_records(
        path, max_line_bytes=args.max_line_bytes, max_document_bytes=args.max_document_bytes
    )
    cache = WorldCache()  # world records only: worlds are built and judged in a worker process
    limits = replace(DEFAULT_LIMITS, task_vm_instructions=args.task_budget)
    judge = IsolatedJudge(limits, seconds=args.task_seconds)
    unreadable = rejected = 0
    counts = {"world": 0, "task": 0}
    out = sys.stdout
    if not args.json:
        out.write(f"{'line':>5}  {'kind':<5}  {'id':<19}  result\n")
    try:
        for item in items:
            result = _check_line(item, cache, judge)
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
        judge.close()
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
  :help                      these commands again
  :quit                      leave
"""


def read_all_records(args: argparse.Namespace) -> tuple[list[TaskSpec], dict[str, WorldSpec]]:
    """Every record of ``args.file``, within the read limits of :func:`add_read_limits`.

    Raises:
        CommandError: the file cannot be read, or a record in it (naming the line).
    """
    try:
        return load_records(
            args.file,
            max_line_bytes=args.max_line_bytes,
            max_document_bytes=args.max_document_bytes,
        )
    except RecordError as exc:
        raise CommandError(str(exc)) from None  # already says where and what to do
    except OSError as exc:
        raise CommandError(f"cannot read {args.file}: {exc}") from exc


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
    if args.file == "-":
        raise CommandError(
            "play reads your commands from standard input, so FILE cannot be -; "
            "save the records to a file and give its path"
        )
    tasks, worlds = read_all_records(args)
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


def _positive_int(text: str) -> int:
    """An argparse type: a whole number from 1 to 2**63 - 1 (what SQLite's counters take); a refused one is said briefly."""
    shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {shown}")
    if value >= 1 << 63:
        raise argparse.ArgumentTypeError(f"must be at most {(1 << 63) - 1:,}, got {shown}")
    return value


_BYTES = re.compile(r"(\d+)\s*(?:([KMG])(?:iB)?)?", re.IGNORECASE)


def _byte_count(text: str) -> int:
    """An argparse type: a positive number of bytes, e.g. ``33554432``, ``32MiB`` or ``1G`` (units of 1024)."""
    match = _BYTES.fullmatch(text.strip())
    if match is None or int(match[1]) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a positive number of bytes; write e.g. 33554432, 32MiB or 1GiB"
        )
    power = " KMG".index(match[2].upper()) if match[2] else 0
    return int(match[1]) << (10 * power)


def add_read_limits(parser: argparse.ArgumentParser) -> None:
    """Add ``--max-line-bytes`` and ``--max-document-bytes`` (the reader's defaults) to a command that reads records."""
    parser.add_argument(
        "--max-line-bytes",
        type=_byte_count,
        default=MAX_LINE_BYTES,
        metavar="N",
        help=f"longest line of a .jsonl file (default {MAX_LINE_BYTES >> 20}MiB; e.g. 64MiB)",
    )
    parser.add_argument(
        "--max-document-bytes",
        type=_byte_count,
        default=MAX_DOCUMENT_BYTES,
        metavar="N",
        help=f"largest .json document (default {MAX_DOCUMENT_BYTES >> 20}MiB)",
    )


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
            "record or an array; - reads standard input, as JSON lines). FILE must be a regular\n"
            "file; input is read as a stream, and a line longer than --max-line-bytes is\n"
            "reported and skipped.\n\n"
            "Exit status: 2 if any record could not be read (malformed JSON, wrong shape or\n"
            "types, a line too long), else 1 if any record was rejected, else 0.\n\n"
            "Every task is judged in a worker process with a budget of SQLite instructions\n"
            "for all its checks together (--task-budget) and a wall clock (--task-seconds):\n"
            "a task that spends either is rejected, naming the budget, and the next is checked."
        ),
        epilog="examples:\n  coevo examples --copy examples . && coevo check examples.jsonl\n  coevo check tasks.jsonl --json | jq 'select(.accepted | not)'",
    )
    check.add_argument(
        "file", metavar="FILE", help=".jsonl or .json file of records, or - for stdin"
    )
    check.add_argument(
        "--json", action="store_true", help="one JSON object per record, in input order"
    )
    add_read_limits(check)
    check.add_argument(
        "--task-budget",
        type=_positive_int,
        default=DEFAULT_LIMITS.task_vm_instructions,
        metavar="N",
        help="SQLite VM instructions one task may spend in all its checks together "
        f"(default {DEFAULT_LIMITS.task_vm_instructions:,})",
    )
    check.add_argument(
        "--task-seconds",
        type=_positive_float,
        default=DEFAULT_TASK_SECONDS,
        metavar="S",
        help=f"wall clock one task's checks may take (default {DEFAULT_TASK_SECONDS:g})",
    )
    check.set_defaults(func=cmd_check)

    play = sub.add_parser(
        "play",
        help="attempt a task yourself in the terminal",
        formatter_class=fmt,
        description="See the instruction and the tools, call tools with JSON arguments, submit,\nand see the reward with every failed check and every row outside the frame.",
        epilog=(
            "example:\n  coevo play examples.jsonl --task 1   (coevo examples --copy examples .)\n"
            '  > find_customer_by_email {"email": "ada@ex.io"}\n  > submit'
        ),
    )
    play.add_argument("file", metavar="FILE", help=".jsonl or .json file of records")
    play.add_argument(
        "--task", help="which task: its number in the file (from 1) or the start of its id"
    )
    play.add_argument(
        "--max-steps",
        type=_positive_int,
        default=None,
        help=f"tool calls allowed, at least 1 (default {DEFAULT_LIMITS.max_steps})",
    )
    play.add_argument("--json", action="store_true", help="print each observation as one JSON line")
    add_read_limits(play)
    play.set_defaults(func=cmd_play)

    schema = sub.add_parser(
        "schema",
        help="print the JSON Schema of the record formats",
        formatter_class=fmt,
        description=(
            "Print the JSON Schema (draft 2020-12) of coevo.task/1 and coevo.world/1 records on\n"
            "standard output, for editors and validators in other languages. coevo itself validates\n"
            "records with `coevo check`, which also runs the Judge (docs/task-format.md)."
        ),
        epilog="example:\n  coevo schema --record task > coevo-task.schema.json",
    )
    schema.add_argument(
        "--record",
        choices=["all", "task", "world"],
        default="all",
        help="which record format (default: both)",
    )
    schema.set_defaults(func=cmd_schema)
