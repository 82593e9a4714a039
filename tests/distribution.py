"""How the suite is spread over pytest-xdist's workers (``--dist loadgroup``, the default: tests/conftest.py).

A group of tests runs on one worker, one test after another: the tests on
the session's Ray (one Ray per process; two would share two cores four
ways), then those on the real vLLM server (one start per session), as one
group (the server and its trainers use both cores: Ray's actors beside them
starved, and the tests on Ray took two to five times as long), for each
module, the tests that share a module-scoped fixture (made once), and
the tests of :data:`ONE_WORKER_MODULES` (never two at a time).
Every other test goes wherever a worker is free. The longest groups are
handed out first, so that the last minutes are short tests on both cores.

Each worker writes the group of every test it collected to a folder the
controller names; the controller's scheduler reads it. pytest-xdist's own
``loadgroup`` finds the groups in suffixes it appends to node ids, which
pytest 9.2 no longer lets a plugin change (pytest-xdist issue 1386): its
groups are silently ignored there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

GROUPS = {"ray_cluster": "ray-then-vllm", "vllm_server": "ray-then-vllm"}
"""Session fixtures that exist once per process and must start once per session: every test
using one runs on one worker, in the group named here (handed out first; in it, the tests of
the first fixture first)."""

SHARED_SCOPES = ("module", "class", "package")
"""Fixture scopes made once per module (or class, or package) and process."""

ONE_WORKER_MODULES = {
    "tests/arena/test_cluster.py": "its tests share one two-node cluster (a module fixture), "
    "a worker node lost by one test started again for the next",
}
"""Modules whose tests must not run two at a time: they run on one worker, as a group (why)."""


def group(item: pytest.Item) -> str | None:
    """The group a test runs in: by the session fixture it needs, else its module's (a shared fixture, or one at a time); None: anywhere."""
    names = getattr(item, "fixturenames", ())
    for fixture, name in GROUPS.items():
        if fixture in names:
            return name
    module = item.nodeid.split("::")[0]
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    if module in ONE_WORKER_MODULES or any(
        defs and defs[-1].scope in SHARED_SCOPES for defs in definitions
    ):
        return module
    return None


def _rank(item: pytest.Item, name: str | None) -> tuple[int, int]:
    """Groups of :data:`GROUPS` first (in it, by the fixture in :data:`GROUPS`' order), then tests marked slow, then the rest."""
    if name in GROUPS.values():
        names = getattr(item, "fixturenames", ())
        return 0, next(i for i, fixture in enumerate(GROUPS) if fixture in names)
    return 1 + (item.get_closest_marker("slow") is None), 0


def write_groups(items: list[pytest.Item], folder: Path, worker: str) -> None:
    """Order the tests (longest groups first; stable, so a file's tests keep their order) and write each one's group for the controller."""
    groups = {item.nodeid: group(item) for item in items}
    items.sort(key=lambda item: _rank(item, groups[item.nodeid]))
    written = {nodeid: name for nodeid, name in groups.items() if name is not None}
    partial = folder / f"{worker}.json.partial"
    partial.write_text(json.dumps(written))
    os.replace(partial, folder / f"{worker}.json")  # whole before the worker reports collection


class GroupScheduling(LoadScopeScheduling):
    """pytest-xdist's scope scheduling with the workers' groups as scopes (a test without one is a scope alone).

    Each scope goes to one worker whole; scopes are handed out in the order the
    workers collected them (:func:`write_groups`), a worker getting the next
    when it has two tests or fewer left.
    """

    def __init__(self, config: pytest.Config, log: Any, folder: Path):
        super().__init__(config, log)
        self.folder = folder
        self.groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self.groups is None:  # first asked once every worker has collected, so has written
            self.groups = {}
            for path in sorted(self.folder.glob("*.json")):
                self.groups.update(json.loads(path.read_text()))
        return self.groups.get(nodeid, nodeid)
