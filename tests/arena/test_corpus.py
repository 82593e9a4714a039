"""Corpora: built on Ray in shards, judged, deduplicated, resumed after kill -9 to the same corpus, reported and exported."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from coevo.arena.run.cli import main
from coevo.arena.run.corpus import CORPUS_TABLES, near_duplicate_key

from tests.agents.databases import build_library, build_shop

SMALL = ["--worlds", "6", "--tasks-per-world", "4", "--shard-size", "1"]


def _tables(folder: Path) -> dict[str, list[str]]:
    """Every committed row of each table, as sorted text (order of build and shard aside)."""
    out = {}
    for table in CORPUS_TABLES:
        data = ds.dataset(str(folder / table), format="parquet", partitioning="hive").to_table()
        out[table] = sorted(json.dumps(r, sort_keys=True, default=str) for r in data.to_pylist())
    return out


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("part-0.parquet"))
    }


@pytest.fixture(scope="module")
def reference(ray_cluster, tmp_path_factory) -> Path:
    """An uninterrupted build of the small corpus, on the session's Ray."""
    out = tmp_path_factory.mktemp("corpus") / "reference"
    assert main(["corpus", "build", "--out", str(out), *SMALL]) == 0
    return out


def test_a_corpus_holds_every_task_once_each_judged_with_a_manifest(reference) -> None:
    tasks = ds.dataset(str(reference / "tasks"), format="parquet", partitioning="hive").to_table()
    ids = tasks.column("task_id").to_pylist()
    assert len(ids) == len(set(ids)) > 0
    verdicts = ds.dataset(str(reference / "verdicts"), format="parquet", partitioning="hive")
    assert sorted(verdicts.to_table().column("task_id").to_pylist()) == sorted(ids)
    worlds = ds.dataset(str(reference / "worlds"), format="parquet", partitioning="hive").to_table()
    assert worlds.num_rows == 6 and len(set(tasks.column("domain").to_pylist())) == 5
    manifest = json.loads((reference / "corpus.json").read_text())
    assert manifest["format"] == "coevo.corpus/1" and manifest["source"]["seed"] == 0
    assert (
        manifest["source"]["levels"] == [1, 2, 3, 4, 5] and manifest["split"]["eval_share"] == 0.1
    )
    levels = tasks.column("level").to_pylist()
    assert set(levels) <= {1, 2, 3, 4, 5} and len(set(levels)) >= 3


def test_two_workers_and_a_build_killed_with_kill_9_give_the_same_corpus(
    reference, tmp_path
) -> None:
    """kill -9 of the builder after its first commits; the same command again reuses them and ends the same."""
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "coevo.arena.run.cli", "corpus", "build", "--out", str(out)]
    command += [*SMALL, "--workers", "2"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    builder = subprocess.Popen(command, env=env, start_new_session=True, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(list((out / "_commits").glob("*.json"))) < 2:
        if builder.poll() is not None:
            break
        time.sleep(0.05)
    os.killpg(builder.pid, signal.SIGKILL)
    builder.wait()
    before = _digests(out)
    committed = len(list((out / "_commits").glob("*.json")))
    assert 2 <= committed < 6, f"killed after {committed} of 6 shards"
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"reused {committed} committed, built {6 - committed}" in again.stderr
    after = _digests(out)
    assert {k: after[k] for k in before} == before, "no committed shard was written again"
    assert _tables(out) == _tables(reference)
    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0 and "reused 6 committed, built 0" in rerun.stderr


def test_a_shard_not_committed_is_invisible_and_removed_on_resume(reference, tmp_path) -> None:
    out = tmp_path / "copy"
    shutil.copytree(reference, out)
    stray = out / "tasks" / "shard=4"
    shutil.rmtree(stray)
    (out / "_commits" / "shard-4.json").unlink()  # shard 4 never committed...
    stray.mkdir()
    table = pa.table({"task_id": ["sha256:stray"]})
    pq.write_table(table, stray / ".part-0.parquet")  # ...and killed while writing its part
    seen = ds.dataset(str(out / "tasks"), format="parquet", partitioning="hive").to_table()
    assert "sha256:stray" not in seen.column("task_id").to_pylist()
    assert main(["corpus", "build", "--out", str(out), *SMALL]) == 0
    assert not (stray / ".part-0.parquet").exists()
    assert _tables(out) == _tables(reference)


def test_another_source_on_the_same_folder_is_refused(reference, tmp_path, capsys) -> None:
    out = tmp_path / "copy"
    shutil.copytree(reference, out)
    assert main(["corpus", "build", "--out", str(out), *SMALL, "--seed", "1"]) == 2
    assert "another source or other flags" in capsys.readouterr().err


def test_near_duplicates_share_a_key_that_ignores_values_not_tools(reference) -> None:
    from coevo.arena.spec import TaskSpec

    tasks = ds.dataset(str(reference / "tasks"), format="parquet", partitioning="hive").to_table()
    task = TaskSpec.model_validate_json(tasks.column("spec")[0].as_py())
    renumbered = task.model_copy(update={"instruction": task.instruction + " (ref 12, 'x')"})
    other = task.model_copy(update={"instruction": task.instruction + " (ref 99, 'y')"})
    assert near_duplicate_key(renumbered) == near_duplicate_key(other)
    fewer = other.model_copy(update={"solution": task.solution[-1:]})
    assert len(task.solution) == 1 or near_duplicate_key(fewer) != near_duplicate_key(other)


def test_a_mined_folder_becomes_a_corpus_and_a_database_twice_is_one_world(
    ray_cluster, tmp_path, capsys
) -> None:
    folder = tmp_path / "databases"
    folder.mkdir()
    build_shop(folder / "a_shop.sqlite")
    build_library(folder / "b_library.db")
    shutil.copy(folder / "a_shop.sqlite", folder / "c_shop_again.sqlite")
    (folder / "notes.txt").write_text("not a database")
    out = tmp_path / "mined"
    args = ["corpus", "build", "--out", str(out), "--mine", str(folder), "--tasks-per-world", "6"]
    assert main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert report["duplicate_worlds"] == 1 and report["worlds"] == 2
    worlds = ds.dataset(str(out / "worlds"), format="parquet", partitioning="hive").to_table()
    assert worlds.num_rows == 2


def test_corpus_report_and_export_read_a_corpus(reference, tmp_path, capsys) -> None:
    assert (
        main(["corpus", "report", str(reference), "--json", "--plot", str(tmp_path / "c.png")]) == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["worlds"] == 6 and report["tasks"] == report["accepted"] + report["rejected"]
    assert sum(report["levels"].values()) == report["tasks"]
    assert report["split"]["eval_tasks"] + report["split"]["train_tasks"] == report["tasks"]
    assert report["diversity"] is not None and 0 < report["diversity"] <= 1
    assert (tmp_path / "c.png").stat().st_size > 1000
    assert main(["corpus", "report", str(reference)]) == 0
    assert "6 worlds" in capsys.readouterr().out
    assert main(["analyze", str(reference)]) == 2
    assert "is a corpus, not a run: `coevo corpus report" in capsys.readouterr().err
    assert main(["export", str(reference), "--out", str(tmp_path / "export")]) == 0
    rows = (tmp_path / "export" / "tasks.jsonl").read_text().splitlines()
    assert len(rows) == report["accepted"]


def test_an_experiment_trains_on_a_corpus_and_evaluates_on_its_held_out_worlds(
    ray_cluster, tmp_path
) -> None:
    """The `corpus` Synthesizer: training tasks from train worlds, the eval suite from held-out ones."""
    from coevo.arena.gamelog import GameLog
    from coevo.arena.gamelog.corpus import held_out

    corpus = tmp_path / "corpus"
    flags = ["--worlds", "8", "--tasks-per-world", "6", "--levels", "1,2", "--eval-share", "0.5"]
    assert main(["corpus", "build", "--out", str(corpus), *flags]) == 0
    experiment = tmp_path / "on-corpus.toml"
    experiment.write_text(
        '[run]\nname = "on-corpus"\nseed = 1\ngenerations = 2\nrollouts = 2\nchunk = 8\n'
        f'[synthesizer]\nname = "corpus"\nconfig = {{ path = "{corpus}" }}\n'
        '[curriculum]\nname = "uniform"\ntasks_per_gen = 4\nlevels = [1, 2]\n'
        "[eval]\nlevels = [1]\nper_level = 2\nevery = 1\n"
    )
    assert main(["run", str(experiment), "--out", str(tmp_path / "run")]) == 0
    tasks = GameLog(str(tmp_path / "run")).read("tasks").to_pylist()
    in_corpus = set(
        ds.dataset(str(corpus / "tasks"), format="parquet", partitioning="hive")
        .to_table()
        .column("task_id")
        .to_pylist()
    )
    assert tasks and {t["task_id"] for t in tasks} <= in_corpus
    evals = {t["world_id"] for t in tasks if t["source"] == "eval"}
    trained = {t["world_id"] for t in tasks if t["source"] != "eval"}
    assert evals and trained and not evals & trained
    assert all(held_out(w, 0.5) for w in evals) and not any(held_out(w, 0.5) for w in trained)
