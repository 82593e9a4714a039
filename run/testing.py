"""Test helpers for plugin authors: the conformance checkers, at their public path.

::

    from coevo.run.testing import check_curriculum, check_role

    def test_my_solver_conforms():
        check_role(MySolver(lr=0.1))   # raises RoleCheckError (an AssertionError) listing every problem

    def test_my_curriculum_conforms():
        check_curriculum(MyCurriculum)

The checkers are implemented beside what they check (roles in
:mod:`coevo.agents.conformance`, curricula in
:mod:`coevo.curricula.conformance`); this module is the one stable place to
import them from, and sits on top of every floor so that it can.
"""

from __future__ import annotations

from coevo.agents.conformance import broken_task, check_role, role_problems, sample_tasks
from coevo.curricula.conformance import check_curriculum, curriculum_problems, curriculum_tasks

__all__ = [
    "broken_task",
    "check_curriculum",
    "check_role",
    "curriculum_problems",
    "curriculum_tasks",
    "role_problems",
    "sample_tasks",
]
