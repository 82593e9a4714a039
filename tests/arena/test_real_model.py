"""The real training loop: a real vLLM (CPU) serving SmolLM2-135M-Instruct, a warm start by coevo sft, coevo run, and coevo train updating the adapter.

The server, its environment and the model are made once and cached
(:mod:`tests.real_model`); the server applies Qwen2.5-Instruct's sampling
defaults to whatever a request leaves unset, so every test here also checks
that coevo pins the sampling the trainer reproduces. One warm start (a
pool run of ``experiments/tiny-pool.toml``, then ``coevo sft``) and one
loop of ``experiments/tiny-real.toml`` (two generations, generation 0
playing the warm start, a trainer killed with ``kill -9`` after batch 0 and
started again) are shared by the tests that read them. Nothing here reaches
beyond loopback.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from coevo.arena.gamelog import GameLog
from coevo.run.handoff.transports import BATCH_SCHEMA, FolderTransport

from tests import real_model
from tests.factories import IN_PROCESS_FLAGS, wait_for_file

pytestmark = [pytest.mark.slow, pytest.mark.real_model]

GENERATIONS = 2
CHECKED = 4
"""Trajectories ``coevo logprobs --limit`` recomputes (a forward pass of 2,000 tokens is 3 s on this CPU)."""
TOLERANCE_MEAN = 0.1
"""Mean |recorded − recomputed| log-prob per version, in nats (measured: 0.03–0.04; bf16 serving, a bf16 base in the trainer)."""
TOLERANCE_MAX = 1.5
"""The largest gap of one token (measured: up to 0.55)."""
WARM = "warm-start"
"""The name the server serves the warm start by (the experiment's Solver model)."""


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
            "--poll",
            "0.2",
            "--wait",
            "900",
            *extra,
        ],
        stdout=log.open("a"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **real_model.ONE_THREAD},
    )


def _in_real_env(script: str, *args: str | Path) -> object:
    """Run ``script`` in the real-model environment; the JSON of its last line."""
    done = subprocess.run(
        [str(real_model.python()), "-c", script, *[str(a) for a in args]],
        capture_output=True,
        text=True,
        env={**os.environ, **real_model.ONE_THREAD},
        cwd=real_model.ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def warm(vllm_server, tmp_path_factory) -> dict:
    """A warm start as the recipe makes one: a one-generation pool run of tiny-pool, then coevo sft on it, loaded into the server."""
    where = tmp_path_factory.mktemp("warm")
    pool = where / "pool"
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "coevo.run.cli",
            "run",
            "tiny-pool",
            "--out",
            str(pool),
            "--set",
            "run.generations=1",
            "--set",
            "curriculum.tasks_per_gen=16",
            "--set",
            "curriculum.levels=[1]",
            "--set",
            "eval.levels=[1]",
            "--set",
            "eval.per_level=4",
            *IN_PROCESS_FLAGS,
        ],
        capture_output=True,
        text=True,
        cwd=where,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    done = real_model.coevo(
        "sft",
        pool,
        "--model",
        real_model.model(),
        "--experiment",
        "tiny-real",
        "--out",
        where / "warm",
        "--limit",
        "8",  # six to train on, two held out: the held-out NLL falls by half (0.55 to 0.28)
        "--epochs",
        "1",
        "--batch-sequences",
        "4",
        "--learning-rate",
        "1e-3",
        "--warmup-steps",
        "0",
        "--validation-share",
        "0.25",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    adapter = where / "warm" / "adapter"
    vllm_server.post("/v1/load_lora_adapter", {"lora_name": WARM, "lora_path": str(adapter)})
    return {
        "pool": pool,
        "adapter": adapter,
        "report": json.loads((where / "warm" / "sft.json").read_text()),
        "said": done.stdout,
    }


@pytest.fixture(scope="module")
def loop(vllm_server, warm, tmp_path_factory) -> dict:
    """experiments/tiny-real.toml for two generations against the server from the warm start, its trainer killed -9 after batch 0 and restarted."""
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
        "run.rollouts=2",  # the smallest group: each generation plays half as many episodes
        "--set",
        "eval.per_level=1",
        "--set",
        "eval.levels=[1]",
        "--set",
        "solver.config.max_steps=4",  # shorter sequences for every forward pass that follows
        *IN_PROCESS_FLAGS,  # the two cores go to vLLM and the trainer, not to Ray's workers
    ]
    env = {**os.environ, "OPENAI_BASE_URL": vllm_server.url, "OPENAI_API_KEY": "x"}
    adapter = ("--adapter", str(warm["adapter"]))
    with (where / "run.log").open("w") as out:
        played = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=where)
        first = _trainer(run, trainer_log, *adapter)
        wait_for_file(run / "trainer" / "versions" / "batch-000000.json", first, 900)
        first.send_signal(signal.SIGKILL)  # between batches: batch 0 announced, batch 1 not yet out
        first.wait(timeout=30)
        second = _trainer(run, trainer_log, *adapter)
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


def test_the_warm_start_raises_the_likelihood_of_held_out_reference_conversations(warm) -> None:
    """coevo sft on the pool's accepted tasks: the held-out references' NLL per token falls; the pool's eval tasks and their databases were left out, and said so."""
    report = warm["report"]
    assert report["sequences"] > 0 and report["validation"]["sequences"] > 0
    assert report["validation_nll_after"] < report["validation_nll_before"], report
    assert any("eval suite" in line for line in report["left_out"]["eval_tasks_and_worlds"])
    assert "held out (never trained on)" in warm["said"]
    files = {p.name for p in warm["adapter"].iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= files


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


REPLAY = """
import json, sys
from pathlib import Path
from transformers import AutoTokenizer
from coevo.agents.llm.text_tools import CALL_OPEN
from coevo.arena.gamelog import GameLog
from coevo.run.train.warmstart import DialogueSettings, replay

run, model = Path(sys.argv[1]), sys.argv[2]
log = GameLog(str(run))
specs, _ = log.task_specs()
settings = DialogueSettings.of_solver(json.loads((run / "experiment.json").read_text())["solver"]["config"])
tokenizer = AutoTokenizer.from_pretrained(model)

def context(ids, mask):
    return [t for t, m in zip(ids, mask) if not m]

out = []
for row in log.read("trajectories").to_pylist():
    messages = json.loads(row["messages"])
    script = [m["content"].removeprefix(CALL_OPEN) for m in messages if m["role"] == "assistant"]
    replayed = replay(specs[row["task_id"]], script, tokenizer, settings).trajectory
    again = replayed.interleaved()[0]
    turns = []
    for ids, theirs in zip(row["turn_completion_ids"], replayed.turns, strict=True):
        ids = list(ids)
        encoded = tokenizer.encode(tokenizer.decode(ids), add_special_tokens=False)
        turns.append({
            "canonical": encoded == ids,
            "same_text": tokenizer.decode(theirs.completion_ids) == tokenizer.decode(ids),
            "same_ids": theirs.completion_ids == ids,
            "tokenizer_s": theirs.completion_ids == encoded,
        })
    out.append({
        "finishes": row["finish_reasons"],
        "turns": turns,
        "same_ids": again.token_ids == list(row["token_ids"]),
        "same_mask": again.loss_mask == list(row["loss_mask"]),
        "same_context": context(again.token_ids, again.loss_mask)
            == context(row["token_ids"], row["loss_mask"]),
    })
print(json.dumps(out))
"""


def test_a_warm_start_sequence_is_what_the_solver_samples_in_the_tokenizer_s_encoding(
    loop,
) -> None:
    """The loop's episodes (sampled by the served warm start, logged token for token), replayed with the same calls through coevo sft's replay.

    For every episode whose turns all ended at the call's closing tag (a
    warm start's references are never cut at ``max_tokens``), the context
    (prompts, tool results, the tokens between turns) is the same token for
    token; each turn's text is the same, its ids are the tokenizer's
    encoding of that text, and so the model's own wherever the model sampled
    the tokenizer's encoding (byte-pair encoding allows others: SmolLM2 may
    write ``"}}`` then ``</`` where the tokenizer writes ``"`` then
    ``}}</``; a warm start trains on the tokenizer's encoding, as any
    supervised data does). The episodes are the loop's: this test samples
    nothing of its own.
    """
    compared = _in_real_env(REPLAY, loop["run"], real_model.model())
    assert isinstance(compared, list) and compared
    whole = [c for c in compared if "length" not in c["finishes"]]
    canonical = [c for c in whole if all(t["canonical"] for t in c["turns"])]
    assert canonical, compared  # some episodes' turns all ended at the tag, in the tokenizer's ids
    for case in whole:
        assert case["same_context"], case
        assert all(t["same_text"] and t["tokenizer_s"] for t in case["turns"]), case
        assert all(t["same_ids"] for t in case["turns"] if t["canonical"]), case
    for case in canonical:
        assert case["same_ids"] and case["same_mask"], case


def test_the_run_plays_the_warm_start_then_each_version_the_trainer_announced(loop) -> None:
    """Generation 0 plays the warm start; each later one the adapter trained through the batch before, and every trajectory says so."""
    log = GameLog(str(loop["run"]))
    policies = {r["gen"]: r for r in log.read("policies").to_pylist()}
    assert policies[0]["version"] == WARM and policies[0]["lora_path"] is None
    for gen in range(1, GENERATIONS):
        version = policies[gen]["version"]
        assert version.startswith("lora-") and version.endswith(f"-v{gen}")
        assert Path(policies[gen]["lora_path"], "adapter_model.safetensors").is_file()
        assert policies[gen]["trained_through"] == gen - 1 and policies[gen]["staleness"] == 0
    signed = log.read("trajectories", columns=["gen", "policy_version", "purpose"]).to_pylist()
    assert signed and all(r["policy_version"] == policies[r["gen"]]["version"] for r in signed)


def test_every_solver_trajectory_is_interleaved_and_records_the_sampling_it_pinned(loop) -> None:
    """Token in, token out: one sequence with a mask and log-probs; its sampling names every setting the trainer must reproduce, at its neutral value."""
    rows = GameLog(str(loop["run"])).read("trajectories").to_pylist()
    played = [r for r in rows if r["failure"] is None]
    assert played and len(played) == len(rows), [r["failure"] for r in rows if r["failure"]]
    for row in played:
        assert row["layout"] == "interleaved", row["note"]
        mask, logprobs = row["loss_mask"], row["logprobs"]
        assert len(mask) == len(row["token_ids"]) == len(logprobs) and sum(mask) > 0
        assert all((m == 1) == (lp is not None) for m, lp in zip(mask, logprobs, strict=True))
        sampling = json.loads(row["sampling"])
        assert sampling["temperature"] == 0.7 and sampling["top_p"] == 1.0
        assert sampling["top_k"] in (0, -1) and sampling["repetition_penalty"] == 1.0


def test_recorded_log_probs_agree_with_a_forward_pass_of_the_version_that_played(
    loop, warm
) -> None:
    """coevo logprobs recomputes each trajectory with the weights of its version (the warm start's named), against a server whose defaults truncate and penalise: within the stated tolerance."""
    done = real_model.coevo(
        "logprobs",
        loop["run"],
        "--model",
        real_model.model(),
        "--adapter",
        f"{WARM}={warm['adapter']}",
        "--limit",
        str(CHECKED),
        "--json",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.splitlines()[-1])
    versions = {v["version"]: v for v in report["versions"]}
    assert len(report["trajectories"]) == CHECKED
    assert len(versions) == GENERATIONS  # the checked ones spread over every generation
    for version, figures in versions.items():
        assert figures["tokens"] > 0
        assert figures["mean_abs"] <= TOLERANCE_MEAN, (version, figures)
        assert figures["max_abs"] <= TOLERANCE_MAX, (version, figures)


def test_a_trainer_killed_between_batches_trains_every_batch_once(loop) -> None:
    """After kill -9 and a restart, the journal holds each batch once, every batch is announced, and the restart said where it resumed."""
    folder = FolderTransport(str(loop["run"] / "trainer"))
    from coevo.run.handoff.consumer import journal

    trained = [e["batch_id"] for e in journal(folder, "lora")]
    assert trained == [f"batch-{g:06d}" for g in range(GENERATIONS)]
    assert sorted(folder.announcements()) == trained
    assert "resuming from" in loop["trainer_log"]


def _vllm_prompt_logprobs(server, model: str, ids: list[int]) -> list[float]:
    answer = server.post(
        "/v1/completions",
        {
            "model": model,
            "prompt": ids,
            "max_tokens": 1,
            "temperature": 1.0,
            "top_p": 1.0,
            "top_k": -1,
            "repetition_penalty": 1.0,
            "prompt_logprobs": 0,
        },
    )
    scored = answer["choices"][0]["prompt_logprobs"]
    return [scored[i][str(ids[i])]["logprob"] for i in range(1, len(ids))]


FORWARD = """
import json, sys, torch
from pathlib import Path
from peft import PeftModel
from safetensors.torch import load_file
from coevo.run.train.policy import choose_dtype, load_model, token_logprobs
ids = json.loads(sys.argv[3])
tensors = load_file(Path(sys.argv[2]) / "adapter_model.safetensors")
cpu = torch.device("cpu")
model = PeftModel.from_pretrained(load_model(sys.argv[1], cpu, choose_dtype("auto", cpu)), sys.argv[2])
print(json.dumps({
    "tensors": len(tensors),
    "finite": all(bool(t.float().isfinite().all()) for t in tensors.values()),
    "logprobs": token_logprobs(model, ids, list(range(1, len(ids)))).tolist(),
}))
"""


def test_a_train_step_on_real_rollouts_skips_bad_numbers_and_vllm_plays_the_new_weights(
    loop, warm, vllm_server, tmp_path
) -> None:
    """Real rollouts, half paid, beside rows with a NaN advantage and -inf, NaN and -9999 log-probs: those are counted and left out, the adapter stays finite, and vLLM, loading it, scores tokens as the trainer's own forward pass does."""
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
    ][:2]  # one paid, one not: a step on two sequences of about 1,000 tokens takes 15 s here
    assert len(rows) == 2
    spoilt = []
    for n, bad in enumerate((float("-inf"), float("nan"), -9999.0)):
        row = rows[n % 2]
        logprobs = list(row["logprobs"])
        last = max(i for i, m in enumerate(row["loss_mask"]) if m)
        logprobs[last] = bad
        spoilt.append({**row, "episode_id": f"bad-{n}", "logprobs": logprobs})
    spoilt.append({**rows[1], "episode_id": "bad-advantage", "advantage": float("nan")})
    run = tmp_path / "run"
    (run / "log" / "_manifests").mkdir(parents=True)
    (run / "experiment.json").write_text(json.dumps({"run": {"generations": 1}, "trainer": {}}))
    FolderTransport(str(run / "trainer")).offer(
        "batch-000000", pa.Table.from_pylist(rows + spoilt, schema=BATCH_SCHEMA)
    )
    log = tmp_path / "trainer.log"
    trained = _trainer(
        run,
        log,
        "--batches",
        "1",
        "--learning-rate",
        "1e-3",
        "--prefix",
        "step-test",
        "--adapter",
        str(warm["adapter"]),  # the policy that played batch 0
    )
    assert trained.wait(timeout=600) == 0, log.read_text()[-2000:]
    (line,) = (run / "trainer" / "lora" / "journal.jsonl").read_text().splitlines()
    entry = json.loads(line)
    assert entry["sequences"] == 2 and entry["skipped"]["not_finite"] == 4, entry["skipped"]
    assert entry["adapter_change"] > 0 and entry["lora_b_norm"] > 0
    assert entry["mean_abs_log_ratio"] < TOLERANCE_MEAN  # fresh data: trainer and server agree
    assert math.isfinite(entry["loss"]) and entry["skipped_steps"] == 0
    adapter = run / "trainer" / "lora" / "versions" / entry["version"] / "adapter"
    ids = rows[0]["token_ids"]
    forward = _in_real_env(FORWARD, real_model.model(), adapter, json.dumps(ids))
    assert isinstance(forward, dict) and forward["finite"] and forward["tensors"] > 0, forward
    vllm_server.post(
        "/v1/load_lora_adapter", {"lora_name": entry["version"], "lora_path": str(adapter)}
    )
    base = _vllm_prompt_logprobs(vllm_server, WARM, ids)
    tuned = _vllm_prompt_logprobs(vllm_server, entry["version"], ids)
    moved = sum(abs(a - b) for a, b in zip(base, tuned, strict=True)) / len(base)
    assert moved > 0.01, moved
    recomputed = forward["logprobs"]
    gap = sum(abs(a - b) for a, b in zip(tuned, recomputed, strict=True)) / len(recomputed)
    assert gap <= TOLERANCE_MEAN, gap


def test_the_trainer_s_own_tests_pass_in_the_training_environment() -> None:
    """tests/train (the loss, the adapter, checkpoints and resuming, the warm start) run with the train extra's torch."""
    done = subprocess.run(
        [str(real_model.python()), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/train"],
        capture_output=True,
        text=True,
        cwd=real_model.ROOT,
        env={**os.environ, **real_model.ONE_THREAD},
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout
