"""What a corpus holds: worlds, schemas, tools, levels, families, Judge outcomes, the split and a diversity measure.

:func:`read_corpus` reads a corpus folder (``coevo corpus build``) as the
game log's tables; :func:`corpus_report` summarizes it (``coevo corpus
report DIR [--json]``) and :func:`plot_corpus` draws it. Only committed
shards are read (the parts of a shard being written are hidden).
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.dataset as ds
from coevo.arena.errors import CoevoError
from coevo.arena.gamelog import SCHEMAS, RunDir
from coevo.arena.ids import canonical_json
from coevo.arena.novelty import diversity, signature
from coevo.arena.spec import TaskSpec, WorldSpec

__all__ = [
    "CORPUS_MANIFEST",
    "corpus_report",
    "held_out",
    "is_corpus",
    "plot_corpus",
    "read_corpus",
    "report_lines",
]

CORPUS_MANIFEST: Final = "corpus.json"
_SAMPLE: Final = 512


def is_corpus(folder: str) -> bool:
    """Whether ``folder`` holds a corpus (its manifest)."""
    return RunDir(folder).exists(CORPUS_MANIFEST)


def held_out(world_id: str, share: float) -> bool:
    """Whether a world is in a corpus's eval split: the first eight hex digits of its id below ``share × 16⁸``."""
    return int(world_id.removeprefix("sha256:")[:8], 16) < share * 16**8


def read_corpus(folder: str) -> tuple[dict[str, Any], dict[str, pa.Table]]:
    """The manifest and every game-log table of a corpus (its shard as ``gen``; tables it lacks empty).

    Raises:
        CoevoError: no corpus there, or its manifest is not one.
    """
    run = RunDir(folder)
    if not run.exists(CORPUS_MANIFEST):
        raise CoevoError(
            f"{folder} holds no corpus (no {CORPUS_MANIFEST}); build one with `coevo corpus build`"
        )
    try:
        manifest = json.loads(run.read_bytes(CORPUS_MANIFEST))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CoevoError(f"{folder}/{CORPUS_MANIFEST} is not JSON ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != "coevo.corpus/1":
        raise CoevoError(f"{folder}/{CORPUS_MANIFEST} is not a coevo.corpus/1 manifest")
    tables = {}
    for name, schema in SCHEMAS.items():
        with_gen = schema.append(pa.field("gen", pa.int32()))
        if name in manifest.get("tables", []) and run.exists(name):
            data = ds.dataset(
                run.path(name),
                filesystem=run.fs,
                format="parquet",
                partitioning=ds.partitioning(pa.schema([("shard", pa.int32())]), flavor="hive"),
            ).to_table()
            data = data.rename_columns([c if c != "shard" else "gen" for c in data.column_names])
            tables[name] = data.select(with_gen.names).cast(with_gen)
        else:
            tables[name] = with_gen.empty_table()
    return manifest, tables


def _worlds(tables: dict[str, pa.Table]) -> dict[str, WorldSpec]:
    worlds = tables["worlds"]
    return {
        w: WorldSpec.model_validate_json(spec)
        for w, spec in zip(
            worlds.column("world_id").to_pylist(), worlds.column("spec").to_pylist(), strict=True
        )
    }


def corpus_report(folder: str) -> dict[str, Any]:
    """Everything ``coevo corpus report`` prints, JSON-ready."""
    manifest, tables = read_corpus(folder)
    share = float(manifest.get("split", {}).get("eval_share", 0.0))
    worlds = _worlds(tables)
    tools = [len(w.tools) for w in worlds.values()]
    schemas = Counter(canonical_json(w.schema_sql) for w in worlds.values())
    tasks = tables["tasks"]
    verdicts = tables["verdicts"].to_pylist()
    accepted = {v["task_id"] for v in verdicts if v["accepted"]}
    rejections: Counter[str] = Counter(
        name for v in verdicts if not v["accepted"] for name in (v["failed"] or ["error"])
    )
    rows = tasks.drop_columns(["spec"]).to_pylist()
    eval_worlds = {w for w in worlds if held_out(w, share)}
    chosen = sorted(accepted)[:_SAMPLE]
    specs = dict(
        zip(tasks.column("task_id").to_pylist(), tasks.column("spec").to_pylist(), strict=True)
    )
    signed = [
        signature(TaskSpec.model_validate_json(specs[t]), worlds) for t in chosen if t in specs
    ]
    return {
        "folder": folder,
        "coevo": manifest.get("coevo"),
        "source": manifest.get("source"),
        "shards": len(set(tasks.column("gen").to_pylist())) if tasks.num_rows else 0,
        "worlds": len(worlds),
        "tasks": tasks.num_rows,
        "accepted": len(accepted),
        "rejected": len(verdicts) - len(accepted),
        "rejections": dict(rejections.most_common()),
        "domains": dict(Counter(w.domain for w in worlds.values()).most_common()),
        "schemas": len(schemas),
        "tools_per_world": {
            "min": min(tools, default=0),
            "mean": statistics.fmean(tools) if tools else 0.0,
            "max": max(tools, default=0),
        },
        "levels": dict(
            sorted(Counter(r["level"] for r in rows).items(), key=lambda kv: str(kv[0]))
        ),
        "families": dict(Counter(r["family"] for r in rows).most_common()),
        "split": {
            "eval_share": share,
            "eval_worlds": len(eval_worlds),
            "eval_tasks": sum(1 for r in rows if r["world_id"] in eval_worlds),
            "train_tasks": sum(1 for r in rows if r["world_id"] not in eval_worlds),
        },
        "diversity": diversity(signed) if len(signed) > 1 else None,
        "diversity_sample": len(signed),
    }


def report_lines(report: dict[str, Any]) -> list[str]:
    """The report as ``coevo corpus report`` prints it."""
    tools = report["tools_per_world"]
    split = report["split"]

    def shares(counts: dict[Any, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in counts.items()) or "–"

    div = report["diversity"]
    return [
        f"{report['folder']}: {report['worlds']} worlds, {report['tasks']} tasks in "
        f"{report['shards']} shards (coevo {report['coevo']})",
        f"domains: {shares(report['domains'])}; {report['schemas']} distinct schemas",
        f"tools per world: {tools['min']}–{tools['max']} (mean {tools['mean']:.1f})",
        f"levels: {shares(report['levels'])}",
        f"families: {shares(report['families'])}",
        f"Judge: {report['accepted']} accepted, {report['rejected']} rejected"
        + (f" ({shares(report['rejections'])})" if report["rejections"] else ""),
        f"split by world: {split['eval_worlds']} eval worlds ({split['eval_tasks']} tasks), "
        f"{split['train_tasks']} train tasks (eval share {split['eval_share']})",
        "diversity (mean signature distance, docs/novelty.md): "
        + ("–" if div is None else f"{div:.3f} over {report['diversity_sample']} accepted tasks"),
    ]


def plot_corpus(report: dict[str, Any], path: str | Path) -> Path:
    """A figure of the report (domains, levels, families, Judge outcomes) as a PNG file."""
    import matplotlib  # lazy: only when a figure is asked for

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: as above

    panels = [
        ("worlds per domain", report["domains"]),
        ("tasks per level", {str(k): v for k, v in report["levels"].items()}),
        ("tasks per family", {str(k): v for k, v in report["families"].items()}),
        ("Judge", {"accepted": report["accepted"], **report["rejections"]}),
    ]
    figure, axes = plt.subplots(1, 4, figsize=(16, 3.5))
    for ax, (title, counts) in zip(axes, panels, strict=True):
        ax.bar(list(map(str, counts)), list(counts.values()))
        ax.set_title(title)
        ax.tick_params(axis="x", rotation=45)
    figure.tight_layout()
    target = Path(path)
    figure.savefig(target)
    plt.close(figure)
    return target
