"""Hosts in this process, called as Ray actors are; references of either kind.

With ``[ray] in_process = true`` (:mod:`coevo.run.actors.start`) every host is a
:class:`LocalActor`: ``actor.method.remote(*args)`` runs the call at once, one
call at a time per host as on Ray (``drain_busy`` beside them, as its own
concurrency group), on deep copies of the arguments, and gives a
:class:`LocalRef`, whose result is a deep copy too: a role never shares an
object with the loop, as with Ray's transport. :func:`get`, :func:`wait` and
:func:`kill` take a reference or an actor of either kind.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import ray
from coevo.run.actors.hosts import MONITOR

__all__ = ["LocalActor", "LocalRef", "LocalTask", "get", "kill", "wait"]


class LocalRef:
    """The outcome of a call to a :class:`LocalActor` (or a value put in-process): :func:`get` gives it."""

    __slots__ = ("_error", "_value")

    def __init__(self, value: Any = None, error: BaseException | None = None):
        self._value = value
        self._error = error

    def result(self) -> Any:
        """The value (a copy, as Ray would give), or the exception the call raised."""
        if self._error is not None:
            raise self._error
        return copy.deepcopy(self._value)


def _resolved(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Deep copies of call arguments, a reference among them given as its value (as Ray does)."""
    return tuple(a.result() if isinstance(a, LocalRef) else copy.deepcopy(a) for a in args)


class _LocalMethod:
    def __init__(self, actor: LocalActor, name: str):
        self._actor = actor
        self._name = name

    def remote(self, *args: Any, **kwargs: Any) -> LocalRef:
        """Run the call now (after the host's call in progress, if any); its outcome as a :class:`LocalRef`."""
        method = getattr(self._actor.host, self._name)
        args, kwargs = _resolved(args), {k: _resolved((v,))[0] for k, v in kwargs.items()}
        monitor = getattr(method, "__ray_concurrency_group__", None) == MONITOR
        lock = self._actor.monitor if monitor else self._actor.calls
        with lock:
            try:
                return LocalRef(method(*args, **kwargs))
            except Exception as exc:  # as Ray does: the error reaches whoever gets the result
                return LocalRef(error=exc)


class LocalActor:
    """A host in this process, called as a Ray actor is (``actor.method.remote(...)``), one call at a time.

    Args:
        host: the host object.
    """

    def __init__(self, host: Any):
        self.host = host
        self.calls = threading.Lock()  # a Ray actor runs its calls one at a time
        self.monitor = threading.Lock()  # ... and drain_busy beside them (its own group)

    def __getattr__(self, name: str) -> _LocalMethod:
        if name.startswith("_"):
            raise AttributeError(name)
        return _LocalMethod(self, name)


class LocalTask:
    """A function called as a Ray task is (``task.remote(*args)``), run at once in this process.

    Args:
        function: the function.
    """

    def __init__(self, function: Any):
        self.function = function

    def remote(self, *args: Any) -> LocalRef:
        """Run the call now; its outcome as a :class:`LocalRef`."""
        try:
            return LocalRef(self.function(*_resolved(args)))
        except Exception as exc:  # as Ray does: the error reaches whoever gets the result
            return LocalRef(error=exc)


def get(refs: Any, *, timeout: float | None = None) -> Any:
    """The value of a reference (or of each in a list), from Ray or from this process."""
    if isinstance(refs, LocalRef):
        return refs.result()
    if isinstance(refs, list) and refs and all(isinstance(r, LocalRef) for r in refs):
        return [r.result() for r in refs]
    return ray.get(refs, timeout=timeout)


def wait(
    refs: list[Any], *, num_returns: int, timeout: float | None
) -> tuple[list[Any], list[Any]]:
    """Ray's ``wait``; references made in this process are all ready."""
    if all(isinstance(r, LocalRef) for r in refs):
        return list(refs), []
    return ray.wait(refs, num_returns=num_returns, timeout=timeout)


def kill(actor: Any) -> None:
    """End an actor (a host in this process simply goes with its last reference)."""
    if not isinstance(actor, LocalActor):
        ray.kill(actor)
