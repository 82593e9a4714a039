"""Corpora: built on Ray in shards, judged, deduplicated, resumed after kill -9 to the same corpus, reported and exported."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from coevo.run.cli import main
from coevo.run.corpus.build import CORPUS_TABLES, near_duplicate_key

from tests.agents.databases import build_library, build_shop
from tests.factories import IN_PROCESS_TOML, run_cli

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
def reference(tmp_path_factory) -> Path:
    """An uninterrupted build of the small corpus, in this process (the build on Ray is compared with it)."""
    out = tmp_path_factory.mktemp("corpus") / "reference"
    assert main(["corpus", "build", "--out", str(out), *SMALL, "--workers", "0"]) == 0
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


@pytest.mark.slow
def test_two_workers_and_a_build_killed_with_kill_9_give_the_same_corpus(
    reference, tmp_path
) -> None:
    """kill -9 of the builder (two Ray workers) after its first commits; the build again (in this process) reuses them and ends as the reference; a third, on Ray, has nothing left to build."""
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "coevo.run.cli", "corpus", "build", "--out", str(out)]
    command += [*SMALL, "--workers", "2"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    builder = subprocess.Popen(command, env=env, start_new_session=True, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(list((out / "_commits").glob("*.json"))) < 2:
        if builder.poll() is not None:
            break
        time.sleep(0.05)
    os.killpg(builder.pid, signal.SIGKILL)
    _, said = builder.communicate()
    assert b"starting Ray for 6 shards (0 already committed), 2 at once" in said, said[-2000:]
    before = _digests(out)
    committed = len(list((out / "_commits").glob("*.json")))
    assert 2 <= committed < 6, f"killed after {committed} of 6 shards"
    # resumed in this process: a build continues whatever runs its shards
    again = run_cli("corpus", "build", "--out", str(out), *SMALL, "--workers", "0")
    assert again.returncode == 0, again.stderr
    assert f"reused {committed} committed, built {6 - committed}" in again.stderr
    after = _digests(out)
    assert {k: after[k] for k in before} == before, "no committed shard was written again"
    assert _tables(out) == _tables(reference)
    rerun = run_cli("corpus", "build", "--out", str(out), *SMALL, "--workers", "2")
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
    assert main(["corpus", "build", "--out", str(out), *SMALL, "--workers", "0"]) == 0
    assert not (stray / ".part-0.parquet").exists()
    assert _tables(out) == _tables(reference)


def test_another_source_on_the_same_folder_is_refused(reference, tmp_path, capsys) -> None:
    out = tmp_path / "copy"
    shutil.copytree(reference, out)
    assert main(["corpus", "build", "--out", str(out), *SMALL, "--seed", "1"]) == 2
    assert "another source or other flags" in capsys.readouterr().err


def test_a_build_into_a_run_directory_is_refused_and_leaves_it_alone(
    finished_small_run, tmp_path, capsys
) -> None:
    """`coevo corpus build --out RUN` where RUN holds a run: exit 2 naming it, nothing written there (no lock, no corpus.json)."""
    run = tmp_path / "run"
    shutil.copytree(finished_small_run, run)
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    assert main(["corpus", "build", "--out", str(run), *SMALL, "--workers", "0"]) == 2
    err = capsys.readouterr().err
    assert f"{run} holds a run" in err and "choose another --out" in err
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before


def test_a_corpus_part_that_is_a_link_out_of_it_is_refused(reference, tmp_path, capsys) -> None:
    """A corpus whose part is a link to a copy outside it: `coevo analyze CORPUS` refuses, naming the part (exit 2)."""
    out = tmp_path / "copy"
    shutil.copytree(reference, out)
    part = next(iter(sorted(out.rglob("tasks/shard=0/*.parquet"))))
    part.rename(tmp_path / "outside.parquet")
    part.symlink_to(tmp_path / "outside.parquet")
    assert main(["analyze", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{part} is a symbolic link" in err and "Traceback" not in err


@pytest.mark.parametrize("damage", ["garbage", "fifo"])
def test_a_damaged_or_fifo_shard_commit_is_named(damage, reference, tmp_path, capsys) -> None:
    """A shard's commit that is not JSON, or a FIFO: the build resumed on the folder stops at once, naming the file and the fix (exit 2)."""
    out = tmp_path / "copy"
    shutil.copytree(reference, out)
    commit = out / "_commits" / "shard-0.json"
    commit.unlink()
    if damage == "fifo":
        os.mkfifo(commit)
    else:
        commit.write_text("{not json")
    assert main(["corpus", "build", "--out", str(out), *SMALL, "--workers", "0"]) == 2
    err = capsys.readouterr().err
    assert f"{commit} is not a shard's commit" in err and "Traceback" not in err


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
    tmp_path, capsys
) -> None:
    folder = tmp_path / "databases"
    folder.mkdir()
    build_shop(folder / "a_shop.sqlite")
    build_library(folder / "b_library.db")
    shutil.copy(folder / "a_shop.sqlite", folder / "c_shop_again.sqlite")
    (folder / "notes.txt").write_text("not a database")
    out = tmp_path / "mined"
    args = ["corpus", "build", "--out", str(out), "--mine", str(folder), "--tasks-per-world", "6"]
    args += ["--workers", "0"]
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
    tmp_path, capsys
) -> None:
    """The `corpus` Synthesizer: training tasks from train worlds, the eval suite from held-out ones; a suite short of what was asked is said."""
    from coevo.arena.gamelog import GameLog
    from coevo.arena.gamelog.corpus import held_out

    corpus = tmp_path / "corpus"
    flags = ["--worlds", "8", "--tasks-per-world", "6", "--levels", "1,2", "--eval-share", "0.5"]
    flags += ["--workers", "0"]
    assert main(["corpus", "build", "--out", str(corpus), *flags]) == 0
    experiment = tmp_path / "on-corpus.toml"
    experiment.write_text(
        '[run]\nname = "on-corpus"\nseed = 1\ngenerations = 2\nrollouts = 2\nchunk = 8\n'
        f'[synthesizer]\nname = "corpus"\nconfig = {{ path = "{corpus}" }}\n'
        '[curriculum]\nname = "uniform"\ntasks_per_gen = 4\nlevels = [1, 2]\n'
        "[eval]\nlevels = [1]\nper_level = 40\nevery = 1\n"  # more than the held-out worlds hold
        + IN_PROCESS_TOML
    )
    capsys.readouterr()
    assert main(["run", str(experiment), "--out", str(tmp_path / "run")]) == 0
    said = "".join(capsys.readouterr())
    tasks = GameLog(str(tmp_path / "run")).read("tasks").to_pylist()
    suite = sum(t["source"] == "eval" for t in tasks)
    assert 0 < suite < 40 and f"eval suite: {suite} of the 40 tasks asked for" in said
    assert "eval_suite_short" in said  # the event, on the console as it happens
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

    # the export of the corpus says each task's split (its worlds' rule), and filters by it
    assert main(["export", str(corpus), "--out", str(tmp_path / "export")]) == 0
    lines = (tmp_path / "export" / "tasks.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert {r["split"] for r in rows} == {"train", "eval"}
    assert all((r["split"] == "eval") == held_out(r["world_id"], 0.5) for r in rows)
    where = ["--where", "split == 'eval'", "--out", str(tmp_path / "held-out")]
    assert main(["export", str(corpus), *where]) == 0
    held = (tmp_path / "held-out" / "tasks.jsonl").read_text().splitlines()
    assert len(held) == sum(r["split"] == "eval" for r in rows) > 0


# ---- an experiment's LLM Synthesizer as the source, against a loopback fake of the Messages API

KEY = "test-key-not-a-real-one"
LLM_EXPERIMENT = (
    '[run]\nname = "llm-corpus"\n'
    '[synthesizer]\nname = "claude-synth"\n'
    "config = { retries = 0, max_retries = 0, concurrency = 4 }\n"
)
LLM_FLAGS = ["--worlds", "4", "--tasks-per-world", "2", "--shard-size", "2", "--workers", "2"]


@pytest.fixture(scope="module")
def model_tasks():
    """Eight distinct tasks (eight worlds) the fake model writes out, stage by stage."""
    from coevo.agents.protocols import ProposalRequest
    from coevo.agents.synthesizers.procedural import ProceduralSynthesizer

    synth = ProceduralSynthesizer(["retail"])
    return [synth.draw(ProposalRequest(n=1, seed=k, level=1), 0) for k in range(8)]


def _model(tasks):
    """The fake model's answers: a new one of ``tasks`` for each proposal (by its variation seed), stage by stage."""
    from tests.agents.fake_anthropic import message, tool_use

    chosen: dict[str, int] = {}
    lock = threading.Lock()
    by_instruction = {t.instruction: t for t in tasks}

    def policy(body):
        stage = body["tool_choice"]["name"]
        prompt = body["messages"][0]["content"]
        if stage == "scenario":
            label = re.search(r"Variation seed: (\d+:\d+)\.", prompt).group(1)
            with lock:
                k = chosen.setdefault(label, len(chosen))
            task = tasks[k % len(tasks)]
            answer = {
                "domain": task.world.domain,
                "setting": f"variant {k}",
                "need": f"variant {k}",
            }
        elif stage == "verifier":
            task = by_instruction[re.search(r"Instruction: (.*?)\n\nSchema", prompt, re.S)[1]]
            answer = task.verifier.model_dump(mode="json")
        else:
            task = tasks[int(re.search(r"variant (\d+)", prompt)[1]) % len(tasks)]
            world = task.world.model_dump(mode="json", by_alias=True)
            answer = (
                {"schema_sql": world["schema"], "data": world["data"], "tools": world["tools"]}
                if stage == "world"
                else {
                    "instruction": task.instruction,
                    "solution": [{"tool": c.tool, "arguments": c.arguments} for c in task.solution],
                }
            )
        return message(tool_use(stage, answer), "tool_use")

    return policy


@pytest.fixture
def llm_experiment(tmp_path, monkeypatch) -> Path:
    """An experiment file whose Synthesizer is Claude's (`claude-synth`), a dummy key in the environment."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    path = tmp_path / "llm.toml"
    path.write_text(LLM_EXPERIMENT)
    return path


def _holding(folder: Path, text: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_an_experiment_s_llm_synthesizer_builds_a_corpus_that_resumes_without_a_call(
    llm_experiment, model_tasks, tmp_path, monkeypatch, capsys
) -> None:
    """`--experiment`: the model's tasks, judged and committed in shards; the manifest names the source, never the key; a re-run calls nothing."""
    from tests.agents.fake_anthropic import LoopbackServer

    out = tmp_path / "llm"
    command = ["corpus", "build", "--out", str(out), "--experiment", str(llm_experiment)]
    with LoopbackServer(_model(model_tasks)) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        assert main([*command, *LLM_FLAGS, "--json"]) == 0, capsys.readouterr().err
        report = json.loads(capsys.readouterr().out.splitlines()[-1])
        calls = len(server.fake.requests)
        assert calls == 8 * 4, "four stages for each of the 8 proposals"
        assert main([*command, *LLM_FLAGS]) == 0
        assert "reused 2 committed, built 0" in capsys.readouterr().err
        assert len(server.fake.requests) == calls, "a re-run reuses the shards: no call"
    assert report["tasks"] == report["accepted"] == 8 and report["failed"] == 0
    tasks = ds.dataset(str(out / "tasks"), format="parquet", partitioning="hive").to_table()
    assert sorted(tasks.column("task_id").to_pylist()) == sorted(t.task_id for t in model_tasks)
    specs = [json.loads(s) for s in tasks.column("spec").to_pylist()]
    assert {s["provenance"]["synthesizer"] for s in specs} == {"claude-synth"}
    # world i asks for levels i+1 and i+2: the model measured none, so each is the level asked
    assert sorted(tasks.column("level").to_pylist()) == [1, 2, 2, 3, 3, 4, 4, 5]
    verdicts = ds.dataset(str(out / "verdicts"), format="parquet", partitioning="hive").to_table()
    assert sorted(verdicts.column("task_id").to_pylist()) == sorted(
        tasks.column("task_id").to_pylist()
    )
    manifest = json.loads((out / "corpus.json").read_text())
    assert manifest["source"]["kind"] == "experiment"
    assert manifest["source"]["synthesizer"] == {
        "name": "claude-synth",
        "config": {"retries": 0, "max_retries": 0, "concurrency": 4},
        "sha256": hashlib.sha256(llm_experiment.read_bytes()).hexdigest(),
    }
    assert _holding(out, KEY) == [], "no file of the corpus holds the key"
    assert main(["corpus", "report", str(out), "--json"]) == 0
    read = json.loads(capsys.readouterr().out)
    assert read["worlds"] == 8 and read["tasks"] == read["accepted"] == 8
    assert read["build"]["failed"] == 0 and read["build"]["proposed"] == 8
    llm_experiment.write_text(LLM_EXPERIMENT.replace("retries = 0,", "retries = 1,"))
    assert main([*command, *LLM_FLAGS]) == 2
    assert "another source or other flags" in capsys.readouterr().err


@pytest.mark.slow
def test_an_llm_source_whose_every_call_fails_exits_3_commits_nothing_and_is_retried(
    llm_experiment, model_tasks, tmp_path, monkeypatch, capsys
) -> None:
    """Every call answered 500: the build exits 3 saying what failed, `corpus report` shows it; the same command with the API back builds the corpus."""
    from tests.agents.fake_anthropic import LoopbackServer, error

    out = tmp_path / "llm"
    command = ["corpus", "build", "--out", str(out), "--experiment", str(llm_experiment)]
    down = lambda body: error(500, "api_error", "the fake is down")  # noqa: E731
    with LoopbackServer(down) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        assert main([*command, *LLM_FLAGS, "--workers", "0"]) == 3
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("coevo corpus: every proposal failed: the synthesizer 'claude-synth'")
    assert "500" in last and "nothing was committed" in last and "Traceback" not in err
    assert "8 proposals failed" in err
    assert not list(out.glob("_commits/*.json")) and not list(out.glob("tasks/*/*.parquet"))
    assert main(["corpus", "report", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "0 worlds" in shown and "shard 0 not committed: its 4 proposals failed" in shown
    with LoopbackServer(_model(model_tasks)) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        assert main([*command, *LLM_FLAGS, "--workers", "0"]) == 0
    assert "reused 0 committed, built 2" in capsys.readouterr().err
    assert main(["corpus", "report", str(out)]) == 0
    assert "not committed" not in capsys.readouterr().out


def test_a_bad_experiment_or_a_missing_key_stops_the_build_before_anything_starts(
    llm_experiment, tmp_path, monkeypatch, capsys
) -> None:
    """`--experiment` is checked as `coevo run` checks it: a setting the Synthesizer does not take, or no key, exits 2 and writes nothing."""
    out = tmp_path / "never"
    command = ["corpus", "build", "--out", str(out), "--experiment", str(llm_experiment)]
    llm_experiment.write_text(LLM_EXPERIMENT.replace("retries = 0,", "retires = 0,"))
    assert main([*command, *LLM_FLAGS]) == 2
    assert "retires" in capsys.readouterr().err and not out.exists()
    llm_experiment.write_text(LLM_EXPERIMENT)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert main([*command, *LLM_FLAGS]) == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err and not out.exists()
    assert main([*command, "--tasks-per-world", "2"]) == 2
    assert "give --worlds N" in capsys.readouterr().err


def test_an_experiment_on_a_missing_corpus_stops_before_ray_saying_where_it_looked(
    tmp_path, capsys, monkeypatch
) -> None:
    """A relative `path` that holds no corpus: exit 2 before anything starts, naming the folder it is read from."""
    monkeypatch.chdir(tmp_path)
    experiment = tmp_path / "exp.toml"
    experiment.write_text(
        '[run]\ngenerations = 1\n[synthesizer]\nname = "corpus"\nconfig = { path = "../nope" }\n'
    )
    assert main(["run", str(experiment), "--out", str(tmp_path / "run")]) == 2
    said = capsys.readouterr().err
    assert "../nope holds no corpus" in said and f"runs in, {tmp_path}" in said
    assert not (tmp_path / "run" / "experiment.json").exists()


def test_flags_that_cannot_work_together_are_refused_before_anything(tmp_path, capsys) -> None:
    """A database file for --mine, --domains with --mine, an experiment without [synthesizer]: exit 2, nothing written."""
    from coevo.arena.examples import SHOP

    out = str(tmp_path / "c")
    assert main(["corpus", "build", "--out", out, "--mine", str(SHOP)]) == 2
    assert f"is a file: give the folder that holds the databases (--mine {SHOP.parent})" in (
        capsys.readouterr().err
    )
    assert (
        main(["corpus", "build", "--out", out, "--mine", str(SHOP.parent), "--domains", "hr"]) == 2
    )
    assert "--domains chooses procedural domains" in capsys.readouterr().err
    bare = tmp_path / "bare.toml"
    bare.write_text('[run]\nname = "no synthesizer"\n')
    assert main(["corpus", "build", "--out", out, "--experiment", str(bare), "--worlds", "2"]) == 2
    assert "has no [synthesizer] table" in capsys.readouterr().err
    for flag, value in (("--workers", "-1"), ("--tasks-per-world", "0"), ("--eval-share", "2")):
        assert main(["corpus", "build", "--out", out, "--worlds", "4", flag, value]) == 2
        assert f"{flag} " in capsys.readouterr().err
    assert not (tmp_path / "c").exists()
