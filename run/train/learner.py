"""``coevo train``: the trainer that learns from the hand-off, one LoRA version per batch.

:class:`LoRATrainer` is a :class:`~coevo.run.consumer.BatchConsumer`
(every batch once, in order, exactly once across a ``kill -9``): for each
batch it

1. lays the rows out as sequences (:mod:`~coevo.run.train.sequences`):
   rows whose advantage is 0 add nothing to the policy gradient and are left
   out, as are rows with no token ids;
2. takes ``steps_per_batch`` AdamW steps, each over every sequence, with the
   loss of :mod:`~coevo.run.train.objective` (gradients accumulated one
   sequence at a time, so memory is one sequence's, then clipped);
3. writes the version's folder ``lora/versions/<version>/`` whole (its
   ``adapter/`` is what vLLM loads; the optimizer's moments beside it), then
   its journal entry (``lora/journal.jsonl``: what the step did), then
   announces the version with ``lora_path`` = the adapter's folder.

Killed at any point, it starts again from the last version in its journal
(the adapter and the optimizer's moments), trains the batches after it, and
announces any it trained but did not announce. The trainer folder must be a
local path (or a mounted one): the server loads adapters from it.

Versions are named ``lora-<tag>-v{n}`` (``<tag>``: six hex digits of the
run directory; ``n``: the generation of the batch it was trained through,
plus one), so two runs against one server never share a name.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa
import torch
from coevo.arena.errors import ArenaError
from coevo.run.consumer import BatchConsumer, ConsumerSettings
from coevo.run.train.objective import token_loss
from coevo.run.train.policy import (
    choose_device,
    load_model,
    load_optimizer,
    lora_norms,
    save_version,
    token_logprobs,
    trainable,
    with_adapter,
)
from coevo.run.train.sequences import Sequence, sequences_of, with_format_reward
from coevo.run.train.settings import TrainSettings

__all__ = ["LoRATrainer", "main"]


class LoRATrainer(BatchConsumer):
    """The LoRA trainer (see the module docstring).

    Args:
        consumer: how it waits and stops.
        settings: how it trains.
        say: where it reports each step.
        sleep: how it waits.
    """

    name = "lora"

    def __init__(
        self,
        consumer: ConsumerSettings,
        settings: TrainSettings,
        *,
        say: Callable[[str], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        super().__init__(consumer, say=say, sleep=sleep)
        self.settings = settings
        self.device = choose_device(settings.device)
        self.model: Any = None
        self.optimizer: torch.optim.Optimizer | None = None

    # ---- the checkpoint ---------------------------------------------------------------------

    @property
    def versions(self) -> Path:
        """Where the versions' folders are."""
        assert self.folder is not None
        return Path(self.folder.dir.path(self.name, "versions"))

    def opened(self) -> None:
        """Load the model with the adapter of the last version journaled (or the first adapter)."""
        assert self.folder is not None
        if not self.folder.dir.is_local:
            raise ArenaError(
                f"coevo train keeps its adapters in the trainer folder, which the server loads "
                f"them from: {self.folder.uri} is not a local (or mounted) folder"
            )
        entries = self.journal()
        base = load_model(self.settings.model, self.device)
        if entries:
            last = self.versions / entries[-1]["version"]
            self.model = with_adapter(base, self.settings, str(last / "adapter"))
            self.say(f"resuming from {entries[-1]['version']} ({len(entries)} batches trained)")
        else:
            self.model = with_adapter(base, self.settings, self.settings.adapter)
            started = self.settings.adapter or "a new LoRA adapter"
            self.say(f"training {started} of {self.settings.model} on {self.device}")
        self.model.train()
        self.optimizer = torch.optim.AdamW(
            list(trainable(self.model).values()),
            lr=self.settings.learning_rate,
            weight_decay=self.settings.weight_decay,
        )
        if entries:
            load_optimizer(self.model, self.optimizer, self.versions / entries[-1]["version"])

    def lora_path(self, entry: dict[str, Any]) -> str | None:
        """The version's adapter folder."""
        return str(self.versions / entry["version"] / "adapter")

    # ---- the step ---------------------------------------------------------------------------

    def step(self, batch: str, table: pa.Table, entry: dict[str, Any]) -> dict[str, Any]:
        """Train on the batch and write the version's folder; the journal entry with the step's figures."""
        assert self.model is not None and self.optimizer is not None
        started = time.monotonic()
        settings = self.settings
        rows = table.to_pylist()
        carried_share = None
        if settings.format_reward:
            rows, carried_share = with_format_reward(rows, settings.format_reward)
        sequences, skipped = sequences_of(rows, scale=settings.scale)
        long = [s for s in sequences if len(s.token_ids) > settings.max_length]
        sequences = [s for s in sequences if len(s.token_ids) <= settings.max_length]
        start = [p.detach().clone() for p in trainable(self.model).values()]
        figures: dict[str, Any] = {}
        for k in range(settings.steps_per_batch):
            order = list(sequences)
            random.Random(f"{settings.seed}:{batch}:{k}").shuffle(order)
            if order:
                figures = self._optimize(order)
        change = sum(
            float((p.detach() - q).float().pow(2).sum())
            for p, q in zip(trainable(self.model).values(), start, strict=True)
        )
        entry = {
            **entry,
            "sequences": len(sequences),
            "skipped": {
                "zero_advantage": skipped.zero_advantage,
                "no_token_ids": skipped.no_tokens,
                "no_loss_mask": skipped.no_mask,
                "too_long": len(long),
            },
            **figures,
            "carried_out_share": carried_share,
            "lora_b_norm": lora_norms(self.model)["lora_b"],
            "adapter_change": change**0.5,
            "seconds": round(time.monotonic() - started, 3),
        }
        save_version(
            self.model,
            self.optimizer,
            self.versions / entry["version"],
            {"format": "coevo.lora-version/1", "entry": entry, "settings": settings.model_dump()},
        )
        self._report(batch, entry)
        return entry

    def _optimize(self, order: list[Sequence]) -> dict[str, Any]:
        """One AdamW step over every sequence of ``order`` (gradients accumulated), and its figures."""
        assert self.model is not None and self.optimizer is not None
        settings = self.settings
        total = sum(len(s.positions) for s in order)
        self.optimizer.zero_grad(set_to_none=True)
        loss = log_ratio = abs_log_ratio = kl = 0.0
        clipped = tokens = 0
        for sequence in order:
            temperature = settings.temperature or sequence.temperature
            logp = token_logprobs(
                self.model,
                sequence.token_ids,
                sequence.positions,
                temperature=temperature,
                dtype=settings.dtype,
            )
            old = torch.tensor(
                [v if v is not None else float("nan") for v in sequence.behaviour],
                dtype=torch.float32,
                device=logp.device,
            )
            old = torch.where(torch.isnan(old), logp.detach(), old)  # none recorded: ratio 1
            ref = None
            if settings.kl > 0:
                with torch.no_grad(), self.model.disable_adapter():
                    ref = token_logprobs(
                        self.model,
                        sequence.token_ids,
                        sequence.positions,
                        temperature=temperature,
                        dtype=settings.dtype,
                    )
            part = token_loss(
                logp,
                old,
                sequence.advantage,
                clip=settings.clip,
                clip_high=settings.clip_high or settings.clip,
                normaliser=total,
                ref=ref,
                kl=settings.kl,
            )
            part.loss.backward()
            loss += float(part.loss.detach())
            log_ratio += part.log_ratio_sum
            abs_log_ratio += part.abs_log_ratio_sum
            clipped += part.clipped
            kl += part.kl_sum
            tokens += part.tokens
        norm = torch.nn.utils.clip_grad_norm_(
            list(trainable(self.model).values()), settings.max_grad_norm
        )
        self.optimizer.step()
        return {
            "tokens": tokens,
            "loss": loss,
            "mean_log_ratio": log_ratio / max(tokens, 1),
            "mean_abs_log_ratio": abs_log_ratio / max(tokens, 1),
            "clipped_fraction": clipped / max(tokens, 1),
            "kl": kl / max(tokens, 1),
            "grad_norm": float(norm),
        }

    def _report(self, batch: str, entry: dict[str, Any]) -> None:
        mean = entry["mean_reward"]
        shown = "—" if mean is None else f"{mean:.3f}"
        skipped = entry["skipped"]
        line = (
            f"{batch}: {entry['rows']} rollouts, mean reward {shown}; "
            f"{entry['sequences']} sequences trained"
        )
        if entry["sequences"]:
            line += (
                f" ({entry['tokens']} tokens, loss {entry['loss']:+.4f}, |log ratio| "
                f"{entry['mean_abs_log_ratio']:.4f}, clipped {entry['clipped_fraction']:.1%}, "
                f"grad norm {entry['grad_norm']:.3f})"
            )
        if entry.get("carried_out_share") is not None:
            line += f"; turns carried out {entry['carried_out_share']:.1%}"
        left = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in skipped.items() if n)
        if left:
            line += f"; left out: {left}"
        self.say(f"{line}; {entry['seconds']:.1f} s → {entry['version']}")


def main(consumer: ConsumerSettings, settings: TrainSettings, out: TextIO = sys.stdout) -> int:
    """Run ``coevo train`` until the run is finished; the exit status."""
    torch.manual_seed(settings.seed)
    trainer = LoRATrainer(consumer, settings, say=lambda line: print(line, file=out, flush=True))
    trainer.serve()
    return 0
