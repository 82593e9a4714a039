"""coevo sft: reference solutions replayed through the Solver's dialogue code, what is held out, and the warm start's training, checkpoint and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.arena.errors import ArenaError
from coevo.arena.records import write_records
from coevo.run.train.policy import load_model, token_logprobs, trainable, with_adapter
from coevo.run.train.settings import SFTSettings
from coevo.run.train.sft import WarmStart, split
from coevo.run.train.warmstart import (
    DialogueSettings,
    Example,
    WarmStartData,
    call_text,
    database_id,
)

from tests import real_model

SOLVER = DialogueSettings(tool_protocol="text", tool_choice="required", max_steps=6, max_tokens=96)


@pytest.fixture(scope="module")
def tokenizer():
    """SmolLM2's tokenizer and chat template (the real model's folder, made on first use)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(real_model.model()))


def tasks(seed: int, n: int = 4, subset: int | None = 0) -> list:
    synth = ProceduralSynthesizer(["retail"], tool_subset=subset, families=["question", "action"])
    return synth.propose(ProposalRequest(n=n, seed=seed, level=1))


def test_a_replayed_reference_earns_1_and_only_its_calls_are_trained_on(
    tmp_path, tokenizer
) -> None:
    """Each reference solution, played through the Solver's loop: reward 1, and the masked tokens are exactly its calls as the Solver writes them."""
    made = tasks(1)
    write_records(tmp_path / "t.jsonl", made)
    data = WarmStartData.build([str(tmp_path / "t.jsonl")], tokenizer, SOLVER)
    assert len(data.examples) == len(made) and not data.failed
    by_id = {str(t.task_id): t for t in made}
    for example in data.examples:
        spans, current = [], []
        for token, masked in zip(example.token_ids, example.mask, strict=True):
            if masked:
                current.append(token)
            elif current:
                spans.append(current)
                current = []
        if current:
            spans.append(current)
        written = [tokenizer.decode(span) for span in spans]
        task = by_id[example.task_id]
        assert written == [call_text(c, "text", opened=True) for c in task.solution]
        results = tokenizer.decode(example.token_ids).count("<tool_response>\n")
        assert results == len(spans) - 1  # the world answered every call but submit


def test_eval_tasks_and_every_database_they_are_in_never_enter_the_data(
    tmp_path, tokenizer
) -> None:
    """A held-out file's task, and a training task in another narrowing of its world (same database, other tools): both left out, counted, said."""
    pool = tasks(3, n=6)
    held = tasks(
        3, n=1, subset=None
    )  # the same seed's world, with every tool: another world record
    assert held[0].world.world_id not in {t.world.world_id for t in pool}
    assert database_id(held[0].world) in {database_id(t.world) for t in pool}
    write_records(tmp_path / "pool.jsonl", pool)
    write_records(tmp_path / "held.jsonl", held)
    data = WarmStartData.build(
        [str(tmp_path / "pool.jsonl")], tokenizer, SOLVER, exclude=[str(tmp_path / "held.jsonl")]
    )
    assert data.examples == [] and data.held_out_tasks == len(pool)
    assert data.held_out.said and "held.jsonl" in data.held_out.said[0]


def _pattern(n: int, length: int = 24) -> list[Example]:
    """Sequences of the tiny model's vocabulary with a learnable pattern under the mask."""
    out = []
    for k in range(n):
        prompt = [(3 + k * 7 + i) % 60 + 2 for i in range(length // 2)]
        answer = [5, 9, 5, 9, 5, 9][: length // 4]
        ids = prompt + answer
        mask = [0] * len(prompt) + [1] * len(answer)
        out.append(Example(ids, mask, f"t{k}", f"db{k % 12}", "reference"))
    return out


def _settings(model: Path, **given) -> SFTSettings:
    chosen = {
        "lora_rank": 4,
        "learning_rate": 5e-2,
        "dtype": "float32",
        "epochs": 2,
        "batch_sequences": 4,
        "warmup_steps": 0,
        **given,
    }
    return SFTSettings(model=str(model), **chosen)


def test_the_warm_start_lowers_the_held_out_nll_and_writes_an_adapter(tmp_path, tiny_model) -> None:
    """Two epochs on a pattern: the held-out sequences' NLL falls, sft.json says so, adapter/ is a PEFT folder of safetensors."""
    data = WarmStartData(examples=_pattern(24))
    said: list[str] = []
    report = WarmStart(
        data, _settings(tiny_model), str(tmp_path / "out"), validation_share=0.25, say=said.append
    ).run()
    assert report["validation_nll_after"] < report["validation_nll_before"]
    assert report["validation"]["by"] == "world" and report["validation"]["sequences"] > 0
    assert [e["epoch"] for e in report["epochs"]] == [0, 1]
    written = json.loads((tmp_path / "out" / "sft.json").read_text())
    assert written["steps"] == report["steps"] > 0
    files = {p.name for p in (tmp_path / "out" / "adapter").iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= files
    model = with_adapter(
        load_model(str(tiny_model), torch.device("cpu")),
        _settings(tiny_model),
        str(tmp_path / "out" / "adapter"),
    )
    example = data.examples[0]
    base = load_model(str(tiny_model), torch.device("cpu"))
    after = float(token_logprobs(model, example.token_ids, example.positions).mean())
    before = float(token_logprobs(base, example.token_ids, example.positions).mean())
    assert after > before + 0.1  # the adapter read back is the one that learnt


def test_a_warm_start_stopped_goes_on_from_its_checkpoint_to_the_same_adapter(
    tmp_path, tiny_model
) -> None:
    """Killed after step 3 (a checkpoint every step), started again: it says where it goes on from and ends with the weights of an uninterrupted one."""
    data = WarmStartData(examples=_pattern(16))
    straight = WarmStart(data, _settings(tiny_model), str(tmp_path / "a"), checkpoint_steps=1)
    straight.run()

    class Stopped(Exception):
        pass

    def stop_at_step_3(line: str) -> None:
        if line.strip().startswith("step 3/"):
            raise Stopped

    interrupted = WarmStart(
        data, _settings(tiny_model), str(tmp_path / "b"), checkpoint_steps=1, say=stop_at_step_3
    )
    with pytest.raises(Stopped):
        interrupted.run()
    said: list[str] = []
    WarmStart(
        data, _settings(tiny_model), str(tmp_path / "b"), checkpoint_steps=1, say=said.append
    ).run()
    assert any(line.startswith("going on from step 3") for line in said), said
    settings = _settings(tiny_model)
    one = with_adapter(
        load_model(str(tiny_model), torch.device("cpu")), settings, str(tmp_path / "a" / "adapter")
    )
    two = with_adapter(
        load_model(str(tiny_model), torch.device("cpu")), settings, str(tmp_path / "b" / "adapter")
    )
    for p, q in zip(trainable(one).values(), trainable(two).values(), strict=True):
        assert torch.allclose(p, q, atol=1e-6)


def test_an_output_folder_of_other_data_is_refused_not_overwritten(tmp_path, tiny_model) -> None:
    """OUT holding another warm start's checkpoint (other data): refused, naming the folder."""
    WarmStart(WarmStartData(examples=_pattern(8)), _settings(tiny_model), str(tmp_path)).run()
    other = WarmStartData(examples=_pattern(9))
    with pytest.raises(ArenaError, match="not empty"):
        WarmStart(other, _settings(tiny_model), str(tmp_path)).run()


def test_the_validation_split_is_by_database_when_there_are_enough_and_by_task_otherwise() -> None:
    """Ten or more databases: whole databases held out; fewer: tasks; the same split every time."""
    many = _pattern(40)
    train, validation, by = split(many, 0.25)
    assert by == "world" and validation
    assert not {e.database for e in train} & {e.database for e in validation}
    few = [Example(e.token_ids, e.mask, e.task_id, "db0", e.source) for e in many]
    assert split(few, 0.25)[2] == "task"
    assert split(many, 0.25) == (train, validation, by)
