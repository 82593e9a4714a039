"""coevo.run: the top floor — experiment files, the loop on Ray, its actors, the display, the CLI, the interfaces.

Everything below (the task runtime in :mod:`coevo.arena`, the roles in
:mod:`coevo.agents`, the curricula in :mod:`coevo.curricula`) knows nothing of
this package; it puts them together::

    from coevo.run.experiment import load_experiment
    from coevo.run.loop import run_experiment

    experiment = load_experiment("quickstart", ["run.generations=2"])
    summary = run_experiment(experiment, "runs/two-generations")

============================ =====================================================
:mod:`.experiment`           TOML experiment files, validated (with "did you mean")
:mod:`.loop`                 :class:`~.loop.Arena`: one generation after another on Ray
:mod:`.hosts`                a role inside a Ray actor, one host per kind
:mod:`.pool`                 the actors of one role and the one retry policy
:mod:`.display`              the live table and ``events.jsonl``
:mod:`.progress`             the progress bar of long commands
:mod:`.cli`, :mod:`.commands`  the ``coevo`` command line
============================ =====================================================

This package imports nothing itself, so ``coevo --help`` and ``coevo check``
start without loading Ray.
"""
