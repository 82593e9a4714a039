"""coevo.arena.run: the top floor — experiment files, the loop on Ray, its actors, the display, the CLI.

Everything below (the task runtime in :mod:`coevo.arena`, the roles in
:mod:`coevo.agents`, the curricula in :mod:`coevo.curricula`) knows nothing of
this package; it puts them together::

    from coevo.arena.run import load_experiment, run_experiment

    experiment = load_experiment("experiments/quickstart.toml", ["run.generations=2"])
    summary = run_experiment(experiment, "runs/two-generations")
"""

from __future__ import annotations

from coevo.arena.run.experiment import Experiment, load_experiment
from coevo.arena.run.loop import GenerationReport, RunSummary, resume_run, run_experiment

__all__ = [
    "Experiment",
    "GenerationReport",
    "RunSummary",
    "load_experiment",
    "resume_run",
    "run_experiment",
]
