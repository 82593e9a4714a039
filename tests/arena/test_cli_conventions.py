"""The conventions users expect of a command line: --version, help when bare, counts that read right."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest
from coevo.arena.examples import EXAMPLES
from coevo.run.cli import main
from coevo.run.driver.summary import summary_lines


def test_version_prints_the_installed_version(capsys) -> None:
    """`coevo --version` prints `coevo X.Y.Z` (the installed distribution's) and exits 0."""
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"coevo {metadata.version('coevo')}"


def test_bare_coevo_prints_help_not_an_error(capsys) -> None:
    """`coevo` alone lists the commands on standard output and exits 0."""
    assert main([]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("usage: coevo")
    assert "check" in captured.out and "run" in captured.out and "error" not in captured.err


def test_every_command_has_a_description_in_its_help(capsys) -> None:
    """Every subcommand's --help has a description paragraph, not only the usage line."""
    from coevo.run.cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    missing = [name for name, sub in commands.items() if not (sub.description or "").strip()]
    assert missing == [], f"commands without a description: {missing}"


def test_schema_takes_no_flag_that_does_nothing(capsys) -> None:
    """`coevo schema --json` is refused (the output is always JSON); `coevo schema` prints a JSON Schema."""
    with pytest.raises(SystemExit):
        main(["schema", "--json"])
    capsys.readouterr()
    assert main(["schema", "--record", "task"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["$schema"].endswith("2020-12/schema")


def test_synth_without_checks_does_not_claim_acceptance(tmp_path: Path, capsys) -> None:
    """`coevo synth --no-check` says the tasks were written unchecked, never "accepted"."""
    out = tmp_path / "t.jsonl"
    assert main(["synth", "--domain", "clinic", "-n", "3", "--no-check", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "3 tasks written, not checked (--no-check)" in err and "accepted" not in err
    assert len(out.read_text().splitlines()) == 4  # the world and three tasks


def test_mutate_that_makes_nothing_writes_nothing_and_says_why(tmp_path: Path, capsys) -> None:
    """Mutating tasks that keep no plan (the bundled examples): exit 1, no file, one reason per task."""
    out = tmp_path / "children.jsonl"
    assert main(["mutate", str(EXAMPLES), "--op", "harder", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert not out.exists()
    assert err.count("not mutated:") == 4
    assert "none of the 4 tasks could be mutated with --op harder" in err


def test_mutate_shows_ten_reasons_and_counts_the_rest(tmp_path: Path, capsys) -> None:
    """More than ten tasks not mutated: ten reasons and `… and N more`, none with a template placeholder."""
    tasks = tmp_path / "t.jsonl"
    assert main(["synth", "--domain", "retail", "-n", "40", "--seed", "3", "--level", "5",
                 "--no-check", "--out", str(tasks)]) == 0  # fmt: skip
    capsys.readouterr()
    main(["mutate", str(tasks), "--op", "harder", "--no-check", "--out", str(tmp_path / "c.jsonl")])
    err = capsys.readouterr().err
    shown = err.count("not mutated:")
    assert shown == 10, err
    more = int(err.split("… and ")[1].split(" more")[0])
    assert more > 0
    assert "{" not in err, err  # no {db} or {choice} left unfilled in a reason
    main(["mutate", str(tasks), "--op", "drop_step", "--no-check", "--out", str(tmp_path / "d")])
    err = capsys.readouterr().err
    assert "does not apply to this row (needs " in err and "{" not in err, err


def test_the_summary_counts_one_of_a_thing_in_the_singular() -> None:
    """One generation, one episode, one task, one failure: no "1 generations"."""
    summary = {
        "run_dir": "r",
        "generations": 1,
        "episodes": 1,
        "accepted": 1,
        "rejected": 0,
        "failures": 1,
        "eval_success_first": None,
        "eval_success_last": None,
        "trained_level_first_third": 1.0,
        "trained_level_last_third": 1.0,
        "top_rejections": {"oracle": 2},
    }
    lines = summary_lines(summary)
    assert lines[0] == "1 generation, 1 training episode, 1 role failure recorded"
    assert lines[1] == "tasks: 1 accepted, 0 rejected"
    assert "rejections by check: oracle 2" in lines
    assert all(len(line) <= 80 for line in lines), lines


def test_a_run_that_accepted_no_task_says_so_and_why() -> None:
    """No task accepted: the summary says nothing was trained, and when none was even proposed, where to look."""
    summary = {
        "run_dir": "r",
        "generations": 2,
        "episodes": 0,
        "proposed": 0,
        "accepted": 0,
        "rejected": 0,
        "failures": 0,
        "eval_success_first": None,
        "eval_success_last": None,
        "trained_level_first_third": None,
        "trained_level_last_third": None,
    }
    lines = summary_lines(summary)
    assert "no task was accepted, so nothing was trained" in lines
    assert any("proposed none" in line and "events.jsonl" in line for line in lines)
    refused = summary_lines(
        {**summary, "proposed": 5, "rejected": 5, "top_rejections": {"oracle": 5}}
    )
    assert not any("proposed none" in line for line in refused)
    assert all(len(line) <= 80 for line in lines + refused)


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["coevo", "ex"], {"examples", "export"}),
        (["coevo", "run", "quick"], {"quickstart"}),
        (["coevo", "export", "--inl"], {"--inline-worlds"}),
        (["coevo", "--ver"], {"--version"}),
        (["coevo", "export", "--format", ""], {"jsonl", "parquet"}),
        (["coevo", "examples", "--copy", "q"], {"quickstart"}),
        (["coevo", "completion", ""], {"bash", "zsh"}),
    ],
)
@pytest.mark.slow  # a process of its own
def test_bash_completion_completes_commands_options_and_bundled_experiments(
    words: list[str], expected: set[str], tmp_path: Path, capsys
) -> None:
    """The script `coevo completion bash` prints, loaded into a real bash, completes what a user types."""
    import shutil
    import subprocess

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash here")
    assert main(["completion", "bash"]) == 0
    script = tmp_path / "coevo.bash"
    script.write_text(capsys.readouterr().out)
    probe = (
        f"source {script}; COMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}; "
        'cd "$1"; _coevo; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    result = subprocess.run([bash, "-c", probe, "bash", str(empty)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) == expected
