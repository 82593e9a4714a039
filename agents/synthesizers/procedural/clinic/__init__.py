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

from coevo.agents.synthesizers.procedural.base import Domain
from coevo.agents.synthesizers.procedural.clinic.catalog import CATALOG
from coevo.agents.synthesizers.procedural.clinic.schema import SCHEMA
from coevo.agents.synthesizers.procedural.clinic.tools import TOOLS
from coevo.agents.synthesizers.procedural.clinic.world import (
    DEFAULT_KNOBS,
    ClinicKnobs,
    build_world,
)

__all__ = ["CATALOG", "DEFAULT_KNOBS", "DOMAIN", "SCHEMA", "TOOLS", "ClinicKnobs", "build_world"]

DOMAIN = Domain(
    name="clinic",
    description="outpatient clinic front desk and billing: patients, appointments, invoices, payments, insurance claims",
    build_world=build_world,
    catalog=CATALOG,
    knobs=DEFAULT_KNOBS,
)
