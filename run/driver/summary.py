"""The figures a run ends with, from the tables its generations wrote, and the lines that show them.

``coevo run`` and ``coevo resume`` gather, generation by generation, the
columns the summary needs from the tables each generation wrote
(:class:`RunTables`, fed :attr:`~coevo.run.generation.state.GenerationReport.tables`);
only the generations committed before a resume are read from the log. A run
summarized after the fact (``coevo resume`` of a finished run) is read from
its log. The figures it shares with the live table, the trackers and
``coevo analyze`` (rejections by check) come from
:mod:`coevo.arena.gamelog.figures`.

Kept apart from :mod:`~coevo.run.loop` (which loads Ray) so that a
finished run is answered at once: ``coevo resume`` of a run with nothing
left to do, and ``coevo run`` into a finished run directory, read the log and
print this without starting Ray.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from coevo.arena.analysis.paired import wilson_interval
from coevo.arena.analysis.passk import pass_k_of_log
from coevo.arena.gamelog import SCHEMAS, GameLog, RunDir
from coevo.arena.gamelog.figures import rejection_counts, spend, top_rejections
from coevo.arena.secrets import redact_value
from coevo.run.generation.selfplay import Watch, WatchConfig

__all__ = ["RunTables", "summarize", "summary_lines", "tokens_per_second"]

_COLUMNS: Final[Mapping[str, list[str] | None]] = {
    "generations": None,  # every column
    "policies": ["version", "staleness"],
    "ingested": ["episodes", "rejected", "error", "disagreed"],
    "proposals": ["p_hat", "proposer_reward", "flaky", "objective"],
    "tasks": ["source"],
    "evals": ["gen", "task_id", "episode_id", "reward", "suite"],  # the suite's size, the intervals
    "episodes": ["episode_id", "failure"],  # failed ones only (a benchmark's: all, for pass^k)
    "verdicts": ["accepted", "failed"],
    "usage": ["gen", "calls", "input_tokens", "output_tokens", "dollars"],
}
_BENCHMARK_COLUMNS: Final[Mapping[str, list[str] | None]] = {
    "episodes": ["episode_id", "failure"],
    "evals": ["gen", "task_id", "episode_id", "domain", "reward", "suite"],
}


class RunTables:
    """The columns of the log a run's summary is made from, gathered as its generations are written.

    Args:
        benchmark: a benchmark run (its summary has pass^k: the ``episodes`` and ``evals``
            columns it needs are kept too).
    """

    def __init__(self, *, benchmark: bool = False) -> None:
        self.benchmark = benchmark
        self.columns = {**_COLUMNS, **(_BENCHMARK_COLUMNS if benchmark else {})}
        self._parts: dict[str, list[pa.Table]] = {name: [] for name in self.columns}

    @classmethod
    def read(cls, log: GameLog, *, benchmark: bool = False) -> RunTables:
        """The committed generations' columns, read from ``log`` (a run summarized after the fact, or before a resume)."""
        tables = cls(benchmark=benchmark)
        for name, columns in tables.columns.items():
            tables._parts[name].append(tables._kept(name, log.read(name, columns=columns)))
        return tables

    def add(self, tables: Mapping[str, pa.Table]) -> None:
        """Keep what the summary needs of one generation's tables as written (:attr:`GenerationReport.tables`)."""
        for name, columns in self.columns.items():
            table = tables[name]
            self._parts[name].append(
                self._kept(name, table if columns is None else table.select(columns))
            )

    def _kept(self, name: str, table: pa.Table) -> pa.Table:
        """Of the ``episodes`` of a run that is no benchmark, the failed ones only (the eval intervals leave them out)."""
        if name != "episodes" or self.benchmark:
            return table
        return table.filter(pc.is_valid(table.column("failure")))

    def __getitem__(self, name: str) -> pa.Table:
        parts = self._parts[name]
        if not parts:
            empty = GameLog.as_read(0, {name: SCHEMAS[name].empty_table()})[name]
            columns = self.columns[name]
            return empty if columns is None else empty.select(columns)
        return pa.concat_tables(parts)


def _recorded(run_dir: str) -> dict[str, Any]:
    """The run's ``experiment.json`` as recorded (empty when it cannot be read)."""
    try:
        recorded = RunDir(run_dir).read_json("experiment.json")
    except (OSError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def summarize(run_dir: str, tables: RunTables | None = None) -> dict[str, Any]:
    """The figures a run ends with.

    Args:
        run_dir: the run directory.
        tables: what its generations wrote (:class:`RunTables`); None reads the log.
    """
    recorded = _recorded(run_dir)
    benchmark = bool(recorded.get("benchmark"))
    if tables is None:
        tables = RunTables.read(GameLog(run_dir), benchmark=benchmark)
    rows = tables["generations"].to_pylist()
    policies = tables["policies"].to_pylist()
    ingested = tables["ingested"].to_pylist()
    evals = [(r["gen"], r["eval_success"]) for r in rows if r["eval_success"] is not None]
    levels = [r["trained_level"] for r in rows if r["trained_level"] is not None]
    third = max(1, len(levels) // 3)
    summary = {
        "run_dir": run_dir,
        "generations": len(rows),
        "episodes": sum(r["train_episodes"] for r in rows),
        "eval_success_first": evals[0][1] if evals else None,
        "eval_success_last": evals[-1][1] if evals else None,
        **_eval_intervals(tables["evals"], tables["episodes"], [g for g, _ in evals]),
        "trained_level_first_third": sum(levels[:third]) / third if levels else None,
        "trained_level_last_third": sum(levels[-third:]) / third if levels else None,
        "train_success_last": rows[-1]["train_success"] if rows else None,
        **_groups(rows),
        "proposed": sum(r["proposed"] for r in rows),
        "rejected": sum(r["rejected"] for r in rows),
        "accepted": sum(r["accepted"] for r in rows),
        "failures": sum(r["failures"] for r in rows),
        "top_rejections": top_rejections(rejection_counts(tables["verdicts"])),
        # the trainer hand-off (a [trainer] table): the versions played, in order, and the lag
        "policy_versions": list(dict.fromkeys(p["version"] for p in policies)),
        "max_staleness_seen": max((p["staleness"] for p in policies), default=None),
        "batches_handed_out": len(policies),
        # rollouts an external trainer drove, from the inbox
        "external_episodes": sum(r["episodes"] for r in ingested),
        "external_rejected": sum(r["rejected"] + (r["error"] is not None) for r in ingested),
        "external_disagreed": sum(r["disagreed"] for r in ingested),
        **_proposer(tables["proposals"].to_pylist()),
        "stalls": _stalls(recorded, rows),
        **_eval_suite(recorded, tables["tasks"], tables["evals"]),
        "spend": _spend(tables["usage"]),
    }
    if benchmark:  # trials, not training: pass^k over them, every episode played
        summary["pass_k"] = pass_k_of_log(tables["episodes"], tables["evals"])
        summary["episodes"] = tables["episodes"].num_rows
    return dict(redact_value(summary))  # causes quote what failed: no key among them


def _groups(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The training groups played, the informative ones (rewards that differ) and their share, and what dynamic sampling played beyond the curricula's batches.

    Generations logged before these were counted (schema < 4) are left out.
    """
    counted = [r for r in rows if r.get("informative_groups") is not None]
    groups = sum(r["trained_tasks"] for r in counted)
    found = sum(r["informative_groups"] for r in counted)
    return {
        "groups": groups,
        "informative_groups": found,
        "informative_share": found / groups if groups else None,
        "informative_share_by_generation": [r["informative_share"] for r in counted],
        "dynamic_sampling": any(r.get("dynamic_sampling") for r in counted),
        "extra_tasks": sum(r.get("extra_tasks") or 0 for r in counted),
    }


def _spend(usage: pa.Table) -> dict[str, Any] | None:
    """What the roles that report usage (LLM roles) spent: in total, and tokens per generation (None: none report)."""
    if usage.num_rows == 0:
        return None
    total = spend(usage, [])[0]
    return {
        "calls": total["calls"],
        "input_tokens": total["input_tokens"],
        "output_tokens": total["output_tokens"],
        "dollars": total["dollars"],
        "tokens_by_generation": {r["gen"]: r["tokens"] for r in spend(usage, ["gen"])},
    }


def tokens_per_second(summary: dict[str, Any], seconds: Mapping[int, float]) -> float | None:
    """The tokens per second of wall time over the generations timed in ``seconds`` (this invocation's)."""
    spent = (summary.get("spend") or {}).get("tokens_by_generation") or {}
    timed = [gen for gen in seconds if gen in spent]
    took = sum(seconds[gen] for gen in timed)
    return sum(spent[gen] for gen in timed) / took if timed and took > 0 else None


def _eval_intervals(evals: pa.Table, episodes: pa.Table, gens: list[int]) -> dict[str, Any]:
    """The 95% Wilson interval of the first and the last generation's eval success, and their episodes.

    Over the synthesized suite's episodes that were played (``suite`` null; an
    episode the Solver could not play is left out, as ``eval_success`` leaves it).
    """
    if not gens:
        return {
            "eval_interval_first": None,
            "eval_interval_last": None,
            "eval_episodes_first": 0,
            "eval_episodes_last": 0,
        }
    failed = set(
        episodes.filter(pc.is_valid(episodes.column("failure"))).column("episode_id").to_pylist()
    )
    rows = [
        r
        for r in evals.select(["gen", "episode_id", "reward", "suite"]).to_pylist()
        if r["suite"] is None and r["episode_id"] not in failed
    ]
    out: dict[str, Any] = {}
    for key, gen in (("first", gens[0]), ("last", gens[-1])):
        rewards = [r["reward"] for r in rows if r["gen"] == gen]
        interval = wilson_interval(sum(rewards), len(rewards)) if rewards else None
        out[f"eval_interval_{key}"] = None if interval is None else [round(x, 4) for x in interval]
        out[f"eval_episodes_{key}"] = len(rewards)
    return out


def _eval_suite(recorded: Mapping[str, Any], tasks: pa.Table, evals: pa.Table) -> dict[str, Any]:
    """The synthesized held-out suite's size, and what the experiment asked for (``eval.per_level`` × levels).

    Its tasks are the ``eval`` tasks; beside ``[[eval.suites]]`` (whose tasks are
    ``eval`` tasks too) they are those its ``evals`` rows (``suite`` null) played.
    """
    config = recorded.get("eval") or {}
    if isinstance(config, dict) and config.get("suites"):
        rows = zip(
            evals.column("task_id").to_pylist(), evals.column("suite").to_pylist(), strict=True
        )
        made = len({task for task, suite in rows if suite is None})
    else:
        made = sum(s == "eval" for s in tasks.column("source").to_pylist())
    try:
        asked = None if recorded.get("benchmark") else config["per_level"] * len(config["levels"])
    except (KeyError, TypeError):
        asked = None
    return {"eval_tasks": made, "eval_asked": asked}


def _proposer(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the proposals earned: the objective, the mean reward, and how many were flaky."""
    middle = [r for r in rows if r["p_hat"] is not None and 0 < r["p_hat"] < 1]
    paid = [r["proposer_reward"] for r in rows if r["proposer_reward"] is not None]
    return {
        "objective": rows[-1]["objective"] if rows else None,
        "proposer_reward": sum(paid) / len(paid) if paid else None,
        "proposals_scored": len(rows),
        "proposals_flaky": sum(r["flaky"] is not None for r in rows),
        "proposals_middle": len(middle),
        "proposals_middle_flaky": sum(r["flaky"] is not None for r in middle),
    }


def _stalls(recorded: Mapping[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The watch's plateau and collapse events, found again from the ``generations`` rows."""
    try:
        watch = Watch(WatchConfig.model_validate(recorded.get("watch") or {}))
    except ValueError:
        watch = Watch(WatchConfig())
    found = []
    for row in rows:
        for name, fields in watch.observe(
            row["gen"], row["eval_success"], row.get("pool_diversity")
        ):
            found.append({"event": name, **fields})
    return found


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _interval(interval: Any) -> str:
    """`` [low, high]`` of a 95% interval ('' when there is none)."""
    return f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else ""


def _eval_count(summary: Mapping[str, Any]) -> str:
    """How many eval episodes the first and last figures rest on, and what the brackets are."""
    first, last = summary.get("eval_episodes_first"), summary.get("eval_episodes_last")
    if not first or not last:
        return ""
    each = f"{first} episodes each" if first == last else f"{first} and {last} episodes"
    return f" ({each}; 95% intervals)"


def _figure(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _benchmark_lines(summary: dict[str, Any], passes: dict[str, Any]) -> list[str]:
    """A benchmark run's summary: the pool, the trials, pass^k overall and per domain."""
    lines = [
        f"{_plural(summary['generations'], 'trial')} of {_plural(summary['accepted'], 'task')} "
        f"({summary['rejected']} rejected), {_plural(summary['episodes'], 'episode')}; "
        f"{_plural(summary['failures'], 'role failure')} recorded",
        "pass^k: " + (", ".join(f"k={k} {_figure(v)}" for k, v in passes["pass_k"].items()) or "–"),
    ]
    lines += [
        f"  {domain}: {_plural(table['tasks'], 'task')}, "
        + ", ".join(f"k={k} {_figure(v)}" for k, v in table["pass_k"].items())
        for domain, table in passes["domains"].items()
    ]
    if passes["failed"]:
        lines.append(
            f"{_plural(passes['failed'], 'episode')} the Solver could not play (left out of pass^k)"
        )
    lines += _suite_and_rejections(summary)
    lines += _spend_lines(summary)
    lines.append(f"game log: {str(summary['run_dir']).rstrip('/')}/log")
    return lines


def _suite_and_rejections(summary: dict[str, Any]) -> list[str]:
    """A line for an eval suite short of what was asked, and one for the rejections by check."""
    lines = []
    asked, made = summary.get("eval_asked"), summary.get("eval_tasks")
    if asked and made is not None and made < asked:
        lines.append(
            f"eval suite: {made} of the {asked} tasks asked for (the synthesizer made or the "
            "Judge accepted no more): eval success is measured on those"
        )
    if summary.get("top_rejections"):
        checks = ", ".join(f"{name} {n}" for name, n in summary["top_rejections"].items())
        lines.append(f"rejections by check: {checks}")
    return lines


def _spend_lines(summary: dict[str, Any]) -> list[str]:
    """What the LLM roles spent: tokens in and out, per generation, tokens/s, dollars (none when no role reports usage)."""
    spent = summary.get("spend")
    if not spent:
        return []
    per_gen = spent["tokens_by_generation"]
    tokens = spent["input_tokens"] + spent["output_tokens"]
    rate = summary.get("tokens_per_second")
    return [
        f"tokens: {tokens:,} in {spent['calls']:,} calls ({spent['input_tokens']:,} in, "
        f"{spent['output_tokens']:,} out)",
        f"  {tokens / max(len(per_gen), 1):,.0f} per generation"
        + ("" if rate is None else f", {rate:,.0f} per second")
        + (f"; ${spent['dollars']:.2f} at list price" if spent["dollars"] else ""),
    ]


def _group_lines(summary: dict[str, Any]) -> list[str]:
    """The training groups: how many were informative (and, with dynamic sampling, what it played beyond the batches)."""
    groups = summary.get("groups")
    if not groups:
        return []
    lines = [
        f"groups: {summary['informative_groups']} of {groups} informative "
        f"({summary['informative_share']:.0%}: rewards that differ)"
    ]
    if summary.get("dynamic_sampling"):
        lines.append(
            f"dynamic sampling: {_plural(summary['extra_tasks'], 'task')} played beyond "
            "the curriculum's batches"
        )
    return lines


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The summary as the lines ``coevo run`` ends with (each at most about 80 characters)."""
    passes = summary.get("pass_k")
    if passes is not None:  # a benchmark run: trials, not training
        return _benchmark_lines(summary, passes)
    lines = [
        f"{_plural(summary['generations'], 'generation')}, "
        f"{_plural(summary['episodes'], 'training episode')}, "
        f"{_plural(summary['failures'], 'role failure')} recorded",
        f"tasks: {summary['accepted']} accepted, {summary['rejected']} rejected",
        f"eval success {_figure(summary['eval_success_first'])}"
        f"{_interval(summary.get('eval_interval_first'))} → "
        f"{_figure(summary['eval_success_last'])}"
        f"{_interval(summary.get('eval_interval_last'))}{_eval_count(summary)}",
        f"level trained on {_figure(summary['trained_level_first_third'])} → "
        f"{_figure(summary['trained_level_last_third'])} (first → last third)",
    ]
    lines += _group_lines(summary)
    if summary["generations"] and not summary["accepted"]:
        lines.append("no task was accepted, so nothing was trained")
        if not summary.get("proposed", summary["rejected"]):
            lines.append("the synthesizer proposed none: see synthesis_attempt in events.jsonl")
    lines += _suite_and_rejections(summary)
    lines += _spend_lines(summary)
    for role, failing in summary.get("roles_failing", {}).items():
        gens = failing["generations"]
        lines.append(
            f"{role}: every call failed in {_plural(len(gens), 'generation')} "
            f"({', '.join(map(str, gens[:8]))}{', …' if len(gens) > 8 else ''}); "
            f"{failing['failed']} of {failing['calls']} calls failed, the last: {failing['error']}"
        )
    versions = summary.get("policy_versions") or []
    if versions:
        shown = " → ".join(versions if len(versions) <= 4 else [versions[0], "…", *versions[-2:]])
        lines.append(
            f"trainer: {summary['batches_handed_out']} "
            f"batch{'es' * (summary['batches_handed_out'] != 1)} handed out; "
            f"{_plural(len(versions), 'policy version')} played ({shown}); staleness at most "
            f"{summary['max_staleness_seen']}"
        )
    if unloads := summary.get("adapter_unloads_failed"):
        lines.append(
            f"warning: {_plural(unloads, 'unload')} of an old LoRA adapter failed "
            "(adapter_unload_failed in events.jsonl): the server keeps those adapters until "
            "it restarts or they are unloaded by hand (POST /v1/unload_lora_adapter)"
        )
    if summary.get("external_episodes") or summary.get("external_rejected"):
        lines.append(
            f"inbox: {_plural(summary['external_episodes'], 'external episode')} ingested, "
            f"{summary['external_rejected']} rejected (rollouts and unreadable parts), "
            f"{summary.get('external_disagreed', 0)} scored otherwise by its producer "
            "(the ingested table)"
        )
    if summary.get("objective"):
        lines += [
            f"proposer ({summary['objective']}): mean reward {_figure(summary['proposer_reward'])}",
            f"  {summary['proposals_flaky']} of {summary['proposals_scored']} proposals flaky "
            f"({summary['proposals_middle_flaky']} of the {summary['proposals_middle']} at "
            "0 < p̂ < 1)",
        ]
    for stall in summary.get("stalls", []):
        if stall["event"] == "plateau":
            lines.append(
                f"plateau: eval success flat at {stall['eval_success']:.2f} from generation "
                f"{stall['since']} to {stall['gen']}"
            )
        else:
            lines.append(
                f"collapse: pool diversity {stall['diversity']:.2f} at generation {stall['gen']}, "
                f"{stall['share']:.0%} of its best"
            )
    lines.append(f"game log: {str(summary['run_dir']).rstrip('/')}/log")
    return lines
