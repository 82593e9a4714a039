"""coevo's plugin for verifiers, id ``coevo-verifiers``: ``vf-eval coevo-verifiers --env.taskset.source RUN_DIR``.

verifiers imports a plugin by its id as a top-level package (``-`` becomes
``_``) and takes the taskset, harness and environment classes it exports
through ``__all__``. This package is only that name: the classes live in
:mod:`coevo.run.interfaces.verifiers_env` (see ``docs/verifiers.md``).
It is installed as the top-level package ``coevo_verifiers``, named after
coevo so that it squats no generic name.
"""

from __future__ import annotations

from coevo.run.interfaces.verifiers_env import (
    CoevoEnv,
    CoevoEnvConfig,
    CoevoHarness,
    CoevoTask,
    CoevoTaskData,
    CoevoTaskset,
    CoevoTasksetConfig,
    load_environment,
)

__all__ = [
    "CoevoEnv",
    "CoevoEnvConfig",
    "CoevoHarness",
    "CoevoTask",
    "CoevoTaskData",
    "CoevoTaskset",
    "CoevoTasksetConfig",
    "load_environment",
]
