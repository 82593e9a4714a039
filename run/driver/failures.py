"""Role calls and their failures, tallied per generation and per run, so an outage never looks like a clean run.

A *call* is one unit of work the arena asks of a role, and it *fails* when
the role could not do it (the host recorded the failure as data):

* synthesizer: a proposal request that raised (no tasks, the error);
* judge: a task whose verdict is a failed one (``the judge failed: ...``);
* solver: an episode the Solver could not play (``the solver failed: ...``);
  an episode that earns reward 0 has *not* failed: reward is not the call's success;
* learner: a ``learn`` step that raised;
* world model: a ``predict`` or ``update`` that raised or answered out of contract.

A generation in which every call of a role failed is an error event
(``role_failed_every_call``); a run in which a role's calls never once
succeeded ends with a non-zero exit status and that role's last error;
one whose every call failed in ``run.stop_after_failing`` generations in a
row (:func:`failing_streak`) stops the run there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["ROLE_TABLE", "RoleCalls", "RoleTally", "failing_streak", "without_doc_links"]

_DOC_LINK = re.compile(r"\n?[ \t]*For further information visit https://errors\.pydantic\.dev/\S*")


def failing_streak(failing: dict[str, list[int]], n: int, gen: int) -> str | None:
    """The role every call of which failed in each of the ``n`` generations through ``gen`` (None: none, or ``n`` is 0).

    ``failing``: by role, the generations in which every call of it failed (in order).
    """
    if n <= 0:
        return None
    streak = list(range(gen - n + 1, gen + 1))
    return next((role for role, gens in sorted(failing.items()) if gens[-n:] == streak), None)


def without_doc_links(text: str) -> str:
    """``text`` without pydantic's "For further information visit ..." lines (one per problem: noise in a message that already says what is wrong)."""
    return _DOC_LINK.sub("", text)


ROLE_TABLE = {
    "synthesizer": "synthesizer",
    "judge": "judge",
    "solver": "solver",
    "learner": "solver",
    "world model": "world_model",
}
"""The experiment table that names each role the arena calls (the learner is the Solver's)."""


@dataclass
class RoleCalls:
    """Calls of one role and how many failed.

    Attributes:
        calls: calls made.
        failed: calls that failed.
        error: the last failure's message (None while none failed).
    """

    calls: int = 0
    failed: int = 0
    error: str | None = None

    @property
    def all_failed(self) -> bool:
        """True when calls were made and every one failed."""
        return self.calls > 0 and self.failed == self.calls


@dataclass
class RoleTally:
    """Calls per role, for one generation or a whole run."""

    roles: dict[str, RoleCalls] = field(default_factory=dict)

    def record(self, role: str, error: str | None) -> None:
        """One call of ``role``: failed with ``error``, or succeeded (None)."""
        calls = self.roles.setdefault(role, RoleCalls())
        calls.calls += 1
        if error is not None:
            calls.failed += 1
            calls.error = error

    def add(self, other: RoleTally) -> None:
        """Add the calls of ``other`` to this tally."""
        for role, theirs in other.roles.items():
            mine = self.roles.setdefault(role, RoleCalls())
            mine.calls += theirs.calls
            mine.failed += theirs.failed
            mine.error = theirs.error or mine.error

    def all_failed(self) -> dict[str, RoleCalls]:
        """The roles every call of which failed."""
        return {role: calls for role, calls in self.roles.items() if calls.all_failed}
