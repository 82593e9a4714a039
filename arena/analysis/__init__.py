"""Reading finished (or running) runs: metrics, lineage, reports, and exports for trainers.

Everything here reads the game log and nothing else (no checkpoint, no role):

* :mod:`~coevo.arena.analysis.metrics`: :func:`load_run` and :func:`analyze`;
* :mod:`~coevo.arena.analysis.irt`: abilities and difficulties fitted to the episodes;
* :mod:`~coevo.arena.analysis.lineage`: the mutation lineage as a graph;
* :mod:`~coevo.arena.analysis.report`: one self-contained HTML file comparing runs;
* :mod:`~coevo.arena.analysis.export`: accepted tasks as training data (and reading them back).
"""

from __future__ import annotations

from coevo.arena.analysis.metrics import Run, analyze, load_run, mastered_level

__all__ = ["Run", "analyze", "load_run", "mastered_level"]
