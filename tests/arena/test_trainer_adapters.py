"""Server hygiene: the LoRA adapters a run loads into vLLM are unloaded once no generation may play them, and only those."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from coevo.arena.gamelog import GameLog
from coevo.run.experiment import load_experiment
from coevo.run.handoff.transports import (
    Announcement,
    FolderTransport,
    Handoff,
    TrainerConfig,
    batch_id,
)

from tests.agents.fake_openai import ExplorerPolicy, FakeOpenAI, status

KEY = "sk-fake-adapter-key"
SOLVER = "llm-solver"


@pytest.fixture(autouse=True)
def api_key(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


class _Events:
    """``events(name, **fields)``, kept."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, event: str, **fields: Any) -> None:
        self.seen.append((event, fields))

    def named(self, event: str) -> list[dict[str, Any]]:
        return [fields for name, fields in self.seen if name == event]


def _settings(server: FakeOpenAI) -> Any:
    experiment = load_experiment("openai-trainer", [f'solver.config.base_url="{server.url}"'])
    return experiment.role_settings()["solver"]


def _handoff(tmp_path: Path, k: int, events: _Events) -> tuple[Handoff, FolderTransport]:
    folder = FolderTransport(str(tmp_path / "run" / "trainer"))
    handoff = Handoff(
        TrainerConfig(timeout=5, poll=0.01),
        GameLog(str(tmp_path / "run")),
        k,
        transport=folder,
        events=events,
    )
    return handoff, folder


def _announce(folder: FolderTransport, tmp_path: Path, trained_through: int) -> None:
    """The trainer's version trained through batch ``trained_through``: ``v{n}`` in a folder of its own."""
    adapter = tmp_path / "adapters" / f"v{trained_through + 1}"
    adapter.mkdir(parents=True, exist_ok=True)
    folder.announce(
        Announcement(
            batch_id=batch_id(trained_through),
            version=f"v{trained_through + 1}",
            lora_path=str(adapter),
        )
    )


def _play(
    handoff: Handoff,
    folder: FolderTransport,
    server: FakeOpenAI,
    tmp_path: Path,
    generations: range,
    lag: int = 0,
) -> list[set[str]]:
    """The loop's side, generation by generation (as ``Arena._train`` and ``_adopt`` do); the adapters loaded after each."""
    settings = _settings(server)
    loaded = []
    for gen in generations:
        if gen - 1 - lag >= 0:
            _announce(folder, tmp_path, gen - 1 - lag)  # a trainer ``lag`` batches behind
        policy = handoff.policy_for(gen)
        if policy is not None:
            handoff.load(policy, SOLVER, settings, gen)
            handoff.adopted(policy, gen)
            handoff.unload_stale(gen)
        loaded.append(set(server.adapters))
    return loaded


def test_at_staleness_0_only_the_adapters_of_the_last_two_generations_stay_loaded(tmp_path) -> None:
    """k = 0, a version per batch: after generation g adopts v_g, v_(g−1) stays (its proposals may be in flight), every older one is unloaded."""
    events = _Events()
    handoff, folder = _handoff(tmp_path, 0, events)
    with FakeOpenAI(ExplorerPolicy(2), models=["base-model"], api_key=KEY) as server:
        loaded = _play(handoff, folder, server, tmp_path, range(6))
        unloaded = [
            body["lora_name"] for action, body in server.adapter_requests if "unload" in action
        ]
    assert loaded == [set(), {"v1"}, {"v1", "v2"}, {"v2", "v3"}, {"v3", "v4"}, {"v4", "v5"}]
    assert unloaded == ["v1", "v2", "v3"]
    assert [e["adapter"] for e in events.named("adapter_unloaded")] == unloaded
    assert handoff.loaded_state() == {"v4": 3, "v5": 4}


@pytest.mark.parametrize(
    ("lag", "expected"),
    [
        # a trainer that keeps up: generation g plays v_g, and v_(g−2) may still be played by g − 1
        (
            0,
            [
                set(),
                {"v1"},
                {"v1", "v2"},
                {"v1", "v2", "v3"},
                {"v2", "v3", "v4"},
                {"v3", "v4", "v5"},
            ],
        ),
        # a trainer a batch behind: generation g plays v_(g−1); the window holds two versions
        (1, [set(), set(), {"v1"}, {"v1", "v2"}, {"v2", "v3"}, {"v3", "v4"}]),
    ],
)
def test_at_staleness_1_the_window_keeps_what_generation_g_minus_1_may_still_play(
    lag: int, expected: list[set[str]], tmp_path
) -> None:
    """k = 1: after generation g adopts its policy, every adapter trained through batch g − 3 or later stays (generation g − 1 may play it), older ones are unloaded."""
    events = _Events()
    handoff, folder = _handoff(tmp_path, 1, events)
    with FakeOpenAI(ExplorerPolicy(2), models=["base-model"], api_key=KEY) as server:
        loaded = _play(handoff, folder, server, tmp_path, range(6), lag=lag)
    assert loaded == expected
    assert not events.named("adapter_unload_failed")


def test_what_the_run_did_not_load_is_never_unloaded(tmp_path) -> None:
    """An adapter the server held before the run announced it (an operator's --lora-modules) and the base model stay, however old."""
    events = _Events()
    handoff, folder = _handoff(tmp_path, 0, events)
    with FakeOpenAI(ExplorerPolicy(2), models=["base-model"], api_key=KEY) as server:
        (tmp_path / "adapters" / "v1").mkdir(parents=True)
        server.adapters["v1"] = str(tmp_path / "adapters" / "v1")  # loaded by the operator
        loaded = _play(handoff, folder, server, tmp_path, range(5))
    assert loaded[-1] == {"v1", "v3", "v4"}
    assert "v1" not in [e["adapter"] for e in events.named("adapter_unloaded")]


def test_an_unload_that_fails_is_a_counted_event_and_is_tried_again(tmp_path) -> None:
    """A 500 from the unload endpoint: an `adapter_unload_failed` event, counted; nothing raises; the next adoption unloads it."""
    events = _Events()
    handoff, folder = _handoff(tmp_path, 0, events)
    with FakeOpenAI(ExplorerPolicy(2), models=["base-model"], api_key=KEY) as server:
        _play(handoff, folder, server, tmp_path, range(4))  # loaded: v2, v3
        settings = _settings(server)
        _announce(folder, tmp_path, 3)
        policy = handoff.policy_for(4)
        assert policy is not None
        handoff.load(policy, SOLVER, settings, 4)
        handoff.adopted(policy, 4)
        server.adapter_faults.append(status(500, message="the engine is busy"))
        assert handoff.unload_stale(4) == []
        kept = set(server.adapters)
        loaded = _play(handoff, folder, server, tmp_path, range(5, 6))
    (failed,) = events.named("adapter_unload_failed")
    assert failed["adapter"] == "v2" and "the engine is busy" in failed["error"]
    assert failed["failures"] == handoff.unload_failures == 1
    assert kept == {"v2", "v3", "v4"}
    assert loaded == [{"v4", "v5"}]  # tried again at the next policy


def test_a_resumed_run_unloads_only_what_its_checkpoint_says_it_loaded(tmp_path) -> None:
    """A new process is given the checkpoint's adapters: those it unloads when stale; an adapter it finds loaded by an earlier process it was not told of stays."""
    events = _Events()
    handoff, folder = _handoff(tmp_path, 0, events)
    with FakeOpenAI(ExplorerPolicy(2), models=["base-model"], api_key=KEY) as server:
        _play(handoff, folder, server, tmp_path, range(4))  # loaded: v2, v3
        checkpoint = handoff.loaded_state()
        assert checkpoint == {"v2": 1, "v3": 2}
        told, _ = _handoff(tmp_path, 0, events)
        told.restore_loaded(checkpoint)
        told.policy = handoff.policy
        assert _play(told, folder, server, tmp_path, range(4, 6)) == [{"v3", "v4"}, {"v4", "v5"}]
        untold, _ = _handoff(tmp_path, 0, events)
        untold.restore_loaded({"v4": "not a generation", "v5": True})  # not known to be its own
        untold.policy = told.policy
        assert _play(untold, folder, server, tmp_path, range(6, 8)) == [
            {"v4", "v5", "v6"},
            {"v4", "v5", "v6", "v7"},
        ]
