"""``check_role``: the conformance checker a role (built-in or plugin) must pass.

Plugin authors run it in their own tests::

    from coevo.run.testing import check_role   # the public path; implemented in coevo.agents.conformance

    def test_my_solver_conforms():
        check_role(MySolver(lr=0.1))   # raises RoleCheckError (an AssertionError) listing every problem

It checks the role's protocol (by its methods, see
:mod:`coevo.agents.protocols`), then calls it on a small batch of real tasks
(the bundled examples, plus a task whose world is broken) and checks that:

* one result comes back per item, in order (batch size in = out);
* the same call with the same seed gives the same results (determinism);
* results are the right records and serialise to JSON;
* a failure on one item is a recorded outcome (an Episode with reward 0, a
  rejected Verdict), not an exception;
* every capability the role has behaves (:mod:`coevo.agents.protocols`): a
  state is ``coevo.state/1`` data and round-trips, and bad bytes are refused
  with a :class:`~coevo.arena.errors.StateError`; a version is a stable string;
  ``drain_usage``/``drain_attempts``/``drain_trajectories`` return rows (a
  trajectory with the id of a task the role proposed) and then forget them; a
  Synthesizer's ``learn(feedback)`` returns :class:`LearnStats`, takes feedback
  on tasks it never proposed, and (when Stateful) learns the same from the
  same state; a Solver's shipped decisions are ``coevo.state/1`` data, and
  (when Stateful) ``learn`` leaves the same state with them as without; and
  no capability is half there (``get_state`` without
  ``set_state``).

:func:`role_problems` returns the findings instead of raising.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any, cast

from coevo.agents.protocols import (
    CAPABILITIES,
    ROLE_KINDS,
    Learns,
    LearnStats,
    ProposalFeedback,
    ProposalRequest,
    Remembers,
    ReportsAttempts,
    ReportsTrajectories,
    ReportsUsage,
    ShipsDecisions,
    Stateful,
    Versioned,
    kind_of,
)
from coevo.arena.errors import RoleCheckError, StateError
from coevo.arena.examples import example_tasks
from coevo.arena.gamelog.rows import UsageRow
from coevo.arena.judge import WorldCache, check_valid
from coevo.arena.outcomes import Episode, Verdict
from coevo.arena.records import dump_record
from coevo.arena.spec import TaskSpec, WorldSpec
from coevo.arena.state import STATE_FORMAT, peek_state
from coevo.arena.trajectory import Trajectory
from coevo.arena.world import World

__all__ = ["broken_task", "check_role", "role_problems", "sample_tasks"]


def sample_tasks() -> list[TaskSpec]:
    """The bundled example tasks, each with its world inline."""
    return example_tasks()


def broken_task() -> TaskSpec:
    """A well-formed task whose world is invalid (a tool reads a table that does not exist)."""
    good = sample_tasks()[0]
    world = cast(WorldSpec, good.world)  # sample tasks carry their world inline
    tools = [
        world.tools[0].model_copy(update={"sql": ["SELECT * FROM no_such_table"]}),
        *world.tools[1:],
    ]
    return good.model_copy(
        update={"world": world.model_copy(update={"tools": tools}), "instruction": "broken"}
    )


def _played(episodes: Sequence[Episode]) -> list[Episode]:
    """The episodes without their trajectories."""
    return [e.model_copy(update={"trajectory": None}) for e in episodes]


def _dump(items: Sequence[Any]) -> list[Any]:
    out = []
    for item in items:
        if hasattr(item, "model_dump"):
            out.append(item.model_dump(mode="json"))
        else:
            out.append(item)
    return out


def _call(problems: list[str], what: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:
        problems.append(f"{what} raised {type(exc).__name__}: {exc}")
        return None


def _check_batch(
    problems: list[str], what: str, got: Any, expected: int, record: type | None
) -> bool:
    if not isinstance(got, list):
        problems.append(f"{what} must return a list, not {type(got).__name__}")
        return False
    if len(got) != expected:
        problems.append(
            f"{what}: {expected} item(s) in, {len(got)} out; return one result per item"
        )
        return False
    if record is not None:
        wrong = [type(x).__name__ for x in got if not isinstance(x, record)]
        if wrong:
            problems.append(f"{what} must return {record.__name__} records, got {wrong[0]}")
            return False
    try:
        json.dumps(_dump(got), allow_nan=False)
    except (TypeError, ValueError) as exc:
        problems.append(f"{what}: results do not serialise to JSON ({exc})")
        return False
    return True


def _synthesizer(obj: Any, seed: int, problems: list[str]) -> None:
    request = ProposalRequest(n=3, seed=seed)
    first = _call(problems, "propose(n=3)", lambda: obj.propose(request))
    if first is None or not _check_batch(problems, "propose(n=3)", first, 3, TaskSpec):
        return
    again = _call(problems, "propose(n=3) again", lambda: obj.propose(request))
    if again is not None and [t.task_id for t in again] != [t.task_id for t in first]:
        problems.append(
            "propose with the same request gave other tasks; draw everything from the request's seed"
        )
    empty = _call(problems, "propose(n=0)", lambda: obj.propose(ProposalRequest(n=0, seed=seed)))
    if empty not in (None, []):
        problems.append("propose(n=0) must return []")
    cache = WorldCache()
    try:
        for task in first:
            json.dumps(dump_record(task), allow_nan=False)
            if not isinstance(task.world, WorldSpec):
                continue  # refers to a world record the caller keeps; validity is the Judge's job
            result = check_valid(task, cache.world(task.world))
            if not result.passed:
                problems.append(f"proposed task {task.task_id[:19]} is not valid: {result.reason}")
    except Exception as exc:
        problems.append(f"a proposed task cannot be built: {type(exc).__name__}: {exc}")
    finally:
        cache.close()


def _reference_episodes(tasks: Sequence[TaskSpec]) -> list[Episode]:
    episodes = []
    for task in tasks:
        with World(cast(WorldSpec, task.world)) as world:
            episodes.append(world.run(task, task.solution))
    return episodes


def _broken_raised(
    problems: list[str],
    what: str,
    fn: Callable[[], Any],
    without_broken: Callable[[], Any],
    fix: str,
) -> Any:
    """``fn()``; when it raises but the batch without the broken task does not, a problem saying what the role must do instead."""
    try:
        return fn()
    except Exception as exc:
        try:
            without_broken()
        except Exception:
            problems.append(f"{what} raised {type(exc).__name__}: {exc}")
            return None
        problems.append(
            f"{what} raised {type(exc).__name__} on the last task, whose world is broken on purpose "
            f"(coevo.run.testing.broken_task()): a role must not raise for one task it cannot "
            f"handle, or the whole batch is lost; {fix} (the error was: {exc})"
        )
        return None


def _solver(obj: Any, tasks: list[TaskSpec], seed: int, problems: list[str]) -> None:
    batch = [*tasks, broken_task()]
    first = _broken_raised(
        problems,
        "attempt(tasks, seed)",
        lambda: obj.attempt(batch, seed),
        lambda: obj.attempt(tasks, seed),
        "return an episode with reward 0 for it: coevo.arena.outcomes.failed_episode(task, seed, "
        "why, solver) records why, and the run counts it as a failure of the Solver",
    )
    if first is None or not _check_batch(problems, "attempt", first, len(batch), Episode):
        return
    if [e.task_id for e in first] != [t.task_id for t in batch]:
        problems.append(
            "attempt must return the episodes in the order of the tasks (task_id per position)"
        )
    if first[-1].reward.value != 0:
        problems.append("a task whose world is invalid must give an episode with reward 0")
    again = _call(problems, "attempt again", lambda: obj.attempt(batch, seed))
    # a trajectory holds what the model's server sent (its call ids, its token ids): the
    # episode itself must repeat, the server's bookkeeping need not
    if again is not None and _dump(_played(again)) != _dump(_played(first)):
        problems.append(
            "attempt with the same tasks and seed gave other episodes; use only the seed for randomness"
        )
    stats = _call(problems, "learn(episodes)", lambda: obj.learn(first))
    if stats is not None and not isinstance(stats, LearnStats):
        problems.append(f"learn must return LearnStats, not {type(stats).__name__}")


def _judge(obj: Any, tasks: list[TaskSpec], problems: list[str]) -> None:
    batch = [*tasks, broken_task()]
    first = _broken_raised(
        problems,
        "assess(tasks)",
        lambda: obj.assess(batch),
        lambda: obj.assess(tasks),
        "return a rejected verdict for it, with the reason: coevo.arena.outcomes.failed_verdict("
        "task, why) when the Judge itself could not assess it",
    )
    if first is None or not _check_batch(problems, "assess", first, len(batch), Verdict):
        return
    if [v.task_id for v in first] != [t.task_id for t in batch]:
        problems.append(
            "assess must return the verdicts in the order of the tasks (task_id per position)"
        )
    if first[-1].accepted:
        problems.append(
            "a task whose world is invalid must be rejected, with the reason in its verdict"
        )
    again = _call(problems, "assess again", lambda: obj.assess(batch))
    if again is not None and _dump(again) != _dump(first):
        problems.append("assess gave other verdicts the second time; a judge must be deterministic")


def _world_model(obj: Any, tasks: list[TaskSpec], problems: list[str]) -> None:
    first = _call(problems, "predict(tasks)", lambda: obj.predict(tasks))
    if first is None or not _check_batch(problems, "predict", first, len(tasks), None):
        return
    bad = [
        p
        for p in first
        if isinstance(p, bool)
        or not isinstance(p, (int, float))
        or not math.isfinite(p)
        or not 0 <= p <= 1
    ]
    if bad:
        problems.append(f"predict must return probabilities in [0, 1], got {bad[0]!r}")
    again = _call(problems, "predict again", lambda: obj.predict(tasks))
    if again is not None and again != first:
        problems.append("predict gave other numbers for the same tasks with no update in between")
    episodes = _reference_episodes(tasks)
    if _call(problems, "update(episodes)", lambda: obj.update(episodes)) is not None:
        problems.append("update must return None")
    after = _call(problems, "predict after update", lambda: obj.predict(tasks))
    if after is not None:
        _check_batch(problems, "predict after update", after, len(tasks), None)


def _half_capabilities(obj: Any) -> list[str]:
    """A capability whose methods the role has only some of (a typo, or a hook half written)."""
    problems = []
    for name, protocol in CAPABILITIES.items():
        methods = sorted(
            m for m, v in vars(protocol).items() if callable(v) and not m.startswith("_")
        )
        present = [m for m in methods if callable(getattr(obj, m, None))]
        if present and len(present) < len(methods):
            missing = [m for m in methods if m not in present]
            problems.append(
                f"has {', '.join(present)} but not {', '.join(missing)}: the {name} capability "
                f"({protocol.__name__} in coevo.agents.protocols) needs all of {', '.join(methods)}"
            )
    return problems


def _stateful(obj: Stateful, problems: list[str]) -> None:
    state = _call(problems, "get_state()", obj.get_state)
    if state is None:
        return
    if not isinstance(state, bytes):
        problems.append(f"get_state must return bytes, not {type(state).__name__}")
        return
    try:
        peek_state(state)
    except StateError as exc:
        problems.append(
            f"get_state must return {STATE_FORMAT} data (coevo.arena.state.pack_state), never a pickle: {exc}"
        )
    _call(problems, "set_state(get_state())", lambda: obj.set_state(state))
    if _call(problems, "get_state() after set_state", obj.get_state) != state:
        problems.append("set_state(get_state()) must leave the same state")
    if _call(problems, "set_state(b'not a state')", lambda: _refuses(obj)) is False:
        problems.append(
            "set_state of bytes that are not its state must raise StateError saying why"
        )


def _refuses(obj: Stateful) -> bool:
    try:
        obj.set_state(b"not a state")
    except StateError:
        return True
    return False


def _drains(problems: list[str], what: str, drain: Callable[[], Any], row: type | None) -> None:
    first = _call(problems, f"{what}()", drain)
    if first is None:
        return
    if not isinstance(first, list) or (
        row is not None and any(not isinstance(r, row) for r in first)
    ):
        kind = f"{row.__name__} rows" if row is not None else "JSON-ready mappings"
        problems.append(f"{what} must return a list of {kind}")
        return
    try:
        json.dumps(_dump(first), allow_nan=False)
    except (TypeError, ValueError) as exc:
        problems.append(f"{what}: what it returns does not serialise to JSON ({exc})")
    if _call(problems, f"{what}() again", drain) not in (None, []):
        problems.append(f"{what} must forget what it returned: a second call at once returns []")


def _feedback(tasks: Sequence[TaskSpec]) -> list[ProposalFeedback]:
    """Feedback as the arena gives it: one task at the frontier, one rejected, one too easy, one unknown."""
    shapes = [(True, [1, 0], 1.0), (False, [], -0.5), (True, [1, 1], 0.0)]
    out = [
        ProposalFeedback(
            task_id=task.task_id,
            gen=0,
            accepted=accepted,
            failed=[] if accepted else ["oracle"],
            outcomes=outcomes,
            p_hat=sum(outcomes) / len(outcomes) if outcomes else None,
            reward=reward,
            objective="learnability",
            features={k: float(v) for k, v in task.features.items()},
            provenance=dict(task.provenance),
        )
        for task, (accepted, outcomes, reward) in zip(tasks, shapes, strict=False)
    ]
    unknown = ProposalFeedback(
        task_id="task-unknown", gen=0, accepted=False, reward=-0.5, objective="learnability"
    )
    return [*out, unknown]


def _learns(obj: Any, seed: int, problems: list[str]) -> None:
    """A Synthesizer's ``learn(feedback)``: LearnStats back, unknown tasks taken, deterministic from a state."""
    if not isinstance(obj, Stateful):
        problems.append(
            "a Synthesizer that learns must be Stateful (get_state/set_state): the arena teaches "
            "one learner and gives its state to every proposing actor, else it is never taught"
        )
    tasks = _call(problems, "propose(n=3)", lambda: obj.propose(ProposalRequest(n=3, seed=seed)))
    feedback = _feedback(tasks or [])
    before = obj.get_state() if isinstance(obj, Stateful) else None
    stats = _call(problems, "learn(feedback)", lambda: obj.learn(feedback))
    if stats is not None and not isinstance(stats, LearnStats):
        problems.append(f"learn(feedback) must return LearnStats, not {type(stats).__name__}")
    empty = _call(problems, "learn([])", lambda: obj.learn([]))
    if empty is not None and not isinstance(empty, LearnStats):
        problems.append(f"learn([]) must return LearnStats, not {type(empty).__name__}")
    if before is None or stats is None:
        return
    after = obj.get_state()
    obj.set_state(before)
    _call(problems, "learn(feedback) again", lambda: obj.learn(feedback))
    obj.learn([])
    if obj.get_state() != after:
        problems.append(
            "learn(feedback) from the same state gave another state; draw everything from seeds"
        )
    obj.set_state(before)


def _trajectories(obj: Any, seed: int, problems: list[str]) -> None:
    """A Synthesizer's ``drain_trajectories``: (task id, Trajectory) pairs of tasks it proposed, then forgotten."""
    _call(problems, "drain_trajectories()", obj.drain_trajectories)  # what earlier calls left
    proposed = _call(problems, "propose(n=3)", lambda: obj.propose(ProposalRequest(n=3, seed=seed)))
    drained = _call(problems, "drain_trajectories() after propose", obj.drain_trajectories)
    if drained is None:
        return
    if not isinstance(drained, list) or any(
        not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str))
        or not isinstance(pair[1], Trajectory)
        for pair in drained
    ):
        problems.append("drain_trajectories must return a list of (task id, Trajectory) pairs")
        return
    strangers = sorted({task for task, _ in drained} - {t.task_id for t in proposed or []})
    if strangers:
        problems.append(
            f"drain_trajectories returned a rollout of {strangers[0][:19]}, a task it did not "
            "propose (each rollout goes with the task it made)"
        )
    if _call(problems, "drain_trajectories() again", obj.drain_trajectories) not in (None, []):
        problems.append(
            "drain_trajectories must forget what it returned: a second call at once returns []"
        )


def _capabilities(obj: Any, tasks: list[TaskSpec], problems: list[str]) -> None:
    """Each capability the role has behaves as its protocol says."""
    if isinstance(obj, Stateful):
        _stateful(obj, problems)
    if isinstance(obj, Versioned):
        version = _call(problems, "policy_version()", obj.policy_version)
        if version is not None and (not isinstance(version, str) or not version):
            problems.append(f"policy_version must return a non-empty str, not {version!r}")
        elif (
            version is not None
            and _call(problems, "policy_version() again", obj.policy_version) != version
        ):
            problems.append("policy_version changed without learning")
    if (
        isinstance(obj, Remembers)
        and _call(problems, "remember(tasks)", lambda: obj.remember(tasks)) is not None
    ):
        problems.append("remember must return None")
    if isinstance(obj, ReportsUsage):
        _drains(problems, "drain_usage", obj.drain_usage, UsageRow)
    if isinstance(obj, ReportsAttempts):
        _drains(problems, "drain_attempts", obj.drain_attempts, dict)
    if kind_of(obj) == "synthesizer" and isinstance(obj, ReportsTrajectories):
        _trajectories(obj, 0, problems)
    if kind_of(obj) == "synthesizer" and isinstance(obj, Learns):
        _learns(obj, 0, problems)
    if kind_of(obj) == "solver" and isinstance(obj, ShipsDecisions):
        _ships_decisions(obj, tasks, problems)


def _ships_decisions(obj: Any, tasks: Sequence[TaskSpec], problems: list[str]) -> None:
    """What ``drain_decisions`` ships is data, and ``learn`` with it gives what ``learn`` without it does."""
    _call(problems, "drain_decisions()", obj.drain_decisions)  # what earlier checks recorded
    start = _call(problems, "get_state()", obj.get_state) if isinstance(obj, Stateful) else None
    # each task four times, as the arena plays them: some succeed, so the choices made matter
    repeated = [t for t in tasks for _ in range(4)]
    episodes = _call(problems, "attempt(tasks, seed)", lambda: obj.attempt(repeated, 0))
    blob = _call(problems, "drain_decisions() after attempt", obj.drain_decisions)
    if episodes is None or blob is None:
        return
    if not isinstance(blob, bytes):
        problems.append(f"drain_decisions must return bytes, not {type(blob).__name__}")
        return
    try:
        peek_state(blob)
    except StateError as exc:
        problems.append(
            f"drain_decisions must return {STATE_FORMAT} data (coevo.arena.state.pack_state), never a pickle: {exc}"
        )
    if _call(problems, "take_decisions([b'not decisions'])", lambda: _refuses_blob(obj)) is False:
        problems.append("take_decisions of bytes that are not decisions must raise StateError")
    if start is None:  # not Stateful: the two ways cannot be compared from one state
        _call(problems, "take_decisions([drained])", lambda: obj.take_decisions([blob]))
        _call(problems, "learn(episodes) with the decisions", lambda: obj.learn(episodes))
        return
    _call(problems, "learn(episodes) without the decisions", lambda: obj.learn(episodes))
    rebuilt = _call(problems, "get_state() after learn", obj.get_state)
    _call(problems, "set_state(the state before)", lambda: obj.set_state(start))
    _call(problems, "take_decisions([drained])", lambda: obj.take_decisions([blob]))
    _call(problems, "learn(episodes) with the decisions", lambda: obj.learn(episodes))
    if rebuilt is not None and _call(problems, "get_state()", obj.get_state) != rebuilt:
        problems.append(
            "learn with the decisions drain_decisions shipped must leave the same state as learn "
            "without them (they are a cache of what learn would rebuild from the episodes)"
        )
    _call(problems, "set_state(the state before)", lambda: obj.set_state(start))


def _refuses_blob(obj: Any) -> bool:
    try:
        obj.take_decisions([b"not decisions"])
    except StateError:
        return True
    return False


def role_problems(obj: Any, *, tasks: Sequence[TaskSpec] | None = None, seed: int = 0) -> list[str]:
    """Every way ``obj`` falls short of its role's contract (empty when it conforms).

    Args:
        obj: the role instance.
        tasks: tasks to call it on (default: the bundled examples); worlds inline.
        seed: the seed for the calls that take one.
    """
    kind = kind_of(obj)
    if kind is None:
        declared = getattr(obj, "kind", None)
        if declared is not None:
            return [
                f"declares kind {declared!r} but lacks that protocol's methods (see coevo.agents.protocols)"
            ]
        return [
            "satisfies no role protocol: a role has propose (synthesizer), attempt and learn "
            f"(solver), assess (judge) or predict and update (world model); kinds: {', '.join(ROLE_KINDS)}"
        ]
    batch = list(tasks) if tasks is not None else sample_tasks()
    problems: list[str] = _half_capabilities(obj)
    if kind == "synthesizer":
        _synthesizer(obj, seed, problems)
    elif kind == "solver":
        _solver(obj, batch, seed, problems)
    elif kind == "judge":
        _judge(obj, batch, problems)
    else:
        _world_model(obj, batch, problems)
    _capabilities(obj, batch, problems)
    return problems


def check_role(
    obj: Any, *, tasks: Sequence[TaskSpec] | None = None, seed: int = 0, name: str | None = None
) -> None:
    """Raise :class:`~coevo.arena.errors.RoleCheckError` (an AssertionError) unless ``obj`` conforms.

    Args:
        obj: the role instance.
        tasks: tasks to call it on (default: the bundled examples); worlds inline.
        seed: the seed for the calls that take one.
        name: how to call the role in the message (default: its type).
    """
    problems = role_problems(obj, tasks=tasks, seed=seed)
    if problems:
        raise RoleCheckError(name or type(obj).__name__, problems)
