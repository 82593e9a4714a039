"""A run with a [trainer] is refused before it starts when its rollouts would be sampled from a distribution no trainer computes."""

from __future__ import annotations

import pytest
from coevo.run.experiment import load_experiment
from coevo.run.handoff.transports import unreproducible_sampling

from tests.factories import run_cli


@pytest.mark.parametrize(
    ("setting", "named", "fix"),
    [
        ("solver.config.sampling.top_p=0.8", "solver.config.sampling.top_p = 0.8", "set 1"),
        ("solver.config.sampling.top_k=20", "solver.config.sampling.top_k = 20", "set -1"),
        ("solver.config.sampling.min_p=0.05", "solver.config.sampling.min_p = 0.05", "set 0"),
        (
            "solver.config.sampling.repetition_penalty=1.05",
            "solver.config.sampling.repetition_penalty = 1.05",
            "set 1",
        ),
        (
            "solver.config.sampling.presence_penalty=0.5",
            "solver.config.sampling.presence_penalty = 0.5",
            "set 0",
        ),
        (
            "solver.config.sampling.frequency_penalty=-0.5",
            "solver.config.sampling.frequency_penalty = -0.5",
            "set 0",
        ),
        (
            "solver.config.sampling.temperature=0",
            "solver.config.sampling.temperature = 0.0",
            "set a temperature above 0",
        ),
        ("solver.config.extra_body={top_k=20}", "solver.config.extra_body.top_k = 20", "set -1"),
        (
            "solver.config.extra_body={top_p=nan}",
            "solver.config.extra_body.top_p = nan",
            "not a finite number",
        ),
    ],
)
def test_a_trainer_run_whose_solver_sets_sampling_a_trainer_cannot_reproduce_is_refused(
    setting: str, named: str, fix: str, tmp_path
) -> None:
    """`coevo run` exits 2 naming the setting, its value and what to set, and writes nothing."""
    done = run_cli("run", "openai-trainer", "--set", setting, "--out", str(tmp_path / "run"))
    assert done.returncode == 2, done.stderr
    assert named in done.stderr and fix in done.stderr
    assert "log_softmax(logits / temperature)" in done.stderr
    assert not (tmp_path / "run").exists()


def test_a_self_play_synthesizer_is_held_to_the_same_rule(tmp_path) -> None:
    """Its proposals are rows of the batch too: a top_p it sets is refused, naming the synthesizer's setting."""
    done = run_cli(
        "run",
        "self-play",
        "--set",
        "synthesizer.config.sampling.top_p=0.9",
        "--out",
        str(tmp_path / "run"),
    )
    assert done.returncode == 2, done.stderr
    assert "synthesizer.config.sampling.top_p = 0.9" in done.stderr
    assert not (tmp_path / "run").exists()


def test_sampling_a_trainer_reproduces_is_accepted() -> None:
    """Neutral values written out, any temperature above 0, and truncation in a run with no trainer are all fine."""
    load_experiment(
        "openai-trainer",
        [
            "solver.config.sampling.temperature=0.7",
            "solver.config.sampling.top_p=1",
            "solver.config.sampling.top_k=-1",
            "solver.config.sampling.min_p=0",
            "solver.config.sampling.repetition_penalty=1",
        ],
    )
    load_experiment("openai-solver", ["solver.config.sampling.top_p=0.8"])
    assert unreproducible_sampling({"temperature": 1.0, "top_k": 0, "top_p": 1.0}) == []
    assert [p[0] for p in unreproducible_sampling({"temperature": True, "top_k": "20"})] == [
        "temperature",
        "top_k",
    ]
