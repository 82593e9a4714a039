"""The export for trainers, ``coevo.export/1``, on a small committed log: layout, manifest, read-back, `datasets`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from coevo.arena import World
from coevo.arena.analysis import load_run
from coevo.arena.analysis.export import (
    EXPORT_FORMAT,
    MANIFEST,
    TASK_FIELDS,
    WHERE_FIELDS,
    WORLD_FIELDS,
    export_run,
    markdown_tables,
    read_manifest,
    read_tasks,
    read_worlds,
    task_from_row,
)
from coevo.arena.errors import CoevoError
from coevo.run.cli import main

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "tests" / "data" / "logs" / "v1-383f438"
TASK_COLUMNS = [f.name for f in TASK_FIELDS if not f.inline]
INLINE_COLUMNS = [f.name for f in TASK_FIELDS]
WORLD_COLUMNS = [f.name for f in WORLD_FIELDS]


@pytest.fixture(scope="module")
def run():
    return load_run(str(LOG))


@pytest.fixture(scope="module")
def exports(run, tmp_path_factory) -> dict[str, Path]:
    """The log exported four ways: jsonl and parquet, worlds apart and inline."""
    root = tmp_path_factory.mktemp("exports")
    out = {}
    for fmt in ("jsonl", "parquet"):
        for inline in (False, True):
            name = f"{fmt}-inline" if inline else fmt
            export_run(run, root / name, fmt=fmt, inline_worlds=inline)
            out[name] = root / name
    return out


def _accepted(run) -> set[str]:
    eval_ids = {t["task_id"] for t in run["tasks"].to_pylist() if t["source"] == "eval"}
    return {v["task_id"] for v in run["verdicts"].to_pylist() if v["accepted"]} - eval_ids


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_both_tables_load_into_a_datasets_dataset(fmt: str, exports, tmp_path) -> None:
    """`datasets.load_dataset` reads the tasks and the worlds table of either format: every row, the documented columns."""
    from datasets import load_dataset

    directory = exports[fmt]
    manifest = read_manifest(directory)
    builder = "json" if fmt == "jsonl" else "parquet"
    tasks = load_dataset(
        builder, data_files=str(directory / f"tasks.{fmt}"), split="train", cache_dir=str(tmp_path)
    )
    worlds = load_dataset(
        builder, data_files=str(directory / f"worlds.{fmt}"), split="train", cache_dir=str(tmp_path)
    )
    assert manifest.worlds is not None
    assert (tasks.num_rows, worlds.num_rows) == (manifest.tasks.rows, manifest.worlds.rows)
    assert tasks.column_names == TASK_COLUMNS
    assert worlds.column_names == WORLD_COLUMNS
    row = tasks[0]
    assert [m["role"] for m in row["messages"]] == ["system", "user"]
    assert row["messages"][1]["content"] == row["instruction"]
    assert row["prompt"] == f"{row['system']}\n\n{row['instruction']}"
    by_id = {w["world_id"]: w for w in worlds}
    tools = json.loads(by_id[row["world_id"]]["openai_tools"])
    assert tools[-1] == {
        "type": "function",
        "function": {
            "name": "submit",
            "description": tools[-1]["function"]["description"],
            "parameters": tools[-1]["function"]["parameters"],
        },
    }
    task = task_from_row(row, read_worlds(directory))
    with World(task.world) as world:
        assert world.run(task, task.solution).reward.value == 1


@pytest.mark.parametrize("name", ["jsonl", "parquet", "jsonl-inline", "parquet-inline"])
def test_every_exported_task_reads_back_and_its_solution_earns_1(name: str, run, exports) -> None:
    """read_tasks gives every accepted non-eval task once, its world resolved; the reference solution's reward is 1."""
    tasks = read_tasks(exports[name])
    assert {t.task_id for t in tasks} == _accepted(run)
    assert len(tasks) == len(_accepted(run))
    worlds: dict[str, World] = {}
    try:
        for task in tasks:
            world = worlds.get(task.world_id) or worlds.setdefault(task.world_id, World(task.world))
            reward = world.run(task, task.solution).reward
            assert reward.value == 1, (task.task_id, reward.detail())
    finally:
        for world in worlds.values():
            world.close()


def test_each_world_is_written_once_and_the_manifest_names_the_files(run, exports) -> None:
    """By default a world's record is in worlds.jsonl once and in no task row; export.json counts and sizes the files."""
    directory = exports["jsonl"]
    manifest = json.loads((directory / MANIFEST).read_text())
    assert manifest["format"] == EXPORT_FORMAT == "coevo.export/1"
    assert manifest["run"]["run_dir"] == str(LOG) and manifest["run"]["generations"] == 2
    assert manifest["table_format"] == "jsonl" and manifest["inline_worlds"] is False
    for table in ("tasks", "worlds"):
        file = directory / manifest[table]["path"]
        assert file.stat().st_size == manifest[table]["bytes"]
        assert len(file.read_text().splitlines()) == manifest[table]["rows"]
    (world_id,) = read_worlds(directory)
    first_statement = read_worlds(directory)[world_id].schema_sql[0]
    marker = json.dumps(first_statement)[1:-1]
    assert marker not in (directory / "tasks.jsonl").read_text()
    assert (directory / "worlds.jsonl").read_text().count(marker) == 1
    rows = [json.loads(line) for line in (directory / "tasks.jsonl").read_text().splitlines()]
    assert {json.loads(r["task"])["world"] for r in rows} == {world_id}, "the world by id"


def test_inline_rows_are_self_contained(exports) -> None:
    """With --inline-worlds each row has its world and tools, and no worlds table is written."""
    directory = exports["parquet-inline"]
    manifest = read_manifest(directory)
    assert manifest.inline_worlds and manifest.worlds is None
    assert not (directory / "worlds.parquet").exists()
    import pyarrow.parquet as pq

    table = pq.read_table(directory / "tasks.parquet")
    assert table.column_names == INLINE_COLUMNS
    row = table.slice(0, 1).to_pylist()[0]
    task = task_from_row(row)  # no worlds given: the row is enough
    assert task.world_id == row["world_id"]
    assert json.loads(row["tools"])[-1]["name"] == "submit"


def test_an_export_replaces_an_earlier_one_and_leaves_other_files(run, tmp_path) -> None:
    """Exporting again into the same directory removes the files the earlier manifest named, nothing else."""
    (tmp_path / "notes.txt").write_text("mine\n")
    export_run(run, tmp_path, fmt="jsonl")
    export_run(run, tmp_path, fmt="parquet", inline_worlds=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [MANIFEST, "notes.txt", "tasks.parquet"]


def test_where_filters_on_the_documented_fields_and_progress_counts_rows(run, tmp_path) -> None:
    """`where` keeps the matching tasks (world_id and episodes included); progress ends at (rows, rows)."""
    calls: list[tuple[int, int]] = []
    manifest = export_run(
        run,
        tmp_path,
        where="level >= 2 and episodes >= 0 and world_id is not None",
        progress=lambda done, total: calls.append((done, total)),
    )
    levels = {t["task_id"]: t["level"] for t in run["tasks"].to_pylist()}
    assert manifest.tasks.rows == sum(levels[t] >= 2 for t in _accepted(run)) > 0
    assert manifest.where.startswith("level >= 2")
    assert calls == [(i, manifest.tasks.rows) for i in range(1, manifest.tasks.rows + 1)]
    with pytest.raises(CoevoError, match="fields: task_id, world_id"):
        export_run(run, tmp_path, where="lvl >= 2")


def test_reading_a_directory_without_an_export_says_how_to_make_one(tmp_path) -> None:
    """read_tasks on a directory with no manifest names the command that writes one."""
    with pytest.raises(CoevoError, match="coevo export RUN --out"):
        read_tasks(tmp_path)


def test_the_docs_list_every_column_of_both_tables() -> None:
    """docs/analysis.md holds markdown_tables() verbatim, so the documented columns cannot drift."""
    page = (ROOT / "docs" / "analysis.md").read_text()
    assert markdown_tables() in page, (
        "docs/analysis.md is out of date: paste in the output of "
        "coevo.arena.analysis.export.markdown_tables() under 'Training data'"
    )


def test_the_export_command_names_what_it_wrote(tmp_path, capsys) -> None:
    """`coevo export` ends with one line naming the rows, the files and their sizes; --help lists the --where fields."""
    out = tmp_path / "export"
    assert main(["export", str(LOG), "--out", str(out), "--format", "parquet"]) == 0
    line = capsys.readouterr().err.strip().splitlines()[-1]
    manifest = read_manifest(out)
    assert line.startswith(f"{manifest.tasks.rows} tasks, 1 world → {out}/: tasks.parquet (")
    assert "worlds.parquet (" in line and MANIFEST in line and "a task" in line
    assert main(["export", str(LOG), "--out", str(out), "--where", "lvl > 1"]) == 2
    assert "unknown field 'lvl'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    assert " ".join(WHERE_FIELDS) in " ".join(capsys.readouterr().out.split())


def test_analyze_names_the_graphml_file_and_shows_both_levels(tmp_path, capsys) -> None:
    """`coevo analyze --graphml` says where the graph went and its size; the table has mastered and frontier."""
    path = tmp_path / "lineage.graphml"
    assert main(["analyze", str(LOG), "--no-irt", "--graphml", str(path)]) == 0
    captured = capsys.readouterr()
    assert path.exists()
    assert f"lineage graph: 30 tasks, 0 mutations → {path}" in captured.err
    header = captured.out.splitlines()[1].split()
    assert header == [
        "gen",
        "accepted",
        "train",
        "eval",
        "mastered",
        "frontier",
        "brier",
        "level_proposed",
        "paid",
        "div",
        "informative",
    ]


def test_frames_without_pandas_name_the_extra(run, monkeypatch) -> None:
    """Run.to_pandas without pandas installed says which extra to install."""
    monkeypatch.setitem(sys.modules, "pandas", None)  # what an import of a missing package sees
    with pytest.raises(CoevoError, match=r"pip install 'coevo\[frames\]'"):
        run.to_pandas("episodes")


def test_a_manifest_cannot_make_the_export_delete_other_files(run, tmp_path) -> None:
    """A manifest naming another file (planted or stale) deletes only the export's own tables."""
    export_run(run, tmp_path, fmt="jsonl")
    (tmp_path / "notes.txt").write_text("mine\n")
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    manifest["worlds"]["path"] = "notes.txt"
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    export_run(run, tmp_path, fmt="jsonl")
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_where_refuses_to_compare_text_with_a_number(run, tmp_path) -> None:
    """`--where 'domain > 3'` is a clear error naming both values, not a TypeError."""
    with pytest.raises(CoevoError, match=r"cannot compare .* \(str and int\)"):
        export_run(run, tmp_path, where="domain > 3")
