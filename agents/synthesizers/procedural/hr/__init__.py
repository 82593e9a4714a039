"""HR and payroll: departments, employees and their line managers, leave, expenses, payslips.

The hidden state an agent has to uncover: which of two employees with the
same name is meant (their job titles tell them apart), who someone's line
manager or department head is, which leave request is "the most recently
submitted one", whether a leave request is still pending (cancel it) or
already approved (request its cancellation from the manager instead, a row in
``leave_cancellations``), whether an expense claim is within the 1000.00
approval limit (approve it) or above it (escalate it to finance), whether an
employee has another emergency contact (only then may one be removed), and
what a payslip shows. A department head sits in the department they lead;
walks never return to a row they have been on, so "the department of the
head of Finance" is never asked.
"""

from __future__ import annotations

from coevo.agents.synthesizers.procedural.base import Domain
from coevo.agents.synthesizers.procedural.hr.catalog import CATALOG
from coevo.agents.synthesizers.procedural.hr.schema import SCHEMA
from coevo.agents.synthesizers.procedural.hr.tools import TOOLS
from coevo.agents.synthesizers.procedural.hr.world import DEFAULT_KNOBS, HrKnobs, build_world

__all__ = ["CATALOG", "DEFAULT_KNOBS", "DOMAIN", "SCHEMA", "TOOLS", "HrKnobs", "build_world"]

DOMAIN = Domain(
    name="hr",
    description="HR and payroll: departments, employees and line managers, leave, expense claims, payslips, salaries",
    build_world=build_world,
    catalog=CATALOG,
    knobs=DEFAULT_KNOBS,
)
