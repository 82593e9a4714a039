"""Shared fixtures."""

from __future__ import annotations

import pytest
from coevo.arena import TaskSpec, WorldSpec

from tests.factories import load_examples


@pytest.fixture(scope="session")
def examples() -> tuple[list[TaskSpec], dict[str, WorldSpec]]:
    """The example tasks (in file order) and their worlds by id."""
    return load_examples()
