"""Long checks run beside the suite: they begin when a test that reads one is collected.

When the suite runs in one process (``-n 0``), one test at a time, most tests
keep one core busy; mypy, the quickstart the docs quote and the import of every
module on its own are processes of their own, so they run one after another
from the end of collection, in a thread, on the other core; the test that reads
one waits for its result (:func:`result`). Under pytest-xdist (the default,
tests/conftest.py) the workers keep every core busy and start nothing early: the
test that reads a check runs it, as does a test run on its own (or a selection
without it): :func:`result` then runs the command at once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
QUICKSTART_OUT: Final = Path(tempfile.gettempdir()) / f"coevo-quickstart-{os.getpid()}" / "run"


@dataclass(frozen=True)
class Check:
    """A command, and the node-id prefix of the tests that read it."""

    command: tuple[str, ...]
    readers: str
    cwd: Path = ROOT
    made: tuple[Path, ...] = field(default_factory=tuple)  # what it writes, removed at the end
    env: dict[str, str] = field(default_factory=dict)  # set for it, over this process's


CHECKS: dict[str, Check] = {
    "mypy": Check((sys.executable, "-m", "mypy"), "tests/test_repo.py::test_mypy_passes"),
    "quickstart": Check(
        (
            sys.executable,
            "-m",
            "coevo.run.cli",
            "run",
            "quickstart",
            "--out",
            str(QUICKSTART_OUT),
            *("--set", "ray.in_process=true", "--set", "judge.config.isolate=false"),
        ),
        "tests/test_doc_figures.py",
        made=(QUICKSTART_OUT.parent,),
    ),
}
"""What may start beside the suite, by name."""

FOLDERS: Final = {
    "arena": "coevo.arena",
    "agents": "coevo.agents",
    "curricula": "coevo.curricula",
    "run": "coevo.run",
}
"""The package folders and their import names."""


def modules(folders: dict[str, str] = FOLDERS) -> list[tuple[str, Path]]:
    """Every module of the packages (its import name, its file), in folder order."""
    out = []
    for folder, package in folders.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            out.append((".".join([package, *parts]), path))
    return out


# Imports each module named on the command line in a child forked from a process that has
# imported no coevo module (only the third-party libraries, which take most of the time and
# cannot hold a coevo cycle): each child starts with no coevo module loaded, as a fresh
# interpreter would. One JSON line per module: its name, exit status and error.
_FRESH_IMPORTER: Final = """
import json, os, sys, traceback
import importlib
for library in (
    "anthropic", "numpy", "pyarrow", "pyarrow.dataset", "pyarrow.parquet", "pydantic", "ray",
    "aiohttp", "httpx2", "openai", "mcp", "structlog", "rich", "networkx", "jsonschema",
    "matplotlib", "mlflow",
):
    try:
        importlib.import_module(library)
    except ImportError:
        pass  # an extra not installed here: the child imports what it needs
assert not [m for m in sys.modules if m.startswith("coevo")]
for name in sys.argv[1:]:
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        try:
            __import__(name)
            status, text = 0, ""
        except BaseException:
            status, text = 1, traceback.format_exc()[-2000:]
        os.write(writer, text.encode())
        os._exit(status)
    os.close(writer)
    chunks = []
    while chunk := os.read(reader, 65536):
        chunks.append(chunk)
    os.close(reader)
    _, code = os.waitpid(pid, 0)
    print(json.dumps({"name": name, "status": code, "error": b"".join(chunks).decode()}), flush=True)
"""

CHECKS["imports"] = Check(
    (sys.executable, "-c", _FRESH_IMPORTER, *(name for name, _ in modules())),
    "tests/test_architecture.py::test_every_module_imports_on_its_own",
    env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
)


class _Queue:
    """The checks a selection reads, run one after another in a thread (one core for them, one for the tests in this process)."""

    def __init__(self, names: list[str]):
        self.names = names
        self.done = {name: threading.Event() for name in names}
        self.results: dict[str, subprocess.CompletedProcess[str]] = {}
        self.current: subprocess.Popen[str] | None = None
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name="beside", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for name in self.names:
            if self.stopped:
                break
            self.current = _popen(CHECKS[name])
            stdout, stderr = self.current.communicate()
            self.results[name] = subprocess.CompletedProcess(
                self.current.args, self.current.returncode, stdout, stderr
            )
            self.done[name].set()

    def stop(self) -> None:
        self.stopped = True
        if self.current is not None and self.current.poll() is None:
            self.current.kill()
        self.thread.join(timeout=30)


_queue: _Queue | None = None


def start(nodeids: list[str]) -> None:
    """Start, one after another, every check a collected test reads."""
    global _queue
    # in the order their readers run (the suite's files in alphabetical order)
    order = sorted(CHECKS, key=lambda n: CHECKS[n].readers)
    names = [n for n in order if any(i.startswith(CHECKS[n].readers) for i in nodeids)]
    if names and _queue is None:
        _queue = _Queue(names)


def _popen(check: Check) -> subprocess.Popen[str]:
    for path in check.made:
        shutil.rmtree(path, ignore_errors=True)
    return subprocess.Popen(
        check.command,
        cwd=check.cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, **check.env},
    )


def result(name: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """The check's outcome: waited for if it started beside the suite, else run now."""
    if _queue is not None and name in _queue.done:
        if not _queue.done[name].wait(timeout):
            raise TimeoutError(f"{name}, started beside the suite, did not end in {timeout:g} s")
        return _queue.results[name]
    process = _popen(CHECKS[name])
    stdout, stderr = process.communicate(timeout=timeout)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def stop() -> None:
    """End what still runs (a selection that stopped early), and remove what the checks wrote."""
    global _queue
    if _queue is not None:
        _queue.stop()
        _queue = None
    for check in CHECKS.values():
        for path in check.made:
            shutil.rmtree(path, ignore_errors=True)
