"""``coevo serve``: one task served to any MCP client (Claude Code, an agent harness), each session an episode.

The server itself is :mod:`coevo.run.interfaces.mcp_server`; ``docs/mcp.md``
has the client configuration, what a session is and what is recorded.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from coevo.arena.errors import CommandError
from coevo.run.commands import EXIT_OK
from coevo.run.commands.benchmarks import code_paths
from coevo.run.commands.records import _positive_int

__all__ = ["add_commands", "cmd_serve"]


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0 to 65535; 0: a free one)")
    return value


_HEAD_BYTES = 1 << 16
"""What is read of a file to tell code tasks from SQL task records."""


def _is_code_file(source: str) -> bool:
    """Whether ``source`` is a file of code worlds and tasks (what ``coevo import`` writes)."""
    path = Path(source)
    if not path.is_file():
        return False
    with path.open("rb") as file:
        head = file.read(_HEAD_BYTES)  # bounded: a file of one endless line is not read whole
    first = head.lstrip()[:200].decode("utf-8", errors="replace")
    return '"coevo.codeworld/1"' in first or '"coevo.codetask/1"' in first


def _code_server(args: argparse.Namespace) -> Any:
    """The server of a code task: picked by the benchmark's own id, the start of its id, or its number."""
    from coevo.arena.codetask import assess_code_task, read_code_tasks
    from coevo.arena.codeworld import CodeWorlds
    from coevo.run.interfaces.mcp_codeworld import CodeTaskServer

    tasks = read_code_tasks(args.source)
    wanted = args.task
    code = code_paths(args.code)
    if not tasks:
        raise CommandError(f"{args.source} holds no task (coevo.codetask/1); nothing to serve")
    if wanted is None and len(tasks) > 1:
        some = ", ".join(str(t.provenance.get("task", t.task_id[:15])) for t in tasks[:10])
        raise CommandError(
            f"{args.source} holds {len(tasks)} tasks: pick one with --task (the benchmark's id: "
            f"{some}{', …' if len(tasks) > 10 else ''}; the start of a task id; or a number from 1)"
        )
    if wanted is None:
        chosen = tasks[0]
    else:
        # the benchmark's own id first, then the start of a coevo id, then a number from 1
        matches = [t for t in tasks if str(t.provenance.get("task")) == wanted]
        if not matches and wanted:
            matches = [t for t in tasks if t.task_id.startswith(wanted)]
        if not matches and wanted and wanted.isdigit() and 1 <= int(wanted) <= len(tasks):
            matches = [tasks[int(wanted) - 1]]
        if len(matches) != 1:
            some = ", ".join(str(t.provenance.get("task", t.task_id[:15])) for t in tasks[:10])
            raise CommandError(
                f"{'no' if not matches else 'more than one'} task of {args.source} matches "
                f"--task {wanted}: give the benchmark's id ({some}"
                f"{', …' if len(tasks) > 10 else ''}), the start of a task id, or a number from 1"
            )
        chosen = matches[0]
    worlds = CodeWorlds(paths=code)
    verdict = assess_code_task(chosen, worlds)  # nothing is served that the Judge has not accepted
    if not verdict.accepted:
        worlds.close()
        failed = "; ".join(
            f"{n} ({r.reason})" for n, r in verdict.checks.items() if r.passed is False
        )
        raise CommandError(
            f"task {chosen.provenance.get('task', chosen.task_id)} of {args.source} is rejected by "
            f"the Judge: {failed}; only accepted tasks are served (`coevo audit {args.source}` "
            "shows every verdict)",
            1,
        )
    return CodeTaskServer(chosen, worlds, record=args.record, max_steps=args.max_steps)


def cmd_serve(args: argparse.Namespace) -> int:
    """``coevo serve TASKS --task ID [--transport stdio|http]``."""
    import anyio  # the server's modules load only for this command
    from coevo.run.interfaces.mcp_server import TaskServer, load_task

    if args.transport == "stdio" and (args.host is not None or args.port is not None):
        raise CommandError("--host and --port go with --transport http")
    if _is_code_file(args.source):
        server = _code_server(args)
        task = server.task
    else:
        task = load_task(args.source, args.task)
        server = TaskServer(task, record=args.record, max_steps=args.max_steps)
    where = f", episodes recorded in {server.recorder.path}" if server.recorder else ""
    # standard output is the stdio transport's: everything said goes to standard error
    if args.transport == "stdio":
        print(f"coevo serve: task {task.task_id} over stdio{where}", file=sys.stderr)
        anyio.run(server.run_stdio)
        return EXIT_OK

    def announce(url: str) -> None:
        print(f"coevo serve: task {task.task_id} at {url}{where}", file=sys.stderr, flush=True)

    host = "127.0.0.1" if args.host is None else args.host
    port = 8000 if args.port is None else args.port
    anyio.run(lambda: server.run_http(host, port, announce=announce))
    return EXIT_OK


def add_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``serve`` to the ``coevo`` command."""
    serve = sub.add_parser(
        "serve",
        help="serve a task to any MCP client (Claude Code, an agent harness)",
        formatter_class=fmt,
        description=(
            "Serve one task over the Model Context Protocol: its world's tools and submit, the\n"
            "instruction as the server's instructions (and the prompt `task`). Each MCP session\n"
            "plays its own episode on its own copy of the world; submit returns the verifier's\n"
            "reward (0 or 1) and its reason, and later calls get an error. TASKS is a file of\n"
            "task records (the task is judged first; a rejected one is not served), a run\n"
            "directory (its accepted tasks), an export, or a file coevo import wrote (its tools\n"
            "run in sandboxed workers: --code gives the domain's code). docs/mcp.md has client\n"
            "configurations."
        ),
        epilog=(
            "examples:\n"
            "  coevo examples --copy examples . && coevo serve examples.jsonl --task 1\n"
            "  claude mcp add coevo -- coevo serve examples.jsonl --task 1 --record episodes\n"
            "  coevo serve examples.jsonl --task sha256:a9b3 --transport http --port 8765\n"
            "  coevo serve retail.jsonl --task 5 --code ~/tau2-bench/src   (coevo import tau2)"
        ),
    )
    serve.add_argument(
        "source",
        metavar="TASKS",
        help="a .jsonl/.json file of task records, a run directory or an export",
    )
    serve.add_argument(
        "--task",
        metavar="ID",
        help="the task: its id, the start of its id, or its number in the file from 1; for "
        "imported tasks, the benchmark's own id first (needed unless the file holds one task)",
    )
    serve.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (default: the client starts the server, one session) or streamable HTTP "
        "(many sessions at http://HOST:PORT/mcp)",
    )
    serve.add_argument("--host", help="with --transport http (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=_port, help="with --transport http (default 8000; 0: any free port)"
    )
    serve.add_argument(
        "--record",
        metavar="DIR",
        help="append every episode (calls, observations, reward, reason) to DIR/episodes.jsonl",
    )
    serve.add_argument(
        "--max-steps",
        type=_positive_int,
        default=None,
        help="tool calls an episode may make, submit included (default 40)",
    )
    serve.add_argument(
        "--code",
        action="append",
        default=[],
        metavar="PATH",
        help="for code tasks (coevo import): a folder holding the domain's code, put on the "
        "sandboxed workers' import path",
    )
    serve.set_defaults(func=cmd_serve)
