"""The airline schema: its tables, the value sets and SQL expressions its tools and catalog share, each table's columns."""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from coevo.agents.synthesizers.procedural.base import NOW

NOW_TEXT = "strftime('%Y-%m-%d %H:%M', 'now')"
"""The clock's time as the tables hold times (``YYYY-MM-DD HH:MM``)."""
DEPARTED = "f.status IN ('departed', 'landed')"
"""A flight ``f`` has left."""
CABINS = ("economy", "premium economy", "business")
MEALS = ("vegetarian", "vegan", "halal", "kosher", "gluten-free")
REFUND_REASONS = (
    "flight delayed by more than three hours",
    "missed connection",
    "downgraded to a lower cabin",
    "unused return flight",
    "seat not as booked",
)
CHECK_IN_OPENS = (NOW + timedelta(hours=1)).strftime("%Y-%m-%d %H:%M")
CHECK_IN_CLOSES = (NOW + timedelta(hours=24)).strftime("%Y-%m-%d %H:%M")

SCHEMA = [
    "CREATE TABLE airports(id INTEGER PRIMARY KEY, code TEXT NOT NULL UNIQUE CHECK (length(code) = 3), "
    "name TEXT NOT NULL, city TEXT NOT NULL, country TEXT NOT NULL)",
    "CREATE TABLE passengers(id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL UNIQUE, "
    "ff_number TEXT NOT NULL UNIQUE, home_city TEXT NOT NULL, "
    "tier TEXT NOT NULL DEFAULT 'blue' CHECK (tier IN ('blue', 'silver', 'gold', 'platinum')), "
    "miles INTEGER NOT NULL DEFAULT 0 CHECK (miles >= 0), joined_on TEXT NOT NULL)",
    "CREATE TABLE flights(id INTEGER PRIMARY KEY, flight_number TEXT NOT NULL, "
    "origin_id INTEGER NOT NULL REFERENCES airports(id), "
    "destination_id INTEGER NOT NULL REFERENCES airports(id), departs_at TEXT NOT NULL, "
    "arrives_at TEXT NOT NULL, aircraft TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'scheduled' "
    "CHECK (status IN ('scheduled', 'delayed', 'cancelled', 'departed', 'landed')), "
    "UNIQUE (flight_number, departs_at), CHECK (origin_id <> destination_id), "
    "CHECK (arrives_at > departs_at))",
    "CREATE TABLE bookings(id INTEGER PRIMARY KEY, passenger_id INTEGER NOT NULL REFERENCES passengers(id), "
    "locator TEXT NOT NULL UNIQUE CHECK (length(locator) = 6), "
    "ticket_number TEXT NOT NULL UNIQUE CHECK (length(ticket_number) = 13), booked_at TEXT NOT NULL, "
    "cabin TEXT NOT NULL CHECK (cabin IN ('economy', 'premium economy', 'business')), "
    "fare_cents INTEGER NOT NULL CHECK (fare_cents > 0), "
    "status TEXT NOT NULL DEFAULT 'confirmed' CHECK (status IN ('confirmed', 'completed', 'cancelled')))",
    "CREATE TABLE segments(id INTEGER PRIMARY KEY, booking_id INTEGER NOT NULL REFERENCES bookings(id), "
    "flight_id INTEGER NOT NULL REFERENCES flights(id), seat TEXT NOT NULL, "
    "meal TEXT NOT NULL DEFAULT 'standard' "
    "CHECK (meal IN ('standard', 'vegetarian', 'vegan', 'halal', 'kosher', 'gluten-free', 'child')), "
    "status TEXT NOT NULL DEFAULT 'booked' "
    "CHECK (status IN ('booked', 'checked in', 'flown', 'no show', 'cancelled')), "
    "checked_in_at TEXT, UNIQUE (booking_id, flight_id))",
    "CREATE TABLE bags(id INTEGER PRIMARY KEY, segment_id INTEGER NOT NULL REFERENCES segments(id), "
    "tag TEXT NOT NULL UNIQUE, weight_kg REAL NOT NULL CHECK (weight_kg > 0 AND weight_kg <= 32), "
    "status TEXT NOT NULL DEFAULT 'checked' "
    "CHECK (status IN ('checked', 'loaded', 'delivered', 'missing', 'found')))",
    "CREATE TABLE refunds(id INTEGER PRIMARY KEY, booking_id INTEGER NOT NULL REFERENCES bookings(id), "
    "reason TEXT NOT NULL, requested_on TEXT NOT NULL DEFAULT (date('now')), "
    "amount_cents INTEGER CHECK (amount_cents IS NULL OR amount_cents > 0), "
    "status TEXT NOT NULL DEFAULT 'requested' "
    "CHECK (status IN ('requested', 'approved', 'paid', 'rejected')))",
    "CREATE INDEX bookings_by_passenger ON bookings(passenger_id, booked_at)",
    "CREATE INDEX segments_by_booking ON segments(booking_id)",
    "CREATE UNIQUE INDEX one_passenger_per_seat ON segments(flight_id, seat) WHERE status <> 'cancelled'",
    "CREATE INDEX bags_by_segment ON bags(segment_id)",
    "CREATE INDEX refunds_by_booking ON refunds(booking_id)",
    # cancelling a booking
    "CREATE TRIGGER cancel_only_confirmed BEFORE UPDATE OF status ON bookings "
    "WHEN new.status = 'cancelled' AND old.status <> 'confirmed' "
    "BEGIN SELECT RAISE(ABORT, 'only a confirmed booking can be cancelled'); END",
    "CREATE TRIGGER no_cancel_after_departure BEFORE UPDATE OF status ON bookings "
    "WHEN new.status = 'cancelled' AND EXISTS (SELECT 1 FROM segments s JOIN flights f ON f.id = s.flight_id "
    f"WHERE s.booking_id = old.id AND {DEPARTED}) "
    "BEGIN SELECT RAISE(ABORT, 'a flight of this booking has already departed, so it cannot be cancelled; "
    "request a refund instead'); END",
    # refunds
    "CREATE TRIGGER refunds_need_active_booking BEFORE INSERT ON refunds "
    "WHEN (SELECT status FROM bookings WHERE id = new.booking_id) NOT IN ('confirmed', 'completed') "
    "BEGIN SELECT RAISE(ABORT, 'a cancelled booking cannot get a refund request'); END",
    "CREATE TRIGGER refunds_only_after_departure BEFORE INSERT ON refunds "
    "WHEN NOT EXISTS (SELECT 1 FROM segments s JOIN flights f ON f.id = s.flight_id "
    f"WHERE s.booking_id = new.booking_id AND {DEPARTED}) "
    "BEGIN SELECT RAISE(ABORT, 'no flight of this booking has departed yet; cancel the booking instead "
    "of requesting a refund'); END",
    "CREATE TRIGGER one_open_refund BEFORE INSERT ON refunds "
    "WHEN EXISTS (SELECT 1 FROM refunds WHERE booking_id = new.booking_id AND status = 'requested') "
    "BEGIN SELECT RAISE(ABORT, 'this booking already has an open refund request; it must be decided "
    "before another one is made'); END",
    # legs: check-in and meals
    "CREATE TRIGGER flown_legs_fixed BEFORE UPDATE OF status ON segments "
    "WHEN old.status IN ('flown', 'no show') "
    "BEGIN SELECT RAISE(ABORT, 'this leg has already been flown and cannot be changed'); END",
    "CREATE TRIGGER check_in_only_booked BEFORE UPDATE OF status ON segments "
    "WHEN new.status = 'checked in' AND old.status <> 'booked' "
    "BEGIN SELECT RAISE(ABORT, 'only a booked leg that is not checked in yet can be checked in'); END",
    "CREATE TRIGGER no_check_in_on_cancelled_flight BEFORE UPDATE OF status ON segments "
    "WHEN new.status = 'checked in' AND (SELECT status FROM flights WHERE id = new.flight_id) = 'cancelled' "
    "BEGIN SELECT RAISE(ABORT, 'this flight is cancelled; the passenger cannot be checked in'); END",
    "CREATE TRIGGER check_in_window BEFORE UPDATE OF status ON segments "
    "WHEN new.status = 'checked in' AND (SELECT departs_at FROM flights WHERE id = new.flight_id) "
    "NOT BETWEEN strftime('%Y-%m-%d %H:%M', 'now', '+1 hour') AND strftime('%Y-%m-%d %H:%M', 'now', '+24 hours') "
    "BEGIN SELECT RAISE(ABORT, 'online check-in opens 24 hours and closes 1 hour before departure'); END",
    "CREATE TRIGGER meals_before_check_in BEFORE UPDATE OF meal ON segments "
    "WHEN old.status <> 'booked' "
    "BEGIN SELECT RAISE(ABORT, 'the meal can only be changed on a booked leg, before check-in'); END",
    # bags
    "CREATE TRIGGER bags_removed_before_loading BEFORE DELETE ON bags "
    "WHEN old.status <> 'checked' "
    "BEGIN SELECT RAISE(ABORT, 'only a bag that has not been loaded yet can be removed'); END",
    "CREATE TRIGGER missing_only_after_delivery BEFORE UPDATE OF status ON bags "
    "WHEN new.status = 'missing' AND old.status <> 'delivered' "
    "BEGIN SELECT RAISE(ABORT, 'only a bag recorded as delivered at its destination can be reported "
    "missing'); END",
]

FARE = "printf('%.2f', fare_cents / 100.0)"
WEIGHT = "printf('%.1f', weight_kg)"
AMOUNT = "CASE WHEN amount_cents IS NULL THEN NULL ELSE printf('%.2f', amount_cents / 100.0) END"
LEG_DEPARTS = "(SELECT f.departs_at FROM flights f WHERE f.id = flight_id)"

COLUMNS: Final = {
    "airports": ("id", "code", "name", "city", "country"),
    "passengers": ("id", "name", "email", "ff_number", "home_city", "tier", "miles", "joined_on"),
    "flights": (
        "id",
        "flight_number",
        "origin_id",
        "destination_id",
        "departs_at",
        "arrives_at",
        "aircraft",
        "status",
    ),
    "bookings": (
        "id",
        "passenger_id",
        "locator",
        "ticket_number",
        "booked_at",
        "cabin",
        "fare_cents",
        "status",
    ),
    "segments": ("id", "booking_id", "flight_id", "seat", "meal", "status", "checked_in_at"),
    "bags": ("id", "segment_id", "tag", "weight_kg", "status"),
    "refunds": ("id", "booking_id", "reason", "requested_on", "amount_cents", "status"),
}
"""Each table's columns, in the order a world's rows hold them (and the world lists its tables)."""
