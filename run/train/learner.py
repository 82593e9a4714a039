"""``coevo train``: the trainer that learns from the hand-off, one LoRA version per batch.

:class:`LoRATrainer` is a :class:`~coevo.run.handoff.consumer.BatchConsumer`
(every batch once, in order, exactly once across a ``kill -9``): for each
batch it

1. lays the rows out as sequences, each number checked
   (:mod:`~coevo.run.train.sequences`): a row with a value that is not finite,
   that does not fit the model, sampled in a way the trainer cannot
   reproduce, or whose advantage is 0 is left out and counted; turns cut at
   their output limit leave the loss (overlong masking);
2. takes ``steps_per_batch × epochs`` AdamW steps: each epoch shuffles the
   sequences (seeded) and splits them into ``steps_per_batch`` mini-batches,
   one step each, with the loss of :mod:`~coevo.run.train.objective` (a
   truncated importance weight against the server's log-probs, the clip
   against the trainer's own log-probs from before the batch's first step);
   each step's sequences go through the model in micro-batches of like
   length (:func:`~coevo.run.train.policy.micro_batches`), gradients
   accumulated, and a step whose loss or gradient norm is not finite is
   skipped (:mod:`~coevo.run.train.steps`);
3. writes the version's folder ``lora/versions/<version>/`` whole (its
   ``adapter/`` is what vLLM loads; the optimizer's moments beside it; a
   version whose weights are not finite is refused, never announced), then
   its journal entry (``lora/journal.jsonl``: what each step did), then
   announces the version with ``lora_path`` = the adapter's folder.

Killed at any point, it starts again from the last version in its journal
(the adapter, the optimizer's moments and the count of steps the schedule
is at), trains the batches after it, and announces any it trained but did
not announce. The trainer folder must be a local path (or a mounted one):
the server loads adapters from it.

Versions are named ``lora-<tag>-v{n}`` (``<tag>``: six hex digits of the run
directory; ``n``: the generation of the batch it was trained through,
plus one), so two runs against one server never share a name.
"""

from __future__ import annotations

import random
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa
import torch
from coevo.arena.bounded import MAX_JSON_BYTES, loads_json, read_regular
from coevo.arena.errors import ArenaError
from coevo.run.handoff.consumer import BatchConsumer, ConsumerSettings
from coevo.run.train.objective import token_loss
from coevo.run.train.policy import (
    Scorer,
    choose_device,
    choose_dtype,
    load_model,
    load_optimizer,
    lora_norms,
    micro_batches,
    save_version,
    trainable,
    with_adapter,
)
from coevo.run.train.sequences import Sequence, group_of, sequences_of, with_format_reward
from coevo.run.train.settings import TrainSettings
from coevo.run.train.steps import Stepper

__all__ = ["ANNOUNCED", "LoRATrainer", "main"]

ANNOUNCED = (
    "mean_reward",
    "sequences",
    "tokens",
    "loss",
    "entropy",
    "grad_norm",
    "lr",
    "mean_abs_log_ratio",
    "importance_weight_mean",
    "importance_weight_max",
    "capped_fraction",
    "clipped_fraction",
    "kl",
    "informative_share",
    "skipped_steps",
    "adapter_change",
    "seconds",
)
"""The journal's figures a version is announced with (``Announcement.metrics``)."""


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
        self.dtype = choose_dtype(settings.dtype, self.device)
        self.model: Any = None
        self.scorer: Scorer | None = None
        self.stepper: Stepper | None = None
        self.vocab_size: int | None = None

    @property
    def optimizer(self) -> torch.optim.Optimizer | None:
        """AdamW (None before the trainer folder is known)."""
        return None if self.stepper is None else self.stepper.optimizer

    # ---- the checkpoint ---------------------------------------------------------------------

    @property
    def versions(self) -> Path:
        """Where the versions' folders are."""
        assert self.folder is not None
        return Path(self.folder.dir.path(self.name, "versions"))

    def _planned_steps(self) -> int | None:
        """The optimizer steps of the whole run (its generations × steps_per_batch × epochs)."""
        experiment = self._experiment() or {}
        generations = (experiment.get("run") or {}).get("generations")
        if not isinstance(generations, int) or generations < 1:
            return None
        return generations * self.settings.steps_per_batch * self.settings.epochs

    def opened(self) -> None:
        """Load the model with the adapter of the last version journaled (or the first adapter)."""
        assert self.folder is not None
        if not self.folder.dir.is_local:
            raise ArenaError(
                f"coevo train keeps its adapters in the trainer folder, which the server loads "
                f"them from: {self.folder.uri} is not a local (or mounted) folder"
            )
        settings = self.settings
        entries = self.journal()
        base = load_model(settings.model, self.device, self.dtype)
        reference = settings.adapter if settings.kl > 0 else None
        done = 0
        if entries:
            last = self.versions / entries[-1]["version"]
            self.model = with_adapter(base, settings, str(last / "adapter"), reference=reference)
            done = int(_state(last).get("optimizer_steps", 0))
            self.say(f"resuming from {entries[-1]['version']} ({len(entries)} batches trained)")
        else:
            self.model = with_adapter(base, settings, settings.adapter, reference=reference)
            started = settings.adapter or "a new LoRA adapter"
            self.say(
                f"training {started} of {settings.model} on {self.device} "
                f"(base in {str(self.dtype).removeprefix('torch.')})"
            )
        self.vocab_size = int(base.get_input_embeddings().num_embeddings)
        pad = getattr(base.config, "pad_token_id", None)
        self.scorer = Scorer(self.model, pad if isinstance(pad, int) else 0)
        self.stepper = Stepper(self.model, settings, self._planned_steps(), done)
        if entries:
            load_optimizer(
                self.model, self.stepper.optimizer, self.versions / entries[-1]["version"]
            )

    def lora_path(self, entry: dict[str, Any]) -> str | None:
        """The version's adapter folder."""
        return str(self.versions / entry["version"] / "adapter")

    def metrics(self, entry: dict[str, Any]) -> dict[str, float] | None:
        """The batch's step figures, announced with the version (the run's trackers show them as ``trainer/<name>``)."""
        out = {
            name: float(entry[name])
            for name in ANNOUNCED
            if isinstance(entry.get(name), (int, float)) and not isinstance(entry[name], bool)
        }
        for reason, count in (entry.get("skipped") or {}).items():
            out[f"skipped_{reason}"] = float(count)
        if entry.get("refused"):
            out["refused_batch"] = 1.0
        return out or None

    # ---- the step ---------------------------------------------------------------------------

    def step(self, batch: str, table: pa.Table, entry: dict[str, Any]) -> dict[str, Any]:
        """Train on the batch and write the version's folder; the journal entry with the step's figures."""
        assert self.model is not None and self.stepper is not None
        started = time.monotonic()
        settings = self.settings
        rows = table.to_pylist()
        carried_share = None
        if settings.format_reward:
            rows, carried_share = with_format_reward(rows, settings.format_reward)
        sequences, skipped = sequences_of(
            rows,
            scale=settings.scale,
            vocab_size=self.vocab_size,
            mask_truncated=settings.mask_truncated,
            temperature=settings.temperature,
        )
        long = [s for s in sequences if len(s.token_ids) > settings.max_length]
        sequences = [s for s in sequences if len(s.token_ids) <= settings.max_length]
        start = [p.detach().clone() for p in trainable(self.model).values()]
        many = settings.steps_per_batch * settings.epochs > 1
        old = self._old(sequences) if many and sequences else None
        steps: list[dict[str, Any]] = []
        for epoch in range(settings.epochs):
            order = list(range(len(sequences)))
            random.Random(f"{settings.seed}:{batch}:{epoch}").shuffle(order)
            parts = [order[k :: settings.steps_per_batch] for k in range(settings.steps_per_batch)]
            for part in parts:
                if part:
                    steps.append(self._optimize([sequences[i] for i in part], old, part))
        change = sum(
            float((p.detach() - q).float().pow(2).sum())
            for p, q in zip(trainable(self.model).values(), start, strict=True)
        )
        entry = {
            **entry,
            "sequences": len(sequences),
            "skipped": {**skipped.counts(), "too_long": len(long)},
            "skipped_why": skipped.why,
            **_groups(rows, sequences),
            **_summed(steps),
            "steps": steps,
            "optimizer_steps": self.stepper.done,
            "carried_out_share": carried_share,
            "lora_b_norm": lora_norms(self.model)["lora_b"],
            "adapter_change": change**0.5,
            "seconds": round(time.monotonic() - started, 3),
        }
        save_version(
            self.model,
            self.stepper.optimizer,
            self.versions / entry["version"],
            {
                "format": "coevo.lora-version/1",
                "entry": entry,
                "settings": settings.model_dump(),
                "optimizer_steps": self.stepper.done,
            },
        )
        self._prune(entry["version"])
        self._report(batch, entry)
        return entry

    def _old(self, sequences: list[Sequence]) -> list[torch.Tensor]:
        """Each sequence's log-probs under the policy before the batch's first step (no gradient)."""
        assert self.scorer is not None
        out: list[torch.Tensor] = [torch.zeros(0)] * len(sequences)
        budget = self.settings.micro_batch_tokens
        for group in micro_batches([len(s.token_ids) for s in sequences], budget):
            scored = self.scorer.score(
                [sequences[i].token_ids for i in group],
                [sequences[i].positions for i in group],
                [sequences[i].temperature for i in group],
                grad=False,
            )
            for i, piece in zip(group, _split(scored.logp, sequences, group), strict=True):
                out[i] = piece
        return out

    def _optimize(
        self, chosen: list[Sequence], old: list[torch.Tensor] | None, indices: list[int]
    ) -> dict[str, Any]:
        """One AdamW step over ``chosen`` (micro-batched, gradients accumulated), and its figures."""
        assert self.scorer is not None and self.stepper is not None
        settings = self.settings
        total = sum(len(s.positions) for s in chosen)
        figures = {
            "loss": 0.0,
            "tokens": 0,
            "mismatch": 0.0,
            "abs_mismatch": 0.0,
            "weight": 0.0,
            "weight_max": 0.0,
            "capped": 0,
            "clipped": 0,
            "kl": 0.0,
            "entropy": 0.0,
        }
        self.stepper.begin()
        for group in micro_batches([len(s.token_ids) for s in chosen], settings.micro_batch_tokens):
            members = [chosen[i] for i in group]
            scored = self.scorer.score(
                [s.token_ids for s in members],
                [s.positions for s in members],
                [s.temperature for s in members],
            )
            device = scored.logp.device
            behaviour = torch.tensor(
                [b for s in members for b in s.behaviour], dtype=torch.float32, device=device
            )
            advantage = torch.tensor(
                [s.advantage for s in members for _ in s.positions],
                dtype=torch.float32,
                device=device,
            )
            before = (
                scored.logp.detach()
                if old is None
                else torch.cat([old[indices[i]] for i in group]).to(device)
            )
            ref = None
            if settings.kl > 0:
                with torch.no_grad(), self.scorer.reference():
                    ref = self.scorer.score(
                        [s.token_ids for s in members],
                        [s.positions for s in members],
                        [s.temperature for s in members],
                        grad=False,
                    ).logp
            part = token_loss(
                scored.logp,
                before,
                behaviour,
                advantage,
                clip=settings.clip,
                clip_high=settings.clip_high or settings.clip,
                cap=settings.importance_cap,
                normaliser=total,
                ref=ref,
                kl=settings.kl,
            )
            if not self.stepper.backward(part.loss, f"{len(members)} sequences"):
                break
            figures["loss"] += float(part.loss.detach())
            figures["tokens"] += part.tokens
            figures["mismatch"] += part.mismatch_sum
            figures["abs_mismatch"] += part.abs_mismatch_sum
            figures["weight"] += part.weight_sum
            figures["weight_max"] = max(figures["weight_max"], part.weight_max)
            figures["capped"] += part.capped
            figures["clipped"] += part.clipped
            figures["kl"] += part.kl_sum
            figures["entropy"] += float(scored.entropy.sum())
        report = self.stepper.finish()
        if not report.taken:
            self.say(f"  step skipped: {report.why} (the weights are as they were)")
        tokens = max(int(figures["tokens"]), 1)
        return {
            "taken": report.taken,
            "why": report.why,
            "lr": report.lr,
            "grad_norm": report.grad_norm,
            "sequences": len(chosen),
            "tokens": int(figures["tokens"]),
            "loss": figures["loss"],
            "entropy": figures["entropy"] / tokens,
            "mean_log_ratio": figures["mismatch"] / tokens,
            "mean_abs_log_ratio": figures["abs_mismatch"] / tokens,
            "importance_weight_mean": figures["weight"] / tokens,
            "importance_weight_max": figures["weight_max"],
            "capped_fraction": figures["capped"] / tokens,
            "clipped_fraction": figures["clipped"] / tokens,
            "kl": figures["kl"] / tokens,
        }

    def _prune(self, newest: str) -> None:
        """Delete version folders older than the newest ``keep_versions`` (the journal's order)."""
        keep = self.settings.keep_versions
        if keep is None:
            return
        names = [e["version"] for e in self.journal()] + [newest]
        for name in names[: max(0, len(names) - keep)]:
            where = self.versions / name
            if where.is_dir() and not where.is_symlink():
                shutil.rmtree(where)

    def _report(self, batch: str, entry: dict[str, Any]) -> None:
        mean = entry["mean_reward"]
        shown = "—" if mean is None else f"{mean:.3f}"
        skipped = entry["skipped"]
        line = (
            f"{batch}: {entry['rows']} rollouts, mean reward {shown}, "
            f"{entry['informative_groups']}/{entry['groups']} groups informative; "
            f"{entry['sequences']} sequences trained"
        )
        if entry["sequences"] and entry["steps"]:
            line += (
                f" ({entry['tokens']} tokens in {len(entry['steps'])} steps, loss "
                f"{entry['loss']:+.4f}, entropy {entry['entropy']:.3f}, |log ratio| "
                f"{entry['mean_abs_log_ratio']:.4f}, IS weight {entry['importance_weight_mean']:.3f} "
                f"(max {entry['importance_weight_max']:.2f}), clipped {entry['clipped_fraction']:.1%}, "
                f"grad norm {entry['grad_norm']:.3f}, lr {entry['lr']:.2e})"
            )
        if entry["skipped_steps"]:
            line += f"; {entry['skipped_steps']} steps skipped"
        if entry.get("carried_out_share") is not None:
            line += f"; turns carried out {entry['carried_out_share']:.1%}"
        left = ", ".join(
            f"{n} {k.replace('_', ' ')}" for k, n in skipped.items() if n and k != "cut_turns"
        )
        if left:
            line += f"; left out: {left}"
        if skipped.get("cut_turns"):
            line += f"; {skipped['cut_turns']} cut turns masked"
        self.say(f"{line}; {entry['seconds']:.1f} s → {entry['version']}")


def _split(flat: torch.Tensor, sequences: list[Sequence], group: list[int]) -> list[torch.Tensor]:
    """A micro-batch's flat scores cut back into its sequences' (in ``group``'s order)."""
    sizes = [len(sequences[i].positions) for i in group]
    return [piece.detach().cpu() for piece in torch.split(flat, sizes)]


def _groups(rows: list[dict[str, Any]], sequences: list[Sequence]) -> dict[str, Any]:
    """The batch's groups and how many had a spread of rewards (informative: a gradient to give)."""
    groups = {group_of(r) for r in rows}
    informative = {s.group for s in sequences}
    return {
        "groups": len(groups),
        "informative_groups": len(informative),
        "informative_share": len(informative) / len(groups) if groups else None,
    }


def _summed(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The batch's figures over its steps (token-weighted means; the last step's rate and norm)."""
    taken = [s for s in steps if s["taken"]]
    tokens = sum(s["tokens"] for s in taken)

    def mean(key: str) -> float:
        return sum(s[key] * s["tokens"] for s in taken) / tokens if tokens else 0.0

    return {
        "tokens": tokens,
        "loss": sum(s["loss"] for s in taken) / max(len(taken), 1),
        "entropy": mean("entropy"),
        "mean_log_ratio": mean("mean_log_ratio"),
        "mean_abs_log_ratio": mean("mean_abs_log_ratio"),
        "importance_weight_mean": mean("importance_weight_mean"),
        "importance_weight_max": max((s["importance_weight_max"] for s in taken), default=0.0),
        "capped_fraction": mean("capped_fraction"),
        "clipped_fraction": mean("clipped_fraction"),
        "kl": mean("kl"),
        "grad_norm": taken[-1]["grad_norm"] if taken else None,
        "lr": steps[-1]["lr"] if steps else None,
        "skipped_steps": len(steps) - len(taken),
    }


def _state(folder: Path) -> dict[str, Any]:
    """A version folder's ``state.json`` (empty when it has none or it is not JSON)."""
    try:
        value = loads_json(
            read_regular(folder / "state.json", limit=MAX_JSON_BYTES), str(folder / "state.json")
        )
    except (OSError, ValueError, ArenaError):
        return {}
    return value if isinstance(value, dict) else {}


def main(consumer: ConsumerSettings, settings: TrainSettings, out: TextIO | None = None) -> int:
    """Run ``coevo train`` until the run is finished; the exit status (``out``: where it reports; standard output)."""
    torch.manual_seed(settings.seed)
    trainer = LoRATrainer(
        consumer, settings, say=lambda line: print(line, file=out or sys.stdout, flush=True)
    )
    trainer.serve()
    return 0
