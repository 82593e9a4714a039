"""Further held-out suites (``[[eval.suites]]``): played beside the synthesized suite, logged, never trained on, shown side by side.

Runs are in process (``IN_PROCESS_*``); the suites are made by the CLI a
user would use (``coevo synth``, ``coevo corpus build``, ``coevo import
tau2`` of the runnable "kiosk" checkout), and the LLM Solver's model is a
loopback fake.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from math import comb
from pathlib import Path
from typing import Any

import pytest
from coevo.agents.llm.user import GUIDELINES
from coevo.arena.errors import ArenaError, ExperimentError
from coevo.arena.gamelog import SCHEMAS, GameLog
from coevo.run.driver.summary import summarize
from coevo.run.experiment import SuiteConfig, load_experiment
from coevo.run.generation.suites import read_suites
from coevo.run.loop import resume_run, run_experiment
from coevo.run.tracking.metrics import generation_metrics

from tests.agents.fake_openai import FakeOpenAI, calls
from tests.arena.tau2_runnable import TASKS, build_runnable_checkout
from tests.arena.test_benchmark_run import KEY, Kiosk
from tests.factories import IN_PROCESS_SETS, IN_PROCESS_TOML, run_cli

ROOT = Path(__file__).resolve().parents[2]

EXPERIMENT = """\
[run]
seed = 11
generations = 3
rollouts = 2
chunk = 8
[synthesizer]
name = "procedural"
config = { domains = ["retail"], world_pool = 2 }
[solver]
name = "linear-pg"
actors = 2
[curriculum]
name = "plr"
tasks_per_gen = 6
min_fill = 4
levels = [1, 2]
[eval]
levels = [1, 2]
per_level = 3
every = 2
"""


def _tables(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    log = GameLog(str(run_dir))
    return {name: log.read(name).to_pylist() for name in SCHEMAS}


@pytest.fixture(scope="module")
def suites(tmp_path_factory) -> dict[str, Path]:
    """A file of clinic tasks (``coevo synth``) and a corpus of hr worlds (``coevo corpus build``)."""
    where = tmp_path_factory.mktemp("suites")
    clinic = where / "clinic.jsonl"
    made = run_cli("synth", "--domain", "clinic", "-n", "4", "--seed", "5", "--level", "1")
    assert made.returncode == 0, made.stderr
    clinic.write_text(made.stdout)
    corpus = where / "corpus"
    built = run_cli(
        "corpus", "build", "--out", str(corpus), "--worlds", "4", "--tasks-per-world", "3",
        "--domains", "hr", "--levels", "1", "--eval-share", "0.5", "--workers", "0",
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    return {"clinic": clinic, "corpus": corpus}


def _experiment(where: Path, suites: str) -> Path:
    path = where / "transfer.toml"
    path.write_text(EXPERIMENT + suites + IN_PROCESS_TOML)
    return path


def _both(paths: dict[str, Path]) -> str:
    return (
        f'[[eval.suites]]\nname = "clinic"\ntasks = "{paths["clinic"]}"\ntrials = 3\n'
        f'[[eval.suites]]\nname = "hr-corpus"\ncorpus = "{paths["corpus"]}"\nsplit = "eval"\n'
    )


def test_a_run_plays_further_suites_beside_the_synthesized_one_and_analyze_shows_them_side_by_side(
    suites, tmp_path
) -> None:
    """A file suite (3 trials) and a corpus's held-out split are played at the eval generations, logged by suite, never trained on; analyze and report show every suite with intervals and pass^k."""
    exp = _experiment(tmp_path, _both(suites))
    run = tmp_path / "run"
    done = run_cli("run", str(exp), "--out", str(run))
    assert done.returncode == 0, done.stderr
    log = _tables(run)
    evals = log["evals"]
    by_suite: dict[str | None, list[dict[str, Any]]] = {}
    for row in evals:
        by_suite.setdefault(row["suite"], []).append(row)
    assert set(by_suite) == {None, "clinic", "hr-corpus"}
    for rows in by_suite.values():
        assert {r["gen"] for r in rows} == {0, 2}, (
            "every suite is played when the synthesized one is"
        )
    clinic = [r for r in by_suite["clinic"] if r["gen"] == 0]
    assert len(clinic) == 4 * 3 and {r["domain"] for r in clinic} == {"clinic"}
    assert {r["domain"] for r in by_suite["hr-corpus"]} == {"hr"}
    # never trained on: no training episode, prediction or admission of a suite's task
    held = {r["task_id"] for r in evals if r["suite"] is not None}
    trained = {e["task_id"] for e in log["episodes"] if e["purpose"] == "train"}
    predicted = {p["task_id"] for p in log["predictions"]}
    assert held and not held & trained and not held & predicted
    assert {t["task_id"] for t in log["tasks"] if t["source"] == "eval"} >= held
    # the generations row's eval figure is the synthesized suite's alone
    synthesized = [r["reward"] for r in by_suite[None] if r["gen"] == 2]
    row = next(g for g in log["generations"] if g["gen"] == 2)
    assert row["eval_success"] == pytest.approx(sum(synthesized) / len(synthesized))

    # the run's summary counts the synthesized suite's tasks alone against what [eval] asked
    summary = summarize(str(run))
    assert summary["eval_tasks"] == summary["eval_asked"] == 6

    # the trackers get each suite's success, and the levels of the synthesized suite alone
    tracked = generation_metrics(GameLog(str(run)), 2)
    assert tracked["eval/clinic/success"] == pytest.approx(
        sum(r["reward"] for r in by_suite["clinic"] if r["gen"] == 2) / 12
    )
    assert "eval/hr-corpus/success" in tracked
    level_1 = [r["reward"] for r in by_suite[None] if r["gen"] == 2 and r["level"] == 1]
    assert tracked["eval/success_level_1"] == pytest.approx(sum(level_1) / len(level_1))

    shown = run_cli("analyze", str(run), "--json", "--no-irt")
    assert shown.returncode == 0, shown.stderr
    metrics = json.loads(shown.stdout)
    listed = {s["name"]: s for s in metrics["suites"]}
    assert list(listed) == ["synthesized", "clinic", "hr-corpus"]
    assert [listed[n]["kind"] for n in listed] == ["in-domain", "transfer", "transfer"]
    last = listed["clinic"]["per_generation"][-1]
    rewards = [r["reward"] for r in by_suite["clinic"] if r["gen"] == 2]
    assert last["gen"] == 2 and last["success"] == pytest.approx(sum(rewards) / len(rewards))
    assert sorted(map(int, last["pass_k"])) == [1, 2, 3] and last["tasks"] == 4
    assert last["low"] <= last["success"] <= last["high"]
    assert last["low_k"] <= last["pass_k"]["3"] <= last["high_k"]
    corpus_last = listed["hr-corpus"]["per_generation"][-1]
    assert corpus_last["interval"] == "wilson" and corpus_last["low"] <= corpus_last["high"]
    assert len(metrics["success"]["eval"]) == 2
    assert metrics["success"]["eval"][-1]["episodes"] == len(
        [r for r in by_suite[None] if r["gen"] == 2]
    )

    text = run_cli("analyze", str(run), "--no-irt").stdout
    assert "held-out suites" in text and "synthesized (in-domain)" in text
    assert "clinic (transfer, ×3)" in text and "hr-corpus (transfer)" in text
    assert re.search(r"clinic \(.*clinic\.jsonl\), gen 2: 4 tasks × 3 trials, pass\^1", text)

    report = tmp_path / "report.html"
    assert run_cli("report", str(run), "--out", str(report)).returncode == 0
    page = report.read_text()
    assert '<table id="suites">' in page
    assert all(f"<td>{name}</td>" in page for name in ("synthesized", "clinic", "hr-corpus"))


@pytest.mark.parametrize("staleness", [0, 1])
def test_a_resumed_run_plays_the_suites_it_kept_and_writes_the_log_of_an_uninterrupted_one(
    suites, tmp_path, staleness
) -> None:
    """Stopped after generation 1 and resumed (the suite's file since changed): the same log as a run never stopped, phases overlapping or not."""
    clinic = tmp_path / "clinic.jsonl"
    clinic.write_bytes(suites["clinic"].read_bytes())
    path = _experiment(tmp_path, _both({**suites, "clinic": clinic}))
    exp = load_experiment(path, [f"run.max_staleness={staleness}"])
    run_experiment(exp, str(tmp_path / "whole"))
    partial = run_experiment(exp, str(tmp_path / "resumed"), stop_after=2)
    assert partial.generations == 2
    clinic.write_text("this is no longer a suite\n")  # a resumed run plays its own copy
    resume_run(str(tmp_path / "resumed"))
    assert _tables(tmp_path / "resumed") == _tables(tmp_path / "whole")


def _bad_file(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """A hostile or broken suite file, and what the message must say."""
    path = tmp_path / f"{kind}.jsonl"
    if kind == "not-json":
        path.write_text('{"format": "coevo.task/1", oops\n')
    elif kind == "link to a fifo":  # the user's link is followed, to what is then refused
        target = tmp_path / "elsewhere.jsonl"
        os.mkfifo(target)
        os.symlink(target, path)
        return path, "is a FIFO, not a regular file"
    elif kind == "over 64 MiB":  # sparse: nothing is written, and nothing may be read
        path.touch()
        os.truncate(path, (64 << 20) + 1)
        return path, "is 64.0 MiB (67108865 bytes), more than coevo reads from such a file"
    elif kind in ("long line", "long code line"):  # within 64 MiB, one line of 17 MiB
        head = b'{"format": "coevo.codeworld/1", "id": "' if kind == "long code line" else b""
        path.write_bytes(head)
        os.truncate(path, 17 << 20)
        return path, "line 1: the line is longer than 16777216 bytes (16 MiB)"
    elif kind == "folder":
        path.mkdir()
        return path, "not a regular file"
    elif kind == "missing":
        return path, "No such file"
    elif kind == "empty":
        path.write_text("\n")
        return path, "holds no task"
    elif kind == "no-world":
        made = run_cli("synth", "--domain", "hr", "-n", "1", "--seed", "2", "--level", "1")
        path.write_text(made.stdout.splitlines()[-1] + "\n")  # the task without its world
        return path, "names world"
    return path, "line 1"


@pytest.mark.parametrize(
    "kind",
    [
        "not-json",
        "link to a fifo",
        "folder",
        "missing",
        "empty",
        "no-world",
        "over 64 MiB",
        "long line",
        "long code line",
    ],
)
def test_a_bad_suite_file_stops_the_run_before_it_starts_naming_the_suite_and_the_file(
    tmp_path, kind
) -> None:
    """A file that is not a suite (broken JSON, a link to a FIFO, a folder, absent, empty, a task without its world, over 64 MiB, a line over 16 MiB) is refused before anything runs, naming it: one line, exit 2."""
    path, says = _bad_file(tmp_path, kind)
    exp = _experiment(tmp_path, f'[[eval.suites]]\nname = "broken"\ntasks = "{path}"\n')
    done = run_cli("run", str(exp), "--out", str(tmp_path / "run"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("coevo run: ") and "Traceback" not in done.stderr
    assert "eval suite 'broken'" in done.stderr and str(path) in done.stderr, done.stderr
    assert says in done.stderr, done.stderr
    assert "--max-line-bytes" not in done.stderr, "coevo run has no such flag"
    assert not (tmp_path / "run").exists(), "nothing was written"


def test_a_suite_read_through_the_users_links_and_blank_lines_is_the_file_itself(
    suites, tmp_path
) -> None:
    """A suite file that is a link, in a folder that is a link (the user's own paths), is read; a million blank lines are passed over, the line numbers kept."""
    real = tmp_path / "real"
    real.mkdir()
    text = suites["clinic"].read_text()
    (real / "clinic.jsonl").write_text("\n" * 1_000_000 + text + " \r\n" * 1000 + "{oops\n")
    (tmp_path / "folder").symlink_to(real)
    (real / "link.jsonl").symlink_to(real / "clinic.jsonl")
    config = SuiteConfig(name="x", tasks=str(tmp_path / "folder" / "link.jsonl"))
    with pytest.raises(
        ArenaError, match=f"line {1_000_001 + text.count(chr(10)) + 1000}: malformed"
    ):
        read_suites([config])
    (real / "clinic.jsonl").write_text("\n" * 1_000_000 + text)
    (suite,) = read_suites([config])
    assert [t.task_id for t in suite.tasks] == [
        t.task_id
        for t in read_suites([SuiteConfig(name="x", tasks=str(suites["clinic"]))])[0].tasks
    ]


@pytest.mark.parametrize(
    ("suite", "says"),
    [
        ('name = "both"\ntasks = "a.jsonl"\ncorpus = "c"', "exactly one of tasks"),
        ('name = "neither"', "exactly one of tasks"),
        ('name = "synthesized"\ntasks = "a.jsonl"', "the synthesized suite's"),
        ('name = "../up"\ntasks = "a.jsonl"', "eval.suites.0.name"),
        ('name = "x"\ncorpus = "c"\nsplit = "train"', "split"),
    ],
)
def test_a_suite_table_that_cannot_be_right_is_refused_when_the_file_is_read(
    tmp_path, suite, says
) -> None:
    """Both sources or none, the synthesized suite's name, a name that is no file name, a corpus's training side: each refused, naming the key."""
    path = _experiment(tmp_path, f"[[eval.suites]]\n{suite}\n")
    with pytest.raises(ExperimentError, match=re.escape(says)):
        load_experiment(path)


def test_two_suites_of_one_name_are_refused(tmp_path) -> None:
    """Each suite's name is its own (it names its rows and its copy in the run directory)."""
    twice = '[[eval.suites]]\nname = "a"\ntasks = "x.jsonl"\n' * 2
    with pytest.raises(ExperimentError, match="two eval suites are named 'a'"):
        load_experiment(_experiment(tmp_path, twice))


@pytest.fixture(scope="module")
def kiosk(tmp_path_factory) -> tuple[Path, Path]:
    """The kiosk domain imported by `coevo import tau2`: (the tasks file, the code's folder)."""
    root = build_runnable_checkout(tmp_path_factory.mktemp("kiosk"))
    out = root / "kiosk.jsonl"
    done = run_cli("import", "tau2", str(root), "--domain", "kiosk", "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out, root / "src"


def test_imported_code_tasks_are_refused_at_start_for_a_solver_that_cannot_play_them(
    kiosk, tmp_path
) -> None:
    """linear-pg plays SQL worlds, not code tasks: the run is refused before it starts, naming the suite and the way on."""
    tasks, code = kiosk
    suite = f'[[eval.suites]]\nname = "kiosk"\ntasks = "{tasks}"\ncode = ["{code}"]\n'
    done = run_cli("run", str(_experiment(tmp_path, suite)), "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    assert "eval suite 'kiosk'" in done.stderr and "only an LLM Solver plays" in done.stderr
    assert "'linear-pg' cannot" in done.stderr and "[benchmark]" in done.stderr
    assert not (tmp_path / "run").exists()


class KioskAndShop(Kiosk):
    """The fake model: plays the kiosk's customer and agent (:class:`Kiosk`); on a synthesized SQL task it submits at once."""

    def __call__(self, body: dict[str, Any]) -> Any:
        messages = body["messages"]
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        if system.startswith(GUIDELINES) or re.search(r"scenario \d+", json.dumps(messages)):
            return super().__call__(body)
        return calls(("submit", {}))


def test_an_llm_solver_run_evaluates_an_imported_tau2_suite_beside_the_synthesized_one(
    kiosk, tmp_path, monkeypatch
) -> None:
    """The acceptance of issue 32 item 5: an experiment whose eval includes an imported suite runs, and `coevo analyze` shows both suites, with pass^k."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    tasks, code = kiosk
    with FakeOpenAI(KioskAndShop(), api_key=KEY) as server:
        text = (
            EXPERIMENT.replace('name = "linear-pg"\nactors = 2', 'name = "llm-solver"\nactors = 1')
            .replace("generations = 3", "generations = 1")
            .replace("[curriculum]", f'config = {{ base_url = "{server.url}", sampling = {{ seed = 11 }} }}\n[curriculum]')
        )  # fmt: skip
        suite = (
            f'[[eval.suites]]\nname = "kiosk"\ntasks = "{tasks}"\ncode = ["{code}"]\ntrials = 3\n'
            f'user = {{ base_url = "{server.url}" }}\n'
        )
        exp = tmp_path / "llm.toml"
        exp.write_text(text + suite + IN_PROCESS_TOML)
        done = run_cli("run", str(exp), "--out", str(tmp_path / "run"))
        assert done.returncode == 0, done.stderr
    log = _tables(tmp_path / "run")
    kiosk_rows = [r for r in log["evals"] if r["suite"] == "kiosk"]
    assert len(kiosk_rows) == 3 * len(TASKS)  # generation 0: 3 trials of each task
    assert {r["domain"] for r in kiosk_rows} == {"kiosk"}
    played = {e["episode_id"]: e for e in log["episodes"]}
    assert not any(played[r["episode_id"]]["failure"] for r in kiosk_rows)
    assert any(r["reward"] for r in kiosk_rows), "the agent solves some kiosk tasks"
    spent = {u["role"] for u in log["usage"] if u["task_id"] in {r["task_id"] for r in kiosk_rows}}
    assert spent == {"solver", "user"}, "what the suite's models spent is in the usage table"
    shown = run_cli("analyze", str(tmp_path / "run"), "--json", "--no-irt")
    metrics = json.loads(shown.stdout)
    names = [s["name"] for s in metrics["suites"]]
    assert names == ["synthesized", "kiosk"]
    last = metrics["suites"][1]["per_generation"][-1]
    rewards: dict[str, list[int]] = {}
    for r in kiosk_rows:
        rewards.setdefault(r["task_id"], []).append(r["reward"])
    expected = {
        str(k): sum(comb(sum(r), k) / comb(3, k) for r in rewards.values()) / len(rewards)
        for k in (1, 2, 3)
    }
    assert last["tasks"] == len(TASKS) and last["pass_k"] == pytest.approx(expected)
    in_domain = [r for r in log["evals"] if r["suite"] is None]
    assert in_domain and not any(played[r["episode_id"]]["failure"] for r in in_domain)
    # the policies' eval figures are the synthesized suite's: the kiosk's trajectories are its own
    assert sum(p["eval_rollouts"] for p in metrics["policies"]) == len(in_domain)
    text_out = run_cli("analyze", str(tmp_path / "run"), "--no-irt").stdout
    assert "synthesized (in-domain)" in text_out and "kiosk (transfer, ×3)" in text_out
    assert f"gen 0: {len(TASKS)} tasks × 3 trials, pass^1" in text_out
    report = tmp_path / "report.html"
    assert run_cli("report", str(tmp_path / "run"), "--out", str(report)).returncode == 0
    assert "<td>kiosk</td><td>transfer</td>" in report.read_text()


def test_the_bundled_transfer_experiment_runs_offline_from_the_commands_its_header_gives(
    tmp_path,
) -> None:
    """experiments/transfer.toml: the suites its header makes, then `coevo run transfer` (shortened) and analyze showing in-domain and both transfer suites."""
    header = (ROOT / "experiments" / "transfer.toml").read_text().splitlines()
    commands = [
        line.split("coevo ", 1)[1].split("&&")[0].split()
        for line in header
        if line.startswith("#   coevo ") and "coevo run" not in line
    ]
    assert [c[:2] for c in commands] == [["synth", "--domain"], ["corpus", "build"]]
    # the corpus smaller than the header's keeps the test fast (its held-out side is what counts)
    commands[1][commands[1].index("--worlds") + 1] = "20"
    commands[1] += ["--tasks-per-world", "3"]
    for command in commands:
        done = run_cli(*command, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    short = ("run.generations=1", "curriculum.tasks_per_gen=8", "eval.per_level=2")
    flags = [x for s in (*short, *IN_PROCESS_SETS) for x in ("--set", s)]
    done = run_cli("run", "transfer", *flags, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = run_cli("analyze", "runs/transfer", "--json", "--no-irt", cwd=tmp_path)
    suites = {s["name"]: s for s in json.loads(shown.stdout)["suites"]}
    assert list(suites) == ["synthesized", "clinic", "corpus-eval"]
    clinic = suites["clinic"]["per_generation"][-1]
    assert clinic["tasks"] == 24 and clinic["episodes"] == 24 * 4 and clinic["gen"] == 0
    assert 0 < suites["corpus-eval"]["per_generation"][-1]["tasks"] <= 48


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_an_imported_suite_on_ray_resumes_to_the_evals_of_an_uninterrupted_run(
    kiosk, tmp_path, monkeypatch
) -> None:
    """The code suite's host as a Ray actor: a run stopped after generation 0 and resumed (the file moved away) logs the evals a run in process never stopped logs."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    tasks, code = kiosk
    local = tmp_path / "kiosk.jsonl"
    local.write_bytes(tasks.read_bytes())
    with FakeOpenAI(KioskAndShop(), api_key=KEY) as server:
        text = (
            EXPERIMENT.replace('name = "linear-pg"\nactors = 2', 'name = "llm-solver"\nactors = 1')
            .replace("generations = 3", "generations = 2")
            .replace("[curriculum]", f'config = {{ base_url = "{server.url}", sampling = {{ seed = 11 }} }}\n[curriculum]')
        )  # fmt: skip
        suite = (
            f'[[eval.suites]]\nname = "kiosk"\ntasks = "{local}"\ncode = ["{code}"]\ntrials = 2\n'
            f'user = {{ base_url = "{server.url}" }}\n'
        )
        path = tmp_path / "llm.toml"
        path.write_text(text + suite + IN_PROCESS_TOML)
        run_experiment(load_experiment(path), str(tmp_path / "whole"))
        on_ray = load_experiment(path, ["ray.in_process=false"])
        run_experiment(on_ray, str(tmp_path / "resumed"), stop_after=1)
        local.rename(tmp_path / "moved.jsonl")  # the resumed run plays its own copy
        resume_run(str(tmp_path / "resumed"))

    def evals(run: str) -> list[dict[str, Any]]:
        return sorted(
            _tables(tmp_path / run)["evals"],
            key=lambda r: (r["gen"], str(r["suite"]), r["episode_id"]),
        )

    whole, resumed = evals("whole"), evals("resumed")
    assert [r for r in whole if r["suite"] == "kiosk"], "the suite was played"
    assert {r["gen"] for r in whole if r["suite"] == "kiosk"} == {0, 1}
    assert resumed == whole


def test_an_imported_suite_whose_customer_has_no_server_is_refused_before_the_run_starts(
    kiosk, tmp_path, monkeypatch
) -> None:
    """The suite's user simulator is checked as [benchmark.user] is: its server down stops the run at start-up, naming the suite."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    tasks, code = kiosk
    with FakeOpenAI(KioskAndShop(), api_key=KEY) as server:
        text = EXPERIMENT.replace(
            'name = "linear-pg"\nactors = 2',
            f'name = "llm-solver"\nactors = 1\nconfig = {{ base_url = "{server.url}" }}',
        )
        suite = (
            f'[[eval.suites]]\nname = "kiosk"\ntasks = "{tasks}"\ncode = ["{code}"]\n'
            'user = { base_url = "http://127.0.0.1:9/v1" }\n'  # nothing listens on port 9
        )
        exp = tmp_path / "llm.toml"
        exp.write_text(text + suite + IN_PROCESS_TOML)
        done = run_cli("run", str(exp), "--out", str(tmp_path / "run"))
    assert done.returncode == 2, done.stderr
    assert "eval suite 'kiosk': user:" in done.stderr and "127.0.0.1:9" in done.stderr
    assert not (tmp_path / "run").exists()


def test_adding_suites_leaves_the_training_and_the_synthesized_suite_as_they_were(
    suites, tmp_path
) -> None:
    """The same seed with and without further suites: the same training episodes, updates, synthesized-suite evals and generations rows."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    run_experiment(load_experiment(_experiment(tmp_path / "a", "")), str(tmp_path / "plain"))
    with_suites = load_experiment(_experiment(tmp_path / "b", _both(suites)))
    run_experiment(with_suites, str(tmp_path / "suites"))
    plain, more = _tables(tmp_path / "plain"), _tables(tmp_path / "suites")
    held = {r["episode_id"] for r in more["evals"] if r["suite"] is not None}
    assert held, "the suites were played"
    assert [e for e in more["episodes"] if e["episode_id"] not in held] == plain["episodes"]
    assert [r for r in more["evals"] if r["suite"] is None] == plain["evals"]
    for table in ("generations", "updates", "predictions", "verdicts"):
        assert more[table] == plain[table], table


def test_a_suite_of_tasks_the_run_would_train_on_is_kept_out_of_training(tmp_path) -> None:
    """The tasks a run trains on, given to the same run as a suite: played as eval, never trained on, predicted or admitted."""
    plain = tmp_path / "plain"
    assert run_cli("run", str(_experiment(tmp_path, "")), "--out", str(plain)).returncode == 0
    log = _tables(plain)
    trained = {e["task_id"] for e in log["episodes"] if e["purpose"] == "train"}
    tasks = [t for t in log["tasks"] if t["task_id"] in trained]
    worlds = {w["world_id"]: w["spec"] for w in log["worlds"]}
    lines = [worlds[w] for w in sorted({t["world_id"] for t in tasks})] + [t["spec"] for t in tasks]
    seen = tmp_path / "trained.jsonl"
    seen.write_text("\n".join(lines) + "\n")
    exp = _experiment(tmp_path, f'[[eval.suites]]\nname = "seen"\ntasks = "{seen}"\n')
    done = run_cli("run", str(exp), "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    log = _tables(tmp_path / "run")
    held = {r["task_id"] for r in log["evals"] if r["suite"] == "seen"}
    assert trained and held == trained
    now = {e["task_id"] for e in log["episodes"] if e["purpose"] == "train"}
    assert now and not held & now
    assert not held & {p["task_id"] for p in log["predictions"]}


@pytest.mark.parametrize("split", ["none", {"eval_share": "half"}, {"eval_share": 0.0}])
def test_a_corpus_suite_without_a_held_out_split_is_refused_naming_the_corpus(
    suites, tmp_path, split
) -> None:
    """A corpus whose manifest has no usable ``split.eval_share``: exit 2 naming it and the fix, no run directory."""
    corpus = tmp_path / "corpus"
    shutil.copytree(suites["corpus"], corpus)
    manifest = json.loads((corpus / "corpus.json").read_text())
    manifest["split"] = split
    (corpus / "corpus.json").write_text(json.dumps(manifest))
    exp = _experiment(
        tmp_path, f'[[eval.suites]]\nname = "c"\ncorpus = "{corpus}"\nsplit = "eval"\n'
    )
    done = run_cli("run", str(exp), "--out", str(tmp_path / "run"))
    assert done.returncode == 2, done.stderr
    assert "no held-out split" in done.stderr and str(corpus) in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "run").exists()
