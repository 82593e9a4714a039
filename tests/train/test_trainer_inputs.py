"""What coevo train refuses of what it reads (issue 39): a second writer, names from its journal, adapter files, its version folders replaced whole."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from coevo.arena.gamelog import RunDir
from coevo.arena.gamelog.lock import RunLock
from coevo.run.cli import main
from coevo.run.handoff.consumer import LOCK
from coevo.run.train import policy
from coevo.run.train.policy import load_model, save_version, with_adapter
from coevo.run.train.settings import TrainSettings
from coevo.run.train.steps import Stepper

from tests.train.conftest import batch_row, make_run, offer

IDS = [3, 9, 4, 12, 7, 21, 5, 30, 8, 2]
MASK = [0, 0, 0, 1, 1, 1, 0, 1, 1, 1]


def _train(run: Path, model: Path, *extra: str) -> list[str]:
    return ["train", str(run), "--model", str(model), "--lora-rank", "4", "--wait", "20", *extra]


def _batch(run: Path) -> None:
    logprobs = [None if m == 0 else -2.0 for m in MASK]
    rows = [
        batch_row(0, n, reward=float(n), advantage=n - 0.5, ids=IDS, mask=MASK, logprobs=logprobs)
        for n in range(2)
    ]
    offer(run, 0, rows)


def test_a_second_trainer_on_the_same_folder_stops_naming_the_holder(
    tmp_path, tiny_model, capsys
) -> None:
    """One trainer folder, one writer: while it is held, coevo train exits 2 naming the holder's pid, and trains nothing."""
    run = make_run(tmp_path, 1)
    _batch(run)
    held = RunLock(RunDir(str(run / "trainer" / "lora")), name=LOCK, holder="trainer")
    with held:
        assert main(_train(run, tiny_model)) == 2
    err = capsys.readouterr().err
    assert "is being written by another trainer" in err and f"pid {os.getpid()}" in err, err
    assert not (run / "trainer" / "lora" / "journal.jsonl").exists()
    assert main(_train(run, tiny_model)) == 0  # released: it trains, and lets go when it ends
    assert not (run / "trainer" / "lora" / LOCK).exists()


@pytest.mark.parametrize(
    ("version", "flag"),
    [("../../../../evilver", None), ("lora-abc-v1/../../x", None), ("ok-v1", "../../evil")],
)
def test_a_name_that_is_not_one_coevo_gives_is_refused_never_used_as_a_path(
    tmp_path, tiny_model, capsys, version, flag
) -> None:
    """A journal naming version '../../../../evilver' (announcement removed), or --prefix ../../evil: exit 2, nothing loaded or written out of the folder."""
    run = make_run(tmp_path, 1)
    _batch(run)
    lora = run / "trainer" / "lora"
    lora.mkdir(parents=True)
    if flag is None:
        entry = {"batch_id": "batch-000000", "version": version, "step": 1}
        (lora / "journal.jsonl").write_text(json.dumps(entry) + "\n")
    args = _train(run, tiny_model, *(["--prefix", flag] if flag else []))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert ("is not a name coevo gives" in err) if flag is None else ("--prefix" in err), err
    assert not (tmp_path.parent / "evilver").exists() and not (tmp_path / "evil").exists()
    assert not (run / "trainer" / "versions").exists()


def _adapter(tmp_path: Path, model_dir: Path) -> Path:
    """A real adapter folder (what coevo sft writes), to spoil."""
    settings = TrainSettings(model=str(model_dir), lora_rank=4)
    model = with_adapter(load_model(str(model_dir), torch.device("cpu")), settings, None)
    save_version(model, Stepper(model, settings, None).optimizer, tmp_path / "v", {})
    return tmp_path / "v" / "adapter"


def _spoil_length(data: bytes) -> bytes:
    return (1 << 62).to_bytes(8, "little") + data[8:]


def _spoil_offsets(data: bytes) -> bytes:
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    name = next(k for k in header if k != "__metadata__")
    header[name]["data_offsets"] = [0, 1 << 40]
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + data[8 + n :]


@pytest.mark.parametrize("spoil", [_spoil_length, _spoil_offsets], ids=["2^62-header", "offsets"])
def test_an_adapter_file_that_is_not_safetensors_is_exit_2_with_a_message(
    tmp_path, tiny_model, capsys, spoil
) -> None:
    """--adapter whose adapter_model.safetensors states a 2⁶²-byte header, or a tensor past its end: exit 2 naming the file, no traceback."""
    adapter = _adapter(tmp_path, tiny_model)
    weights = adapter / "adapter_model.safetensors"
    weights.write_bytes(spoil(weights.read_bytes()))
    run = make_run(tmp_path, 1)
    _batch(run)
    assert main(_train(run, tiny_model, "--adapter", str(adapter))) == 2
    err = capsys.readouterr().err
    assert f"{weights} is not a safetensors file" in err and "Traceback" not in err, err


def test_a_version_folder_is_replaced_with_no_moment_missing(tmp_path, tiny_model, monkeypatch):
    """A version folder left by a step killed before its journal entry is replaced: at every rename and delete, the folder is there."""
    settings = TrainSettings(model=str(tiny_model), lora_rank=4)
    model = with_adapter(load_model(str(tiny_model), torch.device("cpu")), settings, None)
    optimizer = Stepper(model, settings, None).optimizer
    folder = tmp_path / "lora-v1"
    save_version(model, optimizer, folder, {"n": 1})
    seen: list[bool] = []

    def watched(call):
        def wrapper(*args, **kwargs):
            seen.append(folder.is_dir())
            out = call(*args, **kwargs)
            seen.append(folder.is_dir())
            return out

        return wrapper

    monkeypatch.setattr(policy.os, "rename", watched(os.rename))
    monkeypatch.setattr(policy.os, "replace", watched(os.replace))
    monkeypatch.setattr(policy.shutil, "rmtree", watched(shutil.rmtree))
    save_version(model, optimizer, folder, {"n": 2})
    assert seen and all(seen), seen
    assert json.loads((folder / "state.json").read_text()) == {"n": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lora-v1"]


def test_a_batch_file_that_is_refused_is_journaled_and_the_next_one_trains(
    tmp_path, tiny_model, capsys
) -> None:
    """batch-000000 is not Parquet (or too big once decoded): journaled as refused, no step, the run's end line counts it; batch-000001 trains; exit 0."""
    run = make_run(tmp_path, 2)
    batches = run / "trainer" / "batches"
    batches.mkdir(parents=True)
    (batches / "batch-000000.parquet").write_bytes(b"PAR1 not a batch PAR1")
    logprobs = [None if m == 0 else -2.0 for m in MASK]
    offer(
        run,
        1,
        [
            batch_row(
                1, n, reward=float(n), advantage=n - 0.5, ids=IDS, mask=MASK, logprobs=logprobs
            )
            for n in range(2)
        ],
    )
    assert main(_train(run, tiny_model)) == 0
    out = capsys.readouterr().out
    journal = [json.loads(line) for line in (run / "trainer" / "lora" / "journal.jsonl").open()]
    assert [e["batch_id"] for e in journal] == ["batch-000000", "batch-000001"]
    assert "batch-000000" in journal[0]["refused"] and journal[0]["steps"] == []
    assert "refused" not in journal[1] and journal[1]["sequences"] == 2
    assert "2 batches trained (1 refused: see the journal)" in out
