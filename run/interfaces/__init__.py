"""coevo.run.interfaces: coevo's tasks in the environment interfaces trainers speak.

On the top floor, in the run's package (``docs/architecture.md``): an interface
plays coevo's tasks for someone else's trainer and hands the rollouts back
to the run, so it may use everything below it; the commands that serve them
sit above it (a contract says so).

* :mod:`~coevo.run.interfaces.sources`: the accepted tasks of a run
  directory (its live pool), an export or a file of records;
* :mod:`~coevo.run.interfaces.verifiers_env`: a ``verifiers`` environment
  over them (the optional extra ``coevo[verifiers]``); its rollouts come back
  through the run's inbox (:mod:`coevo.arena.gamelog.inbox`). verifiers
  finds it as the plugin ``coevo-verifiers`` (the package ``coevo_verifiers``);
* :mod:`~coevo.run.interfaces.openenv_server`: an OpenEnv environment server
  over them (the optional extra ``coevo[openenv]``; ``docs/openenv.md``).

Nothing here is imported by this package itself: an interface's library is
an optional dependency, imported only with the interface.
"""
