"""coevo.run: the top floor — experiment files, the loop on Ray, its actors, the display, the CLI, the interfaces.

Everything below (the task runtime in :mod:`coevo.arena`, the roles in
:mod:`coevo.agents`, the curricula in :mod:`coevo.curricula`) knows nothing of
this package; it puts them together::

    from coevo.run.experiment import load_experiment
    from coevo.run.loop import run_experiment

    experiment = load_experiment("quickstart", ["run.generations=2"])
    summary = run_experiment(experiment, "runs/two-generations")

Its folders show the architecture (``docs/architecture.md``), a room per concern:

============================ =====================================================
:mod:`.experiment`           TOML experiment files, validated (with "did you mean")
:mod:`.loop`                 :class:`~.loop.Arena`: one generation after another, on Ray or in process
:mod:`.generation`           one generation's phases (playing, overlap, self-play, eval suites) and its commit
:mod:`.actors`               where the roles play: hosts, pools, Ray or in process, resources and capacity
:mod:`.handoff`              the trainer hand-off: batches out, policies back, rollouts in (a floor of its own)
:mod:`.train`                ``coevo train`` and ``coevo sft``: a LoRA trainer, a consumer of the hand-off
:mod:`.driver`               around the loop: preflight and lock, stopping, failures, display, summary
:mod:`.benchmark`            a benchmark run: imported code tasks, each played ``trials`` times
:mod:`.corpus`               corpora built across Ray workers
:mod:`.tracking`             metrics to TensorBoard and MLflow
:mod:`.interfaces`           MCP, OpenEnv and verifiers servers over worlds and the log
:mod:`.cli`, :mod:`.commands`  the ``coevo`` command line
:mod:`.testing`              conformance checkers for plugin authors
============================ =====================================================

This package imports nothing itself, so ``coevo --help`` and ``coevo check``
start without loading Ray.
"""
