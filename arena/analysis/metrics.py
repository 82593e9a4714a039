"""Analysing game logs: a run's tables, and the metrics a researcher looks at first.

    run = load_run("runs/quickstart")
    metrics = analyze(run)          # JSON-ready: per generation, per level, per check ...

Everything is computed with Arrow group-bys over the whole log (a million
episode rows take a fraction of a second), from the tables alone; the figures
the live table, the summary and the trackers show too come from
:mod:`coevo.arena.gamelog.figures`:

* ``success``: per generation, success on train and on eval; and per level
  and per domain (joining episodes to their tasks); each eval figure with its
  95% interval (``low``, ``high``: Wilson's, :func:`_with_interval`);
* ``suites``: in-domain and transfer side by side: the synthesized held-out
  suite, then each ``[[eval.suites]]`` suite (a file of tasks, a corpus's
  held-out split), per evaluated generation its success with a 95% interval
  and pass^k for k up to its trials (:func:`_suites`); ``success``'s eval
  figures are the synthesized suite's alone;
* ``mastered``: per generation, the level up to which eval success stays at
  or above 0.5 (linear between the last such level and the next one below);
* ``frontier``: per generation, the curriculum's level, as the loop logged it
  (the live table's ``frontier`` column; each curriculum has its own measure);
* ``groups``: per generation, the training groups played (a task's
  ``run.rollouts`` episodes), the ``informative`` ones (rewards that differ:
  what a group-baseline policy gradient learns from) and their ``share``,
  counted from the ``episodes`` table (:func:`~coevo.arena.gamelog.figures.training_groups`),
  and the tasks dynamic sampling played beyond the curriculum's batch
  (``extra_tasks``, as logged);
* ``pool``: per generation, the accepted tasks' domains, families,
  distinct worlds and distinct schemas;
* ``proposals``: per generation, what was proposed (the ``proposals``
  table): the share of each level, family and proposer, the accepted share,
  the mean proposer reward and observed success, the flaky count, and the
  share of each value a learning Synthesizer drew at each choice point of its
  designs (``provenance["design"]``);
* ``diversity``: per generation, the accepted pool's diversity as the loop
  logged it and its share of distinct signatures
  (:mod:`coevo.arena.novelty`);
* ``rejections``: per generation and per check, how many rejected proposals
  failed it (``error``: rejected with no failed check, not judged at all) and
  at what rate;
* ``calibration``: per generation, per level and overall, the World model's
  Brier score, expected calibration error and discrimination (``auc``; and
  ``auc_frontier``, on the tasks whose observed success lies in 0.2–0.8) on
  the training episodes of tasks it predicted in their generation
  (:func:`~coevo.arena.calibration.prediction_figures`); and the reliability
  table over the whole run;
* ``throughput``: per generation, episodes played and tasks accepted; when a
  role reports usage (LLM roles), its calls, input and output tokens, dollars,
  and tokens per second of the generation's wall time (from ``events.jsonl``:
  the log holds no timings);
* ``irt``: each solver version's ability and each task's difficulty, a Rasch
  model fitted to the episodes (:mod:`~coevo.arena.analysis.irt`);
* ``policies``: for an LLM Solver, per policy version (in the order played):
  its generations, its rollouts and their mean reward, train and eval, and
  the share of its turns whose calls the world carried out
  (:func:`~coevo.arena.trajectory.carried_out_turns`): what a model that
  cannot call tools yet learns first.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from coevo.arena.analysis.irt import fit_rasch
from coevo.arena.analysis.paired import paired_bootstrap, wilson_interval
from coevo.arena.analysis.passk import pass_hat_k, pass_k_of_log
from coevo.arena.bounded import MAX_JSON_BYTES
from coevo.arena.calibration import prediction_figures, reliability
from coevo.arena.codetask import CODETASK_FORMAT
from coevo.arena.errors import CoevoError
from coevo.arena.gamelog import SCHEMAS, GameLog, RunDir
from coevo.arena.gamelog.corpus import CORPUS_MANIFEST, read_corpus
from coevo.arena.gamelog.figures import (
    accepted_tasks,
    mean_success,
    played,
    predicted_outcomes,
    rejection_counts,
    scored_evals,
    spend,
    training_groups,
)
from coevo.arena.gamelog.log import has_format
from coevo.arena.novelty import TaskSignature, distinct_share, signature
from coevo.arena.spec import TaskSpec, WorldSpec
from coevo.arena.trajectory import carried_out_turns

__all__ = ["Run", "analyze", "calibration", "load_run", "mastered_level"]


@dataclass
class Run:
    """A run's game log, read whole.

    Attributes:
        run_dir: where it is.
        experiment: the experiment it ran (as recorded), as a dict.
        tables: every table of the log (pyarrow, with a ``gen`` column).
    """

    run_dir: str
    experiment: dict[str, Any]
    tables: dict[str, pa.Table] = field(default_factory=dict)

    def __getitem__(self, name: str) -> pa.Table:
        return self.tables[name]

    def __repr__(self) -> str:
        """Where the run is, its generations and each table's rows (not the tables themselves)."""
        gens = self.tables["generations"].num_rows if "generations" in self.tables else 0
        rows = ", ".join(f"{name}={table.num_rows}" for name, table in sorted(self.tables.items()))
        return f"Run({self.run_dir!r}, generations={gens}, rows: {rows or 'none'})"

    def to_pandas(self, name: str) -> Any:
        """The table as a pandas DataFrame (needs the ``frames`` extra)."""
        try:
            import pandas  # noqa: F401  (optional: the "frames" extra)
        except ImportError as exc:
            raise CoevoError("to_pandas needs pandas: pip install 'coevo[frames]'") from exc
        return self.tables[name].to_pandas()

    def to_polars(self, name: str) -> Any:
        """The table as a polars DataFrame (needs the ``frames`` extra)."""
        try:
            import polars  # optional: the "frames" extra
        except ImportError as exc:
            raise CoevoError("to_polars needs polars: pip install 'coevo[frames]'") from exc
        return polars.from_arrow(self.tables[name])

    @property
    def generations(self) -> int:
        """Committed generations."""
        return self.tables["generations"].num_rows


def load_run(run_dir: str) -> Run:
    """Read every table of the run in ``run_dir`` (committed generations only), or of a corpus (its committed shards).

    Raises:
        CoevoError: the directory holds no run, or its ``experiment.json`` is not a record.
    """
    run = RunDir(run_dir)
    if not run.exists("experiment.json") and run.exists(CORPUS_MANIFEST):
        # a corpus (coevo corpus build): the game log's tables, its shards as generations
        manifest, tables = read_corpus(run_dir)
        return Run(run_dir, {"run": {"name": "corpus"}, "corpus": manifest}, tables)
    if not run.exists("experiment.json"):
        raise CoevoError(run.no_run(run_dir))
    try:
        experiment = run.read_json("experiment.json")
    except (ValueError, UnicodeDecodeError) as exc:
        raise CoevoError(
            f"{run_dir}/experiment.json cannot be read: it is not JSON ({exc}); "
            "the run's record is damaged"
        ) from exc
    not_tables = (
        [
            f"`{k}` is {json.dumps(v)[:40]}"
            for k, v in experiment.items()
            if not isinstance(v, dict | None)
        ]
        if isinstance(experiment, dict)
        else [f"it is {type(experiment).__name__}"]
    )
    if not_tables:
        raise CoevoError(
            f"{run_dir}/experiment.json cannot be read: it is not an experiment record "
            f"(a JSON object of tables: {'; '.join(not_tables[:3])}); the run's record is "
            "damaged: restore it, or copy the experiment.json of a run of the same experiment"
        )
    log = GameLog(run)
    tables = {name: log.read(name) for name in SCHEMAS}
    return Run(run_dir, experiment, tables)


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.to_pylist()


def _tasks(run: Run) -> pa.Table:
    """One row per task id (the first time it was logged): level, domain, family, world."""
    tasks = run["tasks"].select(
        ["task_id", "level", "domain", "family", "world_id", "source", "gen"]
    )
    if tasks.num_rows == 0:
        return tasks
    _, first = np.unique(tasks.column("task_id").to_numpy(zero_copy_only=False), return_index=True)
    return tasks.take(pa.array(np.sort(first)))


def _synthesized(evals: pa.Table) -> pa.Table:
    """The ``evals`` rows of the synthesized held-out suite (``suite`` null: every row of an older log)."""
    return evals.filter(pc.is_null(evals.column("suite")))


def _success(run: Run, tasks: pa.Table) -> dict[str, Any]:
    episodes = played(run["episodes"])
    train = episodes.filter(pc.equal(episodes.column("purpose"), "train"))
    evals = _synthesized(scored_evals(run["evals"], run["episodes"]))
    joined = train.select(["task_id", "gen", "reward"]).join(
        tasks.select(["task_id", "level", "domain"]), keys="task_id", join_type="left outer"
    )
    return {
        "train": mean_success(train, ["gen"]),
        "eval": _with_interval(mean_success(evals, ["gen"])),
        "train_by_level": mean_success(joined, ["gen", "level"]),
        "train_by_domain": mean_success(joined, ["gen", "domain"]),
        "eval_by_level": _with_interval(mean_success(evals, ["gen", "level"])),
        "eval_by_domain": _with_interval(mean_success(evals, ["gen", "domain"])),
    }


def _with_interval(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each eval figure with its 95% interval, ``low`` and ``high``: the Wilson score interval.

    An eval episode's reward is 0 or 1 and each held-out task is played once
    a generation, so a figure is a binomial proportion over its episodes.
    Wilson's interval is closed-form (deterministic, no resampling) and,
    unlike the normal approximation, keeps its coverage and stays inside
    [0, 1] at small n and near 0 or 1 — where a level's figure on a dozen
    tasks often is. A bootstrap over tasks played once estimates the same
    binomial spread, with noise of its own.
    """
    out = []
    for row in rows:
        low, high = wilson_interval(row["success"] * row["episodes"], row["episodes"])
        out.append({**row, "low": low, "high": high})
    return out


def _suites(run: Run, success: dict[str, Any]) -> list[dict[str, Any]]:
    """In-domain and transfer side by side: the synthesized suite, then each ``[[eval.suites]]`` suite.

    Per suite and evaluated generation: success (pass^1) over the episodes
    played, its 95% interval, the tasks, the episodes the Solver could not play
    (``failed``, left out), and pass^k for k = 1 … trials. A suite played once
    per task gets Wilson's interval, as the synthesized suite; one played
    ``trials`` > 1 times a task gets a percentile bootstrap over its tasks
    (trials of one task are not independent draws), for pass^1 and pass^trials
    (``low_k``, ``high_k``), deterministic by a seed of the suite's name.
    """
    configs = (run.experiment.get("eval") or {}).get("suites") or []
    out = [
        {
            "name": "synthesized",
            "kind": "in-domain",
            "source": "the synthesized held-out suite ([eval] levels × per_level)",
            "trials": 1,
            "per_generation": success["eval"],
        }
    ]
    if not configs:
        return out
    failed_ids = {
        r["episode_id"]
        for r in run["episodes"].select(["episode_id", "failure"]).to_pylist()
        if r["failure"]
    }
    rows = run["evals"].select(["gen", "suite", "task_id", "episode_id", "reward"]).to_pylist()
    for config in configs:
        name = config.get("name")
        trials = int(config.get("trials") or 1)
        source = config.get("tasks") or f"{config.get('corpus')}, split {config.get('split')!r}"
        by_gen: dict[int, dict[str, list[int]]] = {}
        failed: dict[int, int] = {}
        for r in rows:
            if r["suite"] != name:
                continue
            if r["episode_id"] in failed_ids:
                failed[r["gen"]] = failed.get(r["gen"], 0) + 1
                continue
            by_gen.setdefault(r["gen"], {}).setdefault(r["task_id"], []).append(int(r["reward"]))
        per_generation = [
            _suite_figure(gen, tasks, trials, failed.get(gen, 0), name)
            for gen, tasks in sorted(by_gen.items())
        ]
        per_generation += [
            {"gen": g, "success": None, "episodes": 0, "tasks": 0, "failed": n}
            for g, n in sorted(failed.items())
            if g not in by_gen
        ]
        per_generation.sort(key=lambda r: r["gen"])
        out.append(
            {
                "name": name,
                "kind": "transfer",
                "source": source,
                "trials": trials,
                "per_generation": per_generation,
            }
        )
    return out


def _suite_figure(
    gen: int, tasks: dict[str, list[int]], trials: int, failed: int, name: str
) -> dict[str, Any]:
    """One suite's figures at one generation (see :func:`_suites`)."""
    episodes = sum(len(r) for r in tasks.values())
    successes = sum(sum(r) for r in tasks.values())
    n = min(len(r) for r in tasks.values())
    pass_k = {
        k: sum(pass_hat_k(sum(r), len(r), k) for r in tasks.values()) / len(tasks)
        for k in range(1, n + 1)
    }
    row: dict[str, Any] = {
        "gen": gen,
        "success": successes / episodes,
        "episodes": episodes,
        "tasks": len(tasks),
        "failed": failed,
        "pass_k": pass_k,
    }
    if trials == 1:
        row["low"], row["high"] = wilson_interval(successes, episodes)
        row["interval"] = "wilson"
        return row
    seed = int(hashlib.sha256(f"{name}/{gen}".encode()).hexdigest()[:8], 16)
    per_task = [sum(r) / len(r) for r in tasks.values()]
    _, row["low"], row["high"] = paired_bootstrap(per_task, n=2000, seed=seed)
    all_k = [pass_hat_k(sum(r), len(r), n) for r in tasks.values()]
    _, row["low_k"], row["high_k"] = paired_bootstrap(all_k, n=2000, seed=seed)
    row["interval"] = "bootstrap over tasks"
    return row


def mastered_level(by_level: dict[int, float]) -> float | None:
    """The level up to which success stays at or above 0.5, going up from the easiest (None if it starts below).

    Levels are taken in order while success stays at or above 0.5; the
    mastered level is the last of them plus the fraction of the way to the
    next level at which a straight line between the two crosses 0.5. A higher
    level that happens to be above 0.5 again does not move it. A Solver at or
    above 0.5 everywhere has mastered the highest level.
    """
    levels = sorted(by_level)
    if not levels or by_level[levels[0]] < 0.5:
        return None
    last = levels[0]
    for level in levels[1:]:
        if by_level[level] < 0.5:
            s0, s1 = by_level[last], by_level[level]
            return float(last + (s0 - 0.5) / (s0 - s1) * (level - last))
        last = level
    return float(last)


def _mastered(eval_by_level: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_gen: dict[int, dict[int, float]] = {}
    for row in eval_by_level:
        if row["level"] is not None:
            by_gen.setdefault(row["gen"], {})[row["level"]] = row["success"]
    return [{"gen": g, "mastered": mastered_level(levels)} for g, levels in sorted(by_gen.items())]


def _frontier(run: Run) -> list[dict[str, Any]]:
    """The curriculum's level per generation, as the loop logged it."""
    generations = run["generations"].select(["gen", "frontier"]).to_pylist()
    return sorted(generations, key=lambda r: r["gen"])


def _groups(run: Run) -> list[dict[str, Any]]:
    """Per generation: the training groups played, the informative ones and their share (from the episodes: older logs too), and what dynamic sampling played beyond the batch (null before schema 4)."""
    logged = {r["gen"]: r for r in _rows(run["generations"])}
    out = []
    for counted in training_groups(run["episodes"]):
        row = logged.get(counted["gen"], {})
        groups, found = counted["groups"], counted["informative"]
        out.append(
            {
                **counted,
                "share": found / groups if groups else None,
                "extra_tasks": row.get("extra_tasks"),
                "dynamic_sampling": row.get("dynamic_sampling"),
            }
        )
    return out


def _schemas(run: Run) -> dict[str, str]:
    """World id → a digest of its schema (the CREATE statements): worlds of one schema share it."""
    out = {}
    worlds = run["worlds"]
    for world_id, spec in zip(
        worlds.column("world_id").to_pylist(), worlds.column("spec").to_pylist(), strict=True
    ):
        schema = json.loads(spec).get("schema", [])
        out[world_id] = hashlib.sha256(json.dumps(schema).encode()).hexdigest()[:16]
    return out


def _pool(run: Run, tasks: pa.Table) -> list[dict[str, Any]]:
    schemas = _schemas(run)
    joined = accepted_tasks(
        run["verdicts"], tasks.select(["task_id", "domain", "family", "world_id"])
    )
    out = []
    for gen in sorted(set(joined.column("gen").to_pylist())):
        part = joined.filter(pc.equal(joined.column("gen"), gen))
        domains = pc.value_counts(part.column("domain")).to_pylist()
        families = pc.value_counts(part.column("family")).to_pylist()
        out.append(
            {
                "gen": gen,
                "accepted": part.num_rows,
                "domains": {d["values"]: d["counts"] for d in domains if d["values"] is not None},
                "families": {f["values"]: f["counts"] for f in families if f["values"] is not None},
                "worlds": len(set(part.column("world_id").to_pylist())),
                "schemas": len({schemas.get(w, w) for w in part.column("world_id").to_pylist()}),
            }
        )
    return out


def _proposer(version: str) -> str:
    """Who proposed, without the policy version: ``learned-synth@12`` → ``learned-synth``."""
    return version.split("@", 1)[0]


def _shares(proposals: pa.Table, key: str) -> list[dict[str, Any]]:
    """Per generation and value of ``key``: its proposals and their share of the generation's."""
    if proposals.num_rows == 0:
        return []
    totals = Counter(proposals.column("gen").to_pylist())
    counts = proposals.group_by(["gen", key]).aggregate([([], "count_all")]).to_pylist()
    out = [
        {
            "gen": r["gen"],
            key: r[key],
            "proposals": r["count_all"],
            "share": r["count_all"] / totals[r["gen"]],
        }
        for r in counts
    ]
    return sorted(out, key=lambda r: (r["gen"], r[key] is None, r[key] or 0))


def _per_generation(run: Run, proposals: pa.Table) -> list[dict[str, Any]]:
    """One row per generation that proposed: counts, accepted share, rewards, observed success."""
    grouped = proposals.group_by("gen").aggregate(
        [
            ([], "count_all"),
            ("accepted", "sum"),
            ("proposer_reward", "mean"),
            ("p_hat", "mean"),  # nulls (not played) are left out
            ("p_hat", "count"),
            ("flaky", "count"),
            ("novelty", "mean"),
            ("level", "mean"),
        ]
    )
    played = proposals.filter(pc.invert(pc.is_null(proposals.column("p_hat"))))
    played_reward = {
        r["gen"]: r["proposer_reward_mean"]
        for r in played.group_by("gen").aggregate([("proposer_reward", "mean")]).to_pylist()
    }
    trained = {r["gen"]: r["trained_level"] for r in _rows(run["generations"])}
    proposers: dict[int, Counter[str]] = {}
    objectives: dict[int, str] = {}
    for gen, version, objective in zip(
        proposals.column("gen").to_pylist(),
        proposals.column("proposer").to_pylist(),
        proposals.column("objective").to_pylist(),
        strict=True,
    ):
        proposers.setdefault(gen, Counter())[_proposer(version)] += 1
        objectives.setdefault(gen, objective)
    out = [
        {
            "gen": r["gen"],
            "proposed": r["count_all"],
            "accepted": r["accepted_sum"],
            "accepted_share": r["accepted_sum"] / r["count_all"],
            "proposer_reward": r["proposer_reward_mean"],
            "played": r["p_hat_count"],
            "proposer_reward_played": played_reward.get(r["gen"]),
            "p_hat": r["p_hat_mean"],
            "flaky": r["flaky_count"],
            "novelty": r["novelty_mean"],
            "level": r["level_mean"],
            "trained_level": trained.get(r["gen"]),
            "objective": objectives[r["gen"]],
            "proposers": dict(sorted(proposers[r["gen"]].items())),
        }
        for r in grouped.to_pylist()
    ]
    return sorted(out, key=lambda r: r["gen"])


def _by_proposer(proposals: pa.Table) -> list[dict[str, Any]]:
    """Per generation and proposer (version dropped): proposals, accepted share, mean reward and level."""
    named = proposals.append_column(
        "who", pa.array([_proposer(v) for v in proposals.column("proposer").to_pylist()])
    )
    grouped = named.group_by(["gen", "who"]).aggregate(
        [([], "count_all"), ("accepted", "sum"), ("proposer_reward", "mean"), ("level", "mean")]
    )
    out = [
        {
            "gen": r["gen"],
            "proposer": r["who"],
            "proposals": r["count_all"],
            "accepted_share": r["accepted_sum"] / r["count_all"],
            "proposer_reward": r["proposer_reward_mean"],
            "level": r["level_mean"],
        }
        for r in grouped.to_pylist()
    ]
    return sorted(out, key=lambda r: (r["gen"], r["proposer"]))


def _designs(run: Run) -> dict[str, Mapping[str, Any]]:
    """Task id → the design a learning Synthesizer drew for it (``provenance["design"]["drawn"]``), where one did."""
    tasks = run["tasks"]
    if tasks.num_rows == 0:
        return {}
    # only a record that mentions a design is parsed: most logs have none
    tasks = tasks.filter(pc.match_substring(tasks.column("spec"), '"design"'))
    out: dict[str, Mapping[str, Any]] = {}
    for task_id, spec in zip(
        tasks.column("task_id").to_pylist(), tasks.column("spec").to_pylist(), strict=True
    ):
        if task_id in out:
            continue
        design = (json.loads(spec).get("provenance") or {}).get("design")
        drawn = design.get("drawn") if isinstance(design, Mapping) else None
        if isinstance(drawn, Mapping):
            out[task_id] = drawn
    return out


def _design_shares(run: Run, proposals: pa.Table) -> list[dict[str, Any]]:
    """Per generation, choice point and value: the Synthesizer's own proposals that drew it, and their share.

    The share is of the generation's proposals whose design has that point; a
    mutation keeps its parent's design, so mutations are left out.
    """
    designs = _designs(run)
    if not designs:
        return []
    counts: Counter[tuple[int, str, Any]] = Counter()
    totals: Counter[tuple[int, str]] = Counter()
    for gen, task_id, version in zip(
        proposals.column("gen").to_pylist(),
        proposals.column("task_id").to_pylist(),
        proposals.column("proposer").to_pylist(),
        strict=True,
    ):
        drawn = designs.get(task_id)
        if drawn is None or version == "mutation":
            continue
        for point, value in drawn.items():
            value = value if isinstance(value, str | int | float | bool) else json.dumps(value)
            counts[(gen, point, value)] += 1
            totals[(gen, point)] += 1
    out = [
        {"gen": g, "point": p, "value": v, "proposals": n, "share": n / totals[(g, p)]}
        for (g, p, v), n in counts.items()
    ]
    return sorted(out, key=lambda r: (r["gen"], r["point"], str(r["value"])))


def _proposals(run: Run) -> dict[str, Any]:
    """What each generation proposed (the ``proposals`` table; empty for a log without it)."""
    proposals = run["proposals"]
    if proposals.num_rows == 0:
        return {
            "per_generation": [],
            "by_level": [],
            "by_family": [],
            "by_proposer": [],
            "design": [],
        }
    return {
        "per_generation": _per_generation(run, proposals),
        "by_level": _shares(proposals, "level"),
        "by_family": _shares(proposals, "family"),
        "by_proposer": _by_proposer(proposals),
        "design": _design_shares(run, proposals),
    }


def _signatures(run: Run, task_ids: set[str]) -> dict[str, TaskSignature]:
    """Task id → its novelty signature, for ``task_ids`` (each record and world parsed once)."""
    wanted = pa.array(sorted(task_ids), type=pa.string())
    tasks = run["tasks"].filter(pc.is_in(run["tasks"].column("task_id"), value_set=wanted))
    worlds = run["worlds"]
    world_specs = dict(
        zip(worlds.column("world_id").to_pylist(), worlds.column("spec").to_pylist(), strict=True)
    )
    parsed: dict[str, WorldSpec] = {}
    out: dict[str, TaskSignature] = {}
    for task_id, spec in zip(
        tasks.column("task_id").to_pylist(), tasks.column("spec").to_pylist(), strict=True
    ):
        if task_id in out or has_format(spec, CODETASK_FORMAT):
            continue  # a benchmark run's code tasks have no SQL signature
        task = TaskSpec.model_validate_json(spec)
        world_id = str(task.world)
        if world_id not in parsed and world_id in world_specs:
            parsed[world_id] = WorldSpec.model_validate_json(world_specs[world_id])
        out[task_id] = signature(task, parsed)
    return out


def _diversity(run: Run) -> list[dict[str, Any]]:
    """Per generation: the accepted pool's diversity as logged, and its share of distinct signatures."""
    verdicts = run["verdicts"]
    accepted = verdicts.filter(verdicts.column("accepted")).select(["task_id", "gen"])
    by_gen: dict[int, list[str]] = {}
    for task_id, gen in zip(
        accepted.column("task_id").to_pylist(), accepted.column("gen").to_pylist(), strict=True
    ):
        by_gen.setdefault(gen, []).append(task_id)
    signatures = _signatures(run, {t for ids in by_gen.values() for t in ids})
    out = []
    for r in sorted(_rows(run["generations"]), key=lambda r: r["gen"]):
        sigs = [signatures[t] for t in by_gen.get(r["gen"], []) if t in signatures]
        out.append(
            {
                "gen": r["gen"],
                "accepted": len(sigs),
                "pool_diversity": r.get("pool_diversity"),
                "distinct_share": distinct_share(sigs) if sigs else None,
            }
        )
    return out


def _rejections(run: Run) -> list[dict[str, Any]]:
    """Per generation and check: the rejected proposals that failed it (``error``: not judged), and their share of the judged."""
    verdicts = run["verdicts"].select(["gen", "accepted", "failed"])
    out = []
    for gen in sorted(set(verdicts.column("gen").to_pylist())):
        part = verdicts.filter(pc.equal(verdicts.column("gen"), gen))
        out += [
            {"gen": gen, "check": check, "failed": n, "rate": n / part.num_rows}
            for check, n in rejection_counts(part).items()
        ]
    return sorted(out, key=lambda r: (r["gen"], -r["failed"], r["check"]))


def calibration(episodes: pa.Table, predictions: pa.Table, tasks: pa.Table) -> dict[str, Any]:
    """A World model's figures (:func:`~coevo.arena.calibration.prediction_figures`) per generation, per level and overall.

    Args:
        episodes: the ``episodes`` table (its played training episodes are scored).
        predictions: ``predictions`` rows (``task_id``, ``gen``, ``p``): the log's, or another
            model's predictions of the same tasks (``benchmarks/bench_world_model.py``).
        tasks: one row per task id with its ``level``.

    Returns:
        ``per_generation``, ``per_level``, ``overall`` and the ``reliability`` table.
    """
    joined = predicted_outcomes(episodes, predictions).join(
        tasks.select(["task_id", "level"]), keys="task_id", join_type="left outer"
    )
    p_all = joined.column("p").to_numpy(zero_copy_only=False).astype(float)
    o_all = joined.column("reward").to_numpy(zero_copy_only=False).astype(float)
    gens = joined.column("gen").to_numpy(zero_copy_only=False).astype(np.int64)
    # a task predicted in two generations is two predictions: the frontier is per (gen, task)
    codes = pc.dictionary_encode(joined.column("task_id")).combine_chunks().indices
    task_code = codes.to_numpy(zero_copy_only=False).astype(np.int64)
    ids = gens * (int(task_code.max(initial=0)) + 1) + task_code
    levels = pc.fill_null(joined.column("level"), -1).to_numpy(zero_copy_only=False)

    def figures(mask: np.ndarray) -> dict[str, Any]:
        at = np.flatnonzero(mask)
        return prediction_figures(p_all[at], o_all[at], ids[at])

    per_gen = [{"gen": int(g), **figures(gens == g)} for g in sorted(set(gens.tolist()))]
    per_level = [
        {"level": int(level), **figures(levels == level)}
        for level in sorted(set(levels.tolist()) - {-1})
    ]
    table = [
        {"predicted": mean_p, "observed": observed, "count": n}
        for mean_p, observed, n in (reliability(p_all, o_all) if len(p_all) else [])
    ]
    return {
        "per_generation": per_gen,
        "per_level": per_level,
        "overall": figures(np.ones(len(p_all), dtype=bool)),
        "reliability": table,
    }


def generation_seconds(run_dir: str) -> dict[int, float]:
    """Each generation's wall time, from the ``generation`` events of ``RUN_DIR/events.jsonl``.

    The game log holds no timings (the same seed gives the same log); the
    events do. A generation played twice (stopped before its commit, then
    resumed) counts its last time. Empty when there are no events, or when
    the file is refused (more than :data:`~coevo.arena.bounded.MAX_JSON_BYTES`,
    a link, not a regular file).
    """
    run = RunDir(run_dir)
    if not run.exists("events.jsonl"):
        return {}
    try:
        data = run.read_bytes("events.jsonl", limit=MAX_JSON_BYTES)
    except OSError:  # refused or unreadable: no timings, the rest of the analysis goes on
        return {}
    lines = data.decode("utf-8", "replace").splitlines()
    seconds: dict[int, float] = {}
    for line in lines:
        if '"generation"' not in line:  # most events are not: skip them unparsed
            continue
        try:
            event = json.loads(line)
            if event.get("event") == "generation":
                seconds[int(event["gen"])] = float(event["seconds"])
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            continue  # a line cut by a crash, or not coevo's: no timing for it
    return seconds


def _throughput(run: Run) -> list[dict[str, Any]]:
    spent = {r["gen"]: r for r in spend(run["usage"], ["gen"])}
    seconds = generation_seconds(run.run_dir) if spent else {}
    out = []
    for r in sorted(_rows(run["generations"]), key=lambda r: r["gen"]):
        used = spent.get(r["gen"], {})
        took = seconds.get(r["gen"])
        tokens = used.get("tokens")
        out.append(
            {
                "gen": r["gen"],
                "episodes": r["train_episodes"],
                "accepted": r["accepted"],
                "proposed": r["proposed"],
                "calls": used.get("calls"),
                "input_tokens": used.get("input_tokens"),
                "output_tokens": used.get("output_tokens"),
                "tokens": tokens,
                "dollars": used.get("dollars"),
                "seconds": took,
                "tokens_per_second": tokens / took if tokens is not None and took else None,
            }
        )
    return out


def _irt(run: Run) -> dict[str, Any]:
    """Abilities per solver version and difficulty per task, fitted to the run's episodes."""
    return fit_rasch(played(run["episodes"]).select(["solver", "task_id", "reward"]))


def _policies(run: Run) -> list[dict[str, Any]]:
    """Per policy version that played (first played first): rollouts, reward and the share of turns carried out."""
    table = run.tables.get("trajectories")
    if table is None or not table.num_rows:
        return []
    columns = ["gen", "policy_version", "purpose", "reward", "messages", "failure", "episode_id"]
    rows = table.select(columns)
    evals = run.tables.get("evals")
    transfer = set()  # a further suite's eval episodes: reported with their suite, not here
    if evals is not None and "suite" in evals.column_names:
        pairs = evals.select(["episode_id", "suite"]).to_pylist()
        transfer = {r["episode_id"] for r in pairs if r["suite"] is not None}
    out: dict[str, dict[str, Any]] = {}
    for row in rows.to_pylist():
        if row["failure"] is not None or row["purpose"] not in ("train", "eval"):
            continue
        if row["episode_id"] in transfer:
            continue
        mine = out.setdefault(
            row["policy_version"],
            {
                "version": row["policy_version"],
                "gens": [],
                "train": [],
                "eval": [],
                "turns": [0, 0],
            },
        )
        if row["gen"] not in mine["gens"]:
            mine["gens"].append(row["gen"])
        mine[row["purpose"]].append(row["reward"])
        try:
            messages = json.loads(row["messages"])
        except (ValueError, RecursionError):
            messages = []
        carried, turns = carried_out_turns(messages if isinstance(messages, list) else [])
        mine["turns"][0] += carried
        mine["turns"][1] += turns

    def mean(values: list[int]) -> float | None:
        return sum(values) / len(values) if values else None

    return [
        {
            "version": v["version"],
            "first_gen": min(v["gens"]),
            "last_gen": max(v["gens"]),
            "train_rollouts": len(v["train"]),
            "train_reward": mean(v["train"]),
            "eval_rollouts": len(v["eval"]),
            "eval_reward": mean(v["eval"]),
            "turns": v["turns"][1],
            "carried_out": v["turns"][0] / v["turns"][1] if v["turns"][1] else None,
        }
        for v in sorted(out.values(), key=lambda v: (min(v["gens"]), v["version"]))
    ]


def analyze(run: Run, *, irt: bool = True) -> dict[str, Any]:
    """Every metric of the module docstring, JSON-ready."""
    tasks = _tasks(run)
    success = _success(run, tasks)
    return {
        "run_dir": run.run_dir,
        "name": run.experiment.get("run", {}).get("name"),
        "curriculum": run.experiment.get("curriculum", {}).get("name"),
        "generations": run.generations,
        "success": success,
        "suites": _suites(run, success),
        "mastered": _mastered(success["eval_by_level"]),
        "frontier": _frontier(run),
        "groups": _groups(run),
        "pool": _pool(run, tasks),
        "proposals": _proposals(run),
        "diversity": _diversity(run),
        "rejections": _rejections(run),
        "calibration": calibration(run["episodes"], run["predictions"], tasks),
        "throughput": _throughput(run),
        "irt": _irt(run) if irt else None,
        "pass_k": _pass_k(run) if run.experiment.get("benchmark") else None,
        "policies": _policies(run),
    }


def _pass_k(run: Run) -> dict[str, Any]:
    """A benchmark run's pass^k over its trials, overall and per domain (:mod:`~coevo.arena.analysis.passk`)."""
    return pass_k_of_log(run["episodes"], run["evals"])
