"""The ``coevo`` command line.

``coevo check FILE``   run the Judge's checks on every record of a .jsonl/.json file
``coevo play FILE``    attempt a task yourself in the terminal
``coevo schema``       print the JSON Schema of the record formats
``coevo synth``        make procedural tasks (offline)
``coevo mine DB``      make a world and tasks from a real SQLite database
``coevo mutate FILE``  make harder or easier children of tasks
``coevo roles``        list the registered roles (built-ins and plugins)

Every command has ``--help`` with an example.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from coevo.arena.errors import RecordError, SpecError
from coevo.arena.judge import CHECK_NAMES, WorldCache, assess_task, check_world_valid
from coevo.arena.outcomes import Observation
from coevo.arena.records import BadRecord, Record, iter_records, load_records
from coevo.arena.spec import TaskSpec, ToolCall, WorldSpec
from coevo.arena.world import World
from pydantic.json_schema import models_json_schema

__all__ = ["main"]

EXIT_OK, EXIT_REJECTED, EXIT_UNREADABLE = 0, 1, 2


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
        print(f"coevo check: no such file: {path}", file=sys.stderr)
        return EXIT_UNREADABLE
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
        print(f"coevo check: cannot read {path}: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
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
        raise SystemExit("coevo play: the file holds no task records")
    if wanted is None:
        return tasks[0]
    if wanted.isdigit():
        index = int(wanted)
        if 1 <= index <= len(tasks):
            return tasks[index - 1]
        raise SystemExit(
            f"coevo play: --task {wanted}: the file holds {len(tasks)} task(s); number them from 1"
        )
    matches = [
        t for t in tasks if t.task_id.startswith(wanted) or t.task_id.startswith("sha256:" + wanted)
    ]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise SystemExit(f"coevo play: no task id starts with {wanted!r}")
    raise SystemExit(
        f"coevo play: {len(matches)} task ids start with {wanted!r}; give more of the id"
    )


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
        print(f"coevo play: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    task = _pick_task(tasks, args.task)
    spec = task.world if isinstance(task.world, WorldSpec) else worlds.get(task.world)
    if spec is None:
        print(f"coevo play: the task's world {task.world} is not in the file", file=sys.stderr)
        return EXIT_UNREADABLE
    out = sys.stdout
    try:
        world = World(spec)
        world.reset(task, max_steps=args.max_steps)
    except SpecError as exc:
        print(f"coevo play: the task is not valid:\n{exc.summary()}", file=sys.stderr)
        return EXIT_REJECTED
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


def json_schema(record: str = "all") -> dict[str, Any]:
    """The JSON Schema of the record formats (``task``, ``world`` or ``all``)."""
    top: dict[str, Any] = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    if record != "all":
        model = TaskSpec if record == "task" else WorldSpec
        return top | model.model_json_schema(by_alias=True)
    refs, schema = models_json_schema(
        [(TaskSpec, "validation"), (WorldSpec, "validation")], by_alias=True, title="coevo records"
    )
    top |= schema
    top["oneOf"] = [refs[(TaskSpec, "validation")], refs[(WorldSpec, "validation")]]
    return top


def cmd_schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema."""
    sys.stdout.write(json.dumps(json_schema(args.record), indent=2, ensure_ascii=False) + "\n")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``coevo`` command."""
    parser = argparse.ArgumentParser(
        prog="coevo",
        description="coevo: agent-environment co-evolution — synthesized SQL tool-use worlds, "
        "a Judge that proves them, curricula at the Solver's frontier.",
        epilog="example: coevo check arena/examples/examples.jsonl",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    fmt = argparse.RawDescriptionHelpFormatter

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

    roles = sub.add_parser(
        "roles",
        help="list every registered role with its kind and origin",
        formatter_class=fmt,
        description=(
            "Every role an experiment can name: coevo's built-ins and the roles plugins\n"
            "register through the 'coevo.roles' entry points. A plugin that fails to load is\n"
            "reported on standard error and left out."
        ),
        epilog="examples:\n  coevo roles\n  coevo roles --json | jq -r '.[] | select(.kind == \"solver\") | .name'",
    )
    roles.add_argument(
        "--json", action="store_true", help="a JSON array of {name, kind, origin, description}"
    )
    roles.set_defaults(func=cmd_roles)

    from coevo.agents.synthesizers.cli import add_commands
    from coevo.arena.run_cli import add_commands as add_run_commands
    from coevo.curricula.cli import add_commands as add_analysis_commands

    add_commands(sub, fmt)
    add_run_commands(sub, fmt)
    add_analysis_commands(sub, fmt)
    return parser


def cmd_roles(args: argparse.Namespace) -> int:
    """``coevo roles``: the registered roles."""
    from coevo.agents.registry import REGISTRY

    roles = REGISTRY.roles()
    for error in REGISTRY.plugin_errors:
        print(f"coevo roles: a plugin did not load: {error}", file=sys.stderr)
    if args.json:
        rows = [
            {"name": r.name, "kind": r.kind, "origin": r.origin, "description": r.description}
            for r in roles
        ]
        sys.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
        return EXIT_OK
    width = max((len(r.name) for r in roles), default=4)
    print(f"{'name':<{width}}  {'kind':<11}  {'origin':<24}  description")
    for r in roles:
        print(f"{r.name:<{width}}  {r.kind:<11}  {r.origin:<24}  {r.description}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``coevo`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); silence the flush at exit.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
