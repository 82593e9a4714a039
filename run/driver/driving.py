"""A driver's life, one path for a run, a benchmark run and a corpus build.

* :func:`preflight`: what can be found wrong before anything is written or Ray
  starts: a role's settings, variables and server
  (:func:`~coevo.run.experiment.check_environment`), a tracker that is not
  installed, a cluster address where nothing listens;
* :func:`claim`: the run directory's lock (one writer at a time; a stale lock
  is taken over, and said);
* :func:`driving`: both (unless the caller already holds the lock: then it
  has run the preflight), then Ray (:func:`~coevo.run.actors.connection.ray_for`)
  for as long as the driver runs; the lock released at the end when it was
  claimed here.

``coevo run`` and ``coevo resume`` claim the lock themselves first, before
Ray or the roles are imported (a second run into the directory is refused
at once), then run the preflight (releasing the lock when it fails), before
the run's events and trackers start, and hand the lock to
:func:`~coevo.run.loop.run_experiment` or
:func:`~coevo.run.benchmark.run_benchmark`; a library call of
:func:`~coevo.run.loop.run_experiment` without a lock does both here. A
corpus build (:func:`~coevo.run.corpus.build.build_corpus`) claims its folder with
:func:`claim` and starts Ray with :func:`~coevo.run.actors.connection.ray_for`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from coevo.arena.gamelog import GameLog, RunDir, RunLock
from coevo.run.actors.connection import check_reachable, ray_for
from coevo.run.experiment import Experiment, check_environment, ray_address
from coevo.run.tracking import require_installed

__all__ = ["claim", "driving", "preflight"]


def preflight(
    experiment: Experiment, address: str | None = None, *, trackers: bool = False
) -> None:
    """Fail before anything is written or Ray starts.

    Args:
        experiment: the experiment about to run.
        address: the ``--address`` given (else ``[ray].address``, ``RAY_ADDRESS``): checked
            to answer.
        trackers: check that the ``[tracking]`` trackers are installed too (``coevo run``).

    Raises:
        ArenaError: a role is unknown, misconfigured, lacks a variable or its server.
        ExperimentError: a tracker it turns on is not installed.
    """
    check_environment(experiment)
    if trackers:
        require_installed(experiment.tracking)
    where = ray_address(address, experiment)
    if where:
        check_reachable(where)


def claim(run: str | RunDir, *, resume: bool) -> RunLock:
    """Take the run directory's lock (:meth:`GameLog.claim`); :func:`driving` says when a stale one was taken over.

    Raises:
        LogError: another run holds it, or (to resume) a generation is damaged.
        OSError: the run directory cannot be written.
    """
    return GameLog(run).claim(resume=resume)


@contextlib.contextmanager
def driving(
    experiment: Experiment,
    run: str | RunDir,
    *,
    resume: bool,
    address: str | None = None,
    lock: RunLock | None = None,
    events: Callable[..., None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Iterator[RunLock]:
    """A run's life in its driver: the preflight and the lock, then Ray; Ray shut down at the end.

    Args:
        experiment: the experiment.
        run: its run directory.
        resume: to continue it (the lock checks the committed generations).
        address: a Ray cluster to join (else ``[ray].address``, ``RAY_ADDRESS``, or a local Ray).
        lock: the lock, when the caller holds it (and so has run :func:`preflight`): left
            to it; else the preflight runs and the lock is claimed here, and released at the end.
        events: ``events(name, **fields)``.
        progress: told when a Ray started here is up.
    """
    owned = lock is None
    if lock is None:
        preflight(experiment, address)
        lock = claim(run, resume=resume)
    if lock.taken_over and events is not None:  # whoever claimed it (`coevo run` claims first)
        events("lock_taken_over", run_dir=lock.run.uri, why=lock.taken_over)
    try:
        where = ray_address(address, experiment)
        with ray_for(
            where, experiment.ray.num_cpus, in_process=experiment.ray.in_process, progress=progress
        ):
            yield lock
    finally:
        if owned:
            lock.release()
