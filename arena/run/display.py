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
from typing import Any, TextIO

import structlog
from coevo.arena.gamelog import RunDir
from coevo.arena.run.loop import GenerationReport
from rich.console import Console
from rich.live import Live
from rich.table import Table

__all__ = ["EventLog", "GenerationTable", "redact_secrets"]

_SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD")


def redact_secrets(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    """A structlog processor: every secret from the environment (``*_API_KEY``, ``*_TOKEN``, ...) becomes ``[redacted]``.

    Applied to every event before it is written or shown, so an API key that
    ends up in an error message never reaches ``events.jsonl`` or the console.
    """
    secrets = [
        value
        for name, value in os.environ.items()
        if name.endswith(_SECRET_SUFFIXES) and len(value) >= 8
    ]
    if not secrets:
        return event

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            for secret in secrets:
                value = value.replace(secret, "[redacted]")
            return value
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value

    return {k: clean(v) for k, v in event.items()}


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


class GenerationTable:
    """The per-generation table: proposals, acceptance, success on train and eval, frontier, speed, calibration.

    Args:
        title: the run's name.
        console: where to draw (default: standard error, so standard output stays for data).
        live: redraw one table in place (a terminal) rather than print a line per generation.
    """

    columns = (
        ("gen", "right"),
        ("proposed", "right"),
        ("accepted", "right"),
        ("rejected", "right"),
        ("top rejections", "left"),
        ("train", "right"),
        ("eval", "right"),
        ("frontier", "right"),
        ("level", "right"),
        ("episodes/s", "right"),
        ("brier", "right"),
        ("s", "right"),
    )

    def __init__(self, title: str, console: Console | None = None, live: bool | None = None):
        self.console = console or Console(stderr=True)
        self.title = title
        self.rows: list[tuple[str, ...]] = []
        self.live_mode = self.console.is_terminal if live is None else live
        self._live: Live | None = None

    def _table(self) -> Table:
        table = Table(title=self.title, title_justify="left", expand=False)
        for name, justify in self.columns:
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for row in self.rows:
            table.add_row(*row)
        return table

    def __call__(self, report: GenerationReport) -> None:
        """Show one committed generation."""
        row = report.row
        rejections = ", ".join(f"{name} {count}" for name, count in report.top_rejections) or "–"
        cells = (
            str(report.gen),
            _fmt(row["proposed"]),
            _fmt(row["accepted"]),
            _fmt(row["rejected"]),
            rejections,
            _fmt(row["train_success"]),
            _fmt(row["eval_success"]),
            _fmt(row["frontier"], 1),
            _fmt(row["trained_level"], 1),
            f"{report.episodes_per_second:.0f}",
            _fmt(row["brier"], 3),
            f"{report.seconds:.1f}",
        )
        self.rows.append(cells)
        if self.live_mode:
            if self._live is None:
                self._live = Live(self._table(), console=self.console, refresh_per_second=4)
                self._live.start()
            else:
                self._live.update(self._table())
        else:
            if len(self.rows) == 1:
                self.console.print(
                    "  ".join(name for name, _ in self.columns), highlight=False, soft_wrap=True
                )
            self.console.print("  ".join(cells), highlight=False, soft_wrap=True)

    def close(self) -> None:
        """Stop redrawing (leaves the final table on screen)."""
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
        quiet_events: events the console does not show (the table shows them).
    """

    def __init__(
        self,
        run: RunDir,
        console: TextIO | bool | None = True,
        quiet_events: tuple[str, ...] = ("generation",),
    ):
        self.run = run
        self.quiet = quiet_events
        self._local = "://" not in run.uri or run.uri.startswith("file://")
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
        self.run.fs.create_dir(self.run.root, recursive=True)
        if self._local:
            with open(self.run.path("events.jsonl"), "a", encoding="utf-8") as out:
                out.write(line)
        else:
            self._buffer.write(line)
            self.run.write_bytes(self._buffer.getvalue().encode(), "events.jsonl")
