"""Shared fixtures."""

from __future__ import annotations

import compileall
import importlib.util
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
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


_ends: dict[str, Callable[[], None]] = {}
"""How to end a session's server or Ray before the session ends, by fixture name."""

_last_users: dict[str, str] = {}
"""The last selected test (node id) using each fixture of :data:`_ends`, in the order they run."""

_started: list[str] = []
"""The fixtures of :data:`_ends` started in this process and not yet told in a report."""


@pytest.fixture(scope="session")
def vllm_server():
    """A real vLLM (CPU) serving SmolLM2-135M-Instruct on loopback, one for the session (tests/real_model.py).

    It applies Qwen2.5-Instruct's sampling defaults to whatever a request leaves unset (the GPU
    recipe's model): every test against it checks that coevo pins what the trainer reproduces.
    Stopped once the last test using it is done: its two processes hold about 3.1 GB
    (resident), which the rest of the suite may need.
    """
    from tests.real_model import QWEN_GENERATION_CONFIG, VLLMServer

    server = VLLMServer(generation_config=QWEN_GENERATION_CONFIG, wait=False)  # ready at first use
    _ends["vllm_server"] = server.stop
    _started.append("vllm_server")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def ray_cluster():
    """Ray, started once for the whole test session (about 4 s), on this machine; shut down after the last test on it."""
    import ray

    if not ray.is_initialized():
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            logging_level="ERROR",
            log_to_driver=False,
        )
        _started.append("ray_cluster")
    _ends["ray_cluster"] = ray.shutdown
    yield ray
    ray.shutdown()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Any:
    """End the vLLM server or Ray once the last test using it is done, not at the session's end."""
    yield
    for name, last in _last_users.items():
        if item.nodeid == last and name in _ends:
            _ends.pop(name)()  # the fixture's own teardown, at the end, finds nothing left to stop


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


# ---- both cores: pytest-xdist's workers, the session's Ray and vLLM each on one (tests/distribution.py)

MAX_WORKERS = 8
"""The most workers the suite starts unasked: every worker collects the whole suite (about ten
CPU seconds), and past a few the groups of tests/distribution.py bound the time."""

_GROUPS_FOLDER = pytest.StashKey[Path]()


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Use every core (up to :data:`MAX_WORKERS`) by default, the tests grouped by what they share.

    pytest-xdist's workers, as if ``-n auto --dist loadgroup`` were given, unless the command
    names tests one by one (``path::test``: starting workers would take longer than they save);
    ``-n 0`` or ``-p no:xdist`` runs the tests in this process, ``-n N`` on N workers. Not
    through ``addopts``: the real-model environment runs ``tests/train`` with a pytest without
    xdist.
    """
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist"):
        return
    option = config.option
    named = bool(config.args) and all("::" in arg for arg in config.args)
    if option.numprocesses is None and not option.tx and not named and not option.usepdb:
        workers = min(config.hook.pytest_xdist_auto_num_workers(config=config), MAX_WORKERS)
        option.numprocesses = workers if workers > 1 else None
    if option.numprocesses and option.dist == "no":
        option.dist = "loadgroup"
    if option.dist == "loadgroup":
        option.loadscopereorder = False  # the workers' order: the longest groups first
        config.stash[_GROUPS_FOLDER] = Path(tempfile.mkdtemp(prefix="coevo-groups-"))


SOURCES = ("arena", "agents", "curricula", "run", "experiments", "tests")
"""coevo's package folders (pyproject's ``package-dir``) and the tests' helpers, byte-compiled once per session."""


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile coevo's sources (and the tests' helpers) once, before any worker starts.

    Where ``PYTHONDONTWRITEBYTECODE`` is set (as on the machines the suite's figures come from),
    no import writes a ``.pyc``: each of the suite's processes (its workers, Ray's, every
    ``coevo`` it runs) compiled coevo again, about 0.6 s for the command line's imports. Test
    modules are left to pytest, which rewrites them.
    """
    if hasattr(config, "workerinput"):
        return
    root = Path(__file__).resolve().parents[1]
    skip = re.compile(r"[/\\](test_[^/\\]*|conftest)\.py$")
    for folder in SOURCES:
        compileall.compile_dir(root / folder, quiet=2, rx=skip)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the folder of the workers' groups."""
    folder = config.stash.get(_GROUPS_FOLDER, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Tell each pytest-xdist worker where to write its tests' groups (it parses only the command line)."""
    folder = node.config.stash.get(_GROUPS_FOLDER, None)
    if folder is not None:
        node.workerinput["coevo_groups"] = str(folder)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` by the groups the workers wrote (tests/distribution.py)."""
    folder = config.stash.get(_GROUPS_FOLDER, None)
    if folder is None:
        return None
    from tests.distribution import GroupScheduling  # imports pytest-xdist: only where it runs

    return GroupScheduling(config, log, folder)


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
        "the first runs every module's import in a fresh interpreter",
    ),
}
"""Node-id prefixes allowed more than :data:`BUDGET_SECONDS`: (seconds, why)."""

RAY_STARTED = "ray started, not slow"
"""The user property of a report whose test started Ray without the ``slow`` mark."""

FIXTURE_STARTED = "session fixture started"
"""The user property of a setup's report that started the vLLM server or the session's Ray."""

_starts: dict[str, int] = {}

_spent: dict[str, float] = {}
_started_ray: list[str] = []
_began: list[float] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    """Note when the session began (the wall clock of the time section)."""
    _began.append(time.monotonic())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add up each test's setup, call and teardown (under xdist: in the controller, from every worker)."""
    _spent[report.nodeid] = _spent.get(report.nodeid, 0.0) + report.duration
    if (RAY_STARTED, True) in report.user_properties:
        _started_ray.append(report.nodeid)
    for key, name in report.user_properties:
        if key == FIXTURE_STARTED:
            _starts[name] = _starts.get(name, 0) + 1


def _ray_running() -> bool:
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


_ray_before: dict[str, bool] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Any:
    """Note whether Ray ran before the test (its setup included)."""
    _ray_before[item.nodeid] = _ray_running()
    yield
    _ray_before.pop(item.nodeid, None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Say on the setup's report that it started the vLLM server or Ray, on the teardown's that a test not marked slow started Ray."""
    outcome = yield
    while _started:
        outcome.get_result().user_properties.append((FIXTURE_STARTED, _started.pop(0)))
    if call.when != "teardown" or _ray_before.get(item.nodeid, True) or not _ray_running():
        return
    if item.get_closest_marker("slow") is None:
        outcome.get_result().user_properties.append((RAY_STARTED, True))


def _budget(nodeid: str) -> float:
    prefix = max((p for p in BUDGETS if nodeid.startswith(p)), key=len, default=None)
    return BUDGETS[prefix][0] if prefix is not None else BUDGET_SECONDS


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The wall clock and the tests' time, the real-model tests' on a line of its own, then every test over its budget."""
    if not _spent:
        return
    real = {k: v for k, v in _spent.items() if k.startswith("tests/arena/test_real_model.py")}
    rest = sum(_spent.values()) - sum(real.values())
    workers = getattr(config.option, "numprocesses", None) or 0
    write = terminalreporter.write_line
    terminalreporter.write_sep("-", "time")
    where = f"on {workers} workers (pytest-xdist)" if workers else "in one process"
    write(f"wall clock: {time.monotonic() - _began[0]:.0f} s {where}, collection included")
    summed = f"; summed over the {workers} workers" if workers else ""
    write(f"tests: {len(_spent) - len(real)} in {rest:.0f} s (setup, call and teardown{summed})")
    if real:
        write(f"real-model server tests: {len(real)} in {sum(real.values()):.0f} s, counted apart")
    if _starts:
        started = ", ".join(f"{name} {count}" for name, count in sorted(_starts.items()))
        twice = " (more than once: their tests were not kept on one worker, tests/distribution.py)"
        write(f"session fixtures started: {started}{twice if max(_starts.values()) > 1 else ''}")
    over = sorted(((v, k) for k, v in _spent.items() if v > _budget(k)), reverse=True)
    for seconds, nodeid in over:
        write(f"over its budget of {_budget(nodeid):.0f} s: {nodeid} ({seconds:.1f} s)")
    for nodeid in _started_ray:
        write(f"Ray started during a test not marked slow: {nodeid}")


@pytest.hookimpl(trylast=True)  # the tests as selected (-m, -k)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test on Ray is slow (the quick loop starts no Ray); under ``--dist loadgroup``, the groups."""
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
    folder = getattr(config, "workerinput", {}).get("coevo_groups")
    if folder is not None:
        from tests.distribution import write_groups  # imports pytest-xdist: only where it runs

        write_groups(items, Path(folder), config.workerinput["workerid"])


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the long checks the selected tests read, beside the suite (tests/beside.py), in one process only; note the last test on the vLLM server and on Ray.

    Under pytest-xdist the workers keep every core busy: the test that reads a check runs it.
    """
    if not hasattr(session.config, "workerinput"):
        beside.start([item.nodeid for item in session.items])
    for name in ("vllm_server", "ray_cluster"):  # each group runs whole, in this order
        users = [i.nodeid for i in session.items if name in getattr(i, "fixturenames", ())]
        if users:
            _last_users[name] = users[-1]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """End what still runs beside the suite."""
    beside.stop()
