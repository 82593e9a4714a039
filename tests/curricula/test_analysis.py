"""Analysis of a real run (through the arena): metrics, lineage and export, checked against the log by hand."""

from __future__ import annotations

import json
from collections import defaultdict

import networkx as nx
import pytest
from coevo.arena import TaskSpec, ToolCall, World
from coevo.arena.errors import CoevoError
from coevo.arena.run.experiment import load_experiment
from coevo.arena.run.loop import run_experiment
from coevo.curricula.analysis import analyze, frontier_of, load_run
from coevo.curricula.analysis.export import compile_where, export_run, task_row
from coevo.curricula.analysis.lineage import lineage_graph, lineage_summary, write_graphml


@pytest.fixture(scope="module")
def run(ray_cluster, tmp_path_factory):
    out = tmp_path_factory.mktemp("analysis") / "run"
    exp = load_experiment(
        {
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


def test_success_and_frontier_match_a_count_by_hand(run) -> None:
    """Train and eval success per generation, eval per level, and the frontier, recomputed from rows."""
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
    for row in metrics["frontier"]:
        levels = {lv: s for (g, lv), s in got.items() if g == row["gen"]}
        assert row["frontier"] == frontier_of(levels)
    assert len(metrics["throughput"]) == run.generations == 6
    for row in metrics["pool"]:
        assert row["domains"] == {"retail": row["accepted"]}
        assert row["schemas"] == 1 <= row["worlds"] <= 2  # one domain's schema, world_pool = 2


def test_frontier_interpolates_where_success_crosses_one_half() -> None:
    """0.9 at level 1 and 0.3 at level 2 cross 0.5 two thirds of the way; below 0.5 from the start: none."""
    assert frontier_of({1: 0.9, 2: 0.3, 3: 0.0}) == pytest.approx(1 + 0.4 / 0.6)
    assert frontier_of({1: 0.9, 2: 0.8}) == 2.0
    assert frontier_of({1: 0.9, 2: 0.3, 3: 0.6}) == pytest.approx(1 + 0.4 / 0.6), (
        "the first crossing"
    )
    assert frontier_of({1: 0.2, 2: 0.1}) is None


def test_calibration_and_rejections_agree_with_the_log(run) -> None:
    """Per-generation Brier equals the one the loop logged; rejection counts match the verdicts."""
    metrics = analyze(run)
    logged = {r["gen"]: r["brier"] for r in run["generations"].to_pylist()}
    for row in metrics["calibration"]["per_generation"]:
        assert row["brier"] == pytest.approx(logged[row["gen"]])
    counts = defaultdict(int)
    for v in run["verdicts"].to_pylist():
        for check in v["failed"]:
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
    write_graphml(graph, str(tmp_path / "lineage.graphml"))
    again = nx.read_graphml(tmp_path / "lineage.graphml")
    assert again.number_of_edges() == graph.number_of_edges()


def test_exported_tasks_recreate_their_world_and_reward(run, tmp_path) -> None:
    """Every accepted, non-eval task is exported once; its reference solution earns 1 from the row alone."""
    path, count = export_run(run, tmp_path / "export")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    eval_ids = {t["task_id"] for t in run["tasks"].to_pylist() if t["source"] == "eval"}
    accepted = {v["task_id"] for v in run["verdicts"].to_pylist() if v["accepted"]} - eval_ids
    assert count == len(rows) == len(accepted)
    assert {r["task_id"] for r in rows} == accepted
    for row in rows[:5]:
        task = TaskSpec.model_validate(row["spec"])
        assert task.task_id == row["task_id"]
        assert row["prompt"].endswith(task.instruction)
        assert row["tools"][-1]["name"] == "submit"
        assert {t["function"]["name"] for t in row["openai_tools"]} == {
            t["name"] for t in row["tools"]
        }
        with World(task.world) as world:
            calls = [ToolCall(c["tool"], c.get("arguments", {})) for c in row["spec"]["solution"]]
            assert world.run(task, calls).reward.value == 1
    parquet, n = export_run(run, tmp_path / "p", fmt="parquet", where="level == 2")
    assert parquet.suffix == ".parquet" and n == sum(r["level"] == 2 for r in rows)


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


def test_a_row_needs_the_world_inline() -> None:
    """task_row refuses a task whose world is only an id."""
    from coevo.arena.testing import sample_tasks

    task = sample_tasks()[0]
    assert task_row(task)["spec"]["world"]["format"] == "coevo.world/1"
    with pytest.raises(CoevoError, match="inline"):
        task_row(task.model_copy(update={"world": task.world_id}))
