"""The clinic tools: look patients, appointments, invoices and claims up; book, cancel, bill, pay, appeal."""

from __future__ import annotations

from coevo.agents.synthesizers.procedural.base import read_tool, write_tool
from coevo.agents.synthesizers.procedural.clinic.schema import (
    APPOINTMENT_STATUSES,
    NO_SHOW_FEE_CENTS,
    PAYMENT_METHODS,
    REMINDER_CHANNELS,
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
