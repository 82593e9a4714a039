"""Task novelty: signatures keep a task's shape, the distance is a bounded symmetric measure, the archive scores and resumes exactly."""

from __future__ import annotations

import itertools
import json

import pytest
from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.arena.difficulty import TASK_FEATURES
from coevo.arena.novelty import (
    NoveltyArchive,
    TaskSignature,
    distance,
    distances,
    distinct_share,
    diversity,
    repetition_penalties,
    signature,
)
from hypothesis import given, settings
from hypothesis import strategies as st


def _propose(domains, level, n, seed=1, families=None):
    request = ProposalRequest(n=n, seed=seed, level=level, families=families)
    return ProceduralSynthesizer(domains=domains, world_pool=4).propose(request)


@pytest.fixture(scope="module")
def retail():
    return _propose(["retail"], level=2, n=16)


@pytest.fixture(scope="module")
def mixed():
    return [t for lvl in range(1, 6) for t in _propose(["retail", "hr"], level=lvl, n=6, seed=lvl)]


def _shape(task):
    return {k: v for k, v in task.provenance["plan"].items() if k != "row"}


def _row_key_pair(tasks):
    """Two tasks of one world whose plans differ only in the row key."""
    for a, b in itertools.combinations(tasks, 2):
        same_shape = _shape(a) == _shape(b) and a.world_id == b.world_id
        if same_shape and a.provenance["plan"]["row"] != b.provenance["plan"]["row"]:
            return a, b
    raise AssertionError("the retail fixture holds no two tasks differing only in the row key")


def test_a_signature_keeps_the_plan_shape_features_tools_and_schema(retail):
    """A planned task's signature names its family and hops, its features, its tools (no submit) and its tables."""
    task = retail[0]
    sig = signature(task)
    assert sig.domain == "retail"
    assert f"family:{task.provenance['plan']['family']}" in sig.plan
    assert not any(str(task.provenance["plan"]["row"]) in token for token in sig.plan)
    assert dict(sig.features) == {k: v for k, v in task.features.items() if k in TASK_FEATURES}
    assert sig.tools == tuple(c.tool for c in task.solution[:-1])
    assert "customers" in sig.schema and "orders" in sig.schema
    assert TaskSignature.from_json(json.loads(json.dumps(sig.to_json()))) == sig


def test_an_identical_task_is_at_distance_0_and_not_novel_once_archived(retail):
    """distance(t, t) is 0, and after add([t]) the archive scores t at 0."""
    task = retail[1]
    assert distance(task, task) == 0.0
    archive = NoveltyArchive(k=5)
    assert archive.novelty(task) == 1.0, "an empty archive finds everything novel"
    archive.add([task])
    assert archive.novelty(task) == 0.0


def test_another_family_or_domain_is_farther_than_another_row_key(retail):
    """Two tasks differing only in the row key are closer than a task of another family or domain."""
    a, b = _row_key_pair(retail)
    other_family = next(t for t in retail if t.provenance["plan"]["family"] != _shape(a)["family"])
    other_domain = _propose(["hr"], level=2, n=4)[0]
    near = distance(a, b)
    assert near < distance(a, other_family)
    assert near < distance(a, other_domain)
    assert distance(a, other_domain) > 0.5, "no tool, table or domain is shared across domains"


def test_novelty_falls_as_near_duplicates_are_added(retail, mixed):
    """Each near-duplicate added lowers (never raises) a task's novelty, down to 0."""
    a, b = _row_key_pair(retail)
    archive = NoveltyArchive(k=3)
    archive.add(mixed)
    scores = [archive.novelty(a)]
    for _ in range(3):
        archive.add([b])
        scores.append(archive.novelty(a))
    assert all(later <= earlier for earlier, later in itertools.pairwise(scores)), scores
    assert scores[-1] < scores[0]
    assert scores[-1] == pytest.approx(distance(a, b))


def test_a_batch_is_scored_against_the_archive_before_it_and_its_own_earlier_tasks(retail, mixed):
    """novelties(batch)[i] is the novelty of task i once tasks 0..i-1 are archived; the archive is unchanged."""
    archive = NoveltyArchive(k=4)
    archive.add(mixed[:10])
    batch = [*retail[:6], retail[0], retail[0]]
    before = archive.state()
    scores = archive.novelties(batch)
    assert archive.state() == before, "novelties() must not change the archive"
    for i, task in enumerate(batch):
        step = NoveltyArchive.from_state(before)
        step.add(batch[:i])
        assert scores[i] == pytest.approx(step.novelty(task)), f"task {i}"
    assert scores[7] <= scores[6] <= scores[0], "a repeat within the batch earns less"


def test_the_distance_matrix_agrees_with_pairwise_distance(retail, mixed):
    """distances(xs, ys)[i, j] == distance(xs[i], ys[j])."""
    xs, ys = retail[:5], mixed[:7]
    matrix = distances(xs, ys)
    assert matrix.shape == (5, 7)
    for (i, x), (j, y) in itertools.product(enumerate(xs), enumerate(ys)):
        assert matrix[i, j] == pytest.approx(distance(x, y))


def test_a_pool_of_one_family_and_level_is_less_diverse_than_a_mix():
    """30 retail bulk tasks of level 2 are less diverse than retail and hr tasks of levels 1–5."""
    narrow = _propose(["retail"], level=2, n=30, families=["bulk"])
    wide = [t for lvl in range(1, 6) for t in _propose(["retail", "hr"], level=lvl, n=6, seed=lvl)]
    assert len(narrow) == 30 and len(wide) == 30
    assert diversity(narrow) < diversity(wide)
    assert distinct_share(narrow) <= distinct_share(wide)
    assert 0.0 < diversity(wide) <= 1.0


def test_diversity_and_distinct_share_of_small_and_large_pools(retail):
    """Fewer than 2 tasks have diversity 0; a subsampled pool's diversity ignores input order."""
    assert diversity([]) == 0.0 and diversity(retail[:1]) == 0.0
    assert distinct_share([]) == 0.0
    assert distinct_share([retail[0], retail[0], retail[1]]) == pytest.approx(2 / 3)
    assert diversity(retail, sample=5) == diversity(list(reversed(retail)), sample=5)


def test_state_round_trips_through_json_and_gives_the_same_novelties(retail, mixed):
    """from_state(json(state())) holds the same signatures and scores every task the same."""
    archive = NoveltyArchive(k=3, capacity=40)
    archive.add(mixed)
    archive.add(retail[:8])
    resumed = NoveltyArchive.from_state(json.loads(json.dumps(archive.state())))
    assert resumed.signatures == archive.signatures
    assert (resumed.k, resumed.capacity, resumed.seen) == (3, 40, len(mixed) + 8)
    assert resumed.novelties(retail) == archive.novelties(retail)
    other = NoveltyArchive()
    other.load(archive.state())
    assert other.state() == archive.state()
    with pytest.raises(ValueError, match="state"):
        NoveltyArchive.from_state({"format": "something/1"})


def test_eviction_at_capacity_drops_the_oldest_deterministically(retail):
    """Past capacity the oldest signatures go; the same adds give the same archive."""
    sigs = [signature(t) for t in retail]
    archives = [NoveltyArchive(k=2, capacity=5) for _ in range(2)]
    for archive in archives:
        archive.add(sigs[:3])
        archive.add(sigs[3:9])
    assert len(archives[0]) == 5
    assert archives[0].signatures == tuple(sigs[4:9])
    assert archives[0].state() == archives[1].state()
    fresh = NoveltyArchive(k=2, capacity=5)
    fresh.add(sigs[4:9])
    assert archives[0].novelties(sigs) == fresh.novelties(sigs)


def test_evicted_tokens_leave_the_archive_without_changing_any_score():
    """An archive that turned over many unique tokens scores as one built from its current contents."""
    sigs = [
        TaskSignature("d", (f"family:f{i}",), (("steps", i % 7),), (f"tool{i}",), (f"t{i}",))
        for i in range(600)
    ]
    archive = NoveltyArchive(k=2, capacity=50)
    for start in range(0, 600, 25):
        archive.add(sigs[start : start + 25])
    fresh = NoveltyArchive(k=2, capacity=50)
    fresh.add(sigs[-50:])
    assert archive.signatures == fresh.signatures
    assert archive.novelties(sigs[::37]) == fresh.novelties(sigs[::37])


def test_a_task_without_a_plan_gets_a_signature_from_the_rest(retail):
    """A mined or imported task (no plan) is compared on features, tools, schema and domain."""
    task = retail[2]
    bare = task.model_copy(update={"provenance": {"synthesizer": "mined"}})
    sig = signature(bare)
    assert sig.plan is None and sig.tools and sig.schema and sig.features
    assert distance(bare, task) == 0.0, "the plan is left out when one side has none"
    assert 0.0 < distance(bare, retail[1]) <= 1.0
    archive = NoveltyArchive()
    archive.add(retail)
    assert 0.0 <= archive.novelty(bare) <= 1.0


def test_a_task_whose_world_is_an_id_gets_a_signature(retail):
    """A task with a world id is compared without schema (or with it, given the worlds)."""
    task = retail[3]
    by_id = task.model_copy(update={"world": task.world_id})
    sig = signature(by_id)
    assert sig.schema is None and sig.domain is None and sig.plan
    assert distance(by_id, task) < min(distance(by_id, t) for t in retail if t is not task)
    assert signature(by_id, worlds={task.world_id: task.world}) == signature(task)
    tagged = by_id.model_copy(update={"provenance": {**by_id.provenance, "domain": "retail"}})
    assert signature(tagged).domain == "retail"
    archive = NoveltyArchive()
    archive.add([by_id])
    assert archive.novelty(by_id) == 0.0 and archive.novelty(task) == distance(by_id, task)


def test_repetition_penalties_count_each_task_cluster(retail):
    """A task's penalty is the size of its near-duplicate cluster over the batch size (R-Zero)."""
    a, b = _row_key_pair(retail)
    far = next(t for t in retail if distance(a, t) > 0.3)
    assert repetition_penalties([a, b, far, a]) == [0.75, 0.75, 0.25, 0.75]
    assert repetition_penalties([a, far], threshold=0.0) == [0.5, 0.5]
    assert repetition_penalties([]) == []


def test_an_archive_needs_a_positive_k_and_capacity():
    """k and capacity below 1 are refused with a message naming them."""
    with pytest.raises(ValueError, match="k=0"):
        NoveltyArchive(k=0)
    with pytest.raises(ValueError, match="capacity=0"):
        NoveltyArchive(capacity=0)


_TOKENS = st.frozensets(st.sampled_from("abcdefgh"), max_size=5).map(lambda s: tuple(sorted(s)))
_FULL = st.builds(
    TaskSignature,
    domain=st.sampled_from(["retail", "hr", "clinic"]),
    plan=_TOKENS,
    features=st.fixed_dictionaries(
        {name: st.integers(0, 12) | st.sampled_from([0.5, 4.5]) for name in TASK_FEATURES}
    ).map(lambda d: tuple(sorted(d.items()))),
    tools=st.lists(st.sampled_from(["find", "list", "cancel", "refund"]), max_size=6).map(tuple),
    schema=_TOKENS,
)
_ANY = st.builds(
    TaskSignature,
    domain=st.none() | st.sampled_from(["retail", "hr"]),
    plan=st.none() | _TOKENS,
    features=st.none()
    | st.dictionaries(st.sampled_from(TASK_FEATURES), st.integers(0, 9), min_size=1).map(
        lambda d: tuple(sorted(d.items()))
    ),
    tools=st.lists(st.sampled_from(["find", "list", "cancel"]), max_size=4).map(tuple),
    schema=st.none() | _TOKENS,
)


@settings(max_examples=150, deadline=None)
@given(_ANY, _ANY)
def test_the_distance_is_symmetric_bounded_and_0_on_itself(a, b):
    """For any signatures, with parts missing or not: d(a, b) = d(b, a) in [0, 1], d(a, a) = 0."""
    assert distance(a, b) == distance(b, a)
    assert 0.0 <= distance(a, b) <= 1.0
    assert distance(a, a) == 0.0


@settings(max_examples=150, deadline=None)
@given(_FULL, _FULL, _FULL)
def test_with_every_part_known_the_distance_obeys_the_triangle_inequality(a, b, c):
    """With every part known on all sides, d(a, c) <= d(a, b) + d(b, c), and 1 when nothing is shared."""
    assert distance(a, c) <= distance(a, b) + distance(b, c) + 1e-12
    if a == b:
        assert distance(a, b) == 0.0


def test_signatures_sharing_nothing_are_at_distance_1():
    """No token, domain or feature value in common gives distance 1."""
    a = TaskSignature("retail", ("x",), (("steps", 3),), ("find",), ("orders",))
    b = TaskSignature("hr", ("y",), (("steps", 0),), ("hire",), ("staff",))
    assert distance(a, b) == 1.0
