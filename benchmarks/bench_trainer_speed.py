"""coevo train's step against a raw torch forward and backward of the same model over the same tokens, and against the trainer as it was.

    python benchmarks/bench_trainer_speed.py [--model DIR] [--sequences 24] [--repeats 2] [--json FILE]

Run with the train extra (torch, transformers, peft); ``bench_real_model.py``
runs it in the real-model environment. The sequences are real: warm-start
sequences (:mod:`coevo.run.train.warmstart`) of level-1 and level-2
procedural tasks in the tiny loop's short worlds, replayed through the
Solver's dialogue code with the model's own tokenizer, so their lengths and
loss masks are what a batch holds. Three ways over the same sequences, the
same LoRA adapter (rank 16, every linear layer), one optimizer step, the
same threads, alternated ``--repeats`` times (the median is printed):

* **raw**: a plain training step as one writes it in torch: sequences of
  like length padded into batches of at most ``micro_batch_tokens``, the
  model's logits at every position, cross-entropy, backward; the base in
  the same precision as coevo's;
* **coevo**: :class:`~coevo.run.train.learner.LoRATrainer`'s step
  (micro-batches, the head in float32 at the scored positions only, the
  loss with its importance weight and clip, the guard);
* **before**: the trainer before this change, re-created here: one sequence
  per forward pass, float32 base weights under bfloat16 autocast, the
  log-softmax of the whole vocabulary kept for backward at every scored
  position.

Printed: tokens per second (every token of every sequence, the prompts'
included: what the forward pass reads) of each, and the ratios coevo/before
and raw/coevo.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from coevo.agents.protocols import ProposalRequest  # noqa: E402
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer  # noqa: E402
from coevo.arena.spec import TaskSpec  # noqa: E402
from coevo.run.train.objective import token_loss  # noqa: E402
from coevo.run.train.policy import (  # noqa: E402
    Scorer,
    choose_dtype,
    load_model,
    micro_batches,
    with_adapter,
)
from coevo.run.train.settings import TrainSettings  # noqa: E402
from coevo.run.train.steps import Stepper  # noqa: E402
from coevo.run.train.warmstart import (  # noqa: E402
    DialogueSettings,
    Example,
    reference_script,
    replay,
)
from transformers import AutoTokenizer  # noqa: E402

from tests import real_model  # noqa: E402


def sequences(model_dir: str, n: int) -> list[Example]:
    """``n`` warm-start sequences of the tiny loop's tasks (levels 1 and 2, retail and hr, short worlds)."""
    synth = ProceduralSynthesizer(["retail", "hr"], world_pool=4, tool_subset=0)
    tasks: list[TaskSpec] = []
    seed = 0
    while len(tasks) < n:
        for level in (1, 2):
            tasks += synth.propose(ProposalRequest(n=8, seed=seed, level=level))
        seed += 1
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    out = []
    settings = DialogueSettings(
        tool_protocol="text", tool_choice="required", max_steps=8, max_tokens=128
    )
    for task in tasks[:n]:
        episode = replay(task, reference_script(task, "text", settings), tokenizer, settings)
        laid = episode.trajectory.interleaved()[0]
        out.append(Example(laid.token_ids, laid.loss_mask, str(task.task_id), "", "reference"))
    return out


def raw_step(model, batch: list[Example], budget: int, optimizer) -> None:
    optimizer.zero_grad(set_to_none=True)
    total = sum(len(e.token_ids) - 1 for e in batch)
    for group in micro_batches([len(e.token_ids) for e in batch], budget):
        longest = max(len(batch[i].token_ids) for i in group)
        ids = torch.zeros((len(group), longest), dtype=torch.long)
        attention = torch.zeros((len(group), longest), dtype=torch.long)
        for row, i in enumerate(group):
            tokens = batch[i].token_ids
            ids[row, : len(tokens)] = torch.tensor(tokens)
            attention[row, : len(tokens)] = 1
        logits = model(input_ids=ids, attention_mask=attention).logits
        labels = ids[:, 1:].masked_fill(attention[:, 1:] == 0, -100)
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
            labels.reshape(-1),
            ignore_index=-100,
            reduction="sum",
        )
        (loss / total).backward()
    optimizer.step()


def coevo_step(scorer: Scorer, stepper: Stepper, batch: list[Example], budget: int) -> None:
    total = sum(len(e.positions) for e in batch)
    stepper.begin()
    for n, group in enumerate(micro_batches([len(e.token_ids) for e in batch], budget)):
        members = [batch[i] for i in group]
        scored = scorer.score(
            [e.token_ids for e in members], [e.positions for e in members], [1.0] * len(members)
        )
        count = scored.logp.numel()
        sign = 1.0 if n % 2 else -1.0
        part = token_loss(
            scored.logp,
            scored.logp.detach(),
            scored.logp.detach() - 0.01,
            torch.full((count,), sign),
            clip=0.2,
            clip_high=0.2,
            cap=2.0,
            normaliser=total,
        )
        stepper.backward(part.loss)
    stepper.finish()


def before_step(model, batch: list[Example], optimizer) -> None:
    """The trainer before this change: one sequence at a time, fp32 weights, bf16 autocast, full log-softmax."""
    optimizer.zero_grad(set_to_none=True)
    total = sum(len(e.positions) for e in batch)
    for n, example in enumerate(batch):
        ids = torch.tensor([example.token_ids])
        wanted = torch.tensor(example.positions)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(input_ids=ids, logits_to_keep=wanted - 1).logits[0]
        scores = torch.log_softmax(logits.float(), dim=-1)
        logp = scores.gather(-1, ids[0, wanted].unsqueeze(-1)).squeeze(-1)
        sign = 1.0 if n % 2 else -1.0
        (-(torch.exp(logp - logp.detach()) * sign).sum() / total).backward()
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
    optimizer.step()


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default=None, help="a model folder (default: the tests' SmolLM2)"
    )
    parser.add_argument("--sequences", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--micro-batch-tokens", type=int, default=2048)
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args()
    model_dir = args.model or str(real_model.model())
    batch = sequences(model_dir, args.sequences)
    tokens = sum(len(e.token_ids) for e in batch)
    scored = sum(len(e.positions) for e in batch)
    device = torch.device("cpu")
    dtype = choose_dtype("auto", device)
    settings = TrainSettings(model=model_dir, learning_rate=1e-5, dtype="auto")

    coevo_model = with_adapter(load_model(model_dir, device, dtype), settings, None)
    scorer = Scorer(coevo_model)
    stepper = Stepper(coevo_model, settings, None)
    raw_model = with_adapter(load_model(model_dir, device, dtype), settings, None)
    raw_opt = torch.optim.AdamW([p for p in raw_model.parameters() if p.requires_grad], lr=1e-5)
    before_model = with_adapter(load_model(model_dir, device, torch.float32), settings, None)
    before_opt = torch.optim.AdamW(
        [p for p in before_model.parameters() if p.requires_grad], lr=1e-5
    )
    ways = {
        "raw": lambda: raw_step(raw_model, batch, args.micro_batch_tokens, raw_opt),
        "coevo": lambda: coevo_step(scorer, stepper, batch, args.micro_batch_tokens),
        "before": lambda: before_step(before_model, batch, before_opt),
    }
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.repeats):
        for name, fn in ways.items():
            seconds[name].append(timed(fn))
    rate = {name: tokens / statistics.median(s) for name, s in seconds.items()}
    figures = {
        "model": model_dir,
        "threads": torch.get_num_threads(),
        "base_dtype": str(dtype).removeprefix("torch."),
        "sequences": len(batch),
        "tokens": tokens,
        "scored_tokens": scored,
        "seconds": seconds,
        "tokens_per_s": rate,
        "coevo_over_before": rate["coevo"] / rate["before"],
        "raw_over_coevo": rate["raw"] / rate["coevo"],
    }
    print(
        f"{len(batch)} sequences, {tokens} tokens ({scored} scored), base in {figures['base_dtype']}, "
        f"{figures['threads']} threads; median of {args.repeats}"
    )
    for name in ways:
        per_k = 1000 / rate[name]
        print(f"  {name:<7} {rate[name]:8.1f} tokens/s   {per_k:6.2f} s per 1,000 tokens")
    print(
        f"  coevo / before: {figures['coevo_over_before']:.2f}×   raw / coevo: "
        f"{figures['raw_over_coevo']:.2f}× (≤ 1.5 is the aim)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
