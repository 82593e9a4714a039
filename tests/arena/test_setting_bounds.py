"""Every whole number a user gives has an upper bound: a 4,000-digit one is refused by name (exit 2), never met as an overflow, a ``MemoryError`` or a run that grows until it is killed.

Python reads integers of up to 4,300 digits; each case below gives one of
4,000 (or a bound plus one) through the real command line, as a user would.
The registry-wide test holds every integer setting of the experiment, the
curricula, ``coevo train`` and ``coevo sft`` to the rule, so that a new
setting cannot leave it out.
"""

from __future__ import annotations

import itertools
import typing
from pathlib import Path
from typing import Any

import annotated_types
import pytest
from coevo.curricula.registry import CURRICULA
from coevo.run.cli import main
from coevo.run.experiment import Experiment
from coevo.run.train.settings import SFTSettings, TrainSettings
from coevo.run.train.warmstart import DialogueSettings
from pydantic import BaseModel
from pydantic.fields import FieldInfo

HUGE = "9" * 4000
QUICKSTART = "experiments/quickstart.toml"

BOUNDED_OTHERWISE = {
    "levels": "a list of levels, each checked to be one of 1–5 (arena.difficulty.known_levels)",
    "temperature": "PLR's rank temperature, a float: any value above 0 is a distribution",
    "band": "target-band's pair of floats, each checked to lie in [0, 1]",
    "custom": "a role's custom resources, floats, each amount checked (at most 1e9)",
}
"""Number settings bounded otherwise than by ``le`` (or harmless unbounded), and why."""


def refused(args: list[str], capsys, status: int = 2) -> str:
    """``coevo ARGS`` exits ``status`` with one `coevo <command>: ...` line, no traceback, the number not echoed whole."""
    assert main(args) == status
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert len([line for line in err.splitlines() if line.startswith(f"coevo {args[0]}: ")]) == 1
    assert HUGE[:200] not in err, "a 4,000-digit number is said by its length, not printed"
    return err


def _models(model: type[BaseModel], where: str) -> list[tuple[str, str, FieldInfo]]:
    """Every field of ``model`` and of the models inside it, as (dotted key, kind, field)."""
    out = []
    for name, field in model.model_fields.items():
        members = [field.annotation, *typing.get_args(field.annotation)]
        inner = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        for sub in inner:
            out += _models(sub, f"{where}{name}.")
        numbers = [m for m in members if m in (int, float)]
        if numbers and not any(m is bool for m in members):
            out.append((f"{where}{name}", numbers[0].__name__, field))
    return out


def _every_setting() -> list[tuple[str, str, FieldInfo]]:
    fields = _models(Experiment, "")
    for spec in CURRICULA.specs():
        fields += _models(spec.config, f"curriculum[{spec.name}].")
    for model in (TrainSettings, SFTSettings, DialogueSettings):
        fields += _models(model, f"{model.__name__}.")
    return fields


def test_every_number_setting_has_an_upper_bound() -> None:
    """Each int (and float) field of the experiment's tables, every registered curriculum's settings, and coevo train's and sft's has `le`/`lt`, or a stated reason."""
    fields = _every_setting()
    assert len(fields) > 40, "the walk found the settings"
    unbounded = [
        key
        for key, kind, field in fields
        if not any(isinstance(m, annotated_types.Le | annotated_types.Lt) for m in field.metadata)
        and key.rsplit(".", 1)[-1] not in BOUNDED_OTHERWISE
    ]
    assert not unbounded, (
        f"{unbounded}: give each an upper bound (Field(le=...)) far above real use, and say it "
        "in the description (docs/security.md, 'Integer settings are bounded')"
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("run.generations", HUGE),
        ("run.rollouts", HUGE),
        ("run.rollouts", "4097"),
        ("run.chunk", HUGE),
        ("run.stop_after_failing", HUGE),
        ("run.seed", HUGE),
        ("eval.per_level", HUGE),
        ("eval.every", HUGE),
        ("eval.seed", HUGE),
        ("eval.levels", f"[{HUGE}]"),
        ("eval.levels", "[9]"),
        ("curriculum.tasks_per_gen", HUGE),
        ("curriculum.window", HUGE),
        ("curriculum.oversample", "1e300"),
        ("solver.resources.memory", HUGE),
        ("solver.resources.memory", '"1e300 GiB"'),
        ("eval.suites", f'[{{name = "s", tasks = "s.jsonl", limit = {HUGE}}}]'),
        ("eval.suites", f'[{{name = "s", tasks = "s.jsonl", max_steps = {HUGE}}}]'),
        ("trainer.timeout", "1e300"),
    ],
)
def test_a_huge_experiment_setting_is_refused_naming_it(key, value, tmp_path, capsys) -> None:
    """`--set KEY=<4,000 digits>` (or a bound plus one) is exit 2 naming the key, before anything runs: no overflow, no MemoryError."""
    out = tmp_path / "run"
    err = refused(["run", QUICKSTART, "--out", str(out), "--set", f"{key}={value}"], capsys)
    assert key in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    ("curriculum", "key"),
    [("plr", "buffer_size"), ("plr", "min_fill"), ("target-band", "tasks_per_gen")],
)
def test_a_huge_curriculum_setting_is_refused_naming_it(curriculum, key, tmp_path, capsys) -> None:
    """The curriculum's own settings too (target-band's tasks_per_gen was an OverflowError in its plan)."""
    path = tmp_path / "exp.toml"
    path.write_text(f'[curriculum]\nname = "{curriculum}"\n{key} = {HUGE}\n')
    err = refused(["run", str(path), "--out", str(tmp_path / "run")], capsys)
    assert f"curriculum.{key}" in err, err


def _too_big(field: FieldInfo) -> str:
    """One past the field's bound (4,000 digits where it has none: the registry-wide test says so)."""
    bounds = [m.le for m in field.metadata if isinstance(m, annotated_types.Le)]
    return str(int(bounds[0]) + 1) if bounds else HUGE


def _flags(model: type[BaseModel]) -> list[Any]:
    return [
        pytest.param(name, _too_big(field), id=name)
        for name, field in model.model_fields.items()
        if int in (field.annotation, *typing.get_args(field.annotation))
    ]


@pytest.mark.parametrize(("name", "value"), _flags(TrainSettings))
def test_every_whole_number_flag_of_coevo_train_is_bounded(name, value, tmp_path, capsys) -> None:
    """`coevo train --FLAG <bound + 1>` is exit 2 naming the flag, before torch is imported (--steps-per-batch had no bound)."""
    flag = "--" + name.replace("_", "-")
    err = refused(["train", str(tmp_path), "--model", "m", flag, value], capsys)
    assert err.startswith(f"coevo train: {flag}:"), err


@pytest.mark.parametrize(("name", "value"), _flags(SFTSettings))
def test_every_whole_number_flag_of_coevo_sft_is_bounded(name, value, tmp_path, capsys) -> None:
    """`coevo sft --FLAG <bound + 1>` is exit 2 naming the flag, before anything is read or loaded."""
    flag = "--" + name.replace("_", "-")
    err = refused(
        ["sft", str(tmp_path), "--model", "m", "--out", str(tmp_path / "o"), flag, value], capsys
    )
    assert err.startswith(f"coevo sft: {flag}:"), err


@pytest.mark.parametrize(
    "args",
    [
        ["train", "{run}", "--model", "m", "--batches", HUGE],
        ["train", "{run}", "--model", "m", "--lag", "1001"],
        ["reference-trainer", "{run}", "--batches", HUGE],
        ["reference-trainer", "{run}", "--lag", HUGE],
        ["sft", "{run}", "--model", "m", "--out", "{run}/o", "--limit", HUGE],
        ["sft", "{run}", "--model", "m", "--out", "{run}/o", "--checkpoint-steps", HUGE],
        ["sft", "{run}", "--model", "m", "--out", "{run}/o", "--solver-max-steps", HUGE],
        ["sft", "{run}", "--model", "m", "--out", "{run}/o", "--solver-max-tokens", HUGE],
        ["logprobs", "{run}", "--model", "m", "--limit", HUGE],
        ["synth", "-n", HUGE],
        ["synth", "-n", "1", "--seed", HUGE],
        ["mine", "{run}/missing.db", "-n", HUGE],
        ["corpus", "build", "--out", "{run}/c", "--worlds", HUGE],
        ["corpus", "build", "--out", "{run}/c", "--worlds", "2", "--tasks-per-world", HUGE],
        ["corpus", "build", "--out", "{run}/c", "--worlds", "2", "--workers", HUGE],
        ["audit", "{run}/tasks.jsonl", "--workers", HUGE],
    ],
    ids=lambda args: " ".join(a for a in args if a != HUGE and "{" not in a),
)
def test_a_huge_count_on_the_command_line_is_refused_naming_the_flag(
    args, tmp_path, capsys
) -> None:
    """A flag with no settings model behind it is bounded too: exit 2 naming the flag, nothing run (synth -n and corpus --worlds ran until killed; --workers was a traceback from Ray)."""
    given = [a.replace("{run}", str(tmp_path)) for a in args]
    flag = next(a for a, b in itertools.pairwise(given) if b in (HUGE, "1001"))
    err = refused(given, capsys)
    assert flag in err, err
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("flag", ["--port", "--max-sessions", "--worlds-per-session"])
def test_the_openenv_server_refuses_a_huge_number_before_serving(flag, capsys) -> None:
    """`python -m coevo.run.interfaces.openenv_server SOURCE --port <4,000 digits>`: a usage error (exit 2) naming the flag, not an OverflowError from bind()."""
    from coevo.run.interfaces import openenv_server  # OpenEnv loads gradio: 3 s, here only

    with pytest.raises(SystemExit) as stopped:
        openenv_server.main([str(Path(__file__)), flag, HUGE])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: a 4000-digit number: give a number from" in err, err


@pytest.mark.parametrize("flag", ["--task-budget", "--max-steps"])
def test_a_positive_count_flag_has_a_bound_and_says_a_huge_value_briefly(
    flag, tmp_path, capsys
) -> None:
    """`coevo check --task-budget <4,000 digits>` (or play's --max-steps) is a usage error (exit 2) naming the flag, the value said by its length."""
    command = "check" if flag == "--task-budget" else "play"
    with pytest.raises(SystemExit) as stopped:
        main([command, str(tmp_path / "tasks.jsonl"), flag, HUGE])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: must be at most 9,223,372,036,854,775,807, got 99999" in err, err
    assert "(4000 characters)" in err and HUGE[:200] not in err
