"""``coevo reference-trainer``: the reference consumer of the trainer hand-off, run by hand."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_commands", "cmd_reference_trainer"]


def cmd_reference_trainer(args: argparse.Namespace) -> int:
    """``coevo reference-trainer RUN_DIR``."""
    from coevo.arena.run.reference_trainer import TrainerSettings, main

    return main(
        TrainerSettings(
            run_dir=args.run_dir,
            folder=args.folder,
            announce=args.announce,
            adapter=args.adapter,
            prefix=args.prefix,
            poll=args.poll,
            delay=args.delay,
            batches=args.batches,
            wait=args.wait,
            lag=args.lag,
        )
    )


def add_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``reference-trainer`` to the ``coevo`` command."""
    parser = sub.add_parser(
        "reference-trainer",
        help="the reference consumer of the trainer hand-off: reads batches, announces versions",
        formatter_class=fmt,
        description=(
            "Train (by recording) on each batch a run with a [trainer] table hands out, and\n"
            "announce a new policy version per batch (docs/trainer.md is the protocol). It may\n"
            "start before the run: it waits for RUN_DIR and for batches, and stops when the run\n"
            "has committed all its generations. Each version is announced as a LoRA adapter\n"
            "for the server to load; against a real vLLM give --adapter DIR (an adapter of\n"
            "the served model). Killed and started again, it trains on no batch twice."
        ),
        epilog=(
            "examples:\n"
            "  coevo run experiments/openai-trainer.toml --out runs/t   # one terminal\n"
            "  coevo reference-trainer runs/t                           # another\n"
            "  coevo reference-trainer runs/t --announce model --prefix my-model"
        ),
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the run directory (may not exist yet)")
    parser.add_argument(
        "--folder", default=None, help="the trainer folder (default: the run's trainer.uri)"
    )
    parser.add_argument(
        "--announce",
        choices=("lora", "model"),
        default="lora",
        help="announce each version as a LoRA adapter to load (default) or as a model name",
    )
    parser.add_argument(
        "--adapter", default=None, help="the LoRA adapter folder each version names (for vLLM)"
    )
    parser.add_argument(
        "--prefix",
        default=None,
        help="versions are named PREFIX-v1, PREFIX-v2, ... (default: reference- and a tag of the run)",
    )
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between looks")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each training step takes")
    parser.add_argument(
        "--batches", type=int, default=None, help="stop after training this many batches"
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=None,
        help="give up after this many seconds with nothing to do (default: wait forever)",
    )
    parser.add_argument(
        "--lag",
        type=int,
        default=0,
        help="announce a batch's version only once this many later batches are out (a slow trainer)",
    )
    parser.set_defaults(func=cmd_reference_trainer)
