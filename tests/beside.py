"""Long checks started beside the suite: a command begins when a test that reads it is collected.

The suite runs one test at a time, and most tests keep one core busy; mypy and
the quickstart the docs quote are whole processes of their own, so they start
as soon as collection ends, on the other core, and the test that reads one
waits for its result (:func:`result`). A test run on its own (or a selection
without it) starts nothing early: :func:`result` then runs the command at once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
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


CHECKS: Final = {
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

_running: dict[str, subprocess.Popen[str]] = {}


def start(nodeids: list[str]) -> None:
    """Start every check a collected test reads."""
    for name, check in CHECKS.items():
        if name not in _running and any(n.startswith(check.readers) for n in nodeids):
            _running[name] = _popen(check)


def _popen(check: Check) -> subprocess.Popen[str]:
    for path in check.made:
        shutil.rmtree(path, ignore_errors=True)
    return subprocess.Popen(
        check.command,
        cwd=check.cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
    )


def result(name: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """The check's outcome: waited for if it started beside the suite, else run now."""
    process = _running.pop(name, None) or _popen(CHECKS[name])
    stdout, stderr = process.communicate(timeout=timeout)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def stop() -> None:
    """End what still runs (a selection that stopped early), and remove what the checks wrote."""
    for process in _running.values():
        process.kill()
        process.communicate()
    _running.clear()
    for check in CHECKS.values():
        for path in check.made:
            shutil.rmtree(path, ignore_errors=True)
