"""Dynamic sampling: a generation's training tasks played in rounds until enough of their groups are informative.

With a binary reward and a group baseline (advantage = reward − the group's
mean), a group whose ``run.rollouts`` rewards are all equal — every episode
failed, or every one succeeded — teaches a policy gradient nothing. DAPO
(Yu et al., 2025) over-samples prompts and keeps the groups whose rewards
differ until its batch is full; with ``[curriculum] dynamic_sampling = true``
a generation does the same with its curriculum's tasks:

1. round 0 is the curriculum's :meth:`~coevo.curricula.base.Curriculum.batch`, as without it;
2. after each round, :func:`next_round` counts the informative groups
   (:func:`~coevo.arena.gamelog.figures.informative`); while fewer than
   ``tasks_per_gen`` are and fewer than ``sampling_budget × tasks_per_gen``
   tasks have been played, it asks the curriculum for more
   (:meth:`~coevo.curricula.base.Curriculum.more`: by default those whose
   success estimate — observed, else the World model's p̂ — is nearest the
   curriculum's :meth:`~coevo.curricula.base.Curriculum.aim`, so tasks
   predicted near 0 or 1 come last);
3. a round asks for the informative groups still missing divided by the
   share of informative groups so far (the whole budget left when none was),
   at least the number missing, at most the budget left; it ends when the
   batch is full, the budget is spent, or the curriculum has no task left.

Every episode is logged and observed (the curriculum and the World model
learn from all of them); the learner's step and the trainer's batch hold the
informative groups. Everything depends on the rewards alone, so the rounds
are the same on Ray and in process, and on resume; the loop
(:mod:`coevo.run.loop`) and the rebuild from the log
(:mod:`coevo.curricula.rebuild`) both play them with :func:`next_round`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from coevo.arena.gamelog.figures import informative
from coevo.arena.spec import TaskSpec
from coevo.curricula.base import Curriculum, CurriculumConfig

__all__ = ["budget", "informative_count", "next_round"]


def budget(config: CurriculumConfig) -> int:
    """The training tasks a generation may play: ``sampling_budget × tasks_per_gen`` with dynamic sampling, else ``tasks_per_gen``."""
    if not config.dynamic_sampling:
        return config.tasks_per_gen
    return max(config.tasks_per_gen, math.floor(config.sampling_budget * config.tasks_per_gen))


def informative_count(groups: Mapping[str, Sequence[float]]) -> int:
    """How many of ``groups`` (task id → the rewards of its episodes played) are informative."""
    return sum(informative(rewards) for rewards in groups.values())


def next_round(
    curriculum: Curriculum, gen: int, groups: Mapping[str, Sequence[float]]
) -> list[TaskSpec]:
    """The tasks of generation ``gen``'s next round (empty: no round; see the module).

    Args:
        curriculum: the run's curriculum (its settings say whether dynamic sampling is on).
        gen: the generation.
        groups: every task played for training in ``gen`` so far → the rewards of its
            episodes that were played (none when the Solver could play none).
    """
    config = curriculum.config
    if not config.dynamic_sampling or not groups:
        return []
    found = informative_count(groups)
    missing = config.tasks_per_gen - found
    left = budget(config) - len(groups)
    if missing <= 0 or left <= 0:
        return []
    wanted = left if found == 0 else max(missing, math.ceil(missing * len(groups) / found))
    tasks = curriculum.more(gen, min(wanted, left), set(groups))
    # a curriculum that answers with a task already played, or more than asked, is held to it
    fresh = list({t.task_id: t for t in tasks if t.task_id not in groups}.values())
    return fresh[: min(wanted, left)]
