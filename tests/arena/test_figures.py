"""One owner per figure: the live table, the summary, the trackers, `coevo analyze` and `coevo corpus report` count one log alike."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from coevo.arena.analysis import analyze, load_run
from coevo.arena.analysis.corpus import corpus_report
from coevo.arena.gamelog import GameLog
from coevo.arena.gamelog.corpus import CORPUS_FORMAT, CORPUS_MANIFEST
from coevo.arena.gamelog.figures import UNJUDGED, rejection_counts, top_rejections
from coevo.arena.outcomes import CheckResult, Verdict
from coevo.run.driver.summary import RunTables, summarize
from coevo.run.experiment import load_experiment
from coevo.run.generation.record import generation_record
from coevo.run.generation.state import Generation, GenerationReport, Proposals
from coevo.run.loop import run_experiment
from coevo.run.tracking import TaskLevels, generation_metrics

from tests.factories import load_examples

CORPUS_TABLES = ("worlds", "tasks", "verdicts")


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory) -> tuple[Path, list[GenerationReport]]:
    """Three generations in process, judged by a Judge that rejects some tasks naming a check and some naming none; the reports as ``on_generation`` got them."""
    out = tmp_path_factory.mktemp("figures") / "run"
    experiment = load_experiment(
        {
            "ray": {"in_process": True},
            "run": {"seed": 3, "generations": 3, "rollouts": 2, "chunk": 8},
            "synthesizer": {
                "name": "procedural",
                "config": {"domains": ["retail"], "world_pool": 2},
            },
            "judge": {"name": "tests.arena.faulty_roles:StrictJudge"},
            "solver": {"name": "linear-pg", "config": {"lr": 0.2}},
            "curriculum": {"name": "uniform", "tasks_per_gen": 8, "levels": [1, 2]},
            "eval": {"levels": [1, 2], "per_level": 3, "every": 1},
        }
    )
    reports: list[GenerationReport] = []
    run_experiment(experiment, str(out), on_generation=reports.append)
    return out, reports


def _tracked_rejections(metrics: dict[str, float]) -> dict[str, float]:
    return {
        k.removeprefix("rejections/"): v for k, v in metrics.items() if k.startswith("rejections/")
    }


def _by_level(rows: list[dict[str, Any]], gen: int, prefix: str) -> dict[str, float]:
    return {
        f"{prefix}{r['level']}": r["success"]
        for r in rows
        if r["gen"] == gen and r["level"] is not None
    }


def _corpus(folder: Path, log: GameLog) -> str:
    """The log's worlds, tasks and verdicts as a corpus folder (a shard per generation), for `coevo corpus report`."""
    for name in CORPUS_TABLES:
        table = log.read(name)
        for gen in sorted(set(table.column("gen").to_pylist())):
            part = folder / name / f"shard={gen}"
            part.mkdir(parents=True)
            rows = table.filter(pc.equal(table.column("gen"), gen)).drop_columns(["gen"])
            pq.write_table(rows, part / "part-0.parquet")
    manifest = {
        "format": CORPUS_FORMAT,
        "tables": list(CORPUS_TABLES),
        "split": {"eval_share": 0.0},
    }
    (folder / CORPUS_MANIFEST).write_text(json.dumps(manifest))
    return str(folder)


def test_the_readers_of_a_run_agree_on_every_figure_they_share(judged_run, tmp_path):
    """Rejections by check, accepted and rejected, success (overall and by level), the pool and calibration: the same in the live row, the trackers, `coevo analyze`, the summary and the corpus report, from the written tables as from the log."""
    out, reports = judged_run
    log = GameLog(str(out))
    figures = analyze(load_run(str(out)), irt=False)
    success, calibration = figures["success"], figures["calibration"]["per_generation"]
    written = RunTables()
    levels = TaskLevels()
    assert [r.gen for r in reports] == [0, 1, 2]
    for report in reports:
        gen, row = report.gen, report.row
        verdicts = log.read("verdicts", gens=[gen])
        counts = rejection_counts(verdicts)
        tracked = generation_metrics(log, gen, levels, report.tables)
        assert tracked == pytest.approx(generation_metrics(log, gen)), (
            "the trackers measure the tables written as they would the log"
        )
        assert _tracked_rejections(tracked) == counts
        assert {r["check"]: r["failed"] for r in figures["rejections"] if r["gen"] == gen} == counts
        assert json.loads(row["rejections"]) == top_rejections(counts), "the generations row"
        assert report.top_rejections == list(top_rejections(counts, 3).items()), "the live table"
        rejected = verdicts.num_rows - sum(verdicts.column("accepted").to_pylist())
        assert row["rejected"] == tracked["proposals/rejected"] == rejected
        assert row["accepted"] == tracked["proposals/accepted"]
        (throughput,) = [r for r in figures["throughput"] if r["gen"] == gen]
        assert (throughput["accepted"], throughput["proposed"]) == (
            row["accepted"],
            row["proposed"],
        )
        (train,) = [r["success"] for r in success["train"] if r["gen"] == gen]
        assert row["train_success"] == tracked["train/success"] == pytest.approx(train)
        (evals,) = [r["success"] for r in success["eval"] if r["gen"] == gen]
        assert row["eval_success"] == tracked["eval/success"] == pytest.approx(evals)
        by_level = {k: v for k, v in tracked.items() if "/success_level_" in k}
        assert by_level == pytest.approx(
            _by_level(success["train_by_level"], gen, "train/success_level_")
            | _by_level(success["eval_by_level"], gen, "eval/success_level_")
        )
        (pool,) = [r for r in figures["pool"] if r["gen"] == gen]
        assert (tracked["pool/worlds"], tracked["pool/domains"], tracked["pool/families"]) == (
            pool["worlds"],
            len(pool["domains"]),
            len(pool["families"]),
        )
        (calibrated,) = [r for r in calibration if r["gen"] == gen]
        assert row["brier"] == pytest.approx(calibrated["brier"])
        assert tracked["calibration/ece"] == pytest.approx(calibrated["ece"])
        for name in ("auc", "auc_frontier"):  # absent when there is nothing to rank
            assert tracked.get(f"calibration/{name}") == pytest.approx(calibrated[name])
        written.add(report.tables)
    whole = rejection_counts(log.read("verdicts"))
    assert whole[UNJUDGED] and whole["oracle"], "the Judge rejected tasks both ways"
    summary = summarize(str(out), written)
    assert summary == summarize(str(out)), "the summary of the tables written is the log's"
    assert summary["top_rejections"] == top_rejections(whole)
    assert summary["rejected"] == sum(r.row["rejected"] for r in reports)
    report = corpus_report(_corpus(tmp_path / "corpus", log))
    assert report["rejections"] == dict(whole.most_common())
    assert report["rejected"] == summary["rejected"]


def test_a_rejection_naming_no_failed_check_counts_as_error_everywhere(tmp_path):
    """A rejected verdict with no failed check (unreadable, or a plugin Judge's) counts once as `error` in the generations row, the trackers, `coevo analyze`, the summary and the corpus report."""
    tasks, worlds = load_examples()
    tasks = [t.model_copy(update={"world": worlds[str(t.world)]}) for t in tasks[:4]]
    passed = CheckResult(passed=True, reason="fine")
    failed = CheckResult(passed=False, reason="no")

    def verdict(task, accepted: bool, **checks: CheckResult) -> Verdict:
        return Verdict(
            task_id=task.task_id, world_id=task.world_id, accepted=accepted, checks=checks
        )

    verdicts = [
        verdict(tasks[0], True, valid=passed, oracle=passed),
        verdict(tasks[1], False, valid=passed, noop=failed),
        verdict(tasks[2], False, valid=passed, oracle=passed),  # rejected, naming no failed check
        verdict(tasks[3], False, valid=passed, oracle=failed, noop=failed),
    ]
    done = Generation(0, proposals=Proposals(tasks, verdicts, ["fresh"] * 4, failures=0))
    done.accepted, done.predicted = tasks[:1], [0.5]
    record = generation_record(
        done, seed=0, eval_tasks=[], logged_worlds=set(), frontier=1.0, policies=False
    )
    run = tmp_path / "run"
    log = GameLog(str(run))
    written: dict[str, pa.Table] = {}
    parts = log.write(record, written)
    log.commit(0, parts, {name: len(rows) for name, rows in record.tables()}, {})
    (run / "experiment.json").write_text("{}")

    expected = {"noop": 2, "oracle": 1, UNJUDGED: 1}
    assert json.loads(record.generations[0].rejections) == expected, "the generations row"
    assert rejection_counts(verdicts) == rejection_counts(log.read("verdicts")) == Counter(expected)
    tables = GameLog.as_read(0, written)
    assert _tracked_rejections(generation_metrics(log, 0, tables=tables)) == expected
    assert _tracked_rejections(generation_metrics(log, 0)) == expected
    figures = analyze(load_run(str(run)), irt=False)
    assert {r["check"]: r["failed"] for r in figures["rejections"]} == expected
    assert {r["check"]: r["rate"] for r in figures["rejections"]}[UNJUDGED] == 1 / 4
    gathered = RunTables()
    gathered.add(tables)
    assert summarize(str(run), gathered)["top_rejections"] == expected
    assert summarize(str(run))["top_rejections"] == expected
    report = corpus_report(_corpus(tmp_path / "corpus", log))
    assert report["rejections"] == expected and report["rejected"] == 3
