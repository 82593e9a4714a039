"""Curricula as plugins: the registry, entry points, the conformance checker over every curriculum."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from coevo.arena.errors import CurriculumCheckError, RegistryError
from coevo.arena.spec import TaskSpec
from coevo.curricula.base import CurriculumConfig
from coevo.curricula.registry import CURRICULA, curriculum_config, make_curriculum
from coevo.curricula.uniform import Uniform
from coevo.run.testing import check_curriculum, curriculum_problems

from tests.factories import plugin_on_path

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "coevo_example_plugin"


@pytest.mark.parametrize("name", [info.name for info in CURRICULA.specs()])
def test_every_registered_curriculum_conforms(name: str) -> None:
    """Every curriculum in the registry passes check_curriculum (replay exercised where it has one)."""
    info = CURRICULA.get(name)
    settings = {"min_fill": 2} if "min_fill" in info.config.model_fields else {}
    check_curriculum(info.cls, settings)


class _Forgetful(Uniform):
    """Draws its levels from a random module it never saves: not resumable."""

    name: ClassVar[str] = "forgetful"

    def __init__(self, config: CurriculumConfig, seed: int):
        super().__init__(config, seed)
        self.shuffler = random.Random(seed)

    def batch(self, gen: int) -> list[TaskSpec]:
        chosen = super().batch(gen)
        self.shuffler.shuffle(chosen)
        return chosen


class _Greedy(Uniform):
    """Trains on more than it may."""

    name: ClassVar[str] = "greedy"

    def batch(self, gen: int) -> list[TaskSpec]:
        return list(self.tasks.values())


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (_Forgetful, "put everything its choices depend on in state()"),
        (_Greedy, "at most tasks_per_gen = 4 distinct tasks"),
        (dict, "is not a subclass of coevo.curricula.base.Curriculum"),
    ],
)
def test_check_curriculum_catches_broken_curricula(cls: type, message: str) -> None:
    """A curriculum that cannot resume, or trains on too much, is named with what must hold."""
    assert any(message in p for p in curriculum_problems(cls)), curriculum_problems(cls)
    with pytest.raises(CurriculumCheckError) as caught:
        check_curriculum(cls)
    assert isinstance(caught.value, AssertionError)


def test_an_unknown_curriculum_suggests_the_closest() -> None:
    """A misspelt curriculum name is refused with did-you-mean and the registered names."""
    with pytest.raises(RegistryError, match="did you mean 'target-band'"):
        curriculum_config({"name": "target_band"})


def test_a_curriculum_can_be_named_by_import_path() -> None:
    """``package.module:Class`` names a curriculum with no entry point; its own settings apply."""
    settings = curriculum_config(
        {"name": "tests.curricula.test_registry:_Greedy", "tasks_per_gen": 3}
    )
    assert settings.tasks_per_gen == 3
    assert isinstance(make_curriculum(settings, 0), _Greedy)


@pytest.fixture
def plugin_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with plugin_on_path(PLUGIN, tmp_path, monkeypatch) as site:
        yield site


def test_a_plugin_curriculum_is_found_through_its_entry_point_and_conforms(
    plugin_installed,
) -> None:
    """The example plugin's curriculum is usable by name, with its own settings, and passes the checker."""
    info = CURRICULA.get("example-easy-first")
    assert info.origin.startswith("coevo-example-plugin")
    settings = curriculum_config({"name": "example-easy-first", "tasks_per_gen": 4, "ceiling": 2})
    curriculum = make_curriculum(settings, 0)
    assert all(r.level <= 2 for r in curriculum.plan(0).requests)
    check_curriculum(info.cls, {"ceiling": 2})


TEMPLATE = Path(__file__).resolve().parents[2] / "docs" / "templates" / "curriculum_plugin"


def test_the_curriculum_plugin_template_installs_and_conforms(tmp_path, monkeypatch) -> None:
    """docs/templates/curriculum_plugin, laid out as pip would, registers `ladder`, which conforms and climbs."""
    with plugin_on_path(TEMPLATE, tmp_path, monkeypatch):
        info = CURRICULA.get("ladder")
        assert info.origin == "coevo-ladder 0.1.0"
        check_curriculum(info.cls, {"levels": [1, 2, 3]})
        ladder = make_curriculum({"name": "ladder", "levels": [1, 2], "promote": 0.5}, 0)
        assert {r.level for r in ladder.plan(0).requests} == {1}
        ladder.observe(0, ["t1", "t2"], [1, 1])
        assert ladder.frontier() == 2.0
