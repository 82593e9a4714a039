"""Analysis of a real run (through the arena): metrics, lineage and export, checked against the log by hand."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import networkx as nx
import pytest
from coevo.arena import World
from coevo.arena.analysis import analyze, load_run, mastered_level
from coevo.arena.analysis.export import compile_where, export_run, read_tasks, task_row
from coevo.arena.analysis.lineage import lineage_graph, lineage_summary, write_graphml
from coevo.arena.analysis.paired import wilson_interval
from coevo.arena.errors import CoevoError
from coevo.arena.gamelog import GameLog, GenerationRecord, ProposalRow, TaskRow, WorldRow
from coevo.arena.novelty import distinct_share, diversity
from coevo.run.experiment import load_experiment
from coevo.run.loop import run_experiment

from tests.factories import run_cli

OLD_LOG = str(Path(__file__).resolve().parents[1] / "data" / "logs" / "v1-383f438")
"""A run directory of game-log schema 1 (before the proposals table), kept by the repository."""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("analysis") / "run"
    exp = load_experiment(
        {
            "ray": {"in_process": True},
            "judge": {"config": {"isolate": False}},
            "run": {"seed": 11, "generations": 6, "rollouts": 2, "chunk": 8},
            "synthesizer": {
                "name": "procedural",
                "config": {"domains": ["retail"], "world_pool": 2},
            },
            "solver": {"name": "linear-pg", "actors": 2, "config": {"lr": 0.2}},
            "curriculum": {"name": "accel", "tasks_per_gen": 6, "min_fill": 4, "levels": [1, 2]},
            "eval": {"levels": [1, 2], "per_level": 3, "every": 1},
        }
    )
    run_experiment(exp, str(out))
    return load_run(str(out))


def _mean(values):
    return sum(values) / len(values)


def test_success_and_mastered_level_match_a_count_by_hand(run) -> None:
    """Train and eval success per generation, eval per level, and the level mastered, recomputed from rows."""
    metrics = analyze(run)
    episodes = run["episodes"].to_pylist()
    by_gen = defaultdict(list)
    for e in episodes:
        if e["purpose"] == "train":
            by_gen[e["gen"]].append(e["reward"])
    assert {r["gen"]: r["success"] for r in metrics["success"]["train"]} == pytest.approx(
        {g: _mean(v) for g, v in by_gen.items()}
    )
    evals = run["evals"].to_pylist()
    by_level = defaultdict(list)
    for r in evals:
        by_level[(r["gen"], r["level"])].append(r["reward"])
    got = {(r["gen"], r["level"]): r["success"] for r in metrics["success"]["eval_by_level"]}
    assert got == pytest.approx({k: _mean(v) for k, v in by_level.items()})
    for row in metrics["mastered"]:
        levels = {lv: s for (g, lv), s in got.items() if g == row["gen"]}
        assert row["mastered"] == mastered_level(levels)
    assert metrics["frontier"] == [
        {"gen": r["gen"], "frontier": r["frontier"]} for r in run["generations"].to_pylist()
    ], "frontier is the curriculum's level, as logged"
    assert len(metrics["throughput"]) == run.generations == 6
    for row in metrics["pool"]:
        assert row["domains"] == {"retail": row["accepted"]}
        assert row["schemas"] == 1 <= row["worlds"] <= 2  # one domain's schema, world_pool = 2


def test_analyze_gives_each_eval_figure_its_wilson_interval(run) -> None:
    """`coevo analyze --json` gives every eval figure (per generation, level, domain) a 95% Wilson interval from its episodes, and the text output shows the final eval with its interval within 80 columns."""
    shown = run_cli("analyze", run.run_dir, "--json", "--no-irt")
    assert shown.returncode == 0, shown.stderr
    success = json.loads(shown.stdout)["success"]
    evals = run["evals"].to_pylist()
    for key, group in (("eval", "gen"), ("eval_by_level", "level"), ("eval_by_domain", "domain")):
        assert success[key], key
        for row in success[key]:
            rewards = [
                r["reward"] for r in evals if r["gen"] == row["gen"] and r[group] == row[group]
            ]
            low, high = wilson_interval(sum(rewards), len(rewards))
            assert (row["low"], row["high"]) == pytest.approx((low, high)), (key, row)
            assert row["low"] <= row["success"] <= row["high"]
            if 0 < row["success"] < 1:
                assert row["low"] < row["success"] < row["high"], "a proper interval inside (0, 1)"
    text = run_cli("analyze", run.run_dir, "--no-irt")
    last = success["eval"][-1]
    line = next(x for x in text.stdout.splitlines() if x.startswith("final eval"))
    assert line == (
        f"final eval (gen {last['gen']}): {last['success']:.2f}, 95% interval "
        f"{last['low']:.2f}–{last['high']:.2f} over {last['episodes']} episodes (Wilson)"
    )
    assert len(line) <= 80


def test_the_mastered_level_interpolates_where_success_crosses_one_half() -> None:
    """0.9 at level 1 and 0.3 at level 2 cross 0.5 two thirds of the way; below 0.5 from the start: none."""
    assert mastered_level({1: 0.9, 2: 0.3, 3: 0.0}) == pytest.approx(1 + 0.4 / 0.6)
    assert mastered_level({1: 0.9, 2: 0.8}) == 2.0
    assert mastered_level({1: 0.9, 2: 0.3, 3: 0.6}) == pytest.approx(1 + 0.4 / 0.6), (
        "the first crossing"
    )
    assert mastered_level({1: 0.2, 2: 0.1}) is None


def _auc_by_hand(pairs):
    """Over every (success, failure) pair: 1 when the success was predicted higher, a half when tied."""
    wins = [
        1.0 if a > b else 0.5 if a == b else 0.0
        for a, ya in pairs
        for b, yb in pairs
        if ya == 1 and yb == 0
    ]
    return sum(wins) / len(wins) if wins else None


def test_the_world_models_discrimination_per_level_and_at_the_frontier_matches_the_log(run) -> None:
    """AUC overall, per level and at the frontier (tasks of observed success 0.2–0.8 in their generation) equal a count by hand, and `coevo analyze` prints them."""
    metrics = analyze(run)["calibration"]
    p = {(r["gen"], r["task_id"]): r["p"] for r in run["predictions"].to_pylist()}
    level = {r["task_id"]: r["level"] for r in run["tasks"].to_pylist()}
    pairs = [
        (e["gen"], e["task_id"], p[(e["gen"], e["task_id"])], e["reward"])
        for e in run["episodes"].to_pylist()
        if e["purpose"] == "train" and not e["failure"] and (e["gen"], e["task_id"]) in p
    ]
    observed = defaultdict(list)
    for gen, task, _, reward in pairs:
        observed[(gen, task)].append(reward)
    at_frontier = [
        (x, y) for gen, task, x, y in pairs if 0.2 <= _mean(observed[(gen, task)]) <= 0.8
    ]
    overall = metrics["overall"]
    assert overall["episodes"] == len(pairs) and overall["frontier_episodes"] == len(at_frontier)
    assert overall["auc"] == pytest.approx(_auc_by_hand([(x, y) for _, _, x, y in pairs]))
    assert overall["auc_frontier"] == pytest.approx(_auc_by_hand(at_frontier))
    for row in metrics["per_level"]:
        mine = [(x, y) for _, task, x, y in pairs if level[task] == row["level"]]
        assert row["episodes"] == len(mine)
        assert row["auc"] == pytest.approx(_auc_by_hand(mine))
    assert {r["level"] for r in metrics["per_level"]} == {level[t] for _, t, _, _ in pairs}
    printed = run_cli("analyze", run.run_dir)
    assert printed.returncode == 0, printed.stderr
    assert f"AUC {overall['auc']:.3f}, AUC at the frontier {overall['auc_frontier']:.3f}" in (
        printed.stdout
    )
    as_json = json.loads(run_cli("analyze", run.run_dir, "--json").stdout)["calibration"]
    assert as_json["overall"]["auc_frontier"] == pytest.approx(overall["auc_frontier"])
    assert [r["auc"] for r in as_json["per_generation"]] == [
        r["auc"] for r in metrics["per_generation"]
    ]


def test_calibration_and_rejections_agree_with_the_log(run) -> None:
    """Per-generation Brier equals the one the loop logged; rejection counts match the rejected verdicts' failed checks (`error` where none failed)."""
    metrics = analyze(run)
    logged = {r["gen"]: r["brier"] for r in run["generations"].to_pylist()}
    for row in metrics["calibration"]["per_generation"]:
        assert row["brier"] == pytest.approx(logged[row["gen"]])
    counts = defaultdict(int)
    for v in run["verdicts"].to_pylist():
        for check in [] if v["accepted"] else v["failed"] or ["error"]:  # error: no check failed
            counts[(v["gen"], check)] += 1
    assert {(r["gen"], r["check"]): r["failed"] for r in metrics["rejections"]} == dict(counts)
    assert sum(r["count"] for r in metrics["calibration"]["reliability"]) == sum(
        r["episodes"] for r in metrics["calibration"]["per_generation"]
    )
    assert metrics["irt"]["abilities"], "one ability per solver version the model saw"


def test_the_lineage_graph_is_the_log_s_mutations(run, tmp_path) -> None:
    """An edge per logged mutation (parent → child, with its operator); GraphML round-trips."""
    graph = lineage_graph(run)
    mutated = [t for t in run["tasks"].to_pylist() if t["parent"]]
    assert mutated, "accel mutated some tasks"
    assert {(t["parent"], t["task_id"]) for t in mutated} == set(graph.edges)
    for t in mutated:
        assert graph.edges[t["parent"], t["task_id"]]["operator"] == t["operator"]
    summary = lineage_summary(graph)
    assert summary["mutations"] == len(mutated) and summary["max_depth"] >= 1
    assert lineage_summary(run) == summary, "a run is summarised through its graph"
    with pytest.raises(CoevoError, match=r"lineage_graph\(run\)"):
        lineage_summary(run.tables)  # type: ignore[arg-type]
    write_graphml(graph, str(tmp_path / "lineage.graphml"))
    again = nx.read_graphml(tmp_path / "lineage.graphml")
    assert again.number_of_edges() == graph.number_of_edges()


def test_exported_tasks_recreate_their_world_and_reward(run, tmp_path) -> None:
    """Every accepted, non-eval task is exported once; read back with its world, its reference solution earns 1."""
    manifest = export_run(run, tmp_path / "export")
    eval_ids = {t["task_id"] for t in run["tasks"].to_pylist() if t["source"] == "eval"}
    accepted = {v["task_id"] for v in run["verdicts"].to_pylist() if v["accepted"]} - eval_ids
    tasks = read_tasks(tmp_path / "export")
    assert manifest.tasks.rows == len(tasks) == len(accepted)
    assert {t.task_id for t in tasks} == accepted
    assert manifest.worlds is not None
    assert manifest.worlds.rows == len({t.world_id for t in tasks}) <= 2  # world_pool = 2
    worlds = {}
    for task in tasks:
        if task.world_id not in worlds:
            worlds[task.world_id] = World(task.world)
        reward = worlds[task.world_id].run(task, task.solution).reward
        assert reward.value == 1, (task.task_id, reward.detail())
    for world in worlds.values():
        world.close()
    level = {r["task_id"]: r["level"] for r in run["tasks"].to_pylist()}
    parquet = export_run(run, tmp_path / "p", fmt="parquet", where="level == 2")
    assert parquet.tasks.path == "tasks.parquet"
    assert [t.task_id for t in read_tasks(tmp_path / "p")] == [
        t.task_id for t in tasks if level[t.task_id] == 2
    ]


def test_where_is_safe_and_explains_itself() -> None:
    """Filters compare fields with constants; anything else is refused with the allowed forms."""
    keep = compile_where("gen >= 2 and 0.2 <= success <= 0.8 and domain in ['retail']")
    assert keep({"gen": 3, "success": 0.5, "domain": "retail"})
    assert not keep({"gen": 3, "success": None, "domain": "retail"})
    assert compile_where("not level == 1")({"level": 2})
    for bad, message in (
        ("__import__('os').system('true')", "not allowed"),
        ("lvl > 1", "unknown field"),
        ("gen >", "not an expression"),
    ):
        with pytest.raises(CoevoError, match=message):
            compile_where(bad)


def test_a_row_inlines_a_world_only_when_it_has_one() -> None:
    """task_row keeps the world by id; asked to inline it, it refuses a task whose world is only an id."""
    from coevo.run.testing import sample_tasks

    task = sample_tasks()[0]
    row = task_row(task, gen=3)
    assert row["gen"] == 3 and row["world_id"] == task.world_id
    assert json.loads(row["task"])["world"] == task.world_id
    assert json.loads(task_row(task, inline_world=True)["world"])["format"] == "coevo.world/1"
    by_id = task.model_copy(update={"world": task.world_id})
    assert task_row(by_id)["task"] == row["task"]
    with pytest.raises(CoevoError, match="inline"):
        task_row(by_id, inline_world=True)
    with pytest.raises(CoevoError, match="unknown fields"):
        task_row(task, lvl=2)


def _by_gen(rows, key):
    out = defaultdict(list)
    for r in rows:
        out[r["gen"]].append(r[key])
    return out


def test_proposal_shares_and_rewards_match_the_proposals_table(run) -> None:
    """Per generation, level and family shares sum to 1 and every count and mean is the table's, by hand."""
    proposals = analyze(run, irt=False)["proposals"]
    rows = run["proposals"].to_pylist()
    assert rows, "the loop logs a row per proposed task"
    per_gen = {r["gen"]: r for r in proposals["per_generation"]}
    assert set(per_gen) == {r["gen"] for r in rows}
    for key in ("level", "family"):
        shares = _by_gen(proposals[f"by_{key}"], "share")
        assert set(shares) == set(per_gen)
        for gen, values in shares.items():
            assert sum(values) == pytest.approx(1.0), f"{key} shares of generation {gen} sum to 1"
    counted = defaultdict(int)
    for r in rows:
        counted[(r["gen"], r["level"])] += 1
    assert {(r["gen"], r["level"]): r["proposals"] for r in proposals["by_level"]} == counted
    trained = {r["gen"]: r["trained_level"] for r in run["generations"].to_pylist()}
    for gen, mine in per_gen.items():
        these = [r for r in rows if r["gen"] == gen]
        played = [r["p_hat"] for r in these if r["p_hat"] is not None]
        assert mine["proposed"] == len(these)
        assert mine["accepted_share"] == pytest.approx(_mean([r["accepted"] for r in these]))
        paid = [r["proposer_reward"] for r in these if r["proposer_reward"] is not None]
        assert mine["proposer_reward"] == (pytest.approx(_mean(paid)) if paid else None)
        assert mine["played"] == len(played)
        assert mine["p_hat"] == (pytest.approx(_mean(played)) if played else None)
        rewards = [r["proposer_reward"] for r in these if r["p_hat"] is not None]
        assert mine["proposer_reward_played"] == (
            pytest.approx(_mean(rewards)) if rewards else None
        )
        assert mine["flaky"] == sum(r["flaky"] is not None for r in these)
        assert mine["trained_level"] == trained[gen]
        assert sum(mine["proposers"].values()) == len(these)
    proposers = {r["proposer"] for r in proposals["by_proposer"]}
    assert proposers == {"procedural", "mutation"}, (
        "versions are dropped; accel's mutations count apart"
    )
    assert proposals["design"] == [], "the procedural synthesizer draws no designs"


def test_diversity_is_the_logged_pool_diversity_of_the_accepted_tasks(run) -> None:
    """Each generation's pool diversity is the one logged, which is novelty.diversity of its accepted tasks."""
    rows = analyze(run, irt=False)["diversity"]
    assert [r["gen"] for r in rows] == list(range(run.generations))
    tasks, _ = GameLog(run.run_dir).task_specs()
    accepted = _by_gen([v for v in run["verdicts"].to_pylist() if v["accepted"]], "task_id")
    logged = {r["gen"]: r["pool_diversity"] for r in run["generations"].to_pylist()}
    for row in rows:
        pool = [tasks[t] for t in accepted[row["gen"]]]
        assert row["accepted"] == len(pool)
        assert row["pool_diversity"] == logged[row["gen"]]
        if len(pool) > 1:
            assert row["pool_diversity"] == pytest.approx(diversity(pool))
        assert row["distinct_share"] == (pytest.approx(distinct_share(pool)) if pool else None)


def test_a_learning_synthesizer_s_design_choices_are_shared_out_per_generation(tmp_path) -> None:
    """Each choice point's drawn values get their share of the proposals that drew a design; mutations and undesigned tasks are left out."""
    from coevo.run.testing import sample_tasks

    def designed(task, family, hops):
        design = {"drawn": {"family": family, "hops": hops}, "offered": {}}
        return task.model_copy(update={"provenance": {**task.provenance, "design": design}})

    plain = sample_tasks()
    tasks = [
        designed(plain[0], "action", 2),
        designed(plain[1], "action", 3),
        designed(plain[2], "question", 2),
        plain[3],
    ]
    proposers = ["learned-synth@0", "learned-synth@0", "mutation", "learned-synth@0"]
    log = GameLog(str(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "experiment.json").write_text("{}")
    record = GenerationRecord(
        0,
        worlds=[WorldRow.of(w) for w in {t.world.world_id: t.world for t in tasks}.values()],
        tasks=[TaskRow.of(t, "fresh") for t in tasks],
        proposals=[
            ProposalRow(
                task_id=t.task_id,
                proposer=who,
                accepted=True,
                p_hat=None,
                plays=0,
                predicted=None,
                proposer_reward=0.0,
                novelty=1.0,
                flaky=None,
                objective="learnability",
                level=None,
                family=None,
                domain=None,
            )
            for t, who in zip(tasks, proposers, strict=True)
        ],
    )
    parts = log.write(record)
    log.commit(0, parts, {name: len(rows) for name, rows in record.tables()}, {})
    proposals = analyze(load_run(str(tmp_path / "run")), irt=False)["proposals"]
    shares = {(r["point"], r["value"]): (r["proposals"], r["share"]) for r in proposals["design"]}
    assert shares == {
        ("family", "action"): (2, 1.0),
        ("hops", 2): (1, 0.5),
        ("hops", 3): (1, 0.5),
    }
    assert proposals["per_generation"][0]["proposers"] == {"learned-synth": 3, "mutation": 1}
    assert proposals["by_level"] == [{"gen": 0, "level": None, "proposals": 4, "share": 1.0}]
    json.dumps(proposals)  # JSON-ready


def test_an_older_log_without_proposals_still_analyses() -> None:
    """A schema-1 log has no proposals and no logged diversity: empty sections and nulls, not an error."""
    metrics = analyze(load_run(OLD_LOG), irt=False)
    assert all(rows == [] for rows in metrics["proposals"].values())
    assert [r["gen"] for r in metrics["diversity"]] == [0, 1]
    for row in metrics["diversity"]:
        assert row["pool_diversity"] is None
        assert 0 < row["distinct_share"] <= 1, "distinct signatures are measured from the tasks"
    json.dumps(metrics)
