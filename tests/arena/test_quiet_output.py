"""What a user reads stays readable: an error said once, no pydantic links, a short Run repr, whole example descriptions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from coevo.arena.analysis import load_run
from coevo.arena.examples import bundled

from tests.conftest import SMALL_RUN
from tests.factories import run_cli


def test_a_fatal_error_is_said_once_without_pydantic_links(tmp_path: Path) -> None:
    """A role whose constructor raises a pydantic error: exit 2, the cause on one line of standard error, no "For further information" line."""
    toml = tmp_path / "tiny.toml"
    toml.write_text(SMALL_RUN)
    done = run_cli(
        "run",
        str(toml),
        "--out",
        str(tmp_path / "run"),
        "--set",
        'solver.name="tests.arena.faulty_roles:MisconfiguredSolver"',
    )
    assert done.returncode == 2, done.stderr
    said = [line for line in done.stderr.splitlines() if "could not be made" in line]
    assert len(said) == 1 and said[0].startswith("coevo run: the solver could not be made"), (
        done.stderr
    )
    assert "For further information" not in done.stderr, done.stderr
    assert "Input should be a valid integer" in done.stderr


def test_a_role_calls_pydantic_error_is_recorded_without_its_link(tmp_path: Path) -> None:
    """A Synthesizer call that raises a pydantic error: the event and the console name the problem, not pydantic's web page."""
    toml = tmp_path / "tiny.toml"
    toml.write_text(SMALL_RUN.replace("generations = 3", "generations = 1"))
    run = tmp_path / "run"
    done = run_cli(
        "run",
        str(toml),
        "--out",
        str(run),
        "--set",
        'synthesizer.name="tests.arena.faulty_roles:ValidatingSynthesizer"',
    )
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    failed = [e for e in events if e["event"] == "synthesizer_failed"]
    assert failed and all("Input should be a valid integer" in e["error"] for e in failed)
    assert not any("For further information" in e["error"] for e in failed)
    assert "For further information" not in done.stderr


def test_a_loaded_run_prints_as_a_short_summary(finished_small_run: Path, tmp_path: Path) -> None:
    """`print(load_run(...))`: the run directory, its generations and each table's rows on one short line, not every table's contents."""
    run = tmp_path / "run"
    shutil.copytree(finished_small_run, run)
    shown = repr(load_run(str(run)))
    assert shown.startswith(f"Run({str(run)!r}, generations=3, rows: ")
    assert "episodes=30" in shown and "\n" not in shown and len(shown) < 400, shown


def test_examples_prints_whole_descriptions_wrapped_at_80_columns(monkeypatch) -> None:
    """`coevo examples` at 80 columns: every description whole (each a full sentence), wrapped under its column, not cut."""
    monkeypatch.setenv("COLUMNS", "80")
    done = run_cli("examples")
    assert done.returncode == 0, done.stderr
    files = bundled()
    paths = {str(f.path) for f in files}
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines if line.strip() not in paths), done.stdout
    flowing = " ".join(line.strip() for line in lines)
    for f in files:
        assert f.description.endswith("."), f.description
        assert f.description in flowing, f.description
