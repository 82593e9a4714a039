"""The policy ``coevo train`` trains: a Hugging Face causal LM with a PEFT LoRA adapter, and what it keeps on disk.

* :func:`load_model`: the base weights, from a local folder, as safetensors
  only (a ``pytorch_model.bin`` is a pickle: never read), with no remote code;
* :func:`with_adapter`: a new LoRA adapter (PEFT's ``get_peft_model``, seeded;
  its B matrices start at 0, so the new policy is the base model), or one
  read from a folder that holds ``adapter_model.safetensors``;
* :func:`token_logprobs`: the log-probabilities of chosen tokens of a
  sequence, from one forward pass that computes logits only where asked
  (``logits_to_keep``);
* :func:`save_version` / :func:`load_optimizer`: a version's folder, which
  is a checkpoint as well as what vLLM loads: ``adapter/`` (PEFT's
  ``save_pretrained``), ``optimizer.safetensors`` (AdamW's moments, by
  parameter name) and ``state.json``: tensors and JSON, never a pickle.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from coevo.arena.errors import ArenaError
from coevo.run.train.settings import TrainSettings
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

__all__ = [
    "choose_device",
    "load_model",
    "load_optimizer",
    "lora_norms",
    "peft_quietly",
    "save_version",
    "token_logprobs",
    "with_adapter",
]


def choose_device(setting: str) -> torch.device:
    """``auto``: cuda when torch sees a GPU, else cpu.

    Raises:
        ArenaError: cuda asked for and none is there.
    """
    if setting == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if setting == "cuda" and not torch.cuda.is_available():
        raise ArenaError(
            "--device cuda: torch sees no GPU here (torch.cuda.is_available() is false)"
        )
    return torch.device(setting)


@contextlib.contextmanager
def peft_quietly() -> Iterator[None]:
    """Around PEFT's wrapping of a model: no FutureWarning for the property PEFT reads, which is not ours to fix.

    PEFT (0.21) asks every model it wraps for ``is_gradient_checkpointing``,
    which transformers 5.25 deprecated in favour of
    ``is_activation_checkpointing``: a FutureWarning on standard error at every
    ``coevo train`` and ``coevo logprobs``, about code the user did not write.
    Only that message is silenced, only here.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
        )
        yield


def load_model(folder: str, device: torch.device) -> Any:
    """The base model in ``folder`` (float32 weights on ``device``), from safetensors only.

    Raises:
        ArenaError: the folder holds no Hugging Face model in safetensors.
    """
    where = Path(folder)
    if not (where / "config.json").is_file() or not any(where.glob("*.safetensors")):
        raise ArenaError(
            f"--model {folder}: not a Hugging Face model folder with safetensors weights "
            "(config.json and *.safetensors; the weights the server serves)"
        )
    try:
        model = AutoModelForCausalLM.from_pretrained(
            folder,
            dtype=torch.float32,
            local_files_only=True,
            use_safetensors=True,
            trust_remote_code=False,
        )
    except (OSError, ValueError) as exc:
        raise ArenaError(f"--model {folder}: transformers could not load it: {exc}") from None
    return model.to(device)


def with_adapter(model: Any, settings: TrainSettings, adapter: str | None) -> Any:
    """``model`` with a trainable LoRA adapter: read from ``adapter``, or new (seeded by ``settings.seed``).

    Raises:
        ArenaError: ``adapter`` holds no ``adapter_model.safetensors`` (a ``.bin`` is a pickle).
    """
    if adapter is not None:
        where = Path(adapter)
        if (
            not (where / "adapter_config.json").is_file()
            or not (where / "adapter_model.safetensors").is_file()
        ):
            raise ArenaError(
                f"{adapter}: not a PEFT LoRA adapter folder with adapter_config.json and "
                "adapter_model.safetensors (a .bin adapter is a pickle, which coevo never reads)"
            )
        with peft_quietly():
            return PeftModel.from_pretrained(model, adapter, is_trainable=True)
    targets: str | list[str] = settings.target_modules
    if targets != "all-linear":
        targets = [t.strip() for t in settings.target_modules.split(",") if t.strip()]
    torch.manual_seed(settings.seed)
    config = LoraConfig(
        r=settings.lora_rank,
        lora_alpha=settings.lora_alpha,
        lora_dropout=settings.lora_dropout,
        target_modules=targets,
        task_type="CAUSAL_LM",
    )
    with peft_quietly():
        return get_peft_model(model, config)


def token_logprobs(
    model: Any,
    token_ids: list[int],
    positions: list[int],
    *,
    temperature: float = 1.0,
    dtype: str = "float32",
) -> torch.Tensor:
    """The log-probability of ``token_ids[p]`` given the tokens before it, for each ``p`` in ``positions``.

    One forward pass over the sequence; logits are computed only at the
    positions before those asked for (``logits_to_keep``), in float32.
    """
    device = next(model.parameters()).device
    ids = torch.tensor([token_ids], dtype=torch.long, device=device)
    wanted = torch.tensor(positions, dtype=torch.long, device=device)
    before = wanted - 1
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype == "bfloat16")
    with autocast:
        try:
            logits = model(input_ids=ids, logits_to_keep=before).logits[0]
        except TypeError:  # a model that keeps every position's logits
            logits = model(input_ids=ids).logits[0, before]
    scores = torch.log_softmax(logits.float() / temperature, dim=-1)
    return scores.gather(-1, ids[0, wanted].unsqueeze(-1)).squeeze(-1)


def lora_norms(model: Any) -> dict[str, float]:
    """The Frobenius norms of every LoRA ``A`` and ``B`` matrix, together (B is 0 in a new adapter)."""
    a = b = 0.0
    for name, parameter in model.named_parameters():
        if "lora_A" in name:
            a += float(parameter.detach().float().pow(2).sum())
        elif "lora_B" in name:
            b += float(parameter.detach().float().pow(2).sum())
    return {"lora_a": a**0.5, "lora_b": b**0.5}


def trainable(model: Any) -> dict[str, torch.nn.Parameter]:
    """The adapter's parameters, by name."""
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def save_version(
    model: Any, optimizer: torch.optim.Optimizer, folder: Path, state: dict[str, Any]
) -> None:
    """Write a version's folder whole: ``adapter/``, ``optimizer.safetensors``, ``state.json``.

    Written beside it, then moved into place; a folder of that name left by a
    step that was killed before its journal entry is replaced.
    """
    partial = folder.with_name(f".{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    model.save_pretrained(str(partial / "adapter"), safe_serialization=True)
    tensors: dict[str, torch.Tensor] = {}
    names = {id(p): n for n, p in trainable(model).items()}
    for group in optimizer.param_groups:
        for parameter in group["params"]:
            moments = optimizer.state.get(parameter)
            if not moments:
                continue
            name = names[id(parameter)]
            for key, value in moments.items():
                tensor = value if torch.is_tensor(value) else torch.tensor(float(value))
                tensors[f"{name}::{key}"] = tensor.detach().cpu().contiguous()
    save_file(tensors, str(partial / "optimizer.safetensors"))
    (partial / "state.json").write_text(json.dumps(state, sort_keys=True, indent=1))
    if folder.exists():
        shutil.rmtree(folder)
    os.replace(partial, folder)


def load_optimizer(model: Any, optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """Restore AdamW's moments saved by :func:`save_version` in ``folder`` (none saved: a fresh optimizer).

    Raises:
        ArenaError: the file does not match the adapter's parameters.
    """
    where = folder / "optimizer.safetensors"
    if not where.is_file():
        return
    saved = load_file(str(where))
    params = trainable(model)
    for key, tensor in saved.items():
        name, _, moment = key.rpartition("::")
        if name not in params:
            raise ArenaError(
                f"{where} holds the optimizer state of {name!r}, which the adapter has no "
                "parameter of: it is another adapter's checkpoint"
            )
        parameter = params[name]
        optimizer.state[parameter][moment] = tensor.to(
            parameter.device if moment != "step" else "cpu"
        )
