"""The game log: tables per generation committed by manifests, on local disk or any pyarrow filesystem."""

from __future__ import annotations

import pytest
from coevo.arena.gamelog import SCHEMA_VERSION, SCHEMAS, GameLog, LogError, RunDir


def _eval_row(i: int) -> dict:
    return {
        "task_id": f"t{i}",
        "episode_id": f"e{i}",
        "level": 1,
        "domain": "retail",
        "reward": i % 2,
        "success": bool(i % 2),
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
