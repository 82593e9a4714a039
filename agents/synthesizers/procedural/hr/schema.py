"""The HR schema: its tables, the value sets its checks, tools and catalog share, and each table's columns."""

from __future__ import annotations

from typing import Final

APPROVAL_LIMIT_CENTS = 100_000
"""Expense claims above this need finance sign-off (they are escalated, not approved)."""

LEAVE_TYPES = ("annual", "sick", "parental", "unpaid", "bereavement", "study")
LEAVE_STATUSES = ("pending", "approved", "rejected", "cancelled")
CLAIM_CATEGORIES = ("travel", "accommodation", "meals", "training", "equipment", "mileage")
CLAIM_STATUSES = ("pending", "approved", "escalated", "rejected", "paid")
EMPLOYEE_STATUSES = ("active", "on leave", "terminated")
RAISE_REASONS = ("annual review", "promotion", "market adjustment", "retention")
RELATIONSHIPS = ("spouse", "partner", "parent", "sibling", "friend", "child")


def _in(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


SCHEMA = [
    "CREATE TABLE departments(id INTEGER PRIMARY KEY, code TEXT NOT NULL UNIQUE, name TEXT NOT NULL UNIQUE, "
    "location TEXT NOT NULL, cost_center TEXT NOT NULL UNIQUE, head_id INTEGER REFERENCES employees(id))",
    "CREATE TABLE employees(id INTEGER PRIMARY KEY, employee_number TEXT NOT NULL UNIQUE, name TEXT NOT NULL, "
    "work_email TEXT NOT NULL UNIQUE, department_id INTEGER NOT NULL REFERENCES departments(id), "
    "manager_id INTEGER REFERENCES employees(id), job_title TEXT NOT NULL, hire_date TEXT NOT NULL, "
    f"status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ({_in(EMPLOYEE_STATUSES)})), "
    "termination_date TEXT, salary_cents INTEGER NOT NULL CHECK (salary_cents > 0), "
    "CHECK ((status = 'terminated') = (termination_date IS NOT NULL)), "
    "CHECK (manager_id IS NULL OR manager_id <> id))",
    "CREATE TABLE emergency_contacts(id INTEGER PRIMARY KEY, employee_id INTEGER NOT NULL REFERENCES employees(id), "
    "priority INTEGER NOT NULL CHECK (priority >= 1), name TEXT NOT NULL, "
    f"relationship TEXT NOT NULL CHECK (relationship IN ({_in(RELATIONSHIPS)})), phone TEXT NOT NULL, "
    "confirmed_on TEXT, UNIQUE (employee_id, priority))",
    "CREATE TABLE leave_requests(id INTEGER PRIMARY KEY, employee_id INTEGER NOT NULL REFERENCES employees(id), "
    f"leave_type TEXT NOT NULL CHECK (leave_type IN ({_in(LEAVE_TYPES)})), start_date TEXT NOT NULL, "
    "end_date TEXT NOT NULL, days INTEGER NOT NULL CHECK (days > 0), "
    f"status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ({_in(LEAVE_STATUSES)})), "
    "requested_on TEXT NOT NULL, decided_on TEXT, CHECK (end_date >= start_date))",
    "CREATE TABLE leave_cancellations(id INTEGER PRIMARY KEY, leave_id INTEGER NOT NULL REFERENCES leave_requests(id), "
    "requested_on TEXT NOT NULL DEFAULT (date('now')), "
    "status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'confirmed', 'declined')))",
    "CREATE TABLE expense_claims(id INTEGER PRIMARY KEY, employee_id INTEGER NOT NULL REFERENCES employees(id), "
    f"category TEXT NOT NULL CHECK (category IN ({_in(CLAIM_CATEGORIES)})), description TEXT NOT NULL, "
    "amount_cents INTEGER NOT NULL CHECK (amount_cents > 0), submitted_on TEXT NOT NULL, "
    f"status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ({_in(CLAIM_STATUSES)})), decided_on TEXT)",
    "CREATE TABLE payslips(id INTEGER PRIMARY KEY, employee_id INTEGER NOT NULL REFERENCES employees(id), "
    "period TEXT NOT NULL, gross_cents INTEGER NOT NULL CHECK (gross_cents > 0), "
    "tax_cents INTEGER NOT NULL CHECK (tax_cents >= 0), pension_cents INTEGER NOT NULL CHECK (pension_cents >= 0), "
    "net_cents INTEGER NOT NULL, paid_on TEXT NOT NULL, UNIQUE (employee_id, period), "
    "CHECK (net_cents = gross_cents - tax_cents - pension_cents))",
    "CREATE TABLE salary_changes(id INTEGER PRIMARY KEY, employee_id INTEGER NOT NULL REFERENCES employees(id), "
    "effective_on TEXT NOT NULL, old_salary_cents INTEGER NOT NULL CHECK (old_salary_cents > 0), "
    "new_salary_cents INTEGER NOT NULL CHECK (new_salary_cents > 0), reason TEXT NOT NULL)",
    "CREATE INDEX employees_by_department ON employees(department_id, hire_date)",
    "CREATE INDEX contacts_by_employee ON emergency_contacts(employee_id, priority)",
    "CREATE INDEX leave_by_employee ON leave_requests(employee_id, start_date)",
    "CREATE INDEX claims_by_employee ON expense_claims(employee_id, submitted_on)",
    "CREATE INDEX salary_changes_by_employee ON salary_changes(employee_id, effective_on)",
    # leave requests
    "CREATE TRIGGER leave_cancel_only_pending BEFORE UPDATE OF status ON leave_requests "
    "WHEN new.status = 'cancelled' AND old.status <> 'pending' "
    "BEGIN SELECT RAISE(ABORT, 'only a pending leave request can be cancelled directly; for approved leave, "
    "request its cancellation so the manager can release the days'); END",
    "CREATE TRIGGER leave_cancellation_request_not_pending BEFORE INSERT ON leave_cancellations "
    "WHEN (SELECT status FROM leave_requests WHERE id = new.leave_id) = 'pending' "
    "BEGIN SELECT RAISE(ABORT, 'this leave request is still pending; cancel it directly instead'); END",
    "CREATE TRIGGER leave_cancellation_request_only_approved BEFORE INSERT ON leave_cancellations "
    "WHEN (SELECT status FROM leave_requests WHERE id = new.leave_id) IS NOT 'approved' "
    "AND (SELECT status FROM leave_requests WHERE id = new.leave_id) IS NOT 'pending' "
    "BEGIN SELECT RAISE(ABORT, 'only approved leave can have its cancellation requested'); END",
    "CREATE TRIGGER leave_cancellation_request_not_started BEFORE INSERT ON leave_cancellations "
    "WHEN (SELECT start_date FROM leave_requests WHERE id = new.leave_id) <= date('now') "
    "BEGIN SELECT RAISE(ABORT, 'this leave has already started or been taken and can no longer be cancelled'); END",
    "CREATE TRIGGER leave_cancellation_request_once BEFORE INSERT ON leave_cancellations "
    "WHEN EXISTS (SELECT 1 FROM leave_cancellations WHERE leave_id = new.leave_id AND status = 'open') "
    "BEGIN SELECT RAISE(ABORT, 'a cancellation of this leave has already been requested and is awaiting "
    "the manager'); END",
    # expense claims
    "CREATE TRIGGER claim_approve_only_pending BEFORE UPDATE OF status ON expense_claims "
    "WHEN new.status = 'approved' AND old.status <> 'pending' "
    "BEGIN SELECT RAISE(ABORT, 'only a pending expense claim can be approved'); END",
    "CREATE TRIGGER claim_approval_limit BEFORE UPDATE OF status ON expense_claims "
    f"WHEN new.status = 'approved' AND new.amount_cents > {APPROVAL_LIMIT_CENTS} "
    "BEGIN SELECT RAISE(ABORT, 'claims over 1000.00 need finance sign-off; escalate the claim to finance instead'); END",
    "CREATE TRIGGER claim_escalate_only_over_limit BEFORE UPDATE OF status ON expense_claims "
    f"WHEN new.status = 'escalated' AND (old.status <> 'pending' OR old.amount_cents <= {APPROVAL_LIMIT_CENTS}) "
    "BEGIN SELECT RAISE(ABORT, 'only pending claims over 1000.00 are escalated to finance; "
    "approve smaller claims directly'); END",
    # salaries
    "CREATE TRIGGER no_raise_after_termination BEFORE INSERT ON salary_changes "
    "WHEN (SELECT status FROM employees WHERE id = new.employee_id) IS NOT 'active' "
    "AND (SELECT status FROM employees WHERE id = new.employee_id) IS NOT 'on leave' "
    "BEGIN SELECT RAISE(ABORT, 'salary changes can only be made for current employees'); END",
    # emergency contacts
    "CREATE TRIGGER keep_one_emergency_contact BEFORE DELETE ON emergency_contacts "
    "WHEN (SELECT count(*) FROM emergency_contacts WHERE employee_id = old.employee_id) <= 1 "
    "BEGIN SELECT RAISE(ABORT, 'every employee must keep at least one emergency contact; "
    "add another contact before removing this one'); END",
]

COLUMNS: Final = {
    "departments": ("id", "code", "name", "location", "cost_center", "head_id"),
    "employees": (
        "id",
        "employee_number",
        "name",
        "work_email",
        "department_id",
        "manager_id",
        "job_title",
        "hire_date",
        "status",
        "termination_date",
        "salary_cents",
    ),
    "emergency_contacts": (
        "id",
        "employee_id",
        "priority",
        "name",
        "relationship",
        "phone",
        "confirmed_on",
    ),
    "leave_requests": (
        "id",
        "employee_id",
        "leave_type",
        "start_date",
        "end_date",
        "days",
        "status",
        "requested_on",
        "decided_on",
    ),
    "expense_claims": (
        "id",
        "employee_id",
        "category",
        "description",
        "amount_cents",
        "submitted_on",
        "status",
        "decided_on",
    ),
    "payslips": (
        "id",
        "employee_id",
        "period",
        "gross_cents",
        "tax_cents",
        "pension_cents",
        "net_cents",
        "paid_on",
    ),
    "leave_cancellations": ("id", "leave_id", "requested_on", "status"),
    "salary_changes": (
        "id",
        "employee_id",
        "effective_on",
        "old_salary_cents",
        "new_salary_cents",
        "reason",
    ),
}
"""Each table's columns, in the order a world's rows hold them (and the world lists its tables)."""
