"""Joining Ray: a cluster at an address (checked first, since Ray itself retries for minutes), or a local one."""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Callable, Iterator

import ray
from coevo.arena.errors import ArenaError
from coevo.run.driver.stopping import reinstall

__all__ = ["check_reachable", "connect", "ends_with_this_driver", "ray_for"]

_SESSIONS: list[bool] = []  # one entry per ray_for inside another: did it start Ray
_ADDRESSES: list[str | None] = []  # one entry per ray_for: the cluster address it joined, if any


def check_reachable(address: str, timeout: float = 10.0) -> None:
    """Fail at once when nothing listens at a cluster's ``host:port`` (Ray itself would retry for minutes).

    ``auto``, ``local`` and client addresses (``ray://...``) are left to Ray.

    Raises:
        ArenaError: naming the address, what happened, and the two ways on.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as exc:
        why = exc.strerror or type(exc).__name__ or "no answer"
        raise ArenaError(
            f"cannot reach a Ray cluster at {address} ({why.lower()}): start one there "
            f"(`ray start --head --port={port}`), or leave out --address, [ray].address and "
            "RAY_ADDRESS to run on this machine"
        ) from None


def connect(address: str | None, num_cpus: int | None) -> bool:
    """Connect to Ray (a cluster at ``address``, else a local one); True if this call started it."""
    if ray.is_initialized():
        return False
    if address:
        check_reachable(address)
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    else:
        ray.init(
            num_cpus=num_cpus,
            include_dashboard=False,
            logging_level=logging.WARNING,
            log_to_driver=False,
        )
    reinstall()  # ray.init put its own SIGTERM handler in place of the run's
    return True


@contextlib.contextmanager
def ray_for(
    address: str | None,
    num_cpus: int | None,
    *,
    in_process: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Ray for one driver (a run, a benchmark run, a corpus build): joined, or started and shut down at the end; nothing ``in_process``.

    ``progress(text)`` is told when a Ray started here is up, and how long it took (for the status line).
    """
    say = progress or (lambda text: None)
    began = time.monotonic()
    started = not in_process and connect(address, num_cpus)
    if started:
        say(f"Ray up in {time.monotonic() - began:.1f} s")
    _SESSIONS.append(started)
    _ADDRESSES.append(address if started and address else None)
    try:
        yield
    finally:
        _SESSIONS.pop()
        _ADDRESSES.pop()
        if started:
            ray.shutdown()


def joined_address() -> str | None:
    """The cluster address the innermost :func:`ray_for` joined; None for a Ray started on this machine (or joined before it)."""
    return _ADDRESSES[-1] if _ADDRESSES else None


def ends_with_this_driver() -> bool:
    """True inside a :func:`ray_for` that started (or joined) Ray itself: its shutdown ends this driver's actors.

    Actors killed one by one while calls are in flight each make Ray print a
    "(raylet) Task ... failed. There are 4 retries remaining" line (a failed
    task, pushed to the driver); shutting down first ends them without a word.
    """
    return bool(_SESSIONS) and _SESSIONS[-1]
