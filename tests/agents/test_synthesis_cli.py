"""`coevo synth`, `coevo mine` and `coevo mutate` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from coevo.agents.synthesizers.procedural import DOMAINS

from tests.agents.databases import build_empty, build_library
from tests.arena.test_cli import coevo


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_synth_list_prints_the_domains_one_per_line() -> None:
    """`coevo synth --list` prints every domain name, one per line, and --help shows the choices."""
    result = coevo("synth", "--list")
    assert result.returncode == 0
    assert result.stdout.split() == list(DOMAINS)
    helped = coevo("synth", "--help").stdout
    assert all(name in helped for name in DOMAINS) and "example" in helped


def test_synth_writes_the_world_once_then_accepted_tasks_byte_identically(tmp_path: Path) -> None:
    """Same seed → same bytes; the file holds one world record then tasks that refer to it; coevo check accepts it."""
    out1, out2 = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for out in (out1, out2):
        result = coevo(
            "synth",
            "--domain",
            "retail",
            "-n",
            "12",
            "--seed",
            "4",
            "--level",
            "3",
            "--out",
            str(out),
        )
        assert result.returncode == 0, result.stderr
        assert "12 of 12 tasks accepted" in result.stderr
    assert out1.read_bytes() == out2.read_bytes()
    records = _records(out1)
    assert [r["format"] for r in records] == ["coevo.world/1"] + ["coevo.task/1"] * 12
    assert all(r["world"] == records[0]["id"] for r in records[1:])
    assert all(r["provenance"]["level"] == 3 for r in records[1:])
    assert coevo("check", str(out1)).returncode == 0


def test_synth_refuses_an_impossible_request() -> None:
    """A family below the level it starts at is exit 2 with the reason."""
    result = coevo("synth", "--family", "conditional", "--level", "1", "-n", "2")
    assert result.returncode == 2
    assert "conditional: 3–5" in result.stderr


def test_mine_writes_a_world_and_tasks_and_mutate_makes_children(tmp_path: Path) -> None:
    """`coevo mine` on a real-shaped database, then `coevo mutate --op harder` on its output."""
    db = build_library(tmp_path / "library.sqlite")
    tasks = tmp_path / "tasks.jsonl"
    result = coevo("mine", str(db), "-n", "10", "--seed", "1", "--out", str(tasks))
    assert result.returncode == 0, result.stderr
    assert "inferred foreign keys" in result.stderr
    records = _records(tasks)
    assert records[0]["format"] == "coevo.world/1"
    assert len(records) == 11
    harder = tmp_path / "harder.jsonl"
    result = coevo("mutate", str(tasks), "--op", "harder", "--seed", "2", "--out", str(harder))
    assert result.returncode == 0, result.stderr
    children = [r for r in _records(harder) if r["format"] == "coevo.task/1"]
    assert children
    parents = {r["id"] for r in records[1:]}
    for child in children:
        assert child["lineage"]["parent"] in parents
        assert child["lineage"]["operator"] in {"add_hop", "add_distractor", "add_condition"}
    assert coevo("check", str(harder)).returncode == 0


def test_mine_an_empty_database_says_so_and_exits_0(tmp_path: Path) -> None:
    """No rows: a clear message, no tasks, exit 0 (documented)."""
    out = tmp_path / "none.jsonl"
    result = coevo("mine", str(build_empty(tmp_path / "empty.sqlite")), "--out", str(out))
    assert result.returncode == 0
    assert "every table is empty" in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("content", [None, "not a database\n"])
def test_mine_refuses_a_missing_or_foreign_file_with_exit_2(
    tmp_path: Path, content: str | None
) -> None:
    """A missing file or a non-SQLite file is exit 2 with what to do."""
    path = tmp_path / "x.sqlite"
    if content is not None:
        path.write_text(content * 200)
    result = coevo("mine", str(path))
    assert result.returncode == 2
    assert "SQLite database" in result.stderr


def test_mutate_lists_operators_and_refuses_unknown_ones(tmp_path: Path) -> None:
    """`--list` prints every operator with its direction; an unknown one is exit 2."""
    listed = coevo("mutate", "--list").stdout.splitlines()
    assert [line.split("\t")[0] for line in listed] == [
        "add_hop",
        "add_distractor",
        "add_condition",
        "swap_target",
        "drop_step",
        "drop_condition",
    ]
    result = coevo("mutate", str(tmp_path / "t.jsonl"), "--op", "fly")
    assert result.returncode == 2 and "unknown operator" in result.stderr
