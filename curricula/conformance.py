"""``check_curriculum``: the conformance checker a curriculum (built-in or plugin) must pass.

Plugin authors run it in their own tests::

    from coevo.run.testing import check_curriculum

    def test_my_curriculum_conforms():
        check_curriculum(MyCurriculum)   # raises CurriculumCheckError listing every problem

It drives the curriculum the way the arena does (admit ``g``, plan ``g + 1``,
batch ``g``, a round of ``more`` as dynamic sampling asks, observe ``g``), for a few generations, over
variants of the bundled example tasks with rewards drawn from a fixed seed,
and checks that:

* its settings class is a :class:`~coevo.curricula.base.CurriculumConfig` and
  its defaults are valid;
* ``plan`` returns a :class:`~coevo.curricula.base.GenerationPlan`;
* ``batch`` returns at most ``tasks_per_gen`` distinct tasks, each admitted;
* ``more(g, n, played)`` (dynamic sampling's further rounds) returns at most
  ``n`` distinct admitted tasks, none of ``played``;
* the same seed and the same calls give the same plans and batches (determinism);
* ``state`` is JSON, and a fresh curriculum loaded from it makes the same
  choices from there on as the one that saved it (resume);
* ``frontier`` is a number or None.

:func:`curriculum_problems` returns the findings instead of raising.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

from coevo.arena.errors import CurriculumCheckError
from coevo.arena.examples import example_tasks
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import TaskSpec
from coevo.curricula.base import Curriculum, CurriculumConfig, GenerationPlan

__all__ = ["check_curriculum", "curriculum_problems", "curriculum_tasks"]

_DIFFICULTY = {1: 2.0, 2: 4.5, 3: 6.0}  # a difficulty inside each of levels 1-3


def curriculum_tasks(n: int = 24) -> list[TaskSpec]:
    """``n`` distinct tasks of levels 1–3: the bundled examples, each asked a few ways."""
    base = example_tasks()
    out = []
    for i in range(n):
        task = base[i % len(base)]
        level = 1 + i % 3
        out.append(
            task.model_copy(
                update={
                    "instruction": f"{task.instruction} (variant {i})",
                    "features": {**task.features, "difficulty": _DIFFICULTY[level]},
                }
            )
        )
    return out


def _drive(
    curriculum: Curriculum, tasks: Sequence[TaskSpec], gens: range, seed: int
) -> list[tuple[Any, list[str], list[str]]]:
    """Generations as the arena runs them: admit g, plan g + 1, batch g, more g, observe g; each (plan, batch ids, more ids).

    The plan for ``g + 1`` is made before ``g`` is played (the arena overlaps
    synthesis with solving), so it is recorded with generation ``g``.
    """
    trace = []
    per_gen = max(1, len(tasks) // 4)
    for gen in gens:
        rng = random.Random(derive_seed("curriculum-check", seed, gen))
        offered = [tasks[(gen * per_gen + k) % len(tasks)] for k in range(per_gen)]
        curriculum.admit(gen, offered, [rng.random() for _ in offered])
        plan = curriculum.plan(gen + 1)
        batch = curriculum.batch(gen)
        # dynamic sampling's further round: up to 2 more tasks, none of the batch's
        more = curriculum.more(gen, 2, {t.task_id for t in batch})
        played = [t.task_id for t in [*batch, *more] for _ in range(2)]
        curriculum.observe(gen, played, [rng.randint(0, 1) for _ in played])
        trace.append((plan, [t.task_id for t in batch], [t.task_id for t in more]))
    return trace


def curriculum_problems(
    cls: type[Curriculum],
    settings: Mapping[str, Any] | None = None,
    *,
    seed: int = 0,
    generations: int = 6,
) -> list[str]:
    """Every way ``cls`` falls short of the curriculum contract (empty when it conforms).

    Args:
        cls: the curriculum class.
        settings: its ``[curriculum]`` settings (default: its defaults, with ``tasks_per_gen = 4``).
        seed: the run's seed.
        generations: how many generations to drive it for.
    """
    if not (isinstance(cls, type) and issubclass(cls, Curriculum)):
        return [f"{cls!r} is not a subclass of coevo.curricula.base.Curriculum"]
    if not (isinstance(cls.Config, type) and issubclass(cls.Config, CurriculumConfig)):
        return ["its Config must be a subclass of coevo.curricula.base.CurriculumConfig"]
    settings_class: type[CurriculumConfig] = cls.Config
    try:
        config = settings_class.model_validate(
            {"tasks_per_gen": 4, **(settings or {}), "name": cls.name}
        )
    except Exception as exc:
        return [f"its settings are not valid: {exc}"]
    tasks = curriculum_tasks()
    problems: list[str] = []
    half = generations // 2
    try:
        first = _drive(cls(config, seed), tasks, range(generations), seed)
        again = _drive(cls(config, seed), tasks, range(generations), seed)
        saving = cls(config, seed)
        _drive(saving, tasks, range(half), seed)
        state = saving.state()
        restored = cls(config, seed)
        restored.load(json.loads(json.dumps(state)), {t.task_id: t for t in tasks})
        resumed = _drive(restored, tasks, range(half, generations), seed)
        frontier = restored.frontier()
    except Exception as exc:
        return [f"driving it raised {type(exc).__name__}: {exc}"]
    admitted: set[str] = set()
    per_gen = max(1, len(tasks) // 4)
    for gen, (plan, batch, more) in enumerate(first):
        admitted |= {tasks[(gen * per_gen + k) % len(tasks)].task_id for k in range(per_gen)}
        if not isinstance(plan, GenerationPlan):
            problems.append(
                f"plan({gen + 1}) must return a GenerationPlan, not {type(plan).__name__}"
            )
        if len(batch) > config.tasks_per_gen or len(set(batch)) != len(batch):
            problems.append(
                f"batch({gen}) must return at most tasks_per_gen = {config.tasks_per_gen} distinct tasks"
            )
        if not set(batch) <= admitted:
            problems.append(f"batch({gen}) returned a task that was never admitted")
        if len(more) > 2 or len(set(more)) != len(more) or set(more) & set(batch):
            problems.append(
                f"more({gen}, 2, played) must return at most 2 distinct tasks, none of played"
            )
        if not set(more) <= admitted:
            problems.append(f"more({gen}, ...) returned a task that was never admitted")
    if first != again:
        problems.append(
            "the same seed and calls gave other plans or batches; draw everything from the seed"
        )
    if resumed != first[half:]:
        problems.append(
            "a curriculum loaded from state() chose other plans or batches than the one that "
            "saved it; put everything its choices depend on in state()"
        )
    if frontier is not None and not isinstance(frontier, (int, float)):
        problems.append(f"frontier() must be a number or None, not {frontier!r}")
    return problems


def check_curriculum(
    cls: type[Curriculum], settings: Mapping[str, Any] | None = None, *, seed: int = 0
) -> None:
    """Raise :class:`~coevo.arena.errors.CurriculumCheckError` (an AssertionError) unless ``cls`` conforms."""
    problems = curriculum_problems(cls, settings, seed=seed)
    if problems:
        raise CurriculumCheckError(getattr(cls, "name", repr(cls)), problems)
