"""Shared fixtures."""

from __future__ import annotations

import pytest
from coevo.arena import TaskSpec, WorldSpec

from tests.factories import load_examples


@pytest.fixture(scope="session")
def examples() -> tuple[list[TaskSpec], dict[str, WorldSpec]]:
    """The example tasks (in file order) and their worlds by id."""
    return load_examples()


@pytest.fixture(scope="session")
def ray_cluster():
    """Ray, started once for the whole test session (about 4 s), on this machine."""
    import ray

    if not ray.is_initialized():
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            logging_level="ERROR",
            log_to_driver=False,
        )
    yield ray
    ray.shutdown()
