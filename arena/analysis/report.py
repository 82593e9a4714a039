"""A self-contained HTML report of one or more runs (plots as embedded PNG, tables; no external resources).

    coevo report runs/uniform runs/plr runs/target-band --out report.html
    coevo report runs/uniform-* runs/plr-* --group curriculum.name --csv figures/ --png figures/

Figures, each with every run (or every setup) side by side:

1. success against training episodes: train, and the held-out eval with its
   95% interval (Wilson's, from ``coevo analyze``);
2. the level mastered (eval success at or above 0.5) and the curriculum's frontier, by generation;
3. eval success per level, a line per level with its 95% band, by generation
   (drawn at the generations evaluated, however spaced), a panel per run or setup;
4. rejection reasons (proposals failing each check);
5. calibration: the World model's predictions against the outcomes;
6. the proposal distribution: each level's share of a generation's proposals
   (stacked bars, a panel per run), with the curriculum's frontier, the mean
   level trained on and the mean level proposed overlaid;
7. the accepted pool's diversity and the mean proposer reward, by generation;

With ``group`` (a dotted key of the recorded experiment, e.g.
``curriculum.name``) the runs that share its value are one *setup*, usually
seeds of one configuration: figures 1 and 3 draw each setup's mean over its
runs per generation, with a 95% bootstrap interval over the runs (runs
resampled 10,000 times, seed 0; :func:`~coevo.arena.analysis.paired.paired_bootstrap`),
labelled ``curriculum.name=plr (3 seeds)``; the other figures stay per run.
Runs are labelled by name and seed (``quickstart seed 3``), their folder added
only where two would read alike. Each figure's data can be written as CSV
(``csv_dir``: ``FIGURE.csv``, the rows drawn) and each figure as a PNG
(``png_dir``: ``FIGURE.png``).

And a table per run: generations, episodes, final eval success, accepted
tasks, mutations and the lineage summary; and a table of each run's held-out
suites side by side, in-domain (the synthesized suite) and transfer
(``[[eval.suites]]``): the last evaluated generation's success with its 95%
interval, and pass^k at k = the suite's trials.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import math
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from coevo.arena.analysis.lineage import lineage_graph, lineage_summary
from coevo.arena.analysis.metrics import analyze, load_run
from coevo.arena.analysis.paired import paired_bootstrap
from coevo.arena.bounded import open_to_write
from coevo.arena.errors import CoevoError

__all__ = ["FIGURES", "render_report"]

FIGURES = (
    ("success", "Success against training episodes (eval: 95% intervals)"),
    (
        "mastered",
        "Level mastered (eval success ≥ 0.5) and the curriculum's frontier, by generation",
    ),
    ("levels", "Eval success per level, by generation (95% intervals)"),
    ("rejections", "Rejection reasons"),
    ("calibration", "World-model calibration"),
    ("proposals", "Proposal distribution by generation"),
    ("diversity", "Pool diversity and proposer reward by generation"),
)
"""The report's figures: (id, title), in order."""


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt  # heavy: loaded only when a report is drawn (see _figures)

    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def _label(metrics: dict[str, Any]) -> str:
    name = metrics.get("name") or "run"
    return f"{name} ({metrics.get('curriculum')}) — {metrics['run_dir']}"


def _figures(
    runs: list[dict[str, Any]],
    setups: list[tuple[str, list[dict[str, Any]]]],
    data: dict[str, list[dict[str, Any]]],
) -> dict[str, str]:
    """Every figure as a base64 PNG, by id; ``data`` gets each figure's rows (for CSV)."""
    # matplotlib is heavy and choosing its backend is global: both happen only when a report is drawn
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after the backend is chosen

    out: dict[str, str] = {}
    out["success"] = _png(_success_figure(plt, setups, data))
    out["mastered"] = _png(_mastered_figure(plt, runs))
    data["mastered"] = [
        {"run": m["legend"], "gen": r["gen"], "mastered": r["mastered"], "frontier": frontier}
        for m in runs
        for r in m["mastered"]
        for frontier in [next((f["frontier"] for f in m["frontier"] if f["gen"] == r["gen"]), None)]
    ]
    out["levels"] = _png(_levels_figure(plt, setups, data))

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    checks = sorted({r["check"] for m in runs for r in m["rejections"]})
    width = 0.8 / max(1, len(runs))
    for i, m in enumerate(runs):
        totals: dict[str, int] = defaultdict(int)
        for r in m["rejections"]:
            totals[r["check"]] += r["failed"]
        data["rejections"] += [
            {"run": m["legend"], "check": c, "failed": totals[c]} for c in checks
        ]
        ax.bar(
            [c + i * width for c in range(len(checks))],
            [totals[c] for c in checks],
            width,
            label=m["legend"],
        )
    ax.set_xticks(
        [c + 0.4 - width / 2 for c in range(len(checks))], checks, rotation=30, ha="right"
    )
    ax.set_ylabel("proposals failing the check")
    if checks:
        ax.legend(fontsize=8)
    else:
        ax.set_axis_off()
        ax.text(
            0.5, 0.5, "no proposal was rejected", ha="center", va="center", transform=ax.transAxes
        )
    out["rejections"] = _png(fig)

    fig, ax = plt.subplots(figsize=(4.6, 4.2))
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1)
    for m in runs:
        table = m["calibration"]["reliability"]
        data["calibration"] += [{"run": m["legend"], **r} for r in table]
        ax.plot(
            [r["predicted"] for r in table],
            [r["observed"] for r in table],
            marker="o",
            label=m["legend"],
        )
    ax.set_xlabel("predicted P(success)")
    ax.set_ylabel("observed success")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    out["calibration"] = _png(fig)
    out["proposals"] = _png(_proposal_figure(plt, runs))
    data["proposals"] = [
        {"run": m["legend"], "gen": r["gen"], "level": r["level"], "share": r["share"]}
        for m in runs
        for r in m["proposals"]["by_level"]
    ]
    out["diversity"] = _png(_diversity_figure(plt, runs))
    data["diversity"] = [
        {
            "run": m["legend"],
            "gen": r["gen"],
            "pool_diversity": r.get("pool_diversity"),
            "distinct_share": r.get("distinct_share"),
            **{
                key: next((p[key] for p in per_gen if p["gen"] == r["gen"]), None)
                for key in ("proposer_reward", "proposer_reward_played")
            },
        }
        for m in runs
        for per_gen in [m["proposals"]["per_generation"]]
        for r in m["diversity"]
    ]
    return out


def _pooled(
    series: list[list[dict[str, Any]]], x: list[dict[int, float]] | None = None
) -> list[dict[str, Any]]:
    """Per generation, the mean success over the runs of one setup, with a 95% interval.

    One run keeps its own figures (and its Wilson interval, where it has one);
    several get the mean over the runs that have the generation and a
    bootstrap interval over those runs. ``x``: per run, generation → the
    training episodes so far (their mean over the runs is the point's x).
    """
    by_gen: dict[int, list[float]] = defaultdict(list)
    xs: dict[int, list[float]] = defaultdict(list)
    wilson: dict[int, tuple[Any, Any]] = {}
    for i, rows in enumerate(series):
        for r in rows:
            if r["success"] is None:
                continue
            by_gen[r["gen"]].append(r["success"])
            wilson[r["gen"]] = (r.get("low"), r.get("high"))
            if x is not None:
                xs[r["gen"]].append(x[i].get(r["gen"], math.nan))
    out = []
    for gen in sorted(by_gen):
        values = by_gen[gen]
        if len(series) == 1:
            mean, (low, high) = values[0], wilson[gen]
        else:
            mean, low, high = paired_bootstrap(values, n=10_000, seed=0)
        row = {"gen": gen, "success": mean, "low": low, "high": high, "runs": len(values)}
        if x is not None:
            row["episodes"] = sum(xs[gen]) / len(xs[gen])
        out.append(row)
    return out


def _band(ax: Any, xs: list[float], rows: list[dict[str, Any]], colour: Any) -> None:
    """A 95% band under a line, where the rows have an interval."""
    points = [
        (x, r["low"], r["high"]) for x, r in zip(xs, rows, strict=True) if r["low"] is not None
    ]
    if points:
        ax.fill_between(
            [p[0] for p in points], [p[1] for p in points], [p[2] for p in points],
            color=colour, alpha=0.18, linewidth=0,
        )  # fmt: skip


def _success_figure(
    plt: Any, setups: list[tuple[str, list[dict[str, Any]]]], data: dict[str, list[dict[str, Any]]]
) -> Any:
    """Train and held-out eval success against training episodes, a line per setup, eval with its 95% band."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    for i, (label, members) in enumerate(setups):
        colour = f"C{i % 10}"
        cumulative: list[dict[int, float]] = []
        for m in members:
            so_far: dict[int, float] = {}
            total = 0
            for row in m["throughput"]:
                total += row["episodes"] or 0
                so_far[row["gen"]] = total
            cumulative.append(so_far)
        for ax, curve, marker in ((left, "train", None), (right, "eval", "o")):
            rows = _pooled([m["success"][curve] for m in members], cumulative)
            xs = [r["episodes"] for r in rows]
            ax.plot(xs, [r["success"] for r in rows], marker=marker, color=colour, label=label)
            if curve == "eval" or len(members) > 1:
                _band(ax, xs, rows, colour)
            data["success"] += [{"setup": label, "curve": curve, **r} for r in rows]
    for ax, title in ((left, "train"), (right, "held-out eval (95% intervals)")):
        ax.set_title(title)
        ax.set_xlabel("training episodes")
        ax.set_ylabel("success")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=8)
    return fig


def _levels_figure(
    plt: Any, setups: list[tuple[str, list[dict[str, Any]]]], data: dict[str, list[dict[str, Any]]]
) -> Any:
    """Eval success per level: a line per level with its 95% band, by generation, a panel per setup."""
    fig, axes = plt.subplots(1, len(setups), figsize=(5.2 * len(setups), 3.6), squeeze=False)
    colours = plt.get_cmap("viridis")
    for ax, (label, members) in zip(axes[0], setups, strict=True):
        levels = sorted(
            {
                r["level"]
                for m in members
                for r in m["success"]["eval_by_level"]
                if r["level"] is not None
            }
        )
        for j, level in enumerate(levels):
            colour = colours(0.1 + 0.75 * j / max(1, len(levels) - 1))
            series = [
                [r for r in m["success"]["eval_by_level"] if r["level"] == level] for m in members
            ]
            rows = _pooled(series)
            gens = [r["gen"] for r in rows]
            ax.plot(
                gens, [r["success"] for r in rows], marker=".", color=colour, label=f"level {level}"
            )
            _band(ax, gens, rows, colour)
            data["levels"] += [{"setup": label, "level": level, **r} for r in rows]
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("generation")
        ax.set_ylabel("eval success")
        ax.set_ylim(-0.02, 1.02)
        ax.xaxis.get_major_locator().set_params(integer=True)
        if levels:
            ax.legend(fontsize=7)
        else:
            ax.set_axis_off()
            ax.text(0.5, 0.5, "no eval by level", ha="center", va="center", transform=ax.transAxes)
    return fig


def _mastered_figure(plt: Any, runs: list[dict[str, Any]]) -> Any:
    """The level mastered (solid) and the curriculum's frontier (dashed) per generation, a colour per run.

    A generation with no level mastered (``None``; ``coevo analyze`` prints "–") is
    drawn as a gap (NaN), not as level 0, which no run has.
    """
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for m in runs:
        points = [(r["gen"], r["mastered"]) for r in m["mastered"]]
        (line,) = ax.plot(
            [g for g, _ in points],
            [math.nan if v is None else v for _, v in points],
            marker="o",
            label=f"{m['legend']}: mastered",
        )
        frontier = [(r["gen"], r["frontier"]) for r in m["frontier"] if r["frontier"] is not None]
        ax.plot(
            [g for g, _ in frontier],
            [v for _, v in frontier],
            linestyle="--",
            color=line.get_color(),
            label=f"{m['legend']}: curriculum's frontier",
        )
    ax.set_xlabel("generation")
    ax.set_ylabel("level (mastered: a gap where none is)")
    ax.legend(fontsize=8)
    return fig


NO_PROPOSALS = "no proposals recorded\n(a log from before the proposals table)"
"""What a panel says for a run whose log has no ``proposals`` table."""


def _proposal_figure(plt: Any, runs: list[dict[str, Any]]) -> Any:
    """Each level's share of the proposals, stacked per generation, with the levels the run played at."""
    from matplotlib import patheffects  # after the backend is chosen (see _figures)

    halo = [patheffects.withStroke(linewidth=3, foreground="white")]  # lines stay legible on bars
    fig, axes = plt.subplots(1, len(runs), figsize=(5.6 * len(runs), 4.6), squeeze=False)
    fig.subplots_adjust(wspace=0.45)  # room for each panel's level axis
    for ax, m in zip(axes[0], runs, strict=True):
        ax.set_title(m["legend"], fontsize=9)
        by_level = m["proposals"]["by_level"]
        if not by_level:
            ax.set_axis_off()
            ax.text(0.5, 0.5, NO_PROPOSALS, ha="center", va="center", transform=ax.transAxes)
            continue
        gens = sorted({r["gen"] for r in by_level})
        levels = sorted({r["level"] for r in by_level}, key=lambda lv: (lv is None, lv or 0))
        share = {(r["gen"], r["level"]): r["share"] for r in by_level}
        known = [lv for lv in levels if lv is not None]
        colours = plt.get_cmap("viridis")
        bottom = [0.0] * len(gens)
        for level in levels:
            heights = [share.get((g, level), 0.0) for g in gens]
            colour = (
                "#bbbbbb"
                if level is None
                else colours(0.15 + 0.7 * known.index(level) / max(1, len(known) - 1))
            )
            ax.bar(
                gens,
                heights,
                bottom=bottom,
                width=0.85,
                color=colour,
                alpha=0.8,
                label="no level" if level is None else f"level {level}",
            )
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        ax.set_xlabel("generation")
        ax.set_ylabel("share of proposals")
        ax.set_ylim(0, 1)
        levels_ax = ax.twinx()
        frontier = [(r["gen"], r["frontier"]) for r in m["frontier"] if r["frontier"] is not None]
        per_gen = m["proposals"]["per_generation"]
        lines = (
            (frontier, "--", "curriculum's frontier"),
            (
                [(r["gen"], r["trained_level"]) for r in per_gen if r["trained_level"] is not None],
                "-",
                "mean level trained on",
            ),
            (
                [(r["gen"], r["level"]) for r in per_gen if r["level"] is not None],
                ":",
                "mean level proposed",
            ),
        )
        for points, style, label in lines:
            levels_ax.plot(
                [g for g, _ in points],
                [v for _, v in points],
                linestyle=style,
                color="black" if style != ":" else "crimson",
                marker="." if style != "--" else None,
                label=label,
                path_effects=halo,
            )
        top = max([*known, *(v for points, _, _ in lines for _, v in points)], default=1)
        levels_ax.set_ylim(0.5, top + 0.5)
        levels_ax.set_ylabel("level")
        levels_ax.yaxis.get_major_locator().set_params(integer=True)
        ax.xaxis.get_major_locator().set_params(integer=True)
        handles, labels = ax.get_legend_handles_labels()
        more, more_labels = levels_ax.get_legend_handles_labels()
        ax.legend(  # below the panel, so panels side by side do not cover each other
            handles[::-1] + more,
            labels[::-1] + more_labels,
            fontsize=7,
            ncol=2,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.16),
        )
    return fig


def _diversity_figure(plt: Any, runs: list[dict[str, Any]]) -> Any:
    """The accepted pool's diversity (and distinct share) and the mean proposer reward, a line per run."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    fig.subplots_adjust(wspace=0.25)
    for i, m in enumerate(runs):
        colour = f"C{i}"  # one colour per run in both panels
        series = (
            (left, "pool_diversity", m["diversity"], "-", "diversity"),
            (left, "distinct_share", m["diversity"], "--", "distinct signatures"),
            (right, "proposer_reward", m["proposals"]["per_generation"], "-", "every proposal"),
            (
                right,
                "proposer_reward_played",
                m["proposals"]["per_generation"],
                "--",
                "proposals played",
            ),
        )
        for ax, key, rows, style, what in series:
            points = [(r["gen"], r[key]) for r in rows if r[key] is not None]
            if points:
                ax.plot(
                    [g for g, _ in points],
                    [v for _, v in points],
                    linestyle=style,
                    marker="o" if style == "-" else None,
                    color=colour,
                    label=f"{m['legend']}: {what}",
                )
    for ax, ylabel, empty in (
        (left, "pool diversity, distinct share", "no accepted pool to measure"),
        (right, "mean proposer reward", NO_PROPOSALS),
    ):
        ax.set_xlabel("generation")
        ax.set_ylabel(ylabel)
        if ax.lines:
            ax.legend(fontsize=8)
        else:
            ax.set_axis_off()
            ax.text(0.5, 0.5, empty, ha="center", va="center", transform=ax.transAxes)
    objectives = sorted(
        {r["objective"] for m in runs for r in m["proposals"]["per_generation"][-1:]}
    )
    objective = f" ({', '.join(objectives)})" if objectives else ""
    left.set_title(
        "the accepted pool:\ndiversity (solid), distinct signatures (dashed)", fontsize=9
    )
    right.set_title(
        f"mean proposer reward{objective}:\n"
        "every proposal (solid), those the Solver played (dashed)",
        fontsize=9,
    )
    for ax in (left, right):
        ax.xaxis.get_major_locator().set_params(integer=True)  # generations are whole
    return fig


def _summary_rows(runs: list[dict[str, Any]]) -> str:
    head = (
        "<tr><th>run</th><th>generations</th><th>training episodes</th><th>final eval</th>"
        "<th>accepted</th><th>mutations</th><th>lineage depth</th><th>learnable tasks (from mutations)</th></tr>"
    )
    body = []
    for m in runs:
        evals = m["success"]["eval"]
        lineage = m["lineage"]
        final = f"{evals[-1]['success']:.2f}" if evals else "–"
        body.append(
            "<tr>"
            f"<td>{html.escape(_label(m))}</td><td>{m['generations']}</td>"
            f"<td>{sum(r['episodes'] or 0 for r in m['throughput'])}</td><td>{final}</td>"
            f"<td>{sum(r['accepted'] or 0 for r in m['throughput'])}</td><td>{lineage['mutations']}</td>"
            f"<td>{lineage['max_depth']}</td>"
            f"<td>{lineage['learnable_tasks']} ({lineage['learnable_from_mutation']})</td>"
            "</tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"


def _suite_rows(runs: list[dict[str, Any]]) -> str:
    """Each run's held-out suites side by side, in-domain and transfer: the last evaluated generation's figures."""
    head = (
        "<tr><th>run</th><th>suite</th><th>kind</th><th>source</th><th>gen</th>"
        "<th>success [95% interval]</th><th>pass^k (k = trials)</th><th>tasks × trials</th></tr>"
    )
    body = []
    for m in runs:
        for suite in m.get("suites") or []:
            played = [r for r in suite["per_generation"] if r["success"] is not None]
            last = played[-1] if played else None
            if last is None:
                figures = "<td>–</td><td>–</td><td>–</td><td>–</td>"
            else:
                k = suite["trials"]
                passes = last.get("pass_k", {}).get(k, last["success"] if k == 1 else None)
                top = f" [{last['low_k']:.2f}–{last['high_k']:.2f}]" if "low_k" in last else ""
                tasks = last.get("tasks", last["episodes"])
                figures = (
                    f"<td>{last['gen']}</td>"
                    f"<td>{last['success']:.2f} [{last['low']:.2f}–{last['high']:.2f}]</td>"
                    f"<td>{'–' if passes is None else f'{passes:.2f}{top}'}</td>"
                    f"<td>{tasks} × {k}</td>"
                )
            body.append(
                f"<tr><td>{html.escape(m['legend'])}</td><td>{html.escape(str(suite['name']))}</td>"
                f"<td>{suite['kind']}</td><td>{html.escape(str(suite['source']))}</td>{figures}</tr>"
            )
    return f'<table id="suites">{head}{"".join(body)}</table>'


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1180px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.8em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
img { max-width: 100%; }
"""


def render_report(
    run_dirs: list[str],
    out: str,
    *,
    group: str | None = None,
    csv_dir: str | None = None,
    png_dir: str | None = None,
) -> dict[str, bytes]:
    """Write the report of ``run_dirs`` to ``out``; returns its figures, id → PNG (in :data:`FIGURES` order).

    Args:
        run_dirs: the runs.
        out: the HTML file.
        group: a dotted key of the recorded experiment (``curriculum.name``): runs sharing its
            value are one setup, drawn as their mean with an interval over the runs.
        csv_dir: write each figure's data here as ``FIGURE.csv``.
        png_dir: write each figure here as ``FIGURE.png``.

    Raises:
        CoevoError: a directory holds no run, or a run's experiment has no ``group`` key.
    """
    runs = []
    for run_dir in run_dirs:
        run = load_run(run_dir)
        metrics = analyze(run, irt=False)
        metrics["name"] = metrics.get("name") or run_dir
        metrics["run_dir"] = run_dir
        metrics["seed"] = (run.experiment.get("run") or {}).get("seed")
        metrics["lineage"] = lineage_summary(lineage_graph(run))
        if group is not None:
            metrics["setup"] = _setting(run.experiment, group, run_dir)
        runs.append(metrics)
    for m in runs:  # by name and seed; the folder only where two runs would read alike
        m["legend"] = f"{m['name']} seed {m['seed']}" if m["seed"] is not None else m["name"]
    legends = [m["legend"] for m in runs]
    for m in runs:
        if legends.count(m["legend"]) > 1:
            m["legend"] = f"{m['legend']} ({m['run_dir']})"
    setups = _setups(runs, group)
    data: dict[str, list[dict[str, Any]]] = {key: [] for key, _ in FIGURES}
    images = _figures(runs, setups, data)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>coevo report</title>',
        f"<style>{_STYLE}</style></head><body>",
        "<h1>coevo report</h1>",
        "<p>" + "<br>".join(html.escape(_label(m)) for m in runs) + "</p>",
        "<h2>Runs</h2>",
        _summary_rows(runs),
        "<h2>Held-out suites: in-domain and transfer</h2>",
        _suite_rows(runs),
    ]
    for key, title in FIGURES:
        parts.append(f'<h2 id="{key}">{html.escape(title)}</h2>')
        parts.append(
            f'<img id="figure-{key}" alt="{html.escape(title)}" src="data:image/png;base64,{images[key]}">'
        )
    parts.append("</body></html>")
    with open(out, "w", encoding="utf-8") as handle:
        handle.write("\n".join(parts) + "\n")
    figures = {key: base64.b64decode(images[key]) for key, _ in FIGURES}
    if png_dir is not None:
        Path(png_dir).mkdir(parents=True, exist_ok=True)
        for key, png in figures.items():
            _write_within(png_dir, f"{key}.png", png)
    if csv_dir is not None:
        Path(csv_dir).mkdir(parents=True, exist_ok=True)
        for key, rows in data.items():
            _write_within(csv_dir, f"{key}.csv", _csv_bytes(rows))
    return figures


def _write_within(folder: str, name: str, data: bytes) -> None:
    """``folder/name`` written whole, through no link (:func:`~coevo.arena.bounded.open_to_write`).

    Raises:
        FileRefusedError: the file is a link, or not a regular file, or the folder a link out.
    """
    fd = open_to_write(Path(folder) / name, folder)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _setting(experiment: dict[str, Any], key: str, run_dir: str) -> str:
    """The value of the dotted ``key`` in a recorded experiment, as text.

    Raises:
        CoevoError: the experiment has no such key.
    """
    node: Any = experiment
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise CoevoError(
                f"--group {key}: {run_dir}'s experiment has no such key (give a dotted key of its "
                "experiment.json, e.g. curriculum.name or solver.name)"
            )
        node = node[part]
    return str(node)


def _setups(
    runs: list[dict[str, Any]], group: str | None
) -> list[tuple[str, list[dict[str, Any]]]]:
    """The setups drawn: each run its own, or the runs sharing ``group``'s value together (first seen first)."""
    if group is None:
        return [(m["legend"], [m]) for m in runs]
    together: dict[str, list[dict[str, Any]]] = {}
    for m in runs:
        together.setdefault(m["setup"], []).append(m)
    return [
        (f"{group}={value} ({len(members)} seed{'s' * (len(members) > 1)})", members)
        for value, members in together.items()
    ]


def _csv_bytes(rows: list[dict[str, Any]]) -> bytes:
    """Rows as CSV, the columns in the order they first appear (a header only with no rows)."""
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns, restval="")
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue().encode("utf-8")
