"""The game log: Parquet tables per generation, committed by a manifest written last.

* :mod:`~coevo.arena.gamelog.rows`: the tables, one typed row model each (the schema's one owner),
  and :class:`GenerationRecord`, one generation's rows;
* :mod:`~coevo.arena.gamelog.log`: :class:`GameLog`, which writes a record, commits it and reads
  the committed generations back;
* :mod:`~coevo.arena.gamelog.rundir`: :class:`RunDir`, a run directory on any pyarrow filesystem;
* :mod:`~coevo.arena.gamelog.lock`: :class:`RunLock`, one writer per run directory;
* :mod:`~coevo.arena.gamelog.doctor`: :func:`diagnose` and :func:`repair`, what is damaged in a
  run directory and truncating it back to its last intact generation.
"""

from __future__ import annotations

from coevo.arena.errors import LogError
from coevo.arena.gamelog.doctor import Diagnosis, diagnose, repair
from coevo.arena.gamelog.lock import HEARTBEAT_SECONDS, STALE_SECONDS, RunLock
from coevo.arena.gamelog.log import READABLE_VERSIONS, SCHEMA_VERSION, GameLog, accepted_ids
from coevo.arena.gamelog.rows import (
    SCHEMAS,
    TABLES,
    EpisodeRow,
    EvalRow,
    GenerationRecord,
    GenerationRow,
    IngestedRow,
    PolicyRow,
    PredictionRow,
    ProposalRow,
    Row,
    TaskRow,
    TrajectoryRow,
    UpdateRow,
    UsageRow,
    VerdictRow,
    WorldRow,
    markdown_table,
)
from coevo.arena.gamelog.rundir import RunDir

__all__ = [
    "HEARTBEAT_SECONDS",
    "READABLE_VERSIONS",
    "SCHEMAS",
    "SCHEMA_VERSION",
    "STALE_SECONDS",
    "TABLES",
    "Diagnosis",
    "EpisodeRow",
    "EvalRow",
    "GameLog",
    "GenerationRecord",
    "GenerationRow",
    "IngestedRow",
    "LogError",
    "PolicyRow",
    "PredictionRow",
    "ProposalRow",
    "Row",
    "RunDir",
    "RunLock",
    "TaskRow",
    "TrajectoryRow",
    "UpdateRow",
    "UsageRow",
    "VerdictRow",
    "WorldRow",
    "accepted_ids",
    "diagnose",
    "markdown_table",
    "repair",
]
