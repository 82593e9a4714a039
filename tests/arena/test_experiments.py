"""Experiment files: every shipped file is valid, and bad keys or values are explained."""

from __future__ import annotations

from pathlib import Path

import pytest
from coevo.run.experiment import ExperimentError, load_experiment, parse_overrides

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "path", sorted((ROOT / "experiments").glob("*.toml")), ids=lambda p: p.name
)
def test_every_shipped_experiment_is_valid(path: Path) -> None:
    """Each file in experiments/ loads, and names registered roles."""
    from coevo.agents.registry import REGISTRY

    exp = load_experiment(path)
    for role in (exp.synthesizer, exp.judge, exp.solver, exp.world_model):
        REGISTRY.get(role.name)


def test_unknown_keys_get_did_you_mean(tmp_path) -> None:
    """A misspelt key names the closest known key and lists the allowed ones."""
    bad = tmp_path / "bad.toml"
    bad.write_text('[run]\nsed = 1\n[solver]\nname = "linear-pg"\nactor = 2\n')
    with pytest.raises(ExperimentError) as info:
        load_experiment(bad)
    assert "did you mean 'run.seed'" in str(info.value)
    assert "did you mean 'solver.actors'" in str(info.value)


def test_bad_values_and_files_are_explained(tmp_path) -> None:
    """Wrong types, bad TOML and missing files each get a message naming the problem."""
    with pytest.raises(ExperimentError, match=r"run\.generations"):
        load_experiment({"run": {"generations": 0}})
    broken = tmp_path / "broken.toml"
    broken.write_text("[run\n")
    with pytest.raises(ExperimentError, match="not valid TOML"):
        load_experiment(broken)
    with pytest.raises(ExperimentError, match="no such experiment file"):
        load_experiment(tmp_path / "missing.toml")
    with pytest.raises(ExperimentError, match="no curriculum called 'curious'"):
        load_experiment({"curriculum": {"name": "curious"}})


def test_overrides_are_read_as_toml_values() -> None:
    """--set values are TOML (numbers, strings, lists, tables), else text; dotted keys nest."""
    assert parse_overrides(["solver.actors=2", "run.name=demo", "eval.levels=[1, 2]"]) == {
        "solver": {"actors": 2},
        "run": {"name": "demo"},
        "eval": {"levels": [1, 2]},
    }
    exp = load_experiment({}, ["solver.actors=3", 'curriculum.name="plr"'])
    assert exp.solver.actors == 3 and exp.curriculum.name == "plr"
    with pytest.raises(ExperimentError, match="key=value"):
        parse_overrides(["solver.actors"])


def test_a_set_swaps_a_role_and_a_table_value_replaces_the_table() -> None:
    """--set solver.name=claude drops the file's linear-pg settings (lr is no setting of Claude's); a table value replaces its table; a scalar keeps the rest of it."""
    assert load_experiment("quickstart").solver.config == {"lr": 0.2}
    swapped = load_experiment("quickstart", ["solver.name=claude"])
    assert (swapped.solver.name, swapped.solver.config, swapped.solver.actors) == (
        "claude",
        {},
        2,
    ), "the role's settings go with the old role; the table's other keys stay"
    same = load_experiment("quickstart", ["solver.name=linear-pg", "solver.config.lr=0.5"])
    assert same.solver.config == {"lr": 0.5}
    given = load_experiment("quickstart", ["solver.name=claude", "solver.config={max_steps=3}"])
    assert given.solver.config == {"max_steps": 3}, "a config given with the swap is kept"
    synth = load_experiment("quickstart", ["synthesizer.config={domains=['hr']}"])
    assert synth.synthesizer.config == {"domains": ["hr"]}, "world_pool = 4 replaced with the table"
    added = load_experiment("quickstart", ["synthesizer.config.world_pool=8"])
    assert added.synthesizer.config == {"domains": ["retail"], "world_pool": 8}


def test_a_role_of_the_wrong_kind_is_refused_before_anything_starts() -> None:
    """A World model named as the Judge is an error naming both kinds, raised when the file is loaded."""
    with pytest.raises(ExperimentError, match="'irt' is a world model, not a judge"):
        load_experiment({"judge": {"name": "irt"}})
