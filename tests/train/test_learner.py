"""coevo train on a tiny random model: its adapter, its checkpoints (tensors and JSON), its steps, and resuming."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from coevo.run.consumer import ConsumerSettings
from coevo.run.train.learner import LoRATrainer
from coevo.run.train.policy import (
    load_model,
    token_logprobs,
    trainable,
    with_adapter,
)
from coevo.run.train.settings import TrainSettings

from tests.train.conftest import batch_row, make_run, offer

IDS = [3, 9, 4, 12, 7, 21, 5, 30, 8, 2]
MASK = [0, 0, 0, 1, 1, 1, 0, 1, 1, 1]
PROMPT_ONLY = [i for i, m in enumerate(MASK) if m]


def behaviour(model_dir: Path) -> list[float | None]:
    """The base model's log-probs of IDS where the mask is 1 (what a server would have recorded)."""
    model = load_model(str(model_dir), torch.device("cpu"))
    with torch.no_grad():
        scores = token_logprobs(model, IDS, PROMPT_ONLY).tolist()
    out: list[float | None] = [None] * len(IDS)
    for position, score in zip(PROMPT_ONLY, scores, strict=True):
        out[position] = score
    return out


def trainer(run: Path, model: Path, **settings) -> LoRATrainer:
    said: list[str] = []
    made = LoRATrainer(
        ConsumerSettings(run_dir=str(run), poll=0.01, wait=30),
        TrainSettings(model=str(model), lora_rank=4, learning_rate=5e-2, **settings),
        say=said.append,
    )
    made.said = said  # type: ignore[attr-defined]
    return made


def test_logits_kept_only_where_asked_equal_the_full_forward_pass(tiny_model) -> None:
    """token_logprobs with logits_to_keep gives the log-softmax of the whole forward pass at those positions."""
    model = load_model(str(tiny_model), torch.device("cpu"))
    with torch.no_grad():
        kept = token_logprobs(model, IDS, PROMPT_ONLY)
        full = torch.log_softmax(model(input_ids=torch.tensor([IDS])).logits[0].float(), -1)
    expected = torch.stack([full[p - 1, IDS[p]] for p in PROMPT_ONLY])
    assert torch.allclose(kept, expected, atol=1e-5)


def test_a_new_adapter_changes_nothing_and_is_seeded(tiny_model) -> None:
    """B starts at 0: the adapted model's log-probs are the base's; the same seed gives the same A matrices."""
    base = token_logprobs(load_model(str(tiny_model), torch.device("cpu")), IDS, PROMPT_ONLY)
    settings = TrainSettings(model=str(tiny_model), lora_rank=4, seed=3)
    first = with_adapter(load_model(str(tiny_model), torch.device("cpu")), settings, None)
    second = with_adapter(load_model(str(tiny_model), torch.device("cpu")), settings, None)
    assert torch.allclose(token_logprobs(first, IDS, PROMPT_ONLY), base, atol=1e-6)
    for a, b in zip(trainable(first).values(), trainable(second).values(), strict=True):
        assert torch.equal(a, b)


def test_a_step_raises_what_paid_and_lowers_what_did_not_and_announces_the_adapter(
    tmp_path, tiny_model
) -> None:
    """One batch, the same tokens once with A > 0 and once with A < 0 on two tasks: the step moves each its way; the version is a PEFT folder of tensors and JSON."""
    run = make_run(tmp_path, 1)
    scores = behaviour(tiny_model)
    other = [IDS[0], *IDS[1:][::-1]]
    offer(
        run,
        0,
        [
            batch_row(
                0, 0, reward=1.0, advantage=0.5, ids=IDS, mask=MASK, logprobs=scores, task="t0"
            ),
            batch_row(
                0,
                1,
                reward=0.0,
                advantage=-0.5,
                ids=other,
                mask=MASK,
                logprobs=[None] * 10,
                task="t1",
            ),
        ],
    )
    made = trainer(run, tiny_model)
    assert made.serve() == 1
    (entry,) = made.journal()
    assert entry["sequences"] == 2 and entry["adapter_change"] > 0 and entry["lora_b_norm"] > 0
    assert entry["mean_abs_log_ratio"] < 1e-5  # fresh data: the ratio is 1
    assert made.model is not None
    with torch.no_grad():
        after = token_logprobs(made.model, IDS, PROMPT_ONLY)
        lowered = token_logprobs(made.model, other, PROMPT_ONLY)
    before = torch.tensor([scores[p] for p in PROMPT_ONLY])
    assert float(after.sum()) > float(before.sum())
    with torch.no_grad(), made.model.disable_adapter():
        base_other = token_logprobs(made.model, other, PROMPT_ONLY)
    assert float(lowered.sum()) < float(base_other.sum())
    folder = run / "trainer" / "lora" / "versions" / entry["version"]
    announced = json.loads((run / "trainer" / "versions" / "batch-000000.json").read_text())
    assert announced["lora_path"] == str(folder / "adapter")
    files = {p.name for p in folder.rglob("*") if p.is_file()}
    assert {
        "adapter_config.json",
        "adapter_model.safetensors",
        "optimizer.safetensors",
        "state.json",
    } <= files
    assert all(name.endswith((".json", ".safetensors", ".md")) for name in files), (
        files
    )  # no pickle


def test_a_trainer_started_again_goes_on_from_its_checkpoint_as_if_never_stopped(
    tmp_path, tiny_model
) -> None:
    """Two batches in one go, or one, a new trainer (a restart), then the other: the same weights, each batch trained once."""
    rows = [
        batch_row(
            g, n, reward=r, advantage=a, ids=IDS, mask=MASK, logprobs=[None] * 10, task=f"t{n}"
        )
        for g in range(2)
        for n, (r, a) in enumerate(((1.0, 0.5), (0.0, -0.5)))
    ]
    straight = make_run(tmp_path / "straight", 2)
    resumed = make_run(tmp_path / "resumed", 2)
    for run in (straight, resumed):
        offer(run, 0, rows[:2])
        offer(run, 1, rows[2:])
    one = trainer(straight, tiny_model)
    assert one.serve() == 2
    first = trainer(
        resumed,
        tiny_model,
    )
    first.consumer = ConsumerSettings(run_dir=str(resumed), poll=0.01, wait=30, batches=1)
    assert first.serve() == 1
    second = trainer(resumed, tiny_model)
    assert second.serve() == 1
    assert any("resuming from" in line for line in second.said)  # type: ignore[attr-defined]
    assert [e["batch_id"] for e in second.journal()] == ["batch-000000", "batch-000001"]
    for a, b in zip(trainable(one.model).values(), trainable(second.model).values(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_an_adapter_saved_as_a_pickle_is_never_read(tmp_path, tiny_model) -> None:
    """--adapter must hold adapter_model.safetensors: a .bin (a pickle) is refused, naming the folder."""
    from coevo.arena.errors import ArenaError

    folder = tmp_path / "adapter"
    folder.mkdir()
    (folder / "adapter_config.json").write_text("{}")
    (folder / "adapter_model.bin").write_bytes(b"not read")
    settings = TrainSettings(model=str(tiny_model))
    with pytest.raises(ArenaError, match="pickle"):
        with_adapter(load_model(str(tiny_model), torch.device("cpu")), settings, str(folder))
