"""One policy, both roles: a served model proposes tasks (llm-synth, self-play) and solves them, and both roles' rollouts go into the training batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from coevo.agents.llm.synthesizer import LLMSynthesizer
from coevo.agents.protocols import ProposalRequest
from coevo.arena.gamelog import (
    GameLog,
    GenerationRecord,
    ProposalRow,
    TaskRow,
    TrajectoryRow,
)
from coevo.arena.judge import WorldCache, assess_task
from coevo.arena.rendering import SYSTEM as SOLVER_SYSTEM
from coevo.run.handoff.transports import (
    BATCH_SCHEMA,
    FolderTransport,
    Handoff,
    TrainerConfig,
    batch_id,
    training_batch,
)
from coevo.run.testing import check_role, sample_tasks

from tests.agents.fake_openai import FakeOpenAI, ProposerPolicy, Reply, call

KEY = "sk-fake-selfplay-key"
STAGES = set(ProposerPolicy.STAGES)


@pytest.fixture(autouse=True)
def api_key(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _variant(name: str, change: Any, task_index: int = 0) -> dict[str, Any]:
    """A draft of a sample task, changed by ``change`` (its instruction marked with ``name``, so it is a task of its own)."""
    draft = json.loads(json.dumps(ProposerPolicy.draft_of(sample_tasks()[task_index])))
    change(draft)
    draft["task"]["instruction"] += f" ({name})"
    return draft


def _tool_sql(sql: str) -> Any:
    def change(draft: dict[str, Any]) -> None:
        draft["world"]["tools"][0]["sql"] = [sql]

    return change


def _check(sql: str) -> Any:
    def change(draft: dict[str, Any]) -> None:
        draft["verifier"]["checks"] = [{"name": "done", "sql": sql}]

    return change


def _no_such_tool(draft: dict[str, Any]) -> None:
    draft["task"]["solution"] = [{"tool": "no_such_tool", "arguments": {}}, {"tool": "submit"}]


HOSTILE = {
    # broken
    "a tool reads a missing table": _tool_sql("SELECT * FROM no_such_table"),
    "a verifier that never passes": _check("SELECT 0"),
    "a verifier that always passes": _check("SELECT 1"),
    "a solution that does not run": _no_such_tool,
    # hostile: SQL the guard refuses or stops
    "attach": _tool_sql("ATTACH DATABASE '/tmp/coevo-selfplay-evil.db' AS evil"),
    "load_extension": _tool_sql("SELECT load_extension('/tmp/coevo-selfplay-evil.so')"),
    "an endless recursive CTE": _check(
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
    ),
    "a PRAGMA that writes": _tool_sql("PRAGMA user_version = 7"),
    "a huge printf width": _check("SELECT length(printf('%2000000000d', 1)) > 0"),
}
"""Drafts no Judge may accept, each by the change that makes it so."""


REVIEW = {"review": {"ambiguous": False, "readings": [], "reason": "one reading"}}


# ---- the proposer's rollouts ----------------------------------------------------------------


def test_a_self_play_synthesizer_keeps_the_rollout_of_each_task_it_proposes() -> None:
    """Every stage call is a turn of the task's rollout, with its token ids; drained once; none without self_play."""
    task = sample_tasks()[0]
    with FakeOpenAI(ProposerPolicy([ProposerPolicy.draft_of(task)]), api_key=KEY) as server:
        synth = LLMSynthesizer(base_url=server.url, self_play=True)
        (made,) = synth.propose(ProposalRequest(n=1, seed=0))
        ((task_id, rollout),) = synth.drain_trajectories()
        assert synth.drain_trajectories() == []
        plain = LLMSynthesizer(base_url=server.url)
        assert len(plain.propose(ProposalRequest(n=1, seed=0))) == 1
        assert plain.drain_trajectories() == []
        check_role(LLMSynthesizer(base_url=server.url, self_play=True), name="llm-synth")
        stage_calls = [r for r in server.requests if r.get("tool_choice")]
    assert made.instruction.startswith(task.instruction) and task_id == made.task_id
    assert len(rollout.turns) == 4 and all(t.completion_ids for t in rollout.turns)
    assert rollout.policy_version == "fake-model" and rollout.sampling["max_tokens"] == 8192
    assert [t["function"]["name"] for t in rollout.tools] == [
        "scenario",
        "world",
        "task",
        "verifier",
    ]
    # each call is a fresh conversation: its system message, its prompt, the answer
    roles = [m["role"] for m in rollout.messages]
    assert roles == ["system", "user", "assistant"] * 4
    assert rollout.turns[0].prompt_ids is not None and stage_calls
    row = TrajectoryRow.proposed("prop-1", task_id, rollout, accepted=True)
    assert (row.purpose, row.reward, row.layout, row.turns) == ("propose", 1, "per-turn", 4)
    assert row.token_ids is None and "conversation of its own" in (row.note or "")


@pytest.mark.slow
def test_a_self_play_synthesizer_hands_the_judge_its_drafts_that_fail_their_checks() -> None:
    """With self_play a draft that still fails its checks goes to the Judge (its rejection is the proposer's penalty); without, it is dropped."""
    drafts = [_variant(name, change) for name, change in HOSTILE.items()]
    with FakeOpenAI(ProposerPolicy(drafts), api_key=KEY) as server:
        request = ProposalRequest(n=len(drafts), seed=3)
        synth = LLMSynthesizer(base_url=server.url, self_play=True, retries=0)
        handed = synth.propose(request)
        rollouts = synth.drain_trajectories()
        assert LLMSynthesizer(base_url=server.url, retries=0).propose(request) == []
    assert len(handed) == len(drafts) == len(rollouts)
    assert [t for t, _ in rollouts] == [t.task_id for t in handed]
    assert not any(assess_task(t, WorldCache()).accepted for t in handed)


def test_a_synthesizer_plays_a_trainer_s_policy_only_in_self_play() -> None:
    """set_state of an LLM policy switches a self-play Synthesizer's model and version; any other keeps its own."""
    from coevo.agents.llm.policy import policy_state

    with FakeOpenAI(models=["base", "adapter-v1"], api_key=KEY) as server:
        follows = LLMSynthesizer(base_url=server.url, self_play=True)
        stays = LLMSynthesizer(base_url=server.url)
        for synth in (follows, stays):
            synth.set_state(policy_state("adapter-v1", "run-v1"))
    assert (follows.client.model, follows.version) == ("adapter-v1", "run-v1")
    assert (stays.client.model, stays.version) == ("base", "base")


# ---- the batch ------------------------------------------------------------------------------


def _trajectory(episode: str, task: str, reward: int, purpose: str = "train") -> TrajectoryRow:
    cells: dict[str, Any] = {
        "episode_id": episode,
        "task_id": task,
        "purpose": purpose,
        "policy_version": "v0",
        "provider": "openai",
        "model": "m",
        "reward": reward,
        "failure": None,
        "messages": json.dumps([{"role": "user", "content": task}, {"role": "assistant"}]),
        "tools": "[]",
        "sampling": "{}",
        "turns": 1,
        "bad_steps": 0,
        "finish_reasons": ["stop"],
        "input_tokens": 1,
        "output_tokens": 1,
        "turn_prompt_ids": [[1]],
        "turn_completion_ids": [[2]],
        "turn_logprobs": [[-0.5]],
        "token_ids": None,
        "logprobs": None,
        "loss_mask": None,
        "layout": "per-turn",
        "note": None,
    }
    return TrajectoryRow(**cells)


def _proposal(task: str, accepted: bool, reward: float | None) -> ProposalRow:
    return ProposalRow(
        task_id=task,
        proposer="llm-synth",
        accepted=accepted,
        p_hat=None,
        plays=0,
        predicted=None,
        proposer_reward=reward,
        novelty=1.0,
        flaky=None,
        objective="learnability",
        level=1,
        family=None,
        domain="retail",
    )


def _task(task: str) -> TaskRow:
    return TaskRow(
        task_id=task,
        world_id="w",
        source="fresh",
        level=1,
        family=None,
        domain="retail",
        parent=None,
        operator=None,
        spec="{}",
    )


def test_the_batch_pays_each_proposer_row_its_proposal_s_reward_against_the_role_s_own_mean(
    tmp_path,
) -> None:
    """Proposer rows (a rejected task's too, with its penalty) get proposals' reward and a per-role baseline; an accepted task the Solver did not play was not paid and has none; solver rows keep theirs; staged and logged batches are equal."""
    trajectories = [
        _trajectory("e1", "t-a", 1),
        _trajectory("e2", "t-a", 0),
        _trajectory("e3", "t-b", 1, purpose="eval"),
        _trajectory("prop-a", "t-a", 1, purpose="propose"),
        _trajectory("prop-r", "t-r", 0, purpose="propose"),
        _trajectory("prop-x", "t-x", 1, purpose="propose"),  # no proposal of this generation
        _trajectory("prop-u", "t-u", 1, purpose="propose"),  # accepted, not played: not paid
    ]
    proposals = [
        _proposal("t-a", True, 1.0),
        _proposal("t-r", False, -0.5),
        _proposal("t-u", True, None),
    ]
    record = GenerationRecord(
        0,
        tasks=[_task(t) for t in ("t-a", "t-r", "t-x", "t-u")],
        trajectories=trajectories,
        proposals=proposals,
    )
    log = GameLog(str(tmp_path))
    tables: dict[str, Any] = {}
    parts = log.write(record, tables)
    handoff = Handoff(TrainerConfig(), log, 0)
    handoff.stage(0, tables)
    log.commit(0, parts, {name: len(rows) for name, rows in record.tables()}, {})
    batch = training_batch(log, 0)
    assert handoff.staged is not None and handoff.staged[1].equals(batch)
    assert batch.schema.equals(BATCH_SCHEMA, check_metadata=True)
    got = {r["episode_id"]: r for r in batch.to_pylist()}
    assert sorted(got) == ["e1", "e2", "prop-a", "prop-r"]
    assert [got[e]["role"] for e in ("e1", "e2", "prop-a", "prop-r")] == [
        "solver",
        "solver",
        "proposer",
        "proposer",
    ]
    assert (got["prop-a"]["reward"], got["prop-r"]["reward"]) == (1.0, -0.5)
    assert got["prop-a"]["advantage"] == pytest.approx(0.75)
    assert got["prop-r"]["advantage"] == pytest.approx(-0.75)
    assert got["prop-a"]["group_size"] == got["prop-r"]["group_size"] == 2
    assert (got["e1"]["advantage"], got["e2"]["advantage"]) == (0.5, -0.5)
    assert got["e1"]["group_size"] == 2


# ---- runs ---------------------------------------------------------------------------------


def _solves_on_even_seeds(policy: ProposerPolicy) -> Any:
    """The policy, except that a Solver's episode whose seed is odd submits at once (so tasks have a frontier)."""

    def answer(body: dict[str, Any]) -> Reply:
        forced = isinstance(body.get("tool_choice"), dict)
        if not forced and body.get("seed", 0) % 2 and len(body["messages"]) == 2:
            return call("submit")
        return policy(body)

    return answer


def _reference_trainer(run_dir: Path) -> subprocess.Popen:
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
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ),
    )


def _stage_call(request: dict[str, Any]) -> bool:
    """Whether a request is one of llm-synth's stage calls (a forced stage function)."""
    choice = request.get("tool_choice")
    return isinstance(choice, dict) and (choice.get("function") or {}).get("name") in STAGES


def _instructions(requests: list[dict[str, Any]], *, forced: bool) -> str:
    """The text of every request that is (or is not) a synthesizer's stage call."""
    return json.dumps([r["messages"] for r in requests if _stage_call(r) == forced])


@pytest.mark.slow
def test_one_served_model_proposes_and_solves_and_the_batches_hold_both_roles(
    monkeypatch, tmp_path
) -> None:
    """experiments/self-play.toml on one fake model with the reference trainer: each batch has solver and proposer rows, marked, paid from the proposals table, advantages summing to 0 per role; a rejected task only as a proposer row; the proposer plays the trainer's policy."""
    from coevo.run.experiment import load_experiment
    from coevo.run.loop import run_experiment

    drafts = [
        ProposerPolicy.draft_of(sample_tasks()[0]),
        ProposerPolicy.draft_of(sample_tasks()[1]),
        _variant("always passes", _check("SELECT 1")),
    ]
    policy = ProposerPolicy(drafts, REVIEW, per_request=True)
    run_dir = tmp_path / "run"
    generations = 4
    with FakeOpenAI(_solves_on_even_seeds(policy), models=["base"], api_key=KEY) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        exp = load_experiment(
            "experiments/self-play.toml",
            [
                f"run.generations={generations}",
                "run.rollouts=2",
                "curriculum.tasks_per_gen=3",
                "curriculum.levels=[1]",
                "eval.per_level=1",
                "synthesizer.config.retries=0",
                "judge.config.k=1",
                "solver.config.max_steps=6",
                "solver.config.sampling={ temperature = 1.0, seed = 7 }",
                "trainer.poll=0.05",
                "trainer.timeout=120",
                "ray.in_process=true",
            ],
        )
        trainer = _reference_trainer(run_dir)
        try:
            run_experiment(exp, str(run_dir))
            output, _ = trainer.communicate(timeout=60)
        finally:
            trainer.kill()
        requests = list(server.requests)
    assert trainer.returncode == 0, output
    log = GameLog(str(run_dir))
    folder = FolderTransport(str(run_dir / "trainer"))
    policies = {p["gen"]: p for p in log.read("policies").to_pylist()}
    for gen in range(generations):
        handed = folder.read(batch_id(gen))
        assert handed.equals(training_batch(log, gen)), "what went out is what the log holds"
        rows = handed.to_pylist()
        assert policies[gen]["batch_rows"] == len(rows)
        proposals = {p["task_id"]: p for p in log.read("proposals", gens=[gen]).to_pylist()}
        solver = [r for r in rows if r["role"] == "solver"]
        proposer = [r for r in rows if r["role"] == "proposer"]
        assert solver and proposer and len(solver) + len(proposer) == len(rows)
        assert sorted(r["task_id"] for r in proposer) == sorted(proposals)
        for row in proposer:
            assert row["reward"] == proposals[row["task_id"]]["proposer_reward"]
            assert row["group_size"] == len(proposer) and row["layout"] == "per-turn"
            assert row["turn_completion_ids"] and all(row["turn_completion_ids"])
            assert row["episode_id"].startswith("prop-")
        assert sum(r["advantage"] for r in proposer) == pytest.approx(0.0, abs=1e-9)
        by_task: dict[str, list[float]] = defaultdict(list)
        for row in solver:
            by_task[row["task_id"]].append(row["advantage"])
            assert row["reward"] in (0.0, 1.0) and proposals[row["task_id"]]["accepted"]
        assert all(sum(a) == pytest.approx(0.0, abs=1e-9) for a in by_task.values())
        rejected = [t for t, p in proposals.items() if not p["accepted"]]
        assert len(rejected) == 1
        assert [r["reward"] for r in proposer if r["task_id"] in rejected] == [-0.5]
    played = log.read("trajectories", columns=["gen", "purpose", "task_id", "policy_version"])
    proposed = [r for r in played.to_pylist() if r["purpose"] == "propose"]
    assert len(proposed) == 3 * generations
    # proposals for generation g+1 are made while g plays: the policy after g-1's batch
    assert {r["policy_version"] for r in proposed if r["gen"] < 3} == {"base"}
    assert {r["policy_version"] for r in proposed if r["gen"] == 3} == {"reference-v1"}
    stage_models = {r["model"] for r in requests if _stage_call(r)}
    assert stage_models == {"base", "reference-v1"}


@pytest.mark.slow
def test_no_broken_or_hostile_proposal_reaches_the_solver_or_a_solver_row(
    monkeypatch, tmp_path
) -> None:
    """A proposer whose drafts are broken or hostile: the Judge rejects every one, the Solver never plays one (its server never sees their instruction), the batch holds them only as penalised proposer rows; the run completes and counts the rejections."""
    from coevo.run.experiment import load_experiment
    from coevo.run.loop import run_experiment

    good = [ProposerPolicy.draft_of(sample_tasks()[0]), ProposerPolicy.draft_of(sample_tasks()[1])]
    hostile = [_variant(name, change) for name, change in HOSTILE.items()]
    policy = ProposerPolicy([*good, *hostile], REVIEW, per_request=True)
    generations = 2
    with FakeOpenAI(policy, models=["base"], api_key=KEY) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        exp = load_experiment(
            "experiments/self-play.toml",
            [
                f"run.generations={generations}",
                "run.rollouts=1",
                f"curriculum.tasks_per_gen={len(good) + len(hostile)}",
                "curriculum.levels=[1]",
                "eval.per_level=1",
                "synthesizer.config.retries=0",
                "judge.config.k=1",
                "solver.config.max_steps=6",
                "ray.in_process=true",
            ],
        )
        summary = run_experiment(exp.model_copy(update={"trainer": None}), str(tmp_path / "run"))
        requests = list(server.requests)
    assert summary.generations == generations
    log = GameLog(str(tmp_path / "run"))
    verdicts = {v["task_id"]: v for v in log.read("verdicts").to_pylist()}
    tasks = log.read("tasks", columns=["task_id", "spec"]).to_pylist()
    marked = {
        name: [
            t["task_id"]
            for t in tasks
            if f"({name}) (request" in json.loads(t["spec"])["instruction"]
        ]
        for name in HOSTILE
    }
    assert all(len(ids) == generations for ids in marked.values()), marked
    bad = {t for ids in marked.values() for t in ids}
    assert all(not verdicts[t]["accepted"] for t in bad), "the Judge rejects every one"
    episodes = log.read("episodes", columns=["task_id", "purpose"]).to_pylist()
    assert episodes and not bad & {e["task_id"] for e in episodes}
    assert not bad & set(log.read("predictions", columns=["task_id"]).column("task_id").to_pylist())
    # the Solver's (and the Judge's attempts' and review's) requests never hold their instruction
    unseen = _instructions(requests, forced=False)
    assert all(f"({name})" not in unseen for name in HOSTILE)
    assert not any(f"({name})" in i for name in HOSTILE for i in policy.played)
    assert any(f"({name})" in _instructions(requests, forced=True) for name in HOSTILE)
    generations_rows = log.read("generations").to_pylist()
    assert [g["rejected"] for g in generations_rows] == [len(HOSTILE)] * generations
    for gen in range(generations):
        rows = training_batch(log, gen).to_pylist()
        assert not bad & {r["task_id"] for r in rows if r["role"] == "solver"}
        paid = {
            p["task_id"]: p["proposer_reward"]
            for p in log.read("proposals", gens=[gen]).to_pylist()
        }
        penalised = [r for r in rows if r["role"] == "proposer" and r["task_id"] in bad]
        assert len(penalised) == len(HOSTILE)
        # the rejection's penalty (and the flaky one's too, for the CTE that ran out of budget)
        assert all(r["reward"] == paid[r["task_id"]] <= -0.5 for r in penalised)
        assert any(r["role"] == "solver" for r in rows)
    assert SOLVER_SYSTEM not in _instructions(requests, forced=True)
