"""An LLM client's circuit breaker: a server that answers nothing but errors is given up on, not retried for minutes.

Once every request of a client has been answered with an error status (429,
5xx, 529: an outage, an API overloaded) for ``give_up_after`` seconds, or a
server's ``retry-after`` asks to wait past that time, the call fails, and so
does every later call, at once and without a request, naming the last
answer. The run counts them as failed calls; a role every call of which
failed in ``run.stop_after_failing`` generations in a row stops the run
(exit 3). An answer that is not an error closes the breaker again.
"""

from __future__ import annotations

import time
from typing import Final

from coevo.agents.llm.turns import LLMCallError

__all__ = ["RETRY_AFTER_CAP", "Breaker"]

RETRY_AFTER_CAP: Final = 60.0
"""The longest ``retry-after`` a server is obeyed for (seconds); it is waited for that long at most."""


class Breaker:
    """The breaker of one client (see the module docstring).

    Args:
        give_up_after: seconds of nothing but error answers after which every call fails at once.
    """

    def __init__(self, give_up_after: float):
        self.give_up_after = give_up_after
        self.failing_since: float | None = None  # the first error answer since the last good one
        self.gave_up: str | None = None  # why every call now fails at once (None: closed)

    def check(self) -> None:
        """Before a request.

        Raises:
            LLMCallError: the breaker is open (the client gave up).
        """
        if self.gave_up is not None:
            raise LLMCallError(self.gave_up)

    def rest(self, asked: float | None, otherwise: float) -> float:
        """The seconds to wait before the next try: the server's ``retry-after`` (capped), else ``otherwise``."""
        return min(asked, RETRY_AFTER_CAP) if asked is not None and asked >= 0 else otherwise

    def failed(self, rest: float, asked: float | None, what: str, owner: str) -> str | None:
        """An error answer, to be retried after ``rest`` s: why the client gives up now (None: retry).

        ``what`` says where the answer came from and what it was; the reason names it and ``owner``.
        """
        now = time.monotonic()
        if self.failing_since is None:
            self.failing_since = now
        failing = now - self.failing_since
        if failing + rest < self.give_up_after:
            return None
        waited = f" and asked to wait {asked:g} s more" if asked else ""
        self.gave_up = (
            f"{what} — nothing but errors for {failing:.0f} s{waited}; {owner} gave up after "
            f"give_up_after = {self.give_up_after:g} s"
        )
        return self.gave_up

    def answered(self) -> None:
        """An answer that is not an error: the breaker closes."""
        self.failing_since = None
        self.gave_up = None
