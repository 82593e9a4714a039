"""What `coevo run` shows: an 80-column terminal, a pipe, and Ctrl-C.

The terminal test drives the installed command under a real pseudo-terminal
80 columns wide, as a user at a terminal meets it; the table's layout is also
checked by rendering it, without Ray, at 80 columns and into a pipe.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import time
from pathlib import Path

import pytest
from coevo.arena.gamelog import GameLog
from coevo.run.driver.columns import COLUMNS
from coevo.run.driver.display import GenerationTable
from coevo.run.loop import GenerationReport
from rich.console import Console

from tests.conftest import SMALL_RUN

COEVO = Path(sys.executable).with_name("coevo")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def _report(gen: int, **row: object) -> GenerationReport:
    values = {
        "proposed": 1234,
        "accepted": 1234,
        "rejected": 123,
        "train_success": 0.25,
        "eval_success": 0.125,
        "frontier": 2.5,
        "trained_level": 1.25,
        "brier": 0.25,
    }
    values.update(row)
    return GenerationReport(gen=gen, row=values, seconds=123.4, episodes_per_second=1234.0)


def test_the_live_table_fits_80_columns_with_no_cell_cut() -> None:
    """Rendered at 80 columns with wide values, every header and cell is whole (no ellipsis) and no line is wider."""
    console = Console(file=io.StringIO(), width=80, force_terminal=True, record=True)
    table = GenerationTable("quickstart → runs/quickstart", console=console, live=True, total=30)
    table.start(0)
    for gen in range(3):
        table(_report(gen))
    table(_report(3, eval_success=None, frontier=None))
    table.close()
    text = console.export_text()
    text = text[text.rindex("quickstart → runs/quickstart") :]  # the last frame drawn
    assert "…" not in text, text
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert all(name in text.split() for name, *_ in COLUMNS), text
    assert "generation 4 of 30" in text and "elapsed" in text and "left" in text


def test_piped_rows_line_up_under_their_headers() -> None:
    """Without a terminal each generation is one line, and every value ends where its header ends."""
    out = io.StringIO()
    table = GenerationTable("t", console=Console(file=out, width=200), live=False, total=3)
    table.starting("starting Ray")
    table.start(0)
    table(_report(0))
    table(_report(1, eval_success=None, accepted=7))
    table(_report(12, rejected=0))
    lines = out.getvalue().splitlines()
    assert lines[0] == "starting Ray" and lines[1].startswith("ready in ")
    header, rows = lines[2], lines[3:]
    assert len(rows) == 3

    def ends(line: str) -> list[int]:
        return [m.end() for m in re.finditer(r"\S+", line)]

    assert all(ends(row) == ends(header) for row in rows), "\n".join(lines)


def _drive(args: list[str], cwd: Path, interrupt_after: str) -> tuple[int, str]:
    """Run `coevo ARGS` on an 80x24 pseudo-terminal; type Ctrl-C once ``interrupt_after`` is on screen."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session of its own with the terminal as its controlling tty
        # as a shell starts a foreground job: Ctrl-C neither ignored nor blocked, whatever the
        # test process inherited or set (an ignored or blocked SIGINT survives exec)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        os.chdir(cwd)
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env["TERM"] = "xterm-256color"
        os.execve(str(COEVO), ["coevo", *args], env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    out = b""
    sent = False
    deadline = time.monotonic() + 300  # a hung run fails the test rather than the suite
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            out += data
        if not sent and interrupt_after.encode() in out:
            os.write(fd, b"\x03")  # the terminal turns it into SIGINT for the foreground group
            sent = True
    else:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert sent, out.decode(errors="replace")
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


@pytest.mark.slow
def test_a_run_at_an_80_column_terminal_talks_and_ctrl_c_says_how_to_resume(tmp_path) -> None:
    """Under an 80-column terminal: a status while Ray starts, whole cells, elapsed time; Ctrl-C exits 130 with one line naming `coevo resume`, and the log keeps what was committed."""
    toml = tmp_path / "tiny.toml"
    on_ray = SMALL_RUN.replace("[ray]\nin_process = true\n", "")  # the status while Ray starts
    toml.write_text(on_ray.replace("generations = 3", "generations = 40"))
    run = tmp_path / "run"
    status, screen = _drive(["run", str(toml), "--out", str(run)], tmp_path, "generation 2 of 40")
    text = ANSI.sub("", screen)
    assert status == 130, text
    assert "starting Ray on this machine" in text and "ready in" in text
    assert "…" not in text, text  # no header or value cut to fit
    assert all(name in text.split() for name, *_ in COLUMNS), text
    assert "elapsed" in text
    lines = text.splitlines()
    table_end = max(i for i, line in enumerate(lines) if "elapsed" in line)
    said = [line for line in lines[table_end + 1 :] if line.strip()]
    assert len(said) == 1, said  # one line after the table: no Ray noise, no traceback
    assert said[0].startswith("coevo run: interrupted after") and f"coevo resume {run}" in said[0]
    committed = GameLog(str(run)).last_generation() + 1
    assert committed >= 2
    assert f"after {committed} of 40 generations (all committed)" in said[0]
    assert len(GameLog(str(run)).read("generations")) == committed
