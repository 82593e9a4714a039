"""``coevo import tau2`` and ``coevo audit``: real benchmarks as coevo tasks, and their rewards audited by the Judge."""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from coevo.arena.bounded import open_to_write
from coevo.arena.errors import CommandError, FileRefusedError
from coevo.run.commands import EXIT_OK, EXIT_REJECTED

__all__ = ["add_commands", "code_paths"]


def cmd_import_tau2(args: argparse.Namespace) -> int:
    """Write a τ²-bench domain's worlds and tasks as coevo records."""
    from coevo.arena.tau2 import read_domain
    from coevo.arena.tau2_import import import_domain

    out = Path(args.out)
    if out.is_dir():  # said before the checkout is read
        raise CommandError(
            f"--out {out} is a folder: give the file to write the records to, e.g. --out "
            f"{out / (args.domain + '.jsonl')}"
        )
    domain = read_domain(
        args.checkout, args.domain, data_root=args.data_root, code_root=args.code_root
    )
    target = out.resolve()
    for folder in (domain.data_dir.resolve(), domain.code_dir.resolve()):
        if target.is_relative_to(folder):
            raise CommandError(
                f"--out {out} is inside the domain's own folder {folder} (the import's input): "
                "write the records elsewhere, e.g. --out tasks/"
                f"{domain.name}.jsonl"
            )
    imported = import_domain(domain)
    tmp = out.with_name(out.name + ".partial")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        # through no link; moved into place whole (a link named --out is replaced, not followed)
        with os.fdopen(open_to_write(tmp, out.parent), "w") as handle:
            for record in imported.records():
                handle.write(json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n")
        tmp.replace(out)
    except FileRefusedError:
        raise  # a link or a FIFO in the way: said, left as it was
    except OSError as exc:
        if tmp.is_file() and not tmp.is_symlink():
            tmp.unlink()  # nothing left behind
        raise CommandError(f"cannot write {out}: {exc}; choose another --out") from exc
    print(
        f"{domain.name}: {len(imported.tasks)} of {len(domain.tasks)} tasks imported over "
        f"{len(imported.worlds)} world(s) into {out}",
        file=sys.stderr,
    )
    by_reason: dict[str, list[str]] = collections.defaultdict(list)
    for task_id, reason in imported.skipped.items():
        by_reason[reason].append(task_id)
    for reason, ids in by_reason.items():
        shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        print(f"  {len(ids)} task(s) not imported ({shown}): {reason}", file=sys.stderr)
    if not imported.tasks:
        print(f"no task of {domain.name} could be imported", file=sys.stderr)
        return EXIT_REJECTED
    return EXIT_OK


def code_paths(folders: list[str]) -> list[str]:
    """``--code`` folders as absolute paths, each checked to exist (CommandError naming the first that does not)."""
    missing = [p for p in folders if not Path(p).is_dir()]
    if missing:
        raise CommandError(
            f"--code {missing[0]}: no such folder (give the folder holding the domain's code, "
            "e.g. CHECKOUT/src for τ²-bench)"
        )
    return [str(Path(p).resolve()) for p in folders]


def cmd_audit(args: argparse.Namespace) -> int:
    """Audit imported tasks: what a do-nothing trajectory earns, gold actions that fail, nondeterminism, partial credit."""
    from coevo.arena.codetask import read_code_tasks
    from coevo.arena.codeworld import CodeWorlds
    from coevo.arena.tau2_import import audit

    if not 1 <= args.workers <= 64:  # as [benchmark].workers; a sandboxed process each
        shown = args.workers if len(str(args.workers)) <= 40 else "(a many-digit number)"
        raise CommandError(f"--workers {shown}: give a number from 1 to 64")
    tasks = read_code_tasks(args.file)
    code = code_paths(args.code)
    if not tasks:
        raise CommandError(f"{args.file} holds no task to audit")

    def progress(done: int) -> None:
        if done % 10 == 0 or done == len(tasks):
            print(f"  audited {done} of {len(tasks)} tasks", file=sys.stderr, flush=True)

    replayable = bool(code) or importlib.util.find_spec("tau2") is not None
    audits = None
    if replayable:
        with CodeWorlds(workers=args.workers, seconds=args.call_seconds, paths=code) as worlds:
            probe = worlds.episode(tasks[0].world)
            why = probe.failed
            probe.close()
            if why is None:
                audits = audit(tasks, worlds, progress=progress)
            else:
                print(
                    f"the domain's code could not run ({why}); auditing statically", file=sys.stderr
                )
    if audits is None:
        audits = audit(tasks, None)
    if args.json:
        for item in audits:
            print(json.dumps(item.row(), separators=(",", ":")))
    _summary(audits, sys.stderr if args.json else sys.stdout)
    return EXIT_OK


def _summary(audits: list[Any], out: Any) -> None:
    by_domain: dict[str, list[Any]] = collections.defaultdict(list)
    for item in audits:
        by_domain[str(item.task.provenance.get("domain"))].append(item)
    header = f"{'domain':<18} {'tasks':>5} {'noop: DB':>8} {'reward':>6} {'undecided':>9} {'gold fails':>10} {'nondet':>6} {'partial':>7}  basis"
    print(header, file=out)
    for domain, items in sorted(by_domain.items()):
        judged = [i.verdict for i in items if i.verdict is not None]
        row = (
            f"{domain:<18} {len(items):>5} {sum(i.noop_passes_db_check for i in items):>8} "
            f"{sum(i.noop_passes_reward is True for i in items):>6} "
            f"{sum(i.noop_passes_reward is None for i in items):>9} "
            f"{sum(v.checks['oracle'].passed is False for v in judged) if judged else '-':>10} "
            f"{sum(v.checks['determinism'].passed is False for v in judged) if judged else '-':>6} "
            f"{sum(v.checks['partial'].passed is False for v in judged) if judged else '-':>7}  "
            f"{items[0].basis}"
        )
        print(row, file=out)
    for item in audits:
        task = item.task.provenance.get("task")
        notes = []
        if item.verdict is not None:
            for name in ("oracle", "determinism", "partial"):
                check = item.verdict.checks[name]
                if check.passed is False:
                    notes.append(f"{name}: {check.reason}")
        if item.noop_passes_reward is not False:
            passes = "passes" if item.noop_passes_reward else "may pass"
            notes.append(
                f"doing nothing {passes} the reward"
                + (f" ({'; '.join(item.reasons)})" if item.reasons else "")
            )
        elif item.noop_passes_db_check:
            notes.append("doing nothing passes the database check")
        for note in notes:
            print(f"  {item.task.provenance.get('domain')} task {task}: {note}", file=out)


def add_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``import`` and ``audit`` to the ``coevo`` command."""
    importer = sub.add_parser(
        "import",
        help="import a benchmark's tasks as coevo records (tau2)",
        formatter_class=fmt,
        description=(
            "Read a benchmark and write its worlds and tasks as coevo.codeworld/1 and\n"
            "coevo.codetask/1 records (JSON lines). The benchmark's tool code is read as syntax,\n"
            "never run. See docs/benchmarks-import.md."
        ),
    )
    kinds = importer.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    tau2 = kinds.add_parser(
        "tau2",
        help="a τ²-bench domain (airline, retail, mock, …)",
        formatter_class=fmt,
        description=(
            "Import every task of a τ²-bench domain from the root of a checkout of its repository\n"
            "(data/tau2/domains/NAME/ and src/tau2/domains/NAME/), or from an installed package's\n"
            "folder (the site-packages holding tau2/)."
        ),
        epilog="example:\n  coevo import tau2 ~/tau2-bench --domain retail --out retail.jsonl",
    )
    tau2.add_argument("checkout", metavar="CHECKOUT", help="the checkout's root, or site-packages")
    tau2.add_argument("--domain", required=True, help="the domain: airline, retail, mock, …")
    tau2.add_argument("--out", required=True, metavar="FILE", help="the .jsonl file to write")
    tau2.add_argument("--data-root", default=None, help="the domains' data folder, if elsewhere")
    tau2.add_argument("--code-root", default=None, help="the domains' code folder, if elsewhere")
    tau2.set_defaults(func=cmd_import_tau2)

    auditor = sub.add_parser(
        "audit",
        help="audit imported tasks' rewards with the Judge",
        formatter_class=fmt,
        description=(
            "For every task of FILE (what coevo import wrote): does a do-nothing trajectory pass\n"
            "the benchmark's database check, and its full reward; do the gold actions fail; is the\n"
            "replay nondeterministic; can the verification tell a partial solution from a full one.\n"
            "With the domain's code installed (or --code), by replay in sandboxed workers (basis\n"
            "'replay'); otherwise from the tools' write flags (basis 'static').\n\n"
            "--json prints one JSON object per task on standard output; the summary goes to\n"
            "standard error."
        ),
        epilog="example:\n  coevo audit retail.jsonl --code ~/tau2-bench/src --json > findings.jsonl",
    )
    auditor.add_argument("file", metavar="FILE", help="a .jsonl file coevo import wrote")
    auditor.add_argument("--json", action="store_true", help="one JSON object per task")
    auditor.add_argument(
        "--code",
        action="append",
        default=[],
        metavar="PATH",
        help="a folder holding the domain's code (e.g. CHECKOUT/src), put on the workers' import path",
    )
    auditor.add_argument(
        "--workers", type=int, default=1, help="sandboxed worker processes (default 1)"
    )
    auditor.add_argument(
        "--call-seconds",
        type=float,
        default=60.0,
        help="wall clock of one tool call or reset (default 60)",
    )
    auditor.set_defaults(func=cmd_audit)
