"""``coevo train``'s side that needs no torch: a batch's rows as training sequences, its settings and flags, and the message without the train extra."""

from __future__ import annotations

import importlib.util
import json

import pytest
from coevo.run.cli import main
from coevo.run.train.sequences import (
    sampled_temperature,
    sequences_of,
    with_format_reward,
)
from coevo.run.train.settings import TrainSettings


def row(**given) -> dict:
    base = {
        "episode_id": "e0",
        "task_id": "t0",
        "role": "solver",
        "policy_version": "m",
        "reward": 1.0,
        "advantage": 0.5,
        "layout": "interleaved",
        "token_ids": [5, 6, 7, 8, 9, 10],
        "loss_mask": [0, 0, 1, 1, 0, 1],
        "logprobs": [None, None, -0.1, -0.2, None, -0.3],
        "turn_prompt_ids": None,
        "turn_completion_ids": None,
        "turn_logprobs": None,
        "sampling": json.dumps({"temperature": 0.7, "max_tokens": 48}),
    }
    return {**base, **given}


def test_an_interleaved_row_is_one_sequence_with_its_mask_and_behaviour_log_probs() -> None:
    """The positions are the mask's ones, each with the log-prob the server recorded there; the temperature is the row's."""
    (sequence,), skipped = sequences_of([row()])
    assert sequence.positions == [2, 3, 5] and sequence.behaviour == [-0.1, -0.2, -0.3]
    assert sequence.advantage == 0.5 and sequence.temperature == 0.7
    assert (skipped.zero_advantage, skipped.no_tokens, skipped.no_mask) == (0, 0, 0)


def test_a_per_turn_row_is_a_sequence_per_turn_of_prompt_then_completion() -> None:
    """Each turn's prompt ids then its completion ids, the loss on the completion, with that turn's log-probs."""
    per_turn = row(
        layout="per-turn",
        token_ids=None,
        loss_mask=None,
        logprobs=None,
        turn_prompt_ids=[[1, 2], [1, 2, 3, 4, 5]],
        turn_completion_ids=[[3], [6, 7]],
        turn_logprobs=[[-0.5], [-0.1, -0.2]],
    )
    first, second = sequences_of([per_turn])[0]
    assert (first.token_ids, first.positions, first.behaviour) == ([1, 2, 3], [2], [-0.5])
    assert (second.token_ids, second.positions, second.behaviour) == (
        [1, 2, 3, 4, 5, 6, 7],
        [5, 6],
        [-0.1, -0.2],
    )


def test_rows_that_cannot_teach_are_left_out_and_counted() -> None:
    """A zero advantage adds no gradient; no token ids (or nothing masked) cannot be trained on by token."""
    sequences, skipped = sequences_of(
        [
            row(advantage=0.0),
            row(layout=None, token_ids=None, loss_mask=None, logprobs=None),
            row(loss_mask=[0] * 6),
            row(),
        ]
    )
    assert len(sequences) == 1
    assert (skipped.zero_advantage, skipped.no_tokens, skipped.no_mask) == (1, 1, 1)
    kept, _ = sequences_of([row(advantage=0.0)], keep_zero=True)
    assert len(kept) == 1


def test_an_advantage_within_rounding_of_zero_is_zero() -> None:
    """Three rewards of 0.1 leave advantages of about 1e-17 (not exactly 0): no signal, left out as zero advantage."""
    rewards = [0.1, 0.1, 0.1]
    mean = sum(rewards) / 3
    rows = [row(episode_id=f"e{n}", reward=r, advantage=r - mean) for n, r in enumerate(rewards)]
    assert any(r["advantage"] != 0.0 for r in rows)  # the float arithmetic the filter must absorb
    sequences, skipped = sequences_of(rows)
    assert not sequences and skipped.zero_advantage == 3
    shaped, _ = with_format_reward([row(reward=0.0, advantage=0.0)] * 3, 0.5 * 2 / 3)
    assert not sequences_of(shaped)[0]


def test_a_number_that_is_not_finite_or_a_row_that_does_not_fit_is_left_out_and_counted() -> None:
    """NaN advantages, -inf, NaN, positive or -9999 log-probs, ids outside the vocabulary, masks of another length."""
    bad = [
        row(advantage=float("nan")),
        row(reward=float("inf")),
        row(logprobs=[None, None, float("-inf"), -0.2, None, -0.3]),
        row(logprobs=[None, None, float("nan"), -0.2, None, -0.3]),
        row(logprobs=[None, None, -9999.0, -0.2, None, -0.3]),
        row(logprobs=[None, None, 0.5, -0.2, None, -0.3]),
        row(token_ids=[5, 6, 7, 8, 9, 99]),
        row(token_ids=[5, 6, -7, 8, 9, 10]),
        row(loss_mask=[0, 0, 1, 1, 0]),
        row(logprobs=[None, None, -0.1]),
    ]
    sequences, skipped = sequences_of([*bad, row()], vocab_size=50)
    assert len(sequences) == 1
    assert (skipped.not_finite, skipped.malformed) == (6, 4), skipped.why
    assert "99" not in str(sequences[0].token_ids)


def test_a_token_under_the_mask_with_no_recorded_log_prob_is_counted_not_given_a_ratio_of_1() -> (
    None
):
    """The importance weight cannot be taken without the behaviour's log-prob: the row is left out, counted."""
    sequences, skipped = sequences_of([row(logprobs=[None, None, -0.1, None, None, -0.3])])
    assert not sequences and skipped.no_logprobs == 1


def test_sampling_the_trainer_cannot_reproduce_is_left_out_and_counted() -> None:
    """Greedy (temperature 0, never read as 1), top-p < 1, top-k, min-p and penalties: counted as unreproducible."""
    for sampling in (
        {"temperature": 0},
        {"temperature": 0.7, "top_p": 0.8},
        {"temperature": 0.7, "top_k": 20},
        {"temperature": 0.7, "min_p": 0.05},
        {"temperature": 0.7, "repetition_penalty": 1.05},
        {"temperature": 0.7, "presence_penalty": 0.5},
    ):
        sequences, skipped = sequences_of([row(sampling=json.dumps(sampling))])
        assert not sequences and skipped.unreproducible == 1, sampling
    neutral = {
        "temperature": 0.7,
        "top_p": 1.0,
        "top_k": -1,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
    }
    assert len(sequences_of([row(sampling=json.dumps(neutral))])[0]) == 1


def test_a_cut_turn_leaves_the_loss_when_overlong_masking_is_on() -> None:
    """Two turns, the first cut at max_tokens: its tokens are not trained on (counted); masking off, they are."""
    cut = row(
        token_ids=[5, 6, 7, 8, 9, 10, 11],
        loss_mask=[0, 1, 1, 0, 0, 1, 1],
        logprobs=[None, -0.1, -0.2, None, None, -0.3, -0.4],
        turn_completion_ids=[[6, 7], [10, 11]],
        finish_reasons=["length", "stop"],
    )
    (sequence,), skipped = sequences_of([cut])
    assert sequence.positions == [5, 6] and sequence.behaviour == [-0.3, -0.4]
    assert skipped.cut_turns == 1
    (whole,), _ = sequences_of([cut], mask_truncated=False)
    assert whole.positions == [1, 2, 5, 6]
    only_cut = {**cut, "finish_reasons": ["length", "length"]}
    assert not sequences_of([only_cut])[0]


def test_group_scaling_divides_by_each_group_s_reward_deviation() -> None:
    """scale = group: a task's rows are divided by its rewards' standard deviation; a group with none keeps 0."""
    rows = [
        row(episode_id="a", task_id="t", reward=1.0, advantage=0.5),
        row(episode_id="b", task_id="t", reward=0.0, advantage=-0.5),
        row(episode_id="c", task_id="u", reward=1.0, advantage=0.0),
    ]
    sequences, skipped = sequences_of(rows, scale="group")
    assert [round(s.advantage, 4) for s in sequences] == [1.0, -1.0]
    assert skipped.zero_advantage == 1


def test_the_sampling_temperature_is_read_from_a_row_and_is_1_when_unsaid() -> None:
    """A missing or malformed sampling means the server's default, 1; a temperature of 0 is greedy, never 1."""
    assert sampled_temperature(json.dumps({"temperature": 0.5})) == 0.5
    assert (
        sampled_temperature("{}")
        == sampled_temperature("not json")
        == sampled_temperature(None)
        == 1.0
    )
    assert sampled_temperature(json.dumps({"temperature": 0})) == 0.0


def _help_names_every_setting(command: str, settings: type, capsys) -> str:
    """``coevo COMMAND --help``, checked to name each field of ``settings`` as a flag with its default; the help."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for name, field in settings.model_fields.items():
        flag = f"--{name.replace('_', '-')}"
        assert flag in shown, flag
        assert ("required" if field.is_required() else f"default: {field.default}") in shown, name
    return shown


def test_every_setting_is_a_flag_whose_help_names_its_default(capsys) -> None:
    """coevo train --help lists each setting of TrainSettings with its default: one owner for both."""
    _help_names_every_setting("train", TrainSettings, capsys)


def test_every_warm_start_setting_is_a_flag_of_coevo_sft_whose_help_names_its_default(
    capsys,
) -> None:
    """coevo sft --help lists each setting of SFTSettings with its default, and its own flags."""
    from coevo.run.train.settings import SFTSettings

    shown = _help_names_every_setting("sft", SFTSettings, capsys)
    for flag in ("--out", "--experiment", "--exclude", "--rollouts", "--validation-share"):
        assert flag in shown, flag


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_a_setting_that_is_not_a_finite_number_is_refused_before_anything_loads(
    tmp_path, capsys, value
) -> None:
    """--learning-rate inf (a flag, or in a --settings file): exit 2 naming it, for coevo train and coevo sft."""
    assert main(["train", str(tmp_path), "--model", "m", f"--learning-rate={value}"]) == 2
    assert "--learning-rate" in capsys.readouterr().err
    settings = tmp_path / "train.toml"
    settings.write_text(f'[train]\nmodel = "m"\nlearning_rate = {value}\n')
    assert main(["train", str(tmp_path), "--settings", str(settings)]) == 2
    assert "--learning-rate" in capsys.readouterr().err
    assert main(["sft", str(tmp_path), "--model", "m", "--out", str(tmp_path / "o"),
                 f"--learning-rate={value}"]) == 2  # fmt: skip
    assert "--learning-rate" in capsys.readouterr().err


def test_a_bad_setting_is_refused_naming_the_flag(tmp_path, capsys) -> None:
    """A learning rate of 0 and an unknown key in --settings: exit 2, each named."""
    assert main(["train", str(tmp_path), "--model", "m", "--learning-rate", "0"]) == 2
    assert capsys.readouterr().err.startswith("coevo train: --learning-rate:")  # said once
    settings = tmp_path / "train.toml"
    settings.write_text('[train]\nmodel = "m"\nlora_rank = 8\nwarmup = 3\n')
    assert main(["train", str(tmp_path), "--settings", str(settings)]) == 2
    assert "--warmup" in capsys.readouterr().err


def test_a_logprobs_adapter_that_is_not_version_equals_path_is_refused(tmp_path, capsys) -> None:
    """coevo logprobs --adapter names a version and its folder: anything else is exit 2, with the form."""
    for given in ("warm-start", "=runs/warm/adapter", "warm-start="):
        assert main(["logprobs", str(tmp_path), "--model", "m", "--adapter", given]) == 2
        assert "VERSION=PATH" in capsys.readouterr().err


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is not None,
    reason="this environment has the train extra (the message is for one without it)",
)
def test_without_the_train_extra_coevo_train_says_how_to_get_it(tmp_path, capsys) -> None:
    """The core install has no torch: coevo train exits 2 and names the extra to install."""
    assert main(["train", str(tmp_path), "--model", "m"]) == 2
    assert "pip install 'coevo[train]'" in capsys.readouterr().err


def test_a_format_reward_pays_the_turns_carried_out_and_makes_the_advantages_again() -> None:
    """Two rollouts of one task, both reward 0: one whose call worked, one whose call failed; the bonus separates them."""
    worked = json.dumps(
        [
            {"role": "assistant", "content": "<tool_call>...", "tool_calls": [{"id": "c"}]},
            {"role": "tool", "tool_call_id": "c", "content": "{}"},
        ]
    )
    failed = worked.replace('"{}"', '"error: not JSON"')
    rows = [
        row(
            episode_id="a",
            reward=0.0,
            advantage=0.0,
            completion_messages=worked,
            prompt_messages="[]",
        ),
        row(
            episode_id="b",
            reward=0.0,
            advantage=0.0,
            completion_messages=failed,
            prompt_messages="[]",
        ),
    ]
    shaped, share = with_format_reward(rows, 0.5)
    assert share == 0.5
    assert [r["reward"] for r in shaped] == [0.5, 0.0]
    assert [r["advantage"] for r in shaped] == [0.25, -0.25]
    assert [r["reward"] for r in rows] == [0.0, 0.0]  # the batch's rows are left as they were
    assert len(sequences_of(shaped)[0]) == 2 and not sequences_of(rows)[0]


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--poll", "nan"), ("--poll", "-1"), ("--wait", "nan"), ("--lag", "-3"), ("--batches", "-1")],
)
def test_a_consumer_setting_out_of_range_is_refused_naming_the_flag(
    tmp_path, capsys, flag, value
) -> None:
    """--poll nan (a sleep of NaN), a negative lag or count: exit 2 naming the flag, before anything waits."""
    assert main(["reference-trainer", str(tmp_path / "run"), flag, value]) == 2
    assert capsys.readouterr().err.startswith(f"coevo reference-trainer: {flag} ")
