"""Factories for tests: the shipped examples, broken variants of them, and a small support-desk world."""

from __future__ import annotations

import contextlib
import copy
import io
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from coevo.agents.registry import REGISTRY
from coevo.arena import TaskSpec, WorldSpec, dump_record, load_records
from coevo.curricula.registry import CURRICULA

EXAMPLES = Path(str(resources.files("coevo.arena.examples") / "examples.jsonl"))

# Runs in tests play their roles in this process with the Judge unisolated (docs/testing.md):
# the log is the same as on Ray (tests/arena/test_loop.py compares them); the tests of what
# only Ray or the isolated Judge does (kills, placement, capacity, clusters, the Ray queue,
# isolation) leave these out.
IN_PROCESS_SETS = ("ray.in_process=true", "judge.config.isolate=false")
"""``--set`` overrides (or ``load_experiment`` ones) for a run in this process."""
IN_PROCESS_FLAGS = tuple(x for pair in (("--set", s) for s in IN_PROCESS_SETS) for x in pair)
"""The same as command-line flags."""
IN_PROCESS_TOML = "[ray]\nin_process = true\n[judge]\nconfig = { isolate = false }\n"
"""The same as experiment-file tables (for a file with neither ``[ray]`` nor ``[judge]``)."""


def load_examples() -> tuple[list[TaskSpec], dict[str, WorldSpec]]:
    return load_records(EXAMPLES)


def example(domain: str, index: int = 0) -> tuple[TaskSpec, WorldSpec]:
    """The index-th example task of a domain and its world."""
    tasks, worlds = load_examples()
    found = [t for t in tasks if worlds[t.world].domain == domain]
    task = found[index]
    return task, worlds[task.world]


def variant(task: TaskSpec, world: WorldSpec, edit: Any = None, world_edit: Any = None) -> TaskSpec:
    """A copy of ``task`` with an inline copy of its world, after ``edit(task_dict)`` and ``world_edit(world_dict)``."""
    data = dump_record(task)
    data.pop("id")
    world_data = copy.deepcopy(dump_record(world))
    world_data.pop("id")
    if world_edit is not None:
        world_edit(world_data)
    data["world"] = world_data
    if edit is not None:
        edit(data)
    return TaskSpec.model_validate(data)


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    """A solution step as JSON."""
    return {"tool": tool, "arguments": arguments}


def tool(
    name: str,
    sql: list[str] | str,
    *,
    effect: str = "read",
    properties: dict[str, Any] | None = None,
    required: list[str] | None = None,
) -> dict[str, Any]:
    """A tool record."""
    return {
        "name": name,
        "description": f"test tool {name}",
        "parameters": {
            "type": "object",
            "properties": properties or {},
            "required": required or [],
        },
        "sql": [sql] if isinstance(sql, str) else sql,
        "effect": effect,
    }


def mini_world(**overrides: Any) -> dict[str, Any]:
    """A small support-desk world record (as JSON), for focused tests."""
    world = {
        "format": "coevo.world/1",
        "domain": "support",
        "now": "2026-11-29T12:00:00",
        "schema": [
            "CREATE TABLE accounts(id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL UNIQUE, plan TEXT NOT NULL DEFAULT 'basic')",
            "CREATE TABLE tickets(id INTEGER PRIMARY KEY, account_id INTEGER NOT NULL REFERENCES accounts(id), subject TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('open', 'closed')), priority INTEGER NOT NULL DEFAULT 3)",
        ],
        "data": {
            "accounts": {
                "columns": ["id", "name", "email", "plan"],
                "rows": [
                    [1, "Dana Reyes", "dana@acme.io", "pro"],
                    [2, "Dan Reyes", "dan@acme.io", "basic"],
                ],
            },
            "tickets": {
                "columns": ["id", "account_id", "subject", "status", "priority"],
                "rows": [
                    [10, 1, "VPN outage", "open", 2],
                    [11, 1, "Invoice copy", "open", 4],
                    [12, 2, "VPN outage", "open", 1],
                    [13, 1, "Password reset", "closed", 3],
                ],
            },
        },
        "tools": [
            tool(
                "find_account",
                "SELECT id, name, plan FROM accounts WHERE email = :email",
                properties={"email": {"type": "string"}},
                required=["email"],
            ),
            tool(
                "list_tickets",
                "SELECT id, subject, status, priority FROM tickets WHERE account_id = :account_id ORDER BY id",
                properties={"account_id": {"type": "integer"}},
                required=["account_id"],
            ),
            tool(
                "close_ticket",
                "UPDATE tickets SET status = 'closed' WHERE id = :ticket_id",
                effect="write",
                properties={"ticket_id": {"type": "integer"}},
                required=["ticket_id"],
            ),
            tool(
                "set_priority",
                "UPDATE tickets SET priority = :priority WHERE id = :ticket_id",
                effect="write",
                properties={
                    "ticket_id": {"type": "integer"},
                    "priority": {"type": "integer", "minimum": 1, "maximum": 5},
                },
                required=["ticket_id", "priority"],
            ),
            tool(
                "count_open",
                "SELECT count(*) AS open_tickets FROM tickets WHERE account_id = :account_id AND status = 'open'",
                properties={"account_id": {"type": "integer"}},
                required=["account_id"],
            ),
        ],
    }
    world.update(overrides)
    return world


def mini_task(world: dict[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    """A valid task on the mini world (as JSON): close Dana's VPN ticket."""
    task = {
        "format": "coevo.task/1",
        "world": world or mini_world(),
        "instruction": "Close the open ticket about the VPN outage for dana@acme.io.",
        "verifier": {
            "checks": [
                {
                    "name": "closed",
                    "sql": "SELECT status = 'closed' FROM tickets WHERE id = (SELECT t.id FROM initial.tickets t JOIN initial.accounts a ON a.id = t.account_id WHERE a.email = 'dana@acme.io' AND t.subject = 'VPN outage')",
                }
            ],
            "frame": {"tickets": {"where": "id = 10", "columns": ["status"]}},
        },
        "solution": [
            call("find_account", email="dana@acme.io"),
            call("list_tickets", account_id=1),
            call("close_ticket", ticket_id=10),
            call("submit"),
        ],
    }
    task.update(overrides)
    return task


def install_plugin(source: Path, site: Path) -> str:
    """Lay the plugin package at ``source`` out in ``site`` as ``pip install --target`` would; returns its package.

    The package and a ``dist-info`` with its metadata and ``entry_points.txt``,
    so that ``importlib.metadata`` finds its entry points once ``site`` is on the path.
    """
    meta = tomllib.loads((source / "pyproject.toml").read_text())["project"]
    name, version = meta["name"], meta["version"]
    package = name.replace("-", "_")
    shutil.copytree(source / package, site / package)
    info = site / f"{package}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = []
    for group, entries in meta.get("entry-points", {}).items():
        lines.append(f"[{group}]")
        lines += [f"{key} = {value}" for key, value in entries.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return package


@contextmanager
def plugin_on_path(source: Path, tmp: Path, monkeypatch: Any) -> Iterator[Path]:
    """The plugin at ``source`` installed under ``tmp`` and on ``sys.path``, the registries reloaded; undone after.

    Yields the site folder (what a subprocess needs on its path to see the plugin).
    """
    site = tmp / "site"
    package = install_plugin(source, site)
    sys.modules.pop(package, None)  # a test may have imported it from elsewhere already
    monkeypatch.syspath_prepend(str(site))
    REGISTRY.reload()
    CURRICULA.reload()
    try:
        yield site
    finally:
        monkeypatch.undo()
        for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            sys.modules.pop(name)
        REGISTRY.reload()
        CURRICULA.reload()


def run_cli(
    *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``coevo *args`` in this process, as a subprocess would report it: exit status, stdout, stderr.

    A usage error or ``--help`` (argparse's ``SystemExit``) gives its status, as
    from the shell. Tests that need a process of its own (a memory limit, a
    signal, another ``sys.path``) start one.
    """
    from coevo.run.cli import main

    out, err = io.StringIO(), io.StringIO()
    stdin_before, cwd_before = sys.stdin, os.getcwd()
    try:
        sys.stdin = io.StringIO(stdin or "")
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    finally:
        sys.stdin = stdin_before
        os.chdir(cwd_before)
    return subprocess.CompletedProcess(["coevo", *args], code, out.getvalue(), err.getvalue())


def wait_for_file(path: Path, process: subprocess.Popen, seconds: float = 240) -> None:
    """Wait until ``path`` exists while ``process`` runs; fail saying why if the process ends first (its standard error, if piped) or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        if process.poll() is not None:
            said = process.stderr.read() if process.stderr is not None else ""
            said = said.decode(errors="replace") if isinstance(said, bytes) else said
            raise AssertionError(
                f"the process exited ({process.returncode}) before {path} appeared: {said[-3000:]}"
            )
        assert time.monotonic() < deadline, f"{path} did not appear within {seconds:g} s"
        time.sleep(0.05)
