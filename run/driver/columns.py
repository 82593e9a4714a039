"""The columns of ``coevo run``'s live table and what each means.

One owner for the table (:mod:`~coevo.run.driver.display`), ``coevo run
--help`` and docs/arena.md; this module imports nothing, so the help stays fast.
"""

from __future__ import annotations

from typing import Final

__all__ = ["COLUMNS", "column_help"]

COLUMNS: Final[tuple[tuple[str, str, int, str], ...]] = (
    ("gen", "right", 3, "the generation"),
    ("accepted", "right", 8, "proposals the Judge accepted"),
    ("rejected", "right", 8, "proposals it rejected (by check: the summary, events.jsonl)"),
    ("train", "right", 5, "success on the generation's training tasks"),
    ("eval", "right", 4, "success on the held-out eval suite (– when not played)"),
    ("frontier", "right", 8, "the curriculum's level after the generation"),
    ("level", "right", 5, "the mean level of the tasks trained on"),
    ("brier", "right", 5, "the World model's Brier score on fresh tasks (lower: better)"),
    ("ep/s", "right", 4, "training episodes per second of solving"),
    ("s", "right", 5, "seconds the generation took"),
)
"""Name, alignment, width and meaning of each column, in order."""


def column_help() -> str:
    """The columns explained, one per line (``coevo run --help``)."""
    width = max(len(name) for name, *_ in COLUMNS)
    return "\n".join(f"  {name:<{width}}  {meaning}" for name, _, _, meaning in COLUMNS)
