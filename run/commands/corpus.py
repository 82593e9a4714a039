"""``coevo corpus build`` and ``coevo corpus report``: corpora of judged, deduplicated worlds and tasks, built on Ray."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from coevo.arena.errors import CommandError
from coevo.run.commands import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_ROLE_FAILED,
    local_ray_auth,
)

__all__ = ["add_commands"]


def _listed(text: str | None, kind: type = str) -> tuple[Any, ...]:
    return tuple(kind(x.strip()) for x in text.split(",") if x.strip()) if text else ()


def _check_numbers(args: argparse.Namespace) -> None:
    """The numeric flags in range, said as flags (not as the source's fields)."""
    # every count has a bound far above a real corpus's (a 4,000-digit one is refused, not run)
    wanted = [
        ("--worlds", args.worlds, 1, 100_000_000),
        ("--tasks-per-world", args.tasks_per_world, 1, 100_000),
        ("--shard-size", args.shard_size, 1, 1_000_000),
        ("--workers", args.workers, 0, 4096),
        ("--per-table", args.per_table, 1, 1_000_000),
        ("--seed", args.seed, -(1 << 63), (1 << 63) - 1),
        ("--eval-share", args.eval_share, 0, 1),
    ]
    for flag, value, low, high in wanted:
        if value is None:
            continue
        if not low <= value <= high:
            shown = str(value) if len(str(value)) <= 40 else f"(a {len(str(value))}-digit number)"
            raise CommandError(f"{flag} {shown}: give a number from {low:,} to {high:,}")


def cmd_build(args: argparse.Namespace) -> int:
    """``coevo corpus build``."""
    _check_numbers(args)
    local_ray_auth(args.address or os.environ.get("RAY_ADDRESS"))
    from coevo.agents.synthesizers.procedural import DOMAINS
    from coevo.run.corpus.build import CorpusSource, build_corpus, databases_in

    levels = _listed(args.levels, int) or (1, 2, 3, 4, 5)
    if any(not 1 <= level <= 5 for level in levels):
        raise CommandError(f"--levels: levels are 1 to 5, not {args.levels}")
    role = None
    if args.experiment:
        if args.mine:
            raise CommandError("give --experiment FILE or --mine FOLDER, not both")
        if not args.worlds:
            raise CommandError(
                "--experiment: give --worlds N (world indexes, each asking the experiment's "
                "synthesizer for --tasks-per-world tasks)"
            )
        from coevo.run.corpus.build import experiment_synthesizer

        # before Ray starts or --out is touched: a bad file, a missing key (exit 2)
        synthesizer, role = experiment_synthesizer(args.experiment)
        source = CorpusSource(
            kind="experiment",
            worlds=args.worlds,
            tasks_per_world=args.tasks_per_world,
            domains=_listed(args.domains),
            levels=levels,
            seed=args.seed,
            shard_size=args.shard_size,
            eval_share=args.eval_share,
            synthesizer=synthesizer,
        )
    elif args.mine:
        if Path(args.mine).is_file():
            raise CommandError(
                f"--mine {args.mine} is a file: give the folder that holds the databases "
                f"(--mine {Path(args.mine).parent})"
            )
        if not Path(args.mine).is_dir():
            raise CommandError(
                f"--mine {args.mine}: no such folder (give a folder of SQLite databases)"
            )
        if args.domains:
            raise CommandError(
                "--domains chooses procedural domains; --mine makes a world of every database "
                "in the folder: leave --domains out (or keep only some databases in the folder)"
            )
        databases = databases_in(args.mine)
        if not databases:
            raise CommandError(
                f"--mine {args.mine}: no SQLite database in it (files are recognised by their header)"
            )
        worlds = args.worlds or len(databases)
        source = CorpusSource(
            kind="mine",
            worlds=min(worlds, len(databases)),
            tasks_per_world=args.tasks_per_world,
            levels=levels,
            seed=args.seed,
            databases=tuple(databases),
            per_table=args.per_table,
            shard_size=args.shard_size,
            eval_share=args.eval_share,
        )
    else:
        if not args.worlds:
            raise CommandError(
                "give --worlds N (procedural worlds to build), --mine FOLDER, or "
                "--experiment FILE with --worlds N"
            )
        domains = _listed(args.domains) or tuple(DOMAINS)
        unknown = [d for d in domains if d not in DOMAINS]
        if unknown:
            raise CommandError(f"--domains: unknown {unknown}; the domains: {', '.join(DOMAINS)}")
        source = CorpusSource(
            worlds=args.worlds,
            tasks_per_world=args.tasks_per_world,
            domains=domains,
            levels=levels,
            seed=args.seed,
            shard_size=args.shard_size,
            eval_share=args.eval_share,
        )
    try:
        report = build_corpus(
            args.out,
            source,
            workers=args.workers,
            address=args.address,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
            role=role,
        )
    except KeyboardInterrupt:
        raise CommandError(
            "interrupted; the committed shards stay: run the same command again to go on",
            status=EXIT_INTERRUPTED,
        ) from None
    for line in report.lines():
        print(line, file=sys.stderr)
    if args.json:
        sys.stdout.write(json.dumps(report.__dict__) + "\n")
    if report.failed_shards:
        raise CommandError(_failure(report, source), status=EXIT_ROLE_FAILED)
    return EXIT_OK


def _failure(report: Any, source: Any) -> str:
    """What a build whose shards failed entirely says: which source failed, how often, the last error, what to do."""
    who = f"the synthesizer {source.synthesizer.name!r}" if source.synthesizer else "the source"
    if not report.reused and not report.built:
        return (
            f"every proposal failed: {who} made none of the {report.failed} tasks asked for "
            f"(the last failure: {report.last_failure}); nothing was committed. Fix the cause "
            "(the key, the server, the model, the experiment's [synthesizer]) and run the same "
            "command again"
        )
    return (
        f"{len(report.failed_shards)} of {report.shards} shards were not committed: every "
        f"proposal of theirs to {who} failed (the last failure: {report.last_failure}); the "
        "committed shards stay: run the same command again to build the rest"
    )


def cmd_report(args: argparse.Namespace) -> int:
    """``coevo corpus report``."""
    from coevo.arena.analysis.corpus import corpus_report, plot_corpus, report_lines
    from coevo.run.corpus.build import build_record

    report = corpus_report(args.folder)
    report["build"] = build_record(args.folder)
    if args.json:
        sys.stdout.write(json.dumps(report, default=str) + "\n")
    else:
        print("\n".join([*report_lines(report), *_build_lines(report["build"])]))
    if args.plot:
        print(f"figure → {plot_corpus(report, args.plot)}", file=sys.stderr)
    return EXIT_OK


def _build_lines(build: dict[str, Any]) -> list[str]:
    """What the builds' commits say (``coevo.run.corpus.build.build_record``), as ``corpus report`` prints it."""
    lines = [
        f"draws: {build['proposed']} tasks made of {build['asked']} asked, {build['missed']} "
        f"missed, {build['failed']} proposals failed; duplicates dropped: "
        f"{build['duplicates']} task{'s' * (build['duplicates'] != 1)}, "
        f"{build['duplicate_worlds']} world{'s' * (build['duplicate_worlds'] != 1)}"
    ]
    for shard in build["not_committed"]:
        lines.append(
            f"shard {shard['shard']} not committed: its {shard['failed']} proposals failed "
            f"({shard['why']}); `coevo corpus build` with the same flags tries it again"
        )
    return lines


def add_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``corpus build`` and ``corpus report`` to the ``coevo`` command."""
    corpus = sub.add_parser(
        "corpus",
        help="build a corpus of judged worlds and tasks on Ray; report what one holds",
        formatter_class=fmt,
        description="Corpora at scale: docs/corpus.md.",
    )
    kinds = corpus.add_subparsers(dest="corpus_command", metavar="ACTION", required=True)
    build = kinds.add_parser(
        "build",
        help="generate or mine worlds and tasks across Ray workers into a Parquet corpus",
        formatter_class=fmt,
        description=(
            "Build a corpus in OUT: worlds and their tasks, every task judged, duplicates and\n"
            "near-duplicates dropped, committed in shards (the game log's worlds, tasks and\n"
            "verdicts tables). Run the same command again on the same --out to go on after a\n"
            "stop: committed shards are reused, none is built twice. With only --worlds,\n"
            "--tasks-per-world and --workers: the five procedural domains, levels 1-5 in equal\n"
            "shares, seed 0. With --experiment FILE: the [synthesizer] of that experiment (an\n"
            "LLM's) proposes each world's tasks; a build where every proposal of a shard failed\n"
            "exits 3 and leaves those shards for the next build."
        ),
        epilog=(
            "examples:\n"
            "  coevo corpus build --out corpus --worlds 1000 --tasks-per-world 10 --workers 2\n"
            "  coevo corpus build --out mined --mine ~/databases --tasks-per-world 20\n"
            "  coevo corpus build --out llm --experiment experiments/claude.toml --worlds 50\n"
            "      --tasks-per-world 4 --workers 2\n"
            "  coevo corpus report corpus --plot corpus.png"
        ),
    )
    build.add_argument(
        "--out", required=True, help="the corpus folder (any pyarrow filesystem URI)"
    )
    build.add_argument(
        "--worlds", type=int, default=None, help="worlds to build (with --mine: at most)"
    )
    build.add_argument("--tasks-per-world", type=int, default=10, help="tasks drawn per world (10)")
    build.add_argument(
        "--mine", default=None, metavar="FOLDER", help="mine every SQLite database in FOLDER"
    )
    build.add_argument(
        "--experiment",
        default=None,
        metavar="FILE",
        help="the [synthesizer] of this experiment file proposes the tasks (needs --worlds)",
    )
    build.add_argument(
        "--domains",
        default=None,
        help="procedural domains, comma-separated (all); with --experiment: hints, cycled",
    )
    build.add_argument("--levels", default=None, help="levels, comma-separated (1,2,3,4,5)")
    build.add_argument("--seed", type=int, default=0, help="the seed (0)")
    build.add_argument(
        "--per-table", type=int, default=120, help="with --mine: rows per large table"
    )
    build.add_argument("--shard-size", type=int, default=10, help="worlds per shard (10)")
    build.add_argument(
        "--eval-share", type=float, default=0.1, help="worlds held out for eval (0.1)"
    )
    build.add_argument(
        "--workers",
        type=int,
        default=1,
        help="shards built at once, as Ray tasks (1); 0: one after another in this process, without Ray",
    )
    build.add_argument(
        "--address", default=None, help="a Ray cluster to join (default: a local Ray)"
    )
    build.add_argument("--json", action="store_true", help="the build's report as JSON on stdout")
    build.set_defaults(func=cmd_build)

    report = kinds.add_parser(
        "report",
        help="what a corpus holds: domains, schemas, tools, levels, families, Judge, diversity",
        formatter_class=fmt,
        epilog="example:\n  coevo corpus report corpus --json",
    )
    report.add_argument("folder", metavar="DIR", help="a corpus folder")
    report.add_argument("--json", action="store_true", help="the report as one JSON object")
    report.add_argument("--plot", default=None, metavar="FILE.png", help="draw the report")
    report.set_defaults(func=cmd_report)
