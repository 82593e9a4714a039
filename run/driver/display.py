"""What a run shows: a live table per generation (rich) and structured events (structlog, JSON lines).

``events.jsonl`` in the run directory gets one JSON object per event (a
generation committed, a role that failed, the run started, resumed or
ended), each with an ISO timestamp; the console shows the same events in a
readable form, and a table with one row per generation.
"""

from __future__ import annotations

import io
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

import structlog
from coevo.arena.bounded import open_to_write
from coevo.arena.gamelog import RunDir
from coevo.arena.secrets import redact_value
from coevo.run.driver.columns import COLUMNS
from rich import box
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from coevo.run.loop import GenerationReport

__all__ = ["EventLog", "GenerationTable", "redact_secrets"]


def redact_secrets(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    """A structlog processor: every secret (:mod:`coevo.arena.secrets`'s rule) becomes ``[redacted]``.

    Applied to every event before it is written or shown, so an API key that
    ends up in an error message never reaches ``events.jsonl`` or the console.
    """
    return dict(redact_value(event))


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class _Board:
    """The table and, under it, where the run stands (redrawn by :class:`rich.live.Live`)."""

    def __init__(self, table: GenerationTable):
        self.owner = table

    def __rich_console__(self, console: Console, options: Any) -> Any:
        yield self.owner._table()
        yield Text(self.owner.progress_line(), style="dim", no_wrap=True, overflow="crop")


class GenerationTable:
    """The per-generation table, 80 columns wide: acceptance, success on train and eval, frontier, calibration, speed.

    On a terminal it is redrawn in place, with a line under it saying which
    generation is running, the time elapsed and an estimate of the time left;
    anywhere else (a pipe, a file, CI) each generation is one line, the
    columns aligned. Everything else a generation did is in ``events.jsonl``.

    Args:
        title: the run's name.
        console: where to draw (default: standard error, so standard output stays for data).
        live: redraw one table in place (a terminal) rather than print a line per generation.
        total: the generations the run is for (for "generation 3 of 30" and the time left).
    """

    def __init__(
        self,
        title: str,
        console: Console | None = None,
        live: bool | None = None,
        total: int | None = None,
    ):
        self.console = console or Console(stderr=True)
        self.title = title
        self.total = total
        self.rows: list[tuple[str, ...]] = []
        self.live_mode = self.console.is_terminal if live is None else live
        self._live: Live | None = None
        self._status: Any = None
        self._began = time.monotonic()
        self._first: int | None = None  # the first generation this invocation plays
        self._running_since: float | None = None

    def starting(self, what: str) -> None:
        """Say what is starting (Ray, the actors) until :meth:`start`: a spinner on a terminal, else one line."""
        self._began = time.monotonic()
        if self.live_mode:
            self._status = self.console.status(what, spinner="dots")
            self._status.start()
        else:
            self.console.print(what, highlight=False, soft_wrap=True)

    def progress(self, what: str) -> None:
        """Say how the start is going (Ray up, each role's actors): the spinner's text on a terminal, else one line."""
        if self._status is not None:
            self._status.update(what)
        elif self._running_since is None and not self.live_mode:
            self.console.print(what, highlight=False, soft_wrap=True)

    def start(self, first: int) -> None:
        """The actors are up and generation ``first`` begins: show the (empty) table."""
        if self._status is not None:
            self._status.stop()
            self._status = None
        self._first = first
        self._running_since = time.monotonic()
        ready = f"ready in {self._running_since - self._began:.1f} s"
        if self.live_mode:
            self.console.print(ready, highlight=False, style="dim")
            self._live = Live(_Board(self), console=self.console, refresh_per_second=2)
            self._live.start()
        else:
            self.console.print(ready, highlight=False, soft_wrap=True)
            self.console.print(
                self._line(tuple(n for n, *_ in COLUMNS)), highlight=False, soft_wrap=True
            )

    def progress_line(self) -> str:
        """``generation 4 of 30 · 12 s elapsed · about 40 s left`` (what the live line under the table says)."""
        now = time.monotonic()
        played = len(self.rows)
        gen = (self._first or 0) + played
        if self.total and gen >= self.total:  # the run is over: what it took
            return f"{self.total} of {self.total} generations in {_duration(now - self._began)}"
        parts = [f"generation {gen}" + (f" of {self.total}" if self.total else "")]
        parts.append(f"{_duration(now - self._began)} elapsed")
        if played and self.total and self._running_since is not None:
            per_generation = (now - self._running_since) / played
            left = max(self.total - gen, 0) * per_generation
            parts.append(f"about {_duration(left)} left")
        return " · ".join(parts)

    def _table(self) -> Table:
        table = Table(
            title=self.title,
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            collapse_padding=True,  # 73 characters wide: fits an 80-column terminal
            expand=False,
        )
        for name, justify, width, _ in COLUMNS:
            table.add_column(name, justify=justify, min_width=width, no_wrap=True)
        for row in self.rows:
            table.add_row(*row)
        return table

    @staticmethod
    def _line(cells: tuple[str, ...]) -> str:
        """A row as aligned plain text (the same widths as the live table)."""
        out = []
        for (_, justify, width, _), cell in zip(COLUMNS, cells, strict=True):
            out.append(cell.rjust(width) if justify == "right" else cell.ljust(width))
        return "  ".join(out).rstrip()

    def __call__(self, report: GenerationReport) -> None:
        """Show one committed generation."""
        if self._running_since is None:  # called without start(): a caller that shows no status
            self.start(report.gen)
        row = report.row
        cells = (
            str(report.gen),
            _fmt(row["accepted"]),
            _fmt(row["rejected"]),
            _fmt(row["train_success"]),
            _fmt(row["eval_success"]),
            _fmt(row["frontier"], 1),
            _fmt(row["trained_level"], 1),
            _fmt(row["brier"], 3),
            f"{report.episodes_per_second:.0f}",
            f"{report.seconds:.1f}",
        )
        self.rows.append(cells)
        if self._live is not None:
            self._live.refresh()
        else:
            self.console.print(self._line(cells), highlight=False, soft_wrap=True)

    def close(self) -> None:
        """Stop redrawing (leaves the final table on screen)."""
        if self._status is not None:
            self._status.stop()
            self._status = None
        if self._live is not None:
            self._live.stop()
            self._live = None


class EventLog:
    """Structured events to ``RUN_DIR/events.jsonl`` (JSON lines) and, readable, to the console.

    On a local run directory each event is appended as it happens; on an
    object store (no appends) the file is rewritten whole after each event.

    Args:
        run: the run directory.
        console: where readable events go: a stream, True for the standard error of the
            moment (looked up at each event), or None for nowhere.
        quiet_events: events the console does not show (the table, the status line and the
            summary show them).
    """

    def __init__(
        self,
        run: RunDir,
        console: TextIO | bool | None = True,
        quiet_events: tuple[str, ...] = (
            "generation",
            "run_started",
            "run_resumed",
            "run_finished",
            "run_interrupted",
            "run_stopped",  # what stopped it is the command's last line
            "run_halted",
            "synthesis_attempt",  # one per stage of every proposal: the log keeps them
            "plateau",  # the watch's: the summary lists them
            "collapse",
        ),
    ):
        self.run = run
        self.quiet = quiet_events
        self._local = run.is_local
        self._buffer = io.StringIO()
        self.console = console
        self._pretty = structlog.dev.ConsoleRenderer(colors=False)
        self._stamp = structlog.processors.TimeStamper(fmt="%H:%M:%S")

    def __call__(self, event: str, **fields: Any) -> None:
        """Record ``event`` with its fields."""
        record: dict[str, Any] = redact_secrets(None, "info", {"event": event, **fields})
        stamped = structlog.processors.TimeStamper(fmt="iso", utc=True)(None, "info", dict(record))
        line = json.dumps(stamped, sort_keys=True, default=str) + "\n"
        self._write(line)
        if self.console is not None and self.console is not False and event not in self.quiet:
            pretty = self._pretty(None, "info", self._stamp(None, "info", dict(record)))
            stream = sys.stderr if self.console is True else self.console
            stream.write(pretty + "\n")

    def _write(self, line: str) -> None:
        self.run.make_dirs()
        if self._local:
            path = self.run.path("events.jsonl")
            # appended through no link: a planted events.jsonl -> elsewhere is refused, unwritten
            with os.fdopen(
                open_to_write(path, self.run.root, append=True), "a", encoding="utf-8"
            ) as out:
                out.write(line)
        else:
            self._buffer.write(line)
            self.run.write_bytes(self._buffer.getvalue().encode(), "events.jsonl")
