"""Where coevo writes: through no link inside a folder the user named, never over a folder of the user's, and a bad ``--out`` is one line.

Issue 39. Each case plants what a hostile or careless folder holds (links
out, files of the user's) with ``tmp_path`` and runs the real command; the
refusal must come before anything is written, and leave every file as it was.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from coevo.arena.errors import FileRefusedError
from coevo.arena.gamelog import GameLog, RunDir
from coevo.run.cli import main
from coevo.run.driver.display import EventLog
from coevo.run.interfaces.mcp_server import EpisodeRecorder

from tests.conftest import IN_PROCESS_TOML
from tests.factories import EXAMPLES

QUICKSTART = "experiments/quickstart.toml"
ONE_GENERATION = ["--set", "run.generations=1", "--set", "ray.in_process=true"]


@pytest.fixture(autouse=True)
def ray_must_not_start(monkeypatch) -> None:
    """Every refusal here happens before Ray starts: starting it fails the test."""
    import ray

    def started(*_: object, **__: object) -> None:
        raise AssertionError("Ray was started before the input was refused")

    monkeypatch.setattr(ray, "init", started)


def refused(args: list[str], capsys, status: int = 2) -> str:
    """Run ``coevo ARGS``; it must exit ``status`` with one `coevo <command>: ...` line and no traceback; what it printed."""
    assert main(args) == status
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith(f"coevo {args[0]}: ")]
    assert len(lines) == 1, err
    return err


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside every output folder, with a victim file: nothing may be written here."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim.txt").write_text("victim\n")
    (folder / "elsewhere").mkdir()
    return folder


def untouched(outside: Path) -> None:
    assert (outside / "victim.txt").read_text() == "victim\n", "written through a link"
    assert not any((outside / "elsewhere").iterdir()), "written into a folder through a link"


# ---- links inside an output folder ---------------------------------------------------------


@pytest.mark.parametrize(
    "links",
    [
        {"events.jsonl": "victim.txt", "checkpoints": "elsewhere"},
        {"log": "elsewhere"},
        {"experiment.json.partial": "victim.txt"},
    ],
    ids=["events-and-checkpoints", "log", "a-temporary-name"],
)
def test_a_run_into_a_folder_holding_links_is_refused_before_anything_is_written(
    links: dict[str, str], tmp_path, outside, capsys
) -> None:
    """`coevo run --out TRAP` with TRAP/events.jsonl -> a file elsewhere (or log/, checkpoints/ -> a folder elsewhere): exit 2 naming the link; nothing written through it."""
    trap = tmp_path / "trap"
    trap.mkdir()
    for name, target in links.items():
        (trap / name).symlink_to(outside / target)
    line = refused(["run", QUICKSTART, "--out", str(trap), *ONE_GENERATION], capsys)
    assert "holds a symbolic link" in line and sorted(links)[0] in line, line
    untouched(outside)
    assert sorted(p.name for p in trap.iterdir()) == sorted(links), "something written in TRAP"


def test_resume_of_a_run_holding_a_link_writes_nothing_through_it(
    finished_small_run: Path, tmp_path, outside, capsys
) -> None:
    """`coevo resume RUN` with RUN/events.jsonl -> a file elsewhere: exit 2, before Ray; no event appended there."""
    run = tmp_path / "run"
    shutil.copytree(finished_small_run, run)
    (run / "events.jsonl").unlink()
    (run / "events.jsonl").symlink_to(outside / "victim.txt")
    line = refused(["resume", str(run), "--set", "run.generations=4"], capsys)
    assert "events.jsonl" in line and "symbolic link" in line, line
    untouched(outside)


def test_the_run_directory_writers_refuse_a_link_each(tmp_path, outside) -> None:
    """Past the check at the start, each writer refuses a link on its own: a file that is one, a folder linking out; the run directory itself may be one."""
    real = tmp_path / "real"
    real.mkdir()
    named = tmp_path / "named"
    named.symlink_to(real)  # the folder the user named may be a link: followed
    run = RunDir(str(named))
    run.write_bytes(b"{}", "experiment.json")
    assert (real / "experiment.json").read_bytes() == b"{}"

    (real / "checkpoints").symlink_to(outside / "elsewhere")
    with pytest.raises(FileRefusedError, match="is in a folder that is a link out of"):
        run.write_bytes(b"state", "checkpoints", "gen=0", "state.json")
    with pytest.raises(FileRefusedError, match="is in a folder that is a link out of"):
        run.delete("checkpoints", "gen=0")
    (real / "log").symlink_to(outside / "elsewhere")
    with pytest.raises(FileRefusedError, match="is in a folder that is a link out of"):
        GameLog(run).write_part("tasks", 0, [])
    (real / "tracking.json.partial").symlink_to(outside / "victim.txt")
    with pytest.raises(FileRefusedError, match=r"tracking\.json\.partial is a symbolic link"):
        run.write_bytes(b"{}", "tracking.json")
    (real / "events.jsonl").symlink_to(outside / "victim.txt")
    with pytest.raises(FileRefusedError, match=r"events\.jsonl is a symbolic link"):
        EventLog(run, console=None)("run_started")
    untouched(outside)


def test_an_export_into_a_folder_holding_a_link_writes_nothing_through_it(
    finished_small_run: Path, tmp_path, outside, capsys
) -> None:
    """`coevo export RUN --out DIR` with DIR/tasks.jsonl -> a file elsewhere: exit 2 naming it; the file there is as it was."""
    out = tmp_path / "export"
    out.mkdir()
    (out / "tasks.jsonl").symlink_to(outside / "victim.txt")
    line = refused(["export", str(finished_small_run), "--out", str(out)], capsys)
    assert "tasks.jsonl is a symbolic link" in line, line
    untouched(outside)


def test_an_episode_record_is_appended_through_no_link(tmp_path, outside, capsys) -> None:
    """`coevo serve --record DIR` with DIR/episodes.jsonl a link is refused before serving; a link planted later is refused at the write."""
    record = tmp_path / "record"
    record.mkdir()
    (record / "episodes.jsonl").symlink_to(outside / "victim.txt")
    line = refused(["serve", str(EXAMPLES), "--task", "1", "--record", str(record)], capsys)
    assert "episodes.jsonl is a symbolic link" in line, line
    (record / "episodes.jsonl").unlink()
    recorder = EpisodeRecorder(record)
    (record / "episodes.jsonl").symlink_to(outside / "victim.txt")
    with pytest.raises(FileRefusedError, match="is a symbolic link"):
        recorder.write_line("{}")
    untouched(outside)


def test_an_example_is_copied_through_no_link_even_with_force(tmp_path, outside, capsys) -> None:
    """`coevo examples --copy quickstart DIR --force` with DIR/quickstart.toml a link: exit 2; the file it points to is as it was."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "quickstart.toml").symlink_to(outside / "victim.txt")
    line = refused(["examples", "--copy", "quickstart", str(folder), "--force"], capsys)
    assert "quickstart.toml is a symbolic link" in line, line
    untouched(outside)


# ---- a folder of the user's ----------------------------------------------------------------


@pytest.mark.parametrize(
    "files",
    [
        {"notes.txt": "precious\n", "events.jsonl": "precious-events\n"},
        {"experiment.json": '{"precious": true}', "run.lock": "precious"},
    ],
    ids=["other-files", "another-experiment-json"],
)
def test_a_run_into_a_folder_of_the_users_is_refused_and_leaves_it_as_it_was(
    files: dict[str, str], tmp_path, capsys
) -> None:
    """`coevo run --out DIR`, DIR holding files that are no run's: exit 2 saying to choose another --out; every file as it was."""
    folder = tmp_path / "mydocs"
    (folder / "log").mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    line = refused(["run", QUICKSTART, "--out", str(folder), *ONE_GENERATION], capsys)
    assert "choose another --out" in line, line
    assert {p.name: p.read_text() for p in folder.iterdir() if p.is_file()} == files
    assert {p.name for p in folder.iterdir()} == {*files, "log"}


def test_a_folder_a_run_left_when_killed_early_is_still_a_run_s(tmp_path, capsys) -> None:
    """A folder holding only a run's first files (its events and a stale lock, left by a run killed while Ray started) is run into: the run goes on to its next check, an eval suite's, which says its way out once."""
    folder = tmp_path / "killed"
    folder.mkdir()
    (folder / "events.jsonl").write_text('{"event": "run_started"}\n')
    (folder / "run.lock").write_text("garbage: its holder is gone")
    toml = tmp_path / "suite.toml"
    toml.write_text(
        '[run]\ngenerations = 1\n[[eval.suites]]\nname = "t"\n'
        f'corpus = "{tmp_path / "no-corpus"}"\n' + IN_PROCESS_TOML
    )
    line = refused(["run", str(toml), "--out", str(folder)], capsys)
    assert "eval suite 't'" in line and "holds no corpus" in line, line
    assert line.count("coevo corpus build") == 1, line


def test_a_corpus_is_built_in_no_folder_of_the_users_and_in_no_file(tmp_path, capsys) -> None:
    """`coevo corpus build --out DIR` with DIR holding notes.txt, or --out FILE: exit 2, one line, the file as it was."""
    build = ["--worlds", "1", "--tasks-per-world", "1", "--workers", "0"]
    folder = tmp_path / "cdocs"
    folder.mkdir()
    (folder / "notes.txt").write_text("precious\n")
    line = refused(["corpus", "build", "--out", str(folder), *build], capsys)
    assert "holds no corpus (notes.txt)" in line and "choose another --out" in line, line
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]
    file = tmp_path / "cfile"
    file.write_text("precious\n")
    line = refused(["corpus", "build", "--out", str(file), *build], capsys)
    assert "is a file" in line, line
    assert file.read_text() == "precious\n"


# ---- a bad --out -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [["sft", "RUN", "--model", "M"], ["tiny-model"]],
    ids=["sft", "tiny-model"],
)
def test_a_trainer_s_out_that_is_a_file_is_refused_before_torch(
    command: list[str], tmp_path, capsys
) -> None:
    """`coevo sft ... --out FILE` and `coevo tiny-model --out FILE`: exit 2 saying it is a file (before torch, which this venv may lack, is imported)."""
    file = tmp_path / "afile"
    file.write_text("precious\n")
    line = refused([*command, "--out", str(file)], capsys)
    assert f"--out {file} is a file" in line, line
    assert file.read_text() == "precious\n"


@pytest.mark.parametrize(
    "how",
    [["--set", 'run.out="runs/a\\u0000x"'], ["TOML"]],
    ids=["--set", "experiment-file"],
)
def test_a_run_out_holding_a_nul_is_refused_naming_the_key(
    how: list[str], tmp_path, capsys
) -> None:
    """run.out with a NUL character (from --set or the experiment file): exit 2 naming run.out, not a ValueError."""
    if how == ["TOML"]:
        toml = tmp_path / "nul.toml"
        toml.write_text(f'[run]\nout = "{tmp_path}/nul\\u0000x"\n')
        args = ["run", str(toml)]
    else:
        args = ["run", QUICKSTART, *how]
    err = refused(args, capsys)
    assert "run.out" in err and "NUL" in err, err


def test_an_export_manifest_names_what_it_wrote(finished_small_run: Path, tmp_path) -> None:
    """The export written through the checked files still records each table's rows and size."""
    out = tmp_path / "export"
    assert main(["export", str(finished_small_run), "--out", str(out)]) == 0
    manifest = json.loads((out / "export.json").read_text())
    assert manifest["tasks"]["bytes"] == (out / "tasks.jsonl").stat().st_size
