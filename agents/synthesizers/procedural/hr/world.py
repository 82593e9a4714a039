"""The HR world: its knobs, the departments and bands it is staffed from, and one small generator a table."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Final, NamedTuple

from coevo.agents.synthesizers.procedural.base import (
    NOW,
    TODAY,
    People,
    day,
    make_world,
    next_weekday,
    renumber,
    stamp,
    table_rows,
    weighted,
)
from coevo.agents.synthesizers.procedural.hr.schema import (
    APPROVAL_LIMIT_CENTS,
    CLAIM_CATEGORIES,
    CLAIM_STATUSES,
    COLUMNS,
    LEAVE_STATUSES,
    LEAVE_TYPES,
    RAISE_REASONS,
    RELATIONSHIPS,
    SCHEMA,
)
from coevo.agents.synthesizers.procedural.hr.tools import TOOLS
from coevo.agents.synthesizers.procedural.names import CITIES, COMPANY_WORDS, FIRST_NAMES
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import WorldSpec

__all__ = ["DEFAULT_KNOBS", "DEPARTMENTS", "Department", "HrKnobs", "build_world"]

FIRST_EMPLOYEE_ID = 101
"""Employee ids start here (as in an HR system that was migrated), never near a stated percentage."""


class Department(NamedTuple):
    """A department as the world staffs it."""

    name: str
    code: str
    head: str
    """The head's title (the CEO for the Executive Office)."""
    lead: str
    """The title of its one or two team leads."""
    staff: tuple[str, ...]
    """The staff's titles, commonest first."""
    size: int
    """How many people it has, head and leads included."""


DEPARTMENTS: Final = (
    Department(
        "Executive Office",
        "EXE",
        head="Chief Executive Officer",
        lead="Chief Operating Officer",
        staff=("Executive Assistant", "Chief Financial Officer"),
        size=4,
    ),
    Department(
        "Finance",
        "FIN",
        head="Head of Finance",
        lead="Finance Manager",
        staff=(
            "Accountant",
            "Senior Accountant",
            "Financial Analyst",
            "Payroll Specialist",
            "Accounts Payable Clerk",
        ),
        size=14,
    ),
    Department(
        "Human Resources",
        "HRM",
        head="Head of People",
        lead="HR Manager",
        staff=("HR Generalist", "Recruiter", "HR Business Partner", "HR Coordinator"),
        size=10,
    ),
    Department(
        "Engineering",
        "ENG",
        head="VP of Engineering",
        lead="Engineering Manager",
        staff=(
            "Software Engineer",
            "Senior Software Engineer",
            "QA Engineer",
            "DevOps Engineer",
            "Data Engineer",
            "Staff Engineer",
        ),
        size=32,
    ),
    Department(
        "Sales",
        "SAL",
        head="Head of Sales",
        lead="Sales Manager",
        staff=(
            "Account Executive",
            "Sales Development Representative",
            "Account Manager",
            "Sales Operations Analyst",
        ),
        size=24,
    ),
    Department(
        "Marketing",
        "MKT",
        head="Head of Marketing",
        lead="Marketing Manager",
        staff=(
            "Marketing Specialist",
            "Content Strategist",
            "Marketing Coordinator",
            "Product Marketing Manager",
        ),
        size=12,
    ),
    Department(
        "Customer Support",
        "SUP",
        head="Head of Customer Support",
        lead="Support Team Lead",
        staff=("Support Agent", "Senior Support Agent", "Technical Support Engineer"),
        size=22,
    ),
    Department(
        "Operations",
        "OPS",
        head="Head of Operations",
        lead="Operations Manager",
        staff=(
            "Operations Analyst",
            "Office Manager",
            "Procurement Specialist",
            "Facilities Coordinator",
        ),
        size=12,
    ),
    Department(
        "Legal",
        "LEG",
        head="General Counsel",
        lead="Legal Manager",
        staff=("Legal Counsel", "Paralegal", "Compliance Officer"),
        size=6,
    ),
    Department(
        "Product",
        "PRD",
        head="Head of Product",
        lead="Product Lead",
        staff=("Product Manager", "Product Designer", "UX Researcher"),
        size=12,
    ),
)
"""The departments, in the order they are staffed (the Executive Office first)."""

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

EMPLOYEE_STATUS_WEIGHTS = {"active": 86, "on leave": 6, "terminated": 8}
"""A staff member's status (a head or a lead is active)."""
LEAVE_TYPE_WEIGHTS = (55, 18, 3, 4, 3, 6)
"""The weights of :data:`LEAVE_TYPES` in an established employee's leave requests."""
LEAVE_STATUS_WEIGHTS = {
    "joiner": (95, 5, 0, 0),
    "upcoming": (45, 43, 8, 4),
    "past": (0, 80, 10, 10),
}
"""The weights of :data:`LEAVE_STATUSES` of a recent joiner's leave, and of others' upcoming and past leave."""
CLAIM_CATEGORY_WEIGHTS = {"joiner": (1, 0, 1, 0, 12, 0), "established": (5, 3, 5, 2, 3, 2)}
"""The weights of :data:`CLAIM_CATEGORIES`: a recent joiner mostly claims home-office equipment."""
RAISE_REASON_WEIGHTS = (6, 2, 2, 1)
"""The weights of :data:`RAISE_REASONS`."""

_MONDAY = -NOW.date().weekday()  # the day offset of this week's Monday


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


def _offset(iso: str) -> int:
    """The day offset of an ISO date from the fixed clock."""
    return (date.fromisoformat(iso) - NOW.date()).days


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
    staff = _Staff(rng, people, f"{COMPANY_WORDS[seed % len(COMPANY_WORDS)].lower()}.com")
    departments = _departments(rng, staff, knobs)
    contacts = _Contacts(rng, people, knobs)
    pay = _Pay(rng, knobs)
    leave = _Leave(rng, knobs)
    claims = _Claims(rng, knobs)
    for row in staff.rows:
        employee = _Employee.of(row)
        contacts.add(employee)
        pay.add(employee)
        leave.add(employee)
        claims.add(employee)
    # ids in the order rows were made (leave and claims by date, as a real system would have them)
    leave_rows = sorted(leave.rows, key=lambda r: (r.requested_on, r.employee_id))
    for n, request in enumerate(leave_rows, start=1):
        request.id = n
    cancellations = _cancellations(rng, leave_rows)  # a confirmed one sets its request's decision
    rows = {
        "departments": departments,
        "employees": table_rows(staff.rows),
        "emergency_contacts": contacts.rows,
        "leave_requests": table_rows(leave_rows),
        "expense_claims": renumber(sorted(claims.rows, key=lambda r: (r[5], r[1]))),
        "payslips": renumber(pay.payslips),
        "leave_cancellations": cancellations,
        "salary_changes": renumber(sorted(pay.changes, key=lambda r: (r[2], r[1]))),
    }
    return make_world("hr", SCHEMA, COLUMNS, rows, TOOLS)


@dataclass
class _EmployeeRow:
    """An ``employees`` row (its fields are the table's columns, in order)."""

    id: int
    employee_number: str
    name: str
    work_email: str
    department_id: int
    manager_id: int | None
    job_title: str
    hire_date: str
    status: str
    termination_date: str | None
    salary_cents: int


@dataclass
class _LeaveRow:
    """A ``leave_requests`` row; its id is set once the rows are in date order."""

    id: int
    employee_id: int
    leave_type: str
    start_date: str
    end_date: str
    days: int
    status: str
    requested_on: str
    decided_on: str | None


class _Staff:
    """The employees, hired one by one: a unique work email and employee number each."""

    def __init__(self, rng: random.Random, people: People, email_domain: str):
        self.rng = rng
        self.people = people
        self.email_domain = email_domain
        self.rows: list[_EmployeeRow] = []
        self.emails: set[str] = set()
        self.numbers = rng.sample(range(10_000, 100_000), 200)

    def _email(self, name: str) -> str:
        first, *rest = name.lower().split()
        local = f"{_slug(first)}.{_slug(''.join(rest))}"
        address, n = f"{local}@{self.email_domain}", 1
        while address in self.emails:
            n += 1
            address = f"{local}{n}@{self.email_domain}"
        self.emails.add(address)
        return address

    def hire(
        self, dept: int, title: str, manager: int | None, band: str, tenure: tuple[int, int]
    ) -> int:
        """Add an employee; ``band`` names the salary band, ``tenure`` the range of days since hiring."""
        rng = self.rng
        eid = FIRST_EMPLOYEE_ID + len(self.rows)
        name = self.people.name()
        address = self._email(name)
        lo, hi = SALARY_BANDS.get(band, SALARY_BANDS.get(title, (45, 75)))
        hired = -rng.randint(*tenure)
        status = "active"
        terminated: str | None = None
        if manager is not None and band not in ("head", "lead"):
            status = weighted(rng, EMPLOYEE_STATUS_WEIGHTS)
            if status == "terminated":
                hired = min(hired, -120)
                terminated = day(rng.randint(hired + 60, -10))
        self.rows.append(
            _EmployeeRow(
                eid,
                f"E{self.numbers[len(self.rows)]}",
                name,
                address,
                dept,
                manager,
                title,
                day(hired),
                status,
                terminated,
                rng.randrange(lo * 1000, hi * 1000 + 1, 250) * 100,
            )
        )
        return eid


def _departments(rng: random.Random, staff: _Staff, knobs: HrKnobs) -> list[list[Any]]:
    """The departments, each staffed as it is made: its head, one or two leads, their team.

    A department head sits in the department they lead and reports to a chief;
    the Executive Office's head is the CEO, who reports to the board.
    """
    cost_centers = rng.sample(range(100, 1000), len(DEPARTMENTS))
    chiefs: list[int] = []
    departments: list[list[Any]] = []
    for n, dept in enumerate(DEPARTMENTS, start=1):
        row = [n, dept.code, dept.name, rng.choice(CITIES[:16]), f"CC-{cost_centers[n - 1]}"]
        departments.append(row)
        boss = chiefs[rng.randrange(len(chiefs))] if chiefs else None
        head_id = staff.hire(n, dept.head, boss, "head", (400, 3600))
        row.append(head_id if chiefs else None)
        if not chiefs:
            chiefs.append(head_id)
        managers = [head_id]
        for _ in range(1 if dept.size < 20 else 2):
            managers.append(staff.hire(n, dept.lead, head_id, "lead", (300, 3000)))
        if n == 1:
            chiefs.append(managers[1])
        chiefs += _team(rng, staff, n, dept, managers, knobs)
    return departments


def _team(
    rng: random.Random,
    staff: _Staff,
    n: int,
    dept: Department,
    managers: list[int],
    knobs: HrKnobs,
) -> list[int]:
    """Department ``n``'s staff under its managers; returns the chiefs among them (one of each title)."""
    chiefs = []
    weights = [len(dept.staff) - i + 1 for i in range(len(dept.staff))]
    for _ in range(dept.size - len(managers)):
        title = rng.choices(dept.staff, weights)[0]
        if title.startswith("Chief") and any(e.job_title == title for e in staff.rows):
            title = dept.staff[0]
        joined_lately = rng.random() < knobs.recent_joiner_share
        tenure = (20, 110) if joined_lately else (110, 3000)
        eid = staff.hire(n, title, rng.choice(managers), title, tenure)
        if title.startswith("Chief"):
            chiefs.append(eid)
    return chiefs


@dataclass(frozen=True)
class _Employee:
    """What an employee's other rows are drawn from (days are offsets from the clock)."""

    id: int
    name: str
    status: str
    salary: int
    hired: int
    last: int
    """The last day employed: the termination date, or today."""

    @classmethod
    def of(cls, row: _EmployeeRow) -> _Employee:
        last = _offset(row.termination_date) if row.termination_date else 0
        return cls(row.id, row.name, row.status, row.salary_cents, _offset(row.hire_date), last)

    @property
    def surname(self) -> str:
        return self.name.split(" ", 1)[1]

    @property
    def joiner(self) -> bool:
        """A recent joiner: only upcoming leave, mostly still pending, and a few claims."""
        return self.hired > -110


class _Contacts:
    """Emergency contacts: one to three an employee, in priority order."""

    def __init__(self, rng: random.Random, people: People, knobs: HrKnobs):
        self.rng = rng
        self.people = people
        self.knobs = knobs
        self.rows: list[list[Any]] = []

    def add(self, emp: _Employee) -> None:
        rng = self.rng
        for priority in range(1, rng.choice(self.knobs.contacts_per_employee) + 1):
            relationship = rng.choice(RELATIONSHIPS[:5] if priority == 1 else RELATIONSHIPS)
            family = relationship in ("parent", "sibling", "child") or (
                relationship == "spouse" and rng.random() < 0.5
            )
            last_name = emp.surname if family else self.people.name().split(" ", 1)[1]
            self.rows.append(
                [
                    len(self.rows) + 1,
                    emp.id,
                    priority,
                    f"{rng.choice(FIRST_NAMES)} {last_name}",
                    relationship,
                    _phone(rng.choice(PHONE_CODES), rng.randrange(200_000_000, 1_000_000_000)),
                    None
                    if rng.random() < 0.2
                    else day(rng.randint(min(max(emp.hired, -1000), emp.last - 1), emp.last - 1)),
                ]
            )


def _salary_on(when: str, start: int, history: list[tuple[str, int]]) -> int:
    """The salary paid on ``when``: ``start`` before the first change of ``history`` (newest first)."""
    current = start
    for effective, value in reversed(history):
        if effective <= when:
            current = value
    return current


class _Pay:
    """Salary changes (at most one a month) and the payslips of the last months of employment."""

    def __init__(self, rng: random.Random, knobs: HrKnobs):
        self.rng = rng
        self.knobs = knobs
        self.periods = _pay_dates(knobs.payslip_months)
        self.changes: list[list[Any]] = []
        self.payslips: list[list[Any]] = []

    def add(self, emp: _Employee) -> None:
        start, history = self._history(emp)
        self._payslips(emp, start, history)

    def _history(self, emp: _Employee) -> tuple[int, list[tuple[str, int]]]:
        """Salary changes, newest first, walking back from today's salary; returns the first salary and the history."""
        rng = self.rng
        months: list[str] = []
        for _ in range(rng.choice(self.knobs.salary_changes_per_employee)):
            effective = (
                _month_start(rng.randint(emp.hired + 30, emp.last - 1))
                if emp.hired + 30 < emp.last
                else None
            )
            if effective is None or effective in months or effective <= day(emp.hired):
                continue
            months.append(effective)
        new = emp.salary
        history: list[tuple[str, int]] = []  # (effective_on, salary from then on)
        for effective in sorted(months, reverse=True):
            reason = rng.choices(RAISE_REASONS, RAISE_REASON_WEIGHTS)[0]
            pct = rng.randint(8, 15) if reason == "promotion" else rng.randint(2, 7)
            old = round(new / (1 + pct / 100) / 100) * 100
            self.changes.append([0, emp.id, effective, old, new, reason])
            history.append((effective, new))
            new = old
        return new, history

    def _payslips(self, emp: _Employee, start: int, history: list[tuple[str, int]]) -> None:
        rng = self.rng
        for period, paid, offset in self.periods:
            if offset < emp.hired + 20 or offset > emp.last:
                continue
            gross = round(_salary_on(paid, start, history) / 12)
            if rng.random() < 0.08:
                gross += rng.randrange(20000, 150000, 500)
            rate = 0.16 + min(gross / 2_500_000, 0.2)
            tax = round(gross * rate)
            pension = round(gross * 0.05)
            self.payslips.append(
                [0, emp.id, period, gross, tax, pension, gross - tax - pension, paid]
            )


class _Leave:
    """Leave requests: approved, pending and cancellation-requested leave never overlap."""

    def __init__(self, rng: random.Random, knobs: HrKnobs):
        self.rng = rng
        self.knobs = knobs
        self.rows: list[_LeaveRow] = []

    def add(self, emp: _Employee) -> None:
        rng = self.rng
        taken: list[tuple[int, int]] = []
        count = rng.choice([2, 2, 2, 3] if emp.joiner else self.knobs.leave_requests_per_employee)
        if emp.status == "on leave":
            taken.append(self._current(emp))
        for _ in range(count):
            self._request(emp, taken)

    def _current(self, emp: _Employee) -> tuple[int, int]:
        """The approved leave an employee on leave is on; returns its first and last day."""
        rng = self.rng
        start = next_weekday(max(-rng.randint(5, 60), emp.hired + 5))
        end = rng.randint(20, 90)
        kind = rng.choice(["parental", "parental", "unpaid"])
        requested = max(start - rng.randint(20, 60), emp.hired)
        self.rows.append(
            _LeaveRow(
                0,
                emp.id,
                kind,
                day(start),
                day(end),
                _working_days(start, end),
                "approved",
                stamp(requested, rng.randint(480, 1080)),
                day(min(requested + rng.randint(1, 5), 0)),
            )
        )
        return start, end

    def _length(self) -> dict[str, int]:
        """A length in days for every kind of leave (all drawn, whichever is used)."""
        rng = self.rng
        return {
            "annual": rng.choice([1, 2, 3, 4, 5, 8, 10, 12, 15]),
            "sick": rng.randint(1, 4),
            "parental": rng.randint(20, 60),
            "unpaid": rng.randint(1, 10),
            "bereavement": rng.randint(2, 5),
            "study": rng.randint(1, 3),
        }

    def _request(self, emp: _Employee, taken: list[tuple[int, int]]) -> None:
        """One leave request, unless it would not fit or would overlap active leave."""
        rng = self.rng
        kind = "annual" if emp.joiner else rng.choices(LEAVE_TYPES, LEAVE_TYPE_WEIGHTS)[0]
        length = self._length()[kind]
        horizon = emp.last if emp.status == "terminated" else 150
        low = 3 if emp.joiner else max(emp.hired + 10, -260)
        # sick and bereavement leave is recorded once taken
        high = (min(horizon, -1) if kind in ("sick", "bereavement") else horizon) - length
        if low > high:
            return
        start = next_weekday(rng.randint(low, high))
        end = start + length - 1
        when = "joiner" if emp.joiner else "upcoming" if start > 0 else "past"
        state = rng.choices(LEAVE_STATUSES, LEAVE_STATUS_WEIGHTS[when])[0]
        if kind == "sick":
            state = "approved"
        active = state in ("pending", "approved")
        if active and any(s <= end and e >= start for s, e in taken):
            return
        if active:
            taken.append((start, end))
        requested = self._requested_on(emp, kind, state, start, end)
        decided = (
            day(min(requested + rng.randint(1, 5), 0))
            if state in ("approved", "rejected")
            else None
        )
        self.rows.append(
            _LeaveRow(
                0,
                emp.id,
                kind,
                day(start),
                day(end),
                _working_days(start, end),
                state,
                stamp(requested, rng.randint(480, 1080 if requested < 0 else 700)),
                decided,
            )
        )

    def _requested_on(self, emp: _Employee, kind: str, state: str, start: int, end: int) -> int:
        """The day a request was made: lately if pending, after the fact for sick leave, else ahead."""
        if state == "pending":
            return -self.rng.randint(0, 20)
        if kind == "sick":
            return min(end + 1, 0)
        return min(max(start - self.rng.randint(7, 70), emp.hired), -1)


class _Claims:
    """Expense claims; those over the approval limit are escalated rather than approved."""

    def __init__(self, rng: random.Random, knobs: HrKnobs):
        self.rng = rng
        self.knobs = knobs
        self.rows: list[list[Any]] = []

    def add(self, emp: _Employee) -> None:
        count = self.rng.choice(
            [2, 2, 2, 3] if emp.joiner else self.knobs.expense_claims_per_employee
        )
        for _ in range(count):
            self._claim(emp)

    def _claim(self, emp: _Employee) -> None:
        rng = self.rng
        weights = CLAIM_CATEGORY_WEIGHTS["joiner" if emp.joiner else "established"]
        category = rng.choices(CLAIM_CATEGORIES, weights)[0]
        text, lo, hi = rng.choice(CLAIM_TEMPLATES[category])
        amount = rng.randint(lo * 100, min(hi, 950 if emp.joiner else hi) * 100)
        low = max(emp.hired + 7, -300)
        high = emp.last if emp.status == "terminated" else 0
        if low > high:
            return
        submitted = rng.randint(
            max(low, high - 20) if emp.joiner or rng.random() < 0.25 else low, high
        )
        state = self._status(emp, submitted, amount > APPROVAL_LIMIT_CENTS)
        decided = (
            None
            if state in ("pending", "escalated")
            else day(min(submitted + rng.randint(1, 9), 0))
        )
        self.rows.append(
            [
                0,
                emp.id,
                category,
                text.format(city=rng.choice(CITIES)),
                amount,
                day(submitted),
                state,
                decided,
            ]
        )

    def _status(self, emp: _Employee, submitted: int, big: bool) -> str:
        """A claim's status: a recent one mostly pending, an older one mostly paid."""
        rng = self.rng
        if emp.joiner:
            return "pending" if rng.random() < 0.9 else "approved"
        if submitted > -21 and emp.status != "terminated":
            return rng.choices(CLAIM_STATUSES, [75, 0 if big else 12, 20 if big else 0, 6, 0])[0]
        return rng.choices(CLAIM_STATUSES, [0, 0 if big else 8, 3 if big else 0, 12, 75])[0]


def _cancellations(rng: random.Random, leave: list[_LeaveRow]) -> list[list[Any]]:
    """Cancellations of approved leave: a few still open; the confirmed ones left the leave cancelled."""
    cancellations: list[list[Any]] = []
    for row in leave:
        status, decided, start = row.status, row.decided_on, row.start_date
        if status == "approved" and start > TODAY and rng.random() < 0.08:
            assert decided is not None  # an approved request was decided
            cancellations.append([0, row.id, max(decided, day(-rng.randint(0, 6))), "open"])
        elif status == "approved" and start <= TODAY and rng.random() < 0.02:
            cancellations.append([0, row.id, decided, "declined"])
        elif status == "cancelled" and rng.random() < 0.5:  # approved first, then cancelled
            requested = _offset(row.requested_on[:10])
            row.decided_on = day(min(requested + rng.randint(1, 3), 0))
            asked = day(min(requested + rng.randint(4, 20), 0))
            cancellations.append([0, row.id, max(asked, row.decided_on), "confirmed"])
    return renumber(sorted(cancellations, key=lambda r: (r[2], r[1])))
