"""``coevo synth``, ``coevo mine`` and ``coevo mutate``: the offline Synthesizer on the command line.

Each writes a ``.jsonl`` file of records: every world record once, then the
tasks, which refer to their world by id. Tasks go through the Judge's
mechanical checks first and only accepted ones are written (a rejected task
is counted and its reason shown); ``--no-check`` skips that.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

from coevo.arena.errors import CoevoError, CommandError
from coevo.arena.judge import WorldCache, assess_task
from coevo.arena.records import dump_record
from coevo.arena.secrets import redact
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import TaskSpec, WorldSpec
from coevo.run.commands import EXIT_OK, EXIT_REJECTED
from coevo.run.commands.records import add_read_limits, read_all_records
from coevo.run.driver.progress import Progress

__all__ = ["add_commands"]


def _records(tasks: Sequence[TaskSpec], worlds: Iterable[WorldSpec]) -> list[dict[str, Any]]:
    """World records (each once, in first-use order) then tasks referring to them by id."""
    by_id = {w.world_id: w for w in worlds}
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for task in tasks:
        if isinstance(task.world, WorldSpec):
            by_id.setdefault(task.world_id, task.world)
        if task.world_id not in seen and task.world_id in by_id:
            seen.add(task.world_id)
            out.append(dump_record(by_id[task.world_id]))
    for task in tasks:
        out.append(dump_record(task.model_copy(update={"world": task.world_id})))
    return out


def _write(path: str, records: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    if path == "-":
        sys.stdout.write(text)
    else:
        Path(path).write_text(text, encoding="utf-8")


def _judged(
    tasks: Sequence[TaskSpec], worlds: Iterable[WorldSpec], check: bool, label: str
) -> tuple[list[TaskSpec], list[str]]:
    """The accepted tasks (all of them with ``check`` off) and one line per rejection."""
    if not check:
        return list(tasks), []
    cache = WorldCache(specs={w.world_id: w for w in worlds})
    kept: list[TaskSpec] = []
    rejected: list[str] = []
    try:
        with Progress(len(tasks), f"judging {label}") as bar:
            for task in tasks:
                verdict = assess_task(task, cache)
                if verdict.accepted:
                    kept.append(task)
                else:
                    why = next(
                        f"{n}: {r.reason}" for n, r in verdict.checks.items() if r.passed is False
                    )
                    rejected.append(f"{task.task_id[:19]} {why[:200]}")
                bar.advance()
    finally:
        cache.close()
    return kept, rejected


_SHOWN = 10
"""Lines of a list (rejections, tasks not mutated) printed before "and N more"."""


def _print_some(lines: Sequence[str], prefix: str) -> None:
    """The first :data:`_SHOWN` of ``lines`` on standard error, then how many were not shown."""
    for line in lines[:_SHOWN]:
        print(f"  {prefix}{line}", file=sys.stderr)
    if len(lines) > _SHOWN:
        print(f"  … and {len(lines) - _SHOWN} more", file=sys.stderr)


def _report(made: int, kept: int, rejected: list[str], out: str, what: str, check: bool) -> None:
    where = "standard output" if out == "-" else out
    if check:
        print(f"{what}: {kept} of {made} tasks accepted → {where}", file=sys.stderr)
    else:
        print(f"{what}: {made} tasks written, not checked (--no-check) → {where}", file=sys.stderr)
    _print_some(rejected, "rejected ")


def _drawn(synthesizer: Any, request: Any, label: str) -> list[TaskSpec]:
    """Task ``i`` of ``request`` for every ``i`` (those that could be drawn), with a progress bar; misses shown."""
    tasks: list[TaskSpec] = []
    with Progress(request.n, label) as bar:
        for i in range(request.n):
            task = synthesizer.draw(request, i)
            if task is not None:
                tasks.append(task)
            bar.advance()
    for miss in synthesizer.misses[:3]:
        print(f"  missed: {miss}", file=sys.stderr)
    return tasks


def _check_counts(args: argparse.Namespace) -> None:
    """-n, --per-table and --seed within bounds far above real use (a 4,000-digit -n is refused, not run).

    Raises:
        CommandError: naming the flag and its range.
    """
    for flag, name, low, high in (
        ("-n", "n", 0, MAX_TASKS),
        ("--per-table", "per_table", 1, 1_000_000),
        ("--seed", "seed", -(1 << 63), (1 << 63) - 1),
    ):
        value = getattr(args, name, None)
        if value is not None and not low <= value <= high:
            shown = str(value) if len(str(value)) <= 40 else f"(a {len(str(value))}-digit number)"
            raise CommandError(f"{flag} {shown}: give a number from {low:,} to {high:,}")


MAX_TASKS: Final = 1_000_000
"""The most tasks one ``coevo synth`` or ``coevo mine`` makes (held until written: more, in several calls with other seeds)."""


def cmd_synth(args: argparse.Namespace) -> int:
    """``coevo synth``: procedural tasks."""
    from coevo.agents.protocols import ProposalRequest
    from coevo.agents.synthesizers.procedural import DOMAINS, ProceduralSynthesizer

    _check_counts(args)
    if args.list:
        for name, domain in DOMAINS.items():
            print(name if not args.verbose else f"{name}\t{domain.description}")
        return EXIT_OK
    domains = list(DOMAINS) if args.domain in (None, "all") else [args.domain]
    synth = ProceduralSynthesizer(domains)
    request = ProposalRequest(
        n=args.n, seed=args.seed, level=args.level, families=args.family or None
    )
    try:
        tasks = _drawn(synth, request, "synthesizing")
    except (CoevoError, ValueError) as exc:
        raise CommandError(str(exc)) from exc
    kept, rejected = _judged(tasks, [], not args.no_check, "tasks")
    _write(args.out, _records(kept, []))
    _report(
        len(tasks), len(kept), rejected, args.out, f"synth {','.join(domains)}", not args.no_check
    )
    return EXIT_OK if not rejected else EXIT_REJECTED


def cmd_mine(args: argparse.Namespace) -> int:
    """``coevo mine``: a world and tasks from a real SQLite database."""
    from coevo.agents.protocols import ProposalRequest
    from coevo.agents.synthesizers.mining import Miner, NothingToMine

    _check_counts(args)
    try:
        miner = Miner(args.db, seed=args.seed, per_table=args.per_table)
    except NothingToMine as exc:
        print(f"coevo mine: {redact(str(exc))}", file=sys.stderr)
        return EXIT_OK
    except CoevoError as exc:
        raise CommandError(str(exc)) from exc
    except Exception as exc:  # a database shape coevo does not handle yet: say so, no traceback
        raise CommandError(
            f"could not mine {args.db} ({type(exc).__name__}: {exc}); "
            "this is a coevo bug: please report it with the database's schema (sqlite3 DB .schema)",
            EXIT_REJECTED,
        ) from exc
    report = miner.report
    print(
        f"mined {args.db}: {report.world_rows} of {report.source_rows:,} rows from {report.source_tables} tables; "
        f"{report.declared_links} declared and {len(report.inferred_links)} inferred foreign keys; "
        f"{len(miner.world.tools)} tools",
        file=sys.stderr,
    )
    for note in report.notes[:20]:
        print(f"  note: {note}", file=sys.stderr)
    try:
        tasks = _drawn(
            miner, ProposalRequest(n=args.n, seed=args.seed, level=args.level), "mining tasks"
        )
    except (NothingToMine, ValueError) as exc:
        print(f"coevo mine: {redact(str(exc))}", file=sys.stderr)
        return EXIT_OK
    kept, rejected = _judged(tasks, [miner.world], not args.no_check, "mined tasks")
    _write(args.out, _records(kept, [miner.world]))
    _report(
        len(tasks), len(kept), rejected, args.out, f"mine {Path(args.db).name}", not args.no_check
    )
    return EXIT_OK


def cmd_mutate(args: argparse.Namespace) -> int:
    """``coevo mutate``: children of the tasks in a file."""
    import random

    from coevo.agents.synthesizers.mutation import OPERATORS, Mutator
    from coevo.agents.synthesizers.planner import Unfit

    if args.list:
        for op in OPERATORS.values():
            print(f"{op.name}\t{op.direction}\t{op.description}")
        return EXIT_OK
    if not args.file or not args.op:
        raise CommandError("give FILE and --op (see --list)")
    _check_counts(args)
    wanted = args.op
    if wanted in ("harder", "easier"):
        choices = [n for n, op in OPERATORS.items() if op.direction == wanted]
    elif wanted in OPERATORS:
        choices = [wanted]
    else:
        raise CommandError(
            f"unknown operator {wanted!r}; choose from {', '.join(OPERATORS)}, harder, easier"
        )
    tasks, worlds = read_all_records(args)
    mutator = Mutator()
    children: list[TaskSpec] = []
    skipped: list[str] = []
    with Progress(len(tasks), f"mutating ({wanted})") as bar:
        for i, task in enumerate(tasks):
            world = task.world if isinstance(task.world, WorldSpec) else worlds.get(task.world_id)
            order = list(choices)
            random.Random(derive_seed(args.seed, "operators", i)).shuffle(order)
            for op in order:
                try:
                    children.append(mutator.mutate(task, op, seed=args.seed, world=world))
                    break
                except Unfit as exc:
                    reason = str(exc)
            else:
                skipped.append(f"task {i + 1}: {reason}")
            bar.advance()
    mutator.close()
    _print_some(skipped, "not mutated: ")
    if not children:
        raise CommandError(
            f"none of the {len(tasks)} tasks could be mutated with --op {wanted} (why is above), "
            "so nothing was written; try another --op (`coevo mutate --list`), or tasks made by "
            "`coevo synth` or `coevo mine`",
            status=EXIT_REJECTED,
        )
    kept, rejected = _judged(children, worlds.values(), not args.no_check, "children")
    _write(args.out, _records(kept, worlds.values()))
    _report(len(children), len(kept), rejected, args.out, f"mutate {wanted}", not args.no_check)
    return EXIT_OK if not rejected else EXIT_REJECTED


def add_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``synth``, ``mine`` and ``mutate`` to the ``coevo`` parser."""
    from coevo.agents.synthesizers.mutation import OPERATORS
    from coevo.agents.synthesizers.planner import FAMILIES, FAMILY_LEVELS
    from coevo.agents.synthesizers.procedural import DOMAINS

    spans = ", ".join(f"{f} {min(FAMILY_LEVELS[f])}–5" for f in FAMILIES)
    synth = sub.add_parser(
        "synth",
        help="make procedural tasks (offline)",
        formatter_class=fmt,
        description=(
            "Make N tasks in a procedural domain's world (one world per seed), at a difficulty\n"
            "level, run the Judge's mechanical checks, and write the accepted ones.\n\n"
            f"domains: {', '.join(DOMAINS)}\nfamilies (levels): {spans}\n\n"
            "Exit status: 0 all accepted, 1 some rejected (a bug: please report), 2 bad arguments."
        ),
        epilog="examples:\n  coevo synth --domain retail -n 100 --seed 1 --level 3 --out tasks.jsonl\n  coevo synth --list",
    )
    synth.add_argument(
        "--domain",
        choices=[*DOMAINS, "all"],
        default="all",
        help="the domain (default: all, mixed)",
    )
    synth.add_argument("-n", type=int, default=20, help="how many tasks (default 20)")
    synth.add_argument("--seed", type=int, default=0, help="the seed (same seed, same bytes)")
    synth.add_argument(
        "--level", type=int, choices=range(1, 6), default=None, help="difficulty level 1–5"
    )
    synth.add_argument(
        "--family", action="append", choices=FAMILIES, help="only this family (repeatable)"
    )
    synth.add_argument("--out", default="-", help="output .jsonl (default: standard output)")
    synth.add_argument("--no-check", action="store_true", help="skip the Judge's checks")
    synth.add_argument(
        "--list", action="store_true", help="print the domains, one per line, and stop"
    )
    synth.add_argument("-v", "--verbose", action="store_true", help="with --list: add descriptions")
    synth.set_defaults(func=cmd_synth)

    mine = sub.add_parser(
        "mine",
        help="make a world and tasks from a real SQLite database",
        formatter_class=fmt,
        description=(
            "Read DB (read-only; it is never modified), sample its rows into a world that keeps\n"
            "foreign keys walkable, derive tools, and make tasks along foreign-key paths.\n\n"
            "Exit status: 0 done (also when the database has no rows: a message, no tasks),\n"
            "2 the file is missing or not an SQLite database."
        ),
        epilog=(
            "examples (shop.sqlite: the sample database that ships with coevo):\n"
            "  coevo examples --copy shop .\n"
            "  coevo mine shop.sqlite -n 50 --seed 1 --out tasks.jsonl"
        ),
    )
    mine.add_argument("db", metavar="DB", help="an SQLite database file")
    mine.add_argument("-n", type=int, default=50, help="how many tasks (default 50)")
    mine.add_argument("--seed", type=int, default=0, help="the seed of the sample and the tasks")
    mine.add_argument(
        "--level", type=int, choices=range(1, 6), default=None, help="difficulty level 1–5"
    )
    mine.add_argument(
        "--per-table", type=int, default=120, help="rows drawn from each large table (default 120)"
    )
    mine.add_argument("--out", default="-", help="output .jsonl (default: standard output)")
    mine.add_argument("--no-check", action="store_true", help="skip the Judge's checks")
    mine.set_defaults(func=cmd_mine)

    mutate = sub.add_parser(
        "mutate",
        help="make harder or easier children of tasks",
        formatter_class=fmt,
        description=(
            "Apply a mutation operator to every task of FILE (tasks made by coevo keep the plan\n"
            "they were made from) and write the children, each naming its parent and operator.\n\n"
            + "\n".join(
                f"  {op.name:<15} {op.direction:<7} {op.description}" for op in OPERATORS.values()
            )
            + "\n  harder / easier  any operator of that direction"
        ),
        epilog="examples:\n  coevo mutate tasks.jsonl --op add_hop --out harder.jsonl\n  coevo mutate tasks.jsonl --op easier --seed 2 --out easier.jsonl",
    )
    mutate.add_argument(
        "file", metavar="FILE", nargs="?", help=".jsonl of tasks (and their worlds)"
    )
    mutate.add_argument("--op", help="an operator name, or harder / easier")
    mutate.add_argument("--seed", type=int, default=0, help="the seed")
    mutate.add_argument("--out", default="-", help="output .jsonl (default: standard output)")
    mutate.add_argument("--no-check", action="store_true", help="skip the Judge's checks")
    mutate.add_argument("--list", action="store_true", help="print the operators and stop")
    add_read_limits(mutate)
    mutate.set_defaults(func=cmd_mutate)
