"""Reading finished (or running) runs: metrics, lineage, reports, and exports for trainers.

Everything here reads the game log and nothing else (no checkpoint, no role):

* :mod:`~coevo.curricula.analysis.metrics`: :func:`load_run` and :func:`analyze`;
* :mod:`~coevo.curricula.analysis.irt`: abilities and difficulties fitted to the episodes;
* :mod:`~coevo.curricula.analysis.lineage`: the mutation lineage as a graph;
* :mod:`~coevo.curricula.analysis.report`: one self-contained HTML file comparing runs;
* :mod:`~coevo.curricula.analysis.export`: accepted tasks as training data (and reading them back).
"""

from __future__ import annotations

from coevo.curricula.analysis.metrics import Run, analyze, load_run, mastered_level

__all__ = ["Run", "analyze", "load_run", "mastered_level"]
