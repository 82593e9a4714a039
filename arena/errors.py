"""Every error coevo raises, one class per boundary a failure can cross.

A bad task is data, not a crash: the Judge turns these errors into a failed
``valid`` check, ``coevo check`` into a line of output. They are raised only
where a caller has to stop, and each message names the field, the value and
the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ArenaError",
    "CoevoError",
    "CommandError",
    "ConfigError",
    "ConformanceError",
    "CurriculumCheckError",
    "EpisodeError",
    "ExperimentError",
    "FileRefusedError",
    "LogError",
    "Problem",
    "RecordError",
    "RegistryError",
    "RoleCheckError",
    "SpecError",
    "StateError",
    "TrainerTimeout",
]


class CoevoError(Exception):
    """Base class of every error raised by coevo."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One broken rule in a world or task record.

    Attributes:
        path: where in the record, e.g. ``world.tools[2].sql[0]``.
        message: what is wrong, naming the offending value.
        fix: how to make the record valid.
    """

    path: str
    message: str
    fix: str = ""

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}"
        return f"{text} — {self.fix}" if self.fix else text


class SpecError(CoevoError, ValueError):
    """A world or task record breaks a rule of the ``coevo.task/1`` format.

    Attributes:
        problems: every rule the record breaks, in record order.
    """

    def __init__(self, problems: Sequence[Problem] | Problem | str):
        if isinstance(problems, str):
            problems = [Problem("record", problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__(self.summary())

    def summary(self, limit: int = 12) -> str:
        """All problems as one message, one per line (the first ``limit``)."""
        lines = [str(p) for p in self.problems[:limit]]
        if len(self.problems) > limit:
            lines.append(f"... and {len(self.problems) - limit} more problems")
        if len(lines) == 1:
            return lines[0]
        return f"{len(self.problems)} problems:\n" + "\n".join(f"  - {line}" for line in lines)


class RecordError(CoevoError, ValueError):
    """Input that cannot be read as a record of the right shape.

    Malformed JSON, a JSON value that is not an object, an unknown
    ``format``, a missing field or a value of the wrong type; or a source
    that cannot be read as records at all (no such file, not a regular
    file), which has no line.

    Attributes:
        line: the 1-based line of the input the record starts on (if known).
        kind: ``"task"`` or ``"world"`` when the record said which it is.
    """

    def __init__(self, message: str, *, line: int | None = None, kind: str | None = None):
        self.line = line
        self.kind = kind
        self.message = message
        super().__init__(f"line {line}: {message}" if line is not None else message)


class EpisodeError(CoevoError, RuntimeError):
    """A world was driven out of order: ``step`` before ``reset`` or after the episode ended.

    Tool failures are never raised; they are observations. This error means
    the program driving the world has a bug.
    """


class RegistryError(CoevoError, LookupError):
    """A role name that is not registered (with the closest names), or a registration that cannot be made."""


class ConformanceError(CoevoError, AssertionError):
    """A plugin does not conform to its contract; ``problems`` lists every finding, each saying what must hold.

    Attributes:
        role: what was checked (its name or type).
        problems: one sentence per failed expectation.
    """

    def __init__(self, role: str, problems: Sequence[str]):
        self.role = role
        self.problems = list(problems)
        listed = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{role} does not conform ({len(self.problems)} problem(s)):\n{listed}")


class RoleCheckError(ConformanceError):
    """A role does not conform to its protocol (:func:`coevo.run.testing.check_role`)."""


class CurriculumCheckError(ConformanceError):
    """A curriculum does not conform to its contract (:func:`coevo.run.testing.check_curriculum`)."""


class LogError(CoevoError):
    """The game log cannot be read or written; the message says where and what to do."""


class FileRefusedError(CoevoError, OSError):
    """A file coevo will not read or write: a link, not a regular file, or bigger than its limit (:mod:`coevo.arena.bounded`).

    It is an ``OSError``, so code that treats an unreadable file as damage treats a refused one the same.
    """


class StateError(CoevoError, ValueError):
    """Saved role state (a checkpoint) that cannot be loaded: wrong format, version or role, or damaged."""


class ExperimentError(CoevoError):
    """An experiment file (or an override) is not valid; the message names the key and the fix."""


class ArenaError(CoevoError):
    """The loop cannot start or go on; the message says why and what to do."""


class TrainerTimeout(ArenaError):
    """An external trainer announced no policy within ``trainer.timeout``: the run ends, resumable (exit status 4)."""


class CommandError(CoevoError):
    """A command cannot do what was asked; ``status`` is the exit status the command line ends with.

    Attributes:
        status: 1 when the input was read but rejected, 2 when it could not be used at all.
    """

    def __init__(self, message: str, status: int = 2):
        super().__init__(message)
        self.status = status


class ConfigError(CoevoError, ValueError):
    """A role's or a curriculum's settings are not valid; the message names the key and the fix."""
