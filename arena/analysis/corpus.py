"""What a corpus holds: worlds, schemas, tools, levels, families, Judge outcomes, the split and a diversity measure.

:func:`corpus_report` summarizes a corpus folder (``coevo corpus report DIR
[--json]``; read by :func:`coevo.arena.gamelog.corpus.read_corpus`) and
:func:`plot_corpus` draws it.
"""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
from coevo.arena.gamelog.corpus import held_out, read_corpus
from coevo.arena.gamelog.figures import rejection_counts
from coevo.arena.gamelog.log import accepted_ids
from coevo.arena.ids import canonical_json
from coevo.arena.novelty import diversity, signature
from coevo.arena.spec import TaskSpec, WorldSpec

__all__ = ["corpus_report", "plot_corpus", "report_lines"]

_SAMPLE: Final = 512


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
    verdicts = tables["verdicts"]
    accepted = accepted_ids(verdicts)
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
        "rejected": verdicts.num_rows - sum(verdicts.column("accepted").to_pylist()),
        "rejections": dict(rejection_counts(verdicts).most_common()),
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
