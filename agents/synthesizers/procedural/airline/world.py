"""Airline: passengers, bookings and their flight legs, flights and airports, checked bags, refunds.

A customer-service desk of one airline (Meridian Air, code MR). The hidden
state an agent has to uncover: which of two passengers with the same name is
meant, which booking is "the most recent confirmed one", whether any flight of
a booking has departed (cancel it, or request a refund instead), whether
online check-in is open for a leg, which bag is the heaviest, what a booking
contains.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import timedelta
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
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import WorldSpec

_NOW_TEXT = "strftime('%Y-%m-%d %H:%M', 'now')"
_DEPARTED = "f.status IN ('departed', 'landed')"

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
    f"WHERE s.booking_id = old.id AND {_DEPARTED}) "
    "BEGIN SELECT RAISE(ABORT, 'a flight of this booking has already departed, so it cannot be cancelled; "
    "request a refund instead'); END",
    # refunds
    "CREATE TRIGGER refunds_need_active_booking BEFORE INSERT ON refunds "
    "WHEN (SELECT status FROM bookings WHERE id = new.booking_id) NOT IN ('confirmed', 'completed') "
    "BEGIN SELECT RAISE(ABORT, 'a cancelled booking cannot get a refund request'); END",
    "CREATE TRIGGER refunds_only_after_departure BEFORE INSERT ON refunds "
    "WHEN NOT EXISTS (SELECT 1 FROM segments s JOIN flights f ON f.id = s.flight_id "
    f"WHERE s.booking_id = new.booking_id AND {_DEPARTED}) "
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

# code, name, city, country, latitude, longitude
AIRPORTS = (
    ("LIS", "Humberto Delgado Airport", "Lisbon", "Portugal", 38.77, -9.13),
    ("OPO", "Francisco Sá Carneiro Airport", "Porto", "Portugal", 41.24, -8.68),
    ("MAD", "Adolfo Suárez Madrid-Barajas Airport", "Madrid", "Spain", 40.47, -3.56),
    ("LYS", "Lyon-Saint Exupéry Airport", "Lyon", "France", 45.73, 5.08),
    ("BER", "Berlin Brandenburg Airport", "Berlin", "Germany", 52.36, 13.50),
    ("HAM", "Hamburg Airport", "Hamburg", "Germany", 53.63, 9.99),
    ("MXP", "Milan Malpensa Airport", "Milan", "Italy", 45.63, 8.72),
    ("VIE", "Vienna International Airport", "Vienna", "Austria", 48.11, 16.57),
    ("ZRH", "Zurich Airport", "Zurich", "Switzerland", 47.46, 8.55),
    ("OSL", "Oslo Gardermoen Airport", "Oslo", "Norway", 60.19, 11.10),
    ("ARN", "Stockholm Arlanda Airport", "Stockholm", "Sweden", 59.65, 17.92),
    ("HEL", "Helsinki-Vantaa Airport", "Helsinki", "Finland", 60.32, 24.96),
    ("WAW", "Warsaw Chopin Airport", "Warsaw", "Poland", 52.17, 20.97),
    ("PRG", "Václav Havel Airport Prague", "Prague", "Czechia", 50.10, 14.26),
    ("DUB", "Dublin Airport", "Dublin", "Ireland", 53.42, -6.27),
    ("LBA", "Leeds Bradford Airport", "Leeds", "United Kingdom", 53.87, -1.66),
    ("NBO", "Jomo Kenyatta International Airport", "Nairobi", "Kenya", -1.32, 36.93),
    ("LOS", "Murtala Muhammed International Airport", "Lagos", "Nigeria", 6.58, 3.32),
    ("ACC", "Kotoka International Airport", "Accra", "Ghana", 5.61, -0.17),
    ("CPT", "Cape Town International Airport", "Cape Town", "South Africa", -33.97, 18.60),
    ("YYZ", "Toronto Pearson International Airport", "Toronto", "Canada", 43.68, -79.63),
    ("YUL", "Montréal-Trudeau International Airport", "Montreal", "Canada", 45.47, -73.74),
    ("AUS", "Austin-Bergstrom International Airport", "Austin", "United States", 30.19, -97.67),
    ("DEN", "Denver International Airport", "Denver", "United States", 39.86, -104.67),
    ("SEA", "Seattle-Tacoma International Airport", "Seattle", "United States", 47.45, -122.31),
    ("BOS", "Logan International Airport", "Boston", "United States", 42.36, -71.01),
    ("KIX", "Kansai International Airport", "Osaka", "Japan", 34.43, 135.23),
    ("ICN", "Incheon International Airport", "Seoul", "South Korea", 37.46, 126.44),
    ("SIN", "Singapore Changi Airport", "Singapore", "Singapore", 1.36, 103.99),
    ("MEL", "Melbourne Airport", "Melbourne", "Australia", -37.67, 144.84),
    ("AKL", "Auckland Airport", "Auckland", "New Zealand", -37.01, 174.79),
    ("BOM", "Chhatrapati Shivaji Maharaj International Airport", "Mumbai", "India", 19.09, 72.87),
    ("BLR", "Kempegowda International Airport", "Bengaluru", "India", 13.20, 77.71),
)
HUBS = ("LIS", "ZRH")
CABINS = ("economy", "premium economy", "business")
MEALS = ("vegetarian", "vegan", "halal", "kosher", "gluten-free")
REFUND_REASONS = (
    "flight delayed by more than three hours",
    "missed connection",
    "downgraded to a lower cabin",
    "unused return flight",
    "seat not as booked",
)
LOCATOR_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"
CHECK_IN_OPENS = (NOW + timedelta(hours=1)).strftime("%Y-%m-%d %H:%M")
CHECK_IN_CLOSES = (NOW + timedelta(hours=24)).strftime("%Y-%m-%d %H:%M")
SEATS = {
    cabin: tuple(f"{row}{letter}" for row in rows for letter in letters)
    for cabin, rows, letters in (
        ("business", range(1, 6), "ACDF"),
        ("premium economy", range(8, 12), "ABCDEF"),
        ("economy", range(14, 39), "ABCDEF"),
    )
}
# weighted draws, as pools (one rng.choice each)
FLIGHT_STATUSES = ("scheduled",) * 22 + ("delayed",) * 2 + ("cancelled",)
TIERS = ("blue",) * 10 + ("silver",) * 5 + ("gold",) * 3 + ("platinum",)
CABIN_POOL = ("economy",) * 7 + ("premium economy",) * 2 + ("business",)
MEAL_POOL = (
    ("standard",) * 30
    + ("vegetarian",) * 4
    + ("vegan",) * 2
    + ("halal",) * 2
    + ("kosher", "gluten-free", "child")
)
BAG_OUTCOMES = ("delivered",) * 18 + ("missing", "found")


def _km(a: tuple[Any, ...], b: tuple[Any, ...]) -> float:
    """Great-circle distance between two airports (rows of AIRPORTS), in km."""
    lat1, lon1, lat2, lon2 = (math.radians(x) for x in (a[4], a[5], b[4], b[5]))
    h = (
        math.sin((lat2 - lat1) / 2) ** 2
        + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    )
    return 2 * 6371 * math.asin(math.sqrt(h))


DAY = 24 * 60
NOW_MINUTE = NOW.hour * 60 + NOW.minute
"""Times are drawn as minutes since midnight of the clock's day (``NOW`` is ``NOW_MINUTE``)."""
OPENS_MINUTE = NOW_MINUTE + 60
CLOSES_MINUTE = NOW_MINUTE + DAY


def _date(minute: int) -> str:
    """The ISO date of a time in minutes."""
    return day(minute // DAY)


def _when(minute: int) -> str:
    """A time in minutes as the tools show it (``YYYY-MM-DD HH:MM``)."""
    return stamp(0, minute)


class _Schedule:
    """The airline's routes (hub and spoke) and the dated flights drawn on demand."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.code_index = {a[0]: i for i, a in enumerate(AIRPORTS)}
        # (origin, destination) -> (flight number, minute of day, minutes in the air, aircraft, km)
        self.routes: dict[tuple[str, str], tuple[str, int, int, str, float]] = {}
        numbers = rng.sample(range(100, 990, 2), len(AIRPORTS) * 2)
        pairs = [(hub, a[0]) for hub in HUBS for a in AIRPORTS if a[0] != hub]
        pairs = [p for p in pairs if (p[1], p[0]) not in pairs or p[0] < p[1]]
        for n, (hub, spoke) in enumerate(pairs):
            km = _km(AIRPORTS[self.code_index[hub]], AIRPORTS[self.code_index[spoke]])
            minutes = int(35 + km / 820 * 60) // 5 * 5
            aircraft = (
                rng.choice(["Embraer E195-E2", "Airbus A220-300", "Airbus A320neo"])
                if km < 2200
                else rng.choice(["Airbus A321LR", "Boeing 737 MAX 8"])
                if km < 4500
                else rng.choice(["Boeing 787-9", "Airbus A350-900", "Airbus A330-900"])
            )
            for k, (a, b) in enumerate(((hub, spoke), (spoke, hub))):
                self.routes[(a, b)] = (
                    f"MR{numbers[n] + k}",
                    rng.randrange(6 * 60, 22 * 60, 5),
                    minutes,
                    aircraft,
                    km,
                )
        self.flights: list[list[Any]] = []
        self.by_key: dict[tuple[str, int], int] = {}
        self.times: list[tuple[int, int]] = []  # per flight: (departure, arrival) in minutes
        self.taken: dict[int, set[str]] = {}

    def flight(self, a: str, b: str, earliest: int) -> tuple[int, int]:
        """The first flight from a to b departing at or after ``earliest`` (made if new): (id, arrival)."""
        number, minute, minutes, aircraft, _ = self.routes[(a, b)]
        departs = earliest // DAY * DAY + minute
        if departs < earliest:
            departs += DAY
        arrives = departs + minutes
        key = (number, departs)
        if key not in self.by_key:
            if arrives <= NOW_MINUTE:
                status = "landed"
            elif departs <= NOW_MINUTE:
                status = "departed"
            else:
                status = self.rng.choice(FLIGHT_STATUSES)
            fid = len(self.flights) + 1
            self.flights.append(
                [
                    fid,
                    number,
                    self.code_index[a] + 1,
                    self.code_index[b] + 1,
                    _when(departs),
                    _when(arrives),
                    aircraft,
                    status,
                ]
            )
            self.by_key[key] = fid
            self.times.append((departs, arrives))
            self.taken[fid] = set()
        return self.by_key[key], arrives

    def seat(self, flight_id: int, cabin: str) -> str:
        while True:
            seat = self.rng.choice(SEATS[cabin])
            if seat not in self.taken[flight_id]:
                self.taken[flight_id].add(seat)
                return seat


def _itinerary(rng: random.Random, home: str, round_trip: float) -> list[tuple[str, str]]:
    """The legs (origin, destination) of a trip starting from ``home`` (usually)."""
    codes = [a[0] for a in AIRPORTS]
    start = home if rng.random() < 0.8 else rng.choice(codes)
    other = rng.choice([c for c in codes if c != start])
    if start in HUBS or other in HUBS:
        out = [(start, other)]
    elif rng.random() < 0.55:
        out = [(start, rng.choice(HUBS))]
    else:
        hub = rng.choice(HUBS)
        out = [(start, hub), (hub, other)]
    if rng.random() < round_trip:
        return out + [(b, a) for a, b in reversed(out)]
    return out


@dataclass(frozen=True)
class AirlineKnobs:
    """The numbers that shape an airline world (the defaults are the built-in domain's).

    A draw pool is a tuple drawn from uniformly: a value that repeats is drawn more often.
    """

    passengers: int = 60
    """How many passengers."""
    twin_share: float = 0.2
    """The chance that a passenger gets a name already given (a same-name distractor)."""
    bookings_per_passenger: tuple[int, ...] = (1, 1, 2, 2, 2, 3, 3, 4, 4, 5, 6, 7, 9, 11)
    """The draw pool of a passenger's number of bookings."""
    cancelled_share: float = 0.08
    """The chance that a booking is cancelled."""
    refund_share: float = 0.1
    """The chance that a booking with a flown leg has a refund request."""


DEFAULT_KNOBS = AirlineKnobs()
"""The knobs of the airline domain's worlds."""


def build_world(seed: int, knobs: AirlineKnobs = DEFAULT_KNOBS) -> WorldSpec:
    """An airline world: passengers (some sharing a name), bookings, their legs, bags and refunds, as ``knobs`` shape it.

    With the default knobs: 60 passengers, ~250 bookings.
    """
    rng = random.Random(derive_seed("airline", "world", seed))
    schedule = _Schedule(rng)
    airports = [[i + 1, *a[:4]] for i, a in enumerate(AIRPORTS)]
    people = People(rng, twin_share=knobs.twin_share)
    passengers: list[list[Any]] = []
    ff_numbers: set[str] = set()
    for pid in range(1, knobs.passengers + 1):
        name = people.name()
        ff = f"MR{rng.randrange(10**7, 10**8)}"
        while ff in ff_numbers:
            ff = f"MR{rng.randrange(10**7, 10**8)}"
        ff_numbers.add(ff)
        tier = rng.choice(TIERS)
        passengers.append(
            [
                pid,
                name,
                people.email(name),
                ff,
                rng.choice(AIRPORTS)[2],
                tier,
                rng.randrange(0, 40_000)
                * {"blue": 1, "silver": 3, "gold": 6, "platinum": 10}[tier],
                (NOW.date() - timedelta(days=rng.randint(30, 4000))).isoformat(),
            ]
        )
    city_code = {a[2]: a[0] for a in AIRPORTS}
    bookings: list[list[Any]] = []
    segments: list[list[Any]] = []
    bags: list[list[Any]] = []
    refunds: list[list[Any]] = []
    locators: set[str] = set()
    first_tag = rng.randrange(100_000, 900_000)
    first_ticket = rng.randrange(21 * 10**8, 23 * 10**8)
    for passenger in passengers:
        for _ in range(rng.choice(knobs.bookings_per_passenger)):
            when = rng.random()
            soon = 0.55 <= when < 0.73  # leaves within a day: online check-in is open
            legs = _itinerary(rng, city_code[passenger[4]], 0.3 if soon else 0.55)
            if soon:
                moment = OPENS_MINUTE
            else:
                if when < 0.42:
                    first_day = -rng.randint(3, 330)
                elif when < 0.55 and len(legs) > 1:
                    first_day = -rng.randint(1, 6)  # a trip under way: the way back is still to fly
                else:
                    first_day = rng.randint(2, 75)
                moment = first_day * DAY
            flown: list[tuple[int, int]] = []
            for n, (a, b) in enumerate(legs):
                if n and legs[n - 1] == (b, a):  # the way back, some days later
                    moment += rng.randint(2, 12) * DAY
                elif n:
                    moment += 50  # a connection
                fid, moment = schedule.flight(a, b, moment)
                flown.append((fid, moment))
            cabin = rng.choice(CABIN_POOL)
            km = sum(schedule.routes[leg][4] for leg in legs)
            fare = int(
                (45 + km * 0.085) * {"economy": 1, "premium economy": 1.8, "business": 3.6}[cabin]
            )
            fare_cents = int(fare * rng.uniform(0.8, 1.4)) * 100 + rng.choice([0, 0, 50, 99])
            first_departs, first_arrives = schedule.times[flown[0][0] - 1]
            booked = first_departs - rng.randint(1, 120) * DAY - rng.randint(0, 900)
            booked = min(booked, NOW_MINUTE - rng.randint(2, 48) * 60)
            departed = [schedule.flights[fid - 1][7] in ("departed", "landed") for fid, _ in flown]
            cancelled = rng.random() < knobs.cancelled_share
            status = "cancelled" if cancelled else "completed" if all(departed) else "confirmed"
            locator = "".join(rng.choices(LOCATOR_LETTERS, k=6))
            while locator in locators:
                locator = "".join(rng.choices(LOCATOR_LETTERS, k=6))
            locators.add(locator)
            bid = len(bookings) + 1
            bookings.append(
                [
                    bid,
                    passenger[0],
                    locator,
                    f"417{first_ticket + bid * 7 + rng.randrange(7)}",
                    _when(booked),
                    cabin,
                    fare_cents,
                    status,
                ]
            )
            for (fid, _), gone in zip(flown, departed, strict=True):
                flight = schedule.flights[fid - 1]
                sid = len(segments) + 1
                meal = rng.choice(MEAL_POOL)
                checked_in = None
                if cancelled:
                    leg_status = "cancelled"
                elif gone:
                    leg_status = "no show" if rng.random() < 0.04 else "flown"
                elif (
                    OPENS_MINUTE <= schedule.times[fid - 1][0] <= CLOSES_MINUTE
                    and flight[7] != "cancelled"
                    and rng.random() < 0.45
                ):
                    leg_status = "checked in"
                    opened = schedule.times[fid - 1][0] - DAY
                    checked_in = _when(opened + rng.randint(1, max(NOW_MINUTE - opened - 2, 1)))
                else:
                    leg_status = "booked"
                segments.append(
                    [sid, bid, fid, schedule.seat(fid, cabin), meal, leg_status, checked_in]
                )
                if leg_status in ("flown", "checked in"):
                    count = rng.choice(
                        [0, 1, 1, 2, 2, 3] if leg_status == "checked in" else [0, 0, 1, 1, 1, 2, 3]
                    )
                    for _ in range(count):
                        bag_status = (
                            "checked"
                            if leg_status == "checked in"
                            else "loaded"
                            if flight[7] == "departed"
                            else rng.choice(BAG_OUTCOMES)
                        )
                        bags.append(
                            [
                                len(bags) + 1,
                                sid,
                                f"0417{first_tag + len(bags)}",
                                round(rng.uniform(6.0, 31.5), 1),
                                bag_status,
                            ]
                        )
            if status != "cancelled" and any(departed) and rng.random() < knobs.refund_share:
                opened = min(first_arrives + rng.randint(0, 20) * DAY, NOW_MINUTE)
                refund_status = rng.choice(["requested", "approved", "paid", "rejected"])
                amount = (
                    int(fare_cents * rng.choice([0.25, 0.4, 0.5, 1.0]))
                    if refund_status in ("approved", "paid")
                    else None
                )
                refunds.append(
                    [
                        len(refunds) + 1,
                        bid,
                        rng.choice(REFUND_REASONS),
                        _date(opened),
                        amount,
                        refund_status,
                    ]
                )
    return make_world(
        "airline",
        SCHEMA,
        *_split({
            "airports": (["id", "code", "name", "city", "country"], airports),
            "passengers": (
                ["id", "name", "email", "ff_number", "home_city", "tier", "miles", "joined_on"],
                passengers,
            ),
            "flights": (
                [
                    "id",
                    "flight_number",
                    "origin_id",
                    "destination_id",
                    "departs_at",
                    "arrives_at",
                    "aircraft",
                    "status",
                ],
                schedule.flights,
            ),
            "bookings": (
                [
                    "id",
                    "passenger_id",
                    "locator",
                    "ticket_number",
                    "booked_at",
                    "cabin",
                    "fare_cents",
                    "status",
                ],
                bookings,
            ),
            "segments": (
                ["id", "booking_id", "flight_id", "seat", "meal", "status", "checked_in_at"],
                segments,
            ),
            "bags": (["id", "segment_id", "tag", "weight_kg", "status"], bags),
            "refunds": (
                ["id", "booking_id", "reason", "requested_on", "amount_cents", "status"],
                refunds,
            ),
        }),
        TOOLS,
    )


FARE = "printf('%.2f', fare_cents / 100.0)"
WEIGHT = "printf('%.1f', weight_kg)"
AMOUNT = "CASE WHEN amount_cents IS NULL THEN NULL ELSE printf('%.2f', amount_cents / 100.0) END"
LEG_DEPARTS = "(SELECT f.departs_at FROM flights f WHERE f.id = flight_id)"
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
            f"UPDATE segments SET status = 'checked in', checked_in_at = {_NOW_TEXT} WHERE id = :segment_id",
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

STATUS = Filter(column="status", words="{value}")
HAS_DEPARTED = (
    "EXISTS (SELECT 1 FROM {db}segments s JOIN {db}flights f ON f.id = s.flight_id "
    f"WHERE s.booking_id = bookings.id AND {_DEPARTED})"
)

CATALOG = Catalog(
    keys={
        t: "id"
        for t in ("airports", "passengers", "flights", "bookings", "segments", "bags", "refunds")
    },
    anchors=(
        Anchor(
            table="passengers",
            tool="find_passenger_by_email",
            param="email",
            column="email",
            phrase="{name} ({email})",
        ),
        Anchor(
            table="passengers",
            tool="search_passengers",
            param="name",
            column="name",
            phrase="{name} from {home_city}",
            disambiguate=("home_city",),
        ),
        Anchor(
            table="passengers",
            tool="find_passenger_by_frequent_flyer",
            param="ff_number",
            column="ff_number",
            phrase="{name} (frequent flyer {ff_number})",
        ),
        Anchor(
            table="bookings",
            tool="find_booking",
            param="locator",
            column="locator",
            phrase="booking {locator}",
        ),
        Anchor(
            table="bookings",
            tool="find_booking",
            param="ticket_number",
            column="ticket_number",
            phrase="the booking with e-ticket number {ticket_number}",
        ),
    ),
    hops=(
        Hop(
            source="passengers",
            target="bookings",
            fk="passenger_id",
            tool="list_bookings",
            param="passenger_id",
            noun="booking",
            plural="bookings",
            orders=(
                Order(expr="booked_at", highest="most recently booked", lowest="earliest-booked"),
                Order(expr="fare_cents", highest="most expensive", lowest="cheapest"),
            ),
            filters=(STATUS, Filter(column="cabin", words="{value} class")),
        ),
        Hop(
            source="bookings",
            target="passengers",
            fk="passenger_id",
            tool="get_passenger",
            param="passenger_id",
            noun="passenger",
            plural="passengers",
            down=False,
            of="on",
        ),
        Hop(
            source="bookings",
            target="segments",
            fk="booking_id",
            tool="list_segments",
            param="booking_id",
            noun="leg",
            plural="legs",
            orders=(Order(expr=LEG_DEPARTS, highest="last", lowest="first"),),
            limit=10,
        ),
        Hop(
            source="segments",
            target="flights",
            fk="flight_id",
            tool="get_flight",
            param="flight_id",
            noun="flight",
            plural="flights",
            down=False,
            of="on",
        ),
        Hop(
            source="flights",
            target="airports",
            fk="destination_id",
            tool="get_airport",
            param="airport_id",
            noun="destination airport",
            plural="destination airports",
            down=False,
        ),
        Hop(
            source="flights",
            target="airports",
            fk="origin_id",
            tool="get_airport",
            param="airport_id",
            noun="departure airport",
            plural="departure airports",
            down=False,
        ),
        Hop(
            source="segments",
            target="bags",
            fk="segment_id",
            tool="list_bags",
            param="segment_id",
            noun="bag",
            plural="bags",
            orders=(Order(expr="weight_kg", highest="heaviest", lowest="lightest"),),
            filters=(STATUS,),
            limit=20,
            of="on",
        ),
        Hop(
            source="bookings",
            target="refunds",
            fk="booking_id",
            tool="list_refunds",
            param="booking_id",
            noun="refund request",
            plural="refund requests",
            orders=(Order(expr="requested_on", highest="latest", lowest="earliest"),),
            filters=(STATUS,),
            limit=20,
            of="for",
        ),
    ),
    attributes=(
        Attribute(table="passengers", expr="tier", phrase="the frequent flyer tier"),
        Attribute(table="passengers", expr="miles", phrase="the miles balance", hint="as a number"),
        Attribute(table="passengers", expr="ff_number", phrase="the frequent flyer number"),
        Attribute(table="passengers", expr="email", phrase="the email address"),
        Attribute(table="bookings", expr="locator", phrase="the record locator"),
        Attribute(table="bookings", expr="ticket_number", phrase="the e-ticket number"),
        Attribute(table="bookings", expr=FARE, phrase="the fare", hint="as shown, like 123.45"),
        Attribute(table="bookings", expr="cabin", phrase="the cabin"),
        Attribute(table="bookings", expr="status", phrase="the status"),
        Attribute(
            table="bookings",
            expr="booked_at",
            phrase="the booking time",
            hint="as YYYY-MM-DD HH:MM",
        ),
        Attribute(table="segments", expr="seat", phrase="the seat"),
        Attribute(table="segments", expr="meal", phrase="the meal choice"),
        Attribute(table="segments", expr="status", phrase="the ticket status"),
        Attribute(table="flights", expr="flight_number", phrase="the flight number"),
        Attribute(table="flights", expr="status", phrase="the status"),
        Attribute(
            table="flights",
            expr="departs_at",
            phrase="the scheduled departure time",
            hint="as YYYY-MM-DD HH:MM",
        ),
        Attribute(table="flights", expr="aircraft", phrase="the aircraft type"),
        Attribute(table="airports", expr="code", phrase="the IATA code"),
        Attribute(table="airports", expr="city", phrase="the city"),
        Attribute(table="bags", expr="tag", phrase="the tag number"),
        Attribute(table="bags", expr=WEIGHT, phrase="the weight in kg", hint="as shown, like 18.5"),
        Attribute(table="bags", expr="status", phrase="the status"),
        Attribute(table="refunds", expr="status", phrase="the status"),
        Attribute(table="refunds", expr="reason", phrase="the stated reason"),
        Attribute(
            table="refunds", expr=AMOUNT, phrase="the approved amount", hint="as shown, like 123.45"
        ),
    ),
    actions=(
        Action(
            name="cancel",
            table="bookings",
            tool="cancel_booking",
            args={"booking_id": "key"},
            when=f"status = 'confirmed' AND NOT {HAS_DEPARTED}",
            ask="cancel {target}",
            check="SELECT b.status = 'cancelled' AND NOT EXISTS (SELECT 1 FROM segments s "
            "WHERE s.booking_id = b.id AND s.status <> 'cancelled') FROM bookings b WHERE b.id = {target}",
            frame={
                "bookings": {"where": "id = {key}", "columns": ["status"]},
                "segments": {"where": "booking_id = {key}", "columns": ["status"]},
            },
            instead="cancel {target} instead",
            blocked="if any of its flights has already departed",
        ),
        Action(
            name="request_refund",
            table="bookings",
            tool="request_refund",
            args={"booking_id": "key", "reason": "choice:reason"},
            when=f"status IN ('confirmed', 'completed') AND {HAS_DEPARTED} AND NOT EXISTS "
            "(SELECT 1 FROM {db}refunds r WHERE r.booking_id = bookings.id AND r.status = 'requested')",
            ask="request a refund for {target} with the reason '{reason}'",
            check="SELECT count(*) = 1 FROM refunds WHERE booking_id = {target} AND reason = {reason} "
            "AND status = 'requested' AND id NOT IN (SELECT id FROM {db}refunds)",
            frame={"refunds": "id > {last[refunds]} AND booking_id = {key} AND reason = {reason}"},
            choices={"reason": REFUND_REASONS},
            instead="request a refund for {target} with the reason '{reason}' instead",
            blocked="if none of its flights has departed yet",
        ),
        Action(
            name="check_in",
            table="segments",
            tool="check_in",
            args={"segment_id": "key"},
            when="status = 'booked' AND (SELECT f.status <> 'cancelled' AND f.departs_at "
            f"BETWEEN '{CHECK_IN_OPENS}' AND '{CHECK_IN_CLOSES}' "
            "FROM {db}flights f WHERE f.id = flight_id)",
            ask="check in the passenger for {target}",
            check="SELECT status = 'checked in' AND checked_in_at IS NOT NULL FROM segments WHERE id = {target}",
            frame={"segments": {"where": "id = {key}", "columns": ["status", "checked_in_at"]}},
        ),
        Action(
            name="change_meal",
            table="segments",
            tool="change_meal",
            args={"segment_id": "key", "meal": "choice:meal"},
            when="status = 'booked' AND meal <> {meal}",
            ask="change the meal on {target} to {meal}",
            check="SELECT meal = {meal} FROM segments WHERE id = {target}",
            frame={"segments": {"where": "id = {key}", "columns": ["meal"]}},
            choices={"meal": MEALS},
        ),
        Action(
            name="remove_bag",
            table="bags",
            tool="remove_bag",
            args={"bag_id": "key"},
            when="status = 'checked'",
            ask="remove {target}",
            check="SELECT NOT EXISTS (SELECT 1 FROM bags WHERE id = {target})",
            frame={"bags": "id = {key}"},
        ),
        Action(
            name="report_missing",
            table="bags",
            tool="report_bag_missing",
            args={"bag_id": "key"},
            when="status = 'delivered'",
            ask="report {target} as missing",
            check="SELECT status = 'missing' FROM bags WHERE id = {target}",
            frame={"bags": {"where": "id = {key}", "columns": ["status"]}},
        ),
        Action(
            name="credit_miles",
            table="passengers",
            tool="credit_miles",
            args={"passenger_id": "key", "miles": "choice:miles"},
            when="1",
            ask="credit {miles} goodwill miles to {target}",
            check="SELECT p.miles = i.miles + {miles} FROM passengers p JOIN {db}passengers i ON i.id = p.id "
            "WHERE p.id = {target}",
            frame={"passengers": {"where": "id = {key}", "columns": ["miles"]}},
            choices={"miles": (2500, 5000, 7500, 10000)},
        ),
    ),
)

DOMAIN = Domain(
    name="airline",
    description="airline customer service: passengers, bookings and flight legs, flights, airports, bags, refunds",
    build_world=build_world,
    catalog=CATALOG,
    knobs=DEFAULT_KNOBS,
)


def _split(tables):  # temporary, during the restructuring
    return {k: v[0] for k, v in tables.items()}, {k: v[1] for k, v in tables.items()}
