"""Clinic: an outpatient clinic's front desk and billing office.

Patients (with a medical record number, a date of birth and sometimes an
insurer), clinicians, appointments past and upcoming, the invoice of each
visit or missed visit, payments, insurance claims and prescriptions.
The hidden state an agent has to uncover: which of two patients with the same
name is meant (their dates of birth differ), which appointment is "the latest
follow-up", whether an appointment is still booked (cancel it, or charge the
no-show fee if the patient missed it), whether a claim is still pending with
the insurer (no collecting from the patient until it is decided), and whether
a new time is free in the clinician's schedule.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
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
from coevo.agents.synthesizers.procedural.names import (
    COMPANY_WORDS,
    FIRST_NAMES,
    LAST_NAMES,
)
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import WorldSpec

VISIT_TYPES = (
    "check-up",
    "follow-up",
    "consultation",
    "vaccination",
    "telehealth",
    "procedure",
    "physical therapy",
)
APPOINTMENT_STATUSES = ("booked", "completed", "cancelled", "no-show")
PAYMENT_METHODS = ("card", "cash", "bank transfer")
REMINDER_CHANNELS = ("email", "text message", "phone call", "none")
NO_SHOW_FEE_CENTS = 4000

SCHEMA = [
    "CREATE TABLE insurers(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, "
    "payer_code TEXT NOT NULL UNIQUE, claims_phone TEXT NOT NULL)",
    "CREATE TABLE patients(id INTEGER PRIMARY KEY, mrn TEXT NOT NULL UNIQUE CHECK (length(mrn) = 8), "
    "name TEXT NOT NULL, date_of_birth TEXT NOT NULL, email TEXT NOT NULL UNIQUE, phone TEXT NOT NULL, "
    "insurer_id INTEGER REFERENCES insurers(id), member_number TEXT, "
    "reminder_channel TEXT NOT NULL DEFAULT 'email' "
    "CHECK (reminder_channel IN ('email', 'text message', 'phone call', 'none')), "
    "registered_on TEXT NOT NULL, CHECK ((insurer_id IS NULL) = (member_number IS NULL)))",
    "CREATE TABLE clinicians(id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
    "credentials TEXT NOT NULL CHECK (credentials IN ('MD', 'DO', 'NP', 'PA', 'PT', 'RD')), "
    "specialty TEXT NOT NULL, room TEXT NOT NULL)",
    "CREATE TABLE appointments(id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL REFERENCES patients(id), "
    "clinician_id INTEGER NOT NULL REFERENCES clinicians(id), starts_at TEXT NOT NULL, "
    "duration_min INTEGER NOT NULL CHECK (duration_min IN (15, 30, 45, 60)), "
    "visit_type TEXT NOT NULL CHECK (visit_type IN "
    "('check-up', 'follow-up', 'consultation', 'vaccination', 'telehealth', 'procedure', 'physical therapy')), "
    "status TEXT NOT NULL DEFAULT 'booked' CHECK (status IN ('booked', 'completed', 'cancelled', 'no-show')))",
    "CREATE TABLE invoices(id INTEGER PRIMARY KEY, appointment_id INTEGER NOT NULL UNIQUE REFERENCES appointments(id), "
    "kind TEXT NOT NULL CHECK (kind IN ('visit', 'no-show fee')), "
    "amount_cents INTEGER NOT NULL CHECK (amount_cents > 0), "
    "issued_on TEXT NOT NULL DEFAULT (date('now')), due_on TEXT NOT NULL DEFAULT (date('now', '+30 days')), "
    "status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'paid', 'void')))",
    "CREATE TABLE payments(id INTEGER PRIMARY KEY, invoice_id INTEGER NOT NULL REFERENCES invoices(id), "
    "paid_on TEXT NOT NULL DEFAULT (date('now')), amount_cents INTEGER NOT NULL CHECK (amount_cents > 0), "
    "method TEXT NOT NULL CHECK (method IN ('card', 'cash', 'bank transfer', 'insurance')))",
    "CREATE TABLE claims(id INTEGER PRIMARY KEY, invoice_id INTEGER NOT NULL UNIQUE REFERENCES invoices(id), "
    "insurer_id INTEGER NOT NULL REFERENCES insurers(id), submitted_on TEXT NOT NULL, "
    "amount_cents INTEGER NOT NULL CHECK (amount_cents > 0), "
    "status TEXT NOT NULL DEFAULT 'submitted' CHECK (status IN ('submitted', 'approved', 'denied', 'appealed')), "
    "decided_on TEXT, denial_reason TEXT, appeal_note TEXT, appealed_on TEXT, "
    "CHECK ((status IN ('denied', 'appealed')) = (denial_reason IS NOT NULL)))",
    "CREATE TABLE prescriptions(id INTEGER PRIMARY KEY, appointment_id INTEGER NOT NULL REFERENCES appointments(id), "
    "drug TEXT NOT NULL, dose TEXT NOT NULL, refills INTEGER NOT NULL CHECK (refills BETWEEN 0 AND 11), "
    "status TEXT NOT NULL CHECK (status IN ('active', 'completed', 'discontinued')))",
    "CREATE INDEX appointments_by_patient ON appointments(patient_id, starts_at)",
    "CREATE INDEX appointments_by_clinician ON appointments(clinician_id, starts_at)",
    "CREATE INDEX payments_by_invoice ON payments(invoice_id)",
    "CREATE INDEX prescriptions_by_appointment ON prescriptions(appointment_id)",
    "CREATE TRIGGER cancel_only_booked BEFORE UPDATE OF status ON appointments "
    "WHEN new.status = 'cancelled' AND old.status <> 'booked' "
    "BEGIN SELECT RAISE(ABORT, 'only a booked appointment can be cancelled; "
    "if the patient missed it, charge the no-show fee instead'); END",
    "CREATE TRIGGER reschedule_only_booked BEFORE UPDATE OF starts_at ON appointments "
    "WHEN old.status <> 'booked' "
    "BEGIN SELECT RAISE(ABORT, 'only a booked appointment can be moved to another time'); END",
    "CREATE TRIGGER reschedule_in_opening_hours BEFORE UPDATE OF starts_at ON appointments "
    "WHEN new.starts_at NOT GLOB '[0-9][0-9][0-9][0-9]-[01][0-9]-[0-3][0-9] [0-2][0-9]:[0-5][0-9]' "
    "OR substr(new.starts_at, 12) NOT BETWEEN '08:00' AND '17:00' "
    "OR strftime('%w', new.starts_at) IN ('0', '6') "
    "BEGIN SELECT RAISE(ABORT, 'appointments start on a weekday between 08:00 and 17:00, "
    "written YYYY-MM-DD HH:MM'); END",
    "CREATE TRIGGER reschedule_to_future BEFORE UPDATE OF starts_at ON appointments "
    "WHEN new.starts_at <= strftime('%Y-%m-%d %H:%M', 'now') "
    "BEGIN SELECT RAISE(ABORT, 'an appointment can only be moved to a time in the future'); END",
    "CREATE TRIGGER reschedule_clinician_free BEFORE UPDATE OF starts_at ON appointments "
    "WHEN EXISTS (SELECT 1 FROM appointments o WHERE o.clinician_id = new.clinician_id "
    "AND o.starts_at = new.starts_at AND o.status = 'booked' AND o.id <> new.id) "
    "BEGIN SELECT RAISE(ABORT, 'the clinician already has an appointment at that time; "
    "check list_clinician_schedule for a free slot'); END",
    "CREATE TRIGGER reschedule_patient_free BEFORE UPDATE OF starts_at ON appointments "
    "WHEN EXISTS (SELECT 1 FROM appointments o WHERE o.patient_id = new.patient_id "
    "AND o.starts_at = new.starts_at AND o.status = 'booked' AND o.id <> new.id) "
    "BEGIN SELECT RAISE(ABORT, 'the patient already has another appointment at that time'); END",
    "CREATE TRIGGER one_invoice_per_appointment BEFORE INSERT ON invoices "
    "WHEN EXISTS (SELECT 1 FROM invoices WHERE appointment_id = new.appointment_id) "
    "BEGIN SELECT RAISE(ABORT, 'this appointment has already been billed; see get_appointment_invoice'); END",
    "CREATE TRIGGER no_show_fee_only_for_no_shows BEFORE INSERT ON invoices "
    "WHEN new.kind = 'no-show fee' "
    "AND (SELECT status FROM appointments WHERE id = new.appointment_id) IS NOT 'no-show' "
    "BEGIN SELECT RAISE(ABORT, 'a no-show fee applies only to an appointment marked as a no-show; "
    "cancel an appointment that is still booked instead'); END",
    "CREATE TRIGGER payments_only_on_open_invoices BEFORE INSERT ON payments "
    "WHEN (SELECT status FROM invoices WHERE id = new.invoice_id) IS NOT 'open' "
    "BEGIN SELECT RAISE(ABORT, 'payments can only be taken on an open invoice'); END",
    "CREATE TRIGGER no_collection_while_claim_pending BEFORE INSERT ON payments "
    "WHEN new.method <> 'insurance' AND EXISTS (SELECT 1 FROM claims WHERE invoice_id = new.invoice_id "
    "AND status IN ('submitted', 'appealed')) "
    "BEGIN SELECT RAISE(ABORT, 'a claim for this invoice is still pending with the insurer; "
    "wait for its decision before collecting from the patient'); END",
    "CREATE TRIGGER insurance_payments_kept BEFORE DELETE ON payments "
    "WHEN old.method = 'insurance' "
    "BEGIN SELECT RAISE(ABORT, 'insurance payments are reconciled against their claim "
    "and cannot be removed at the front desk'); END",
    "CREATE TRIGGER appeal_only_denied BEFORE UPDATE OF status ON claims "
    "WHEN new.status = 'appealed' AND old.status <> 'denied' "
    "BEGIN SELECT RAISE(ABORT, 'only a denied claim can be appealed'); END",
]

SPECIALTIES = {
    "family medicine": ("MD", "DO", "NP", "PA"),
    "pediatrics": ("MD", "NP"),
    "cardiology": ("MD",),
    "dermatology": ("MD", "PA"),
    "orthopedics": ("MD", "DO"),
    "physical therapy": ("PT",),
    "nutrition": ("RD",),
}
FEES = {  # visit type -> (duration in minutes, base fee in cents)
    "check-up": (30, 18000),
    "follow-up": (15, 9500),
    "consultation": (45, 22000),
    "vaccination": (15, 6500),
    "telehealth": (30, 7500),
    "procedure": (60, 34000),
    "physical therapy": (45, 12000),
}
INSURER_SUFFIXES = ("Health", "Mutual", "Care", "Assurance", "Health Plan")
DENIAL_REASONS = (
    "service not covered",
    "missing prior authorization",
    "diagnosis code invalid",
    "coverage lapsed",
)
APPEAL_NOTES = (
    "corrected diagnosis code attached",
    "prior authorization number added",
    "letter of medical necessity attached",
)
DRUGS = (
    ("Amoxicillin", "500 mg three times daily"),
    ("Lisinopril", "10 mg once daily"),
    ("Metformin", "500 mg twice daily"),
    ("Atorvastatin", "20 mg at bedtime"),
    ("Ibuprofen", "400 mg as needed"),
    ("Sertraline", "50 mg once daily"),
    ("Levothyroxine", "75 mcg once daily"),
    ("Salbutamol inhaler", "2 puffs as needed"),
    ("Omeprazole", "20 mg before breakfast"),
    ("Cetirizine", "10 mg once daily"),
    ("Hydrocortisone cream 1%", "apply twice daily"),
    ("Naproxen", "250 mg twice daily"),
)


_WEEKDAY0 = NOW.weekday()


def _weekday(offset: int) -> int:
    """``offset`` (days from the clock) moved forward to the next weekday."""
    weekday = (_WEEKDAY0 + offset) % 7
    return offset + (7 - weekday if weekday >= 5 else 0)


def _weekday_before(offset: int) -> int:
    """``offset`` (days from the clock) moved back to the previous weekday."""
    weekday = (_WEEKDAY0 + offset) % 7
    return offset - (weekday - 4 if weekday >= 5 else 0)


SLOTS = tuple(
    stamp(_weekday(offset), minutes)
    for offset, minutes in ((8, 9 * 60 + 30), (10, 14 * 60), (15, 11 * 60 + 15), (23, 16 * 60))
)
"""Future times an instruction may ask an appointment to be moved to."""

# ids start high, like a system that has been running for years (and so no id
# reads like a day or a month of a date in an instruction)
PATIENT_ID0, APPOINTMENT_ID0, INVOICE_ID0 = 4000, 20000, 50000
PAYMENT_ID0, CLAIM_ID0, PRESCRIPTION_ID0, CLINICIAN_ID0 = 70000, 80000, 90000, 100

# weighted draws as plain tuples, drawn from with a uniform choice
VISIT_DRAW = (
    ("check-up",) * 5
    + ("follow-up",) * 6
    + ("consultation",) * 3
    + ("vaccination",) * 2
    + ("telehealth",) * 3
    + ("procedure",)
)
FIRST_VISIT_DRAW = ("check-up", "check-up", "consultation", "telehealth")
UPCOMING_DRAW = ("booked",) * 8 + ("cancelled",)
PAST_DRAW = ("completed",) * 16 + ("cancelled",) * 2 + ("no-show",) * 2
MISSER_DRAW = ("completed",) * 5 + ("cancelled", "no-show", "no-show", "no-show")
CLAIM_DRAW = ("approved",) * 14 + ("denied",) * 4 + ("appealed", "submitted")
CHANNEL_DRAW = ("email",) * 5 + ("text message",) * 4 + ("phone call",) * 2 + ("none",)


@dataclass(frozen=True)
class ClinicKnobs:
    """The numbers that shape a clinic world (the defaults are the built-in domain's).

    A draw pool is a tuple drawn from uniformly: a value that repeats is drawn
    more often. The clinicians follow from the specialties (``SPECIALTIES``).
    """

    patients: int = 130
    """How many patients."""
    twin_share: float = 0.15
    """The chance that a patient gets a name already given (a same-name distractor)."""
    insurers: int = 6
    """How many insurers."""
    insured_share: float = 0.72
    """The chance that a patient has an insurer."""
    newcomer_every: int = 5
    """Every this many patients, one is newly registered (only upcoming appointments)."""
    visits_per_patient: tuple[int, ...] = (1, 1, 2, 2, 3, 3, 4, 4, 5, 6, 7, 9, 12, 16)
    """The draw pool of a registered patient's number of visits (a newcomer has one to
    three, a patient who often misses appointments five to ten)."""


DEFAULT_KNOBS = ClinicKnobs()
"""The knobs of the clinic domain's worlds."""


def build_world(seed: int, knobs: ClinicKnobs = DEFAULT_KNOBS) -> WorldSpec:
    """A clinic world: patients (some sharing a name, some new), clinicians, appointments, as ``knobs`` shape it.

    With the default knobs: 130 patients, 12 clinicians, ~750 appointments.
    """
    rng = random.Random(derive_seed("clinic", "world", seed))
    people = People(rng, twin_share=knobs.twin_share)
    chance = rng.random

    # draws from rng.random alone: several times faster than rng.choice / rng.randint
    def choice(options: Sequence[Any]) -> Any:
        return options[int(chance() * len(options))]

    def randint(low: int, high: int) -> int:
        return low + int(chance() * (high - low + 1))

    insurers: list[list[Any]] = []
    for n, word in enumerate(rng.sample(COMPANY_WORDS, knobs.insurers)):
        name = f"{word} {choice(INSURER_SUFFIXES)}"
        code = f"{word[:3].upper()}{randint(10, 99)}"
        insurers.append([n + 1, name, code, f"+1-800-{randint(200, 999)}-{randint(1000, 9999)}"])

    clinicians: list[list[Any]] = []
    for n, specialty in enumerate(["family medicine"] * 5 + ["pediatrics"] + list(SPECIALTIES)[1:]):
        credentials = choice(SPECIALTIES[specialty])
        name = f"{choice(FIRST_NAMES)} {choice(LAST_NAMES)}"
        room = f"{choice('ABC')}{randint(1, 3)}{n + 1:02d}"
        prefix = "Dr. " if credentials in ("MD", "DO") else ""
        clinicians.append([CLINICIAN_ID0 + n + 1, prefix + name, credentials, specialty, room])
    clinician_ids = [c[0] for c in clinicians]

    patients: list[list[Any]] = []
    mrns: set[str] = set()
    newcomers: set[int] = set()
    for n in range(knobs.patients):
        name = people.name()
        mrn = str(randint(10**7, 10**8 - 1))
        while mrn in mrns:
            mrn = str(randint(10**7, 10**8 - 1))
        mrns.add(mrn)
        insurer = randint(1, len(insurers)) if chance() < knobs.insured_share else None
        new = n % knobs.newcomer_every == knobs.newcomer_every - 1  # only upcoming appointments
        if new:
            newcomers.add(PATIENT_ID0 + n + 1)
        patients.append(
            [
                PATIENT_ID0 + n + 1,
                mrn,
                name,
                day(-randint(365, 365 * 88)),
                people.email(name),
                f"+1-555-{randint(200, 999)}-{randint(1000, 9999)}",
                insurer,
                None if insurer is None else f"{choice('HKMWXZ')}{randint(10**8, 10**9 - 1)}",
                choice(CHANNEL_DRAW),
                day(-randint(1, 20) if new else -randint(730, 3000)),
            ]
        )

    taken: set[tuple[int, str]] = set()  # (clinician, start) of every appointment
    appointments: list[list[Any]] = []
    invoices: list[list[Any]] = []
    payments: list[list[Any]] = []
    claims: list[list[Any]] = []
    prescriptions: list[list[Any]] = []

    def pay(invoice_id: int, on: int, cents: int, method: str) -> None:
        payments.append(
            [PAYMENT_ID0 + len(payments) + 1, invoice_id, day(min(on, 0)), cents, method]
        )

    def instalments(invoice_id: int, amount: int, on: int) -> bool:
        """Whether the invoice is paid in full after the patient's instalments (one to three, so far)."""
        parts = choice((1, 2, 2, 3) if amount > 15000 else (1, 1, 1, 1, 2, 2, 3))
        method = choice(PAYMENT_METHODS)
        left, on = amount, on + randint(0, 10)
        for n in range(parts, 0, -1):
            if on > 0:
                return False
            cents = left if n == 1 else left * choice((40, 45, 55, 60)) // 10000 * 100
            if n < parts and chance() < 0.15:
                method = choice(PAYMENT_METHODS)
            pay(invoice_id, on, cents, method)
            left -= cents
            on += randint(14, 31)
        return True

    therapists = [c[0] for c in clinicians if c[3] == "physical therapy"]
    days: set[str] = set()
    planned: list[tuple[int, str, int, str, str]] = []  # offset, start, clinician, visit, status

    def plan(offset: int, minutes: int, clinician: int, visit: str, status: str) -> bool:
        """Plan an appointment for the current patient, if the clinician and the patient are free."""
        start = stamp(offset, minutes)
        if (clinician, start) in taken or start[:10] in days:
            return False
        taken.add((clinician, start))
        days.add(start[:10])
        planned.append((offset, start, clinician, visit, status))
        return True

    for patient in patients:
        pid, insurer = patient[0], patient[6]
        new = pid in newcomers
        misser = not new and chance() < 0.1  # misses many appointments
        billed = chance() < 0.5  # the front desk has charged this patient's no-show fees so far
        primary = choice(clinician_ids)
        # missed an appointment in the last two weeks and has nothing booked since
        lapsed = not new and chance() < 0.3
        days.clear()  # the patient's appointment days
        planned.clear()
        visits = (
            choice((1, 2, 2, 2, 3))
            if new
            else randint(5, 10)
            if misser
            else choice(knobs.visits_per_patient)
        )
        for visit_number in range(visits):
            visit = choice(FIRST_VISIT_DRAW if new and visit_number == 0 else VISIT_DRAW)
            for _attempt in range(20):
                if new or (not lapsed and chance() < 0.22):
                    offset = _weekday(randint(1, 80))
                    status = "booked" if new else choice(UPCOMING_DRAW)
                else:
                    offset = _weekday(-randint(15 if lapsed else 3, 720))
                    status = choice(MISSER_DRAW if misser else PAST_DRAW)
                clinician = primary if chance() < 0.7 else choice(clinician_ids)
                if plan(offset, 8 * 60 + 15 * randint(0, 36), clinician, visit, status):
                    break
        if lapsed:
            missed = _weekday_before(-randint(1, 10))
            plan(missed, 8 * 60 + 15 * randint(0, 36), primary, choice(VISIT_DRAW), "no-show")
        elif not new and chance() < 0.45:  # a course of weekly therapy sessions, booked ahead
            therapist, first = choice(therapists), _weekday(randint(1, 12))
            minutes = 8 * 60 + 30 * randint(0, 16)
            for week in range(choice((2, 3, 3, 4))):
                plan(first + 7 * week, minutes, therapist, "physical therapy", "booked")
        for offset, start, clinician, visit, status in planned:
            duration, fee = FEES[visit]
            aid = APPOINTMENT_ID0 + len(appointments) + 1
            appointments.append([aid, pid, clinician, start, duration, visit, status])
            age = -offset
            if status == "no-show" and age > 14 and billed:
                iid = INVOICE_ID0 + len(invoices) + 1
                paid = chance() < 0.5
                invoices.append(
                    [
                        iid,
                        aid,
                        "no-show fee",
                        NO_SHOW_FEE_CENTS,
                        day(offset + 1),
                        day(offset + 31),
                        "paid" if paid else "open",
                    ]
                )
                if paid:
                    pay(iid, offset + randint(2, 20), NO_SHOW_FEE_CENTS, choice(PAYMENT_METHODS))
            if status != "completed":
                continue
            if visit != "vaccination" and chance() < 0.35:
                for drug, dose in rng.sample(DRUGS, choice((1, 1, 2))):
                    state = "active" if age < 120 else "completed"
                    prescriptions.append(
                        [
                            PRESCRIPTION_ID0 + len(prescriptions) + 1,
                            aid,
                            drug,
                            dose,
                            choice((0, 0, 1, 2, 3, 5)),
                            "discontinued" if chance() < 0.1 else state,
                        ]
                    )
            iid = INVOICE_ID0 + len(invoices) + 1
            amount = fee + randint(0, 6) * 500
            invoice = [iid, aid, "visit", amount, day(offset), day(offset + 30), "open"]
            invoices.append(invoice)
            if chance() < 0.04:
                invoice[6] = "void"
                continue
            if insurer is None:
                if age >= 3 and chance() < 0.85 and instalments(iid, amount, offset):
                    invoice[6] = "paid"
                continue
            submitted = min(offset + randint(0, 3), 0)
            outcome = "submitted" if age < 14 else choice(CLAIM_DRAW)
            decided = min(submitted + randint(7, 25), 0)
            claim: list[Any] = [
                CLAIM_ID0 + len(claims) + 1,
                iid,
                insurer,
                day(submitted),
                amount,
                outcome,
                None if outcome == "submitted" else day(decided),
                None,
                None,
                None,
            ]
            claims.append(claim)
            if outcome == "approved":
                covered = amount * choice((70, 80, 90)) // 100
                pay(iid, decided, covered, "insurance")
                if chance() < (0.85 if age > 45 else 0.5):
                    pay(iid, decided + randint(1, 15), amount - covered, choice(PAYMENT_METHODS))
                    invoice[6] = "paid"
            elif outcome in ("denied", "appealed"):
                claim[7] = choice(DENIAL_REASONS)
                if outcome == "appealed":
                    claim[8] = choice(APPEAL_NOTES)
                    claim[9] = day(min(decided + randint(2, 10), 0))
                elif chance() < 0.5 and instalments(iid, amount, decided):
                    invoice[6] = "paid"

    return make_world(
        "clinic",
        SCHEMA,
        *_split({
            "insurers": (["id", "name", "payer_code", "claims_phone"], insurers),
            "patients": (
                [
                    "id",
                    "mrn",
                    "name",
                    "date_of_birth",
                    "email",
                    "phone",
                    "insurer_id",
                    "member_number",
                    "reminder_channel",
                    "registered_on",
                ],
                patients,
            ),
            "clinicians": (["id", "name", "credentials", "specialty", "room"], clinicians),
            "appointments": (
                [
                    "id",
                    "patient_id",
                    "clinician_id",
                    "starts_at",
                    "duration_min",
                    "visit_type",
                    "status",
                ],
                appointments,
            ),
            "invoices": (
                ["id", "appointment_id", "kind", "amount_cents", "issued_on", "due_on", "status"],
                invoices,
            ),
            "payments": (["id", "invoice_id", "paid_on", "amount_cents", "method"], payments),
            "claims": (
                [
                    "id",
                    "invoice_id",
                    "insurer_id",
                    "submitted_on",
                    "amount_cents",
                    "status",
                    "decided_on",
                    "denial_reason",
                    "appeal_note",
                    "appealed_on",
                ],
                claims,
            ),
            "prescriptions": (
                ["id", "appointment_id", "drug", "dose", "refills", "status"],
                prescriptions,
            ),
        }),
        TOOLS,
    )


ID = {"type": "integer", "minimum": 1}
PATIENT_COLUMNS = (
    "id, mrn, name, date_of_birth, email, phone, insurer_id, member_number, reminder_channel"
)
INVOICE_SELECT = (
    "SELECT i.id, i.appointment_id, i.kind, printf('%.2f', i.amount_cents / 100.0) AS amount, "
    "printf('%.2f', (i.amount_cents - coalesce((SELECT sum(p.amount_cents) FROM payments p "
    "WHERE p.invoice_id = i.id), 0)) / 100.0) AS balance, i.issued_on, i.due_on, i.status FROM invoices i "
)
TOOLS = [
    read_tool(
        "find_patient_by_mrn",
        "Look a patient up by medical record number (MRN).",
        {"mrn": {"type": "string", "description": "The patient's 8-digit medical record number."}},
        f"SELECT {PATIENT_COLUMNS} FROM patients WHERE mrn = trim(:mrn)",
    ),
    read_tool(
        "find_patient_by_email",
        "Look a patient up by email address (case-insensitive).",
        {"email": {"type": "string", "description": "The patient's email address."}},
        f"SELECT {PATIENT_COLUMNS} FROM patients WHERE lower(email) = lower(trim(:email))",
    ),
    read_tool(
        "search_patients",
        "Find patients whose name contains the given text (at most 20); check the date of birth.",
        {"name": {"type": "string", "minLength": 2}},
        f"SELECT {PATIENT_COLUMNS} FROM patients WHERE name LIKE '%' || :name || '%' "
        "ORDER BY name, date_of_birth LIMIT 20",
    ),
    read_tool(
        "list_appointments",
        "A patient's appointments (past and upcoming), latest first, optionally only those with one status.",
        {"patient_id": ID, "status": {"type": "string", "enum": list(APPOINTMENT_STATUSES)}},
        "SELECT a.id, a.starts_at, a.duration_min, a.visit_type, a.status, a.clinician_id, "
        "c.name AS clinician, c.specialty FROM appointments a JOIN clinicians c ON c.id = a.clinician_id "
        "WHERE a.patient_id = :patient_id AND (:status IS NULL OR a.status = :status) "
        "ORDER BY a.starts_at DESC LIMIT 50",
        required=["patient_id"],
    ),
    read_tool(
        "get_clinician",
        "A clinician's details by id.",
        {"clinician_id": ID},
        "SELECT id, name, credentials, specialty, room FROM clinicians WHERE id = :clinician_id",
    ),
    read_tool(
        "list_clinician_schedule",
        "A clinician's booked appointments on one day, in time order.",
        {
            "clinician_id": ID,
            "day": {"type": "string", "description": "The day, YYYY-MM-DD."},
        },
        "SELECT id, starts_at, duration_min, visit_type FROM appointments WHERE clinician_id = :clinician_id "
        "AND substr(starts_at, 1, 10) = :day AND status = 'booked' ORDER BY starts_at LIMIT 40",
    ),
    read_tool(
        "get_appointment_invoice",
        "The invoice of an appointment (a visit charge or a no-show fee), with the balance still owed.",
        {"appointment_id": ID},
        INVOICE_SELECT + "WHERE i.appointment_id = :appointment_id",
    ),
    read_tool(
        "list_payments",
        "The payments made on an invoice, by the patient or the insurer.",
        {"invoice_id": ID},
        "SELECT id, invoice_id, paid_on, printf('%.2f', amount_cents / 100.0) AS amount, method "
        "FROM payments WHERE invoice_id = :invoice_id ORDER BY paid_on, id LIMIT 20",
    ),
    read_tool(
        "list_claims",
        "The insurance claims filed for an invoice.",
        {"invoice_id": ID},
        "SELECT id, invoice_id, insurer_id, submitted_on, printf('%.2f', amount_cents / 100.0) AS amount, "
        "status, decided_on, denial_reason, appeal_note FROM claims WHERE invoice_id = :invoice_id "
        "ORDER BY submitted_on, id LIMIT 20",
    ),
    read_tool(
        "get_insurer",
        "An insurer's details by id.",
        {"insurer_id": ID},
        "SELECT id, name, payer_code, claims_phone FROM insurers WHERE id = :insurer_id",
    ),
    read_tool(
        "list_prescriptions",
        "The prescriptions written at an appointment.",
        {"appointment_id": ID},
        "SELECT id, appointment_id, drug, dose, refills, status FROM prescriptions "
        "WHERE appointment_id = :appointment_id ORDER BY id LIMIT 20",
    ),
    write_tool(
        "set_reminder_preference",
        "Change how a patient receives appointment reminders.",
        {"patient_id": ID, "channel": {"type": "string", "enum": list(REMINDER_CHANNELS)}},
        ["UPDATE patients SET reminder_channel = :channel WHERE id = :patient_id"],
    ),
    write_tool(
        "cancel_appointment",
        "Cancel a booked appointment.",
        {"appointment_id": ID},
        ["UPDATE appointments SET status = 'cancelled' WHERE id = :appointment_id"],
    ),
    write_tool(
        "reschedule_appointment",
        "Move a booked appointment to another start time (same clinician); the time must be free.",
        {
            "appointment_id": ID,
            "starts_at": {"type": "string", "description": "The new start, YYYY-MM-DD HH:MM."},
        },
        [
            "UPDATE appointments SET starts_at = :starts_at WHERE id = :appointment_id",
            "SELECT id, starts_at, duration_min, visit_type, status, clinician_id FROM appointments "
            "WHERE id = :appointment_id",
        ],
    ),
    write_tool(
        "charge_no_show_fee",
        f"Bill the clinic's standard no-show fee ({NO_SHOW_FEE_CENTS / 100:.2f}) for a missed appointment.",
        {"appointment_id": ID},
        [
            f"INSERT INTO invoices(appointment_id, kind, amount_cents) VALUES (:appointment_id, 'no-show fee', "
            f"{NO_SHOW_FEE_CENTS})",
            INVOICE_SELECT + "WHERE i.id = (SELECT max(id) FROM invoices)",
        ],
    ),
    write_tool(
        "settle_invoice",
        "Take the patient's payment of an open invoice's whole outstanding balance; the invoice is then paid.",
        {"invoice_id": ID, "method": {"type": "string", "enum": list(PAYMENT_METHODS)}},
        [
            "INSERT INTO payments(invoice_id, amount_cents, method) SELECT i.id, i.amount_cents - "
            "coalesce((SELECT sum(p.amount_cents) FROM payments p WHERE p.invoice_id = i.id), 0), :method "
            "FROM invoices i WHERE i.id = :invoice_id",
            "UPDATE invoices SET status = 'paid' WHERE id = :invoice_id AND status = 'open' AND amount_cents <= "
            "(SELECT sum(amount_cents) FROM payments WHERE invoice_id = :invoice_id)",
            INVOICE_SELECT + "WHERE i.id = :invoice_id",
        ],
    ),
    write_tool(
        "appeal_claim",
        "Appeal an insurer's denial of a claim, with a note for the insurer.",
        {"claim_id": ID, "note": {"type": "string", "minLength": 5, "maxLength": 200}},
        [
            "UPDATE claims SET status = 'appealed', appeal_note = :note, appealed_on = date('now') "
            "WHERE id = :claim_id",
        ],
    ),
    write_tool(
        "remove_payment",
        "Remove a payment posted in error; the invoice reopens if it is no longer paid in full.",
        {"payment_id": ID},
        [
            "UPDATE invoices SET status = 'open' WHERE status = 'paid' "
            "AND id = (SELECT invoice_id FROM payments WHERE id = :payment_id) "
            "AND amount_cents > (SELECT coalesce(sum(amount_cents), 0) FROM payments "
            "WHERE invoice_id = invoices.id AND id <> :payment_id)",
            "DELETE FROM payments WHERE id = :payment_id",
        ],
    ),
]

STATUS = Filter(column="status", words="{value}")
NO_INVOICE = "NOT EXISTS (SELECT 1 FROM {db}invoices x WHERE x.appointment_id = appointments.id)"

CATALOG = Catalog(
    keys={
        t: "id"
        for t in (
            "insurers",
            "patients",
            "clinicians",
            "appointments",
            "invoices",
            "payments",
            "claims",
            "prescriptions",
        )
    },
    anchors=(
        Anchor(
            table="patients",
            tool="find_patient_by_mrn",
            param="mrn",
            column="mrn",
            phrase="{name} (MRN {mrn})",
        ),
        Anchor(
            table="patients",
            tool="find_patient_by_email",
            param="email",
            column="email",
            phrase="{name} ({email})",
        ),
        Anchor(
            table="patients",
            tool="search_patients",
            param="name",
            column="name",
            phrase="{name} (born {date_of_birth})",
            disambiguate=("date_of_birth",),
        ),
    ),
    hops=(
        Hop(
            source="patients",
            target="appointments",
            fk="patient_id",
            tool="list_appointments",
            param="patient_id",
            noun="appointment",
            plural="appointments",
            orders=(Order(expr="starts_at", highest="latest", lowest="earliest"),),
            filters=(STATUS, Filter(column="visit_type", words="{value}")),
        ),
        Hop(
            source="patients",
            target="insurers",
            fk="insurer_id",
            tool="get_insurer",
            param="insurer_id",
            noun="insurer",
            plural="insurers",
            down=False,
        ),
        Hop(
            source="appointments",
            target="clinicians",
            fk="clinician_id",
            tool="get_clinician",
            param="clinician_id",
            noun="clinician",
            plural="clinicians",
            down=False,
            of="for",
        ),
        Hop(
            source="appointments",
            target="invoices",
            fk="appointment_id",
            tool="get_appointment_invoice",
            param="appointment_id",
            noun="invoice",
            plural="invoices",
            of="for",
        ),
        Hop(
            source="appointments",
            target="prescriptions",
            fk="appointment_id",
            tool="list_prescriptions",
            param="appointment_id",
            noun="prescription",
            plural="prescriptions",
            filters=(STATUS,),
            limit=20,
            of="from",
        ),
        Hop(
            source="invoices",
            target="payments",
            fk="invoice_id",
            tool="list_payments",
            param="invoice_id",
            noun="payment",
            plural="payments",
            orders=(Order(expr="amount_cents", highest="largest", lowest="smallest"),),
            filters=(Filter(column="method", words="{value}"),),
            limit=20,
            of="on",
        ),
        Hop(
            source="invoices",
            target="claims",
            fk="invoice_id",
            tool="list_claims",
            param="invoice_id",
            noun="insurance claim",
            plural="insurance claims",
            filters=(STATUS,),
            limit=20,
            of="for",
        ),
        Hop(
            source="claims",
            target="insurers",
            fk="insurer_id",
            tool="get_insurer",
            param="insurer_id",
            noun="insurer",
            plural="insurers",
            down=False,
        ),
    ),
    attributes=(
        Attribute(table="patients", expr="phone", phrase="the phone number on file"),
        Attribute(table="patients", expr="member_number", phrase="the insurance member number"),
        Attribute(table="patients", expr="reminder_channel", phrase="the reminder preference"),
        Attribute(table="insurers", expr="name", phrase="the name"),
        Attribute(table="insurers", expr="payer_code", phrase="the payer code"),
        Attribute(table="insurers", expr="claims_phone", phrase="the claims phone number"),
        Attribute(
            table="appointments",
            expr="starts_at",
            phrase="the start time",
            hint="as YYYY-MM-DD HH:MM",
        ),
        Attribute(
            table="appointments",
            expr="duration_min",
            phrase="the length in minutes",
            hint="as a number",
        ),
        Attribute(table="clinicians", expr="name", phrase="the name"),
        Attribute(table="clinicians", expr="specialty", phrase="the specialty"),
        Attribute(table="clinicians", expr="room", phrase="the room"),
        Attribute(
            table="invoices",
            expr="printf('%.2f', amount_cents / 100.0)",
            phrase="the amount",
            hint="as shown, like 123.45",
        ),
        Attribute(table="invoices", expr="due_on", phrase="the due date", hint="as YYYY-MM-DD"),
        Attribute(table="invoices", expr="status", phrase="the status"),
        Attribute(
            table="payments", expr="paid_on", phrase="the payment date", hint="as YYYY-MM-DD"
        ),
        Attribute(
            table="payments",
            expr="printf('%.2f', amount_cents / 100.0)",
            phrase="the amount",
            hint="as shown, like 123.45",
        ),
        Attribute(table="claims", expr="denial_reason", phrase="the denial reason"),
        Attribute(
            table="claims", expr="submitted_on", phrase="the submission date", hint="as YYYY-MM-DD"
        ),
        Attribute(table="prescriptions", expr="drug", phrase="the medication"),
        Attribute(table="prescriptions", expr="dose", phrase="the dosage"),
        Attribute(
            table="prescriptions",
            expr="refills",
            phrase="the number of refills",
            hint="as a number",
        ),
    ),
    actions=(
        Action(
            name="set_reminders",
            table="patients",
            tool="set_reminder_preference",
            args={"patient_id": "key", "channel": "choice:channel"},
            when="reminder_channel <> {channel}",
            ask="set the appointment reminder preference of {target} to {channel}",
            check="SELECT reminder_channel = {channel} FROM patients WHERE id = {target}",
            frame={"patients": {"where": "id = {key}", "columns": ["reminder_channel"]}},
            choices={"channel": REMINDER_CHANNELS[:3]},
        ),
        Action(
            name="cancel",
            table="appointments",
            tool="cancel_appointment",
            args={"appointment_id": "key"},
            when="status = 'booked'",
            ask="cancel {target}",
            check="SELECT status = 'cancelled' FROM appointments WHERE id = {target}",
            frame={"appointments": {"where": "id = {key}", "columns": ["status"]}},
            instead="cancel {target} instead",
            blocked="if the patient already missed it",
        ),
        Action(
            name="charge_no_show",
            table="appointments",
            tool="charge_no_show_fee",
            args={"appointment_id": "key"},
            when=f"status = 'no-show' AND {NO_INVOICE}",
            ask="charge the no-show fee for {target}",
            check=f"SELECT count(*) = 1 FROM invoices WHERE appointment_id = {{target}} AND kind = 'no-show fee' "
            f"AND amount_cents = {NO_SHOW_FEE_CENTS} AND status = 'open' "
            "AND id NOT IN (SELECT id FROM {db}invoices)",
            frame={"invoices": "id > {last[invoices]} AND appointment_id = {key}"},
            instead="charge the no-show fee for {target} instead",
            blocked="if it is still upcoming",
        ),
        Action(
            name="reschedule",
            table="appointments",
            tool="reschedule_appointment",
            args={"appointment_id": "key", "starts_at": "choice:slot"},
            when="status = 'booked' AND starts_at <> {slot} AND NOT EXISTS (SELECT 1 FROM {db}appointments o "
            "WHERE o.status = 'booked' AND o.starts_at = {slot} AND o.id <> appointments.id "
            "AND (o.clinician_id = appointments.clinician_id OR o.patient_id = appointments.patient_id))",
            ask="move {target} to {slot}",
            check="SELECT starts_at = {slot} AND status = 'booked' FROM appointments WHERE id = {target}",
            frame={"appointments": {"where": "id = {key}", "columns": ["starts_at"]}},
            choices={"slot": SLOTS},
            bulk=False,
        ),
        Action(
            name="settle",
            table="invoices",
            tool="settle_invoice",
            args={"invoice_id": "key", "method": "choice:method"},
            when="status = 'open' AND NOT EXISTS (SELECT 1 FROM {db}claims c WHERE c.invoice_id = invoices.id "
            "AND c.status IN ('submitted', 'appealed'))",
            ask="record a {method} payment for the outstanding balance of {target}",
            check="SELECT i.status = 'paid' AND (SELECT sum(p.amount_cents) FROM payments p "
            "WHERE p.invoice_id = i.id) = i.amount_cents AND (SELECT count(*) FROM payments p "
            "WHERE p.invoice_id = i.id AND p.method = {method} AND p.id NOT IN (SELECT id FROM {db}payments)) = 1 "
            "FROM invoices i WHERE i.id = {target}",
            frame={
                "payments": "id > {last[payments]} AND invoice_id = {key} AND method = {method}",
                "invoices": {"where": "id = {key}", "columns": ["status"]},
            },
            choices={"method": PAYMENT_METHODS},
            bulk=False,  # an appointment has one invoice: never several to settle at once
        ),
        Action(
            name="appeal",
            table="claims",
            tool="appeal_claim",
            args={"claim_id": "key", "note": "choice:note"},
            when="status = 'denied'",
            ask="appeal {target} with the note '{note}'",
            check="SELECT status = 'appealed' AND lower(trim(appeal_note)) = lower({note}) FROM claims WHERE id = {target}",
            frame={
                "claims": {
                    "where": "id = {key}",
                    "columns": ["status", "appeal_note", "appealed_on"],
                }
            },
            choices={"note": APPEAL_NOTES},
            bulk=False,  # an invoice has at most one claim
        ),
        Action(
            name="remove_payment",
            table="payments",
            tool="remove_payment",
            args={"payment_id": "key"},
            when="method <> 'insurance'",
            ask="remove {target}, posted in error",
            check="SELECT NOT EXISTS (SELECT 1 FROM payments WHERE id = {target}) AND "
            "(SELECT status FROM invoices WHERE id = {row[invoice_id]}) = CASE WHEN "
            "coalesce((SELECT sum(amount_cents) FROM payments WHERE invoice_id = {row[invoice_id]}), 0) >= "
            "(SELECT amount_cents FROM invoices WHERE id = {row[invoice_id]}) THEN 'paid' ELSE 'open' END",
            frame={
                "payments": "id = {key}",
                "invoices": {"where": "id = {row[invoice_id]}", "columns": ["status"]},
            },
        ),
    ),
)

DOMAIN = Domain(
    name="clinic",
    description="outpatient clinic front desk and billing: patients, appointments, invoices, payments, insurance claims",
    build_world=build_world,
    catalog=CATALOG,
    knobs=DEFAULT_KNOBS,
)


def _split(tables):  # temporary, during the restructuring
    return {k: v[0] for k, v in tables.items()}, {k: v[1] for k, v in tables.items()}
