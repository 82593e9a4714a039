"""``coevo analyze``, ``coevo report`` and ``coevo export``: a run's metrics, a report comparing runs, and its curriculum as training data."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from coevo.arena.errors import CommandError

__all__ = ["add_commands"]


def _print_pass_k(metrics: dict[str, Any]) -> None:
    """A benchmark run's metrics: each trial's success, then pass^k overall and per domain."""
    passes = metrics["pass_k"]
    print(
        f"{metrics['run_dir']}: a benchmark run, {metrics['generations']} trials of "
        f"{passes['tasks']} tasks"
    )
    evals = {r["gen"]: r["success"] for r in metrics["success"]["eval"]}
    for gen in range(metrics["generations"]):
        value = evals.get(gen)
        print(f"  trial {gen}: success {'–' if value is None else f'{value:.2f}'}")
    ks = list(passes["pass_k"])
    print(f"{'':<16}" + "".join(f"{'pass^' + str(k):>9}" for k in ks))
    rows = [("all", passes), *passes["domains"].items()]
    for name, table in rows:
        cells = "".join(f"{table['pass_k'].get(k, float('nan')):>9.2f}" for k in ks)
        print(f"{name + ' (' + str(table['tasks']) + ')':<16}{cells}")
    print(
        "pass^k: the chance that k trials of a task all succeed (C(c,k)/C(n,k)), averaged over "
        "tasks"
        + (
            f"; {passes['failed']} episodes the Solver could not play are left out"
            if passes["failed"]
            else ""
        )
    )


def _print_spend(throughput: list[dict[str, Any]]) -> None:
    """Per generation, what the roles that report usage (LLM roles) spent: calls, tokens, tokens/s, dollars."""
    spent = [r for r in throughput if r.get("tokens") is not None]
    if not spent:
        return
    print(
        f"\n{'gen':>4} {'calls':>7} {'tokens in':>11} {'tokens out':>11} {'tokens/s':>9} "
        f"{'dollars':>9}"
    )
    for r in spent:
        rate = r["tokens_per_second"]
        print(
            f"{r['gen']:>4} {r['calls']:>7,} {r['input_tokens']:>11,} {r['output_tokens']:>11,} "
            f"{'–' if rate is None else format(rate, ',.0f'):>9} {r['dollars']:>9.4f}"
        )
    total = {k: sum(r[k] for r in spent) for k in ("calls", "tokens", "dollars")}
    timed = [r for r in spent if r["seconds"]]
    rate = sum(r["tokens"] for r in timed) / sum(r["seconds"] for r in timed) if timed else None
    print(
        f"spent: {total['calls']:,} calls, {total['tokens']:,} tokens "
        f"({total['tokens'] / len(spent):,.0f} per generation"
        + ("" if rate is None else f", {rate:,.0f} tokens/s")
        + f"), ${total['dollars']:.4f} at list price (a self-hosted model costs $0); "
        "tokens/s: over each generation's wall time (events.jsonl)"
    )


def _print_calibration(calibration: dict[str, Any]) -> None:
    overall = calibration.get("overall") or {}
    if not overall.get("episodes"):
        return

    def f(value: Any) -> str:
        return "–" if value is None else f"{value:.3f}"

    print(
        f"World model: brier {f(overall['brier'])}, ece {f(overall['ece'])}, "
        f"AUC {f(overall['auc'])}, AUC at the frontier {f(overall['auc_frontier'])} "
        f"({overall['frontier_episodes']:,} of {overall['episodes']:,} episodes: tasks of observed "
        "success 0.2–0.8)"
    )


def _print_final_eval(evals: list[dict[str, Any]]) -> None:
    """The last eval figure with its 95% interval and the episodes behind it."""
    if not evals:
        return
    last = evals[-1]
    print(
        f"final eval (gen {last['gen']}): {last['success']:.2f}, 95% interval "
        f"{last['low']:.2f}–{last['high']:.2f} over {last['episodes']} episodes (Wilson)"
    )


def _print_suites(suites: list[dict[str, Any]]) -> None:
    """In-domain and transfer side by side: each held-out suite's success and 95% interval per evaluated generation, then pass^k."""
    if len(suites) < 2:
        return

    def cell(row: dict[str, Any] | None) -> str:
        if row is None:
            return "–"
        if row["success"] is None:
            return f"– ({row['failed']} unplayed)"
        return f"{row['success']:.2f} [{row['low']:.2f}–{row['high']:.2f}]"

    heads = ["synthesized (in-domain)"] + [
        f"{s['name']} (transfer{', ×' + str(s['trials']) if s['trials'] > 1 else ''})"
        for s in suites[1:]
    ]
    width = max(20, *(len(h) + 2 for h in heads))
    by_gen = [{r["gen"]: r for r in s["per_generation"]} for s in suites]
    gens = sorted({g for rows in by_gen for g in rows})
    print("\nheld-out suites: success on each, 95% interval in brackets")
    print((f"{'gen':>4}  " + "".join(f"{h:<{width}}" for h in heads)).rstrip())
    for gen in gens:
        cells = "".join(f"{cell(rows.get(gen)):<{width}}" for rows in by_gen)
        print(f"{gen:>4}  {cells}".rstrip())
    for suite in suites[1:]:
        played = [r for r in suite["per_generation"] if r["success"] is not None]
        if not played:
            print(f"{suite['name']} ({suite['source']}): no episode was played")
            continue
        last = played[-1]
        ks = sorted(last["pass_k"], key=int)
        passes = ", ".join(f"pass^{k} {last['pass_k'][k]:.2f}" for k in ks)
        top = f" [{last['low_k']:.2f}–{last['high_k']:.2f}]" if "low_k" in last else ""
        unplayed = sum(r["failed"] for r in suite["per_generation"])
        print(
            f"{suite['name']} ({suite['source']}), gen {last['gen']}: {last['tasks']} tasks × "
            f"{suite['trials']} trial{'s' * (suite['trials'] > 1)}, {passes}{top}"
            + (f"; {unplayed} episodes the Solver could not play left out" if unplayed else "")
        )
    print(
        "intervals: Wilson's over the episodes of a suite played once a task; a bootstrap over "
        "tasks otherwise (its last pass^k's too)"
    )


def _informative(row: dict[str, Any] | None) -> str:
    """A generation's informative groups of those played, and dynamic sampling's extra tasks: ``9/16 +4``."""
    if row is None:
        return "–"
    extra = f" +{row['extra_tasks']}" if row.get("dynamic_sampling") else ""
    return f"{row['informative']}/{row['groups']}{extra}"


def _print_metrics(metrics: dict[str, Any]) -> None:
    if metrics.get("pass_k") is not None:
        _print_pass_k(metrics)
        return
    success = {r["gen"]: r["success"] for r in metrics["success"]["train"]}
    evals = {r["gen"]: r["success"] for r in metrics["success"]["eval"]}
    mastered = {r["gen"]: r["mastered"] for r in metrics["mastered"]}
    frontier = {r["gen"]: r["frontier"] for r in metrics["frontier"]}
    brier = {r["gen"]: r["brier"] for r in metrics["calibration"]["per_generation"]}
    accepted = {r["gen"]: r["accepted"] for r in metrics["throughput"]}
    proposals = {r["gen"]: r for r in (metrics.get("proposals") or {}).get("per_generation", [])}
    diversity = {r["gen"]: r["pool_diversity"] for r in metrics.get("diversity") or []}
    groups = {r["gen"]: r for r in metrics.get("groups") or []}
    print(
        f"{metrics['run_dir']}: {metrics['generations']} generations, curriculum {metrics['curriculum']}"
    )
    print(
        f"{'gen':>4} {'accepted':>8} {'train':>6} {'eval':>6} {'mastered':>8} {'frontier':>8} "
        f"{'brier':>6} {'level_proposed':>14} {'paid':>6} {'div':>5} {'informative':>11}"
    )

    def f(value: Any) -> str:
        return "–" if value is None else f"{value:.2f}"

    for gen in range(metrics["generations"]):
        print(
            f"{gen:>4} {accepted.get(gen, 0):>8} {f(success.get(gen)):>6} {f(evals.get(gen)):>6} "
            f"{f(mastered.get(gen)):>8} {f(frontier.get(gen)):>8} {f(brier.get(gen)):>6} "
            f"{f(proposals.get(gen, {}).get('level')):>14} "
            f"{f(proposals.get(gen, {}).get('proposer_reward')):>6} {f(diversity.get(gen)):>5} "
            f"{_informative(groups.get(gen)):>11}"
        )
    print(
        "mastered: the level up to which eval success stays at or above 0.5; "
        "frontier: the curriculum's level; level_proposed: the mean level proposed; paid: "
        "the mean proposer reward of the proposals paid; div: the accepted tasks' diversity; "
        "informative: training groups whose rewards differ, of those played "
        "(+N: tasks dynamic sampling played beyond the batch)"
    )
    _print_final_eval(metrics["success"]["eval"])
    _print_suites(metrics.get("suites") or [])
    _print_calibration(metrics["calibration"])
    _print_spend(metrics["throughput"])
    policies = metrics.get("policies") or []
    if policies:
        print(
            f"\n{'policy version':<28} {'gens':>7} {'train':>6} {'reward':>6} {'eval':>5} "
            f"{'reward':>6} {'turns':>6} {'carried out':>11}"
        )
        for p in policies:
            gens = (
                f"{p['first_gen']}-{p['last_gen']}"
                if p["last_gen"] > p["first_gen"]
                else str(p["first_gen"])
            )
            print(
                f"{p['version'][:28]:<28} {gens:>7} {p['train_rollouts']:>6} {f(p['train_reward']):>6} "
                f"{p['eval_rollouts']:>5} {f(p['eval_reward']):>6} {p['turns']:>6} "
                f"{'–' if p['carried_out'] is None else format(p['carried_out'], '.1%'):>11}"
            )
        print(
            "carried out: the share of the model's turns whose every tool call the world carried out "
            "(valid JSON, a tool it has, arguments it takes)"
        )
    lineage = metrics.get("lineage") or {}
    if lineage:
        print(
            f"lineage: {lineage['mutations']} mutations, depth {lineage['max_depth']}, "
            f"{lineage['learnable_from_mutation']} of {lineage['learnable_tasks']} learnable tasks "
            "(success strictly between 0 and 1) from mutations"
        )


def cmd_analyze(args: argparse.Namespace) -> int:
    """``coevo analyze RUN_DIR``."""
    from coevo.arena.analysis import analyze, load_run
    from coevo.arena.analysis.lineage import lineage_graph, lineage_summary, write_graphml

    run = load_run(args.run_dir)
    if "corpus" in run.experiment:
        raise CommandError(
            f"{args.run_dir} is a corpus, not a run: `coevo corpus report {args.run_dir}` says what "
            "it holds (`coevo export` reads it as a run's tasks)"
        )
    metrics = analyze(run, irt=not args.no_irt)
    graph = lineage_graph(run)
    metrics["lineage"] = lineage_summary(graph)
    if args.graphml:
        try:
            write_graphml(graph, args.graphml)
        except OSError as exc:
            raise CommandError(
                f"cannot write the lineage graph to {args.graphml}: {exc.strerror or exc}"
            ) from exc
        print(
            f"lineage graph: {graph.number_of_nodes()} tasks, {graph.number_of_edges()} mutations "
            f"→ {args.graphml}",
            file=sys.stderr,
        )
    if args.json:
        sys.stdout.write(json.dumps(metrics, indent=1, default=str) + "\n")
    else:
        _print_metrics(metrics)
    return 0


def _size(n: float) -> str:
    """``n`` bytes, readably (decimal units)."""
    if n < 1000:
        return f"{n:.0f} B"
    return f"{n / 1000:.1f} kB" if n < 1_000_000 else f"{n / 1_000_000:.1f} MB"


def cmd_export(args: argparse.Namespace) -> int:
    """``coevo export RUN_DIR --out DIR``."""
    from coevo.arena.analysis import load_run
    from coevo.arena.analysis.export import MANIFEST, export_run
    from coevo.run.driver.progress import Progress

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CommandError(
            f"--out {args.out} is a file; export writes a directory (tasks.{args.format}, "
            f"worlds.{args.format} and {MANIFEST} inside it): name a directory"
        )
    run = load_run(args.run_dir)
    bar: Progress | None = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = Progress(total, "exporting tasks")
        bar.advance(done - bar.done)

    try:
        manifest = export_run(
            run,
            args.out,
            fmt=args.format,
            where=args.where,
            inline_worlds=args.inline_worlds,
            progress=progress,
        )
    except OSError as exc:
        raise CommandError(f"cannot write the export to {args.out}: {exc.strerror or exc}") from exc
    finally:
        if bar is not None:
            bar.close()
    rows = manifest.tasks.rows
    n = manifest.worlds.rows if manifest.worlds is not None else 0
    worlds = "worlds inline" if manifest.worlds is None else f"{n} world{'s' * (n != 1)}"
    files = ", ".join(f"{f.path} ({_size(f.bytes)})" for f in manifest.files)
    each = f"; {_size(manifest.bytes / rows)} a task" if rows else ""
    print(f"{rows} tasks, {worlds} → {out}/: {files}, {MANIFEST}{each}", file=sys.stderr)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``coevo report RUN_DIR... --out report.html``."""
    from coevo.arena.analysis.report import render_report

    if Path(args.out).is_dir():
        raise CommandError(
            f"--out {args.out} is a directory; report writes one HTML file: "
            f"name it, e.g. --out {Path(args.out) / 'report.html'}"
        )
    for flag, folder in (("--csv", args.csv), ("--png", args.png)):
        if folder is not None and Path(folder).exists() and not Path(folder).is_dir():
            raise CommandError(f"{flag} {folder} is a file; give a folder for the figures' files")
    try:
        figures = render_report(
            args.run_dirs, args.out, group=args.group, csv_dir=args.csv, png_dir=args.png
        )
    except OSError as exc:
        where = exc.filename or args.out
        raise CommandError(f"cannot write the report to {where}: {exc.strerror or exc}") from exc
    runs = len(args.run_dirs)
    also = "".join(
        f"; {what} in {folder}" for what, folder in (("CSV", args.csv), ("PNG", args.png)) if folder
    )
    print(
        f"{runs} run{'s' * (runs != 1)}, {len(figures)} figures → {args.out}{also}", file=sys.stderr
    )
    return 0


def add_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``analyze``, ``export`` and ``report`` to the ``coevo`` command."""
    report = sub.add_parser(
        "report",
        help="one self-contained HTML file comparing runs (plots and tables)",
        formatter_class=fmt,
        description="Write a self-contained HTML report of one or more runs, side by side.",
        epilog=(
            "examples:\n  coevo report runs/uniform runs/plr runs/target-band --out report.html\n"
            "  coevo report runs/uniform-* runs/plr-* --group curriculum.name --csv figures --png figures"
        ),
    )
    report.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    report.add_argument("--out", default="report.html", help="the HTML file (default: report.html)")
    report.add_argument(
        "--group",
        metavar="KEY",
        help="a dotted key of the runs' experiment (e.g. curriculum.name): runs sharing its value "
        "are one setup, drawn as their mean with a 95%% interval over the runs (seeds)",
    )
    report.add_argument(
        "--csv", metavar="DIR", help="also write each figure's data as DIR/FIGURE.csv"
    )
    report.add_argument("--png", metavar="DIR", help="also write each figure as DIR/FIGURE.png")
    report.set_defaults(func=cmd_report)

    analyze = sub.add_parser(
        "analyze",
        help="a run's metrics: success, level mastered, pool, rejections, calibration, lineage",
        formatter_class=fmt,
        description="Read RUN_DIR's game log and print its metrics per generation (--json: all of them).",
        epilog="examples:\n  coevo analyze runs/quickstart\n  coevo analyze runs/quickstart --json | jq '.mastered'\n"
        "  coevo analyze runs/accel --graphml lineage.graphml",
    )
    analyze.add_argument("run_dir", metavar="RUN_DIR")
    analyze.add_argument("--json", action="store_true", help="every metric as one JSON object")
    analyze.add_argument(
        "--graphml", metavar="PATH", help="also write the lineage graph as GraphML"
    )
    analyze.add_argument(
        "--no-irt", action="store_true", help="skip the IRT abilities and difficulties"
    )
    analyze.set_defaults(func=cmd_analyze)

    export = sub.add_parser(
        "export",
        help="write a run's accepted tasks as training data (coevo.export/1: tasks, worlds, manifest)",
        formatter_class=fmt,
        description=(
            "Write the accepted tasks of RUN_DIR to DIR/tasks.jsonl (a prompt, chat messages, features,\n"
            "the verifier and the task record, its world by id), each world once to DIR/worlds.jsonl (with\n"
            "its tools as function definitions), and DIR/export.json; see docs/analysis.md."
        ),
        epilog="examples:\n  coevo export runs/quickstart --out export\n"
        "  coevo export runs/quickstart --out export --format parquet --where 'level >= 2 and 0.2 <= success <= 0.8'\n"
        "  coevo export runs/quickstart --out export --inline-worlds",
    )
    export.add_argument("run_dir", metavar="RUN_DIR")
    export.add_argument("--out", required=True, metavar="DIR")
    export.add_argument(
        "--format",
        choices=["jsonl", "parquet"],
        default="jsonl",
        help="jsonl (default) or parquet: the same tables",
    )
    export.add_argument(
        "--where",
        help="keep the tasks where this holds (fields: task_id world_id gen level domain family "
        "source parent operator predicted success episodes split)",
    )
    export.add_argument(
        "--inline-worlds",
        action="store_true",
        help="put each task's world and tools in its row (self-contained rows; no worlds table)",
    )
    export.set_defaults(func=cmd_export)
