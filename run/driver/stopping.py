"""Stopping a run on SIGTERM, the signal schedulers send (Kubernetes, Slurm, spot preemption, ``timeout``).

SIGTERM is treated like Ctrl-C, with a grace time (``run.stop_grace``):

* the first SIGTERM while generations run lets the generation in flight
  commit, then the run stops at that commit boundary: the lock released,
  one line naming ``coevo resume RUN``, exit status 143 (128 + SIGTERM, as
  shells report it);
* before the generations begin (Ray and the actors starting), it stops at
  once the same way;
* a second SIGTERM, or the grace time passing before the run has stopped,
  ends the process at once: the lock is released when it is still this
  run's, the committed generations stay readable and ``coevo resume``
  continues after the last of them (what was in flight is written again).
  The handler stays after a SIGTERM, so a second one that comes while the
  run is already stopping still ends the process with 143, not killed by
  the signal.

Ray installs a SIGTERM handler of its own in the driver when it starts
(``ray.init``; its C++ failure-signal handler dumps a stack and leaves the
lock behind), so :func:`~coevo.run.actors.connection.connect` calls
:func:`reinstall` right after it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any, Final

__all__ = [
    "EXIT_TERMINATED",
    "Terminated",
    "at_commit",
    "generations_begin",
    "reinstall",
    "stop_on_sigterm",
]

EXIT_TERMINATED: Final = 143
"""SIGTERM (128 + 15, as shells report it): what was committed stays; ``coevo resume`` continues."""


class Terminated(KeyboardInterrupt):
    """The run was stopped by SIGTERM: handled where Ctrl-C is (what was committed stays), exit 143."""


class _Stop:
    """The SIGTERM handler of one run (see the module docstring)."""

    def __init__(self, grace: float, lock: Any, run_dir: str):
        self.grace = grace
        self.lock = lock
        self.run_dir = run_dir
        self.requested = False
        self.running = False  # generations run: stop at the next commit
        self.timer: threading.Timer | None = None

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            self.now("a second SIGTERM")
        self.requested = True
        self.timer = threading.Timer(
            self.grace, self.now, args=(f"the grace time ({self.grace:g} s) passed",)
        )
        self.timer.daemon = True
        self.timer.start()
        if not self.running:
            raise Terminated
        print(
            f"SIGTERM: stopping once the generation in flight commits (at most {self.grace:g} s, "
            "run.stop_grace; another SIGTERM stops at once)",
            file=sys.stderr,
            flush=True,
        )

    def now(self, why: str) -> None:
        """End the process at once: the lock given back, the log as committed."""
        with contextlib.suppress(Exception):
            self.lock.release()
        with contextlib.suppress(Exception):
            print(
                f"\ncoevo: stopped at once ({why}); the committed generations stay: continue with "
                f"`coevo resume {self.run_dir}`",
                file=sys.stderr,
                flush=True,
            )
        os._exit(EXIT_TERMINATED)

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()


_ACTIVE: _Stop | None = None


@contextlib.contextmanager
def stop_on_sigterm(grace: float, lock: Any, run_dir: str) -> Iterator[None]:
    """SIGTERM stops the run held by ``lock`` in ``run_dir`` (see the module docstring) while inside.

    Only in the main thread (where Python runs signal handlers); elsewhere nothing changes.
    """
    global _ACTIVE
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stop = _Stop(grace, lock, run_dir)
    before = signal.getsignal(signal.SIGTERM)
    _ACTIVE = stop
    signal.signal(signal.SIGTERM, stop.handle)
    try:
        yield
    finally:
        _ACTIVE = None
        stop.close()
        if not stop.requested:  # after a SIGTERM the process is ending: a second one exits 143 too
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signal.SIGTERM, before if before is not None else signal.SIG_DFL)


def reinstall() -> None:
    """Put the run's SIGTERM handler back (``ray.init`` installs its own)."""
    if _ACTIVE is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _ACTIVE.handle)


def generations_begin() -> None:
    """The actors are up: from now on a SIGTERM lets the generation in flight commit first."""
    if _ACTIVE is not None:
        _ACTIVE.running = True


def at_commit() -> None:
    """A generation has committed: stop here if SIGTERM asked to.

    Raises:
        Terminated: a SIGTERM came.
    """
    if _ACTIVE is not None and _ACTIVE.requested:
        raise Terminated
