"""coevo train on a tiny random model: its adapter, its checkpoints (tensors and JSON), its steps, what it refuses, and resuming."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from coevo.arena.errors import ArenaError
from coevo.run.handoff.consumer import ConsumerSettings
from coevo.run.train.learner import LoRATrainer
from coevo.run.train.policy import (
    Scorer,
    load_model,
    micro_batches,
    save_version,
    token_logprobs,
    trainable,
    with_adapter,
)
from coevo.run.train.settings import TrainSettings
from coevo.run.train.steps import Stepper
from pydantic import ValidationError

from tests.train.conftest import batch_row, make_run, offer

IDS = [3, 9, 4, 12, 7, 21, 5, 30, 8, 2]
OTHER = [3, 9, 4, 40, 41, 42, 5, 43, 44, 45]
MASK = [0, 0, 0, 1, 1, 1, 0, 1, 1, 1]
SCORED = [i for i, m in enumerate(MASK) if m]


def recorded(model_dir: Path, ids: list[int] = IDS) -> list[float | None]:
    """The base model's log-probs of ``ids`` where the mask is 1 (what a server would have recorded)."""
    model = load_model(str(model_dir), torch.device("cpu"))
    scores = token_logprobs(model, ids, SCORED).tolist()
    out: list[float | None] = [None] * len(ids)
    for position, score in zip(SCORED, scores, strict=True):
        out[position] = score
    return out


def trainer(run: Path, model: Path, **settings) -> LoRATrainer:
    said: list[str] = []
    chosen = {"lora_rank": 4, "learning_rate": 5e-2, "dtype": "float32", **settings}
    made = LoRATrainer(
        ConsumerSettings(run_dir=str(run), poll=0.01, wait=30),
        TrainSettings(model=str(model), **chosen),
        say=said.append,
    )
    made.said = said  # type: ignore[attr-defined]
    return made


def two_tasks(model: Path, gen: int = 0) -> list[dict]:
    """One rollout paid (task t0) and one not (task t1), each with the base's recorded log-probs."""
    return [
        batch_row(
            gen,
            0,
            reward=1.0,
            advantage=0.5,
            ids=IDS,
            mask=MASK,
            logprobs=recorded(model, IDS),
            task="t0",
        ),
        batch_row(
            gen,
            1,
            reward=0.0,
            advantage=-0.5,
            ids=OTHER,
            mask=MASK,
            logprobs=recorded(model, OTHER),
            task="t1",
        ),
    ]


def test_scores_kept_only_where_asked_equal_the_full_forward_pass(tiny_model) -> None:
    """The scorer's log-probs at the scored positions are the log-softmax of the whole forward pass there."""
    model = load_model(str(tiny_model), torch.device("cpu"))
    kept = token_logprobs(model, IDS, SCORED)
    with torch.no_grad():
        full = torch.log_softmax(model(input_ids=torch.tensor([IDS])).logits[0].float(), -1)
    expected = torch.stack([full[p - 1, IDS[p]] for p in SCORED])
    assert kept.dtype == torch.float32 and torch.allclose(kept, expected, atol=1e-5)


def test_sequences_batched_together_score_as_each_alone(tiny_model) -> None:
    """Padding into one forward pass changes nothing: three sequences of different lengths, alone and batched."""
    model = load_model(str(tiny_model), torch.device("cpu"))
    scorer = Scorer(model)
    sequences = [IDS, IDS[:6], OTHER[:8]]
    positions = [[3, 4, 9], [3, 5], [3, 4, 7]]
    together = scorer.score(sequences, positions, [1.0, 0.7, 1.0], grad=False).logp
    alone = torch.cat(
        [
            scorer.score([s], [p], [t], grad=False).logp
            for s, p, t in zip(sequences, positions, [1.0, 0.7, 1.0], strict=True)
        ]
    )
    assert torch.allclose(together, alone, atol=1e-5)
    assert micro_batches([10, 6, 8], 15) == [[0], [2], [1]]
    assert micro_batches([10, 6, 8], 16) == [[0], [2, 1]]
    assert micro_batches([10, 6, 8], 30) == [[0, 2, 1]]


def test_a_bfloat16_base_still_scores_in_float32_close_to_the_float32_model(tiny_model) -> None:
    """The frozen base in bfloat16: the head and the log-probs are float32, within bf16's rounding of the fp32 ones."""
    fp32 = token_logprobs(load_model(str(tiny_model), torch.device("cpu")), IDS, SCORED)
    bf16 = token_logprobs(
        load_model(str(tiny_model), torch.device("cpu"), torch.bfloat16), IDS, SCORED
    )
    assert bf16.dtype == torch.float32
    assert float((bf16 - fp32).abs().max()) < 0.05


def test_dropout_is_off_in_the_trained_model(tmp_path) -> None:
    """A model configured with dropout scores the same tokens alike twice in training mode (TRL's disable_dropout)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        attention_dropout=0.5,
    )
    LlamaForCausalLM(config).save_pretrained(str(tmp_path), safe_serialization=True)
    settings = TrainSettings(model=str(tmp_path), lora_rank=4, lora_dropout=0.0)
    model = with_adapter(load_model(str(tmp_path), torch.device("cpu")), settings, None)
    assert model.training
    first = token_logprobs(model, IDS, SCORED)
    second = token_logprobs(model, IDS, SCORED)
    assert torch.equal(first, second)


def test_a_new_adapter_changes_nothing_and_is_seeded(tiny_model) -> None:
    """B starts at 0: the adapted model's log-probs are the base's; the same seed gives the same A matrices."""
    base = token_logprobs(load_model(str(tiny_model), torch.device("cpu")), IDS, SCORED)
    settings = TrainSettings(model=str(tiny_model), lora_rank=4, seed=3)
    first = with_adapter(load_model(str(tiny_model), torch.device("cpu")), settings, None)
    second = with_adapter(load_model(str(tiny_model), torch.device("cpu")), settings, None)
    assert torch.allclose(token_logprobs(first, IDS, SCORED), base, atol=1e-6)
    for a, b in zip(trainable(first).values(), trainable(second).values(), strict=True):
        assert torch.equal(a, b)


def test_a_step_raises_what_paid_and_lowers_what_did_not_and_announces_the_adapter(
    tmp_path, tiny_model
) -> None:
    """One batch, A > 0 on one task and A < 0 on another: the step moves each its way; the version is a PEFT folder of tensors and JSON."""
    run = make_run(tmp_path, 1)
    rows = two_tasks(tiny_model)
    offer(run, 0, rows)
    made = trainer(run, tiny_model)
    assert made.serve() == 1
    (entry,) = made.journal()
    assert entry["sequences"] == 2 and entry["adapter_change"] > 0 and entry["lora_b_norm"] > 0
    assert entry["mean_abs_log_ratio"] < 1e-4  # fresh data: the trainer agrees with the "server"
    assert math.isclose(entry["importance_weight_mean"], 1.0, abs_tol=1e-3)
    assert entry["informative_groups"] == 2 and entry["informative_share"] == 1.0
    assert entry["entropy"] > 0 and len(entry["steps"]) == 1 and entry["steps"][0]["taken"]
    with torch.no_grad():
        after = token_logprobs(made.model, IDS, SCORED)
        lowered = token_logprobs(made.model, OTHER, SCORED)
    before = torch.tensor([rows[0]["logprobs"][p] for p in SCORED])
    assert float(after.sum()) > float(before.sum())
    base_other = torch.tensor([rows[1]["logprobs"][p] for p in SCORED])
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
    assert all(name.endswith((".json", ".safetensors", ".md")) for name in files), files


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("advantage", float("nan")),
        ("logprob", float("-inf")),
        ("logprob", float("nan")),
        ("logprob", -9999.0),
        ("token", 10_000),
        ("token", -1),
    ],
)
def test_a_row_with_a_bad_number_is_left_out_counted_and_the_adapter_stays_finite(
    tmp_path, tiny_model, field, bad
) -> None:
    """NaN advantages, -inf/NaN/-9999 log-probs, token ids outside the vocabulary: the row is counted and left out; the rest trains; the version is finite."""
    run = make_run(tmp_path, 1)
    rows = two_tasks(tiny_model)
    spoilt = dict(rows[1])
    if field == "advantage":
        spoilt["advantage"] = bad
    elif field == "logprob":
        spoilt["logprobs"] = [*spoilt["logprobs"][:-1], bad]
    else:
        spoilt["token_ids"] = [*spoilt["token_ids"][:-1], bad]
    offer(run, 0, [rows[0], spoilt])
    made = trainer(run, tiny_model)
    assert made.serve() == 1
    (entry,) = made.journal()
    reason = {"advantage": "not_finite", "logprob": "not_finite", "token": "malformed"}[field]
    assert entry["sequences"] == 1 and entry["skipped"][reason] == 1, entry["skipped"]
    assert entry["adapter_change"] > 0
    for parameter in trainable(made.model).values():
        assert bool(torch.isfinite(parameter).all())


def test_a_batch_with_nothing_usable_is_journaled_and_announced_unchanged(
    tmp_path, tiny_model
) -> None:
    """Every row bad: no step, the adapter as it was (its B still 0), the batch journaled with its counts and announced."""
    run = make_run(tmp_path, 1)
    rows = [dict(r, advantage=float("nan")) for r in two_tasks(tiny_model)]
    offer(run, 0, rows)
    made = trainer(run, tiny_model)
    assert made.serve() == 1
    (entry,) = made.journal()
    assert entry["sequences"] == 0 and entry["skipped"]["not_finite"] == 2
    assert entry["lora_b_norm"] == 0.0 and entry["steps"] == []


def test_a_step_whose_loss_is_not_finite_is_skipped_and_the_weights_kept(tiny_model) -> None:
    """The guard: a NaN loss (or gradient) takes no optimizer step; the next finite one does."""
    settings = TrainSettings(model=str(tiny_model), lora_rank=4, learning_rate=1e-2)
    model = with_adapter(load_model(str(tiny_model), torch.device("cpu")), settings, None)
    stepper = Stepper(model, settings, total=None)
    before = [p.detach().clone() for p in trainable(model).values()]
    stepper.begin()
    logp = token_logprobs(model, IDS, SCORED, grad=True)
    assert not stepper.backward(logp.sum() * float("nan"))
    report = stepper.finish()
    assert not report.taken and "nan" in (report.why or "") and stepper.done == 0
    for p, q in zip(trainable(model).values(), before, strict=True):
        assert torch.equal(p, q)
    stepper.begin()
    assert stepper.backward(-token_logprobs(model, IDS, SCORED, grad=True).sum())
    assert stepper.finish().taken and stepper.done == 1


def test_a_version_whose_weights_are_not_finite_is_never_written(tmp_path, tiny_model) -> None:
    """save_version refuses an adapter holding NaN: nothing is written (so nothing is announced)."""
    settings = TrainSettings(model=str(tiny_model), lora_rank=4)
    model = with_adapter(load_model(str(tiny_model), torch.device("cpu")), settings, None)
    next(iter(trainable(model).values())).data[0, 0] = float("nan")
    optimizer = torch.optim.AdamW(list(trainable(model).values()))
    with pytest.raises(ArenaError, match="not finite"):
        save_version(model, optimizer, tmp_path / "v1", {})
    assert not (tmp_path / "v1").exists()


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_a_setting_that_is_not_finite_is_refused(tiny_model, value) -> None:
    """--learning-rate inf (or NaN, or an infinite clip) is refused before anything loads."""
    with pytest.raises(ValidationError):
        TrainSettings(model=str(tiny_model), learning_rate=value)
    with pytest.raises(ValidationError):
        TrainSettings(model=str(tiny_model), clip_high=value)


def test_the_kl_reference_is_the_adapter_the_run_started_from(tmp_path, tiny_model) -> None:
    """Started from a warm-start adapter with kl > 0: the first step's KL is 0 (the reference is that adapter, not the base model)."""
    settings = TrainSettings(model=str(tiny_model), lora_rank=4, dtype="float32")
    warm = with_adapter(load_model(str(tiny_model), torch.device("cpu")), settings, None)
    for name, parameter in trainable(warm).items():
        if "lora_B" in name:
            torch.nn.init.normal_(parameter, std=0.5)  # a warm start far from the base
    warm.save_pretrained(str(tmp_path / "warm"))
    run = make_run(tmp_path / "r", 1)
    offer(run, 0, two_tasks(tiny_model))
    made = trainer(run, tiny_model, adapter=str(tmp_path / "warm"), kl=0.1)
    assert made.serve() == 1
    (entry,) = made.journal()
    assert entry["sequences"] == 2 and entry["kl"] < 1e-6, entry["kl"]
    assert (
        entry["mean_abs_log_ratio"] > 0.01
    )  # the rows were played by the base: the warm start differs
    saved = Path(made.lora_path(entry))
    assert not (saved / "reference").exists()  # only the trained adapter is saved


def test_a_turn_cut_at_its_output_limit_is_masked_out_and_counted(tmp_path, tiny_model) -> None:
    """finish_reasons [length, stop]: the first turn's tokens leave the loss (overlong masking), the second's stay; off, both train."""
    row = two_tasks(tiny_model)[0]
    row = {
        **row,
        "finish_reasons": ["length", "stop"],
        "turn_completion_ids": [IDS[3:6], IDS[7:10]],
    }
    from coevo.run.train.sequences import sequences_of

    (sequence,), skipped = sequences_of([row])
    assert sequence.positions == [7, 8, 9] and skipped.cut_turns == 1
    (whole,), _ = sequences_of([row], mask_truncated=False)
    assert whole.positions == SCORED


def test_mini_batches_take_a_step_each_and_clip_against_the_policy_before_the_batch(
    tmp_path, tiny_model
) -> None:
    """steps_per_batch 2, epochs 2: four steps; after the first, the ratio to the old policy moves and the clip can hold tokens."""
    run = make_run(tmp_path, 1)
    offer(run, 0, two_tasks(tiny_model))
    made = trainer(run, tiny_model, steps_per_batch=2, epochs=2, learning_rate=0.3)
    assert made.serve() == 1
    (entry,) = made.journal()
    assert len(entry["steps"]) == 4 and all(s["sequences"] == 1 for s in entry["steps"])
    assert entry["steps"][0]["clipped_fraction"] == 0.0  # the first step: ratio 1
    assert any(s["clipped_fraction"] > 0 for s in entry["steps"][1:])
    assert entry["optimizer_steps"] == 4


def test_the_learning_rate_warms_up_and_decays_over_the_run(tmp_path, tiny_model) -> None:
    """warmup_steps 2, cosine over the run's 4 steps (2 generations × 2 mini-batches): rising, then falling to near 0."""
    run = make_run(tmp_path, 2)
    offer(run, 0, two_tasks(tiny_model, 0))
    offer(run, 1, two_tasks(tiny_model, 1))
    made = trainer(
        run, tiny_model, steps_per_batch=2, warmup_steps=2, lr_schedule="cosine", learning_rate=0.1
    )
    assert made.serve() == 2
    rates = [s["lr"] for e in made.journal() for s in e["steps"]]
    assert rates[0] < rates[1] < 0.1 and rates[2] == pytest.approx(0.1) and rates[3] < 0.06


def test_a_trainer_started_again_goes_on_from_its_checkpoint_as_if_never_stopped(
    tmp_path, tiny_model
) -> None:
    """Two batches in one go, or one, a new trainer (a restart), then the other: the same weights, each batch trained once."""
    straight = make_run(tmp_path / "straight", 2)
    resumed = make_run(tmp_path / "resumed", 2)
    for run in (straight, resumed):
        offer(run, 0, two_tasks(tiny_model, 0))
        offer(run, 1, two_tasks(tiny_model, 1))
    one = trainer(straight, tiny_model, warmup_steps=3)
    assert one.serve() == 2
    first = trainer(resumed, tiny_model, warmup_steps=3)
    first.consumer = ConsumerSettings(run_dir=str(resumed), poll=0.01, wait=30, batches=1)
    assert first.serve() == 1
    second = trainer(resumed, tiny_model, warmup_steps=3)
    assert second.serve() == 1
    assert any("resuming from" in line for line in second.said)  # type: ignore[attr-defined]
    assert [e["batch_id"] for e in second.journal()] == ["batch-000000", "batch-000001"]
    assert second.journal()[1]["steps"][0]["lr"] == one.journal()[1]["steps"][0]["lr"]
    for a, b in zip(trainable(one.model).values(), trainable(second.model).values(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_old_version_folders_beyond_keep_versions_are_deleted(tmp_path, tiny_model) -> None:
    """keep_versions 1 over two batches: only the newest version's folder is left (it is the checkpoint)."""
    run = make_run(tmp_path, 2)
    offer(run, 0, two_tasks(tiny_model, 0))
    offer(run, 1, two_tasks(tiny_model, 1))
    made = trainer(run, tiny_model, keep_versions=1)
    assert made.serve() == 2
    left = sorted(p.name for p in made.versions.iterdir())
    assert left == [made.journal()[-1]["version"]]


def test_an_adapter_saved_as_a_pickle_is_never_read(tmp_path, tiny_model) -> None:
    """--adapter must hold adapter_model.safetensors: a .bin (a pickle) is refused, naming the folder."""
    folder = tmp_path / "adapter"
    folder.mkdir()
    (folder / "adapter_config.json").write_text("{}")
    (folder / "adapter_model.bin").write_bytes(b"not read")
    settings = TrainSettings(model=str(tiny_model))
    with pytest.raises(ArenaError, match="pickle"):
        with_adapter(load_model(str(tiny_model), torch.device("cpu")), settings, str(folder))
