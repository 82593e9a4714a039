"""Every setting of ``coevo train`` and ``coevo sft``, with its default: one owner for the flags, the docs and the checks (no torch here).

:class:`AdapterSettings` is what both commands share (the model, the
adapter, the optimizer, how sequences are batched); :class:`TrainSettings`
adds the policy-gradient loss's, :class:`SFTSettings` the warm start's.
Every float must be finite: ``--learning-rate inf`` (or ``nan``, in a flag
or a ``--settings`` file) is refused before anything loads; and every whole
number has an upper bound, said in its description, far above what a real
run sets (``--steps-per-batch`` with 4,000 digits is refused by name, not
met as an overflow in the trainer).
"""

from __future__ import annotations

import math
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "MAX_STEPS",
    "MAX_TOKENS",
    "AdapterSettings",
    "SFTSettings",
    "TrainSettings",
    "learning_rate_at",
]

MAX_STEPS: Final = 10_000_000
"""The most optimizer steps a schedule or a warm-up may span (months of the fastest steps)."""

MAX_TOKENS: Final = 1 << 24
"""The most tokens a sequence or a forward pass may hold (16,777,216: beyond any model's context)."""


class AdapterSettings(BaseModel):
    """What ``coevo train`` and ``coevo sft`` share: the model, its LoRA adapter, the optimizer, the batching.

    Each field is a ``--flag`` of the same name (``_`` written ``-``) and a key
    of a ``--settings`` TOML file; ``docs/training.md`` says why each default
    is what it is.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    model: str = Field(description="the Hugging Face model folder: the weights the server serves")
    adapter: str | None = Field(
        default=None,
        description="a PEFT LoRA adapter of the model to start from (a warm start: coevo sft's "
        "output); default: a new one, which changes nothing until trained",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="where to train (auto: cuda when there is one)"
    )
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        default="auto",
        description="the frozen base model's precision (auto: bfloat16 where the device computes "
        "in it, else float32); the adapter, the optimizer and the scored log-probs stay float32",
    )
    lora_rank: int = Field(default=16, ge=1, le=512, description="the adapter's rank r")
    lora_alpha: float = Field(
        default=32.0, gt=0, le=1e6, description="LoRA's alpha (its scale is alpha / r)"
    )
    lora_dropout: float = Field(
        default=0.0, ge=0, lt=1, description="dropout on the adapter's input"
    )
    target_modules: str = Field(
        default="all-linear",
        description="the modules the adapter wraps: all-linear, or names joined by commas "
        "(q_proj,v_proj)",
    )
    learning_rate: float = Field(
        default=2e-5, gt=0, le=1.0, description="AdamW's peak learning rate"
    )
    weight_decay: float = Field(default=0.0, ge=0, le=1.0, description="AdamW's weight decay")
    warmup_steps: int = Field(
        default=0,
        ge=0,
        le=MAX_STEPS,
        description="optimizer steps over which the learning rate rises linearly from 0 to its "
        "peak (at most 10 million)",
    )
    lr_schedule: Literal["constant", "cosine", "linear"] = Field(
        default="constant",
        description="after the warm-up: constant, or decaying to 0 over schedule_steps (cosine, linear)",
    )
    schedule_steps: int | None = Field(
        default=None,
        ge=1,
        le=MAX_STEPS,
        description="the optimizer steps a decaying schedule spans (default: the run's "
        "generations × steps_per_batch × epochs; coevo sft: its own steps; at most 10 million)",
    )
    max_grad_norm: float = Field(
        default=1.0, gt=0, le=1e6, description="gradients are clipped to this norm"
    )
    micro_batch_tokens: int = Field(
        default=2048,
        ge=64,
        le=MAX_TOKENS,
        description="padded tokens per forward pass: sequences of like length are batched up to "
        "this (memory grows with it; at most 16,777,216)",
    )
    gradient_checkpointing: bool = Field(
        default=False,
        description="recompute activations in the backward pass (less memory, about a third "
        "more time)",
    )
    max_length: int = Field(
        default=8192,
        ge=16,
        le=MAX_TOKENS,
        description="sequences longer than this are left out (and counted); at most 16,777,216 "
        "tokens, beyond any model's context",
    )
    seed: int = Field(
        default=0,
        ge=-(1 << 63),
        le=(1 << 63) - 1,
        description="seeds the new adapter's weights and the order of sequences (a 64-bit "
        "integer, as torch takes one)",
    )


class TrainSettings(AdapterSettings):
    """How ``coevo train`` trains: the policy-gradient loss on the hand-off's batches (``docs/training.md``)."""

    clip: float = Field(
        default=0.2,
        gt=0,
        lt=1,
        description="the ratio's clip range below 1, against the trainer's own old policy: "
        "[1 - clip, ...]",
    )
    clip_high: float | None = Field(
        default=None,
        gt=0,
        le=10,
        description="the clip range above 1 (default: clip; DAPO uses 0.28)",
    )
    importance_cap: float = Field(
        default=2.0,
        ge=1.0,
        le=1e3,
        description="the truncated importance weight's cap: min(π_old / π_behaviour, cap) per "
        "token corrects for the server's and the trainer's arithmetic and for stale rollouts "
        "(TIS)",
    )
    kl: float = Field(
        default=0.0,
        ge=0,
        le=1e3,
        description="the coefficient of the KL penalty to the starting policy (the --adapter it "
        "started from, else the model; k3 estimator; 0: none, and no reference forward pass)",
    )
    steps_per_batch: int = Field(
        default=1,
        ge=1,
        le=10_000,
        description="optimizer steps on each batch, each over its own part of the batch "
        "(mini-batches; at most 10,000, more than a batch has sequences)",
    )
    epochs: int = Field(
        default=1,
        ge=1,
        le=1000,
        description="passes over the batch (more than one step per batch in all: the clip against "
        "the old policy matters; at most 1000)",
    )
    scale: Literal["none", "group"] = Field(
        default="none",
        description="advantages as the batch gives them, or divided by their group's std",
    )
    temperature: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description="the temperature the policy's log-probs are taken at (default: each "
        "rollout's own, from its sampling; vLLM records them at that temperature when "
        "served with --logprobs-mode processed_logprobs, else at 1)",
    )
    mask_truncated: bool = Field(
        default=True,
        description="leave out of the loss every turn cut at its max_tokens or the context limit "
        "(overlong masking, as DAPO and TRL's mask_truncated_completions); counted",
    )
    keep_versions: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="keep the newest this many version folders and delete older ones (default: "
        "keep all; the newest is always kept, it is the checkpoint; at most a million)",
    )
    format_reward: float = Field(
        default=0.0,
        ge=0,
        le=1e3,
        description="pay each rollout this times the share of its turns whose calls the world "
        "carried out, on top of its reward (a format reward, for a model that earns none yet)",
    )


class SFTSettings(AdapterSettings):
    """How ``coevo sft`` trains: cross-entropy on the assistant's tokens of the warm start's sequences."""

    learning_rate: float = Field(
        default=2e-4, gt=0, le=1.0, description="AdamW's peak learning rate"
    )
    warmup_steps: int = Field(
        default=5,
        ge=0,
        le=MAX_STEPS,
        description="optimizer steps over which the learning rate rises linearly from 0 to its "
        "peak (at most 10 million)",
    )
    lr_schedule: Literal["constant", "cosine", "linear"] = Field(
        default="cosine",
        description="after the warm-up: constant, or decaying to 0 over schedule_steps (cosine, linear)",
    )
    epochs: int = Field(default=2, ge=1, le=1000, description="passes over the sequences")
    batch_sequences: int = Field(
        default=16,
        ge=1,
        le=1_000_000,
        description="sequences per optimizer step (gradients accumulated; at most a million)",
    )


def learning_rate_at(settings: AdapterSettings, step: int, total: int | None) -> float:
    """The learning rate of optimizer step ``step`` (from 0): linear warm-up, then ``lr_schedule`` over ``total`` steps.

    Args:
        settings: the peak rate, the warm-up and the schedule.
        step: the optimizer steps taken before this one (over the whole run, resumes included).
        total: the steps a decaying schedule spans (``schedule_steps`` wins; None: no decay).
    """
    peak = settings.learning_rate
    if step < settings.warmup_steps:
        return peak * (step + 1) / (settings.warmup_steps + 1)
    span = settings.schedule_steps or total
    if settings.lr_schedule == "constant" or not span:
        return peak
    progress = min(1.0, (step - settings.warmup_steps) / max(1, span - settings.warmup_steps))
    if settings.lr_schedule == "linear":
        return peak * (1.0 - progress)
    return peak * 0.5 * (1.0 + math.cos(math.pi * progress))
