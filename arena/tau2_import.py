"""τ²-bench domains as coevo records, the ``tau2`` runtime that replays them, and the audit of their rewards.

:func:`import_domain` turns a domain read by :mod:`coevo.arena.tau2`
into one ``coevo.codeworld/1`` record per initial state (the domain's
database; the policy as the agent's system text; the agent's tools with
the JSON Schemas read from the tool code as syntax) and one
``coevo.codetask/1`` record per task in ``tasks.json``:

- ``instruction``: the user's scenario as text (what a user simulator is
  told; a solver without one reads it as its request);
- ``solution``: the gold actions the agent makes (the user's own gold
  actions, as in telecom, stay in ``provenance``), then, when the reward
  asks the agent to communicate something, a ``respond`` step saying it;
- ``verifier``: the benchmark's own expected outcome — the state the gold
  actions reach (its ``DB`` check, compared key by key rather than by
  hash) and its ``communicate_info`` when ``COMMUNICATE`` is in the reward
  basis. Imported tasks are the documented exception to coevo's
  reference-blind rule: their verifier *is* the benchmark's;
- ``provenance``: the benchmark, domain and task id, the reward basis, and
  what coevo's reward does not replay (NL assertions, env assertions, the
  ACTION check), so that nothing is silently dropped.

:class:`Tau2Runtime` is the ``tau2`` runtime (registered under
``coevo.runtimes``): inside a sandboxed worker it imports the installed
τ²-bench package's domain (``tau2.domains.<name>``) without running the
package's top-level ``__init__`` (which pulls in its LLM stack), builds the
domain's database model from the record's state and calls its toolkit.

:func:`audit` runs the Judge over imported tasks and answers, per task,
whether a do-nothing trajectory passes the benchmark's database check and
its full reward, by replay when the runtime is installed and statically
(from the tools' write flags) otherwise.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from coevo.arena.codetask import RESPOND, CodeTaskSpec, assess_code_task, static_problems
from coevo.arena.codeworld import CodeWorlds, CodeWorldSpec, state_diff
from coevo.arena.outcomes import CheckResult, Verdict
from coevo.arena.settings import merged
from coevo.arena.tau2 import (
    RewardType,
    Task,
    Tau2Domain,
    static_noop_findings,
)

__all__ = [
    "TAU2",
    "Imported",
    "TaskAudit",
    "Tau2Runtime",
    "audit",
    "import_domain",
    "static_findings",
]

RUNTIME: Final = "tau2"


def _scenario_text(task: Task) -> str:
    scenario = task.user_scenario
    instructions = scenario.instructions
    if isinstance(instructions, str):
        return instructions
    parts = [
        f"Reason for call: {instructions.reason_for_call}",
        f"Known info: {instructions.known_info}" if instructions.known_info else "",
        f"Unknown info: {instructions.unknown_info}" if instructions.unknown_info else "",
        f"Task instructions: {instructions.task_instructions}",
    ]
    return "\n".join(p for p in parts if p)


def _world(domain: Tau2Domain, state: dict[str, Any]) -> CodeWorldSpec:
    tools = [
        {
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
            "effect": "write" if t.mutates_state else "read",
        }
        for t in domain.tools
        if not t.discoverable
    ]
    return CodeWorldSpec.read(
        {
            "runtime": RUNTIME,
            "domain": domain.name,
            "state": state,
            "tools": tools,
            "system": domain.policy or "",
        }
    )


@dataclass(frozen=True)
class Imported:
    """What :func:`import_domain` made: the records in file order, and the tasks it could not import and why."""

    worlds: list[CodeWorldSpec]
    tasks: list[CodeTaskSpec]
    skipped: dict[str, str]

    def records(self) -> list[dict[str, Any]]:
        """Every world record, then every task record (worlds by id), as JSON data."""
        worlds = [w.model_dump(mode="json") | {"id": w.world_id} for w in self.worlds]
        tasks = []
        for task in self.tasks:
            record = task.model_dump(mode="json", exclude={"world"})
            tasks.append(record | {"id": task.task_id, "world": task.world.world_id})
        return worlds + tasks


def import_domain(domain: Tau2Domain) -> Imported:
    """Every task of ``domain`` as a code task over a code world (one world per distinct initial state)."""
    base = _world(domain, domain.db)
    worlds: dict[str, CodeWorldSpec] = {base.world_id: base}
    tasks: list[CodeTaskSpec] = []
    skipped: dict[str, str] = {}
    for task in domain.tasks:
        criteria = task.evaluation_criteria
        initial = task.initial_state
        if initial is not None and initial.initialization_actions:
            skipped[task.id] = (
                "its initial state is made by initialization actions (code run before the "
                "conversation), which coevo's code tasks do not replay yet"
            )
            continue
        world = base
        data = initial.initialization_data if initial is not None else None
        if data is not None and data.agent_data:
            world = _world(domain, merged(domain.db, data.agent_data))
            worlds.setdefault(world.world_id, world)
        actions = (criteria.actions or []) if criteria is not None else []
        basis = list(criteria.reward_basis) if criteria is not None else []
        solution = [
            {"tool": a.name, "arguments": a.arguments}
            for a in actions
            if a.requestor == "assistant"
        ]
        communicate = (
            list(criteria.communicate_info or [])
            if criteria is not None and RewardType.COMMUNICATE in basis
            else []
        )
        if communicate:  # the reference agent says what it must (τ²'s gold actions are calls only)
            solution.append({"tool": RESPOND, "arguments": {"answer": "; ".join(communicate)}})
        unknown = [
            c["tool"] for c in solution if c["tool"] != RESPOND and world.tool(c["tool"]) is None
        ]
        if unknown:
            skipped[task.id] = f"its gold actions call tools the agent does not have: {unknown}"
            continue
        provenance = {
            "benchmark": "tau2-bench",
            "domain": domain.name,
            "task": task.id,
            "reward_basis": [str(b) for b in basis],
            "user_actions": [a.model_dump(mode="json") for a in actions if a.requestor == "user"],
            "nl_assertions": list(criteria.nl_assertions or []) if criteria else [],
            "env_assertions": [e.model_dump(mode="json") for e in (criteria.env_assertions or [])]
            if criteria
            else [],
            "action_check": [a.model_dump(mode="json") for a in actions]
            if RewardType.ACTION in basis
            else [],
            "verifier": "the benchmark's own expected outcome (imported: not reference-blind)",
        }
        tasks.append(
            CodeTaskSpec.read(
                {
                    "world": world.model_dump(mode="json"),
                    "instruction": _scenario_text(task),
                    "verifier": {"communicate": communicate},
                    "solution": solution,
                    "user_scenario": task.user_scenario.model_dump(mode="json"),
                    "provenance": provenance,
                }
            )
        )
    return Imported(list(worlds.values()), tasks, skipped)


# ---- the runtime (in a worker) --------------------------------------------------------------


def _bare_package(name: str) -> None:
    """Make ``name`` importable as a package without running its ``__init__`` (τ²'s pulls in its LLM stack)."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.submodule_search_locations is None:
        raise ModuleNotFoundError(
            f"no installed package {name!r}: install τ²-bench's code, or give the folder holding "
            "it (--code CHECKOUT/src; docs/benchmarks-import.md)"
        )
    module = types.ModuleType(name)
    module.__path__ = list(spec.submodule_search_locations)
    module.__spec__ = spec
    sys.modules[name] = module


class Tau2Runtime:
    """The ``tau2`` runtime: τ²-bench's own toolkit for a domain, over the database a record holds."""

    def load(self, domain: str, state: dict[str, Any]) -> Any:
        """The domain's toolkit over its database model built from ``state``."""
        os.environ.setdefault("LOGURU_LEVEL", "WARNING")  # τ²'s code logs every write at DEBUG
        _bare_package("tau2")
        tools = importlib.import_module(f"tau2.domains.{domain}.tools")
        model = importlib.import_module(f"tau2.domains.{domain}.data_model")
        db_class: Any = next(
            cls
            for _, cls in inspect.getmembers(model, inspect.isclass)
            if cls.__module__ == model.__name__ and any(b.__name__ == "DB" for b in cls.__mro__[1:])
        )
        toolkit: Any = next(
            cls
            for _, cls in inspect.getmembers(tools, inspect.isclass)
            if cls.__module__ == tools.__name__
            and not cls.__name__.endswith("UserTools")
            and any(b.__name__ == "ToolKitBase" for b in cls.__mro__[1:])
        )
        return toolkit(db_class.model_validate(state))

    def call(self, env: Any, tool: str, arguments: dict[str, Any]) -> Any:
        """The toolkit's ``use_tool``."""
        return env.use_tool(tool, **arguments)

    def dump(self, env: Any) -> dict[str, Any]:
        """The database as JSON."""
        return dict(env.db.model_dump(mode="json"))


TAU2: Final = Tau2Runtime()


# ---- the audit ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskAudit:
    """One imported task's audit line (``coevo audit --json``)."""

    task: CodeTaskSpec
    basis: str
    noop_passes_db_check: bool
    noop_passes_reward: bool | None
    verdict: Verdict | None
    reasons: list[str]

    def row(self) -> dict[str, Any]:
        """The JSON object ``coevo audit --json`` prints for the task."""
        return {
            "kind": "task",
            "id": self.task.provenance.get("task"),
            "task_id": self.task.task_id,
            "domain": self.task.provenance.get("domain"),
            "noop_passes_db_check": self.noop_passes_db_check,
            "noop_passes_reward": self.noop_passes_reward,
            "basis": self.basis,
            "checks": None
            if self.verdict is None
            else {k: v.model_dump() for k, v in self.verdict.checks.items()},
            "reasons": self.reasons,
        }


def _noop_reward(task: CodeTaskSpec, db_passes: bool) -> tuple[bool | None, list[str]]:
    """Whether doing nothing earns the benchmark's full reward: a product over its reward basis."""
    basis = set(task.provenance.get("reward_basis", []))
    reasons = []
    verdicts: list[bool | None] = []
    if "DB" in basis:
        verdicts.append(db_passes)
    if "COMMUNICATE" in basis:
        said = not task.verifier.communicate
        verdicts.append(said)
        if not said:
            reasons.append(f"COMMUNICATE: doing nothing says none of {task.verifier.communicate}")
    if "NL_ASSERTION" in basis and task.provenance.get("nl_assertions"):
        verdicts.append(None)
        reasons.append("NL_ASSERTION: needs an LLM judge, not configured")
    if "ENV_ASSERTION" in basis and task.provenance.get("env_assertions"):
        verdicts.append(None)
        reasons.append("ENV_ASSERTION: the env assertions are not replayed")
    if "ACTION" in basis and task.provenance.get("action_check"):
        verdicts.append(False)
        reasons.append("ACTION: doing nothing makes none of the gold calls")
    if False in verdicts:
        return False, reasons
    if None in verdicts:
        return None, reasons
    return True, reasons


def _static_verdict(task: CodeTaskSpec) -> Verdict:
    """The checks a static audit can run: ``valid`` only, the rest not run."""
    problems = static_problems(task)
    checks = {
        "valid": CheckResult(
            passed=not problems,
            reason="; ".join(problems) or "the record and its solution are well formed",
        )
    }
    for name in ("oracle", "noop", "unsolved", "partial", "determinism"):
        checks[name] = CheckResult(passed=None, reason="not run: a static audit runs no code")
    return Verdict(
        task_id=task.task_id, world_id=task.world.world_id, accepted=not problems, checks=checks
    )


def audit(
    tasks: Iterable[CodeTaskSpec],
    worlds: CodeWorlds | None,
    static: Mapping[str, bool] | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[TaskAudit]:
    """Each task's audit: by replay in ``worlds`` when given (the runtime installed), else static.

    ``static``: per benchmark task id, whether its gold actions write nothing
    (from :func:`~coevo.arena.tau2.static_noop_findings`); without
    it, the write flags of the task's own tools decide.
    """

    def one(task: CodeTaskSpec) -> TaskAudit:
        if worlds is not None:
            states: dict[str, Any] = {}
            verdict = assess_code_task(task, worlds, states)
            if states.get("reference") is None:  # the gold actions could not be played
                db_passes = not _writes(task)
            else:  # the gold actions' final state is the initial one: doing nothing matches it
                db_passes = not state_diff(states["reference"], states["initial"] or {})
            reward, reasons = _noop_reward(task, db_passes)
            return TaskAudit(task, "replay", db_passes, reward, verdict, reasons)
        key = str(task.provenance.get("task"))
        db_passes = static[key] if static is not None and key in static else not _writes(task)
        reward, reasons = _noop_reward(task, db_passes)
        verdict = _static_verdict(task)
        if not verdict.accepted:
            reasons = [verdict.checks["valid"].reason, *reasons]
        return TaskAudit(task, "static", db_passes, reward, verdict, reasons)

    # one task per worker at a time: each worker has its own lock, so they replay side by side
    threads = len(worlds.pools) if worlds is not None else 1
    out = []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for done, found in enumerate(pool.map(one, tasks), 1):
            out.append(found)
            if progress is not None:
                progress(done)
    return out


def _writes(task: CodeTaskSpec) -> bool:
    effects = {t.name: t.effect for t in task.world.tools}
    return any(effects.get(c.tool) == "write" for c in task.solution)


def static_findings(domain: Tau2Domain) -> dict[str, bool]:
    """Per task id, whether a do-nothing trajectory passes the database check, from the tools' write flags."""
    return {task_id: f.noop_passes_db for task_id, f in static_noop_findings(domain).items()}
