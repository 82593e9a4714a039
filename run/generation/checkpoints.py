"""What a run resumes from: the checkpoint of its last generation, and how many older ones it keeps (``run.keep_checkpoints``)."""

from __future__ import annotations

from typing import Any

from coevo.arena.errors import ArenaError
from coevo.arena.gamelog import GameLog

__all__ = ["prune_checkpoints", "resumable"]


def resumable(log: GameLog, gen: int) -> dict[str, Any]:
    """Generation ``gen``'s manifest, when its checkpoint is one coevo loads.

    Raises:
        ArenaError: the run was written with pickled checkpoints (game-log schema 1).
    """
    manifest = log.manifests()[gen]
    if manifest["schema_version"] < 2:
        raise ArenaError(
            f"{log.run.uri} was written by an older coevo (game-log schema "
            f"{manifest['schema_version']}), whose checkpoints are Python pickles; coevo never "
            "loads a pickle from a run directory. Its log still reads (coevo analyze, report, "
            "export); to train on, start a new run with `coevo run`"
        )
    if log.pruned(manifest):
        raise ArenaError(
            f"generation {gen} of {log.run.uri} keeps no checkpoint (run.keep_checkpoints "
            "removed it once later ones were committed, and a repair cut those): the run cannot "
            "be resumed. Its log reads whole (coevo analyze, report, export); to train on, start "
            "a new run with `coevo run`"
        )
    return manifest


def prune_checkpoints(log: GameLog, gen: int, keep: int, through: int) -> int:
    """After generation ``gen``'s commit, remove the checkpoints older than the last ``keep`` (0: none removed).

    ``through`` is the last generation known pruned (−1: none yet, as on
    resume: those already pruned are passed over quickly); returns the new
    one. The log itself is never touched (:meth:`GameLog.prune_checkpoint`).
    """
    if keep == 0:
        return through
    for old in range(through + 1, gen - keep + 1):
        log.prune_checkpoint(old)
        through = old
    return through
