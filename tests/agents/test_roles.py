"""The role registry, `coevo roles`, and the conformance checker on built-in, plugin and broken roles."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from coevo.agents.linear_pg import LinearPGSolver
from coevo.agents.protocols import LearnStats, ProposalRequest, kind_of
from coevo.agents.registry import REGISTRY, Registry, RoleInfo
from coevo.arena import Episode, Observation, Reward, TaskSpec, Verdict
from coevo.arena.errors import RegistryError, RoleCheckError
from coevo.arena.examples import example_tasks
from coevo.run.testing import check_role, role_problems

from tests.arena.test_cli import coevo
from tests.factories import plugin_on_path

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "coevo_example_plugin"


@pytest.fixture
def plugin_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with plugin_on_path(PLUGIN, tmp_path, monkeypatch) as site:
        yield site


@pytest.mark.parametrize("name", ["procedural", "mechanical"])
def test_every_built_in_role_conforms(name: str) -> None:
    """check_role passes for the built-in roles that need no configuration."""
    check_role(REGISTRY.create(name), name=name)


def test_the_miner_conforms(tmp_path: Path) -> None:
    """The miner, made from a real database, passes check_role too."""
    from tests.agents.databases import build_library

    check_role(REGISTRY.create("miner", path=build_library(tmp_path / "lib.sqlite")))


def test_a_plugin_is_found_through_its_entry_point_and_conforms(plugin_installed: Path) -> None:
    """An installed plugin's role is registered with its kind and distribution, and passes check_role."""
    info = REGISTRY.get("example-band-model")
    assert info.kind == "world model"
    assert info.origin == "coevo-example-plugin 0.1.0"
    check_role(REGISTRY.create("example-band-model"))
    listed = coevo("roles", "--json", env_path=str(plugin_installed))
    assert listed.returncode == 0, listed.stderr
    assert "example-band-model" in listed.stdout


def test_a_broken_plugin_is_reported_and_the_rest_still_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry point that does not import is an error line, not a crash; built-ins stay listed."""
    info = tmp_path / "broken_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[coevo.roles]\nghost = no_such_module:Ghost\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    REGISTRY.reload()
    try:
        names = {r.name for r in REGISTRY.roles()}
        assert "procedural" in names and "ghost" not in names
        assert any("ghost" in e and "no_such_module" in e for e in REGISTRY.plugin_errors)
    finally:
        monkeypatch.undo()
        REGISTRY.reload()


def test_unknown_names_say_did_you_mean() -> None:
    """A misspelt role name names the closest registered ones."""
    with pytest.raises(RegistryError, match="did you mean 'procedural'"):
        REGISTRY.get("procedual")


def test_registration_refuses_clashes_and_unknown_kinds() -> None:
    """A name already taken, or a factory of no known kind, is refused with the reason."""
    registry = Registry()
    registry.add("band", _Model, kind="world model")
    with pytest.raises(RegistryError, match="already registered"):
        registry.add("band", _NoisyModel)
    with pytest.raises(RegistryError, match="cannot tell its kind"):
        registry.add("thing", object)
    with pytest.raises(RegistryError, match="unknown kind 'critic'"):
        RoleInfo("critic", "critic", "pkg.module:Critic")
    assert [r.name for r in registry.roles()] == ["band"]


def test_coevo_roles_lists_kind_and_origin() -> None:
    """`coevo roles` prints every role with its kind and origin."""
    result = coevo("roles")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["name", "kind", "origin"]
    assert any(line.split()[:3] == ["procedural", "synthesizer", "coevo"] for line in lines)
    assert any(line.split()[:3] == ["mechanical", "judge", "coevo"] for line in lines)


# -- deliberately broken roles ---------------------------------------------------------


class _Model:
    kind = "world model"

    def predict(self, tasks: Sequence[TaskSpec]) -> list[float]:
        return [0.5 for _ in tasks]

    def update(self, episodes: Sequence[Episode]) -> None:
        return None


class _NoisyModel(_Model):
    def predict(self, tasks: Sequence[TaskSpec]) -> list[float]:
        return [random.random() for _ in tasks]


class _ShortJudge:
    def assess(self, tasks: Sequence[TaskSpec]) -> list[Verdict]:
        return [Verdict(task_id=t.task_id, accepted=True, checks={}) for t in tasks][:-1]


class _IdleSolver:
    """Submits nothing: every episode earns 0 (a conforming, if useless, solver)."""

    def attempt(self, tasks: Sequence[TaskSpec], seed: int) -> list[Episode]:
        return [
            Episode(
                task_id=task.task_id,
                world_id=task.world_id,
                calls=[],
                observations=[],
                reward=Reward(value=0, submitted=False, reason="did nothing"),
            )
            for task in tasks
        ]

    def learn(self, episodes: Sequence[Episode]) -> LearnStats:
        return LearnStats(episodes=len(episodes))


class _RaisingSolver(_IdleSolver):
    def attempt(self, tasks: Sequence[TaskSpec], seed: int) -> list[Episode]:
        if any(task.instruction == "broken" for task in tasks):
            raise RuntimeError("cannot build this world")
        return super().attempt(tasks, seed)


class _StatefulSolver(_IdleSolver):
    def get_state(self) -> bytes:
        return b"weights"


class _MisshippingSolver(LinearPGSolver):
    """Ships decisions that are not the ones it played (every choice the first option)."""

    def take_decisions(self, blobs: Sequence[bytes]) -> None:
        super().take_decisions(blobs)
        for key, decisions in self._traces.items():
            self._traces[key] = [dataclasses.replace(d, chosen=0) for d in decisions]


class _PicklingShipper(LinearPGSolver):
    """Ships its decisions as a pickle."""

    def drain_decisions(self) -> bytes:
        super().drain_decisions()
        return b"\x80\x05N."


class _ForgetfulProposer:
    """A Synthesizer with ``learn`` but no state: the arena could never teach it."""

    def propose(self, request: ProposalRequest) -> list[TaskSpec]:
        return example_tasks()[: request.n]

    def learn(self, feedback: Sequence[Any]) -> LearnStats:
        return LearnStats(episodes=len(feedback))


@pytest.mark.parametrize(
    ("role", "message"),
    [
        (_Model(), None),
        (_ForgetfulProposer(), "a Synthesizer that learns must be Stateful"),
        (_IdleSolver(), None),
        (_NoisyModel(), "predict gave other numbers"),
        (_ShortJudge(), "5 item(s) in, 4 out; return one result per item"),
        (
            _RaisingSolver(),
            "raised RuntimeError on the last task, whose world is broken on purpose",
        ),
        (
            _RaisingSolver(),
            "return an episode with reward 0 for it: coevo.arena.outcomes.failed_episode",
        ),
        (_StatefulSolver(), "has get_state but not set_state: the stateful capability"),
        (_MisshippingSolver(), "must leave the same state as learn without them"),
        (_PicklingShipper(), "drain_decisions must return coevo.state/1 data"),
        (object(), "satisfies no role protocol"),
    ],
)
def test_check_role_catches_broken_roles_and_says_what_is_wrong(
    role: object, message: str | None
) -> None:
    """Wrong batch sizes, nondeterminism, exceptions and half hooks are each named; a sound role passes."""
    problems = role_problems(role)
    if message is None:
        assert problems == []
        check_role(role)
        return
    assert any(message in p for p in problems), problems
    with pytest.raises(RoleCheckError) as caught:
        check_role(role)
    assert isinstance(caught.value, AssertionError)
    assert message in str(caught.value)


def test_kind_of_reads_the_protocols() -> None:
    """A role's kind comes from its methods, or from a declared kind it really implements."""
    assert kind_of(_Model()) == "world model"
    assert kind_of(_ShortJudge()) == "judge"
    assert kind_of(_RaisingSolver()) == "solver"

    class Liar:
        kind = "solver"

        def assess(self, tasks: Sequence[TaskSpec]) -> list[Verdict]:
            return []

    assert kind_of(Liar()) is None
    assert "declares kind 'solver'" in role_problems(Liar())[0]
    assert isinstance(Observation(step=0), Observation)
