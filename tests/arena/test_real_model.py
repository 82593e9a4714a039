"""The real training loop: a real vLLM (CPU) serving SmolLM2-135M-Instruct, coevo run, and coevo train updating a LoRA adapter.

The server, its environment and the model are made once and cached
(:mod:`tests.real_model`); one loop of ``experiments/tiny-real.toml`` (three
generations, a trainer killed with ``kill -9`` between two batches and
started again) is shared by the tests that read it. Nothing here reaches
beyond loopback.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from coevo.arena.gamelog import GameLog
from coevo.run.trainer import BATCH_SCHEMA, FolderTransport

from tests import real_model
from tests.factories import IN_PROCESS_FLAGS

pytestmark = [pytest.mark.slow, pytest.mark.real_model]

GENERATIONS = 3
TOLERANCE_MEAN = 0.1
"""Mean |recorded − recomputed| log-prob per version, in nats (measured: 0.03–0.04; bf16 serving, fp32 forward)."""
TOLERANCE_MAX = 1.5
"""The largest gap of one token (measured: up to 0.55)."""


def _wait_for(path: Path, process: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert process.poll() is None, f"the trainer exited ({process.returncode}) before {path}"
        assert time.monotonic() < deadline, f"{path} did not appear within {seconds:g} s"
        time.sleep(0.2)


def _trainer(run: Path, log: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            str(real_model.python()),
            "-m",
            "coevo.run.cli",
            "train",
            str(run),
            "--model",
            str(real_model.model()),
            "--dtype",
            "bfloat16",
            "--poll",
            "0.2",
            "--wait",
            "900",
            *extra,
        ],
        stdout=log.open("a"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **real_model.OFFLINE},
    )


@pytest.fixture(scope="module")
def loop(vllm_server, tmp_path_factory) -> dict:
    """experiments/tiny-real.toml for three generations against the server, its trainer killed -9 after batch 0 and restarted."""
    where = tmp_path_factory.mktemp("tiny-real")
    run = where / "run"
    trainer_log = where / "trainer.log"
    command = [
        sys.executable,
        "-m",
        "coevo.run.cli",
        "run",
        "tiny-real",
        "--out",
        str(run),
        "--set",
        f"run.generations={GENERATIONS}",
        "--set",
        "curriculum.tasks_per_gen=2",
        "--set",
        "run.rollouts=4",
        "--set",
        "eval.per_level=1",
        *IN_PROCESS_FLAGS,  # the two cores go to vLLM and the trainer, not to Ray's workers
    ]
    env = {**os.environ, "OPENAI_BASE_URL": vllm_server.url, "OPENAI_API_KEY": "x"}
    with (where / "run.log").open("w") as out:
        played = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=where)
        first = _trainer(run, trainer_log)
        _wait_for(run / "trainer" / "versions" / "batch-000000.json", first, 900)
        first.send_signal(signal.SIGKILL)  # between batches: batch 0 announced, batch 1 not yet out
        first.wait(timeout=30)
        second = _trainer(run, trainer_log)
        try:
            assert played.wait(timeout=1800) == 0, (where / "run.log").read_text()[-3000:]
            assert second.wait(timeout=600) == 0, trainer_log.read_text()[-3000:]
        finally:
            for process in (played, second):
                if process.poll() is None:
                    process.kill()
    return {
        "run": run,
        "trainer_log": trainer_log.read_text(),
        "run_log": (where / "run.log").read_text(),
    }


def test_a_real_server_s_template_is_probed_and_the_solver_goes_token_in_token_out(
    vllm_server,
) -> None:
    """SmolLM2's template has no tools section: auto picks the text protocol, and vLLM's /tokenize makes token prompts possible."""
    from coevo.agents.llm.solver import LLMSolver

    os.environ.setdefault("OPENAI_API_KEY", "x")
    solver = LLMSolver(base_url=vllm_server.url)
    template = solver.client.template
    assert template is not None and template.renders and not template.describes_tools
    assert (solver.client.protocol, solver.client.token_prompts) == ("text", True)


def test_the_run_plays_each_version_the_trainer_announced(loop) -> None:
    """Generation 0 plays the served model; each later one the adapter trained through the batch before, and every trajectory says so."""
    log = GameLog(str(loop["run"]))
    policies = {r["gen"]: r for r in log.read("policies").to_pylist()}
    assert policies[0]["version"] == real_model.SERVED and policies[0]["lora_path"] is None
    for gen in range(1, GENERATIONS):
        version = policies[gen]["version"]
        assert version.startswith("lora-") and version.endswith(f"-v{gen}")
        assert Path(policies[gen]["lora_path"], "adapter_model.safetensors").is_file()
        assert policies[gen]["trained_through"] == gen - 1 and policies[gen]["staleness"] == 0
    signed = log.read("trajectories", columns=["gen", "policy_version", "purpose"]).to_pylist()
    assert signed and all(r["policy_version"] == policies[r["gen"]]["version"] for r in signed)


def test_every_solver_trajectory_is_interleaved_token_in_token_out(loop) -> None:
    """Against vLLM with token prompts on, no turn falls back to per-turn: every trajectory is one sequence, with a mask and log-probs."""
    rows = GameLog(str(loop["run"])).read("trajectories").to_pylist()
    played = [r for r in rows if r["failure"] is None]
    assert played and len(played) == len(rows), [r["failure"] for r in rows if r["failure"]]
    for row in played:
        assert row["layout"] == "interleaved", row["note"]
        mask, logprobs = row["loss_mask"], row["logprobs"]
        assert len(mask) == len(row["token_ids"]) == len(logprobs) and sum(mask) > 0
        assert all((m == 1) == (lp is not None) for m, lp in zip(mask, logprobs, strict=True))


def test_recorded_log_probs_agree_with_a_forward_pass_of_the_version_that_played(loop) -> None:
    """coevo logprobs recomputes each trajectory with the weights of its version: within the stated tolerance, every version."""
    done = real_model.coevo("logprobs", loop["run"], "--model", real_model.model(), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    versions = {v["version"]: v for v in json.loads(done.stdout.splitlines()[-1])["versions"]}
    assert real_model.SERVED in versions and len(versions) == GENERATIONS
    for version, figures in versions.items():
        assert figures["tokens"] > 0
        assert figures["mean_abs"] <= TOLERANCE_MEAN, (version, figures)
        assert figures["max_abs"] <= TOLERANCE_MAX, (version, figures)


def test_a_trainer_killed_between_batches_trains_every_batch_once(loop) -> None:
    """After kill -9 and a restart, the journal holds each batch once, every batch is announced, and the restart said where it resumed."""
    folder = FolderTransport(str(loop["run"] / "trainer"))
    from coevo.run.consumer import journal

    trained = [e["batch_id"] for e in journal(folder, "lora")]
    assert trained == [f"batch-{g:06d}" for g in range(GENERATIONS)]
    assert sorted(folder.announcements()) == trained
    assert "resuming from" in loop["trainer_log"]


def _vllm_prompt_logprobs(server, model: str, ids: list[int]) -> list[float]:
    answer = server.post(
        "/v1/completions",
        {"model": model, "prompt": ids, "max_tokens": 1, "temperature": 1.0, "prompt_logprobs": 0},
    )
    scored = answer["choices"][0]["prompt_logprobs"]
    return [scored[i][str(ids[i])]["logprob"] for i in range(1, len(ids))]


def test_a_train_step_on_real_rollouts_changes_the_adapter_and_vllm_plays_the_new_weights(
    loop, vllm_server, tmp_path
) -> None:
    """A batch of the loop's real rollouts, half paid: coevo train's step moves the adapter, and vLLM, loading it, scores the same tokens otherwise, as the trainer's own forward pass does."""
    real = FolderTransport(str(loop["run"] / "trainer")).read("batch-000000").to_pylist()
    rows = [
        {
            **row,
            "reward": float(n % 2),
            "advantage": 0.5 if n % 2 else -0.5,
            "task_id": f"t{n // 2}",
        }
        for n, row in enumerate(real)
        if row["layout"] == "interleaved"
    ][:4]
    assert len(rows) == 4
    run = tmp_path / "run"
    (run / "log" / "_manifests").mkdir(parents=True)
    (run / "experiment.json").write_text(json.dumps({"run": {"generations": 1}, "trainer": {}}))
    FolderTransport(str(run / "trainer")).offer(
        "batch-000000", pa.Table.from_pylist(rows, schema=BATCH_SCHEMA)
    )
    log = tmp_path / "trainer.log"
    trained = _trainer(
        run, log, "--batches", "1", "--learning-rate", "1e-3", "--prefix", "step-test"
    )
    assert trained.wait(timeout=600) == 0, log.read_text()[-2000:]
    (line,) = (run / "trainer" / "lora" / "journal.jsonl").read_text().splitlines()
    entry = json.loads(line)
    assert entry["sequences"] == 4 and entry["adapter_change"] > 0 and entry["lora_b_norm"] > 0
    assert (
        entry["mean_abs_log_ratio"] < TOLERANCE_MEAN
    )  # fresh data: the ratio is 1, up to serving precision
    adapter = run / "trainer" / "lora" / "versions" / entry["version"] / "adapter"
    vllm_server.post(
        "/v1/load_lora_adapter", {"lora_name": entry["version"], "lora_path": str(adapter)}
    )
    ids = rows[0]["token_ids"]
    base = _vllm_prompt_logprobs(vllm_server, real_model.SERVED, ids)
    tuned = _vllm_prompt_logprobs(vllm_server, entry["version"], ids)
    moved = sum(abs(a - b) for a, b in zip(base, tuned, strict=True)) / len(base)
    assert moved > 0.01, moved
    script = (
        "import json, sys, torch\n"
        "from peft import PeftModel\n"
        "from coevo.run.train.policy import load_model, token_logprobs\n"
        "ids = json.loads(sys.argv[3])\n"
        "model = PeftModel.from_pretrained(load_model(sys.argv[1], torch.device('cpu')), sys.argv[2])\n"
        "with torch.no_grad():\n"
        "    print(json.dumps(token_logprobs(model, ids, list(range(1, len(ids)))).tolist()))\n"
    )
    done = subprocess.run(
        [
            str(real_model.python()),
            "-c",
            script,
            str(real_model.model()),
            str(adapter),
            json.dumps(ids),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **real_model.OFFLINE},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    forward = json.loads(done.stdout.splitlines()[-1])
    gap = sum(abs(a - b) for a, b in zip(tuned, forward, strict=True)) / len(forward)
    assert gap <= TOLERANCE_MEAN, gap


def test_the_trainer_s_own_tests_pass_in_the_training_environment() -> None:
    """tests/train (the loss, the adapter, checkpoints and resuming) run with the train extra's torch."""
    done = subprocess.run(
        [str(real_model.python()), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/train"],
        capture_output=True,
        text=True,
        cwd=real_model.ROOT,
        env={**os.environ, **real_model.OFFLINE},
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout
