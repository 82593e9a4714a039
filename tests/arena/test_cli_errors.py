"""A mistake at the command line is one `coevo <command>: ...` line and a non-zero status, never a traceback.

Each case is reproduced through the real command line (``main([...])`` in
this process, or the installed ``coevo`` script), as a user would meet it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from coevo.run.cli import main

QUICKSTART = "experiments/quickstart.toml"
COEVO = Path(sys.executable).with_name("coevo")


@pytest.fixture(autouse=True)
def ray_must_not_start(monkeypatch) -> None:
    """Every refusal here happens before Ray starts: starting it fails the test."""
    import ray

    def started(*_: object, **__: object) -> None:
        raise AssertionError("Ray was started before the input was refused")

    monkeypatch.setattr(ray, "init", started)


def refused(args: list[str], capsys, status: int = 2) -> str:
    """Run ``coevo ARGS``; it must exit ``status`` with one `coevo <command>: ...` line and no traceback."""
    assert main(args) == status
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith(f"coevo {args[0]}: ")]
    assert len(lines) == 1, err
    return err


@pytest.fixture
def finished_run(finished_small_run) -> Path:
    """A finished three-generation run (made once per session), for the read-only commands."""
    return finished_small_run


@pytest.mark.parametrize("where", ["file", "file/sub"])
def test_run_into_a_path_blocked_by_a_file_is_refused_before_anything_starts(
    where: str, tmp_path, capsys
) -> None:
    """`coevo run --out FILE` (or a path under a file, which stops root too) exits 2 saying it cannot write there."""
    blocker = tmp_path / "file"
    blocker.write_text("not a run\n")
    err = refused(["run", QUICKSTART, "--out", str(tmp_path / where)], capsys)
    assert "cannot write the run directory" in err and "choose another --out" in err
    assert blocker.read_text() == "not a run\n"


@pytest.mark.parametrize(
    ("table", "key"),
    [
        (
            '[curriculum]\nname = "target-band"\n[curriculum.target-band]\nband = [0.9, 0.1]\n',
            "band",
        ),
        ('[curriculum]\nname = "target-band"\nlevels = [0, 9]\n', "curriculum.levels"),
        ('[curriculum]\nname = "uniform"\nlevels = [0, 9]\n', "curriculum.levels"),
        ("[run]\ngenerations = true\n", "run.generations"),
        ('[solver]\nname = "linear-pg"\nactors = true\n', "solver.actors"),
        ('[solver]\nname = "linear-pg"\nconfig = { lr = true }\n', "solver.config.lr"),
        ("[curriculum]\ntasks_per_gen = false\n", "curriculum.tasks_per_gen"),
    ],
)
def test_a_bad_setting_is_refused_when_the_experiment_is_loaded(
    table: str, key: str, tmp_path, capsys
) -> None:
    """An inverted band, unknown levels and a boolean where a number belongs: exit 2 naming the key, before Ray starts."""
    path = tmp_path / "bad.toml"
    path.write_text(table)
    err = refused(["run", str(path), "--out", str(tmp_path / "r")], capsys)
    assert key in err
    assert not (tmp_path / "r").exists()


def test_a_boolean_is_not_an_integer_anywhere_in_the_experiment() -> None:
    """`true` for a count is refused in [run], a role table, [eval], [ray], a role's config and the curriculum."""
    from coevo.arena.errors import ExperimentError
    from coevo.run.experiment import load_experiment

    for key in (
        "run.seed",
        "run.rollouts",
        "judge.actors",
        "eval.per_level",
        "ray.num_cpus",
        "curriculum.window",
        "solver.config.lr",
    ):
        with pytest.raises(ExperimentError, match=key.replace(".", r"\.")):
            load_experiment(QUICKSTART, [f"{key}=true"])
    assert load_experiment(QUICKSTART, ["run.generations=3"]).run.generations == 3


@pytest.mark.slow  # a process of its own
def test_a_binary_experiment_file_is_refused_by_the_installed_command(tmp_path) -> None:
    """`coevo run` of a file that is not UTF-8 text: exit 2 with one line, through the real script."""
    path = tmp_path / "binary.toml"
    path.write_bytes(b"\xff\xfe\x00\x81binary\x00")
    done = subprocess.run(
        [str(COEVO), "run", str(path), "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"coevo run: {path} is not a TOML file: it is not UTF-8 text")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "garbage", ["{not json", "[1, 2]", "\xff", '{"run": 5}', "[" * 200_000 + "]" * 200_000]
)
@pytest.mark.parametrize("command", ["analyze", "report", "export", "resume"])
def test_a_damaged_experiment_record_is_named(
    garbage: str, command: str, finished_run: Path, tmp_path, capsys
) -> None:
    """Garbage in RUN_DIR/experiment.json (a table that is a number, JSON nested 200,000 deep): analyze, report, export and resume say the record cannot be read (exit 2), no traceback."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    (run / "experiment.json").write_bytes(garbage.encode("latin-1"))
    out = {"report": ["--out", str(tmp_path / "r.html")], "export": ["--out", str(tmp_path / "x")]}
    err = refused([command, str(run), *out.get(command, [])], capsys)
    assert f"{run}/experiment.json" in err


@pytest.mark.parametrize("command", ["analyze", "report", "export", "resume"])
def test_an_experiment_record_that_is_a_link_or_a_fifo_is_refused_unread(
    command: str, finished_run: Path, tmp_path, capsys
) -> None:
    """RUN_DIR/experiment.json a link to a file outside the run, or a FIFO: refused at once (no wait for a writer), naming the file, exit 2."""
    out = {"report": ["--out", str(tmp_path / "r.html")], "export": ["--out", str(tmp_path / "x")]}
    for kind in ("link", "fifo"):
        run = tmp_path / kind
        shutil.copytree(finished_run, run)
        record = run / "experiment.json"
        if kind == "link":
            outside = tmp_path / "elsewhere.json"
            record.rename(outside)
            record.symlink_to(outside)
        else:
            record.unlink()
            os.mkfifo(record)
        err = refused([command, str(run), *out.get(command, [])], capsys)
        assert f"{record} is a" in err
        assert ("symbolic link" if kind == "link" else "a FIFO, not a regular file") in err


def test_report_into_a_directory_is_refused(finished_run: Path, tmp_path, capsys) -> None:
    """`coevo report RUN --out DIR` names the directory and suggests a file in it."""
    err = refused(["report", str(finished_run), "--out", str(tmp_path)], capsys)
    assert "is a directory" in err and f"{tmp_path / 'report.html'}" in err


@pytest.mark.parametrize("where", ["file", "file/sub"])
def test_export_onto_a_file_is_refused(where: str, finished_run: Path, tmp_path, capsys) -> None:
    """`coevo export RUN --out FILE` (or a path under a file) exits 2 with one line; the file is untouched."""
    blocker = tmp_path / "file"
    blocker.write_text("keep me\n")
    err = refused(["export", str(finished_run), "--out", str(tmp_path / where)], capsys)
    assert str(tmp_path / where) in err
    assert blocker.read_text() == "keep me\n"


def test_a_refused_run_into_a_finished_run_leaves_its_events_alone(
    finished_run: Path, tmp_path, capsys
) -> None:
    """`coevo run --out RUN` where RUN holds generations: exit 2, and no `run_started` is appended to its events."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    (run / "events.jsonl").write_text(json.dumps({"event": "run_started"}) + "\n")
    before = (run / "events.jsonl").read_bytes()
    err = refused(["run", QUICKSTART, "--out", str(run)], capsys)
    assert "already holds a finished run (3 generations)" in err and "coevo analyze" in err
    assert (run / "events.jsonl").read_bytes() == before


def test_an_unfinished_run_is_named_with_the_way_to_continue_it(
    finished_run: Path, tmp_path, capsys
) -> None:
    """`coevo run --out RUN` where RUN stopped early: exit 2, naming how many generations and `coevo resume`."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    record = json.loads((run / "experiment.json").read_text())
    record["run"]["generations"] = 5
    (run / "experiment.json").write_text(json.dumps(record))
    err = refused(["run", QUICKSTART, "--out", str(run)], capsys)
    assert (
        f"already holds 3 of 5 generations of a run; continue it with `coevo resume {run}`" in err
    )


def test_resuming_a_finished_run_prints_its_summary_without_starting_ray(
    finished_run: Path, tmp_path, capsys
) -> None:
    """`coevo resume` of a run with every generation committed: exit 0, its summary, no Ray, the log untouched."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    before = sorted((p.name, p.stat().st_size) for p in run.rglob("*") if p.is_file())
    assert main(["resume", str(run), "--json"]) == 0
    captured = capsys.readouterr()
    assert "is finished (3 generations): nothing to resume" in captured.err
    assert "3 generations, 24 training episodes" in captured.err
    assert json.loads(captured.out)["generations"] == 3
    assert sorted((p.name, p.stat().st_size) for p in run.rglob("*") if p.is_file()) == before


@pytest.mark.parametrize(
    ("override", "meant"),
    [
        ("generations=3", "run.generations"),
        ("run.generatons=3", "run.generations"),
        ("seed=2", "run.seed"),
        ("solver.actor=2", "solver.actors"),
        ("num_cpus=1", "ray.num_cpus"),
    ],
)
def test_a_bad_override_is_blamed_with_the_full_dotted_key_it_meant(
    override: str, meant: str, capsys
) -> None:
    """`--set KEY=V` with a key that is not there: the override is blamed (not the file), with "did you mean" the full key."""
    err = refused(["run", QUICKSTART, "--set", override], capsys)
    assert f"the override --set {override} is not valid" in err
    assert f"did you mean {meant!r}" in err
    assert "quickstart.toml" not in err


def test_a_mistake_in_the_file_is_blamed_on_the_file_even_with_overrides(tmp_path, capsys) -> None:
    """A bad key in the experiment file is the file's, whatever --set adds."""
    bad = tmp_path / "bad.toml"
    bad.write_text("[run]\ngenerations = 2\nrollout = 3\n")
    err = refused(["run", str(bad), "--set", "run.seed=1"], capsys)
    assert f"{bad} is not a valid experiment" in err and "did you mean 'run.rollouts'" in err


def test_an_address_where_no_cluster_listens_is_refused_at_once(tmp_path, capsys) -> None:
    """`--address HOST:PORT` with nothing listening: exit 2 naming the address and the ways on, without waiting on Ray."""
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    err = refused(
        ["run", QUICKSTART, "--out", str(tmp_path / "r"), "--address", f"127.0.0.1:{port}"], capsys
    )
    assert f"cannot reach a Ray cluster at 127.0.0.1:{port}" in err
    assert "ray start --head" in err and "leave out --address" in err


@pytest.mark.parametrize("command", ["analyze", "resume", "export"])
def test_a_run_directory_that_does_not_exist_is_named_as_missing(
    command: str, tmp_path, capsys
) -> None:
    """A path that is not there is "no such run directory", not a directory that "holds no run"."""
    args = [command, str(tmp_path / "nowhere")] + (
        ["--out", str(tmp_path / "x")] if command == "export" else []
    )
    err = refused(args, capsys)
    assert "no such run directory" in err


def test_a_role_of_another_kind_is_not_suggested(capsys) -> None:
    """`--set solver.name=linear`: the suggestion and the list are solvers only (never the synthesizer 'miner')."""
    err = refused(["run", QUICKSTART, "--set", "solver.name=linear"], capsys)
    assert "no solver called 'linear'; did you mean 'linear-pg'?" in err
    assert "miner" not in err and "procedural" not in err
    assert "--debug" not in err  # the message says it all


def _a_part(run: Path) -> Path:
    return next(iter(sorted((run / "log" / "episodes").glob("gen=0/*.parquet"))))


def test_a_log_part_that_is_a_link_out_of_the_run_is_refused(
    finished_run: Path, tmp_path, capsys
) -> None:
    """A game-log part replaced by a link to an identical file outside the run (same size, same checksum): `coevo analyze` refuses it, naming the part and `coevo doctor`, exit 2."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    part = _a_part(run)
    outside = tmp_path / "outside.parquet"
    part.rename(outside)
    part.symlink_to(outside)
    err = refused(["analyze", str(run)], capsys)
    assert f"{part} is a symbolic link" in err and "coevo doctor" in err


def test_a_log_part_that_decompresses_past_the_limit_is_refused_by_its_footer(
    finished_run: Path, tmp_path, capsys, monkeypatch
) -> None:
    """A log part whose footer says it holds more than the limit decompressed is refused before a column is read (the limit lowered for the test), naming the part."""
    from coevo.arena import bounded

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    monkeypatch.setattr(bounded, "MAX_PARQUET_UNCOMPRESSED_BYTES", 256)
    err = refused(["analyze", str(run)], capsys)
    assert "once decompressed, by its Parquet footer" in err and "/log/" in err


def test_an_experiment_or_a_set_value_nested_too_deep_is_refused_with_a_message(
    tmp_path, capsys
) -> None:
    """An experiment file nested 5,000 deep, or a --set value 3,000 deep: exit 2 with one line, never a RecursionError."""
    deep = tmp_path / "deep.toml"
    deep.write_text("x = " + "[" * 5_000 + "]" * 5_000 + "\n")
    err = refused(["run", str(deep), "--out", str(tmp_path / "r")], capsys)
    assert f"{deep} is nested too deep" in err
    value = "[" * 3_000 + "]" * 3_000
    err = refused(
        ["run", QUICKSTART, "--set", f"run.name={value}", "--out", str(tmp_path / "r")], capsys
    )
    assert "--set run.name: the value is nested too deep" in err
    assert not (tmp_path / "r").exists()


def test_an_integer_of_5000_digits_is_refused_with_a_message_wherever_it_is_given(
    tmp_path, capsys
) -> None:
    """--set run.generations=9…9 (5,000 digits), the same in an experiment file or a --settings file: exit 2 with coevo's line, never Python's ValueError."""
    digits = "9" * 5_000
    err = refused(
        ["run", QUICKSTART, "--set", f"run.generations={digits}", "--out", str(tmp_path / "r")],
        capsys,
    )
    assert "--set run.generations: an integer of more than 4300 digits" in err
    big = tmp_path / "big.toml"
    big.write_text(f"[run]\ngenerations = {digits}\n")
    err = refused(["run", str(big), "--out", str(tmp_path / "r")], capsys)
    assert f"{big} is not valid TOML: an integer of more than 4300 digits" in err
    settings = tmp_path / "train.toml"
    settings.write_text(f"[train]\nepochs = {digits}\n")
    err = refused(["train", str(tmp_path), "--model", "m", "--settings", str(settings)], capsys)
    assert "an integer of more than 4300 digits" in err
    assert "set_int_max_str_digits" not in err and not (tmp_path / "r").exists()
