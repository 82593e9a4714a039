"""`coevo run` and `coevo resume` as a user runs them: the table, the events, the summary, the errors."""

from __future__ import annotations

import json

import pytest
from coevo.run.cli import main

from tests.factories import IN_PROCESS_TOML

SMALL = (
    '[run]\nname = "tiny"\nseed = 2\ngenerations = 2\nrollouts = 2\nchunk = 8\n'
    '[synthesizer]\nname = "procedural"\nconfig = { domains = ["retail"], world_pool = 2 }\n'
    '[curriculum]\nname = "uniform"\ntasks_per_gen = 4\nlevels = [1]\n'
    "[eval]\nlevels = [1]\nper_level = 2\nevery = 1\n"
)


def test_run_prints_a_row_per_generation_logs_events_and_ends_with_a_summary(
    tmp_path, capsys
) -> None:
    """The table has one row per generation; events.jsonl has start, generations, end; --json prints the summary."""
    toml = tmp_path / "tiny.toml"
    toml.write_text(SMALL + IN_PROCESS_TOML)
    out = tmp_path / "run"
    assert main(["run", str(toml), "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["generations"] == 2 and summary["episodes"] == 2 * 4 * 2
    assert summary["run_dir"] == str(out)
    lines = captured.err.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("gen  accepted"))
    assert [line.split()[0] for line in lines[header + 1 : header + 3]] == ["0", "1"]
    assert "2 generations, 16 training episodes" in captured.err
    assert f"game log: {out}/log" in captured.err
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    names = [e["event"] for e in events]
    assert names[0] == "run_started" and names[-1] == "run_finished"
    assert names.count("generation") == 2
    assert all("timestamp" in e for e in events)
    # resuming a finished run adds no generation and says so in its summary
    assert main(["resume", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["generations"] == 2
    # the record says where the run went (--out), and running into it again touches nothing
    assert json.loads((out / "experiment.json").read_text())["run"]["out"] == str(out)
    before = (out / "events.jsonl").read_text()
    assert main(["run", str(toml), "--out", str(out)]) == 2
    assert "already holds a finished run (2 generations)" in capsys.readouterr().err
    assert (out / "events.jsonl").read_text() == before


def test_a_bad_experiment_or_run_dir_exits_2_with_the_reason(tmp_path, capsys) -> None:
    """A misspelt key, a missing file and a directory with no run each give exit status 2 and a message."""
    bad = tmp_path / "bad.toml"
    bad.write_text('[solver]\nname = "linear-pg"\nactor = 2\n')
    assert main(["run", str(bad)]) == 2
    assert "did you mean 'solver.actors'" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.toml")]) == 2
    assert "no such experiment file" in capsys.readouterr().err
    assert main(["resume", str(tmp_path)]) == 2
    assert "holds no run" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_a_role_whose_constructor_raises_ends_the_run_at_once_with_its_message(
    tmp_path, capsys
) -> None:
    """A value only the role can judge ends the run without retries: exit 2, the role's own message, one line (an unknown domain before Ray starts, by the role's preflight; a missing database when its constructor raises in the actor)."""
    cases = [
        (
            SMALL.replace('domains = ["retail"]', 'domains = ["retial"]'),
            "the synthesizer 'procedural': unknown domain 'retial'; did you mean 'retail'?",
        ),
        (
            SMALL.replace(
                'name = "procedural"\nconfig = { domains = ["retail"], world_pool = 2 }',
                f'name = "miner"\nconfig = {{ path = "{tmp_path / "nope.sqlite"}" }}',
            ),
            "the synthesizer could not be made, its constructor raised: ",
        ),
    ]
    for i, (text, message) in enumerate(cases):
        toml = tmp_path / f"typo{i}.toml"
        toml.write_text(text)
        assert main(["run", str(toml), "--out", str(tmp_path / f"run{i}")]) == 2
        err = capsys.readouterr().err
        ours = [line for line in err.splitlines() if line.startswith("coevo run: ")]
        assert len(ours) == 1, err
        assert message in ours[0], ours[0]
        assert "\x1b[" not in ours[0] and "Traceback" not in ours[0]
