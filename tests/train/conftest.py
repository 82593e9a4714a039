"""A tiny random causal LM (two layers, 32 wide) in a folder, and batches of rows for it."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
import torch
from coevo.run.handoff.transports import BATCH_SCHEMA, FolderTransport

VOCAB = 64


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A Llama of random weights, saved as safetensors (what ``--model`` names)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    where = tmp_path_factory.mktemp("tiny-model")
    LlamaForCausalLM(config).save_pretrained(str(where), safe_serialization=True)
    return where


def batch_row(
    gen: int,
    n: int,
    *,
    reward: float,
    advantage: float,
    ids: list[int],
    mask: list[int],
    logprobs: list[float | None],
    version: str = "base",
    task: str = "t0",
) -> dict:
    """One row of a training batch (docs/trainer.md), interleaved."""
    return {
        "batch_id": f"batch-{gen:06d}",
        "gen": gen,
        "role": "solver",
        "episode_id": f"ep-{gen}-{n}",
        "task_id": task,
        "level": 1,
        "group_size": 2,
        "reward": reward,
        "advantage": advantage,
        "policy_version": version,
        "model": version,
        "prompt_messages": "[]",
        "completion_messages": "[]",
        "tools": "[]",
        "sampling": json.dumps({"temperature": 1.0}),
        "layout": "interleaved",
        "token_ids": ids,
        "logprobs": logprobs,
        "loss_mask": mask,
        "turn_prompt_ids": None,
        "turn_completion_ids": None,
        "turn_logprobs": None,
    }


def make_run(root: Path, generations: int) -> Path:
    """A run directory as a trainer sees it: experiment.json with a [trainer] table, and committed manifests."""
    run = root / "run"
    (run / "log" / "_manifests").mkdir(parents=True)
    (run / "experiment.json").write_text(
        json.dumps({"run": {"generations": generations}, "trainer": {"transport": "folder"}})
    )
    for gen in range(generations):
        (run / "log" / "_manifests" / f"gen-{gen:06d}.json").write_text("{}")
    return run


def offer(run: Path, gen: int, rows: list[dict]) -> None:
    """Hand a batch out as coevo does."""
    FolderTransport(str(run / "trainer")).offer(
        f"batch-{gen:06d}", pa.Table.from_pylist(rows, schema=BATCH_SCHEMA)
    )
