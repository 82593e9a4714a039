"""Every setting of ``coevo train``, with its default: one owner for the flags, the docs and the checks (no torch here)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["TrainSettings"]


class TrainSettings(BaseModel):
    """How ``coevo train`` trains (each field is a ``--flag`` of the same name, ``_`` written ``-``).

    The defaults suit a LoRA adapter of a small instruct model on one device;
    ``docs/trainer.md`` says why each is what it is.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(description="the Hugging Face model folder: the weights the server serves")
    adapter: str | None = Field(
        default=None,
        description="a PEFT LoRA adapter of the model to start from (default: a new one, "
        "which changes nothing until trained)",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="where to train (auto: cuda when there is one)"
    )
    dtype: Literal["float32", "bfloat16"] = Field(
        default="float32",
        description="the forward pass's precision (bfloat16: autocast; the weights and "
        "optimizer stay float32)",
    )
    lora_rank: int = Field(default=16, ge=1, le=512, description="the adapter's rank r")
    lora_alpha: float = Field(
        default=32.0, gt=0, description="LoRA's alpha (its scale is alpha / r)"
    )
    lora_dropout: float = Field(
        default=0.0, ge=0, lt=1, description="dropout on the adapter's input"
    )
    target_modules: str = Field(
        default="all-linear",
        description="the modules the adapter wraps: all-linear, or names joined by commas "
        "(q_proj,v_proj)",
    )
    learning_rate: float = Field(default=2e-5, gt=0, description="AdamW's learning rate")
    weight_decay: float = Field(default=0.0, ge=0, description="AdamW's weight decay")
    clip: float = Field(
        default=0.2, gt=0, description="the ratio's clip range below 1: [1 - clip, ...]"
    )
    clip_high: float | None = Field(
        default=None, gt=0, description="the clip range above 1 (default: clip; DAPO uses 0.28)"
    )
    kl: float = Field(
        default=0.0,
        ge=0,
        description="the coefficient of the KL penalty to the model without its adapter "
        "(k3 estimator; 0: none, and no reference forward pass)",
    )
    steps_per_batch: int = Field(
        default=1, ge=1, description="optimizer steps on each batch (more: the clip matters)"
    )
    max_grad_norm: float = Field(
        default=1.0, gt=0, description="gradients are clipped to this norm"
    )
    scale: Literal["none", "group"] = Field(
        default="none",
        description="advantages as the batch gives them, or divided by their group's std",
    )
    temperature: float | None = Field(
        default=None,
        gt=0,
        description="the temperature the policy's log-probs are taken at (default: each "
        "rollout's own, from its sampling; vLLM records them at that temperature when "
        "served with --logprobs-mode processed_logprobs, else at 1)",
    )
    format_reward: float = Field(
        default=0.0,
        ge=0,
        description="pay each rollout this times the share of its turns whose calls the world "
        "carried out, on top of its reward (a format reward, for a model that earns none yet)",
    )
    max_length: int = Field(
        default=8192, ge=16, description="sequences longer than this are left out (and counted)"
    )
    seed: int = Field(
        default=0, description="seeds the new adapter's weights and the order of sequences"
    )
