"""``coevo logprobs``: do the log-probs a run recorded agree with a forward pass of the weights that played them?

A trainer's importance ratio divides its own log-probs by the ones the
server recorded; if the server and the trainer disagree about the same
weights (another tokenization, a chat template re-rendered, a precision
gap), every ratio is off before any training. This check recomputes, for
each interleaved trajectory of a run, the log-probability of every token the
model sampled, with the model folder and the adapter of the version that
played it (the run's ``policies`` table says which adapter; a run without a
trainer played the served model; a version the server served from an adapter
of its own, a warm start loaded by name, is named with ``--adapter
VERSION=PATH``), and reports the difference per version:
tokens, mean and largest ``|Δ|`` in nats.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import torch
from coevo.arena.errors import ArenaError
from coevo.arena.gamelog import GameLog
from coevo.run.train.policy import (
    choose_device,
    choose_dtype,
    load_model,
    peft_quietly,
    token_logprobs,
)
from coevo.run.train.sequences import sampled_temperature, unreproducible
from peft import PeftModel

__all__ = ["Agreement", "check_logprobs", "main"]


@dataclass(frozen=True)
class Agreement:
    """How one trajectory's recorded log-probs compare with a forward pass.

    Attributes:
        episode_id: the trajectory.
        version: the policy that played it.
        tokens: the sampled tokens compared.
        mean_abs: the mean ``|recorded - recomputed|`` over them (nats).
        max_abs: the largest.
    """

    episode_id: str
    version: str
    tokens: int
    mean_abs: float
    max_abs: float


def _adapters(log: GameLog) -> dict[str, str | None]:
    """Each version that played → its adapter folder (None: the served model itself)."""
    policies = log.read("policies", columns=["version", "lora_path"]).to_pylist()
    return {row["version"]: row["lora_path"] for row in policies}


def check_logprobs(
    run_dir: str,
    model: str,
    *,
    gens: list[int] | None = None,
    limit: int | None = None,
    device: str = "auto",
    dtype: str = "float32",
    served: dict[str, str] | None = None,
) -> list[Agreement]:
    """The agreement of every interleaved trajectory of ``run_dir`` (or of ``gens``; at most ``limit``, spread evenly over the log's order, so over every generation checked).

    ``served`` names the adapter folder of a version the log has none for (a
    warm start the server loaded under that name).

    Raises:
        ArenaError: the run holds no trajectory with token ids and log-probs, or an adapter is missing.
    """
    log = GameLog(run_dir)
    table = log.read(
        "trajectories",
        gens=gens,
        columns=[
            "episode_id",
            "policy_version",
            "layout",
            "token_ids",
            "logprobs",
            "loss_mask",
            "sampling",
        ],
    )
    rows = [
        r
        for r in table.to_pylist()
        if r["layout"] == "interleaved" and r["logprobs"] and unreproducible(r["sampling"]) is None
    ]
    if limit is not None and len(rows) > limit:
        rows = [rows[i * len(rows) // limit] for i in range(limit)]
    if not rows:
        raise ArenaError(
            f"{run_dir}: no interleaved trajectory with log-probs to check (a run against a "
            "server that returns token ids: vLLM, SGLang; sampled at a temperature above 0, "
            "with no top-p, top-k or penalty)"
        )
    adapters = _adapters(log)
    for version, folder in (served or {}).items():
        if adapters.get(version) is not None:
            raise ArenaError(
                f"--adapter {version}=...: the run's policies table already names its adapter "
                f"({adapters[version]})"
            )
        adapters[version] = folder
    where = choose_device(device)
    base = load_model(model, where, choose_dtype(dtype, where))
    base.eval()
    by_version: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_version[row["policy_version"]].append(row)
    out: list[Agreement] = []
    peft_model: Any = None
    for version in sorted(by_version):
        path = adapters.get(version)
        if path is None:
            scorer = base if peft_model is None else peft_model
            disabled = peft_model is not None
        else:
            if not (Path(path) / "adapter_model.safetensors").is_file():
                raise ArenaError(
                    f"the adapter of {version} ({path}) holds no adapter_model.safetensors"
                )
            with peft_quietly():
                if peft_model is None:
                    peft_model = PeftModel.from_pretrained(base, path, adapter_name=version)
                else:
                    peft_model.load_adapter(path, adapter_name=version)
            peft_model.set_adapter(version)
            peft_model.eval()
            scorer, disabled = peft_model, False
        for row in by_version[version]:
            out.append(_agreement(scorer, disabled, row, version))
    return out


def _agreement(scorer: Any, disabled: bool, row: dict[str, Any], version: str) -> Agreement:
    ids, mask, recorded = row["token_ids"], row["loss_mask"], row["logprobs"]
    positions = [i for i, m in enumerate(mask) if m and i > 0 and recorded[i] is not None]
    temperature = sampled_temperature(row["sampling"])
    with torch.no_grad():
        if disabled:
            with scorer.disable_adapter():
                again = token_logprobs(scorer, ids, positions, temperature=temperature)
        else:
            again = token_logprobs(scorer, ids, positions, temperature=temperature)
    given = torch.tensor([recorded[i] for i in positions], dtype=torch.float32)
    gap = (given - again.cpu()).abs()
    return Agreement(
        episode_id=row["episode_id"],
        version=version,
        tokens=len(positions),
        mean_abs=float(gap.mean()) if positions else 0.0,
        max_abs=float(gap.max()) if positions else 0.0,
    )


def summary(agreements: list[Agreement]) -> list[dict[str, Any]]:
    """Per version: trajectories, tokens, the token-weighted mean ``|Δ|`` and the largest."""
    out = []
    for version in sorted({a.version for a in agreements}):
        mine = [a for a in agreements if a.version == version]
        tokens = sum(a.tokens for a in mine)
        out.append(
            {
                "version": version,
                "trajectories": len(mine),
                "tokens": tokens,
                "mean_abs": sum(a.mean_abs * a.tokens for a in mine) / max(tokens, 1),
                "max_abs": max(a.max_abs for a in mine),
            }
        )
    return out


def main(
    run_dir: str,
    model: str,
    *,
    gens: list[int] | None,
    limit: int | None,
    device: str,
    dtype: str,
    as_json: bool,
    served: dict[str, str] | None = None,
    out: TextIO = sys.stdout,
) -> int:
    """``coevo logprobs``: print the agreement per version (or every trajectory's, as JSON)."""
    agreements = check_logprobs(
        run_dir, model, gens=gens, limit=limit, device=device, dtype=dtype, served=served
    )
    per_version = summary(agreements)
    if as_json:
        print(
            json.dumps({"versions": per_version, "trajectories": [a.__dict__ for a in agreements]}),
            file=out,
        )
        return 0
    print(
        f"{'version':<32} {'trajectories':>12} {'tokens':>8} {'mean |Δ|':>9} {'max |Δ|':>8}",
        file=out,
    )
    for v in per_version:
        print(
            f"{v['version']:<32} {v['trajectories']:>12} {v['tokens']:>8} "
            f"{v['mean_abs']:>9.4f} {v['max_abs']:>8.4f}",
            file=out,
        )
    return 0
