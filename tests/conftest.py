"""Shared fixtures."""

from __future__ import annotations

import importlib.util

import pytest
from coevo.arena import TaskSpec, WorldSpec

from tests.factories import IN_PROCESS_TOML, load_examples

# The trainer's own tests need the train extra (torch); where it is missing they run in the
# real-model environment instead (tests/arena/test_real_model.py starts them there).
collect_ignore = [] if importlib.util.find_spec("torch") else ["train"]


@pytest.fixture(scope="session")
def examples() -> tuple[list[TaskSpec], dict[str, WorldSpec]]:
    """The example tasks (in file order) and their worlds by id."""
    return load_examples()


@pytest.fixture(scope="session")
def vllm_server():
    """A real vLLM (CPU) serving SmolLM2-135M-Instruct on loopback, one for the session (tests/real_model.py)."""
    from tests.real_model import VLLMServer

    server = VLLMServer()
    yield server
    server.stop()


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


SMALL_RUN = (
    '[run]\nname = "tiny"\nseed = 5\ngenerations = 3\nrollouts = 2\nchunk = 8\n'
    '[synthesizer]\nname = "procedural"\nconfig = { domains = ["retail"], world_pool = 2 }\n'
    '[curriculum]\nname = "uniform"\ntasks_per_gen = 4\nlevels = [1]\n'
    "[eval]\nlevels = [1]\nper_level = 2\nevery = 1\n" + IN_PROCESS_TOML
)
"""A small experiment: three generations of four tasks, its roles in this process."""


@pytest.fixture(scope="session")
def finished_small_run(tmp_path_factory):
    """A finished run of :data:`SMALL_RUN`, made once by `coevo run` (tests copy it before changing it)."""
    from coevo.run.cli import main

    where = tmp_path_factory.mktemp("finished")
    toml = where / "tiny.toml"
    toml.write_text(SMALL_RUN)
    assert main(["run", str(toml), "--out", str(where / "run")]) == 0
    return where / "run"
