"""The clinic world: its knobs, its specialties, fees and drugs, and one small generator a table."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from coevo.agents.synthesizers.procedural.base import (
    NOW,
    People,
    day,
    draw_new,
    make_world,
    next_weekday,
    stamp,
)
from coevo.agents.synthesizers.procedural.clinic.schema import (
    APPEAL_NOTES,
    COLUMNS,
    NO_SHOW_FEE_CENTS,
    PAYMENT_METHODS,
    SCHEMA,
)
from coevo.agents.synthesizers.procedural.clinic.tools import TOOLS
from coevo.agents.synthesizers.procedural.names import (
    COMPANY_WORDS,
    FIRST_NAMES,
    LAST_NAMES,
)
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import WorldSpec

__all__ = ["DEFAULT_KNOBS", "ClinicKnobs", "build_world"]

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


def _weekday_before(offset: int) -> int:
    """``offset`` (days from the clock) moved back to the previous weekday."""
    weekday = (NOW.weekday() + offset) % 7
    return offset - (weekday - 4 if weekday >= 5 else 0)


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
    draw = _Draws(rng)
    insurers = _insurers(rng, draw, knobs)
    clinicians = _clinicians(draw)
    patients = _patients(draw, people, knobs, len(insurers))
    diary = _Diary(draw, clinicians, knobs)
    billing = _Billing(rng, draw)
    for patient in patients:
        profile = _Patient.drawn(draw, patient, clinicians, knobs)
        for planned in diary.plan(profile):
            billing.add(profile, planned)
    rows = {
        "insurers": insurers,
        "patients": patients,
        "clinicians": clinicians,
        "appointments": billing.appointments,
        "invoices": billing.invoices,
        "payments": billing.payments,
        "claims": billing.claims,
        "prescriptions": billing.prescriptions,
    }
    return make_world("clinic", SCHEMA, COLUMNS, rows, TOOLS)


class _Draws:
    """Draws from ``rng.random`` alone: several times faster than ``rng.choice`` / ``rng.randint``."""

    def __init__(self, rng: random.Random):
        self.chance = rng.random

    def choice(self, options: Sequence[Any]) -> Any:
        return options[int(self.chance() * len(options))]

    def randint(self, low: int, high: int) -> int:
        return low + int(self.chance() * (high - low + 1))


def _insurers(rng: random.Random, draw: _Draws, knobs: ClinicKnobs) -> list[list[Any]]:
    insurers: list[list[Any]] = []
    for n, word in enumerate(rng.sample(COMPANY_WORDS, knobs.insurers)):
        name = f"{word} {draw.choice(INSURER_SUFFIXES)}"
        code = f"{word[:3].upper()}{draw.randint(10, 99)}"
        phone = f"+1-800-{draw.randint(200, 999)}-{draw.randint(1000, 9999)}"
        insurers.append([n + 1, name, code, phone])
    return insurers


def _clinicians(draw: _Draws) -> list[list[Any]]:
    """Five family doctors, a second pediatrician, and one clinician of every other specialty."""
    clinicians: list[list[Any]] = []
    for n, specialty in enumerate(["family medicine"] * 5 + ["pediatrics"] + list(SPECIALTIES)[1:]):
        credentials = draw.choice(SPECIALTIES[specialty])
        name = f"{draw.choice(FIRST_NAMES)} {draw.choice(LAST_NAMES)}"
        room = f"{draw.choice('ABC')}{draw.randint(1, 3)}{n + 1:02d}"
        prefix = "Dr. " if credentials in ("MD", "DO") else ""
        clinicians.append([CLINICIAN_ID0 + n + 1, prefix + name, credentials, specialty, room])
    return clinicians


def _patients(draw: _Draws, people: People, knobs: ClinicKnobs, insurers: int) -> list[list[Any]]:
    """The patients; every ``knobs.newcomer_every``-th is newly registered."""
    patients: list[list[Any]] = []
    mrns: set[str] = set()
    for n in range(knobs.patients):
        name = people.name()
        mrn = draw_new(lambda: str(draw.randint(10**7, 10**8 - 1)), mrns)
        insurer = draw.randint(1, insurers) if draw.chance() < knobs.insured_share else None
        new = _is_newcomer(n, knobs)
        patients.append(
            [
                PATIENT_ID0 + n + 1,
                mrn,
                name,
                day(-draw.randint(365, 365 * 88)),
                people.email(name),
                f"+1-555-{draw.randint(200, 999)}-{draw.randint(1000, 9999)}",
                insurer,
                None
                if insurer is None
                else f"{draw.choice('HKMWXZ')}{draw.randint(10**8, 10**9 - 1)}",
                draw.choice(CHANNEL_DRAW),
                day(-draw.randint(1, 20) if new else -draw.randint(730, 3000)),
            ]
        )
    return patients


def _is_newcomer(n: int, knobs: ClinicKnobs) -> bool:
    """Whether patient ``n`` (counting from 0) is newly registered: only upcoming appointments."""
    return n % knobs.newcomer_every == knobs.newcomer_every - 1


@dataclass(frozen=True)
class _Patient:
    """How a patient uses the clinic, drawn once for all their appointments."""

    id: int
    insurer: int | None
    new: bool
    misser: bool
    """Misses many appointments."""
    billed: bool
    """The front desk has charged this patient's no-show fees so far."""
    primary: int
    """Their usual clinician."""
    lapsed: bool
    """Missed an appointment in the last two weeks and has nothing booked since."""

    @classmethod
    def drawn(
        cls, draw: _Draws, patient: list[Any], clinicians: list[list[Any]], knobs: ClinicKnobs
    ) -> _Patient:
        new = _is_newcomer(patient[0] - PATIENT_ID0 - 1, knobs)
        misser = not new and draw.chance() < 0.1
        billed = draw.chance() < 0.5
        primary = draw.choice([c[0] for c in clinicians])
        lapsed = not new and draw.chance() < 0.3
        return cls(patient[0], patient[6], new, misser, billed, primary, lapsed)


class _Diary:
    """The clinicians' diaries: no clinician is booked twice at a time, no patient twice a day."""

    def __init__(self, draw: _Draws, clinicians: list[list[Any]], knobs: ClinicKnobs):
        self.draw = draw
        self.knobs = knobs
        self.clinician_ids = [c[0] for c in clinicians]
        self.therapists = [c[0] for c in clinicians if c[3] == "physical therapy"]
        self.taken: set[tuple[int, str]] = set()  # (clinician, start) of every appointment
        self.days: set[str] = set()  # the current patient's appointment days
        self.planned: list[tuple[int, str, int, str, str]] = []

    def plan(self, patient: _Patient) -> list[tuple[int, str, int, str, str]]:
        """The patient's appointments: (day offset, start, clinician, visit type, status) each."""
        draw = self.draw
        self.days.clear()
        self.planned = []
        visits = (
            draw.choice((1, 2, 2, 2, 3))
            if patient.new
            else draw.randint(5, 10)
            if patient.misser
            else draw.choice(self.knobs.visits_per_patient)
        )
        for visit_number in range(visits):
            visit = draw.choice(
                FIRST_VISIT_DRAW if patient.new and visit_number == 0 else VISIT_DRAW
            )
            self._visit(patient, visit)
        if patient.lapsed:
            missed = _weekday_before(-draw.randint(1, 10))
            minutes = 8 * 60 + 15 * draw.randint(0, 36)
            self._book(missed, minutes, patient.primary, draw.choice(VISIT_DRAW), "no-show")
        elif not patient.new and draw.chance() < 0.45:
            self._therapy()
        return self.planned

    def _visit(self, patient: _Patient, visit: str) -> None:
        """A visit at a time both the patient and a clinician are free (20 tries)."""
        draw = self.draw
        for _attempt in range(20):
            if patient.new or (not patient.lapsed and draw.chance() < 0.22):
                offset = next_weekday(draw.randint(1, 80))
                status = "booked" if patient.new else draw.choice(UPCOMING_DRAW)
            else:
                offset = next_weekday(-draw.randint(15 if patient.lapsed else 3, 720))
                status = draw.choice(MISSER_DRAW if patient.misser else PAST_DRAW)
            clinician = patient.primary if draw.chance() < 0.7 else draw.choice(self.clinician_ids)
            if self._book(offset, 8 * 60 + 15 * draw.randint(0, 36), clinician, visit, status):
                return

    def _therapy(self) -> None:
        """A course of weekly therapy sessions, booked ahead."""
        draw = self.draw
        therapist, first = draw.choice(self.therapists), next_weekday(draw.randint(1, 12))
        minutes = 8 * 60 + 30 * draw.randint(0, 16)
        for week in range(draw.choice((2, 3, 3, 4))):
            self._book(first + 7 * week, minutes, therapist, "physical therapy", "booked")

    def _book(self, offset: int, minutes: int, clinician: int, visit: str, status: str) -> bool:
        """Plan an appointment for the current patient, if the clinician and the patient are free."""
        start = stamp(offset, minutes)
        if (clinician, start) in self.taken or start[:10] in self.days:
            return False
        self.taken.add((clinician, start))
        self.days.add(start[:10])
        self.planned.append((offset, start, clinician, visit, status))
        return True


class _Billing:
    """Appointments and what follows them: prescriptions, invoices, payments, insurance claims."""

    def __init__(self, rng: random.Random, draw: _Draws):
        self.rng = rng
        self.draw = draw
        self.appointments: list[list[Any]] = []
        self.invoices: list[list[Any]] = []
        self.payments: list[list[Any]] = []
        self.claims: list[list[Any]] = []
        self.prescriptions: list[list[Any]] = []

    def add(self, patient: _Patient, planned: tuple[int, str, int, str, str]) -> None:
        """A planned appointment; a completed one is invoiced, to the insurer if there is one."""
        draw = self.draw
        offset, start, clinician, visit, status = planned
        duration, fee = FEES[visit]
        aid = APPOINTMENT_ID0 + len(self.appointments) + 1
        self.appointments.append([aid, patient.id, clinician, start, duration, visit, status])
        age = -offset
        if status == "no-show" and age > 14 and patient.billed:
            self._no_show_fee(aid, offset)
        if status != "completed":
            return
        if visit != "vaccination" and draw.chance() < 0.35:
            self._prescriptions(aid, age)
        iid = INVOICE_ID0 + len(self.invoices) + 1
        amount = fee + draw.randint(0, 6) * 500
        invoice = [iid, aid, "visit", amount, day(offset), day(offset + 30), "open"]
        self.invoices.append(invoice)
        if draw.chance() < 0.04:
            invoice[6] = "void"
        elif patient.insurer is None:
            if age >= 3 and draw.chance() < 0.85 and self._instalments(iid, amount, offset):
                invoice[6] = "paid"
        else:
            self._claim(invoice, patient.insurer, offset)

    def _pay(self, invoice_id: int, on: int, cents: int, method: str) -> None:
        self.payments.append(
            [PAYMENT_ID0 + len(self.payments) + 1, invoice_id, day(min(on, 0)), cents, method]
        )

    def _instalments(self, invoice_id: int, amount: int, on: int) -> bool:
        """Whether the invoice is paid in full after the patient's instalments (one to three, so far)."""
        draw = self.draw
        parts = draw.choice((1, 2, 2, 3) if amount > 15000 else (1, 1, 1, 1, 2, 2, 3))
        method = draw.choice(PAYMENT_METHODS)
        left, on = amount, on + draw.randint(0, 10)
        for n in range(parts, 0, -1):
            if on > 0:
                return False
            cents = left if n == 1 else left * draw.choice((40, 45, 55, 60)) // 10000 * 100
            if n < parts and draw.chance() < 0.15:
                method = draw.choice(PAYMENT_METHODS)
            self._pay(invoice_id, on, cents, method)
            left -= cents
            on += draw.randint(14, 31)
        return True

    def _no_show_fee(self, aid: int, offset: int) -> None:
        draw = self.draw
        iid = INVOICE_ID0 + len(self.invoices) + 1
        paid = draw.chance() < 0.5
        self.invoices.append(
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
            on = offset + draw.randint(2, 20)
            self._pay(iid, on, NO_SHOW_FEE_CENTS, draw.choice(PAYMENT_METHODS))

    def _prescriptions(self, aid: int, age: int) -> None:
        draw = self.draw
        for drug, dose in self.rng.sample(DRUGS, draw.choice((1, 1, 2))):
            state = "active" if age < 120 else "completed"
            self.prescriptions.append(
                [
                    PRESCRIPTION_ID0 + len(self.prescriptions) + 1,
                    aid,
                    drug,
                    dose,
                    draw.choice((0, 0, 1, 2, 3, 5)),
                    "discontinued" if draw.chance() < 0.1 else state,
                ]
            )

    def _claim(self, invoice: list[Any], insurer: int, offset: int) -> None:
        """The insurance claim of a visit's invoice; the patient pays what the insurer does not."""
        draw = self.draw
        iid, amount, age = invoice[0], invoice[3], -offset
        submitted = min(offset + draw.randint(0, 3), 0)
        outcome = "submitted" if age < 14 else draw.choice(CLAIM_DRAW)
        decided = min(submitted + draw.randint(7, 25), 0)
        claim: list[Any] = [
            CLAIM_ID0 + len(self.claims) + 1,
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
        self.claims.append(claim)
        if outcome == "approved":
            covered = amount * draw.choice((70, 80, 90)) // 100
            self._pay(iid, decided, covered, "insurance")
            if draw.chance() < (0.85 if age > 45 else 0.5):
                on = decided + draw.randint(1, 15)
                self._pay(iid, on, amount - covered, draw.choice(PAYMENT_METHODS))
                invoice[6] = "paid"
        elif outcome in ("denied", "appealed"):
            claim[7] = draw.choice(DENIAL_REASONS)
            if outcome == "appealed":
                claim[8] = draw.choice(APPEAL_NOTES)
                claim[9] = day(min(decided + draw.randint(2, 10), 0))
            elif draw.chance() < 0.5 and self._instalments(iid, amount, decided):
                invoice[6] = "paid"
