"""The linear-pg Solver: it learns skills that carry over to worlds it never saw, deterministically, from rewards alone."""

from __future__ import annotations

import numpy as np
import pytest
from coevo.agents.action_space import Choice, Source, instruction_values
from coevo.agents.linear_pg import LinearPGSolver
from coevo.agents.protocols import ProposalRequest
from coevo.agents.registry import REGISTRY
from coevo.agents.role_features import Context, answer_features, tool_features, value_features
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.agents.world_models import IRTWorldModel
from coevo.arena import Episode, Observation, TaskSpec, ToolCall
from coevo.arena.errors import CoevoError
from coevo.run.testing import check_role, sample_tasks

DOMAINS = ["retail", "hr"]


def _tasks(
    seeds: range, family: str, n: int = 8, domains: list[str] = DOMAINS, level: int = 1
) -> list[TaskSpec]:
    synth = ProceduralSynthesizer(domains)
    return [
        t
        for seed in seeds
        for t in synth.propose(ProposalRequest(n=n, seed=seed, level=level, families=[family]))
    ]


def success(solver: LinearPGSolver, tasks: list[TaskSpec], seed: int) -> float:
    """Mean reward of one sampled episode per task."""
    episodes = solver.attempt(tasks, seed=seed)
    return sum(e.reward.value for e in episodes) / len(episodes)


def train(
    solver: LinearPGSolver, tasks: list[TaskSpec], updates: int, k: int = 4, per_update: int = 8
) -> None:
    """``updates`` policy-gradient steps, each on ``per_update`` tasks attempted ``k`` times."""
    for step in range(updates):
        start = (step * per_update) % len(tasks)
        chosen = tasks[start : start + per_update]
        solver.learn(solver.attempt([t for t in chosen for _ in range(k)], seed=step))


@pytest.mark.slow
def test_success_on_worlds_never_trained_on_rises_from_near_zero() -> None:
    """From rewards alone (no prior, no replay), level-1 questions of worlds never trained on: ≤ 0.1 before, ≥ 0.6 after 60 updates.

    Measured: 0.00 before; 0.60 after 20 updates, 0.70 after 60 (with
    the default replay: 0.58 after both). Ids, names and amounts differ between the
    training and the held-out worlds, so a policy that memorised values
    would stay near 0.
    """
    train_tasks = _tasks(range(0, 12), "question")
    held = _tasks(range(500, 505), "question")
    assert not {t.world_id for t in train_tasks} & {t.world_id for t in held}
    solver = LinearPGSolver(lr=0.2, prior=0.0, replay=0.0)
    before = success(solver, held, seed=7)
    train(solver, train_tasks, updates=60)
    after = success(solver, held, seed=7)
    assert before <= 0.1, (before, after)
    assert after >= 0.6, (before, after)


@pytest.mark.slow
def test_writes_are_learnt_too() -> None:
    """From rewards alone (``prior=0``), level-1 retail actions never trained on: ≤ 0.1 before, ≥ 0.6 after 25 updates.

    Measured: 0.05 before; 0.88 after 10 updates, 0.93 after 20.
    """
    train_tasks = _tasks(range(0, 12), "action", domains=["retail"])
    held = _tasks(range(500, 505), "action", domains=["retail"])
    solver = LinearPGSolver(lr=0.2, prior=0.0)
    before = success(solver, held, seed=7)
    train(solver, train_tasks, updates=25)
    after = success(solver, held, seed=7)
    assert before <= 0.1, (before, after)
    assert after >= 0.6, (before, after)


@pytest.mark.slow
def test_a_level_2_family_is_learnt_where_the_old_settings_stay_near_zero() -> None:
    """Level-2 retail actions (look up, list orders, then one write or one per order: 4–5 calls), worlds never trained on.

    With the defaults: ≤ 0.15 untrained, ≥ 0.5 above that after 10 updates
    (320 episodes). With the old settings (``prior=0, adam_eps=1e-8``), the
    same 10 updates stay ≤ 0.2. Measured: defaults 0.05 → 0.80 (0.88 after
    40 updates); old settings 0.00 → 0.00 (0.10 after 40).
    """
    train_tasks = _tasks(range(0, 12), "action", domains=["retail"], level=2)
    held = _tasks(range(500, 505), "action", domains=["retail"], level=2)
    solver = LinearPGSolver(lr=0.2)
    before = success(solver, held, seed=7)
    train(solver, train_tasks, updates=10)
    after = success(solver, held, seed=7)
    assert before <= 0.15, (before, after)
    assert after >= before + 0.5, (before, after)
    old = LinearPGSolver(lr=0.2, prior=0.0, adam_eps=1e-8)
    train(old, train_tasks, updates=10)
    assert success(old, held, seed=7) <= 0.2


def test_the_prior_is_a_head_start_not_state() -> None:
    """The prior lifts the untrained policy on level-1 actions (0.00 → 0.43 measured), yet lives in no weight.

    A fresh solver's weights are zero with or without it, so states stay
    interchangeable; ``prior=0`` gives decisions without prior scores (a
    uniform start, as before the prior).
    """
    held = _tasks(range(500, 505), "action", domains=["retail"])
    guided, blind = LinearPGSolver(), LinearPGSolver(prior=0.0)
    assert success(guided, held, seed=7) >= success(blind, held, seed=7) + 0.25
    assert not guided.weights.any()
    assert guided.get_state() == blind.get_state()
    episode = blind.attempt(held[:1], seed=7)[0]
    assert all(d.prior is None for d in blind.decisions(episode) or [])
    episode = guided.attempt(held[:1], seed=7)[0]
    assert any(d.prior is not None for d in guided.decisions(episode) or [])


def test_weights_only_the_entropy_bonus_moves_barely_move() -> None:
    """Adam's floor (``adam_eps``): a group that all fails moves its never-rewarded weights by little.

    After one rewarded update on one task, an all-fail group of another task
    moves the weights it alone touches by a median 0.015 with the default
    floor (1e-3), and by 0.149 (nearly ``lr``) with Adam's usual 1e-8.
    """
    tasks = _tasks(range(40, 42), "action", n=6)

    def entropy_step(adam_eps: float) -> float:
        solver = LinearPGSolver(lr=0.2, prior=0.0, adam_eps=adam_eps)
        played = solver.attempt([tasks[0]] * 4, seed=9)
        solver.learn(
            [
                e.model_copy(update={"reward": e.reward.model_copy(update={"value": r})})
                for e, r in zip(played, [1, 0, 0, 0], strict=True)
            ]
        )
        before = solver.weights.copy()
        failed = solver.attempt([tasks[1]] * 4, seed=9)
        solver.learn(
            [
                e.model_copy(update={"reward": e.reward.model_copy(update={"value": 0})})
                for e in failed
            ]
        )
        moved = np.abs(solver.weights - before)[(before == 0) & (solver.weights != before)]
        assert moved.size > 0
        return float(np.median(moved))

    assert entropy_step(1e-3) < 0.05
    assert entropy_step(1e-8) > 0.1


@pytest.fixture(scope="module")
def tasks() -> list[TaskSpec]:
    return _tasks(range(40, 42), "action", n=6)


def _dump(episodes: list[Episode]) -> list[dict]:
    return [e.model_dump(mode="json") for e in episodes]


def test_the_solver_conforms_and_is_registered() -> None:
    """`linear-pg` is a registered solver and passes check_role (batches, determinism, broken worlds, state)."""
    assert REGISTRY.get("linear-pg").kind == "solver"
    check_role(REGISTRY.create("linear-pg"), name="linear-pg")


def test_same_seed_same_episodes_other_seed_other_episodes(tasks) -> None:
    """Acting is deterministic by seed, across instances; another seed explores differently."""
    first = _dump(LinearPGSolver().attempt(tasks, seed=3))
    assert _dump(LinearPGSolver().attempt(tasks, seed=3)) == first
    assert _dump(LinearPGSolver().attempt(tasks, seed=4)) != first


@pytest.mark.slow
def test_learning_does_not_depend_on_the_hash_seed() -> None:
    """Two processes with different PYTHONHASHSEED learn bit-identical weights (no set order leaks into features)."""
    import os
    import subprocess
    import sys

    script = (
        "import hashlib\n"
        "from coevo.agents.linear_pg import LinearPGSolver\n"
        "from tests.agents.test_linear_pg import _tasks, train\n"
        "solver = LinearPGSolver(lr=0.2)\n"
        "train(solver, _tasks(range(3), 'question') + _tasks(range(3), 'action'), updates=6)\n"
        "print(hashlib.sha256(solver.weights.tobytes()).hexdigest())\n"
    )
    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        digests.add(done.stdout.strip())
    assert len(digests) == 1


def test_it_never_reads_the_solution_or_the_verifier(tasks) -> None:
    """Blanking the reference solution and changing the verifier leaves every call it makes unchanged."""
    solver = LinearPGSolver()
    train(solver, tasks, updates=3, per_update=6)
    blind = [
        t.model_copy(
            update={
                "solution": [ToolCall("submit", {})],
                "verifier": t.verifier.model_copy(update={"checks": t.verifier.checks[:1]}),
            }
        )
        for t in tasks
    ]
    seen = solver.attempt(tasks, seed=11)
    unseen = solver.attempt(blind, seed=11)
    assert [e.calls for e in seen] == [e.calls for e in unseen]


def test_state_round_trips_and_a_copy_acts_the_same(tasks) -> None:
    """get_state/set_state carry the weights: a fresh solver loaded with them plays the same episodes."""
    solver = LinearPGSolver()
    train(solver, tasks, updates=4, per_update=6)
    copy = LinearPGSolver()
    copy.set_state(solver.get_state())
    assert copy.get_state() == solver.get_state()
    assert copy.version == solver.version == 4
    assert _dump(copy.attempt(tasks, seed=5)) == _dump(solver.attempt(tasks, seed=5))
    assert copy.attempt(tasks[:1], seed=5)[0].solver == "linear-pg@4"
    # the kept successes are state too: the next update (which replays them) is the same
    assert b"kept_idx" in solver.get_state()  # successes of the training were kept
    assert any(e.reward.value for e in solver.attempt(tasks, seed=5))
    batch = solver.attempt([t for t in tasks for _ in range(4)], seed=6)
    copy.remember(tasks)
    solver.learn(batch)
    copy.learn(batch)
    assert copy.get_state() == solver.get_state()


def test_a_wrong_state_is_refused_with_the_fix(tasks) -> None:
    """Bytes that are not a linear-pg state, or of another size, raise an error that says what to do."""
    with pytest.raises(CoevoError, match=r"not a coevo\.state/1 state"):
        LinearPGSolver().set_state(b"weights")
    with pytest.raises(CoevoError, match="written by 'irt', not 'linear-pg'"):
        LinearPGSolver().set_state(IRTWorldModel().get_state())
    with pytest.raises(CoevoError, match="dim=2048"):
        LinearPGSolver().set_state(LinearPGSolver(dim=2048).get_state())
    with pytest.raises(CoevoError, match="truncated"):
        LinearPGSolver().set_state(LinearPGSolver().get_state()[:-8])


def test_a_learner_that_did_not_act_makes_the_same_update(tasks) -> None:
    """A learner given the tasks (remember) rebuilds the decisions behind another process's episodes exactly."""
    actor, learner = LinearPGSolver(), LinearPGSolver()
    episodes = actor.attempt([t for t in tasks for _ in range(4)], seed=2)
    learner.remember(tasks)
    assert [len(learner.decisions(e) or []) for e in episodes] == [
        len(actor.decisions(e) or []) for e in episodes
    ]
    a, b = actor.learn(episodes), learner.learn(episodes)
    assert a.extra["skipped"] == b.extra["skipped"] == 0
    assert np.allclose(actor.weights, learner.weights)
    assert np.abs(actor.weights).sum() > 0


def test_episodes_of_unknown_tasks_are_skipped_and_counted(tasks) -> None:
    """A learner that never saw the task cannot score its episodes: they are skipped, not guessed."""
    episodes = LinearPGSolver().attempt(tasks, seed=1)
    stats = LinearPGSolver().learn(episodes)
    assert stats.extra["skipped"] == len(episodes)
    assert stats.updates == 0


def test_a_group_that_all_succeeds_or_all_fails_teaches_nothing(tasks) -> None:
    """The group mean is the baseline: k equal rewards give zero advantage, so (without entropy) no change."""
    solver = LinearPGSolver(entropy=0.0)
    episodes = solver.attempt([tasks[0]] * 4, seed=9)
    same = [e.model_copy(update={"reward": episodes[0].reward}) for e in episodes]
    solver.learn(same)
    assert not solver.weights.any()
    mixed = solver.attempt([tasks[0]] * 4, seed=9)
    rewards = [1, 0, 0, 0]
    relabelled = [
        e.model_copy(update={"reward": e.reward.model_copy(update={"value": r})})
        for e, r in zip(mixed, rewards, strict=True)
    ]
    solver.learn(relabelled)
    assert solver.weights.any()


def test_broken_worlds_give_a_recorded_failure(tasks) -> None:
    """A task whose world cannot be built is a reward-0 episode whose reason says why; the batch goes on."""
    from coevo.run.testing import broken_task

    episodes = LinearPGSolver().attempt([broken_task(), *sample_tasks()], seed=0)
    assert episodes[0].reward.value == 0
    assert "could not be built" in episodes[0].reward.reason
    assert len(episodes) == 1 + len(sample_tasks())


def _listing(ctx: Context, tool: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
    ctx.calls.append(ToolCall(tool, {"customer_id": 5}))
    ctx.observations.append(Observation(step=len(ctx.calls), tool=tool, columns=columns, rows=rows))


def test_the_cheapest_row_is_the_least_amount_among_the_rows_described() -> None:
    """Amounts written as text are ordered as numbers, among the rows the instruction describes best.

    "The cheapest delivered order": 92.96, not 1142.97 (first in text
    order); the cancelled order's 50.00 is the least of all, on a row the
    instruction describes less well.
    """
    ctx = Context.of(
        "What is the total of the cheapest delivered order of Ada Ode? Answer with the value as shown.",
        {"list_orders": "read"},
    )
    rows = [(1, "delivered", "1142.97"), (2, "delivered", "92.96"), (3, "cancelled", "50.00")]
    _listing(ctx, "list_orders", ("id", "status", "total"), rows)
    cheapest = ("r.ext", "min", "cheapest", "number", True)

    def features(row: int) -> list[tuple]:
        source = Source("observation", "total", 0, tool="list_orders", row=row)
        return answer_features(rows[row][2], source, ctx)

    assert cheapest in features(1) and ("r.best", True, False) in features(1)
    assert cheapest not in features(0)
    assert ("r.best", False, False) in features(2)  # the least of all rows, but not delivered


def test_a_write_that_leaves_rows_described_as_well_says_so() -> None:
    """After a return on one of two delivered orders ("every"), the features say one is left; after both, none."""
    ctx = Context.of(
        "Open a return for every delivered order of Ada Ode with the reason 'late'.",
        {"list_orders": "read", "open_return": "write"},
    )
    _listing(ctx, "list_orders", ("id", "status"), [(1, "delivered"), (2, "delivered")])
    choice = Choice("open_return", "write", ("order_id", "reason"), ({}, {}), _rank=tuple)

    def write(order: int) -> list[list[tuple]]:
        ctx.calls.append(ToolCall("open_return", {"order_id": order, "reason": "late"}))
        ctx.observations.append(Observation(step=len(ctx.calls), tool="open_return", rowcount=1))
        return tool_features([None, choice], ctx)

    submit, again = write(1)
    assert ("s.more", True) in submit and ("t.more", True, True) in again
    submit, again = write(2)
    assert ("s.more", False) in submit and ("t.more", True, False) in again


def test_stated_values_are_counted_within_their_kind() -> None:
    """The customer is the first *name* stated even when a quoted reason comes first in the value list."""
    ctx = Context.of(
        "Open a return for every order of Arjun Yilmaz from Vienna with the reason 'damaged in transit'.",
        {"search_customers": "read"},
    )
    stated = {v: (i, kind) for i, (v, kind) in enumerate(instruction_values(ctx.instruction))}

    def order(value: str) -> list[tuple]:
        row, kind = stated[value]
        source = Source("instruction", kind=kind, row=row)
        return [
            f
            for f in value_features("search_customers", "name", value, source, ctx)
            if f[0] == "i.order"
        ]

    assert stated["Arjun Yilmaz"][0] > 0  # the quoted reason is read first
    assert order("Arjun Yilmaz") == [("i.order", "0", "name")]
    assert order("Vienna") == [("i.order", "1", "name")]


def test_the_prior_repeats_a_quoted_reason_and_stops_when_no_row_is_left() -> None:
    """Open a return for *every* order ... with the reason 'arrived late': the untrained policy solves some.

    Before, each write's echoed row made the quoted reason an observed
    value already given, so the second write's prior steered away from it
    (onto a date or a status), and nothing pointed to ``submit`` after the
    last row: 0 of 96 episodes succeeded, so every group failed alike and
    the family was never learnt (docs/benchmarks.md, "The learning Solver").
    Measured: 0 of 384 episodes before, 6 after; rare, but a group with one
    success has an advantage, and learning does the rest (held-out tasks of
    this family: 0.00 → 0.66–1.00 after the 30 updates of bench_solver, one run).
    """
    tasks = _tasks(range(500, 512), "bulk", domains=["retail"], level=2)
    assert len(tasks) >= 48 and all("every" in t.instruction for t in tasks)
    solver = LinearPGSolver()
    episodes = [e for seed in range(4) for e in solver.attempt(tasks, seed=seed)]
    assert sum(e.reward.value for e in episodes) >= 3
    # the second write of a successful episode gives the same quoted reason as the first
    won = [e for e in episodes if e.reward.value]
    writes = [[c for c in e.calls if c.tool == "open_return"] for e in won]
    assert any(len(w) >= 2 and len({c.arguments["reason"] for c in w}) == 1 for w in writes)
