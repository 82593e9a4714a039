"""The bundled files: every one listed and present, found by name; the sample database is what its generator writes, and mines."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from coevo.arena.errors import ExperimentError, RegistryError
from coevo.arena.examples import EXAMPLES, SHOP, bundled, find_bundled
from coevo.arena.examples.shop import build_shop
from coevo.run.cli import main
from coevo.run.experiment import load_experiment

ROOT = Path(__file__).resolve().parents[2]


def test_every_bundled_file_is_listed_once_and_exists() -> None:
    """bundled() lists the examples, every experiment file of experiments/ and the database, each present, named once, with one line of description."""
    files = bundled()
    names = [f.name for f in files]
    assert len(set(names)) == len(names), f"two bundled files share a name: {names}"
    assert len({f.path.name for f in files}) == len(files), "two bundled files share a file name"
    experiments = sorted(p.stem for p in (ROOT / "experiments").glob("*.toml"))
    assert sorted(f.name for f in files if f.kind == "experiment") == experiments
    assert {f.name: f.path for f in files if f.kind != "experiment"} == {
        "examples": EXAMPLES,
        "shop": SHOP,
    }
    for f in files:
        assert f.path.is_file(), f"{f.name}: {f.path} is missing"
        assert f.description and "\n" not in f.description, f"{f.name} needs a one-line description"


def test_a_bundled_file_is_found_by_name_or_file_name_and_a_miss_suggests_one() -> None:
    """find_bundled takes `quickstart` or `quickstart.toml`; a misspelt name gets the closest and the list."""
    assert find_bundled("quickstart").path == find_bundled("quickstart.toml").path
    assert find_bundled("shop", kind="database").path == SHOP
    with pytest.raises(RegistryError, match=r"did you mean 'quickstart'\?.*shop"):
        find_bundled("quickstrat")
    with pytest.raises(RegistryError, match="no bundled experiment is called 'shop'"):
        find_bundled("shop", kind="experiment")


def test_an_experiment_loads_by_name_from_any_folder_and_an_existing_path_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`quickstart` is the bundled file from any folder; a file called `quickstart` there wins; a miss names the closest."""
    monkeypatch.chdir(tmp_path)
    assert load_experiment("quickstart").run.name == "quickstart"
    assert load_experiment("curricula.toml").run.name == "curricula"
    (tmp_path / "quickstart").write_text('[run]\nname = "mine"\n')
    assert load_experiment("quickstart").run.name == "mine"
    with pytest.raises(
        ExperimentError, match=r"no such experiment file.*did you mean 'quickstart'\?"
    ):
        load_experiment("experiments/quickstart.toml")
    with pytest.raises(ExperimentError, match="claude-solver, cluster, curricula"):
        load_experiment("nothing-like-it")
    (tmp_path / "curricula").mkdir()  # a folder named like a bundled experiment (a run's, say)
    assert load_experiment("curricula").run.name == "curricula"
    (tmp_path / "somewhere").mkdir()
    with pytest.raises(ExperimentError, match="is a directory, not an experiment file"):
        load_experiment("somewhere")


def _dump(path: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_the_shipped_sample_database_is_what_its_generator_writes(tmp_path: Path) -> None:
    """shop.sqlite holds exactly what build_shop() writes (schema and rows), so it cannot drift from its code."""
    rebuilt = build_shop(tmp_path / "shop.sqlite")
    assert _dump(SHOP) == _dump(rebuilt), (
        "arena/examples/shop.sqlite differs from what its generator writes: "
        "run `python -m coevo.arena.examples.shop` to write it again"
    )


def test_the_sample_database_is_small_and_has_real_world_quirks() -> None:
    """Under 200 KB, with names with spaces, a composite key, a view, triggers, NULLs, text dates and broken foreign keys."""
    assert SHOP.stat().st_size < 200_000
    conn = sqlite3.connect(f"file:{SHOP}?mode=ro", uri=True)
    kinds = dict(
        conn.execute("SELECT name, type FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'")
    )
    assert kinds["Order Details"] == kinds["Customer"] == "table"
    assert kinds["Big Spenders"] == "view" and kinds["log status"] == "trigger"
    key = [row[1] for row in conn.execute('PRAGMA table_info("Order Details")') if row[5]]
    assert key == ["OrderId", "sku"], "a composite primary key"
    assert conn.execute('SELECT count(*) FROM "Customer" WHERE "Email" IS NULL').fetchone()[0] > 0
    dates = conn.execute('SELECT DISTINCT typeof("Order Date") FROM "Order"').fetchall()
    assert sorted(dates) == [("null",), ("text",)], "dates are text, some missing"
    assert conn.execute('PRAGMA foreign_key_list("Order")').fetchall() == [], (
        "CustomerId is undeclared"
    )
    assert (
        conn.execute(
            'SELECT count(*) FROM "Order" WHERE "CustomerId" NOT IN (SELECT "CustomerId" FROM "Customer")'
        ).fetchone()[0]
        > 0
    ), "some orders name a customer that does not exist"
    conn.close()


def test_coevo_mine_makes_accepted_tasks_from_the_sample_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`coevo mine` on shop.sqlite writes a world and 20 tasks, every one accepted by the Judge."""
    out = tmp_path / "tasks.jsonl"
    assert main(["mine", str(SHOP), "-n", "20", "--seed", "1", "--out", str(out)]) == 0
    assert "mine shop.sqlite: 20 of 20 tasks accepted" in capsys.readouterr().err
    formats = [json.loads(line)["format"] for line in out.read_text().splitlines()]
    assert formats == ["coevo.world/1"] + ["coevo.task/1"] * 20
