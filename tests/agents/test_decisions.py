"""Decisions shipped from the players to the learner: data, checked whole, and the same step as rebuilding them."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from coevo.agents.decisions import pack_decisions, unpack_decisions
from coevo.agents.linear_pg import LinearPGSolver
from coevo.agents.protocols import ProposalRequest, ShipsDecisions
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.arena import TaskSpec
from coevo.arena.errors import StateError
from coevo.arena.state import pack_state, unpack_state
from hypothesis import given, settings
from hypothesis import strategies as st

DOMAINS = ["retail", "clinic", "hr", "airline", "warehouse"]


@pytest.fixture(scope="module")
def tasks() -> list[TaskSpec]:
    """Two tasks per domain and level 1–5 (questions, writes, long episodes)."""
    synth = ProceduralSynthesizer(DOMAINS, world_pool=1)
    return [
        t
        for level in range(1, 6)
        for t in synth.propose(ProposalRequest(n=5, seed=100 + level, level=level))
    ]


@pytest.fixture(scope="module")
def played(tasks) -> tuple[bytes, list, bytes]:
    """A policy trained a little (so its choices are not the prior's), its episodes and what it shipped."""
    trainer = LinearPGSolver(lr=0.2)
    for step in range(3):
        batch = tasks[step * 8 : step * 8 + 8]
        trainer.learn(trainer.attempt([t for t in batch for _ in range(2)], seed=step))
    state = trainer.get_state()
    player = LinearPGSolver()
    player.set_state(state)
    episodes = player.attempt([t for t in tasks for _ in range(2)], seed=7)
    return state, episodes, player.drain_decisions()


def _learner(state: bytes) -> LinearPGSolver:
    learner = LinearPGSolver()
    learner.set_state(state)
    return learner


def test_a_learner_given_the_shipped_decisions_takes_the_same_step_bit_for_bit(
    tasks, played
) -> None:
    """The same episodes learnt from shipped decisions and from rebuilt ones: the same stats and the same state bytes."""
    state, episodes, shipped = played
    rebuilding, taking = _learner(state), _learner(state)
    rebuilding.remember(tasks)
    taking.remember(tasks)
    taking.take_decisions([shipped])
    assert taking.learn(episodes) == rebuilding.learn(episodes)
    assert taking.get_state() == rebuilding.get_state()
    assert any(e.reward.value for e in episodes) and rebuilding.updates == state_updates(state) + 1
    # and once more from there: the successes kept for replay came through either way alike
    again = LinearPGSolver()
    again.set_state(taking.get_state())
    more = again.attempt([t for t in tasks for _ in range(2)], seed=8)
    blob = again.drain_decisions()
    rebuilding.remember(tasks)
    taking.take_decisions([blob])
    rebuilding.learn(more)
    taking.learn(more)
    assert taking.get_state() == rebuilding.get_state()


def state_updates(state: bytes) -> int:
    return int(unpack_state(state, role="linear-pg", versions={1}).meta["updates"])


def test_the_learner_uses_what_was_shipped_instead_of_rebuilding(played) -> None:
    """A learner that never saw the tasks cannot rebuild a decision, yet learns from every episode it was shipped."""
    state, episodes, shipped = played
    blind = _learner(state)
    assert blind.learn(episodes).extra["skipped"] == len(episodes)
    blind = _learner(state)
    blind.take_decisions([shipped])
    stats = blind.learn(episodes)
    assert stats.extra["skipped"] == 0 and stats.updates == 1


def test_decisions_round_trip_exactly(tasks) -> None:
    """Every field of every decision comes back as the player recorded it (buckets and owners as int64)."""
    player = LinearPGSolver()
    player.attempt(tasks[:10], seed=3)
    recorded = dict(player._traces)
    back = unpack_decisions(
        player.drain_decisions(), dim=player.weights.size, make=lambda *fields: fields
    )
    assert list(back) == list(recorded) and not player._traces
    for key, decisions in recorded.items():
        assert len(back[key]) == len(decisions)
        for d, (idx, owner, n, chosen, kind, prior) in zip(decisions, back[key], strict=True):
            assert idx.dtype == owner.dtype == np.int64
            assert np.array_equal(idx, d.idx) and np.array_equal(owner, d.owner)
            assert (n, chosen, kind) == (d.n, d.chosen, d.kind)
            assert (prior is None) == (d.prior is None)
            assert prior is None or prior.tobytes() == d.prior.tobytes()


def test_the_blob_is_data_and_nothing_is_kept_after_draining() -> None:
    """A blob is coevo.state/1 of role `decisions`; a drain with nothing played is an empty, valid blob."""
    solver = LinearPGSolver()
    assert isinstance(solver, ShipsDecisions)
    empty = solver.drain_decisions()
    assert unpack_state(empty, role="decisions", versions={1}).meta["episodes"] == []
    assert unpack_decisions(empty, dim=1024, make=lambda *f: f) == {}


def _damaged(blob: bytes, **change) -> bytes:
    """The blob with some of its arrays or meta replaced."""
    held = unpack_state(blob, role="decisions", versions={1})
    meta = {**held.meta, **{k: v for k, v in change.items() if k in ("episodes", "kinds")}}
    arrays = {**held.arrays, **{k: v for k, v in change.items() if k not in meta}}
    return pack_state("decisions", 1, meta, arrays)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: pickle.dumps({"idx": [1, 2]}), "pickle"),
        (lambda b: b[:-9], "truncated"),
        (
            lambda b: (
                b"coevo.state/1\n" + (40_000).to_bytes(4, "little") + b"[" * 20_000 + b"]" * 20_000
            ),
            "nested too deep",
        ),
        (lambda b: LinearPGSolver(dim=2048).get_state(), "written by 'linear-pg'"),
        (
            lambda b: _damaged(b, idx=np.full(5, 1 << 20, dtype=np.uint32)),
            "do not add up|outside this policy",
        ),
        (
            lambda b: _damaged(
                b, idx=unpack_state(b, role="decisions", versions={1}).arrays["idx"] + (1 << 18)
            ),
            "outside this policy's 262144",
        ),
        (
            lambda b: _damaged(b, shape=np.array([[2, 5, 0]] * 3, dtype=np.int32)),
            "chooses outside its options",
        ),
        (lambda b: _damaged(b, episodes=[["t", [["submit"]], 1]]), "is not \\[task id"),
        (lambda b: _damaged(b, episodes=[]), "do not add up"),
        (lambda b: _damaged(b, sizes=np.zeros(0, dtype=np.int32)), "wrong shapes"),
    ],
)
def test_a_damaged_or_foreign_blob_is_refused_before_anything_is_used(
    tasks, damage, message
) -> None:
    """A pickle, a truncated blob, a weights file, buckets past `dim`, a choice past the options, rows that do not add up: StateError saying which."""
    player = LinearPGSolver()
    player.attempt(tasks[:3], seed=1)
    learner = LinearPGSolver()
    with pytest.raises(StateError, match=message):
        learner.take_decisions([damage(player.drain_decisions())])
    assert not learner._traces, "nothing of a refused blob is kept"


@pytest.fixture(scope="module")
def small_blob(tasks) -> bytes:
    player = LinearPGSolver(dim=4096)
    player.attempt(tasks[:2], seed=0)
    return player.drain_decisions()


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_corruption_of_a_blob_is_refused_or_read_never_a_crash(small_blob, data) -> None:
    """Bytes flipped anywhere in a blob give StateError or decisions inside the policy, never another exception."""
    blob = bytearray(small_blob)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(blob) - 1))
        blob[at] = data.draw(st.integers(0, 255))
    try:
        back = unpack_decisions(bytes(blob), dim=4096, make=lambda *f: f)
    except StateError:
        return
    for decisions in back.values():
        for idx, owner, n, chosen, _kind, prior in decisions:
            assert idx.size == owner.size and (idx < 4096).all() and (idx >= 0).all()
            assert 0 <= chosen < n and (owner < n).all()
            assert prior is None or prior.size == n


def test_packing_keeps_every_recorded_kind_and_prior(tasks) -> None:
    """A policy without the prior ships decisions without one; pack → unpack gives them back as None."""
    player = LinearPGSolver(prior=0.0)
    player.attempt(tasks[:4], seed=2)
    traces = dict(player._traces)
    back = unpack_decisions(pack_decisions(traces), dim=player.weights.size, make=lambda *f: f)
    kinds = {d[4] for ds in back.values() for d in ds}
    assert "tool" in kinds and all(d[5] is None for ds in back.values() for d in ds)
