"""One destination of a run's metrics (:class:`Tracker`): the contract TensorBoard and MLflow fill in."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Final

__all__ = ["Tracker", "describe"]

_ERROR_CHARS: Final = 500


def describe(exc: BaseException) -> str:
    """An error in one line of at most 500 characters (for ``tracking_failed`` and the summary)."""
    text = f"{type(exc).__name__}: {exc}".strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:_ERROR_CHARS]


class Tracker:
    """One destination: opened once, given each generation's scalars, the figures at the end, closed.

    ``record`` is what ``tracking.json`` keeps of it: its destination, its ids
    and ``next_gen``, the first generation it has not been sent yet.
    """

    name: ClassVar[str]

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record
        self.error: str | None = None

    @property
    def next_gen(self) -> int:
        """The first generation not sent yet."""
        return int(self.record.get("next_gen", 0))

    def where(self) -> str:
        """Where to look, in one line."""
        raise NotImplementedError

    def open(self, *, resumed: bool) -> None:
        """Connect (on a resume: to what ``record`` names)."""
        raise NotImplementedError

    def scalars(self, gen: int, metrics: Mapping[str, float]) -> None:
        """Send one generation's metrics."""
        raise NotImplementedError

    def figures(self, gen: int, images: Mapping[str, bytes], folder: Path) -> None:
        """Send the report's figures (``folder`` holds them as files, with ``report.html``)."""
        raise NotImplementedError

    def close(self, status: str) -> None:
        """End: ``FINISHED``, ``FAILED`` or ``KILLED``."""
        raise NotImplementedError

    def abandon(self) -> None:
        """Let go after an error (best effort)."""
