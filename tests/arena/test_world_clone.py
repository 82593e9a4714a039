"""World.clone: another build of a validated world, for concurrent episodes, without validating again."""

from __future__ import annotations

from coevo.arena import World
from coevo.run.testing import sample_tasks


def test_a_clone_plays_like_the_original_and_keeps_its_state_to_itself() -> None:
    """Each sample task earns 1 on a clone; work done in one clone is not in the original or another clone."""
    for task in sample_tasks():
        with World(task.world) as original:
            twin, other = original.clone(), original.clone()
            assert twin.id == original.id and twin.spec is original.spec
            done = twin.run(task, task.solution)
            assert done.reward.value == 1, done.reward.detail()
            action = not task.solution[-1].arguments  # submitting at once earns 0 here
            for world in (original, other):
                if action:
                    lazy = world.run(task, [task.solution[-1]])
                    assert lazy.reward.value == 0, "the clone's writes stayed in the clone"
                assert world.run(task, task.solution).reward.value == 1
            twin.close()
            other.close()


def test_a_clone_refuses_what_the_original_refuses() -> None:
    """The guard is the same: an unknown tool and a write through a read tool fail on a clone too."""
    task = sample_tasks()[0]
    with World(task.world) as original:
        twin = original.clone()
        twin.reset(task)
        assert not twin.step({"tool": "drop_everything", "arguments": {}}).ok
        bad = twin.step({"tool": task.solution[0].tool, "arguments": {"nope": 1}})
        assert not bad.ok and bad.error
        twin.close()
