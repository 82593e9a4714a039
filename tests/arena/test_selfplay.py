"""Self-play in the loop: every proposal scored into `proposals`, a Synthesizer that learns, the watch."""

from __future__ import annotations

from typing import Any

import pytest
from coevo.arena.gamelog import SCHEMAS, GameLog
from coevo.arena.outcomes import CheckResult, Episode, Reward, Verdict
from coevo.arena.spec import ToolCall
from coevo.curricula.objectives import ProposerConfig, proposal_feedback, proposer_reward
from coevo.curricula.scorers import learnability
from coevo.run.driver.summary import summarize, summary_lines
from coevo.run.experiment import load_experiment
from coevo.run.generation.selfplay import Watch, WatchConfig
from coevo.run.loop import resume_run, run_experiment

COUNTING = "tests.arena.selfplay_roles:CountingSynthesizer"


def experiment(**overrides: Any):
    base: dict[str, Any] = {
        "ray": {"in_process": True},
        "judge": {"config": {"isolate": False}},
        "run": {"seed": 3, "generations": 4, "rollouts": 2, "chunk": 8},
        "synthesizer": {"name": "procedural", "config": {"domains": ["retail"], "world_pool": 2}},
        "solver": {"name": "linear-pg", "actors": 2, "config": {"lr": 0.2}},
        "curriculum": {"name": "uniform", "tasks_per_gen": 6, "levels": [1, 2]},
        "eval": {"levels": [1, 2], "per_level": 3, "every": 2},
    }
    for key, value in overrides.items():
        section, _, name = key.partition("__")
        base.setdefault(section, {})[name] = value
    return load_experiment(base)


def tables(run_dir) -> dict[str, list[dict]]:
    log = GameLog(str(run_dir))
    return {name: log.read(name).to_pylist() for name in SCHEMAS}


def test_every_proposal_is_scored_by_the_objective_into_the_proposals_table(tmp_path) -> None:
    """One `proposals` row per proposed task (never the eval suite's); a played task earns 4p̂(1−p̂) of its observed success."""
    run_experiment(experiment(run__generations=3), str(tmp_path / "run"))
    log = tables(tmp_path / "run")
    rows = log["proposals"]
    proposed = [t for t in log["tasks"] if t["source"] != "eval"]
    assert sorted((r["gen"], r["task_id"]) for r in rows) == sorted(
        (t["gen"], t["task_id"]) for t in proposed
    )
    eval_ids = {t["task_id"] for t in log["tasks"] if t["source"] == "eval"}
    assert not eval_ids & {r["task_id"] for r in rows}
    played = [r for r in rows if r["plays"]]
    assert played, "the uniform curriculum trains on fresh proposals"
    for row in played:
        rewards = [
            e["reward"]
            for e in log["episodes"]
            if e["gen"] == row["gen"] and e["purpose"] == "train" and e["task_id"] == row["task_id"]
        ]
        assert row["plays"] == len(rewards) and row["p_hat"] == pytest.approx(
            sum(rewards) / len(rewards)
        )
        assert row["proposer_reward"] == pytest.approx(learnability(row["p_hat"]))
        assert row["objective"] == "learnability" and row["proposer"] == "procedural"
    unplayed = [r for r in rows if r["accepted"] and not r["plays"]]
    assert all(r["proposer_reward"] is None for r in unplayed), "nothing observed, nothing paid"
    for gen_row in log["generations"]:
        mine = [
            r["proposer_reward"]
            for r in rows
            if r["gen"] == gen_row["gen"] and r["proposer_reward"] is not None
        ]
        assert gen_row["proposer_reward"] == pytest.approx(sum(mine) / len(mine))
        assert 0 < gen_row["pool_diversity"] < 1
    assert all(0 <= r["novelty"] <= 1 for r in rows)
    lines = summary_lines(summarize(str(tmp_path / "run")))
    assert any(line.startswith("proposer (learnability): mean reward") for line in lines), lines


@pytest.mark.slow
def test_a_learning_synthesizer_learns_after_each_generation_and_a_resumed_run_writes_the_same_log(
    tmp_path,
) -> None:
    """Proposals of generation g are made with the state learnt through g − 2 (they are submitted while g − 1 plays); a run stopped after 2 generations resumes to the uninterrupted log."""
    exp = experiment(synthesizer__name=COUNTING, synthesizer__actors=2)
    run_experiment(exp, str(tmp_path / "whole"))
    whole = tables(tmp_path / "whole")
    by_gen = {r["gen"]: r["proposer"] for r in whole["proposals"]}
    assert by_gen == {0: "counting@0", 1: "counting@0", 2: "counting@1", 3: "counting@2"}
    levels = {g: {r["level"] for r in whole["proposals"] if r["gen"] == g} for g in by_gen}
    assert levels[2] == {2} and levels[3] == {1}, "its state reached both proposing actors"
    evals = {t["level"] for t in whole["tasks"] if t["source"] == "eval"}
    assert evals == {1, 2}, "the eval suite's requests are binding: met whatever the policy"
    stopped = run_experiment(exp, str(tmp_path / "resumed"), stop_after=2)
    assert stopped.generations == 2
    resume_run(str(tmp_path / "resumed"))
    assert tables(tmp_path / "resumed") == whole
    shorter = experiment(synthesizer__name=COUNTING, synthesizer__actors=2, run__generations=3)
    run_experiment(shorter, str(tmp_path / "longer"))
    run_experiment(exp, str(tmp_path / "longer"), resume=True)  # a finished run made longer
    assert tables(tmp_path / "longer") == whole


def _episode(task_id: str, calls: list[ToolCall], reward: int) -> Episode:
    return Episode(
        task_id=task_id,
        world_id="w",
        calls=calls,
        observations=[],
        reward=Reward(value=reward, submitted=True, reason="test"),
    )


def test_flaky_and_ambiguous_proposals_are_paid_less_than_honest_ones_at_the_same_success(
    pool_tasks,
) -> None:
    """A task at p̂ = ½ earns the most, unless attempts with the same calls disagreed or the Judge found it nondeterministic or ambiguous."""
    honest, flaky, ambiguous = pool_tasks[:3]
    same = [ToolCall("get_order", {"order_id": 1}), ToolCall("submit", {})]
    other = [ToolCall("get_order", {"order_id": 2}), ToolCall("submit", {})]
    episodes = [
        _episode(honest.task_id, same, 1),
        _episode(honest.task_id, other, 0),
        _episode(flaky.task_id, same, 1),
        _episode(flaky.task_id, same, 0),
    ]
    ok = Verdict(task_id=None, accepted=True, checks={})
    verdicts = [
        ok.model_copy(update={"task_id": honest.task_id}),
        ok.model_copy(update={"task_id": flaky.task_id}),
        Verdict(
            task_id=ambiguous.task_id,
            accepted=False,
            checks={"ambiguity": CheckResult(passed=False, reason="two readings")},
        ),
    ]
    config = ProposerConfig()
    feedback = proposal_feedback(
        config,
        0,
        [honest, flaky, ambiguous],
        verdicts,
        episodes,
        novelties=[0.5, 0.5, 0.5],
    )
    assert [f.p_hat for f in feedback] == [0.5, 0.5, None]
    assert feedback[0].flaky is None and feedback[0].reward == 1.0
    assert "same calls" in (feedback[1].flaky or "") and feedback[1].reward == 0.0
    assert "ambiguity" in (feedback[2].flaky or "")
    assert feedback[2].reward == -(config.reject_penalty + config.flaky_penalty)
    assert proposer_reward(config, accepted=False, p=None) == -config.reject_penalty
    bonus = ProposerConfig(novelty_weight=0.5)
    assert proposer_reward(bonus, accepted=True, p=0.5, novelty=1.0) == 1.5
    assert proposer_reward(ProposerConfig(objective="absolute-zero"), accepted=True, p=1.0) == 0.0


@pytest.fixture(scope="module")
def pool_tasks():
    from coevo.agents.protocols import ProposalRequest
    from coevo.agents.synthesizers.procedural import ProceduralSynthesizer

    return ProceduralSynthesizer(["retail"]).propose(ProposalRequest(n=3, seed=1, level=1))


def test_the_watch_says_when_eval_is_flat_and_when_the_pool_collapses() -> None:
    """`plateau` once eval success stays within `flat` for `plateau` evaluations; `collapse` once diversity falls below the share of its best; each once per episode."""
    watch = Watch(WatchConfig(plateau=3, flat=0.05, collapse=0.6, window=2))
    events = []
    evals = [0.1, 0.3, 0.5, 0.52, 0.51, 0.5, 0.7, 0.71, 0.7]
    diversity = [0.5, 0.5, 0.5, 0.45, 0.3, 0.2, 0.2, 0.5, 0.5]
    for gen, (e, d) in enumerate(zip(evals, diversity, strict=True)):
        events += [(name, f["gen"]) for name, f in watch.observe(gen, e, d)]
    assert events == [("plateau", 4), ("collapse", 5), ("plateau", 8)]
    restored = Watch(WatchConfig(plateau=3, flat=0.05, collapse=0.6, window=2))
    restored.load(watch.state())
    assert restored.state() == watch.state()
