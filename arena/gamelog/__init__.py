"""The game log: Parquet tables per generation, committed by a manifest written last.

* :mod:`~coevo.arena.gamelog.rows`: the tables, one typed row model each (the schema's one owner),
  and :class:`GenerationRecord`, one generation's rows;
* :mod:`~coevo.arena.gamelog.log`: :class:`GameLog`, which writes a record, commits it and reads
  the committed generations back;
* :mod:`~coevo.arena.gamelog.rundir`: :class:`RunDir`, a run directory on any pyarrow filesystem.
"""

from __future__ import annotations

from coevo.arena.errors import LogError
from coevo.arena.gamelog.log import READABLE_VERSIONS, SCHEMA_VERSION, GameLog
from coevo.arena.gamelog.rows import (
    SCHEMAS,
    TABLES,
    EpisodeRow,
    EvalRow,
    GenerationRecord,
    GenerationRow,
    PredictionRow,
    Row,
    TaskRow,
    UpdateRow,
    UsageRow,
    VerdictRow,
    WorldRow,
    markdown_table,
)
from coevo.arena.gamelog.rundir import RunDir

__all__ = [
    "READABLE_VERSIONS",
    "SCHEMAS",
    "SCHEMA_VERSION",
    "TABLES",
    "EpisodeRow",
    "EvalRow",
    "GameLog",
    "GenerationRecord",
    "GenerationRow",
    "LogError",
    "PredictionRow",
    "Row",
    "RunDir",
    "TaskRow",
    "UpdateRow",
    "UsageRow",
    "VerdictRow",
    "WorldRow",
    "markdown_table",
]
