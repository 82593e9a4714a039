"""The accepted tasks a trainer may play: from a run directory, an export, or a file of records.

:func:`accepted_tasks` reads a *source* and returns its tasks, each with
its world inline, every one of them passed by the Judge:

* a **run directory** (a path or any pyarrow filesystem URI, e.g.
  ``s3://bucket/runs/a``): the run's live pool, the tasks the Judge accepted
  in the committed generations, in the order they were first accepted, the
  eval suite left out. It is all the accepted tasks, not the curriculum's
  current pick from its checkpoint: a curriculum's state is its own format,
  while the accepted tasks are a fact of the log any reader can read. Each
  call reads the log again, so a later call sees the generations committed
  since;
* an **export** (``coevo export RUN --out DIR``): the directory, or its
  ``tasks.jsonl`` / ``tasks.parquet``; its tasks are the run's accepted ones;
* a file of **records** (``coevo.task/1`` and ``coevo.world/1``, JSON
  Lines, as ``coevo synth`` and ``coevo mine`` write): every task in it is
  judged here (the Judge's mechanical checks) and a rejected one is an error,
  so nothing unjudged is ever served.

``levels`` and ``domains`` keep the tasks of those levels
(:func:`~coevo.arena.difficulty.task_level`) and of worlds of those domains.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection
from pathlib import Path
from typing import Final

from coevo.arena.analysis.export import MANIFEST, read_tasks
from coevo.arena.difficulty import task_level
from coevo.arena.errors import CoevoError
from coevo.arena.gamelog import GameLog, RunDir
from coevo.arena.judge import WorldCache, assess_task
from coevo.arena.records import load_records
from coevo.arena.spec import TaskSpec, WorldSpec

__all__ = ["EXPORT_FILES", "accepted_tasks", "source_kind"]

EXPORT_FILES: Final = ("tasks.jsonl", "tasks.parquet", "worlds.jsonl", "worlds.parquet")
"""The files of an export that stand for the whole export when given as a source."""


_KINDS: Final = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def _what_it_is(path: Path) -> str:
    """What a path that is neither a folder nor a regular file is (a device, a FIFO, a link to one)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return f"it is a link to {os.readlink(path)}, which does not exist"
    except OSError as exc:  # a loop of links, a folder that cannot be entered
        return f"it cannot be read: {exc.strerror or exc}"
    kind = next((name for test, name in _KINDS if test(mode)), "not a file")
    if path.is_symlink():
        return f"it is a link to {os.readlink(path)}, {kind}"
    return f"it is {kind}"


def source_kind(source: str) -> str:
    """What ``source`` is: ``run``, ``export`` or ``records``.

    Raises:
        CoevoError: it is none of them (the message says what each looks like).
    """
    if "://" in source:
        return "run"  # exports and records are read from this machine; a URI is a run directory
    path = Path(source)
    if path.is_dir():
        if (path / MANIFEST).is_file():
            return "export"
        if RunDir(source).exists("experiment.json"):
            return "run"
        raise CoevoError(
            f"{source} is neither a run directory (it has no experiment.json) nor an export "
            f"(no {MANIFEST}); give the folder `coevo run` or `coevo export` wrote"
        )
    if path.is_file():
        if path.name in EXPORT_FILES and (path.parent / MANIFEST).is_file():
            return "export"
        return "records"
    if os.path.lexists(path):  # there, but not a folder or a regular file: say what it is
        raise CoevoError(
            f"{source} is not a regular file ({_what_it_is(path)}); give a run directory, an "
            "export or a file of task records"
        )
    raise CoevoError(
        f"{source}: no such file or directory; give a run directory, an export "
        "(`coevo export RUN --out DIR`) or a file of task records (`coevo synth --out FILE`)"
    )


def _export(source: str) -> list[TaskSpec]:
    path = Path(source)
    return read_tasks(path if path.is_dir() else path.parent)


def _run(source: str) -> list[TaskSpec]:
    """The accepted tasks of the committed generations, in the order first accepted; no eval task."""
    log = GameLog(RunDir(source))
    if log.last_generation() < 0:
        raise CoevoError(
            f"{source}: no generation is committed yet; its pool is read from committed "
            "generations: start from it once generation 0 has committed"
        )
    verdicts = log.read("verdicts", columns=["task_id", "accepted"]).to_pylist()
    listed = log.read("tasks", columns=["task_id", "source"]).to_pylist()
    held_out = {row["task_id"] for row in listed if row["source"] == "eval"}
    chosen = dict.fromkeys(
        row["task_id"]
        for row in verdicts
        if row["accepted"] and row["task_id"] is not None and row["task_id"] not in held_out
    )
    specs, _ = log.task_specs()
    missing = next((task_id for task_id in chosen if task_id not in specs), None)
    if missing is not None:
        raise CoevoError(
            f"{source}: the accepted task {missing} has no row in the tasks table; the log is "
            "damaged (`coevo doctor` says where)"
        )
    return [specs[task_id] for task_id in chosen]


def _records(source: str) -> list[TaskSpec]:
    """The tasks of a records file, judged here, each with its world inline."""
    tasks, worlds = load_records(source)
    cache = WorldCache(specs=worlds)
    out = []
    for task in tasks:
        verdict = assess_task(task, cache)
        if not verdict.accepted:
            failed = ", ".join(
                f"{name} ({result.reason})"
                for name, result in verdict.checks.items()
                if result.passed is False
            )
            raise CoevoError(
                f"{source}: task {task.task_id} is rejected by the Judge: {failed or verdict.error}; "
                f"only accepted tasks are served: `coevo check {source}` shows every verdict, "
                "remove the rejected tasks"
            )
        world = cache.spec_of(task)
        assert isinstance(world, WorldSpec)  # the Judge accepted it, so its world is there
        out.append(
            task if isinstance(task.world, WorldSpec) else task.model_copy(update={"world": world})
        )
    return out


_READERS: Final = {"run": _run, "export": _export, "records": _records}


def accepted_tasks(
    source: str,
    *,
    levels: Collection[int] | None = None,
    domains: Collection[str] | None = None,
) -> list[TaskSpec]:
    """The accepted tasks of ``source``, each with its world inline, in the source's order, each once.

    Args:
        source: a run directory (its live pool), an export, or a file of records (see the module docstring).
        levels: keep only the tasks of these levels (None: every level).
        domains: keep only the tasks whose world is of these domains (None: every domain).

    Raises:
        CoevoError: the source cannot be read, holds a rejected task (records), or
            nothing is left after the filters (naming what there was).
        RecordError: a records file with a record that cannot be read.
        LogError: a run directory whose log is damaged.
    """
    tasks = _READERS[source_kind(source)](source)
    wanted_levels = None if levels is None else set(levels)
    wanted_domains = None if domains is None else set(domains)
    out: dict[str, TaskSpec] = {}
    for task in tasks:
        assert isinstance(task.world, WorldSpec)
        if wanted_levels is not None and task_level(task) not in wanted_levels:
            continue
        if wanted_domains is not None and task.world.domain not in wanted_domains:
            continue
        out.setdefault(task.task_id, task)
    if not tasks:
        raise CoevoError(f"{source} holds no accepted task")
    if not out:
        asked = [
            f"{name} {sorted(wanted, key=str)}"
            for name, wanted in (("levels", wanted_levels), ("domains", wanted_domains))
            if wanted is not None
        ]
        held = sorted({task_level(t) for t in tasks}, key=str)
        kinds = sorted({t.world.domain for t in tasks if isinstance(t.world, WorldSpec)})
        raise CoevoError(
            f"{source}: none of its {len(tasks)} accepted tasks is of {' and '.join(asked)}; "
            f"it holds levels {held} and domains {kinds}"
        )
    return list(out.values())
