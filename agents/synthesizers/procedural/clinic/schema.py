"""The clinic schema: its tables, the value sets its checks, tools and catalog share, and each table's columns."""

from __future__ import annotations

from typing import Final

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
APPEAL_NOTES = (
    "corrected diagnosis code attached",
    "prior authorization number added",
    "letter of medical necessity attached",
)

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

COLUMNS: Final = {
    "insurers": ("id", "name", "payer_code", "claims_phone"),
    "patients": (
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
    ),
    "clinicians": ("id", "name", "credentials", "specialty", "room"),
    "appointments": (
        "id",
        "patient_id",
        "clinician_id",
        "starts_at",
        "duration_min",
        "visit_type",
        "status",
    ),
    "invoices": ("id", "appointment_id", "kind", "amount_cents", "issued_on", "due_on", "status"),
    "payments": ("id", "invoice_id", "paid_on", "amount_cents", "method"),
    "claims": (
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
    ),
    "prescriptions": ("id", "appointment_id", "drug", "dose", "refills", "status"),
}
"""Each table's columns, in the order a world's rows hold them (and the world lists its tables)."""
