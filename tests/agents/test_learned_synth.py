"""The learned Synthesizer: it follows a scripted Solver's frontier, is deterministic, resumes exactly, honours requests."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest
from coevo.agents.judges import MechanicalJudge
from coevo.agents.protocols import ProposalFeedback, ProposalRequest
from coevo.agents.registry import REGISTRY
from coevo.agents.synthesizers.learned import LearnedSynthesizer
from coevo.agents.synthesizers.planner import Target
from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
from coevo.arena.difficulty import task_level
from coevo.arena.errors import CoevoError, ConfigError, StateError
from coevo.arena.outcomes import Episode, Reward, Verdict
from coevo.arena.spec import TaskSpec, ToolCall
from coevo.curricula.objectives import ProposerConfig, proposal_feedback
from coevo.run.testing import check_role

from tests.agents.databases import build_library

Success = Callable[[Mapping[str, float]], float]


def _episodes(
    tasks: Sequence[TaskSpec], success: Success, rng: np.random.Generator
) -> list[Episode]:
    """Four scripted attempts per task, each a success with probability ``success(features)``.

    A success and a failure make different calls, so the objective's flakiness
    guard (same calls, different rewards) never fires on a scripted Solver.
    """
    out = []
    for task in tasks:
        for won in rng.random(4) < success(task.features):
            out.append(
                Episode(
                    task_id=task.task_id,
                    world_id=task.world_id,
                    calls=[ToolCall("submit", {"answer": "won" if won else "lost"})],
                    observations=[],
                    reward=Reward(value=int(won), submitted=True, reason="scripted"),
                )
            )
    return out


def _accepted(tasks: Sequence[TaskSpec]) -> list[Verdict]:
    return [Verdict(task_id=t.task_id, accepted=True, checks={}) for t in tasks]


def _generation(
    synth: LearnedSynthesizer,
    gen: int,
    success: Success,
    rng: np.random.Generator,
    *,
    judge: MechanicalJudge | None = None,
) -> list[TaskSpec]:
    """One generation as the arena plays it: propose (the level is only a hint), judge, play, score, learn."""
    tasks = synth.propose(ProposalRequest(n=32, seed=1000 + gen, level=1))
    verdicts = judge.assess(tasks) if judge is not None else _accepted(tasks)
    feedback = proposal_feedback(
        ProposerConfig(),
        gen,
        tasks,
        verdicts,
        _episodes(tasks, success, rng),
        novelties=[0.0] * len(tasks),
    )
    synth.learn(feedback)
    return tasks


def _share(tasks: Sequence[TaskSpec], hops: int) -> float:
    return sum(t.features["hops"] == hops for t in tasks) / len(tasks)


def test_proposals_move_to_the_scripted_solvers_frontier_and_on_when_it_is_mastered() -> None:
    """With a fixed Solver, the share of proposals at its frontier (p ≈ ½) at least doubles; once that band is mastered, it at least halves and the next band's share at least triples.

    The Solver is scripted: P(success) = 0.95 up to two look-ups, 0.5 at
    three, 0.02 beyond (phase A); then 0.95 up to three, 0.5 at four, 0.02
    beyond (phase B). Rewards are the learnability objective of the arena's
    own ``proposal_feedback`` on four attempts per task. The first and the
    last generation of phase A are judged by the mechanical Judge for real
    (every task must be accepted); the others are taken as accepted, to keep
    the test fast. Requests ask for level 1 throughout: the level is a hint.
    """
    synth = LearnedSynthesizer(domains=["retail"], world_pool=2, attempts=100)
    judge = MechanicalJudge(isolate=False)
    rng = np.random.default_rng(7)

    def phase_a(f: Mapping[str, float]) -> float:
        return 0.95 if f["hops"] <= 2 else 0.5 if f["hops"] == 3 else 0.02

    def phase_b(f: Mapping[str, float]) -> float:
        return 0.95 if f["hops"] <= 3 else 0.5 if f["hops"] == 4 else 0.02

    history: list[list[TaskSpec]] = []
    for gen in range(20):
        judged = judge if gen in (0, 19) else None
        tasks = _generation(synth, gen, phase_a, rng, judge=judged)
        if judged is not None:
            verdicts = judge.assess(tasks)
            assert all(v.accepted for v in verdicts), [v.failed for v in verdicts if not v.accepted]
        history.append(tasks)
    for gen in range(20, 40):
        history.append(_generation(synth, gen, phase_b, rng))

    def mean_share(gens: range, hops: int) -> float:
        return float(np.mean([_share(history[g], hops) for g in gens]))

    first, last_a, first_b, last_b = range(0, 2), range(17, 20), range(20, 22), range(37, 40)
    assert mean_share(last_a, 3) >= 2 * mean_share(first, 3), (
        f"three look-ups: {mean_share(first, 3):.2f} at first, {mean_share(last_a, 3):.2f} after phase A"
    )
    assert mean_share(last_b, 3) <= 0.5 * mean_share(last_a, 3), (
        f"three look-ups, mastered: {mean_share(last_a, 3):.2f} → {mean_share(last_b, 3):.2f}"
    )
    assert mean_share(last_b, 4) >= 3 * max(mean_share(first_b, 4), 0.05), (
        f"four look-ups: {mean_share(first_b, 4):.2f} → {mean_share(last_b, 4):.2f}"
    )
    assert max(synth.distribution()["hops"], key=synth.distribution()["hops"].get) == "4"


def _feedback(tasks: Sequence[TaskSpec], rewards: Sequence[float]) -> list[ProposalFeedback]:
    return [
        ProposalFeedback(
            task_id=t.task_id,
            gen=0,
            accepted=True,
            reward=r,
            objective="learnability",
            features=dict(t.features),
            provenance=dict(t.provenance),
        )
        for t, r in zip(tasks, rewards, strict=True)
    ]


def _ids(tasks: Sequence[TaskSpec]) -> list[str]:
    return [t.task_id for t in tasks]


def test_same_seed_and_state_give_the_same_tasks_and_the_state_resumes_exactly() -> None:
    """The same request from the same state gives the same tasks; a state loaded into a fresh instance proposes and learns exactly as the original."""
    request = ProposalRequest(n=12, seed=5)
    one = LearnedSynthesizer(domains=["retail", "airline"], world_pool=3)
    two = LearnedSynthesizer(domains=["retail", "airline"], world_pool=3)
    tasks = one.propose(request)
    assert _ids(tasks) == _ids(two.propose(request)) == _ids(one.propose(request))
    assert [t.provenance for t in tasks] == [t.provenance for t in two.propose(request)]
    feedback = _feedback(tasks, [float(t.features["hops"] >= 3) for t in tasks])
    one.learn(feedback)
    assert one.policy_version() == "learned-synth@1"
    fresh = LearnedSynthesizer(domains=["retail", "airline"], world_pool=3)
    fresh.set_state(one.get_state())
    assert fresh.get_state() == one.get_state()
    later = ProposalRequest(n=12, seed=6)
    assert _ids(fresh.propose(later)) == _ids(one.propose(later))
    again = _feedback(one.propose(later), [0.5] * len(fresh.propose(later)))
    one.learn(again)
    fresh.learn(again)
    assert fresh.get_state() == one.get_state()
    assert fresh.distribution() == one.distribution()
    with pytest.raises(StateError):
        fresh.set_state(b"not a state")
    with pytest.raises(StateError, match="worlds"):
        LearnedSynthesizer(domains=["retail"]).set_state(one.get_state())


def test_learning_reads_only_the_feedback() -> None:
    """An instance that proposed nothing learns from another actor's tasks exactly as the proposer does; feedback without a design or a reward is skipped."""
    proposer = LearnedSynthesizer(domains=["retail"], world_pool=2)
    learner = LearnedSynthesizer(domains=["retail"], world_pool=2)
    tasks = proposer.propose(ProposalRequest(n=10, seed=3))
    feedback = _feedback(tasks, [1.0 if t.features["hops"] == 2 else 0.0 for t in tasks])
    strange = ProposalFeedback(
        task_id="sha256:" + "0" * 64, gen=0, accepted=False, reward=-0.5, objective="learnability"
    )
    unplayed = feedback[0].model_copy(update={"reward": None})
    stats = learner.learn([*feedback, strange, unplayed])
    proposer.learn(feedback)
    assert learner.get_state() == proposer.get_state()
    assert stats.updates == 1 and stats.extra["skipped"] == 2
    assert learner.learn([]).updates == 0


def test_the_default_ignores_the_level_and_follow_requests_obeys_it() -> None:
    """By default a request's level does not shape the design (a policy that prefers long walks proposes above level 1 when asked for level 1); with follow_requests every task is of the level asked for."""
    request = ProposalRequest(n=16, seed=9, level=1)
    free = LearnedSynthesizer(domains=["retail"], world_pool=2)
    free.policy.logits["hops"][:] = [
        -2.0,
        -2.0,
        -2.0,
        2.0,
        2.0,
    ]  # a policy that prefers 4–5 look-ups
    tasks = free.propose(request)
    assert sum(task_level(t) != 1 for t in tasks) >= len(tasks) // 2
    assert all(t.provenance["design"]["ignored_level"] == 1 for t in tasks)
    assert all("level" not in t.provenance for t in tasks)
    followed = LearnedSynthesizer(domains=["retail"], world_pool=2, follow_requests=True)
    followed.set_state(free.get_state())
    for level in (1, 3):
        tasks = followed.propose(request.model_copy(update={"level": level}))
        assert len(tasks) >= 12, followed.misses[:2]
        assert {task_level(t) for t in tasks} == {level}
        assert all(t.provenance["design"]["followed_level"] == level for t in tasks)
    binding = free.propose(request.model_copy(update={"level": 2, "binding": True}))
    assert len(binding) >= 12 and {task_level(t) for t in binding} == {2}, (
        "a binding request (the eval suite's) is met whatever the policy prefers"
    )


def test_a_binding_request_gives_the_procedural_synthesizers_tasks() -> None:
    """The eval suite's requests (binding) give the procedural synthesizer's tasks whatever the policy prefers, so runs with either Synthesizer are measured on the same held-out suite."""
    request = ProposalRequest(n=12, seed=5, level=2, binding=True, domains=["retail"])
    learned = LearnedSynthesizer(domains=["retail", "hr"], world_pool=4)
    learned.policy.logits["hops"][:] = [2.0, -2.0, -2.0, -2.0, -2.0]
    procedural = ProceduralSynthesizer(domains=["retail", "hr"], world_pool=4)
    assert _ids(learned.propose(request)) == _ids(procedural.propose(request))


def test_a_requests_domains_families_and_features_are_honoured() -> None:
    """A request's domains, families and explicit feature ranges hold for every task (they are the curriculum's filters, not hints)."""
    synth = LearnedSynthesizer(domains=["retail", "hr"], world_pool=2)
    tasks = synth.propose(
        ProposalRequest(
            n=10, seed=2, domains=["hr"], families=["action", "bulk"], features={"hops": (2, 3)}
        )
    )
    assert len(tasks) == 10
    for task in tasks:
        assert task.provenance["synthesizer"] == "procedural/hr"
        assert task.provenance["plan"]["family"] in ("action", "bulk")
        assert 2 <= task.features["hops"] <= 3
    with pytest.raises(CoevoError, match="airline"):
        synth.propose(ProposalRequest(n=2, seed=2, domains=["airline"]))


def test_it_takes_the_procedural_synthesizers_settings() -> None:
    """The procedural settings are accepted as they are (so `procedural` can be swapped for it), with its own settings defaulted; an unknown key is a ConfigError."""
    info = REGISTRY.get("learned-synth")
    assert info.kind == "synthesizer" and {"stateful", "versioned", "learns"} <= set(
        info.capabilities
    )
    settings = info.validate({"domains": ["retail"], "world_pool": 4})
    synth = info.create(settings)
    assert isinstance(synth, LearnedSynthesizer)
    assert synth.worlds == ["retail"] and synth.world_pool == 4 and not synth.follow_requests
    assert set(ProceduralSynthesizer.__init__.__code__.co_varnames) >= {
        "domains",
        "world_pool",
        "attempts",
    }
    with pytest.raises(ConfigError, match="world_pol"):
        info.validate({"domains": ["retail"], "world_pol": 4})


def test_it_conforms() -> None:
    """check_role passes, the learning capability included."""
    check_role(LearnedSynthesizer(domains=["retail"], world_pool=4), name="learned-synth")


def test_designs_record_what_was_drawn_offered_and_realised() -> None:
    """Every task keeps its design: the values drawn, the options offered, what it realised and what was relaxed."""
    synth = LearnedSynthesizer(domains=["airline"], world_pool=2)
    tasks = synth.propose(ProposalRequest(n=24, seed=4))
    points = {"domain", "hops", "family", "writes", "filters", "superlatives", "distractors"}
    for task in tasks:
        design = task.provenance["design"]
        assert set(design["drawn"]) == set(design["offered"]) == set(design["realized"]) == points
        assert all(design["drawn"][p] in design["offered"][p] for p in points)
        assert design["realized"]["hops"] == task.features["hops"]
        assert design["realized"]["family"] == task.provenance["plan"]["family"]
        kept = points - set(design["relaxed"])
        for point in kept - {"filters", "superlatives"}:
            assert design["realized"][point] == design["drawn"][point], (point, design)
        for point in kept & {"filters", "superlatives"}:
            # "yes" asks every pick that can to use one; the hops walked may have none to use
            if design["drawn"][point] == "no":
                assert design["realized"][point] in ("no", None), (point, design)
    assert sum(not t.provenance["design"]["relaxed"] for t in tasks) >= len(tasks) // 2


def test_the_sampler_knobs_steer_filters_and_superlatives_and_keep_the_old_draws() -> None:
    """filter_share and order_share at 0 state no condition and no superlative; at their defaults the draws are the ones made without them."""
    synth = ProceduralSynthesizer(domains=["retail"])
    sampler = synth.sampler("retail", 0)
    target = Target.of(None, {"hops": (3, 4)}, ["question"])
    for seed in range(6):
        plain = sampler.sample(random.Random(seed), target)
        explicit = sampler.sample(random.Random(seed), target, filter_share=0.6, order_share=None)
        assert plain.task_id == explicit.task_id
        bare = sampler.sample(random.Random(seed), target, filter_share=0.0, order_share=0.0)
        picks = [p for p in bare.provenance["plan"]["picks"] if p is not None]
        assert all(p["filter"] is None and p["order"] is None for p in picks)


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory.mktemp("library") / "library.sqlite")


def test_mined_worlds_join_the_domain_choice(library: Path) -> None:
    """With databases, the mined world is a domain the policy chooses, its tasks come from it and pass the Judge, and rewarding it shifts the choice toward it."""
    synth = LearnedSynthesizer(domains=["retail"], world_pool=2, databases=[str(library)])
    assert synth.worlds == ["retail", "mined:library"]
    mined = synth.propose(ProposalRequest(n=6, seed=1, domains=["mined:library"]))
    assert len(mined) == 6
    for task in mined:
        assert task.provenance["synthesizer"] == "miner"
        assert task.provenance["design"]["drawn"]["domain"] == "mined:library"
        assert task.world_id == synth.miners["mined:library"].world.world_id
    assert all(v.accepted for v in MechanicalJudge(isolate=False).assess(mined))
    before = synth.distribution()["domain"]["mined:library"]
    for gen in range(4):
        tasks = synth.propose(ProposalRequest(n=16, seed=gen))
        rewards = [float(t.provenance["synthesizer"] == "miner") for t in tasks]
        synth.learn(_feedback(tasks, rewards))
    assert synth.distribution()["domain"]["mined:library"] > before + 0.2
    only = LearnedSynthesizer(domains=[], databases=[str(library)])
    assert only.worlds == ["mined:library"]
    assert all(
        t.provenance["synthesizer"] == "miner" for t in only.propose(ProposalRequest(n=3, seed=0))
    )
