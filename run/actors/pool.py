"""The actors of one role, and the one retry policy every call to them follows.

Ray restarts a dead actor and retries its calls, but a call caught while its
node is going away can still fail ("actor unavailable"). Every call the loop
makes is deterministic (seeds and weights travel with it), so a failed call
is simply made again, a bounded number of times with a growing pause
(:data:`RETRY`); what failed for good is reported with its cause:

* :meth:`ActorPool.map` splits work in fixed chunks handed out round-robin;
  a chunk that fails is made again on the next actor; :meth:`Calls.get`
  gathers the results in submission order and raises
  :class:`~coevo.arena.errors.ArenaError` (with the cause chained) for a
  chunk lost for good: the generation cannot be completed without it;
* :meth:`ActorPool.each` asks every actor for what it kept in memory (usage,
  synthesis attempts), waiting for restarts; an actor lost for good gives a
  :class:`Lost` (its memory went with its node) and the run goes on.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from coevo.arena.errors import ArenaError
from coevo.run.actors.inprocess import get
from ray.exceptions import ActorUnavailableError, RayActorError

__all__ = ["RETRY", "ActorPool", "Calls", "Lost", "RetryPolicy", "creation_error"]


@dataclass(frozen=True)
class RetryPolicy:
    """How often, and after what pause, a call whose actor died is made again.

    Attributes:
        attempts: calls in all, the first included.
        pause: seconds to wait before the k-th retry is ``pause × k``.
    """

    attempts: int = 8
    pause: float = 0.2


RETRY: Final = RetryPolicy()
"""The one retry policy of the arena."""


@dataclass(frozen=True)
class Lost:
    """A call that failed every attempt.

    Attributes:
        method: the method called.
        cause: the last error, as text.
    """

    method: str
    cause: str


def _retrying(
    method: str, submit: Callable[[int], Any], policy: RetryPolicy
) -> tuple[Any, BaseException | None]:
    """``ray.get(submit(attempt))`` until it returns, at most ``policy.attempts`` times: (value, None) or (None, last error)."""
    last: BaseException | None = None
    for attempt in range(policy.attempts):
        if attempt:
            time.sleep(policy.pause * attempt)
        try:
            return get(submit(attempt)), None
        except (RayActorError, ActorUnavailableError) as exc:
            last = exc
            if creation_error(exc) is not None:
                break  # the role's constructor raised: every actor of it will, and no retry helps
    return None, last


_ANSI: Final = re.compile(r"\x1b\[[0-9;]*m")


def creation_error(exc: BaseException) -> str | None:
    """What a role's constructor raised, when ``exc`` is an actor that died creating it (else None).

    Ray's message is the worker's whole traceback, coloured; the last line is
    the exception itself (``coevo.arena.errors.CoevoError: unknown domain ...``),
    which is what a user needs, without the class path.
    """
    if not isinstance(exc, RayActorError) or not exc.actor_init_failed:
        return None
    lines = [line.strip() for line in _ANSI.sub("", str(exc)).splitlines() if line.strip()]
    last = lines[-1] if lines else str(exc)
    kind, sep, message = last.partition(": ")
    return message if sep and re.fullmatch(r"[\w.]+", kind) else last


class Calls:
    """Calls in flight on a pool, one per chunk; :meth:`get` gathers them in order."""

    def __init__(self, pool: ActorPool, method: str, chunks: Sequence[tuple[Any, ...]]):
        self.pool = pool
        self.method = method
        self.chunks = list(chunks)
        self.refs = [pool.call(i, method, args) for i, args in enumerate(self.chunks)]

    def get(self) -> list[Any]:
        """Every call's result, in submission order.

        Raises:
            ArenaError: a chunk failed on every attempt; the cause is chained.
        """
        results = []
        for i, ref in enumerate(self.refs):

            def submit(attempt: int, i: int = i, ref: Any = ref) -> Any:
                # the first attempt is the call already in flight; a retry goes to the next actor
                return (
                    ref
                    if attempt == 0
                    else self.pool.call(i + attempt, self.method, self.chunks[i])
                )

            value, error = _retrying(self.method, submit, self.pool.policy)
            created = creation_error(error) if error is not None else None
            if created is not None:
                raise ArenaError(
                    f"the {self.pool.role} could not be made, its constructor raised: {created} "
                    "(a setting in its table of the experiment file, or its environment)"
                ) from None
            if error is not None:
                raise ArenaError(
                    f"a {self.method} call of the {self.pool.role} actors failed "
                    f"{self.pool.policy.attempts} times, the last: {error}"
                ) from error
            results.append(value)
        return results


class ActorPool:
    """The actors of one role.

    Args:
        role: which role (for messages).
        actors: the actor handles.
        policy: the retry policy.
    """

    def __init__(self, role: str, actors: list[Any], policy: RetryPolicy = RETRY):
        self.role = role
        self.actors = actors
        self.policy = policy

    def call(self, index: int, method: str, args: tuple[Any, ...]) -> Any:
        """Submit ``method(*args)`` to actor ``index`` (modulo the pool size); returns the ref."""
        return getattr(self.actors[index % len(self.actors)], method).remote(*args)

    def map(self, method: str, chunks: Sequence[tuple[Any, ...]]) -> Calls:
        """Submit one call per chunk, round-robin; ``.get()`` the results."""
        return Calls(self, method, chunks)

    def each(self, method: str) -> list[Any | Lost]:
        """``method()`` of every actor, in order, waiting for restarts; :class:`Lost` for an actor lost for good."""
        out: list[Any | Lost] = []
        for actor in self.actors:

            def submit(_attempt: int, actor: Any = actor) -> Any:
                return getattr(actor, method).remote()

            value, error = _retrying(method, submit, self.policy)
            out.append(Lost(method, str(error)[:300]) if error is not None else value)
        return out
