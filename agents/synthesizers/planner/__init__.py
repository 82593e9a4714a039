"""Task families over a :class:`~coevo.agents.synthesizers.catalog.Catalog`: plans, realisation, difficulty.

A :class:`Plan` is a task's structure as data: which row the instruction
names, which foreign keys the agent must walk (and how each step picks its
row: the only one, the one with a stated status, the most recent, every one
that matches), and what it must do at the end (answer a question, act, act
conditionally). :func:`realize` turns a plan into a ``coevo.task/1`` record
against a world's initial state:

* the **instruction** states the goal and how to recognise the rows, never a key;
* the **verifier** restates the goal in SQL over the ``initial`` schema (the
  target row is found by the same picks, as a subquery) and frames exactly the
  rows and columns the goal may change; it is derived from the plan and the
  initial state, never from running the solution;
* the **reference solution** makes the look-ups a careful agent would make,
  with every key copied from an earlier observation;
* the **features** are measured on the realised task.

:class:`TaskSampler` draws tasks for a family and a difficulty target;
mutation operators (:mod:`coevo.agents.synthesizers.mutation`) edit plans,
reading the world through a :class:`PlanningDb` and the goals a table offers
through :func:`goal_options`.

The modules, each importing only those listed before it:

================ ================================================================
``plan``         the plan data: families, :class:`Plan`, :class:`Pick`, :class:`Target`, :class:`Unfit`
``database``     :class:`PlanningDb`: read queries against a world's initial state
``walk``         a plan's anchor and hops followed through the initial state; features
``goals``        the goals of a family on a table; an action's SQL, tool call and frame
``realization``  :func:`realize`: a plan as a task (instruction, verifier, solution)
``sampler``      :class:`TaskSampler` and the draws it makes
================ ================================================================
"""

from __future__ import annotations

from coevo.agents.synthesizers.planner.database import PlanningDb
from coevo.agents.synthesizers.planner.goals import goal_options
from coevo.agents.synthesizers.planner.plan import (
    FAMILIES,
    FAMILY_LEVELS,
    FEATURE_NAMES,
    LEVEL_FAMILIES,
    Pick,
    Plan,
    Target,
    Unfit,
    slot,
    slots,
)
from coevo.agents.synthesizers.planner.realization import realize
from coevo.agents.synthesizers.planner.sampler import TaskSampler

__all__ = [
    "FAMILIES",
    "FAMILY_LEVELS",
    "FEATURE_NAMES",
    "LEVEL_FAMILIES",
    "Pick",
    "Plan",
    "PlanningDb",
    "Target",
    "TaskSampler",
    "Unfit",
    "goal_options",
    "realize",
    "slot",
    "slots",
]
