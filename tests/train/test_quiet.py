"""What the trainer's commands write to standard error off a terminal: their own lines, no progress bar redraws and no library's FutureWarning."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
import torch
from coevo.run.train.policy import load_model, with_adapter
from coevo.run.train.settings import TrainSettings

from tests.train.conftest import batch_row, make_run, offer

IDS = [3, 9, 4, 12, 7, 21]
MASK = [0, 0, 1, 1, 1, 1]


def test_a_new_adapter_and_one_read_back_raise_no_future_warning(tmp_path, tiny_model) -> None:
    """PEFT reads a property transformers 5.25 deprecated: wrapping a model, new or from a folder, warns of nothing."""
    settings = TrainSettings(model=str(tiny_model), lora_rank=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        model = with_adapter(load_model(str(tiny_model), torch.device("cpu")), settings, None)
        model.save_pretrained(str(tmp_path / "adapter"))
        with_adapter(
            load_model(str(tiny_model), torch.device("cpu")), settings, str(tmp_path / "adapter")
        )


@pytest.mark.slow  # a process of its own: standard error must not be a terminal
def test_coevo_train_into_a_log_file_draws_no_progress_bar_and_no_warning(
    tmp_path, tiny_model
) -> None:
    """`coevo train ... 2> log`: loading the model draws no tqdm bar (no carriage returns), and no FutureWarning is printed."""
    run = make_run(tmp_path, 1)
    offer(
        run,
        0,
        [
            batch_row(
                0, n, reward=float(n), advantage=n - 0.5, ids=IDS, mask=MASK, logprobs=[None] * 6
            )
            for n in range(2)
        ],
    )
    log = tmp_path / "stderr.log"
    with log.open("w") as err:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "coevo.run.cli",
                "train",
                str(run),
                "--model",
                str(tiny_model),
                "--lora-rank",
                "4",
                "--batches",
                "1",
                "--wait",
                "60",
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            timeout=600,
        )
    written = log.read_text()
    assert done.returncode == 0, written[-2000:]
    assert "batch-000000" in done.stdout
    assert "\r" not in written and "it/s" not in written, (
        f"a progress bar in the log: {written[-500:]!r}"
    )
    assert "Warning" not in written, written[-2000:]
