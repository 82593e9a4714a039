"""The HR tools: look employees, leave, claims, payslips and contacts up; decide, cancel, raise, record."""

from __future__ import annotations

from coevo.agents.synthesizers.procedural.base import read_tool, write_tool
from coevo.agents.synthesizers.procedural.hr.schema import (
    CLAIM_STATUSES,
    EMPLOYEE_STATUSES,
    LEAVE_STATUSES,
    RAISE_REASONS,
)

ID = {"type": "integer", "minimum": 1}
EMPLOYEE_COLUMNS = (
    "e.id, e.employee_number, e.name, e.work_email, e.job_title, e.department_id, d.name AS department, "
    "e.manager_id, e.hire_date, e.status, printf('%.2f', e.salary_cents / 100.0) AS annual_salary"
)
LEAVE_COLUMNS = (
    "id, employee_id, leave_type, start_date, end_date, days, status, requested_on, decided_on, "
    "EXISTS (SELECT 1 FROM leave_cancellations c WHERE c.leave_id = leave_requests.id "
    "AND c.status = 'open') AS cancellation_pending"
)
CLAIM_COLUMNS = (
    "id, employee_id, category, description, printf('%.2f', amount_cents / 100.0) AS amount, "
    "submitted_on, status, decided_on"
)
TOOLS = [
    read_tool(
        "find_employee",
        "Look an employee up by work email or by employee number (case-insensitive).",
        {
            "email": {"type": "string", "description": "The employee's work email address."},
            "employee_number": {
                "type": "string",
                "description": "The employee number, like E12345.",
            },
        },
        f"SELECT {EMPLOYEE_COLUMNS} FROM employees e JOIN departments d ON d.id = e.department_id "
        "WHERE lower(e.work_email) = lower(trim(:email)) OR upper(e.employee_number) = upper(trim(:employee_number))",
        required=[],
    ),
    read_tool(
        "search_employees",
        "Find employees whose name contains the given text (at most 20, current and former).",
        {"name": {"type": "string", "minLength": 2}},
        f"SELECT {EMPLOYEE_COLUMNS} FROM employees e JOIN departments d ON d.id = e.department_id "
        "WHERE e.name LIKE '%' || :name || '%' ORDER BY e.name, e.id LIMIT 20",
    ),
    read_tool(
        "get_employee",
        "An employee's record by id.",
        {"employee_id": ID},
        f"SELECT {EMPLOYEE_COLUMNS}, e.termination_date FROM employees e "
        "JOIN departments d ON d.id = e.department_id WHERE e.id = :employee_id",
    ),
    read_tool(
        "find_department",
        "Find departments whose name contains the given text.",
        {"name": {"type": "string", "minLength": 2}},
        "SELECT id, code, name, location, cost_center, head_id FROM departments "
        "WHERE name LIKE '%' || :name || '%' ORDER BY name",
    ),
    read_tool(
        "get_department",
        "A department's details by id, with its current headcount.",
        {"department_id": ID},
        "SELECT d.id, d.code, d.name, d.location, d.cost_center, d.head_id, "
        "(SELECT count(*) FROM employees e WHERE e.department_id = d.id AND e.status <> 'terminated') AS headcount "
        "FROM departments d WHERE d.id = :department_id",
    ),
    read_tool(
        "list_department_employees",
        "The employees of a department (current and former), longest-serving first, optionally only one status.",
        {
            "department_id": ID,
            "status": {"type": "string", "enum": list(EMPLOYEE_STATUSES)},
        },
        f"SELECT {EMPLOYEE_COLUMNS} FROM employees e JOIN departments d ON d.id = e.department_id "
        "WHERE e.department_id = :department_id AND (:status IS NULL OR e.status = :status) "
        "ORDER BY e.hire_date, e.id LIMIT 50",
        required=["department_id"],
    ),
    read_tool(
        "list_leave_requests",
        "An employee's leave requests, most recently submitted first, optionally only one status.",
        {"employee_id": ID, "status": {"type": "string", "enum": list(LEAVE_STATUSES)}},
        f"SELECT {LEAVE_COLUMNS} FROM leave_requests WHERE employee_id = :employee_id "
        "AND (:status IS NULL OR status = :status) ORDER BY requested_on DESC, id DESC LIMIT 50",
        required=["employee_id"],
    ),
    read_tool(
        "list_expense_claims",
        "An employee's expense claims, newest first, optionally only one status.",
        {"employee_id": ID, "status": {"type": "string", "enum": list(CLAIM_STATUSES)}},
        f"SELECT {CLAIM_COLUMNS} FROM expense_claims WHERE employee_id = :employee_id "
        "AND (:status IS NULL OR status = :status) ORDER BY submitted_on DESC, id DESC LIMIT 50",
        required=["employee_id"],
    ),
    read_tool(
        "list_payslips",
        "An employee's payslips, latest pay period first (at most 24).",
        {"employee_id": ID},
        "SELECT id, employee_id, period, printf('%.2f', gross_cents / 100.0) AS gross_pay, "
        "printf('%.2f', tax_cents / 100.0) AS income_tax, printf('%.2f', pension_cents / 100.0) AS pension, "
        "printf('%.2f', net_cents / 100.0) AS net_pay, paid_on FROM payslips "
        "WHERE employee_id = :employee_id ORDER BY period DESC LIMIT 24",
    ),
    read_tool(
        "list_emergency_contacts",
        "An employee's emergency contacts in priority order (1 = call first).",
        {"employee_id": ID},
        "SELECT id, employee_id, priority, name, relationship, phone, confirmed_on FROM emergency_contacts "
        "WHERE employee_id = :employee_id ORDER BY priority",
    ),
    read_tool(
        "get_salary_history",
        "An employee's salary changes, most recent first.",
        {"employee_id": ID},
        "SELECT id, employee_id, effective_on, printf('%.2f', old_salary_cents / 100.0) AS old_salary, "
        "printf('%.2f', new_salary_cents / 100.0) AS new_salary, reason FROM salary_changes "
        "WHERE employee_id = :employee_id ORDER BY effective_on DESC, id DESC LIMIT 50",
    ),
    write_tool(
        "cancel_leave_request",
        "Cancel a leave request that is still pending.",
        {"leave_id": ID},
        [
            "UPDATE leave_requests SET status = 'cancelled' WHERE id = :leave_id",
            f"SELECT {LEAVE_COLUMNS} FROM leave_requests WHERE id = :leave_id",
        ],
    ),
    write_tool(
        "request_leave_cancellation",
        "Ask the manager to cancel approved leave that has not started yet "
        "(the leave stays approved until they confirm).",
        {"leave_id": ID},
        [
            "INSERT INTO leave_cancellations(leave_id) VALUES (:leave_id)",
            "SELECT id, leave_id, requested_on, status FROM leave_cancellations "
            "WHERE id = (SELECT max(id) FROM leave_cancellations)",
        ],
    ),
    write_tool(
        "approve_expense_claim",
        "Approve a pending expense claim of at most 1000.00 for payment.",
        {"claim_id": ID},
        [
            "UPDATE expense_claims SET status = 'approved', decided_on = date('now') WHERE id = :claim_id",
            f"SELECT {CLAIM_COLUMNS} FROM expense_claims WHERE id = :claim_id",
        ],
    ),
    write_tool(
        "escalate_expense_claim",
        "Send a pending expense claim over 1000.00 to finance for sign-off.",
        {"claim_id": ID},
        [
            "UPDATE expense_claims SET status = 'escalated' WHERE id = :claim_id",
            f"SELECT {CLAIM_COLUMNS} FROM expense_claims WHERE id = :claim_id",
        ],
    ),
    write_tool(
        "apply_salary_raise",
        "Raise an employee's annual salary by a percentage (rounded to the cent) from today, "
        "and record the change in their salary history.",
        {
            "employee_id": ID,
            "percent": {"type": "integer", "minimum": 1, "maximum": 25},
            "reason": {"type": "string", "enum": list(RAISE_REASONS)},
        },
        [
            "INSERT INTO salary_changes(employee_id, effective_on, old_salary_cents, new_salary_cents, reason) "
            "SELECT id, date('now'), salary_cents, CAST(round(salary_cents * (100 + :percent) / 100.0) AS INTEGER), "
            ":reason FROM employees WHERE id = :employee_id",
            "UPDATE employees SET salary_cents = (SELECT new_salary_cents FROM salary_changes "
            "WHERE id = (SELECT max(id) FROM salary_changes)) WHERE id = :employee_id",
            "SELECT id, employee_id, effective_on, printf('%.2f', old_salary_cents / 100.0) AS old_salary, "
            "printf('%.2f', new_salary_cents / 100.0) AS new_salary, reason FROM salary_changes "
            "WHERE id = (SELECT max(id) FROM salary_changes) AND employee_id = :employee_id",
        ],
    ),
    write_tool(
        "remove_emergency_contact",
        "Remove one of an employee's emergency contacts (everyone must keep at least one).",
        {"contact_id": ID},
        ["DELETE FROM emergency_contacts WHERE id = :contact_id"],
    ),
    write_tool(
        "confirm_emergency_contact",
        "Record that an emergency contact's details were checked with the employee today.",
        {"contact_id": ID},
        [
            "UPDATE emergency_contacts SET confirmed_on = date('now') WHERE id = :contact_id",
            "SELECT id, employee_id, priority, name, relationship, phone, confirmed_on FROM emergency_contacts "
            "WHERE id = :contact_id",
        ],
    ),
]
