"""A small progress bar for long command-line runs (standard error, only on a terminal)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """``label [#####.....] 12/50  31.0/s`` on one redrawn line.

    Args:
        total: the number of items.
        label: what is being counted.
        stream: where to draw (standard error).
        enabled: draw at all; by default only when ``stream`` is a terminal, so
            logs and pipes stay clean.
    """

    WIDTH = 24

    def __init__(
        self, total: int, label: str, *, stream: TextIO | None = None, enabled: bool | None = None
    ):
        self.total = max(total, 0)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.done = 0
        self._start = time.monotonic()
        self._drawn = 0.0

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more items done (redraws at most ten times a second)."""
        self.done += n
        now = time.monotonic()
        if self.enabled and (now - self._drawn >= 0.1 or self.done >= self.total):
            self._drawn = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        filled = int(self.WIDTH * self.done / self.total) if self.total else self.WIDTH
        rate = self.done / max(now - self._start, 1e-9)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total}  {rate:,.1f}/s")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self.enabled:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
