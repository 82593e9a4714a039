"""The Judge's mechanical checks: proof that a task is solvable and its reward reliable.

Each check is a plain function over a task and a built world that returns a
:class:`~coevo.arena.outcomes.CheckResult` with a reason; :func:`assess_task`
runs them all and aggregates a :class:`~coevo.arena.outcomes.Verdict`.

========== ===================================================================
valid      the record parses and passes every static rule
oracle     the reference solution earns reward 1 (and no step of it fails)
noop       ``submit()`` at once earns 0
unsolved   at least one state check fails on the initial state
partial    no prefix before the last write, followed by ``submit(A)``, earns
           1; nor does ``submit()``, ``submit("")`` or a perturbed answer
determinism the verifier gives the same result twice, by whole-table
           comparison too, and on a freshly built world
grounded   every argument value of the solution was visible before its call
solvable   a solver that never saw the solution earns 1 (a role; ``null`` here)
========== ===================================================================

Only a failed ``valid`` stops the other checks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from coevo.arena.errors import SpecError
from coevo.arena.grounding import ungrounded_arguments
from coevo.arena.limits import DEFAULT_LIMITS, Limits
from coevo.arena.outcomes import CheckResult, Episode, Verdict
from coevo.arena.spec import SUBMIT, TaskSpec, ToolCall, WorldSpec
from coevo.arena.sqlguard import TRACKING_PREFIX, TaskBudget, fold
from coevo.arena.verifier import run_check
from coevo.arena.world import World

__all__ = [
    "CHECK_NAMES",
    "WorldCache",
    "assess_task",
    "check_determinism",
    "check_grounded",
    "check_noop",
    "check_oracle",
    "check_partial",
    "check_unsolved",
    "check_valid",
    "check_world_valid",
    "perturb_answer",
]

CHECK_NAMES = (
    "valid",
    "oracle",
    "noop",
    "unsolved",
    "partial",
    "determinism",
    "grounded",
    "solvable",
)
_NOT_VALID = "not run: the task is not valid"
_SOLVABLE_PENDING = "not run: needs a solver role that never saw the solution"


def _answer(task: TaskSpec) -> str | None:
    answer = task.solution[-1].arguments.get("answer") if task.solution else None
    return answer if isinstance(answer, str) else None


def _steps_for(world: World, calls: list[ToolCall]) -> int:
    return max(world.limits.max_steps, len(calls))


def _failed_step(episode: Episode) -> str | None:
    for i, obs in enumerate(episode.observations):
        if not obs.ok:
            return f"step {i} ({episode.calls[i].tool}) failed: {obs.error}"
    return None


def _shift_last_number(answer: str, delta: int) -> str | None:
    matches = list(re.finditer(r"\d+(?:\.\d+)?", answer))
    if not matches:
        return None
    last = matches[-1]
    text = last.group(0)
    if "." in text:
        decimals = len(text.split(".")[1])
        shifted = f"{float(text) + delta:.{decimals}f}"
    else:
        shifted = str(int(text) + delta)
    if shifted.startswith("-"):
        return None
    return answer[: last.start()] + shifted + answer[last.end() :]


def perturb_answer(answer: str) -> str:
    """A different answer that a correct verifier must reject.

    The last number in the answer is increased by one (keeping its format);
    an answer without digits loses its last character (one character is
    shifted to the next).
    """
    shifted = _shift_last_number(answer, 1)
    if shifted is not None:
        return shifted
    if len(answer) > 1:
        return answer[:-1]
    return chr(ord(answer) + 1) if answer else "x"


def wrong_answers(answer: str | None) -> list[str | None]:
    """Answers a verifier that pins the answer must reject, given the right one.

    No answer, the empty answer, the answer perturbed up (and, for a number,
    down: a one-sided bound lets it through), and a hedge that lists the
    answer next to a wrong one (a "contains" check lets it through, and an
    agent would learn to list candidates).
    """
    found: list[str | None] = []
    candidates: list[str | None] = [None, ""]
    if answer:
        up = perturb_answer(answer)
        candidates.append(up)
        down = _shift_last_number(answer, -1)
        if down is not None:
            candidates.append(down)
        candidates.append(f"{answer} or {up}")
    for candidate in candidates:
        if candidate != answer and candidate not in found:
            found.append(candidate)
    return found


def check_valid(task: TaskSpec, world: World) -> CheckResult:
    """The task passes every static rule against its world (the world was built already)."""
    try:
        compiled = world.prepare(task)
    except SpecError as exc:
        return CheckResult(passed=False, reason=exc.summary())
    return _passed_valid([*world.warnings, *compiled.warnings])


def check_world_valid(spec: WorldSpec, worlds: WorldCache) -> CheckResult:
    """A world record passes every static rule (it is built, once, through ``worlds``)."""
    try:
        world = worlds.world(spec)
    except SpecError as exc:
        return CheckResult(passed=False, reason=exc.summary())
    return _passed_valid(world.warnings)


def _passed_valid(notes: list[str]) -> CheckResult:
    return CheckResult(
        passed=True, reason="ok" if not notes else "ok; warning: " + "; ".join(notes)
    )


def check_oracle(task: TaskSpec, world: World) -> tuple[CheckResult, Episode]:
    """The reference solution earns 1, and none of its steps fails.

    Returns:
        The result and the solution's episode (for ``grounded``).
    """
    result, episode, _ = _run_oracle(task, world)
    return result, episode


def _run_oracle(task: TaskSpec, world: World) -> tuple[CheckResult, Episode, list[str]]:
    """:func:`check_oracle`, plus the warnings about frames wider than the solution needs."""
    calls = list(task.solution)
    episode = world.run(task, calls, max_steps=_steps_for(world, calls), solver="reference")
    failed = _failed_step(episode)
    if episode.reward.value != 1:
        reason = "the reference solution earns 0: " + episode.reward.detail().replace("\n", "; ")
        return CheckResult(passed=False, reason=reason), episode, []
    if failed:
        reason = f"the reference solution earns 1 but {failed}"
        return CheckResult(passed=False, reason=reason), episode, []
    reason = f"the reference solution earns 1 in {len(calls)} steps"
    loose = _loose_frame(task, world)
    if loose:
        reason += "; warning: " + "; ".join(loose)
    return CheckResult(passed=True, reason=reason), episode, loose


#: A ``"*"`` frame entry is worth a warning when the solution changes at most this many rows of the table.
LOOSE_FRAME_ROWS = 5


def _loose_frame(task: TaskSpec, world: World) -> list[str]:
    """Frame entries ``"*"`` that allow far more than the reference solution changes (call after its run)."""
    compiled = world.prepare(task)
    broad = [entry for entry in compiled.frame.values() if entry.kind == "any"]
    if not broad:
        return []
    with world.compiled.guard.trust():
        touched = dict(
            world.compiled.conn.execute(
                f"SELECT tbl, count(DISTINCT rid) FROM main.{TRACKING_PREFIX}changes GROUP BY tbl"
            ).fetchall()
        )
    notes = []
    for entry in broad:
        rows = touched.get(fold(entry.table.name), 0)
        if rows <= LOOSE_FRAME_ROWS:
            notes.append(
                f"the frame lets anything in {entry.table.name} change, but the reference solution "
                f"changes {rows} row(s) of it; a condition or columns frame would reject more wrong solutions"
            )
    return notes


def check_noop(task: TaskSpec, world: World) -> CheckResult:
    """Submitting at once, with no answer, earns 0."""
    episode = world.run(task, [ToolCall(SUBMIT, {})])
    if episode.reward.value == 0:
        return CheckResult(passed=True, reason="submit() at once earns 0")
    return CheckResult(
        passed=False,
        reason="submit() at once earns 1: the verifier accepts the initial state without any work",
    )


def check_unsolved(task: TaskSpec, world: World) -> CheckResult:
    """At least one state check (one that ignores ``:answer``) fails on the initial state."""
    compiled = world.prepare(task)
    states = compiled.state_checks
    if not states:
        return CheckResult(passed=True, reason="no state checks (the answer decides)")
    world.reset(task)
    outcomes = [run_check(world.compiled, check, None) for check in states]
    failing = [o.name for o in outcomes if not o.passed]
    if failing:
        return CheckResult(
            passed=True, reason=f"on the initial state, state check(s) {failing} fail"
        )
    return CheckResult(
        passed=False,
        reason=f"every state check ({[o.name for o in outcomes]}) already passes on the initial state",
    )


def check_partial(task: TaskSpec, world: World) -> CheckResult:
    """No shortcut earns 1: prefixes before the last write, and wrong or missing answers.

    One episode runs the solution's steps; before each step up to the last
    write, and after the last step for each wrong answer, the state is
    verified as if the agent submitted there (``World.verify``): the same
    state and the same verifier as a separate episode ``S[:k] + submit``.
    """
    compiled = world.prepare(task)
    prefix_calls = list(task.solution[:-1])
    answer = _answer(task)
    tools = world.compiled.tools
    writes = [
        i for i, c in enumerate(prefix_calls) if c.tool in tools and tools[c.tool].effect == "write"
    ]
    last_write = writes[-1] if writes else -1
    failures: list[str] = []
    tried = 0
    world.reset(task, max_steps=len(prefix_calls) + 1)
    for k, call in enumerate(prefix_calls):
        if k <= last_write and not failures:
            tried += 1
            if world.verify(answer).value == 1:
                failures.append(
                    f"the first {k} step(s) then submit earn 1, before the last write "
                    f"(step {last_write}, {prefix_calls[last_write].tool})"
                )
        world.step(call)
    if compiled.uses_answer:
        for wrong in wrong_answers(answer):
            tried += 1
            if world.verify(wrong).value == 1:
                shown = "submit()" if wrong is None else f"submit(answer={wrong!r})"
                failures.append(
                    f"the solution's steps then {shown} earn 1: the verifier does not pin the answer"
                )
    if failures:
        return CheckResult(passed=False, reason="; ".join(failures))
    if not tried:
        return CheckResult(passed=True, reason="nothing to try: no write and no answer check")
    return CheckResult(passed=True, reason=f"all {tried} shortcut(s) earn 0")


def check_determinism(
    task: TaskSpec, world: World, fresh: World, *, oracle: Episode | None = None
) -> CheckResult:
    """Same final state, same reward: twice, by whole-table comparison, and on a freshly built world.

    Args:
        task: the task.
        world: its built world.
        fresh: a second, independent build of the same world.
        oracle: the reference solution's episode when ``world`` is still in its
            final state (it is not run again).
    """
    calls = list(task.solution)
    answer = _answer(task)
    steps = _steps_for(world, calls)
    first = oracle if oracle is not None else world.run(task, calls, max_steps=steps)
    again = world.verify(answer)
    whole = world.verify_whole(answer)
    fresh.adopt(world.prepare(task))  # the same checks: what differs is the build and the runs
    other = fresh.run(task, calls, max_steps=steps)
    problems: list[str] = []
    if again != first.reward:
        problems.append(
            f"verifying the same state twice gave {first.reward.reason!r} then {again.reason!r}"
        )
    if whole != first.reward:
        problems.append(
            f"the row-tracked and whole-table frame comparisons disagree ({first.reward.reason!r} vs {whole.reason!r})"
        )
    if other.reward != first.reward:
        problems.append(
            f"a freshly built world gives {other.reward.reason!r}, not {first.reward.reason!r}"
        )
    for i, (a, b) in enumerate(zip(first.observations, other.observations, strict=False)):
        if a.to_json() != b.to_json():
            problems.append(
                f"step {i} ({calls[i].tool}) returns different results on a freshly built world"
            )
            break
    if problems:
        return CheckResult(passed=False, reason="; ".join(problems))
    return CheckResult(
        passed=True, reason="same reward twice, by whole tables, and on a fresh build"
    )


def check_grounded(task: TaskSpec, world: World, episode: Episode) -> CheckResult:
    """Every argument value of the solution was visible before it was used (nothing guessed)."""
    problems = ungrounded_arguments(task, world.spec, episode.observations)
    if problems:
        return CheckResult(
            passed=False,
            reason="; ".join(problems[:5])
            + (f"; and {len(problems) - 5} more" if len(problems) > 5 else ""),
        )
    count = sum(len(c.arguments) for c in task.solution)
    return CheckResult(passed=True, reason=f"all {count} argument value(s) were visible before use")


class WorldCache:
    """Builds each world once (by id) for checking many tasks, plus a second, fresh build for ``determinism``.

    Args:
        limits: budgets for every world built.
        specs: world records by id, for tasks that refer to a world by id.
    """

    def __init__(
        self, limits: Limits = DEFAULT_LIMITS, specs: Mapping[str, WorldSpec] | None = None
    ):
        self.limits = limits
        self.specs: dict[str, WorldSpec] = dict(specs or {})
        self._worlds: dict[str, World | SpecError] = {}
        self._fresh: dict[str, World] = {}

    def add(self, spec: WorldSpec) -> str:
        """Register a world record (the first with this content, unless it gave a wrong id); returns its id."""
        known = self.specs.get(spec.world_id)
        if known is None or (
            known.id not in (None, known.world_id) and spec.id in (None, spec.world_id)
        ):
            self.specs[spec.world_id] = spec
        return spec.world_id

    def spec_of(self, task: TaskSpec) -> WorldSpec | None:
        """The task's world record (inline, or registered by id)."""
        if isinstance(task.world, WorldSpec):
            return task.world
        return self.specs.get(task.world)

    def world(self, spec: WorldSpec) -> World:
        """The built world for ``spec``.

        Raises:
            SpecError: the world is not valid (remembered, not rebuilt).
        """
        key = spec.world_id
        if spec.id is not None and spec.id != key:
            # The id is the one field the content hash leaves out: a record claiming another
            # world's id must be rejected even when the same content was built before.
            key = f"{key} given as {spec.id}"
        built = self._worlds.get(key)
        if built is None:
            try:
                built = World(spec, limits=self.limits)
            except SpecError as exc:
                built = exc
            self._worlds[key] = built
        if isinstance(built, SpecError):
            raise built
        return built

    def fresh(self, spec: WorldSpec) -> World:
        """A second, independent build of ``spec``."""
        key = spec.world_id
        if key not in self._fresh:
            self._fresh[key] = World(spec, limits=self.limits)
        return self._fresh[key]

    def close(self) -> None:
        """Close every world built."""
        for built in [*self._worlds.values(), *self._fresh.values()]:
            if isinstance(built, World):
                built.close()
        self._worlds.clear()
        self._fresh.clear()


def _guarded(fn: Callable[[], CheckResult]) -> CheckResult:
    try:
        return fn()
    except SpecError as exc:
        return CheckResult(passed=False, reason=exc.summary())
    except Exception as exc:  # a crashing check is a coevo bug; record it, do not lose the batch
        return CheckResult(passed=False, reason=f"the check crashed: {type(exc).__name__}: {exc}")


def assess_task(task: TaskSpec, worlds: WorldCache, *, budget: TaskBudget | None = None) -> Verdict:
    """Run every mechanical check on ``task`` and aggregate the verdict.

    The task's world comes from ``worlds`` (inline worlds are registered on
    the way). ``solvable`` is left ``null``: it needs a solver role.

    Args:
        task: the task.
        worlds: built worlds and world records.
        budget: the task's budget for all its checks (default: a new one of
            ``worlds.limits.task_vm_instructions``); read ``budget.spent``
            afterwards for what the checks cost.
    """
    results: dict[str, CheckResult] = {}
    spec = worlds.spec_of(task)
    task_id = task.task_id
    if spec is None:
        results["valid"] = CheckResult(
            passed=False,
            reason=f"world: {task.world} is not defined; put its world record before the task or inline the world",
        )
    else:
        worlds.add(spec)
        try:
            world = worlds.world(spec)
        except SpecError as exc:
            results["valid"] = CheckResult(
                passed=False, reason="the world is not valid: " + exc.summary()
            )
        else:
            results["valid"] = check_valid(task, world)
    if not results["valid"].passed:
        for name in CHECK_NAMES[1:]:
            results[name] = CheckResult(passed=None, reason=_NOT_VALID)
        return Verdict(task_id=task_id, world_id=task.world_id, accepted=False, checks=results)
    assert spec is not None  # a task without a world is not valid
    fresh = worlds.fresh(spec)
    budget = budget or TaskBudget(worlds.limits.task_vm_instructions)
    world.compiled.guard.task = fresh.compiled.guard.task = budget
    try:
        return _assess_built(task, world, fresh, budget, results["valid"])
    finally:
        world.compiled.guard.task = fresh.compiled.guard.task = None


def _assess_built(
    task: TaskSpec, world: World, fresh: World, budget: TaskBudget, valid: CheckResult
) -> Verdict:
    """The checks after ``valid``, all spending from the task's ``budget``."""
    results: dict[str, CheckResult] = {"valid": valid}
    episode: list[Episode] = []
    warnings = list(world.warnings) + list(world.prepare(task).warnings)

    def oracle() -> CheckResult:
        result, ep, loose = _run_oracle(task, world)
        episode.append(ep)
        warnings.extend(loose)
        return result

    results["oracle"] = _guarded(oracle)
    # right after the oracle, while the world still holds the oracle's final state
    results["determinism"] = _guarded(
        lambda: check_determinism(task, world, fresh, oracle=episode[0] if episode else None)
    )
    results["noop"] = _guarded(lambda: check_noop(task, world))
    results["unsolved"] = _guarded(lambda: check_unsolved(task, world))
    results["partial"] = _guarded(lambda: check_partial(task, world))
    if episode:
        results["grounded"] = _guarded(lambda: check_grounded(task, world, episode[0]))
    else:
        results["grounded"] = CheckResult(
            passed=None, reason="not run: the reference solution did not run"
        )
    results["solvable"] = CheckResult(passed=None, reason=_SOLVABLE_PENDING)
    if budget.stops and results["determinism"].passed is False:
        # A run cut short by a budget differs from one that was not: that is not nondeterminism.
        # (Which limit stops a call first under the wall clock depends on the machine's load.)
        stopped = (
            "the wall-clock backstop stopped a call (it does too much work per SQLite instruction)"
            if "time" in budget.stops
            else f"the task's budget of {budget.total:,} VM instructions ran out"
        )
        results["determinism"] = CheckResult(
            passed=False, reason=f"not decided: {stopped}, so the runs cannot be compared"
        )
    if "task" in budget.stops:
        warnings.append(
            f"the task's budget of {budget.total:,} VM instructions ran out (spent by all its "
            "checks and Judge passes together): the checks it stopped fail"
        )
    results = {name: results[name] for name in CHECK_NAMES}  # the documented order
    accepted = (
        all(r.passed is not False for r in results.values()) and results["valid"].passed is True
    )
    return Verdict(
        task_id=task.task_id,
        world_id=task.world_id,
        accepted=accepted,
        checks=results,
        warnings=warnings,
    )
