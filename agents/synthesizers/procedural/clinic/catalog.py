"""The clinic catalog: how the planner names patients, walks to appointments, invoices and claims, asks and acts."""

from __future__ import annotations

from coevo.agents.synthesizers.catalog import Action, Anchor, Attribute, Catalog, Filter, Hop, Order
from coevo.agents.synthesizers.procedural.base import next_weekday, stamp
from coevo.agents.synthesizers.procedural.clinic.schema import (
    APPEAL_NOTES,
    NO_SHOW_FEE_CENTS,
    PAYMENT_METHODS,
    REMINDER_CHANNELS,
)

SLOTS = tuple(
    stamp(next_weekday(offset), minutes)
    for offset, minutes in ((8, 9 * 60 + 30), (10, 14 * 60), (15, 11 * 60 + 15), (23, 16 * 60))
)
"""Future times an instruction may ask an appointment to be moved to."""

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
