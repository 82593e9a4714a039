"""Shared fixtures."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import pytest
from coevo.arena import TaskSpec, WorldSpec

from tests import beside
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
    """A real vLLM (CPU) serving SmolLM2-135M-Instruct on loopback, one for the session (tests/real_model.py).

    It applies Qwen2.5-Instruct's sampling defaults to whatever a request leaves unset (the GPU
    recipe's model): every test against it checks that coevo pins what the trainer reproduces.
    """
    from tests.real_model import QWEN_GENERATION_CONFIG, VLLMServer

    server = VLLMServer(generation_config=QWEN_GENERATION_CONFIG)
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


# ---- time: the budget of a test, and the real model's share, reported at the end ----------------

BUDGET_SECONDS = 15.0
"""A test's budget (setup, call and teardown together). One over it is listed at the end of the
run, with its time: reported, never failed (the wall clock varies with the machine and its
load). The tests allowed more are in :data:`BUDGETS`, each with why (docs/testing.md)."""

BUDGETS: dict[str, tuple[float, str]] = {
    "tests/arena/test_cluster.py": (150.0, "a two-node Ray cluster on one machine, a node killed"),
    "tests/test_wheel.py": (240.0, "builds the wheel, installs it in a fresh environment"),
    "tests/test_repo.py::test_mypy_passes": (90.0, "mypy over every package"),
    "tests/arena/test_real_model.py": (300.0, "a real vLLM, counted apart"),
    "tests/test_doc_figures.py": (90.0, "the 20-generation quickstart the docs quote"),
    "tests/test_architecture.py::test_every_module_imports_on_its_own": (
        60.0,
        "the first waits for every module's import, started beside the suite",
    ),
}
"""Node-id prefixes allowed more than :data:`BUDGET_SECONDS`: (seconds, why)."""

_spent: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add up each test's setup, call and teardown."""
    _spent[report.nodeid] = _spent.get(report.nodeid, 0.0) + report.duration


_started_ray: list[str] = []


def _ray_running() -> bool:
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Any:
    """Note a test not marked slow during which Ray started: the quick loop starts none."""
    before = _ray_running()
    yield
    if not before and _ray_running() and item.get_closest_marker("slow") is None:
        _started_ray.append(item.nodeid)


def _budget(nodeid: str) -> float:
    prefix = max((p for p in BUDGETS if nodeid.startswith(p)), key=len, default=None)
    return BUDGETS[prefix][0] if prefix is not None else BUDGET_SECONDS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The real-model tests' time on a line of its own, then every test over its budget."""
    if not _spent:
        return
    real = {k: v for k, v in _spent.items() if k.startswith("tests/arena/test_real_model.py")}
    rest = sum(_spent.values()) - sum(real.values())
    write = terminalreporter.write_line
    terminalreporter.write_sep("-", "time")
    write(f"tests: {len(_spent) - len(real)} in {rest:.0f} s (setup, call and teardown)")
    if real:
        write(f"real-model server tests: {len(real)} in {sum(real.values()):.0f} s, counted apart")
    over = sorted(((v, k) for k, v in _spent.items() if v > _budget(k)), reverse=True)
    for seconds, nodeid in over:
        write(f"over its budget of {_budget(nodeid):.0f} s: {nodeid} ({seconds:.1f} s)")
    for nodeid in _started_ray:
        write(f"Ray started during a test not marked slow: {nodeid}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test on Ray is slow: the quick loop (``-m "not slow"``) starts no Ray."""
    unmarked = [
        item.nodeid
        for item in items
        if "ray_cluster" in getattr(item, "fixturenames", ())
        and item.get_closest_marker("slow") is None
    ]
    if unmarked:
        raise pytest.UsageError(
            "tests on Ray must be marked slow (the quick loop starts no Ray):\n  "
            + "\n  ".join(unmarked)
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the long checks the selected tests read, beside the suite (tests/beside.py)."""
    beside.start([item.nodeid for item in session.items])


def pytest_sessionfinish(session: pytest.Session) -> None:
    """End what still runs beside the suite."""
    beside.stop()
