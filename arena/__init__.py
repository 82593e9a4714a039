"""coevo.arena: the task runtime — task format, SQL and code worlds, verifier, the Judge's checks, the game log.

The bottom floor (``docs/architecture.md``): everything else builds on it, and
it imports nothing above it. It holds what a task needs to be played and
checked (worlds, verifiers, the Judge, the sandbox, τ²-bench's runtime and
reader) and the record of play (the game log, and :mod:`coevo.arena.analysis`,
which reads it). The run — experiments, the loop on Ray, the command line,
the interfaces — is the package :mod:`coevo.run`, on the top floor.

The public names are re-exported here::

    from coevo.arena import World, TaskSpec, ToolCall, load_records, assess_task
"""

from __future__ import annotations

from coevo.arena.errors import CoevoError, EpisodeError, Problem, RecordError, SpecError
from coevo.arena.ids import canonical_json, task_id, world_id
from coevo.arena.judge import (
    CHECK_NAMES,
    WorldCache,
    assess_task,
    check_determinism,
    check_grounded,
    check_noop,
    check_oracle,
    check_partial,
    check_unsolved,
    check_valid,
)
from coevo.arena.limits import DEFAULT_LIMITS, Limits
from coevo.arena.outcomes import (
    CheckOutcome,
    CheckResult,
    Episode,
    FrameViolation,
    Observation,
    Reward,
    Verdict,
)
from coevo.arena.records import (
    BadRecord,
    Record,
    dump_record,
    iter_records,
    load_records,
    parse_record,
    write_records,
)
from coevo.arena.spec import (
    TASK_FORMAT,
    WORLD_FORMAT,
    Blob,
    CheckSpec,
    FrameColumns,
    Lineage,
    TableData,
    TaskSpec,
    ToolCall,
    ToolSpec,
    VerifierSpec,
    WorldSpec,
)
from coevo.arena.world import World, verify

__all__ = [
    "CHECK_NAMES",
    "DEFAULT_LIMITS",
    "TASK_FORMAT",
    "WORLD_FORMAT",
    "BadRecord",
    "Blob",
    "CheckOutcome",
    "CheckResult",
    "CheckSpec",
    "CoevoError",
    "Episode",
    "EpisodeError",
    "FrameColumns",
    "FrameViolation",
    "Limits",
    "Lineage",
    "Observation",
    "Problem",
    "Record",
    "RecordError",
    "Reward",
    "SpecError",
    "TableData",
    "TaskSpec",
    "ToolCall",
    "ToolSpec",
    "Verdict",
    "VerifierSpec",
    "World",
    "WorldCache",
    "WorldSpec",
    "assess_task",
    "canonical_json",
    "check_determinism",
    "check_grounded",
    "check_noop",
    "check_oracle",
    "check_partial",
    "check_unsolved",
    "check_valid",
    "dump_record",
    "iter_records",
    "load_records",
    "parse_record",
    "task_id",
    "verify",
    "world_id",
    "write_records",
]
