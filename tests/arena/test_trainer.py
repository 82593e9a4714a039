"""The trainer hand-off: batches out exactly once, policies in, bounded staleness, and crashes of either side."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from coevo.arena.errors import ArenaError, LogError
from coevo.arena.gamelog import (
    GameLog,
    GenerationRecord,
    GenerationRow,
    TaskRow,
    TrajectoryRow,
)
from coevo.run.driver.summary import summarize, summary_lines
from coevo.run.handoff.reference_trainer import JOURNAL, ReferenceTrainer, TrainerSettings, journal
from coevo.run.handoff.transports import (
    BATCH_SCHEMA,
    Announcement,
    FolderTransport,
    Handoff,
    QueueTransport,
    TrainerConfig,
    TrainerTimeout,
    batch_id,
    read_announcement,
    training_batch,
)

from tests.agents.fake_openai import ExplorerPolicy, FakeOpenAI
from tests.factories import IN_PROCESS_FLAGS, wait_for_file

KEY = "sk-fake-trainer-key"


# ---- the batch ------------------------------------------------------------------------------


def _trajectory(episode: str, task: str, reward: int, **extra: Any) -> TrajectoryRow:
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": f"do {task}"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    cells: dict[str, Any] = {
        "episode_id": episode,
        "task_id": task,
        "purpose": "train",
        "policy_version": "v0",
        "provider": "openai",
        "model": "m",
        "reward": reward,
        "failure": None,
        "messages": json.dumps(messages),
        "tools": "[]",
        "sampling": "{}",
        "turns": 1,
        "bad_steps": 0,
        "finish_reasons": ["tool_calls"],
        "input_tokens": 3,
        "output_tokens": 2,
        "turn_prompt_ids": [[1, 2, 3]],
        "turn_completion_ids": [[4, 5]],
        "turn_logprobs": [[-0.1, -0.2]],
        "token_ids": [1, 2, 3, 4, 5],
        "logprobs": [None, None, None, -0.1, -0.2],
        "loss_mask": [0, 0, 0, 1, 1],
        "layout": "interleaved",
        "note": None,
    }
    return TrajectoryRow(**{**cells, **extra})


def _task(task: str, level: int) -> TaskRow:
    return TaskRow(
        task_id=task,
        world_id="w",
        source="fresh",
        level=level,
        family=None,
        domain="retail",
        parent=None,
        operator=None,
        spec="{}",
    )


def _committed(
    run: Path, gen: int, trajectories: list[TrajectoryRow], tasks: list[TaskRow]
) -> GameLog:
    log = GameLog(str(run))
    record = GenerationRecord(gen, tasks=tasks, trajectories=trajectories)
    parts = log.write(record)
    log.commit(gen, parts, {name: len(rows) for name, rows in record.tables()}, {})
    return log


def test_a_batch_holds_each_played_training_rollout_with_its_group_relative_advantage(
    tmp_path,
) -> None:
    """Rewards, advantages (reward − the task group's mean), levels, the prompt/completion split and the tokens; failed and eval episodes left out."""
    rows = [
        _trajectory("e1", "t-a", 1),
        _trajectory("e2", "t-a", 0),
        _trajectory("e3", "t-a", 0),
        _trajectory("e4", "t-b", 1),
        _trajectory("e5", "t-b", 0, failure="the server was down"),
        _trajectory("e6", "t-b", 1, purpose="eval"),
        _trajectory("e7", "t-c", 0, token_ids=None, logprobs=None, loss_mask=None, layout=None),
    ]
    log = _committed(tmp_path, 0, rows, [_task("t-a", 2), _task("t-b", 3), _task("t-c", 1)])
    batch = training_batch(log, 0)
    assert batch.schema.equals(BATCH_SCHEMA, check_metadata=True)
    got = {r["episode_id"]: r for r in batch.to_pylist()}
    assert sorted(got) == ["e1", "e2", "e3", "e4", "e7"]
    assert got["e1"]["advantage"] == pytest.approx(1 - 1 / 3)
    assert got["e2"]["advantage"] == pytest.approx(-1 / 3)
    assert got["e4"]["advantage"] == 0.0 and got["e4"]["group_size"] == 1
    assert {r["batch_id"] for r in got.values()} == {"batch-000000"}
    assert (got["e1"]["level"], got["e4"]["level"], got["e7"]["level"]) == (2, 3, 1)
    prompt = json.loads(got["e1"]["prompt_messages"])
    completion = json.loads(got["e1"]["completion_messages"])
    assert [m["role"] for m in prompt] == ["system", "user"]
    assert [m["role"] for m in completion] == ["assistant", "tool"]
    assert got["e1"]["loss_mask"] == [0, 0, 0, 1, 1] and got["e1"]["token_ids"] == [1, 2, 3, 4, 5]
    assert got["e7"]["token_ids"] is None and got["e7"]["turn_completion_ids"] == [[4, 5]]
    with pytest.raises(LogError, match="not committed"):
        training_batch(log, 1)


def test_a_generation_with_no_playable_rollout_makes_an_empty_batch(tmp_path) -> None:
    """The trainer still gets the batch (and announces), so the run never waits for nothing."""
    log = _committed(tmp_path, 0, [_trajectory("e1", "t", 0, failure="down")], [_task("t", 1)])
    batch = training_batch(log, 0)
    assert batch.num_rows == 0 and batch.schema.equals(BATCH_SCHEMA)


def _generation(dynamic: bool) -> GenerationRow:
    return GenerationRow(
        proposed=0,
        accepted=0,
        rejected=0,
        mutations=0,
        trained_tasks=4,
        train_episodes=9,
        train_success=None,
        eval_success=None,
        frontier=None,
        accepted_level=None,
        trained_level=None,
        brier=None,
        version="v0",
        rejections="{}",
        failures=2,
        dynamic_sampling=dynamic,
    )


@pytest.mark.parametrize("dynamic", [False, True], ids=["every-group", "dynamic-sampling"])
def test_with_dynamic_sampling_the_batch_holds_the_informative_groups_staged_or_from_the_log(
    tmp_path, dynamic
) -> None:
    """A generation that ran dynamic sampling hands out the groups whose played rewards differ, the same table staged at its commit and rebuilt from its log; without it, every group."""
    rows = [
        _trajectory("e1", "t-a", 1),
        _trajectory("e2", "t-a", 0),
        _trajectory("e3", "t-b", 0),  # every episode failed the task: advantage 0
        _trajectory("e4", "t-b", 0),
        _trajectory("e5", "t-c", 1),
        _trajectory("e6", "t-c", 1, failure="the server was down"),
        _trajectory("e7", "t-c", 0),
        _trajectory("e8", "t-d", 1),  # one episode played: nothing to compare it with
        _trajectory("e9", "t-d", 0, failure="the server was down"),
    ]
    record = GenerationRecord(
        0,
        tasks=[_task(t, 1) for t in ("t-a", "t-b", "t-c", "t-d")],
        trajectories=rows,
        generations=[_generation(dynamic)],
    )
    log = GameLog(str(tmp_path))
    written: dict[str, pa.Table] = {}
    parts = log.write(record, written)
    handoff, _, _ = _handoff(tmp_path, 0)
    handoff.stage(0, written)
    log.commit(0, parts, {name: len(items) for name, items in record.tables()}, {})
    assert handoff.staged is not None
    staged = handoff.staged[1]
    assert staged.equals(training_batch(log, 0))
    kept = sorted(staged.column("episode_id").to_pylist())
    every = ["e1", "e2", "e3", "e4", "e5", "e7", "e8"]
    assert kept == (["e1", "e2", "e5", "e7"] if dynamic else every)
    assert all(a != 0 for a in staged.column("advantage").to_pylist()) or not dynamic


# ---- the folder transport -------------------------------------------------------------------


def test_the_folder_hands_a_batch_out_once_and_never_rewrites_it(tmp_path) -> None:
    """A second offer of the same id is refused and leaves the file as it was; a temporary file is no batch."""
    folder = FolderTransport(str(tmp_path / "t"))
    folder.claim("run-a")
    table = pa.table({f.name: pa.array([], f.type) for f in BATCH_SCHEMA}, schema=BATCH_SCHEMA)
    assert folder.offer("batch-000000", table) is True
    written = (tmp_path / "t" / "batches" / "batch-000000.parquet").read_bytes()
    assert folder.offer("batch-000000", table.slice(0, 0)) is False
    assert (tmp_path / "t" / "batches" / "batch-000000.parquet").read_bytes() == written
    (tmp_path / "t" / "batches" / "batch-000001.parquet.partial").write_bytes(b"half")
    assert folder.offered() == ["batch-000000"]
    assert folder.read("batch-000000").num_rows == 0
    (tmp_path / "t" / "batches" / "batch-000002.parquet").write_bytes(b"not parquet")
    with pytest.raises(ArenaError, match="not a readable Parquet batch"):
        folder.read("batch-000002")


def test_a_folder_of_another_run_is_refused(tmp_path) -> None:
    """Two runs never share one trainer folder (their batch ids would collide)."""
    FolderTransport(str(tmp_path)).claim("run-a")
    FolderTransport(str(tmp_path)).claim("run-a")
    with pytest.raises(ArenaError, match=r"serves another run .'run-a'.*trainer\.uri"):
        FolderTransport(str(tmp_path)).claim("run-b")


def test_an_announcement_keeps_its_finite_metrics_and_leaves_out_the_rest() -> None:
    """A NaN loss, an infinite norm, a boolean, a name with spaces: left out and counted; the numbers kept, never the run's failure."""
    said = read_announcement(
        {
            "batch_id": "batch-000000",
            "version": "v1",
            "metrics": {
                "loss": float("nan"),
                "grad_norm": float("inf"),
                "taken": True,
                "a name": 1.0,
                "entropy": 0.4,
                "steps": 2,
            },
        },
        "a test",
    )
    assert said.metrics == {"entropy": 0.4, "steps": 2.0} and said.dropped == 4
    assert "dropped" not in said.model_dump_json(exclude_none=True)
    with pytest.raises(ArenaError, match="metrics"):
        read_announcement({"batch_id": "batch-000000", "version": "v1", "metrics": [1]}, "a test")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not a policy announcement"),
        ('{"batch_id": "batch-000000"}', "version: Field required"),
        ('{"batch_id": "b0", "version": "v"}', "'b0' is not a batch id"),
        ('{"batch_id": "batch-000000", "version": "v", "lora_paht": "/x"}', "lora_paht: Extra"),
        ('{"batch_id": "batch-000001", "version": "v"}', "is named after its batch"),
    ],
)
def test_a_malformed_announcement_is_named_with_what_is_wrong(tmp_path, content, problem) -> None:
    """The file, the problem and the format's page; never executed, never guessed at."""
    (tmp_path / "versions").mkdir()
    written = tmp_path / "versions" / "batch-000000.json"
    written.write_text(content)
    if "named after" not in problem:  # a fresh file that does not parse is one being written
        assert FolderTransport(str(tmp_path)).announcements() == {}
    settled = time.time() - 60  # not one being written in place: an error
    os.utime(written, (settled, settled))
    with pytest.raises(ArenaError, match=problem) as caught:
        FolderTransport(str(tmp_path)).announcements()
    assert "batch-000000.json" in str(caught.value)


def test_an_announcement_nested_too_deep_is_named_not_a_recursion_error(tmp_path) -> None:
    """An announcement nested 200,000 deep (JSON arrays, or a batch_id nested in objects) is coevo's error naming the file, never a RecursionError."""
    (tmp_path / "versions").mkdir()
    written = tmp_path / "versions" / "batch-000000.json"
    settled = time.time() - 60
    for content in (
        "[" * 200_000 + "]" * 200_000,
        '{"batch_id": ' + '{"a": ' * 200_000 + "1" + "}" * 200_000 + "}",
    ):
        written.write_text(content)
        os.utime(written, (settled, settled))
        with pytest.raises(ArenaError, match="nested too deep") as caught:
            FolderTransport(str(tmp_path)).announcements()
        assert "batch-000000.json" in str(caught.value)


@pytest.mark.parametrize(
    "where",
    ["versions/batch-000000.json", "batches/batch-000000.parquet", "reference/journal.jsonl"],
)
def test_a_trainer_folder_file_that_is_a_link_or_a_fifo_is_refused_unread(tmp_path, where) -> None:
    """An announcement, a batch or the trainer's journal that is a link to /dev/zero, or a FIFO, is refused at once naming it (never read whole, never waited on)."""
    folder = FolderTransport(str(tmp_path))
    path = tmp_path / where
    path.parent.mkdir()

    def look() -> Any:
        if where.startswith("reference"):
            return journal(folder)
        return folder.announcements() if "versions" in where else folder.read("batch-000000")

    path.symlink_to("/dev/zero")
    with pytest.raises(ArenaError, match=f"{path} is a symbolic link"):
        look()
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(ArenaError, match=f"{path} is a FIFO, not a regular file"):
        look()


def test_a_batch_that_decompresses_past_its_limit_is_refused_by_its_footer(
    tmp_path, monkeypatch
) -> None:
    """A batch file of a few KB whose column decompresses to megabytes is refused before it is decompressed, naming it."""
    from coevo.arena import bounded

    (tmp_path / "batches").mkdir()
    table = pa.table({"messages": [c * (2 << 20) for c in "ABCD"]})
    pq.write_table(table, tmp_path / "batches" / "batch-000000.parquet", compression="zstd")
    monkeypatch.setattr(bounded, "MAX_PARQUET_UNCOMPRESSED_BYTES", 1 << 20)
    with pytest.raises(
        ArenaError, match=r"batch-000000.parquet holds 8\.0 MiB .* once decompressed"
    ):
        FolderTransport(str(tmp_path)).read("batch-000000")


# ---- waiting for policies -------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _handoff(
    tmp_path: Path, k: int, timeout: float = 10.0
) -> tuple[Handoff, FolderTransport, _Clock]:
    clock = _Clock()
    folder = FolderTransport(str(tmp_path / "trainer"))
    handoff = Handoff(
        TrainerConfig(timeout=timeout, poll=1.0),
        GameLog(str(tmp_path)),
        k,
        transport=folder,
        clock=clock,
        sleep=clock.sleep,
    )
    return handoff, folder, clock


def _say(folder: FolderTransport, gen: int, **extra: Any) -> Announcement:
    announcement = Announcement(batch_id=batch_id(gen), version=f"v{gen + 1}", **extra)
    folder.announce(announcement)
    return announcement


def test_strict_order_waits_for_the_policy_trained_on_the_previous_batch(tmp_path) -> None:
    """k = 0: generation n plays only the policy trained through batch n − 1; the newest such."""
    handoff, folder, _ = _handoff(tmp_path, 0)
    assert handoff.policy_for(0) is None  # generation 0: the served model
    with pytest.raises(TrainerTimeout):
        handoff.policy_for(1)
    first = _say(folder, 0)
    assert handoff.policy_for(1) == first
    handoff.adopted(first, 1)
    assert handoff.policy_for(1) is None  # adopted already: nothing new
    with pytest.raises(TrainerTimeout):
        handoff.policy_for(2)


def test_staleness_k_lets_generation_n_play_while_batch_n_minus_1_trains_never_more(
    tmp_path,
) -> None:
    """k = 2: generations 1 and 2 play the base model; generation 3 needs batch 0's policy; the newest is taken."""
    handoff, folder, _ = _handoff(tmp_path, 2)
    assert handoff.policy_for(1) is None and handoff.policy_for(2) is None
    with pytest.raises(TrainerTimeout):
        handoff.policy_for(3)
    _say(folder, 0)
    newest = _say(folder, 1)
    assert handoff.policy_for(3) == newest  # trained through batch 1: fresher than needed
    handoff.adopted(newest, 3)
    assert handoff.policy_for(4) is None  # batch 1 ≥ 4 − 1 − 2: no wait, nothing newer
    with pytest.raises(TrainerTimeout):
        handoff.policy_for(5)


def test_the_timeout_message_says_what_is_committed_and_how_to_resume(tmp_path) -> None:
    """The run stops after trainer.timeout seconds of waiting, resumable."""
    handoff, _, clock = _handoff(tmp_path, 0, timeout=30.0)
    with pytest.raises(TrainerTimeout) as caught:
        handoff.policy_for(4)
    message = str(caught.value)
    assert clock.now == pytest.approx(30.0)
    for part in ("batch-000003", "30 s (trainer.timeout)", "0–3 are committed", "coevo resume"):
        assert part in message


def test_an_announcement_for_a_batch_not_handed_out_is_an_error(tmp_path) -> None:
    """A trainer that announces ahead of the batches has a bug; the run says so instead of guessing."""
    handoff, folder, _ = _handoff(tmp_path, 0)
    _say(folder, 3)
    with pytest.raises(ArenaError, match="batch-000003, a batch not handed out yet"):
        handoff.policy_for(2)


def test_a_batch_committed_but_not_handed_out_goes_out_when_the_run_resumes(tmp_path) -> None:
    """A driver killed between a commit and its hand-out: start() hands out exactly the missing batches."""
    for gen in range(3):
        _committed(tmp_path, gen, [_trajectory(f"e{gen}", "t", 1)], [_task("t", 1)])
    handoff, folder, _ = _handoff(tmp_path, 0)
    folder.offer(batch_id(0), training_batch(GameLog(str(tmp_path)), 0))
    assert handoff.start(3, None) == ["batch-000001", "batch-000002"]
    assert handoff.start(3, None) == []
    assert folder.offered() == ["batch-000000", "batch-000001", "batch-000002"]


# ---- the reference trainer ------------------------------------------------------------------


def _run_dir_with_batches(tmp_path: Path, gens: int, generations: int) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "experiment.json").write_text(
        json.dumps({"run": {"generations": generations}, "trainer": {}})
    )
    folder = FolderTransport(str(run / "trainer"))
    folder.claim(str(run))
    for gen in range(gens):
        log = _committed(run, gen, [_trajectory(f"e{gen}", "t", gen % 2)], [_task("t", 1)])
        folder.offer(batch_id(gen), training_batch(log, gen))
    return run


def test_the_reference_trainer_trains_each_batch_once_and_announces_a_lora_version(
    tmp_path,
) -> None:
    """One journal entry and one announcement per batch; each version an adapter folder; it stops when the run is finished."""
    run = _run_dir_with_batches(tmp_path, 3, 3)
    lines: list[str] = []
    trainer = ReferenceTrainer(TrainerSettings(str(run), poll=0.01), say=lines.append)
    assert trainer.serve() == 3
    folder = FolderTransport(str(run / "trainer"))
    entries = journal(folder)
    assert [e["batch_id"] for e in entries] == ["batch-000000", "batch-000001", "batch-000002"]
    said = folder.announcements()
    versions = [said[b].version for b in sorted(said)]
    # named after the run, so that two runs against one server never share a name
    assert re.fullmatch(r"reference-[0-9a-f]{6}-v1", versions[0])
    assert versions == [versions[0][:-1] + str(n) for n in (1, 2, 3)]
    assert all(Path(a.lora_path or "").is_dir() for a in said.values())
    assert "the run is finished: 3 batches trained" in lines[-1]
    # started again: nothing left to train
    assert ReferenceTrainer(TrainerSettings(str(run), poll=0.01), say=lines.append).serve() == 0
    assert len(journal(folder)) == 3


def test_a_trainer_killed_between_its_step_and_its_announcement_announces_without_training_again(
    tmp_path,
) -> None:
    """The journal is the step's checkpoint: the batch is announced, not trained twice."""
    run = _run_dir_with_batches(tmp_path, 2, 2)
    folder = FolderTransport(str(run / "trainer"))
    entry = {"batch_id": "batch-000000", "version": "reference-v1", "rows": 1, "step": 1}
    folder.dir.write_bytes((json.dumps(entry) + "\n").encode(), *JOURNAL)
    trained = ReferenceTrainer(
        TrainerSettings(str(run), poll=0.01, announce="model"), say=lambda line: None
    ).serve()
    assert trained == 1  # batch 1 only
    assert [e["batch_id"] for e in journal(folder)] == ["batch-000000", "batch-000001"]
    assert sorted(folder.announcements()) == ["batch-000000", "batch-000001"]
    assert folder.announcements()["batch-000000"].lora_path is None


def test_the_reference_trainer_given_a_file_refuses_at_once(tmp_path, capsys) -> None:
    """`coevo reference-trainer FILE`: exit 2 at once, naming the file (no wait for a run directory at a file's path)."""
    from coevo.run.cli import main

    file = tmp_path / "notes.txt"
    file.write_text("not a run\n")
    assert main(["reference-trainer", str(file), "--wait", "30"]) == 2
    err = capsys.readouterr().err
    assert f"{file} is a file, not a run directory" in err and "Traceback" not in err


def test_the_reference_trainer_waits_for_a_run_that_does_not_exist_yet(tmp_path) -> None:
    """Started first, it waits; with --wait it gives up with a clear message."""
    lines: list[str] = []
    trainer = ReferenceTrainer(
        TrainerSettings(str(tmp_path / "later"), poll=0.01, wait=0.05), say=lines.append
    )
    with pytest.raises(ArenaError, match=r"waited 0\.05 s for the run directory"):
        trainer.serve()
    assert lines == [f"waiting for the run directory {tmp_path / 'later'}"]


# ---- runs through the hand-off --------------------------------------------------------------

TRAINER_RUN = [
    "--set",
    "solver.config.max_steps=3",
    "--set",
    "curriculum.tasks_per_gen=3",
    "--set",
    "eval.per_level=1",
    "--set",
    "trainer.poll=0.05",
    "--set",
    "trainer.timeout=120",
]
IN_PROCESS_RUN = [*TRAINER_RUN, *IN_PROCESS_FLAGS]
"""The same, its roles in this process (the folder transport needs no Ray)."""


def _reference_trainer(
    run_dir: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """``coevo reference-trainer RUN_DIR`` as a process of its own."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coevo.run.cli",
            "reference-trainer",
            str(run_dir),
            "--poll",
            "0.05",
            "--prefix",
            "reference",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def _version_trained_through(run_dir: Path) -> dict[str, int]:
    """Each announced version → the generation of the batch it was trained through (-1: the base)."""
    said = FolderTransport(str(run_dir / "trainer")).announcements()
    return {a.version: a.trained_through for a in said.values()}


def _assert_each_batch_trained_once_and_equal_to_the_log(run_dir: Path, generations: int) -> None:
    folder = FolderTransport(str(run_dir / "trainer"))
    trained = [e["batch_id"] for e in journal(folder)]
    assert trained == [batch_id(g) for g in range(generations)]  # each once, in order
    log = GameLog(str(run_dir))
    for gen in range(generations):
        handed = folder.read(batch_id(gen))
        assert handed.equals(training_batch(log, gen))  # what went out is what the log holds
        entry = journal(folder)[gen]
        assert entry["rows"] == handed.num_rows
        # what the trainer read, not only the file now there, is what the log holds
        logged = training_batch(log, gen).column("episode_id").to_pylist()
        assert entry["digest"] == hashlib.sha256(json.dumps(logged).encode()).hexdigest()


@pytest.mark.slow
def test_three_generations_through_the_hand_off_advance_the_policy(monkeypatch, tmp_path) -> None:
    """experiments/openai-trainer.toml with the reference trainer as a process: batches out, LoRA versions loaded and played, in strict order."""
    from coevo.run.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    run_dir = tmp_path / "run"
    with FakeOpenAI(ExplorerPolicy(2), models=["base-model"], api_key=KEY) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        trainer = _reference_trainer(run_dir)  # before the run exists: it waits
        try:
            assert trainer.stdout is not None
            waiting = trainer.stdout.readline()
            code = main(["run", "openai-trainer", "--out", str(run_dir), *IN_PROCESS_RUN])
            output, _ = trainer.communicate(timeout=60)
            output = waiting + output
        finally:
            trainer.kill()
        loaded = [body["lora_name"] for action, body in server.adapter_requests]
        models = [body["model"] for body in server.requests]
    assert code == 0 and trainer.returncode == 0, output
    assert "waiting for the run directory" in output and "the run is finished: 3 batches" in output
    assert loaded == ["reference-v1", "reference-v2"]  # the third trains after the last rollouts
    assert {"base-model", "reference-v1", "reference-v2"} <= set(models)
    log = GameLog(str(run_dir))
    policies = log.read("policies").to_pylist()
    assert [(p["gen"], p["version"], p["staleness"]) for p in policies] == [
        (0, "base-model", 0),
        (1, "reference-v1", 0),
        (2, "reference-v2", 0),
    ]
    trajectories = log.read("trajectories", columns=["gen", "policy_version", "model"]).to_pylist()
    by_gen = {(t["gen"], t["policy_version"], t["model"]) for t in trajectories}
    assert by_gen == {
        (0, "base-model", "base-model"),
        (1, "reference-v1", "reference-v1"),
        (2, "reference-v2", "reference-v2"),
    }
    # what the trainer announced of its steps: in the policies table, and to the trackers
    announced = [json.loads(p["trainer_metrics"] or "null") for p in policies]
    batches = [FolderTransport(str(run_dir / "trainer")).read(batch_id(g)) for g in range(2)]
    assert announced[0] is None
    assert [a["rows"] for a in announced[1:]] == [float(b.num_rows) for b in batches]
    from coevo.run.tracking import generation_metrics

    assert generation_metrics(log, 2)["trainer/rows"] == float(batches[1].num_rows)
    _assert_each_batch_trained_once_and_equal_to_the_log(run_dir, 3)
    summary = summarize(str(run_dir))
    assert summary["policy_versions"] == ["base-model", "reference-v1", "reference-v2"]
    assert any(
        line.startswith("trainer: 3 batches handed out; 3 policy versions played")
        for line in summary_lines(summary)
    )
    from coevo.arena.analysis import analyze, load_run

    policies = analyze(load_run(str(run_dir)), irt=False)["policies"]
    assert [(p["version"], p["first_gen"]) for p in policies] == [
        ("base-model", 0),
        ("reference-v1", 1),
        ("reference-v2", 2),
    ]
    # the explorer calls a tool the world has, then submit: every turn is carried out
    assert all(p["carried_out"] == 1.0 and p["train_rollouts"] > 0 for p in policies)


@pytest.mark.slow
def test_staleness_never_exceeds_k_with_a_trainer_a_batch_behind(monkeypatch, tmp_path) -> None:
    """k = 1 and a trainer that announces batch n only once batch n + 1 is out: from generation 2 on, every generation plays the policy trained through n − 2, never older; every rollout is played."""
    from coevo.run.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    run_dir = tmp_path / "run"
    with FakeOpenAI(ExplorerPolicy(2), models=["base-model"], api_key=KEY) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        trainer = _reference_trainer(run_dir, "--lag", "1")
        try:
            sets = ["--set", "run.generations=5", "--set", "run.max_staleness=1"]
            code = main(["run", "openai-trainer", "--out", str(run_dir), *IN_PROCESS_RUN, *sets])
            output, _ = trainer.communicate(timeout=60)
        finally:
            trainer.kill()
        asked = server.adapter_requests
        loaded = [body["lora_name"] for action, body in asked if action == "load_lora_adapter"]
        unloaded = [body["lora_name"] for action, body in asked if action == "unload_lora_adapter"]
        held = set(server.adapters)
    assert code == 0, output
    assert loaded == ["reference-v1", "reference-v2", "reference-v3"]
    # generation 4 plays v3 (trained through batch 2): generation 3 may still play v2, none v1
    assert unloaded == ["reference-v1"] and held == {"reference-v2", "reference-v3"}
    last = json.loads((run_dir / "checkpoints" / "gen=4" / "state.json").read_text())
    # what a resumed run may unload
    assert last["adapters"] == {"reference-v2": 1, "reference-v3": 2}
    through = {"base-model": -1, **_version_trained_through(run_dir)}
    log = GameLog(str(run_dir))
    played = log.read("trajectories", columns=["gen", "policy_version", "failure"]).to_pylist()
    assert played and all(t["failure"] is None for t in played)
    staleness: dict[int, set[int]] = {}
    for t in played:
        staleness.setdefault(t["gen"], set()).add(t["gen"] - 1 - through[t["policy_version"]])
    assert staleness == {0: {0}, 1: {1}, 2: {1}, 3: {1}, 4: {1}}  # never above k, and k is used
    policies = log.read("policies").to_pylist()
    assert [(p["gen"], p["staleness"]) for p in policies] == [
        (gen, *values) for gen, values in sorted(staleness.items())
    ]
    assert all(p["batch_rows"] > 0 for p in policies)
    _assert_each_batch_trained_once_and_equal_to_the_log(run_dir, 5)


@pytest.mark.slow
def test_a_trainer_killed_mid_run_and_started_again_trains_every_batch_once(
    monkeypatch, tmp_path
) -> None:
    """kill -9 of the reference trainer after its first announcement; a new one picks up; the run finishes."""
    from coevo.run.experiment import load_experiment
    from coevo.run.loop import run_experiment

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    run_dir = tmp_path / "run"
    with FakeOpenAI(ExplorerPolicy(2), models=["base-model"], api_key=KEY) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        first = _reference_trainer(run_dir, "--delay", "0.5")
        killed: list[int] = []

        def kill_then_restart(report: Any) -> None:
            if report.gen == 1 and not killed:
                wait_for_file(run_dir / "trainer" / "versions" / "batch-000000.json", first, 60)
                first.send_signal(signal.SIGKILL)
                first.wait()
                killed.append(first.pid)
                restarted.append(_reference_trainer(run_dir))

        restarted: list[subprocess.Popen] = []
        experiment = load_experiment("openai-trainer", [*IN_PROCESS_RUN[1::2], "run.generations=4"])
        try:
            summary = run_experiment(experiment, str(run_dir), on_generation=kill_then_restart)
            output, _ = restarted[0].communicate(timeout=60)
        finally:
            first.kill()
            for process in restarted:
                process.kill()
    assert killed and summary.generations == 4, output
    assert restarted[0].returncode == 0
    _assert_each_batch_trained_once_and_equal_to_the_log(run_dir, 4)


@pytest.mark.slow
def test_a_driver_killed_mid_run_resumes_and_every_batch_is_handed_out_once(tmp_path) -> None:
    """kill -9 of `coevo run` after batch 1 went out, then `coevo resume`: the trainer, running throughout, trains each batch once; each batch equals the log."""
    run_dir = tmp_path / "run"
    with FakeOpenAI(ExplorerPolicy(2), models=["base-model"], api_key=KEY) as server:
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        env.update(OPENAI_BASE_URL=server.url, OPENAI_API_KEY=KEY)
        trainer = _reference_trainer(run_dir, env=env)
        sets = [*IN_PROCESS_RUN, "--set", "run.generations=4"]
        driver = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "coevo.run.cli",
                "run",
                "openai-trainer",
                "--out",
                str(run_dir),
                *sets,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_file(run_dir / "trainer" / "batches" / "batch-000001.parquet", driver)
            driver.send_signal(signal.SIGKILL)
            driver.wait()
            assert GameLog(str(run_dir)).last_generation() < 3
            resumed = subprocess.run(
                # spelt otherwise than `coevo run` was given it: the same run
                [sys.executable, "-m", "coevo.run.cli", "resume", f"{run_dir}/"],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            output, _ = trainer.communicate(timeout=60)
        finally:
            driver.kill()
            trainer.kill()
    assert resumed.returncode == 0, resumed.stderr
    assert trainer.returncode == 0, output
    assert GameLog(str(run_dir)).last_generation() == 3
    _assert_each_batch_trained_once_and_equal_to_the_log(run_dir, 4)


# ---- the Ray queue --------------------------------------------------------------------------


def _queue_trainer(name: str, seen_before: list[str]) -> list[str]:
    """A trainer in the cluster: takes every queued batch, drops ids it trained on already, announces."""
    from coevo.run.handoff.transports import QueueTransport

    queue = QueueTransport(name, create=False)
    trained = list(seen_before)
    while (item := queue.take()) is not None:
        batch, table = item
        assert table.schema.equals(BATCH_SCHEMA)
        if batch not in trained:
            trained.append(batch)
        queue.announce(Announcement(batch_id=batch, version=f"q-v{len(trained)}"))
    return trained


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_the_ray_queue_delivers_at_least_once_and_a_trainer_keeps_batch_ids_idempotent(
    tmp_path,
) -> None:
    """Batches go to a named actor; a trainer task in the cluster announces; a queue lost with its driver is offered everything again."""
    import ray

    for gen in range(2):
        _committed(tmp_path, gen, [_trajectory(f"e{gen}", "t", gen)], [_task("t", 1)])
    log = GameLog(str(tmp_path))
    config = TrainerConfig(transport="ray-queue", queue="coevo-test-queue", poll=0.05, timeout=30)
    handoff = Handoff(config, log, 0)
    assert handoff.start(2, None) == ["batch-000000", "batch-000001"]
    assert handoff.hand_out(1) is False  # queued already
    trainer = ray.remote(_queue_trainer)
    trained = ray.get(trainer.remote("coevo-test-queue", []))
    assert trained == ["batch-000000", "batch-000001"]
    assert handoff.policy_for(2).version == "q-v2"
    # the driver dies (its queue with it); resume offers a new queue every batch after the
    # policy its checkpoint played
    ray.kill(handoff.transport.actor)
    again = Handoff(config, log, 0)
    played = Announcement(batch_id="batch-000000", version="q-v1")
    assert again.start(2, played) == ["batch-000001"]
    queue = QueueTransport("coevo-test-queue", create=False)
    first = queue.take()
    assert first is not None and first[0] == "batch-000001"
    again_taken = queue.take()  # a trainer killed after taking it gets it again
    assert again_taken is not None and again_taken[0] == "batch-000001"
    assert ray.get(trainer.remote("coevo-test-queue", trained)) == trained  # no step taken twice
    assert queue.take() is None and "batch-000001" in queue.announcements()
    with pytest.raises(ArenaError, match="serves another run"):
        Handoff(config, GameLog(str(tmp_path / "other")), 0).start(0, None)
    ray.kill(again.transport.actor)


def test_batches_of_generations_the_log_no_longer_holds_stop_the_run(tmp_path) -> None:
    """After `coevo doctor --repair` truncated handed-out generations, resume says so instead of handing out different rollouts under old ids."""
    _committed(tmp_path, 0, [_trajectory("e0", "t", 1)], [_task("t", 1)])
    handoff, folder, _ = _handoff(tmp_path, 0)
    folder.offer(batch_id(0), training_batch(GameLog(str(tmp_path)), 0))
    folder.offer(batch_id(1), training_batch(GameLog(str(tmp_path)), 0))  # a truncated one
    with pytest.raises(ArenaError, match=r"batch-000001 \(1 batches in all\).*1 committed"):
        handoff.start(1, None)


def test_the_folder_transport_works_on_an_object_store_uri() -> None:
    """A pyarrow filesystem URI (here mock://, as s3:// or gs:// would be): batches out whole, announcements back."""
    folder = FolderTransport("mock:///bucket/runs/a/trainer")
    folder.claim("mock:///bucket/runs/a")
    empty = BATCH_SCHEMA.empty_table()
    assert folder.offer("batch-000000", empty) and not folder.offer("batch-000000", empty)
    assert folder.offered() == ["batch-000000"] and folder.read("batch-000000").num_rows == 0
    folder.announce(Announcement(batch_id="batch-000000", version="v1", lora_path="s3://a/v1"))
    assert folder.announcements()["batch-000000"].lora_path == "s3://a/v1"


@pytest.mark.slow
def test_a_trainer_that_never_announces_ends_the_run_resumably_with_exit_status_4(
    monkeypatch, tmp_path, capsys
) -> None:
    """trainer.timeout runs out: exit 4, generation 0 committed, the message says how to resume; the reference trainer then lets `coevo resume` finish."""
    from coevo.run.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    run_dir = tmp_path / "run"
    with FakeOpenAI(ExplorerPolicy(2), models=["base-model"], api_key=KEY) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        sets = [*IN_PROCESS_RUN, "--set", "trainer.timeout=1.5"]
        code = main(["run", "openai-trainer", "--out", str(run_dir), *sets])
        err = capsys.readouterr().err
        assert code == 4
        assert GameLog(str(run_dir)).last_generation() == 0
        assert "announced no policy trained through batch-000000" in err
        assert f"coevo resume {run_dir}" in err
        events = [json.loads(line)["event"] for line in (run_dir / "events.jsonl").open()]
        assert "trainer_waiting" in events and "trainer_timeout" in events
        trainer = _reference_trainer(run_dir)
        try:
            assert main(["resume", str(run_dir)]) == 0
            output, _ = trainer.communicate(timeout=60)
        finally:
            trainer.kill()
    _assert_each_batch_trained_once_and_equal_to_the_log(run_dir, 3)
    del output


def _queue_consumer(name: str, stop: Any) -> None:
    """A trainer in the driver's cluster, on a thread: trains on each queued batch once, announces a model name."""
    import ray

    queue: QueueTransport | None = None
    trained: list[str] = []
    while not stop.is_set():
        if queue is None:
            try:
                queue = QueueTransport(name, create=False)
            except ValueError:  # the run has not made its queue yet
                time.sleep(0.05)
                continue
        try:
            item = queue.take()
        except ray.exceptions.RayActorError:
            return  # the run ended, and its queue with it
        if item is None:
            time.sleep(0.05)
            continue
        batch, _ = item
        if batch not in trained:
            trained.append(batch)
        queue.announce(Announcement(batch_id=batch, version="base-model", model="base-model"))


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_a_run_hands_its_batches_to_a_trainer_in_the_cluster_over_the_ray_queue(
    monkeypatch, tmp_path
) -> None:
    """transport = "ray-queue": every generation waits for the queue's announcement and logs the policy it names."""
    import threading

    from coevo.run.experiment import load_experiment
    from coevo.run.loop import run_experiment

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    name = f"coevo-queue-{os.getpid()}"
    stop = threading.Event()
    consumer = threading.Thread(target=_queue_consumer, args=(name, stop), daemon=True)
    with FakeOpenAI(ExplorerPolicy(2), models=["base-model"], api_key=KEY) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        experiment = load_experiment(
            "openai-trainer",
            [*TRAINER_RUN[1::2], "trainer.transport=ray-queue", f"trainer.queue={name}"],
        )
        consumer.start()
        try:
            summary = run_experiment(experiment, str(tmp_path / "run"))
        finally:
            stop.set()
            consumer.join(timeout=10)
    assert summary.generations == 3
    policies = GameLog(str(tmp_path / "run")).read("policies").to_pylist()
    assert [p["announced_for"] for p in policies] == [None, "batch-000000", "batch-000001"]
    assert not (tmp_path / "run" / "trainer").exists()  # nothing went to a folder


@pytest.mark.slow
def test_a_driver_stopped_between_its_last_commit_and_its_hand_out_hands_it_out_on_resume(
    monkeypatch, tmp_path
) -> None:
    """The window no kill can aim at: the last generation committed, its batch not handed out. `coevo resume` of the finished run hands it out (without Ray), and the trainer trains each batch once (an earlier generation's case: test_a_batch_committed_but_not_handed_out_goes_out_when_the_run_resumes)."""
    stopped_after = 2
    from coevo.run.cli import main
    from coevo.run.handoff.transports import Handoff

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    run_dir = tmp_path / "run"
    real = Handoff.hand_out

    def stop_before_handing_out(self: Handoff, gen: int) -> bool:
        if gen == stopped_after:
            raise KeyboardInterrupt  # as the driver dying right after the commit
        return real(self, gen)

    with FakeOpenAI(ExplorerPolicy(2), models=["base-model"], api_key=KEY) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        trainer = _reference_trainer(run_dir)
        try:
            with monkeypatch.context() as patched:
                patched.setattr(Handoff, "hand_out", stop_before_handing_out)
                code = main(["run", "openai-trainer", "--out", str(run_dir), *IN_PROCESS_RUN])
            assert code == 130
            assert GameLog(str(run_dir)).last_generation() == stopped_after
            assert not (
                run_dir / "trainer" / "batches" / f"batch-00000{stopped_after}.parquet"
            ).exists()
            assert main(["resume", str(run_dir)]) == 0
            output, _ = trainer.communicate(timeout=60)
        finally:
            trainer.kill()
    assert trainer.returncode == 0, output
    _assert_each_batch_trained_once_and_equal_to_the_log(run_dir, 3)


def test_the_protocol_page_holds_the_batch_columns_of_the_schema() -> None:
    """docs/trainer.md contains batch_markdown() verbatim, and every column carries its description in the file."""
    from coevo.run.handoff.transports import batch_markdown

    page = (Path(__file__).resolve().parents[2] / "docs" / "trainer.md").read_text()
    assert batch_markdown() in page, (
        "paste coevo.run.handoff.transports.batch_markdown() into docs/trainer.md"
    )
    assert all(f.metadata and f.metadata.get(b"description") for f in BATCH_SCHEMA)
