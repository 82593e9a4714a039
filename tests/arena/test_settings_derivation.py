"""Settings derived from a factory's signature: closed for a pydantic model, open for **kwargs, through the bases only when a class says so."""

from __future__ import annotations

from typing import Any

import pytest
from coevo.arena.errors import ConfigError
from coevo.arena.settings import settings_model, validate_settings
from pydantic import BaseModel


class PluginJudge(BaseModel):
    """A role written as a pydantic model: its fields are its settings."""

    budget: int = 100


class Base:
    def __init__(self, path: str, k: int = 1):
        self.path, self.k = path, k


class FixedPath(Base):
    """Gives its base the arguments itself, and takes any other option."""

    def __init__(self, seed: int = 0, **options: Any):
        super().__init__(path="fixed.db", k=5)


class Handed(Base):
    """Hands its keyword arguments on to its base unchanged, and says so."""

    settings_from_bases = True

    def __init__(self, seed: int = 0, **base: Any):
        super().__init__(**base)


def test_a_pydantic_role_s_settings_are_its_fields_and_a_typo_is_refused() -> None:
    """The model's own signature is read: `budgt` is refused with the key named."""
    model = settings_model(PluginJudge, "plugin")
    assert list(model.model_fields) == ["budget"]
    with pytest.raises(ConfigError, match="budgt"):
        validate_settings(model, {"budgt": 3}, where="judge.config", owner="the judge 'plugin'")
    with pytest.raises(ConfigError, match="budget"):  # typed as the model's field, not Any
        validate_settings(
            model, {"budget": "lots"}, where="judge.config", owner="the judge 'plugin'"
        )


def test_kwargs_let_anything_through_unless_the_class_hands_them_to_its_base() -> None:
    """A subclass that fills its base's arguments itself keeps open settings; one that declares settings_from_bases takes its base's, closed."""
    open_model = settings_model(FixedPath, "fixed")
    assert list(open_model.model_fields) == ["seed"]
    assert validate_settings(open_model, {"foo": 1}, where="c", owner="o").arguments() == {
        "seed": 0,
        "foo": 1,
    }
    handed = settings_model(Handed, "handed")
    assert list(handed.model_fields) == ["seed", "path", "k"]
    with pytest.raises(ConfigError, match="foo"):
        validate_settings(handed, {"path": "a.db", "foo": 1}, where="c", owner="o")
    made = Handed(**validate_settings(handed, {"path": "a.db"}, where="c", owner="o").arguments())
    assert (made.path, made.k) == ("a.db", 1)
