"""The game log: tables per generation committed by manifests, on local disk or any pyarrow filesystem."""

from __future__ import annotations

from pathlib import Path

import pytest
from coevo.arena.gamelog import (
    READABLE_VERSIONS,
    SCHEMA_VERSION,
    SCHEMAS,
    TABLES,
    EvalRow,
    GameLog,
    GenerationRecord,
    LogError,
    PredictionRow,
    RunDir,
)


def _eval_row(i: int) -> dict:
    return {
        "task_id": f"t{i}",
        "episode_id": f"e{i}",
        "level": 1,
        "domain": "retail",
        "reward": i % 2,
        "success": bool(i % 2),
        "suite": None,
    }


@pytest.mark.parametrize("where", ["local", "mock"])
def test_only_committed_generations_are_read(tmp_path, where: str) -> None:
    """Parts without a manifest are invisible; each row carries its generation; a gap ends the log."""
    run = RunDir(str(tmp_path / "run") if where == "local" else "mock:///runs/one")
    log = GameLog(run)
    for gen in range(3):
        part = log.write_part("evals", gen, [_eval_row(gen * 10 + i) for i in range(2)])
        if gen < 2:
            log.commit(gen, {"evals": part}, {"evals": 2}, {})
    table = log.read("evals")
    assert table.column("gen").to_pylist() == [0, 0, 1, 1]
    assert table.schema.names == [*SCHEMAS["evals"].names, "gen"]
    assert log.read("evals", gens=[1]).num_rows == 2
    assert log.read("episodes").num_rows == 0
    assert log.last_generation() == 1
    # a manifest for generation 3 with no generation 2 is not trusted
    part = log.write_part("evals", 3, [_eval_row(99)])
    log.commit(3, {"evals": part}, {"evals": 1}, {})
    assert log.last_generation() == 1


def test_bad_rows_tables_and_versions_are_refused(tmp_path) -> None:
    """A row of the wrong shape, an unknown table and a log of another schema version raise LogError."""
    log = GameLog(str(tmp_path / "run"))
    with pytest.raises(LogError, match="does not fit"):
        log.write_part("evals", 0, [{**_eval_row(0), "reward": "one"}])
    with pytest.raises(LogError, match="unknown game-log table"):
        log.read("episode")
    log.commit(0, {}, {}, {})
    data = log.run.read_bytes("log", "_manifests", "gen=000000.json").replace(
        f'"schema_version": {SCHEMA_VERSION}'.encode(), b'"schema_version": 999'
    )
    log.run.write_bytes(data, "log", "_manifests", "gen=000000.json")
    with pytest.raises(LogError, match="schema 999"):
        log.manifests()


V1_RUN = Path(__file__).resolve().parents[1] / "data" / "logs" / "v1-383f438"


def test_every_table_has_one_typed_row_model_and_the_record_fills_them_all() -> None:
    """The Arrow schemas are derived from the row models, and a GenerationRecord has a field per table."""
    assert set(SCHEMAS) == set(TABLES)
    for name, model in TABLES.items():
        assert SCHEMAS[name].names == list(model.model_fields), name
        assert all(info.description for info in model.model_fields.values()), name
    record = GenerationRecord(0)
    assert [name for name, _ in record.tables()] == list(TABLES)


def test_a_record_is_written_committed_and_read_back(tmp_path) -> None:
    """GameLog.write puts every table of a record in a part; the committed generation reads back row for row."""
    log = GameLog(str(tmp_path / "run"))
    record = GenerationRecord(0)
    record.predictions = [PredictionRow(task_id="t1", version="v@0", p=0.25)]
    record.evals = [EvalRow.model_validate(_eval_row(3))]
    parts = log.write(record)
    assert set(parts) == set(TABLES)
    log.commit(0, parts, {name: len(rows) for name, rows in record.tables()}, {})
    assert log.read("predictions").to_pylist() == [
        {"task_id": "t1", "version": "v@0", "p": 0.25, "gen": 0}
    ]
    assert log.read("evals").to_pylist() == [{**_eval_row(3), "gen": 0}]
    assert log.read("episodes").num_rows == 0


def test_a_log_written_by_schema_1_still_reads() -> None:
    """A run directory from 383f438 (schema 1): every table reads, with today's columns, and analysis runs."""
    from coevo.arena.analysis import analyze, load_run

    log = GameLog(str(V1_RUN))
    assert [m["schema_version"] for m in log.manifests()] == [1, 1]
    assert SCHEMA_VERSION > 1 and 1 in READABLE_VERSIONS
    counts = {name: log.read(name).num_rows for name in SCHEMAS}
    assert counts["generations"] == 2 and counts["episodes"] > 0 and counts["worlds"] >= 1
    for name in SCHEMAS:
        assert log.read(name).schema.names == [*SCHEMAS[name].names, "gen"]
    tasks, worlds = log.task_specs()
    assert tasks and worlds
    metrics = analyze(load_run(str(V1_RUN)))
    assert metrics["generations"] == 2
    assert metrics["irt"]["abilities"], "abilities are fitted from the episodes"
    # its experiment.json holds every curriculum's keys, as coevo then wrote it: it reads as it ran
    from coevo.curricula.rebuild import curriculum_from_log

    assert curriculum_from_log(str(V1_RUN)).name == "target-band"


def test_a_column_an_older_log_lacks_reads_as_null(tmp_path) -> None:
    """Reading a part written without a column gives that column as nulls (how old logs stay readable)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    log = GameLog(str(tmp_path / "run"))
    part = "log/evals/gen=0/part-0.parquet"
    older = pa.table({"task_id": ["t"], "episode_id": ["e"], "reward": [1]})
    log.run.fs.create_dir(log.run.path("log/evals/gen=0"), recursive=True)
    pq.write_table(older, log.run.path(part), filesystem=log.run.fs)
    log.commit(0, {"evals": part}, {"evals": 1}, {})
    (row,) = log.read("evals").to_pylist()
    assert row == {
        "task_id": "t",
        "episode_id": "e",
        "level": None,
        "domain": None,
        "reward": 1,
        "success": None,
        "suite": None,
        "gen": 0,
    }


def test_a_manifest_naming_a_file_outside_the_run_is_refused(tmp_path) -> None:
    """A part path with `..` or from the root is a tampered run directory: LogError, nothing read."""
    import json

    log = GameLog(str(tmp_path / "run"))
    tampered = {"schema_version": 2, "gen": 0, "parts": {"evals": "../../elsewhere/part-0.parquet"}}
    log.run.write_bytes(json.dumps(tampered).encode(), "log", "_manifests", "gen=000000.json")
    with pytest.raises(LogError, match="outside its run directory"):
        log.read("evals")
