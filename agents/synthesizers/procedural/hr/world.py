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

import random
import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from coevo.agents.synthesizers.catalog import Action, Anchor, Attribute, Catalog, Filter, Hop, Order
from coevo.agents.synthesizers.procedural.base import (
    NOW,
    Domain,
    People,
    day,
    make_world,
    read_tool,
    stamp,
    write_tool,
)
from coevo.agents.synthesizers.procedural.names import CITIES, COMPANY_WORDS, FIRST_NAMES
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import WorldSpec

TODAY = day(0)
FIRST_EMPLOYEE_ID = 101
"""Employee ids start here (as in an HR system that was migrated), never near a stated percentage."""
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

# name, code, head title (the CEO for the Executive Office), lead title, staff titles (commonest
# first), size
DEPARTMENTS: tuple[tuple[str, str, str, str, tuple[str, ...], int], ...] = (
    (
        "Executive Office",
        "EXE",
        "Chief Executive Officer",
        "Chief Operating Officer",
        ("Executive Assistant", "Chief Financial Officer"),
        4,
    ),
    (
        "Finance",
        "FIN",
        "Head of Finance",
        "Finance Manager",
        (
            "Accountant",
            "Senior Accountant",
            "Financial Analyst",
            "Payroll Specialist",
            "Accounts Payable Clerk",
        ),
        14,
    ),
    (
        "Human Resources",
        "HRM",
        "Head of People",
        "HR Manager",
        ("HR Generalist", "Recruiter", "HR Business Partner", "HR Coordinator"),
        10,
    ),
    (
        "Engineering",
        "ENG",
        "VP of Engineering",
        "Engineering Manager",
        (
            "Software Engineer",
            "Senior Software Engineer",
            "QA Engineer",
            "DevOps Engineer",
            "Data Engineer",
            "Staff Engineer",
        ),
        32,
    ),
    (
        "Sales",
        "SAL",
        "Head of Sales",
        "Sales Manager",
        (
            "Account Executive",
            "Sales Development Representative",
            "Account Manager",
            "Sales Operations Analyst",
        ),
        24,
    ),
    (
        "Marketing",
        "MKT",
        "Head of Marketing",
        "Marketing Manager",
        (
            "Marketing Specialist",
            "Content Strategist",
            "Marketing Coordinator",
            "Product Marketing Manager",
        ),
        12,
    ),
    (
        "Customer Support",
        "SUP",
        "Head of Customer Support",
        "Support Team Lead",
        ("Support Agent", "Senior Support Agent", "Technical Support Engineer"),
        22,
    ),
    (
        "Operations",
        "OPS",
        "Head of Operations",
        "Operations Manager",
        (
            "Operations Analyst",
            "Office Manager",
            "Procurement Specialist",
            "Facilities Coordinator",
        ),
        12,
    ),
    (
        "Legal",
        "LEG",
        "General Counsel",
        "Legal Manager",
        ("Legal Counsel", "Paralegal", "Compliance Officer"),
        6,
    ),
    (
        "Product",
        "PRD",
        "Head of Product",
        "Product Lead",
        ("Product Manager", "Product Designer", "UX Researcher"),
        12,
    ),
)

SALARY_BANDS: dict[str, tuple[int, int]] = {
    "head": (135, 195),
    "lead": (90, 130),
    "Chief Financial Officer": (160, 210),
    "Executive Assistant": (48, 62),
    "Senior Accountant": (62, 80),
    "Financial Analyst": (58, 78),
    "Payroll Specialist": (46, 60),
    "Accounts Payable Clerk": (38, 48),
    "Recruiter": (48, 66),
    "HR Business Partner": (62, 82),
    "HR Coordinator": (40, 50),
    "Software Engineer": (65, 90),
    "Senior Software Engineer": (88, 118),
    "Staff Engineer": (115, 145),
    "Account Executive": (55, 80),
    "Sales Development Representative": (40, 52),
    "Support Agent": (34, 44),
    "Senior Support Agent": (42, 52),
    "Legal Counsel": (85, 120),
    "Paralegal": (45, 58),
    "Product Manager": (80, 110),
    "Facilities Coordinator": (36, 46),
}

CLAIM_TEMPLATES: dict[str, tuple[tuple[str, int, int], ...]] = {
    "travel": (
        ("Flight to {city} for client meeting", 180, 1400),
        ("Train to {city} for team offsite", 60, 320),
        ("Taxi from {city} airport", 25, 90),
    ),
    "accommodation": (
        ("Hotel in {city}, 2 nights", 220, 780),
        ("Hotel in {city}, 4 nights", 480, 1600),
    ),
    "meals": (
        ("Client dinner in {city}", 60, 340),
        ("Team lunch", 40, 220),
        ("Meals during {city} trip", 30, 150),
    ),
    "training": (
        ("Conference ticket, {city}", 450, 2400),
        ("Online certification course", 120, 900),
        ("Professional membership renewal", 150, 600),
    ),
    "equipment": (
        ("Monitor for home office", 180, 520),
        ("Ergonomic chair for home office", 250, 1150),
        ("Noise-cancelling headset", 90, 340),
    ),
    "mileage": (("Mileage to {city} site visit", 20, 260),),
}
PHONE_CODES = ("+351", "+49", "+44", "+33", "+34", "+1", "+46", "+31", "+39", "+254")


_MONDAY = -NOW.date().weekday()  # the day offset of this week's Monday


def _weekday(offset: int) -> int:
    """Move a day offset forward to the next weekday (Monday to Friday)."""
    position = (offset - _MONDAY) % 7  # 0 is a Monday
    return offset + (7 - position if position >= 5 else 0)


def _working_days(start: int, end: int) -> int:
    """Monday-to-Friday days from ``start`` to ``end`` (day offsets, inclusive)."""
    weeks, rest = divmod(end - start + 1, 7)
    first = (start - _MONDAY) % 7
    return weeks * 5 + sum(1 for k in range(rest) if (first + k) % 7 < 5)


def _pay_dates(months: int) -> list[tuple[str, str, int]]:
    """The last ``months`` pay periods as (period, pay date, the pay date's day offset).

    Pay day is the 25th, or the Friday before when the 25th falls on a weekend.
    """
    dates = []
    for k in range(months):
        period = date(NOW.year + (NOW.month - 1 - k) // 12, (NOW.month - 1 - k) % 12 + 1, 1)
        paid = period.replace(day=25)
        while paid.weekday() >= 5:
            paid -= timedelta(days=1)
        dates.append((period.strftime("%Y-%m"), paid.isoformat(), (paid - NOW.date()).days))
    return dates


def _phone(code: str, digits: int) -> str:
    text = str(digits)
    return f"{code} {text[:3]} {text[3:6]} {text[6:]}"


def _month_start(offset: int) -> str:
    return (NOW.date() + timedelta(days=offset)).replace(day=1).isoformat()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z]", "", text.lower())


@dataclass(frozen=True)
class HrKnobs:
    """The numbers that shape an HR world (the defaults are the built-in domain's).

    A draw pool is a tuple drawn from uniformly: a value that repeats is drawn
    more often. The departments and their sizes are data (``DEPARTMENTS``).
    """

    twin_share: float = 0.15
    """The chance that an employee gets a name already given (a same-name distractor)."""
    recent_joiner_share: float = 0.2
    """The chance that a staff member (not a head or lead) joined in the last few months."""
    payslip_months: int = 6
    """How many months of payslips (and their pay dates) the world holds."""
    contacts_per_employee: tuple[int, ...] = (1, 1, 2, 2, 2, 3)
    """The draw pool of an employee's number of emergency contacts."""
    salary_changes_per_employee: tuple[int, ...] = (0, 1, 1, 2, 2, 3)
    """The draw pool of an employee's number of salary changes (at most one a month)."""
    leave_requests_per_employee: tuple[int, ...] = (0, 1, 1, 2, 2, 3, 3, 4, 5, 6)
    """The draw pool of an established employee's number of leave requests (a recent
    joiner has two or three, mostly still pending)."""
    expense_claims_per_employee: tuple[int, ...] = (0, 0, 1, 1, 2, 2, 3, 3, 4, 5, 6)
    """The draw pool of an established employee's number of expense claims (a recent
    joiner has two or three)."""


DEFAULT_KNOBS = HrKnobs()
"""The knobs of the HR domain's worlds."""


def build_world(seed: int, knobs: HrKnobs = DEFAULT_KNOBS) -> WorldSpec:
    """An HR world: departments, employees (some sharing a name), their leave, claims and pay, as ``knobs`` shape it.

    With the default knobs: 10 departments, ~150 employees.
    """
    rng = random.Random(derive_seed("hr", "world", seed))
    people = People(rng, twin_share=knobs.twin_share)
    company = COMPANY_WORDS[seed % len(COMPANY_WORDS)].lower()
    email_domain = f"{company}.com"
    departments: list[list[Any]] = []
    employees: list[list[Any]] = []
    emails: set[str] = set()
    numbers = rng.sample(range(10_000, 100_000), 200)
    cost_centers = rng.sample(range(100, 1000), len(DEPARTMENTS))
    chiefs: list[int] = []

    def add_employee(
        dept: int, title: str, manager: int | None, band: str, tenure: tuple[int, int]
    ) -> int:
        eid = FIRST_EMPLOYEE_ID + len(employees)
        name = people.name()
        first, *rest = name.lower().split()
        local = f"{_slug(first)}.{_slug(''.join(rest))}"
        address, n = f"{local}@{email_domain}", 1
        while address in emails:
            n += 1
            address = f"{local}{n}@{email_domain}"
        emails.add(address)
        lo, hi = SALARY_BANDS.get(band, SALARY_BANDS.get(title, (45, 75)))
        hired = -rng.randint(*tenure)
        status = "active"
        terminated: str | None = None
        if manager is not None and band not in ("head", "lead"):
            status = rng.choices(EMPLOYEE_STATUSES, [86, 6, 8])[0]
            if status == "terminated":
                hired = min(hired, -120)
                terminated = day(rng.randint(hired + 60, -10))
        employees.append(
            [
                eid,
                f"E{numbers[len(employees)]}",
                name,
                address,
                dept,
                manager,
                title,
                day(hired),
                status,
                terminated,
                rng.randrange(lo * 1000, hi * 1000 + 1, 250) * 100,
            ]
        )
        return eid

    for n, (name, code, head, lead, staff, size) in enumerate(DEPARTMENTS, start=1):
        departments.append([n, code, name, rng.choice(CITIES[:16]), f"CC-{cost_centers[n - 1]}"])
        # a department head sits in the department they lead and reports to a chief; the
        # Executive Office's head is the CEO, who reports to the board
        boss = chiefs[rng.randrange(len(chiefs))] if chiefs else None
        head_id = add_employee(n, head, boss, "head", (400, 3600))
        departments[-1].append(head_id if chiefs else None)
        if not chiefs:
            chiefs.append(head_id)
        managers = [head_id]
        for _ in range(1 if size < 20 else 2):
            managers.append(add_employee(n, lead, head_id, "lead", (300, 3000)))
        if n == 1:
            chiefs.append(managers[1])
        weights = [len(staff) - i + 1 for i in range(len(staff))]
        for _ in range(size - len(managers)):
            title = rng.choices(staff, weights)[0]
            if title.startswith("Chief") and any(e[6] == title for e in employees):
                title = staff[0]
            joined_lately = rng.random() < knobs.recent_joiner_share
            tenure = (20, 110) if joined_lately else (110, 3000)
            eid = add_employee(n, title, rng.choice(managers), title, tenure)
            if title.startswith("Chief"):
                chiefs.append(eid)

    contacts: list[list[Any]] = []
    leave: list[list[Any]] = []
    claims: list[list[Any]] = []
    payslips: list[list[Any]] = []
    changes: list[list[Any]] = []
    periods = _pay_dates(knobs.payslip_months)
    for emp in employees:
        eid, name, status, salary = emp[0], emp[2], emp[8], emp[10]
        hired = (date.fromisoformat(emp[7]) - NOW.date()).days
        last = (date.fromisoformat(emp[9]) - NOW.date()).days if emp[9] else 0
        surname = name.split(" ", 1)[1]

        # emergency contacts
        for priority in range(1, rng.choice(knobs.contacts_per_employee) + 1):
            relationship = rng.choice(RELATIONSHIPS[:5] if priority == 1 else RELATIONSHIPS)
            family = relationship in ("parent", "sibling", "child") or (
                relationship == "spouse" and rng.random() < 0.5
            )
            last_name = surname if family else people.name().split(" ", 1)[1]
            contacts.append(
                [
                    len(contacts) + 1,
                    eid,
                    priority,
                    f"{rng.choice(FIRST_NAMES)} {last_name}",
                    relationship,
                    _phone(rng.choice(PHONE_CODES), rng.randrange(200_000_000, 1_000_000_000)),
                    None
                    if rng.random() < 0.2
                    else day(rng.randint(min(max(hired, -1000), last - 1), last - 1)),
                ]
            )

        # salary history, newest change first, walking back from today's salary
        new = salary
        months: list[str] = []
        for _ in range(rng.choice(knobs.salary_changes_per_employee)):
            effective = (
                _month_start(rng.randint(hired + 30, last - 1)) if hired + 30 < last else None
            )
            if effective is None or effective in months or effective <= day(hired):
                continue
            months.append(effective)
        history: list[tuple[str, int]] = []  # (effective_on, salary from then on)
        for effective in sorted(months, reverse=True):
            reason = rng.choices(RAISE_REASONS, [6, 2, 2, 1])[0]
            pct = rng.randint(8, 15) if reason == "promotion" else rng.randint(2, 7)
            old = round(new / (1 + pct / 100) / 100) * 100
            changes.append([0, eid, effective, old, new, reason])
            history.append((effective, new))
            new = old

        def salary_on(when: str, start: int = new, steps: list[tuple[str, int]] = history) -> int:
            current = start
            for effective, value in reversed(steps):
                if effective <= when:
                    current = value
            return current

        # payslips for the last six months of employment
        for period, paid, offset in periods:
            if offset < hired + 20 or offset > last:
                continue
            gross = round(salary_on(paid) / 12)
            if rng.random() < 0.08:
                gross += rng.randrange(20000, 150000, 500)
            rate = 0.16 + min(gross / 2_500_000, 0.2)
            tax = round(gross * rate)
            pension = round(gross * 0.05)
            payslips.append(
                [
                    0,
                    eid,
                    period,
                    gross,
                    tax,
                    pension,
                    gross - tax - pension,
                    paid,
                ]
            )

        # leave requests: approved, pending and cancellation-requested leave never overlap
        taken: list[tuple[int, int]] = []
        horizon = last if status == "terminated" else 150
        joiner = hired > -110  # a recent joiner: only upcoming leave, mostly still pending
        count = rng.choice([2, 2, 2, 3] if joiner else knobs.leave_requests_per_employee)
        if status == "on leave":
            start = _weekday(max(-rng.randint(5, 60), hired + 5))
            end = rng.randint(20, 90)
            kind = rng.choice(["parental", "parental", "unpaid"])
            requested = max(start - rng.randint(20, 60), hired)
            leave.append(
                [
                    0,
                    eid,
                    kind,
                    day(start),
                    day(end),
                    _working_days(start, end),
                    "approved",
                    stamp(requested, rng.randint(480, 1080)),
                    day(min(requested + rng.randint(1, 5), 0)),
                ]
            )
            taken.append((start, end))
        for _ in range(count):
            kind = "annual" if joiner else rng.choices(LEAVE_TYPES, [55, 18, 3, 4, 3, 6])[0]
            length = {
                "annual": rng.choice([1, 2, 3, 4, 5, 8, 10, 12, 15]),
                "sick": rng.randint(1, 4),
                "parental": rng.randint(20, 60),
                "unpaid": rng.randint(1, 10),
                "bereavement": rng.randint(2, 5),
                "study": rng.randint(1, 3),
            }[kind]
            low = 3 if joiner else max(hired + 10, -260)
            # sick and bereavement leave is recorded once taken
            high = (min(horizon, -1) if kind in ("sick", "bereavement") else horizon) - length
            if low > high:
                continue
            start = _weekday(rng.randint(low, high))
            end = start + length - 1
            future = start > 0
            status_weights = (
                [95, 5, 0, 0] if joiner else [45, 43, 8, 4] if future else [0, 80, 10, 10]
            )
            state = rng.choices(LEAVE_STATUSES, status_weights)[0]
            if kind == "sick":
                state = "approved"
            active = state in ("pending", "approved")
            if active and any(s <= end and e >= start for s, e in taken):
                continue
            if active:
                taken.append((start, end))
            if state == "pending":
                requested = -rng.randint(0, 20)
            elif kind == "sick":
                requested = min(end + 1, 0)
            else:
                requested = min(max(start - rng.randint(7, 70), hired), -1)
            decided = (
                day(min(requested + rng.randint(1, 5), 0))
                if state in ("approved", "rejected")
                else None
            )
            leave.append(
                [
                    0,
                    eid,
                    kind,
                    day(start),
                    day(end),
                    _working_days(start, end),
                    state,
                    stamp(requested, rng.randint(480, 1080 if requested < 0 else 700)),
                    decided,
                ]
            )

        # expense claims
        for _ in range(rng.choice([2, 2, 2, 3] if joiner else knobs.expense_claims_per_employee)):
            # a recent joiner mostly claims the home-office equipment they were told to buy
            category = rng.choices(
                CLAIM_CATEGORIES, [1, 0, 1, 0, 12, 0] if joiner else [5, 3, 5, 2, 3, 2]
            )[0]
            text, lo, hi = rng.choice(CLAIM_TEMPLATES[category])
            amount = rng.randint(lo * 100, min(hi, 950 if joiner else hi) * 100)
            low = max(hired + 7, -300)
            high = last if status == "terminated" else 0
            if low > high:
                continue
            submitted = rng.randint(
                max(low, high - 20) if joiner or rng.random() < 0.25 else low, high
            )
            recent = submitted > -21 and status != "terminated"
            big = amount > APPROVAL_LIMIT_CENTS
            if joiner:
                state = "pending" if rng.random() < 0.9 else "approved"
            elif recent:
                state = rng.choices(CLAIM_STATUSES, [75, 0 if big else 12, 20 if big else 0, 6, 0])[
                    0
                ]
            else:
                state = rng.choices(CLAIM_STATUSES, [0, 0 if big else 8, 3 if big else 0, 12, 75])[
                    0
                ]
            decided = (
                None
                if state in ("pending", "escalated")
                else day(min(submitted + rng.randint(1, 9), 0))
            )
            claims.append(
                [
                    0,
                    eid,
                    category,
                    text.format(city=rng.choice(CITIES)),
                    amount,
                    day(submitted),
                    state,
                    decided,
                ]
            )

    # ids in the order rows were made (leave and claims by date, as a real system would have them)
    leave.sort(key=lambda r: (r[7], r[1]))
    claims.sort(key=lambda r: (r[5], r[1]))
    changes.sort(key=lambda r: (r[2], r[1]))
    for rows in (leave, claims, payslips, changes):
        for n, row in enumerate(rows, start=1):
            row[0] = n
    # cancellations of approved leave: a few still open, the confirmed ones left the leave cancelled
    cancellations: list[list[Any]] = []
    for row in leave:
        status, decided, start = row[6], row[8], row[3]
        if status == "approved" and start > TODAY and rng.random() < 0.08:
            cancellations.append([0, row[0], max(decided, day(-rng.randint(0, 6))), "open"])
        elif status == "approved" and start <= TODAY and rng.random() < 0.02:
            cancellations.append([0, row[0], decided, "declined"])
        elif status == "cancelled" and rng.random() < 0.5:  # approved first, then cancelled
            requested = (date.fromisoformat(row[7][:10]) - NOW.date()).days
            row[8] = day(min(requested + rng.randint(1, 3), 0))
            asked = day(min(requested + rng.randint(4, 20), 0))
            cancellations.append([0, row[0], max(asked, row[8]), "confirmed"])
    cancellations.sort(key=lambda r: (r[2], r[1]))
    for n, row in enumerate(cancellations, start=1):
        row[0] = n
    return make_world(
        "hr",
        SCHEMA,
        *_split({
            "departments": (
                ["id", "code", "name", "location", "cost_center", "head_id"],
                departments,
            ),
            "employees": (
                [
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
                ],
                employees,
            ),
            "emergency_contacts": (
                ["id", "employee_id", "priority", "name", "relationship", "phone", "confirmed_on"],
                contacts,
            ),
            "leave_requests": (
                [
                    "id",
                    "employee_id",
                    "leave_type",
                    "start_date",
                    "end_date",
                    "days",
                    "status",
                    "requested_on",
                    "decided_on",
                ],
                leave,
            ),
            "expense_claims": (
                [
                    "id",
                    "employee_id",
                    "category",
                    "description",
                    "amount_cents",
                    "submitted_on",
                    "status",
                    "decided_on",
                ],
                claims,
            ),
            "payslips": (
                [
                    "id",
                    "employee_id",
                    "period",
                    "gross_cents",
                    "tax_cents",
                    "pension_cents",
                    "net_cents",
                    "paid_on",
                ],
                payslips,
            ),
            "leave_cancellations": (
                ["id", "leave_id", "requested_on", "status"],
                cancellations,
            ),
            "salary_changes": (
                [
                    "id",
                    "employee_id",
                    "effective_on",
                    "old_salary_cents",
                    "new_salary_cents",
                    "reason",
                ],
                changes,
            ),
        }),
        TOOLS,
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

DOMAIN = Domain(
    name="hr",
    description="HR and payroll: departments, employees and line managers, leave, expense claims, payslips, salaries",
    build_world=build_world,
    catalog=CATALOG,
    knobs=DEFAULT_KNOBS,
)


def _split(tables):  # temporary, during the restructuring
    return {k: v[0] for k, v in tables.items()}, {k: v[1] for k, v in tables.items()}
