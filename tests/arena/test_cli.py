"""The command line: `coevo check` output and exit codes, `coevo play`, `coevo schema`, help texts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import EXAMPLES, mini_task, mini_world, run_cli

KEYS = ["line", "kind", "id", "accepted", "checks", "error", "instructions"]


def coevo(
    *args: str,
    stdin: str | None = None,
    cwd: Path | None = None,
    env_path: str | None = None,
    memory: int | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run the `coevo` command: in this process, or in a subprocess for ``env_path`` (an extra sys.path entry first) or ``memory`` (its address-space limit in bytes)."""
    if env_path is None and memory is None:
        return run_cli(*args, stdin=stdin, cwd=cwd)
    paths = [p for p in (env_path, str(Path(__file__).resolve().parents[2])) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    return subprocess.run(
        [sys.executable, "-m", "coevo.run.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
        preexec_fn=None if memory is None else lambda: _limit_memory(memory),
    )


def _limit_memory(limit: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.fixture(scope="module")
def address_space() -> int:
    """Bytes of address space `coevo check` reserves on the examples (pyarrow and numpy reserve most of it)."""
    script = (
        "import sys; from coevo.run.cli import main; main(['check', sys.argv[1], '--json']); "
        "print(next(l for l in open('/proc/self/status') if l.startswith('VmPeak')).split()[1])"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    result = subprocess.run(
        [sys.executable, "-c", script, str(EXAMPLES)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    return int(result.stdout.splitlines()[-1]) * 1024


# `coevo check` may use this much more than it needs for the examples; reading all of the
# input (the bug) needs the whole input, which the tests make larger than this.
HEADROOM = 384 << 20


def test_check_accepts_the_examples_with_one_json_object_per_line():
    """`coevo check --json` prints one object per record with exactly the documented keys; exit 0."""
    result = coevo("check", str(EXAMPLES), "--json")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == len(EXAMPLES.read_text().splitlines())
    for i, line in enumerate(lines, start=1):
        assert list(line) == KEYS
        assert line["line"] == i and line["accepted"] is True and line["error"] is None
    tasks = [line for line in lines if line["kind"] == "task"]
    assert all(
        set(t["checks"])
        == {"valid", "oracle", "noop", "unsolved", "partial", "determinism", "grounded", "solvable"}
        for t in tasks
    )
    assert all(t["checks"]["solvable"]["passed"] is None for t in tasks)


def test_check_keeps_going_past_bad_lines_and_exits_2(tmp_path):
    """Malformed JSON and wrong types give exit 2; every other line is still checked, in order."""
    rejected = mini_task()
    rejected["verifier"]["checks"] = [{"name": "trivial", "sql": "SELECT 1"}]
    lines = [
        json.dumps(mini_world()),
        json.dumps(mini_task()),
        "",
        "{this is not json",
        json.dumps({"format": "coevo.task/1", "world": 3, "instruction": ["not", "text"]}),
        json.dumps(rejected),
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = coevo("check", str(path), "--json")
    assert result.returncode == 2
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["line"] for o in out] == [1, 2, 4, 5, 6]
    assert [o["accepted"] for o in out] == [True, True, False, False, False]
    assert "malformed JSON" in out[2]["error"] and out[2]["checks"]["valid"]["passed"] is False
    assert out[2]["checks"]["oracle"]["passed"] is None
    assert "instruction" in out[3]["error"] and out[3]["id"] is None
    assert out[4]["error"] is None and out[4]["checks"]["noop"]["passed"] is False


def test_check_exits_1_when_a_task_is_rejected_and_explains_in_the_table(tmp_path):
    """Without unreadable lines, a rejected task gives exit 1; the table names the failed check and why."""
    rejected = mini_task()
    rejected["verifier"]["checks"] = [{"name": "trivial", "sql": "SELECT 1"}]
    path = tmp_path / "one.json"
    path.write_text(json.dumps(rejected, indent=2))
    result = coevo("check", str(path))
    assert result.returncode == 1
    assert "rejected" in result.stdout and "noop: submit() at once earns 1" in result.stdout
    assert "1 rejected, 0 unreadable" in result.stdout


def test_check_missing_file_is_a_clear_error():
    """A path that does not exist gives exit 2 and says so."""
    result = coevo("check", "no/such/file.jsonl")
    assert result.returncode == 2 and "no such file" in result.stderr


needs_proc = pytest.mark.skipif(
    not Path("/proc/self/status").exists() or not hasattr(os, "mkfifo"),
    reason="needs Linux /proc, /dev/zero and FIFOs",
)


@pytest.mark.slow  # a process of its own, under a memory limit
@needs_proc
def test_check_streams_an_endless_stdin_in_bounded_memory(address_space):
    """1 GiB of zeros then a world record, piped into `coevo check -` limited to its baseline + 384 MiB: line 1 is too long, line 2 is checked, no MemoryError."""
    limit = address_space + HEADROOM
    writer = (
        "import sys; out = sys.stdout.buffer; zeros = bytes(1 << 20)\n"
        "for _ in range(1024): out.write(zeros)\n"
        "out.write(b'\\n' + sys.argv[1].encode() + b'\\n')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    with subprocess.Popen(
        [sys.executable, "-c", writer, json.dumps(mini_world())],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as zeros:
        check = subprocess.run(
            [sys.executable, "-m", "coevo.run.cli", "check", "-", "--json"],
            stdin=zeros.stdout,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            preexec_fn=lambda: _limit_memory(limit),
        )
        zeros.stdout.close()
    assert "MemoryError" not in check.stderr and "Traceback" not in check.stderr, check.stderr
    assert check.returncode == 2, check.stderr
    out = [json.loads(line) for line in check.stdout.splitlines()]
    assert [o["line"] for o in out] == [1, 2]
    assert "line is longer than 16777216 bytes (16 MiB)" in out[0]["error"]
    assert "--max-line-bytes" in out[0]["error"]
    assert out[1]["kind"] == "world" and out[1]["accepted"] is True


def test_check_reports_a_long_line_and_checks_the_records_around_it(tmp_path):
    """A line over --max-line-bytes between two good records: both are checked, the long line gets the error; exit 2."""
    world, task = json.dumps(mini_world()), json.dumps(mini_task())
    limit = max(len(world), len(task))
    path = tmp_path / "long.jsonl"
    path.write_text(world + "\n" + "x" * (3 * limit) + "\n" + task + "\n")
    result = coevo("check", str(path), "--json", "--max-line-bytes", str(limit))
    assert result.returncode == 2, result.stderr
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(o["line"], o["accepted"]) for o in out] == [(1, True), (2, False), (3, True)]
    assert f"longer than {limit} bytes" in out[1]["error"]
    raised = coevo("check", str(path), "--json", "--max-line-bytes", "1MiB").stdout.splitlines()
    assert "malformed JSON" in json.loads(raised[1])["error"], "1MiB lets the line be read"
    rejected = coevo("check", str(path), "--max-line-bytes", "0")
    assert rejected.returncode == 2 and "not a positive number of bytes" in rejected.stderr


@pytest.mark.slow  # a process of its own, under a memory limit
@needs_proc
@pytest.mark.parametrize("command", ["check", "play"])
@pytest.mark.parametrize("kind", ["/dev/zero", "directory", "fifo"])
def test_files_that_are_not_regular_are_refused(command, kind, tmp_path, address_space):
    """`coevo check|play` on /dev/zero, a directory or a FIFO says 'not a regular file' (not 'no such file'), at once."""
    path = {"/dev/zero": Path("/dev/zero"), "directory": tmp_path, "fifo": tmp_path / "fifo"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    result = coevo(command, str(path), memory=address_space + HEADROOM)
    assert result.returncode == 2
    assert result.stderr.startswith(f"coevo {command}: {path} is not a regular file"), result.stderr
    assert "no such file" not in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("steps", ["0", "-3"])
def test_play_max_steps_below_one_is_a_usage_error(steps):
    """`coevo play --max-steps 0` (or negative) is refused by the parser, naming the option; no traceback."""
    result = coevo("play", str(EXAMPLES), "--max-steps", steps, stdin="submit\n")
    assert result.returncode == 2
    assert f"argument --max-steps: must be at least 1, got {steps}" in result.stderr
    assert "Traceback" not in result.stderr


def test_check_rejects_a_world_record_with_another_worlds_id_after_the_same_content(tmp_path):
    """A world (or task) record whose id is not its content's hash is rejected, even right after the same content with no id."""
    world, task = mini_world(), mini_task()
    path = tmp_path / "ids.jsonl"
    lines = [
        world,
        world | {"id": "sha256:" + "0" * 64},
        task,
        task | {"id": "sha256:" + "1" * 64},
        task | {"world": task["world"] | {"id": "sha256:" + "2" * 64}},
        world,
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = coevo("check", str(path), "--json")
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["accepted"] for o in out] == [True, False, True, False, False, True]
    assert "world.id: 'sha256:000" in out[1]["checks"]["valid"]["reason"]
    assert "id: 'sha256:111" in out[3]["checks"]["valid"]["reason"]
    assert "world.id: 'sha256:222" in out[4]["checks"]["valid"]["reason"]
    assert result.returncode == 1


def test_play_solves_a_task_from_the_terminal():
    """A person can call tools with JSON arguments, submit, and see reward 1."""
    script = "\n".join(
        [
            'find_customer_by_email {"email": "ada@ex.io"}',
            'list_orders {"customer_id": 1, "status": "pending"}',
            "list_orders {oops",
            'cancel_order {"order_id": 17}',
            "submit",
        ]
    )
    result = coevo("play", str(EXAMPLES), "--task", "1", stdin=script + "\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "instruction: Ada Ode (ada@ex.io)" in out and "cancel_order(order_id: integer)" in out
    assert "arguments are not JSON" in out
    assert "reward 1: all 1 check(s) pass and the frame holds" in out


def test_play_shows_failed_checks_and_rows_outside_the_frame():
    """A wrong attempt shows which check failed and which row left the frame."""
    script = 'cancel_order {"order_id": 14}\nsubmit\n'
    result = coevo("play", str(EXAMPLES), "--task", "1", stdin=script)
    assert "reward 0" in result.stdout
    assert "check 'latest_pending_cancelled' failed" in result.stdout
    assert "outside the frame: orders: row (id=14" in result.stdout


def test_play_json_prints_one_observation_per_line():
    """With --json, each observation is one JSON object."""
    result = coevo(
        "play",
        str(EXAMPLES),
        "--task",
        "3",
        "--json",
        stdin='find_patients {"name": "Maria Lopez"}\nsubmit {"answer": "x"}\n',
    )
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert (
        out[0]["rows"][0][:2] == [1, "Maria Lopez"]
        and out[-1]["done"]
        and out[-1]["reward"]["value"] == 0
    )


def test_schema_prints_json_schema_for_both_records():
    """`coevo schema` prints a JSON Schema with a choice between the task and world records."""
    result = coevo("schema")
    schema = json.loads(result.stdout)
    assert schema["$schema"].endswith("2020-12/schema") and len(schema["oneOf"]) == 2
    task_only = json.loads(coevo("schema", "--record", "task").stdout)
    assert "instruction" in task_only["properties"]


@pytest.mark.parametrize("command", ["check", "play", "schema"])
def test_every_command_has_help_with_an_example(command):
    """`coevo COMMAND --help` exits 0 and shows an example."""
    result = coevo(command, "--help")
    assert result.returncode == 0 and "example" in result.stdout


def test_errors_are_one_line_and_debug_shows_what_caused_them(tmp_path):
    """Every command's errors go through one boundary: `coevo <cmd>: <message>`, exit 2; --debug adds the cause."""
    broken = tmp_path / "broken.toml"
    broken.write_text("[run\n")
    plain = coevo("run", str(broken))
    assert plain.returncode == 2
    first = plain.stderr.splitlines()[0]
    assert first.startswith(f"coevo run: {broken} is not valid TOML")
    assert "Traceback" not in plain.stderr
    assert "--debug" not in plain.stderr, "the message says what is wrong: no hint to look deeper"
    blocked = tmp_path / "file"
    blocked.write_text("")
    unwritable = coevo("run", "quickstart", "--out", str(blocked / "run"))
    assert unwritable.returncode == 2
    assert "--debug" in unwritable.stderr, "an OS error's cause may say more: the hint is there"
    debug = coevo("run", str(broken), "--debug")
    assert debug.returncode == 2
    assert "TOMLDecodeError" in debug.stderr and "Traceback" in debug.stderr
    assert coevo("--debug", "play", str(tmp_path / "missing.jsonl")).returncode == 2
    missing = coevo("check", str(tmp_path / "missing.jsonl"))
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"coevo check: no such file: {tmp_path / 'missing.jsonl'}"
