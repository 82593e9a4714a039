"""``coevo sft``: a warm start from the game log, supervised, on the same LoRA adapter ``coevo train`` trains.

The data is :mod:`~coevo.run.train.warmstart`'s: each accepted task's
reference solution played through the Solver's dialogue code (and, asked,
the logged successes), the loss on the assistant's tokens only. A share of
the data, by world (by task when there are few worlds), is kept apart to
measure: the mean log-likelihood per token of those held-out reference
conversations is reported before training and after each epoch, so a warm
start that does not generalise shows it.

The training is ``coevo train``'s machinery with a cross-entropy loss: the
model and adapter (:mod:`~coevo.run.train.policy`), sequences of like length
batched into each forward pass, AdamW steps guarded against anything not
finite (:mod:`~coevo.run.train.steps`), a warm-up and a schedule.

``OUT`` (new, or one this command wrote for the same data and settings, to
go on from) holds:

* ``adapter/``: the warm-start adapter (PEFT's folder: what ``coevo train
  --adapter`` and vLLM's ``--lora-modules`` start from);
* ``sft.json``: what it trained on, what it left out and why (the eval tasks
  and their worlds among them), and the figures of each epoch;
* ``checkpoint/``: the adapter, AdamW's moments and the position in the data
  every ``checkpoint_steps`` steps; killed, ``coevo sft`` with the same
  arguments goes on from it.

Tensors and JSON only, never a pickle.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import torch
from coevo.arena.bounded import MAX_JSON_BYTES, loads_json, read_regular
from coevo.arena.errors import ArenaError
from coevo.run.train.objective import sft_loss
from coevo.run.train.policy import (
    Scorer,
    choose_device,
    choose_dtype,
    load_model,
    load_optimizer,
    micro_batches,
    peft_quietly,
    save_version,
    with_adapter,
)
from coevo.run.train.settings import SFTSettings
from coevo.run.train.steps import Stepper
from coevo.run.train.warmstart import DialogueSettings, Example, WarmStartData
from transformers import AutoTokenizer

__all__ = ["SFT_FORMAT", "WarmStart", "main", "split"]

SFT_FORMAT = "coevo.sft/1"
"""The format of ``sft.json`` and of the checkpoint's ``state.json``."""


def _held(key: str, share: float) -> bool:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < share


def split(examples: Sequence[Example], share: float) -> tuple[list[Example], list[Example], str]:
    """``(train, validation, by)``: ``share`` of the examples kept apart, by world when there are 10 or more, else by task."""
    if share <= 0:
        return list(examples), [], "none"
    by = "world" if len({e.database for e in examples}) >= 10 else "task"
    train: list[Example] = []
    validation: list[Example] = []
    for example in examples:
        key = example.database if by == "world" else example.task_id
        (validation if _held(key, share) else train).append(example)
    return train, validation, by


class WarmStart:
    """``coevo sft`` (see the module docstring).

    Args:
        data: the sequences.
        settings: how to train.
        out: the output folder.
        validation_share: the share of the data kept apart to measure.
        checkpoint_steps: steps between checkpoints.
        say: where it reports.
    """

    def __init__(
        self,
        data: WarmStartData,
        settings: SFTSettings,
        out: str,
        *,
        validation_share: float = 0.1,
        checkpoint_steps: int = 50,
        say: Callable[[str], None] = print,
    ):
        self.data = data
        self.settings = settings
        self.out = Path(out)
        self.train, self.validation, self.split_by = split(data.examples, validation_share)
        self.checkpoint_steps = checkpoint_steps
        self.say = say
        self.device = choose_device(settings.device)
        self.dtype = choose_dtype(settings.dtype, self.device)
        per_epoch = -(-len(self.train) // settings.batch_sequences)
        self.total_steps = per_epoch * settings.epochs
        self.identity = hashlib.sha256(
            json.dumps(
                [data.digest(), settings.model_dump(), validation_share], sort_keys=True
            ).encode()
        ).hexdigest()

    # ---- where it is --------------------------------------------------------------------

    def _resumable(self) -> dict[str, Any] | None:
        """The checkpoint's state when ``OUT`` holds one of this data and these settings (else None).

        Raises:
            ArenaError: ``OUT`` holds something else.
        """
        if not self.out.exists():
            return None
        state_file = self.out / "checkpoint" / "state.json"
        if state_file.is_file() and not state_file.is_symlink():
            state = loads_json(read_regular(state_file, limit=MAX_JSON_BYTES), str(state_file))
            if isinstance(state, dict) and state.get("identity") == self.identity:
                return state
        if any(self.out.iterdir()):
            raise ArenaError(
                f"--out {self.out} is not empty and holds no checkpoint of this data and these "
                "settings: give a new folder"
            )
        return None

    def _validation_nll(self, scorer: Scorer) -> float | None:
        """The held-out sequences' negative log-likelihood per assistant token (None: none held out)."""
        if not self.validation:
            return None
        total = tokens = 0.0
        with torch.no_grad():
            for group in micro_batches(
                [len(e.token_ids) for e in self.validation], self.settings.micro_batch_tokens
            ):
                members = [self.validation[i] for i in group]
                scored = scorer.score(
                    [e.token_ids for e in members],
                    [e.positions for e in members],
                    [1.0] * len(members),
                    grad=False,
                )
                total -= float(scored.logp.sum())
                tokens += scored.logp.numel()
        return total / max(tokens, 1)

    # ---- the training -------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Train, checkpoint, write ``adapter/`` and ``sft.json``; the report."""
        settings = self.settings
        if not self.train:
            raise ArenaError(
                "no warm-start sequence to train on: " + json.dumps(self.left_out(), sort_keys=True)
            )
        state = self._resumable()
        self.out.mkdir(parents=True, exist_ok=True)
        base = load_model(settings.model, self.device, self.dtype)
        checkpoint = self.out / "checkpoint"
        adapter = str(checkpoint / "adapter") if state else settings.adapter
        model = with_adapter(base, settings, adapter)
        pad = getattr(base.config, "pad_token_id", None)
        scorer = Scorer(model, pad if isinstance(pad, int) else 0)
        stepper = Stepper(model, settings, self.total_steps, int(state["steps"]) if state else 0)
        epochs: list[dict[str, Any]] = list(state["epochs"]) if state else []
        if state:
            load_optimizer(model, stepper.optimizer, checkpoint)
            self.say(f"going on from step {state['position']} of {self.total_steps} ({checkpoint})")
            before = state["validation_before"]
        else:
            before = self._validation_nll(scorer)
            self.say(
                f"{len(self.train)} sequences to train on ({sum(len(e.positions) for e in self.train)} "
                f"assistant tokens), {len(self.validation)} held out by {self.split_by}; "
                f"{self.total_steps} steps; held-out NLL per token {_shown(before)}"
            )
        per_epoch = -(-len(self.train) // settings.batch_sequences)
        every = max(1, self.total_steps // 20)
        position = int(state["position"]) if state else 0  # batches done, skipped steps too
        seen = 0
        started = time.monotonic()
        while position < self.total_steps:
            epoch, index = divmod(position, per_epoch)
            order = list(range(len(self.train)))
            random.Random(f"{settings.seed}:sft:{epoch}").shuffle(order)
            chosen = [
                self.train[i]
                for i in order[
                    index * settings.batch_sequences : (index + 1) * settings.batch_sequences
                ]
            ]
            loss, tokens = self._step(scorer, stepper, chosen)
            position += 1
            seen += sum(len(e.token_ids) for e in chosen)
            if index == 0:
                epochs.append({"epoch": epoch, "loss": 0.0, "tokens": 0, "skipped_steps": 0})
            figures = epochs[-1]
            figures["loss"] += loss
            figures["tokens"] += tokens
            figures["skipped_steps"] += int(tokens == 0)
            last_of_epoch = index == per_epoch - 1
            if last_of_epoch:
                figures["loss"] /= max(figures["tokens"], 1)
                figures["validation_nll"] = self._validation_nll(scorer)
            if last_of_epoch or position % self.checkpoint_steps == 0:
                save_version(
                    model,
                    stepper.optimizer,
                    checkpoint,
                    {
                        "format": SFT_FORMAT,
                        "identity": self.identity,
                        "position": position,
                        "steps": stepper.done,
                        "epochs": epochs,
                        "validation_before": before,
                    },
                )
            if position % every == 0 and position < self.total_steps:
                elapsed = time.monotonic() - started
                self.say(
                    f"  step {position}/{self.total_steps}: NLL per token "
                    f"{loss / max(tokens, 1):.4f}, {seen / max(elapsed, 1e-9):.0f} tokens/s"
                )
            if last_of_epoch:
                self.say(
                    f"epoch {epoch + 1}/{settings.epochs}: train NLL per token "
                    f"{figures['loss']:.4f}, held-out {_shown(figures['validation_nll'])} "
                    f"({time.monotonic() - started:.0f} s)"
                )
        report = {
            "format": SFT_FORMAT,
            "model": settings.model,
            "settings": settings.model_dump(),
            "sequences": len(self.train),
            "validation": {"sequences": len(self.validation), "by": self.split_by},
            "assistant_tokens": sum(len(e.positions) for e in self.train),
            "sources": {
                "reference": sum(e.source == "reference" for e in self.data.examples),
                "rollout": sum(e.source == "rollout" for e in self.data.examples),
            },
            "left_out": self.left_out(),
            "validation_nll_before": before,
            "validation_nll_after": epochs[-1].get("validation_nll") if epochs else before,
            "epochs": epochs,
            "steps": stepper.done,
            "skipped_steps": position - stepper.done,
        }
        final = self.out / "adapter"
        shutil.rmtree(final, ignore_errors=True)
        shutil.copytree(checkpoint / "adapter", final)
        (self.out / "sft.json").write_text(json.dumps(report, indent=1, sort_keys=True))
        return report

    def _step(self, scorer: Scorer, stepper: Stepper, chosen: list[Example]) -> tuple[float, int]:
        """One step over ``chosen``: the summed NLL and the tokens (0 tokens: the step was skipped)."""
        total = sum(len(e.positions) for e in chosen)
        loss = 0.0
        stepper.begin()
        for group in micro_batches(
            [len(e.token_ids) for e in chosen], self.settings.micro_batch_tokens
        ):
            members = [chosen[i] for i in group]
            scored = scorer.score(
                [e.token_ids for e in members],
                [e.positions for e in members],
                [1.0] * len(members),
            )
            part = sft_loss(scored.logp, normaliser=total)
            if not stepper.backward(part, f"{len(members)} sequences"):
                break
            loss += float(part.detach()) * total
        report = stepper.finish()
        if not report.taken:
            self.say(f"  step skipped: {report.why} (the weights are as they were)")
            return 0.0, 0
        return loss, total

    def left_out(self) -> dict[str, Any]:
        """What the data left out, and why."""
        return {
            "eval_tasks_and_worlds": self.data.held_out.said,
            "in_eval_worlds_or_eval_tasks": self.data.held_out_tasks,
            "reference_failed": self.data.failed,
            "longer_than_max_tokens": self.data.too_long,
        }


def _shown(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def main(
    sources: Sequence[str],
    settings: SFTSettings,
    dialogue: DialogueSettings,
    out_dir: str,
    *,
    exclude: Sequence[str] = (),
    rollouts: bool = False,
    limit: int | None = None,
    validation_share: float = 0.1,
    checkpoint_steps: int = 50,
    out: TextIO = sys.stdout,
) -> int:
    """``coevo sft``: build the data, train, write ``OUT``; the exit status."""

    def say(line: str) -> None:
        print(line, file=out, flush=True)

    torch.manual_seed(settings.seed)
    try:
        with peft_quietly():
            tokenizer = AutoTokenizer.from_pretrained(
                settings.model, local_files_only=True, trust_remote_code=False
            )
    except (OSError, ValueError) as exc:
        raise ArenaError(
            f"--model {settings.model}: its tokenizer cannot be loaded: {exc}"
        ) from None
    data = WarmStartData.build(
        sources, tokenizer, dialogue, exclude=exclude, rollouts=rollouts, limit=limit
    )
    for line in data.held_out.said:
        say(f"held out (never trained on): {line}")
    say(
        f"{len(data.examples)} warm-start sequences; left out: {data.held_out_tasks} tasks that are "
        f"eval tasks or in their worlds, {sum(data.failed.values())} whose reference did not earn "
        f"1 through the protocol, {data.too_long} longer than max_tokens"
    )
    report = WarmStart(
        data,
        settings,
        out_dir,
        validation_share=validation_share,
        checkpoint_steps=checkpoint_steps,
        say=say,
    ).run()
    say(
        f"warm start → {Path(out_dir) / 'adapter'}: held-out NLL per token "
        f"{_shown(report['validation_nll_before'])} → {_shown(report['validation_nll_after'])}"
    )
    return 0
