"""The airline tools: look passengers, bookings, flights, bags and refunds up; cancel, refund, check in, change."""

from __future__ import annotations

from coevo.agents.synthesizers.procedural.airline.schema import (
    AMOUNT,
    FARE,
    MEALS,
    NOW_TEXT,
    REFUND_REASONS,
    WEIGHT,
)
from coevo.agents.synthesizers.procedural.base import read_tool, write_tool

PASSENGER_COLUMNS = "id, name, email, ff_number, home_city, tier, miles"
BOOKING_COLUMNS = (
    f"b.id, b.locator, b.ticket_number, b.passenger_id, b.booked_at, b.cabin, {FARE.replace('fare_cents', 'b.fare_cents')} AS fare, "
    "b.status, (SELECT min(f.departs_at) FROM segments s JOIN flights f ON f.id = s.flight_id "
    "WHERE s.booking_id = b.id) AS first_departure"
)

ID = {"type": "integer", "minimum": 1}
TOOLS = [
    read_tool(
        "find_passenger_by_email",
        "Look a passenger up by email address (case-insensitive).",
        {"email": {"type": "string", "description": "The passenger's email address."}},
        f"SELECT {PASSENGER_COLUMNS} FROM passengers WHERE lower(email) = lower(trim(:email))",
    ),
    read_tool(
        "find_passenger_by_frequent_flyer",
        "Look a passenger up by Meridian Miles frequent flyer number (like MR12345678).",
        {"ff_number": {"type": "string", "description": "The frequent flyer number."}},
        f"SELECT {PASSENGER_COLUMNS} FROM passengers "
        "WHERE ff_number = upper(replace(trim(:ff_number), ' ', ''))",
    ),
    read_tool(
        "search_passengers",
        "Find passengers whose name contains the given text (at most 20).",
        {"name": {"type": "string", "minLength": 2}},
        f"SELECT {PASSENGER_COLUMNS} FROM passengers WHERE name LIKE '%' || :name || '%' "
        "ORDER BY id LIMIT 20",
    ),
    read_tool(
        "get_passenger",
        "A passenger's profile by id, with frequent flyer tier and miles balance.",
        {"passenger_id": ID},
        "SELECT id, name, email, ff_number, home_city, tier, miles, joined_on FROM passengers "
        "WHERE id = :passenger_id",
    ),
    read_tool(
        "find_booking",
        "Look a booking up by its six-letter record locator (case-insensitive) or by its "
        "13-digit e-ticket number; give one of the two.",
        {
            "locator": {"type": "string", "minLength": 6, "maxLength": 8},
            "ticket_number": {"type": "string", "minLength": 13, "maxLength": 16},
        },
        f"SELECT {BOOKING_COLUMNS} FROM bookings b WHERE b.locator = upper(trim(:locator)) "
        "OR b.ticket_number = replace(replace(trim(:ticket_number), '-', ''), ' ', '')",
        required=[],
    ),
    read_tool(
        "list_bookings",
        "A passenger's bookings, most recently made first, optionally only those with one status.",
        {
            "passenger_id": ID,
            "status": {"type": "string", "enum": ["confirmed", "completed", "cancelled"]},
        },
        f"SELECT {BOOKING_COLUMNS} FROM bookings b WHERE b.passenger_id = :passenger_id "
        "AND (:status IS NULL OR b.status = :status) ORDER BY b.booked_at DESC, b.id DESC LIMIT 50",
        required=["passenger_id"],
    ),
    read_tool(
        "list_segments",
        "The flight legs (segments) of a booking in travel order: flight, route, times, seat, meal, "
        "the leg's status, and whether online check-in is open.",
        {"booking_id": ID},
        "SELECT s.id, s.booking_id, s.flight_id, f.flight_number, o.code AS origin, d.code AS destination, "
        "f.departs_at, f.arrives_at, f.status AS flight_status, s.seat, s.meal, s.status, s.checked_in_at, "
        "CASE WHEN s.status <> 'booked' OR f.status = 'cancelled' THEN 'not available' "
        "WHEN f.departs_at > strftime('%Y-%m-%d %H:%M', 'now', '+24 hours') THEN 'not yet open' "
        "WHEN f.departs_at < strftime('%Y-%m-%d %H:%M', 'now', '+1 hour') THEN 'closed' "
        "ELSE 'open' END AS online_check_in "
        "FROM segments s JOIN flights f ON f.id = s.flight_id JOIN airports o ON o.id = f.origin_id "
        "JOIN airports d ON d.id = f.destination_id WHERE s.booking_id = :booking_id "
        "ORDER BY f.departs_at, s.id LIMIT 10",
    ),
    read_tool(
        "get_flight",
        "A flight's details by id: number, route, scheduled times, aircraft and status.",
        {"flight_id": ID},
        "SELECT f.id, f.flight_number, f.origin_id, o.code AS origin, f.destination_id, d.code AS destination, "
        "f.departs_at, f.arrives_at, f.aircraft, f.status FROM flights f "
        "JOIN airports o ON o.id = f.origin_id JOIN airports d ON d.id = f.destination_id "
        "WHERE f.id = :flight_id",
    ),
    read_tool(
        "get_airport",
        "An airport's details by id.",
        {"airport_id": ID},
        "SELECT id, code, name, city, country FROM airports WHERE id = :airport_id",
    ),
    read_tool(
        "list_bags",
        "The checked bags of one flight leg (segment), with tag number, weight and status.",
        {"segment_id": ID},
        f"SELECT id, segment_id, tag, {WEIGHT} AS weight_kg, status FROM bags "
        "WHERE segment_id = :segment_id ORDER BY id LIMIT 20",
    ),
    read_tool(
        "list_refunds",
        "The refund requests of a booking, oldest first.",
        {"booking_id": ID},
        f"SELECT id, booking_id, reason, requested_on, {AMOUNT} AS amount, status FROM refunds "
        "WHERE booking_id = :booking_id ORDER BY requested_on, id LIMIT 20",
    ),
    write_tool(
        "cancel_booking",
        "Cancel a confirmed booking none of whose flights has departed; every leg is cancelled with it.",
        {"booking_id": ID},
        [
            "UPDATE bookings SET status = 'cancelled' WHERE id = :booking_id",
            "UPDATE segments SET status = 'cancelled' WHERE booking_id = :booking_id",
            "SELECT id, locator, status FROM bookings WHERE id = :booking_id",
        ],
    ),
    write_tool(
        "request_refund",
        "Open a refund request for a booking of which a flight has already departed.",
        {"booking_id": ID, "reason": {"type": "string", "enum": list(REFUND_REASONS)}},
        [
            "INSERT INTO refunds(booking_id, reason) VALUES (:booking_id, :reason)",
            f"SELECT id, booking_id, reason, requested_on, {AMOUNT} AS amount, status FROM refunds "
            "WHERE id = (SELECT max(id) FROM refunds)",
        ],
    ),
    write_tool(
        "check_in",
        "Check the passenger in for one flight leg (online check-in opens 24 hours and closes 1 hour "
        "before departure).",
        {"segment_id": ID},
        [
            f"UPDATE segments SET status = 'checked in', checked_in_at = {NOW_TEXT} WHERE id = :segment_id",
            "SELECT id, booking_id, flight_id, seat, status, checked_in_at FROM segments WHERE id = :segment_id",
        ],
    ),
    write_tool(
        "change_meal",
        "Change the meal ordered for one flight leg (only before check-in).",
        {
            "segment_id": ID,
            "meal": {"type": "string", "enum": ["standard", *MEALS, "child"]},
        },
        [
            "UPDATE segments SET meal = :meal WHERE id = :segment_id",
            "SELECT id, booking_id, flight_id, seat, meal, status FROM segments WHERE id = :segment_id",
        ],
    ),
    write_tool(
        "remove_bag",
        "Remove a checked bag from a leg before it is loaded (the passenger no longer checks it in).",
        {"bag_id": ID},
        ["DELETE FROM bags WHERE id = :bag_id"],
    ),
    write_tool(
        "report_bag_missing",
        "Report a bag recorded as delivered as missing (the passenger did not receive it).",
        {"bag_id": ID},
        [
            "UPDATE bags SET status = 'missing' WHERE id = :bag_id",
            f"SELECT id, segment_id, tag, {WEIGHT} AS weight_kg, status FROM bags WHERE id = :bag_id",
        ],
    ),
    write_tool(
        "credit_miles",
        "Credit goodwill miles to a passenger's frequent flyer account.",
        {"passenger_id": ID, "miles": {"type": "integer", "minimum": 100, "maximum": 50000}},
        [
            "UPDATE passengers SET miles = miles + :miles WHERE id = :passenger_id",
            "SELECT id, name, ff_number, tier, miles FROM passengers WHERE id = :passenger_id",
        ],
    ),
]
