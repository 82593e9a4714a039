"""The task lineage graph: which task was mutated into which, by which operator (networkx).

Nodes are the run's tasks (every proposal; ``accepted``, ``level``,
``source``, ``gen``, and ``success`` — the mean reward of its training
episodes, or -1 when never played — as attributes); an edge ``parent →
child`` carries the mutation ``operator``. Fresh tasks are roots.

*Learnable tasks* are those the Solver is learning from: played, with a
success strictly between 0 and 1. :func:`lineage_summary` says how deep and
bushy the mutation trees are and which root lineages produced learnable tasks.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import networkx as nx
import pyarrow.compute as pc
from coevo.arena.analysis.metrics import Run
from coevo.arena.errors import CoevoError

__all__ = ["lineage_graph", "lineage_summary", "write_graphml"]


def lineage_graph(run: Run) -> nx.DiGraph:
    """The mutation history of ``run`` as a DiGraph (see the module docstring)."""
    graph = nx.DiGraph()
    accepted = {
        r["task_id"]
        for r in run["verdicts"].select(["task_id", "accepted"]).to_pylist()
        if r["accepted"]
    }
    episodes = run["episodes"]
    train = episodes.filter(pc.equal(episodes.column("purpose"), "train"))
    success = {
        r["task_id"]: r["reward_mean"]
        for r in train.group_by("task_id").aggregate([("reward", "mean")]).to_pylist()
    }
    for row in run["tasks"].to_pylist():
        task_id = row["task_id"]
        if task_id in graph:
            continue
        graph.add_node(
            task_id,
            gen=int(row["gen"]),
            level=int(row["level"]) if row["level"] is not None else -1,
            source=row["source"] or "",
            domain=row["domain"] or "",
            accepted=task_id in accepted or row["source"] == "eval",
            success=float(success.get(task_id, -1.0)),
        )
    for row in run["tasks"].to_pylist():
        if row["parent"]:
            if row["parent"] not in graph:
                graph.add_node(
                    row["parent"],
                    gen=-1,
                    level=-1,
                    source="unknown",
                    domain="",
                    accepted=False,
                    success=-1.0,
                )
            graph.add_edge(row["parent"], row["task_id"], operator=row["operator"] or "")
    return graph


def _root(graph: nx.DiGraph, node: str) -> str:
    while True:
        parents = list(graph.predecessors(node))
        if not parents:
            return node
        node = parents[0]


def lineage_summary(graph: nx.DiGraph | Run) -> dict[str, Any]:
    """Depth, branching, operators, and the root lineages that produced learnable tasks.

    Args:
        graph: the lineage graph (:func:`lineage_graph`), or the run to build it from.

    Raises:
        CoevoError: ``graph`` is neither a lineage graph nor a run.
    """
    if isinstance(graph, Run):
        graph = lineage_graph(graph)
    elif not isinstance(graph, nx.DiGraph):
        raise CoevoError(
            f"lineage_summary takes a lineage graph or a run, not a {type(graph).__name__}: "
            "pass lineage_graph(run) or the Run from load_run"
        )
    children = [n for n in graph if graph.in_degree(n) > 0]
    parents = [n for n in graph if graph.out_degree(n) > 0]
    depth = {n: 0 for n in graph if graph.in_degree(n) == 0}
    for node in nx.topological_sort(graph):
        for child in graph.successors(node):
            depth[child] = max(depth.get(child, 0), depth.get(node, 0) + 1)
    learnable = [n for n, d in graph.nodes(data=True) if 0.0 < d["success"] < 1.0]
    producing = Counter(_root(graph, n) for n in learnable if graph.in_degree(n) > 0)
    return {
        "tasks": graph.number_of_nodes(),
        "mutations": graph.number_of_edges(),
        "mutated_tasks": len(children),
        "max_depth": max(depth.values(), default=0),
        "mean_branching": (sum(graph.out_degree(n) for n in parents) / len(parents))
        if parents
        else 0.0,
        "operators": dict(Counter(d["operator"] for _, _, d in graph.edges(data=True))),
        "learnable_tasks": len(learnable),
        "learnable_from_mutation": sum(graph.in_degree(n) > 0 for n in learnable),
        "lineages_producing_learnable": [
            {"root": root, "learnable_tasks": count} for root, count in producing.most_common(10)
        ],
    }


def write_graphml(graph: nx.DiGraph, path: str) -> None:
    """Write the graph as GraphML (for Gephi, yEd, Cytoscape)."""
    nx.write_graphml(graph, path)
