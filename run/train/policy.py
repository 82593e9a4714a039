"""The policy ``coevo train`` and ``coevo sft`` train: a Hugging Face causal LM with a PEFT LoRA adapter, and what it keeps on disk.

* :func:`load_model`: the base weights, from a local folder, as safetensors
  only (a ``pytorch_model.bin`` is a pickle: never read), with no remote code,
  frozen, in bfloat16 where the device computes in it (:func:`choose_dtype`);
* :func:`with_adapter`: a new LoRA adapter (PEFT's ``get_peft_model``, seeded;
  its B matrices start at 0, so the new policy is the base model), or one
  read from a folder that holds ``adapter_model.safetensors``; the adapter's
  weights are float32 whatever the base's; every dropout of the model is off
  (:func:`without_dropout`: a policy gradient needs the log-probs of the
  policy that is sampled, not of a thinned one, as TRL does);
* :class:`Scorer`: the log-probabilities of chosen tokens of many sequences
  at once: sequences of like length padded into one forward pass of the
  decoder (:func:`micro_batches`), its last hidden states gathered at the
  scored positions only, and the output head applied there in float32, in
  chunks whose logits are recomputed in the backward pass rather than kept
  (the vocabulary projection is most of a small model's memory); the
  entropy of each scored position comes with it;
* :func:`save_version` / :func:`load_optimizer`: a version's folder, which
  is a checkpoint as well as what vLLM loads: ``adapter/`` (PEFT's
  ``save_pretrained``), ``optimizer.safetensors`` (AdamW's moments, by
  parameter name) and ``state.json``: tensors and JSON, never a pickle; a
  version whose weights are not all finite is refused.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import torch
from coevo.arena.bounded import MAX_JSON_BYTES, loads_json, open_regular, read_regular
from coevo.arena.errors import ArenaError
from coevo.run.train.settings import AdapterSettings
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch.utils.checkpoint import checkpoint
from transformers import AutoModelForCausalLM

__all__ = [
    "REFERENCE",
    "Scored",
    "Scorer",
    "choose_device",
    "choose_dtype",
    "load_model",
    "load_optimizer",
    "lora_norms",
    "micro_batches",
    "non_finite",
    "peft_quietly",
    "save_version",
    "token_logprobs",
    "trainable",
    "with_adapter",
    "without_dropout",
]

REFERENCE: Final = "reference"
"""The name of the frozen copy of the starting adapter (the KL term's reference)."""
HEAD_CHUNK: Final = 1024
"""Scored positions whose logits are computed at once (then recomputed in the backward pass)."""
PAD_TO: Final = 64
"""A micro-batch is padded to a multiple of this many tokens: a few shapes, not one per batch.

On a CPU, oneDNN caches a compiled primitive (and its scratch memory) per
shape it sees; sequences of every length made a new shape each micro-batch,
and the trainer's memory kept growing (a warm start's trial run before
this: 2.4 to 9.4 GB in 30 minutes). Measured on SmolLM2-135M, 60 steps of
two random sequences of 80–400 tokens: unpadded, 2.7 GB after 20 steps and
3.3 GB after 60, still growing; padded to 64, 2.67 GB from step 20 on.
Padding costs at most 63 tokens a sequence."""


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


def choose_dtype(setting: str, device: torch.device) -> torch.dtype:
    """The frozen base's precision: ``auto`` is bfloat16 where ``device`` computes in it, else float32."""
    if setting == "float32":
        return torch.float32
    if setting == "bfloat16":
        return torch.bfloat16
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    supported = (
        getattr(torch.backends.mkldnn, "is_available", lambda: False)()
        and getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)()
    )
    return torch.bfloat16 if supported else torch.float32


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


def load_model(folder: str, device: torch.device, dtype: torch.dtype = torch.float32) -> Any:
    """The base model in ``folder`` (weights in ``dtype`` on ``device``, frozen), from safetensors only.

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
            dtype=dtype,
            local_files_only=True,
            use_safetensors=True,
            trust_remote_code=False,
        )
    except (OSError, ValueError) as exc:
        raise ArenaError(f"--model {folder}: transformers could not load it: {exc}") from None
    model.requires_grad_(False)
    return model.to(device)


def without_dropout(model: Any, keep_lora: bool = False) -> Any:
    """``model`` with every dropout off (``p = 0``), but LoRA's own when ``keep_lora``; returned for chaining.

    A policy gradient weighs the log-probs of the policy that sampled: dropout
    in the trainer's forward pass would score a thinned network instead (TRL
    turns it off for the same reason). With it off the model can stay in
    training mode (gradient checkpointing needs that) at no cost.
    """
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Dropout) and not (keep_lora and "lora_dropout" in name):
            module.p = 0.0
        if isinstance(getattr(module, "attention_dropout", None), float):
            module.attention_dropout = 0.0
    return model


MAX_ADAPTER_BYTES: Final = 16 << 30
"""The largest adapter (or optimizer state) file read: a rank-64 adapter of a 70B model is a few GB."""

MAX_SAFETENSORS_HEADER: Final = 100 << 20
"""The largest safetensors header read (the safetensors library's own bound)."""

_ITEM_BYTES: Final = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2,
    "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip


def check_safetensors(path: Path) -> None:
    """Check that ``path`` is a safetensors file whose header says what it holds and fits in it, before any reader maps it.

    The header is read whole only once its stated length is known to fit in
    the file (a length of 2⁶² is refused, not allocated); every tensor's
    bytes must lie inside the file and match its shape and type.

    Raises:
        ArenaError: it is not a regular file within :data:`MAX_ADAPTER_BYTES`, or not
            safetensors (the message says what is wrong).
    """
    where = str(path)
    try:
        fd = open_regular(path, limit=MAX_ADAPTER_BYTES)
    except OSError as exc:  # FileRefusedError too: a link, a FIFO, too big
        raise ArenaError(f"{where} cannot be read: {exc}") from None
    with os.fdopen(fd, "rb") as file:
        size = os.fstat(fd).st_size
        head = file.read(8)
        length = int.from_bytes(head, "little") if len(head) == 8 else -1
        if length < 2 or length > min(size - 8, MAX_SAFETENSORS_HEADER):
            raise ArenaError(
                f"{where} is not a safetensors file: its header length ({length}) does not fit "
                f"in the file ({size} bytes)"
            )
        try:
            header = loads_json(file.read(length), where)
        except ValueError as exc:
            raise ArenaError(f"{where} is not a safetensors file: {exc}") from None
    data = size - 8 - length
    if not isinstance(header, dict):
        raise ArenaError(f"{where} is not a safetensors file: its header is not a JSON object")
    for name, info in header.items():
        if name == "__metadata__":
            continue
        problem = _tensor_problem(info, data)
        if problem:
            raise ArenaError(f"{where} is not a safetensors file: tensor {name[:80]!r} {problem}")


def _tensor_problem(info: Any, data: int) -> str | None:
    """What is wrong with one tensor's header entry in a file of ``data`` bytes of tensors (None: nothing)."""
    if not isinstance(info, dict):
        return "has no entry of dtype, shape and offsets"
    item = _ITEM_BYTES.get(info.get("dtype"))  # type: ignore[arg-type]
    shape, offsets = info.get("shape"), info.get("data_offsets")
    if item is None:
        return f"has a dtype coevo does not read ({str(info.get('dtype'))[:20]!r})"
    if not isinstance(shape, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 40 for n in shape
    ):
        return "has a shape that is not a list of sizes"
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) for n in offsets)
        and 0 <= offsets[0] <= offsets[1] <= data
    ):
        return f"has its bytes outside the file (offsets {str(offsets)[:40]})"
    count = 1
    for n in shape:
        count *= n
    if count * item != offsets[1] - offsets[0]:
        return f"holds {offsets[1] - offsets[0]} bytes, not the {count * item} its shape and dtype take"
    return None


def _check_adapter_folder(adapter: str) -> None:
    where = Path(adapter)
    if (
        not (where / "adapter_config.json").is_file()
        or not (where / "adapter_model.safetensors").is_file()
    ):
        raise ArenaError(
            f"{adapter}: not a PEFT LoRA adapter folder with adapter_config.json and "
            "adapter_model.safetensors (a .bin adapter is a pickle, which coevo never reads)"
        )
    try:
        config = loads_json(
            read_regular(where / "adapter_config.json", limit=MAX_JSON_BYTES),
            str(where / "adapter_config.json"),
        )
    except (OSError, ValueError) as exc:  # FileRefusedError too: a link, a FIFO, too big
        raise ArenaError(f"{adapter}: its adapter_config.json cannot be read: {exc}") from None
    if not isinstance(config, dict):
        raise ArenaError(f"{adapter}: its adapter_config.json is not a JSON object")
    check_safetensors(where / "adapter_model.safetensors")


def with_adapter(
    model: Any, settings: AdapterSettings, adapter: str | None, *, reference: str | None = None
) -> Any:
    """``model`` with a trainable LoRA adapter (float32): read from ``adapter``, or new (seeded by ``settings.seed``).

    Args:
        model: the base model.
        settings: the adapter's shape (for a new one) and the gradient checkpointing setting.
        adapter: the folder to start from (None: a new adapter).
        reference: a folder to load beside it, frozen, as :data:`REFERENCE` (the KL term's).

    Raises:
        ArenaError: a folder holds no ``adapter_model.safetensors`` (a ``.bin`` is a pickle),
            or the adapter does not fit the model.
    """
    try:
        if adapter is not None:
            _check_adapter_folder(adapter)
            with peft_quietly():
                peft_model = PeftModel.from_pretrained(model, adapter, is_trainable=True)
        else:
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
                peft_model = get_peft_model(model, config)
        if reference is not None:
            _check_adapter_folder(reference)
            with peft_quietly():
                peft_model.load_adapter(reference, adapter_name=REFERENCE, is_trainable=False)
    except (ValueError, KeyError, RuntimeError, SafetensorError) as exc:
        raise ArenaError(f"the adapter does not fit the model: {exc}") from None
    for parameter in trainable(peft_model).values():
        parameter.data = parameter.data.float()
    if settings.gradient_checkpointing:
        peft_model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False}
        )
        peft_model.enable_input_require_grads()
    without_dropout(peft_model, keep_lora=settings.lora_dropout > 0)
    peft_model.train()
    return peft_model


def micro_batches(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Indices of sequences grouped for one forward pass each: like lengths together, at most ``budget`` padded tokens a group.

    Sorted by length (longest first), a group grows while its size times its
    longest member fits ``budget``; a sequence longer than ``budget`` is a
    group of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    groups: list[list[int]] = []
    for i in order:
        if groups and (len(groups[-1]) + 1) * lengths[groups[-1][0]] <= budget:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


@dataclass(frozen=True)
class Scored:
    """The scored tokens of a micro-batch, flattened in order (sequence by sequence, position by position).

    Attributes:
        logp: each token's log-probability (with gradient when asked).
        entropy: the entropy of the policy's distribution where each was sampled (no gradient).
    """

    logp: torch.Tensor
    entropy: torch.Tensor


def _head_chunk(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: torch.Tensor,
    temperature: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    logits = hidden.float() @ weight.t()
    if bias is not None:
        logits = logits + bias
    logits = logits / temperature.unsqueeze(-1)
    normaliser = torch.logsumexp(logits, dim=-1)
    chosen = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - normaliser
    with torch.no_grad():
        probs = torch.softmax(logits, dim=-1)
        entropy = normaliser - (probs * logits).sum(-1)
    return chosen, entropy


class Scorer:
    """Log-probabilities of chosen tokens under a (PEFT) causal LM, many sequences per forward pass.

    Args:
        model: the model (a ``PeftModel`` or a plain causal LM).
        pad_id: the token padding a short sequence (never scored).
    """

    def __init__(self, model: Any, pad_id: int = 0):
        self.model = model
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.decoder = base.get_decoder()
        head = base.get_output_embeddings()
        if self.decoder is None or head is None:
            raise ArenaError(
                f"{type(base).__name__} shows no decoder and output head (get_decoder, "
                "get_output_embeddings): coevo trains causal LMs that do"
            )
        self.head = head
        self.pad_id = pad_id
        self.device = next(model.parameters()).device
        self._weight: torch.Tensor | None = None

    def _head_weight(self) -> torch.Tensor:
        """The output head's weight in float32 (a copy, kept: the head is frozen)."""
        if self._weight is None or self._weight.dtype != torch.float32:
            self._weight = self.head.weight.detach().float()
        return self._weight

    def score(
        self,
        sequences: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]],
        temperatures: Sequence[float],
        *,
        grad: bool = True,
    ) -> Scored:
        """The log-prob of ``sequences[i][p]`` given the tokens before it, for every ``p`` of ``positions[i]``.

        One forward pass of the decoder over the sequences padded to the
        longest (right padding, masked), the hidden state before each scored
        position gathered, and the head applied in float32 there, in chunks
        (recomputed in the backward pass when ``grad``).
        """
        longest = -(-max(len(s) for s in sequences) // PAD_TO) * PAD_TO
        ids = torch.full((len(sequences), longest), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(sequences), longest), dtype=torch.long)
        rows, before, targets, temps = [], [], [], []
        for i, (tokens, wanted, temperature) in enumerate(
            zip(sequences, positions, temperatures, strict=True)
        ):
            ids[i, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
            attention[i, : len(tokens)] = 1
            rows += [i] * len(wanted)
            before += [p - 1 for p in wanted]
            targets += [tokens[p] for p in wanted]
            temps += [temperature] * len(wanted)
        ids, attention = ids.to(self.device), attention.to(self.device)
        context = contextlib.nullcontext() if grad else torch.no_grad()
        with context:
            hidden = self.decoder(input_ids=ids, attention_mask=attention).last_hidden_state
            picked = hidden[
                torch.tensor(rows, device=self.device), torch.tensor(before, device=self.device)
            ]
            target = torch.tensor(targets, dtype=torch.long, device=self.device)
            temperature = torch.tensor(temps, dtype=torch.float32, device=self.device)
            weight = self._head_weight()
            bias = getattr(self.head, "bias", None)
            bias = None if bias is None else bias.detach().float()
            logps, entropies = [], []
            for start in range(0, len(rows), HEAD_CHUNK):
                part = slice(start, start + HEAD_CHUNK)
                arguments = (picked[part], weight, bias, target[part], temperature[part])
                if grad and picked.requires_grad:
                    chosen, entropy = checkpoint(_head_chunk, *arguments, use_reentrant=False)
                else:
                    chosen, entropy = _head_chunk(*arguments)
                logps.append(chosen)
                entropies.append(entropy)
        empty = torch.zeros(0, device=self.device)
        return Scored(
            logp=torch.cat(logps) if logps else empty,
            entropy=torch.cat(entropies).detach() if entropies else empty,
        )

    @contextlib.contextmanager
    def reference(self) -> Iterator[None]:
        """Score with the reference policy inside: the :data:`REFERENCE` adapter if loaded, else no adapter.

        PEFT's ``set_adapter`` makes the adapter it activates trainable and
        the others not; the trained adapter's state is put back on the way out.
        """
        model = self.model
        if REFERENCE in getattr(model, "peft_config", {}):
            active = model.active_adapter
            model.set_adapter(REFERENCE)
            try:
                yield
            finally:
                model.set_adapter(active)
                for name, parameter in model.named_parameters():
                    if "lora_" in name:
                        parameter.requires_grad_(f".{REFERENCE}." not in name)
        elif hasattr(model, "disable_adapter"):
            with model.disable_adapter():
                yield
        else:
            yield


def token_logprobs(
    model: Any,
    token_ids: list[int],
    positions: list[int],
    *,
    temperature: float = 1.0,
    grad: bool = False,
) -> torch.Tensor:
    """The log-probability of ``token_ids[p]`` given the tokens before it, for each ``p`` in ``positions`` (one sequence)."""
    return Scorer(model).score([token_ids], [positions], [temperature], grad=grad).logp


def lora_norms(model: Any) -> dict[str, float]:
    """The Frobenius norms of every trained LoRA ``A`` and ``B`` matrix, together (B is 0 in a new adapter)."""
    a = b = 0.0
    for name, parameter in trainable(model).items():
        if "lora_A" in name:
            a += float(parameter.detach().float().pow(2).sum())
        elif "lora_B" in name:
            b += float(parameter.detach().float().pow(2).sum())
    return {"lora_a": a**0.5, "lora_b": b**0.5}


def trainable(model: Any) -> dict[str, torch.nn.Parameter]:
    """The adapter's trained parameters, by name (the frozen reference's are not)."""
    return {
        n: p for n, p in model.named_parameters() if p.requires_grad and f".{REFERENCE}." not in n
    }


def non_finite(model: Any) -> list[str]:
    """The trained parameters holding a value that is not finite (empty: every one is)."""
    return [n for n, p in trainable(model).items() if not bool(torch.isfinite(p).all())]


def save_version(
    model: Any, optimizer: torch.optim.Optimizer, folder: Path, state: dict[str, Any]
) -> None:
    """Write a version's folder whole: ``adapter/``, ``optimizer.safetensors``, ``state.json``.

    Written beside it, then moved into place; a folder of that name left by a
    step that was killed before its journal entry is replaced.

    Raises:
        ArenaError: a trained weight is not finite (nothing is written: a version that
            would play NaN is never announced).
    """
    bad = non_finite(model)
    if bad:
        raise ArenaError(
            f"{folder.name}: {len(bad)} of the adapter's tensors hold values that are not finite "
            f"(first {bad[0]}); the version is not saved or announced. Lower --learning-rate, "
            "or check the batch"
        )
    partial = folder.with_name(f".{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    with peft_quietly():
        model.save_pretrained(
            str(partial / "adapter"), safe_serialization=True, selected_adapters=["default"]
        )
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
    swap_into_place(partial, folder)


def _renameat2() -> Any:
    """Linux's ``renameat2`` (glibc 2.28+), or None where there is none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.renameat2
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


_AT_FDCWD: Final = -100
_RENAME_EXCHANGE: Final = 2


def swap_into_place(new: Path, folder: Path) -> None:
    """Put the folder ``new`` at ``folder``, replacing one there with no moment when ``folder`` is missing.

    A folder of that name (left by a step killed before its journal entry) is
    exchanged with ``new`` in one ``renameat2(RENAME_EXCHANGE)`` and then
    deleted; where the system has no such call, it is moved aside first (two
    renames, an instant apart). A new name is one ``rename``.
    """
    try:
        os.rename(new, folder)  # atomic, and refuses a non-empty folder in the way
        return
    except OSError:
        if not folder.is_dir() or folder.is_symlink():
            raise
    call = _renameat2()
    if call is not None and (
        call(_AT_FDCWD, bytes(new), _AT_FDCWD, bytes(folder), _RENAME_EXCHANGE) == 0
    ):
        shutil.rmtree(new)  # what was at ``folder``
        return
    aside = folder.with_name(f".{folder.name}.old-{os.getpid()}")
    os.rename(folder, aside)
    os.rename(new, folder)
    shutil.rmtree(aside)


def load_optimizer(model: Any, optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """Restore AdamW's moments saved by :func:`save_version` in ``folder`` (none saved: a fresh optimizer).

    Raises:
        ArenaError: the file does not match the adapter's parameters.
    """
    where = folder / "optimizer.safetensors"
    if not where.is_file():
        return
    check_safetensors(where)
    try:
        saved = load_file(str(where))
    except SafetensorError as exc:
        raise ArenaError(f"{where} cannot be read: {exc}") from None
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
