"""The HR catalog: how the planner names employees, walks to managers, leave, claims and pay, asks and acts."""

from __future__ import annotations

from coevo.agents.synthesizers.catalog import Action, Anchor, Attribute, Catalog, Filter, Hop, Order
from coevo.agents.synthesizers.procedural.base import TODAY
from coevo.agents.synthesizers.procedural.hr.schema import APPROVAL_LIMIT_CENTS, RAISE_REASONS

STATUS = Filter(column="status", words="{value}")

CATALOG = Catalog(
    keys={
        t: "id"
        for t in (
            "departments",
            "employees",
            "emergency_contacts",
            "leave_requests",
            "expense_claims",
            "payslips",
            "salary_changes",
            "leave_cancellations",
        )
    },
    anchors=(
        Anchor(
            table="employees",
            tool="find_employee",
            param="email",
            column="work_email",
            phrase="{name} ({work_email})",
        ),
        Anchor(
            table="employees",
            tool="find_employee",
            param="employee_number",
            column="employee_number",
            phrase="{name} (employee no. {employee_number})",
        ),
        Anchor(
            table="employees",
            tool="search_employees",
            param="name",
            column="name",
            phrase="{name} ({job_title})",
            disambiguate=("job_title",),
        ),
        Anchor(
            table="departments",
            tool="find_department",
            param="name",
            column="name",
            phrase="the {name} department",
        ),
    ),
    hops=(
        Hop(
            source="departments",
            target="employees",
            fk="department_id",
            tool="list_department_employees",
            param="department_id",
            noun="employee",
            plural="employees",
            of="in",
            orders=(
                Order(
                    expr="CASE WHEN status <> 'terminated' THEN hire_date END",
                    highest="most recently hired",
                    lowest="longest-serving",
                ),
                Order(
                    expr="CASE WHEN status <> 'terminated' THEN salary_cents END",
                    highest="highest-paid",
                    lowest="lowest-paid",
                ),
            ),
            filters=(
                Filter(column="status", words="active", value="active"),
                Filter(column="job_title", words="titled {value}", after=True),
            ),
        ),
        Hop(
            source="employees",
            target="departments",
            fk="department_id",
            tool="get_department",
            param="department_id",
            noun="department",
            plural="departments",
            down=False,
        ),
        Hop(
            source="departments",
            target="employees",
            fk="head_id",
            tool="get_employee",
            param="employee_id",
            noun="head",
            plural="heads",
            down=False,
        ),
        Hop(
            source="employees",
            target="employees",
            fk="manager_id",
            tool="get_employee",
            param="employee_id",
            noun="line manager",
            plural="line managers",
            down=False,
        ),
        Hop(
            source="employees",
            target="leave_requests",
            fk="employee_id",
            tool="list_leave_requests",
            param="employee_id",
            noun="leave request",
            plural="leave requests",
            of="from",
            orders=(
                Order(
                    expr="requested_on",
                    highest="most recently submitted",
                    lowest="earliest-submitted",
                ),
                Order(expr="days", highest="longest", lowest="shortest"),
            ),
            filters=(STATUS, Filter(column="leave_type", words="{value}")),
        ),
        Hop(
            source="employees",
            target="expense_claims",
            fk="employee_id",
            tool="list_expense_claims",
            param="employee_id",
            noun="expense claim",
            plural="expense claims",
            of="from",
            orders=(
                Order(expr="submitted_on", highest="most recent", lowest="oldest"),
                Order(expr="amount_cents", highest="largest", lowest="smallest"),
            ),
            filters=(STATUS, Filter(column="category", words="{value}")),
        ),
        Hop(
            source="employees",
            target="payslips",
            fk="employee_id",
            tool="list_payslips",
            param="employee_id",
            noun="payslip",
            plural="payslips",
            orders=(Order(expr="period", highest="latest", lowest="earliest"),),
            limit=24,
        ),
        Hop(
            source="employees",
            target="emergency_contacts",
            fk="employee_id",
            tool="list_emergency_contacts",
            param="employee_id",
            noun="emergency contact",
            plural="emergency contacts",
            orders=(Order(expr="priority", highest="lowest-priority", lowest="primary"),),
        ),
    ),
    attributes=(
        Attribute(table="employees", expr="job_title", phrase="the job title"),
        Attribute(
            table="employees", expr="hire_date", phrase="the hire date", hint="as YYYY-MM-DD"
        ),
        Attribute(
            table="employees",
            expr="printf('%.2f', salary_cents / 100.0)",
            phrase="the annual salary",
            hint="as shown, like 64250.00",
        ),
        Attribute(table="employees", expr="employee_number", phrase="the employee number"),
        Attribute(table="employees", expr="work_email", phrase="the work email address"),
        Attribute(table="departments", expr="code", phrase="the department code"),
        Attribute(table="departments", expr="cost_center", phrase="the cost center"),
        Attribute(table="departments", expr="location", phrase="the location"),
        Attribute(table="leave_requests", expr="status", phrase="the status"),
        Attribute(
            table="leave_requests",
            expr="days",
            phrase="the number of working days",
            hint="as a number",
        ),
        Attribute(
            table="leave_requests", expr="start_date", phrase="the start date", hint="as YYYY-MM-DD"
        ),
        Attribute(table="leave_requests", expr="leave_type", phrase="the leave type"),
        Attribute(
            table="expense_claims",
            expr="printf('%.2f', amount_cents / 100.0)",
            phrase="the amount",
            hint="as shown, like 123.45",
        ),
        Attribute(table="expense_claims", expr="status", phrase="the status"),
        Attribute(table="expense_claims", expr="description", phrase="the description"),
        Attribute(
            table="payslips",
            expr="printf('%.2f', net_cents / 100.0)",
            phrase="the net pay",
            hint="as shown, like 3120.50",
        ),
        Attribute(
            table="payslips",
            expr="printf('%.2f', tax_cents / 100.0)",
            phrase="the income tax",
            hint="as shown, like 812.40",
        ),
        Attribute(
            table="payslips", expr="paid_on", phrase="the payment date", hint="as YYYY-MM-DD"
        ),
        Attribute(table="emergency_contacts", expr="phone", phrase="the phone number"),
        Attribute(table="emergency_contacts", expr="name", phrase="the name"),
        Attribute(table="emergency_contacts", expr="relationship", phrase="the relationship"),
    ),
    actions=(
        Action(
            name="cancel_leave",
            table="leave_requests",
            tool="cancel_leave_request",
            args={"leave_id": "key"},
            when="status = 'pending'",
            ask="cancel {target}",
            check="SELECT status = 'cancelled' FROM leave_requests WHERE id = {target}",
            frame={"leave_requests": {"where": "id = {key}", "columns": ["status"]}},
            instead="just cancel it instead",
            blocked="if it has already been approved",
        ),
        Action(
            name="request_leave_cancellation",
            table="leave_requests",
            tool="request_leave_cancellation",
            args={"leave_id": "key"},
            when=f"status = 'approved' AND start_date > '{TODAY}' AND NOT EXISTS (SELECT 1 FROM "
            "{db}leave_cancellations c WHERE c.leave_id = leave_requests.id AND c.status = 'open')",
            ask="request the cancellation of {target}",
            check="SELECT count(*) = 1 FROM leave_cancellations WHERE leave_id = {target} AND status = 'open' "
            "AND id NOT IN (SELECT id FROM {db}leave_cancellations)",
            frame={"leave_cancellations": "id > {last[leave_cancellations]} AND leave_id = {key}"},
            instead="request its cancellation instead",
            blocked="if it is still awaiting approval",
        ),
        Action(
            name="approve_claim",
            table="expense_claims",
            tool="approve_expense_claim",
            args={"claim_id": "key"},
            when=f"status = 'pending' AND amount_cents <= {APPROVAL_LIMIT_CENTS}",
            ask="approve {target}",
            check="SELECT status = 'approved' FROM expense_claims WHERE id = {target}",
            frame={"expense_claims": {"where": "id = {key}", "columns": ["status", "decided_on"]}},
            instead="approve it instead",
            blocked="if it is over the 1000.00 approval limit",
        ),
        Action(
            name="escalate_claim",
            table="expense_claims",
            tool="escalate_expense_claim",
            args={"claim_id": "key"},
            when=f"status = 'pending' AND amount_cents > {APPROVAL_LIMIT_CENTS}",
            ask="escalate {target} to finance for sign-off",
            check="SELECT status = 'escalated' FROM expense_claims WHERE id = {target}",
            frame={"expense_claims": {"where": "id = {key}", "columns": ["status"]}},
            instead="escalate it to finance instead",
            blocked="if it is within the 1000.00 approval limit",
        ),
        Action(
            name="raise_salary",
            table="employees",
            tool="apply_salary_raise",
            args={"employee_id": "key", "percent": "choice:percent", "reason": "choice:reason"},
            when="status IN ('active', 'on leave')",
            ask="raise the salary of {target} by {percent}%, with the reason '{reason}'",
            check="SELECT e.salary_cents = CAST(round(i.salary_cents * (100 + {percent}) / 100.0) AS INTEGER) "
            "AND (SELECT count(*) FROM salary_changes s WHERE s.employee_id = e.id AND s.reason = {reason} "
            "AND s.old_salary_cents = i.salary_cents AND s.new_salary_cents = e.salary_cents "
            "AND s.id NOT IN (SELECT id FROM {db}salary_changes)) = 1 "
            "FROM employees e JOIN {db}employees i ON i.id = e.id WHERE e.id = {target}",
            frame={
                "employees": {"where": "id = {key}", "columns": ["salary_cents"]},
                "salary_changes": "id > {last[salary_changes]} AND employee_id = {key} AND reason = {reason}",
            },
            choices={"percent": (3, 4, 5, 6, 8, 10), "reason": RAISE_REASONS},
        ),
        Action(
            name="remove_contact",
            table="emergency_contacts",
            tool="remove_emergency_contact",
            args={"contact_id": "key"},
            when="(SELECT count(*) FROM {db}emergency_contacts c WHERE c.employee_id = emergency_contacts.employee_id) > 1",
            ask="remove {target}",
            check="SELECT NOT EXISTS (SELECT 1 FROM emergency_contacts WHERE id = {target})",
            frame={"emergency_contacts": "id = {key}"},
            bulk=False,
        ),
        Action(
            name="confirm_contact",
            table="emergency_contacts",
            tool="confirm_emergency_contact",
            args={"contact_id": "key"},
            when=f"confirmed_on IS NOT '{TODAY}'",
            ask="record that {target} has been confirmed as up to date",
            check=f"SELECT confirmed_on = '{TODAY}' FROM emergency_contacts WHERE id = {{target}}",
            frame={"emergency_contacts": {"where": "id = {key}", "columns": ["confirmed_on"]}},
        ),
    ),
)
