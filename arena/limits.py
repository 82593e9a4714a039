"""Runtime budgets for a world: what one tool call, one verification, one episode may cost.

Budgets count SQLite virtual-machine instructions, not seconds, so the same
call on the same state always ends the same way on every machine.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass

__all__ = ["DEFAULT_LIMITS", "Limits", "ensure_heap_limit"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Budgets and caps applied by :class:`~coevo.arena.world.World`.

    Attributes:
        max_steps: tool calls per episode, ``submit`` included; an episode
            that spends them all without submitting ends with reward 0.
        vm_instructions: SQLite VM instructions one tool call may execute
            (all its statements together).
        verifier_vm_instructions: VM instructions one verifier check may execute.
        task_vm_instructions: VM instructions the Judge may spend on one task in
            all its checks and passes together (the oracle, the determinism
            reruns, the shortcuts of ``noop``/``unsolved``/``partial``); once it
            is spent, the checks left fail and the reason names this budget.
        max_value_bytes: the largest string or BLOB SQLite may build
            (``SQLITE_LIMIT_LENGTH``); ``zeroblob(1e9)`` fails at once.
        max_world_bytes: the largest database a world may grow to (its seed rows,
            their column defaults, and every write of an episode), enforced by
            SQLite's page count while the world is built and run.
        max_rows: rows a tool returns; more are cut off and the observation
            says so.
        max_result_bytes: bytes of text and BLOB values a tool returns.
        max_state_bytes: bytes of JSON a code world's state may have when it
            is read (at the end of an episode, to be scored): twice the
            largest real state coevo plays (τ²-bench airline's 7 MB
            database) and the longest record line coevo reads (16 MiB), so
            any world read from a JSON lines file starts within it. Measured
            in the worker, before the state crosses the pipe; a larger state
            fails its episode (reward 0, the reason names this limit).
        max_call_seconds: a wall-clock backstop for one tool call or one
            verifier check. The instruction budget is the deterministic limit;
            this only stops statements that do megabytes of work per
            instruction (e.g. ``replace`` on 1 MB strings in a loop).
    """

    max_steps: int = 40
    vm_instructions: int = 5_000_000
    verifier_vm_instructions: int = 50_000_000
    task_vm_instructions: int = 100_000_000
    max_value_bytes: int = 1_000_000
    max_world_bytes: int = 64 << 20
    max_rows: int = 200
    max_result_bytes: int = 256_000
    max_state_bytes: int = 16 << 20
    max_call_seconds: float = 10.0

    def __post_init__(self) -> None:
        for name in self.__slots__:
            value = getattr(self, name)
            kinds = (int, float) if name == "max_call_seconds" else (int,)
            if not isinstance(value, kinds) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Limits.{name} must be a positive number, got {value!r}")


DEFAULT_LIMITS = Limits()

#: SQLite's process-wide heap cap set by coevo when none is set, in bytes.
#: Override with the ``COEVO_SQLITE_HEAP_LIMIT`` environment variable (0 = leave unset).
DEFAULT_HEAP_LIMIT = 1 << 30
_heap_limit_applied = False


def ensure_heap_limit() -> int:
    """Cap SQLite's heap (process-wide) so one hostile statement cannot exhaust memory.

    A sort or a group of large values can allocate far more than its VM
    instruction count suggests; SQLite's hard heap limit turns that into an
    ``out of memory`` tool error instead. The cap is only ever set when no
    cap is in place, never raised (SQLite allows lowering only).

    Returns:
        The heap limit now in force, in bytes (0 = none).
    """
    global _heap_limit_applied
    probe = sqlite3.connect(":memory:")
    try:
        current = probe.execute("PRAGMA hard_heap_limit").fetchone()[0]
        if current == 0 and not _heap_limit_applied:
            wanted = int(os.environ.get("COEVO_SQLITE_HEAP_LIMIT", DEFAULT_HEAP_LIMIT))
            if wanted > 0:
                current = probe.execute(f"PRAGMA hard_heap_limit = {wanted}").fetchone()[0]
        _heap_limit_applied = True
        return int(current)
    finally:
        probe.close()
