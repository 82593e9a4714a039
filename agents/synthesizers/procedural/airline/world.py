"""The airline world: its knobs, the airports and fleet it flies, and one small generator a table."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from coevo.agents.synthesizers.procedural.airline.schema import COLUMNS, REFUND_REASONS, SCHEMA
from coevo.agents.synthesizers.procedural.airline.tools import TOOLS
from coevo.agents.synthesizers.procedural.base import (
    NOW,
    People,
    day,
    draw_new,
    make_world,
    stamp,
    table_rows,
)
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import WorldSpec

__all__ = ["AIRPORTS", "DEFAULT_KNOBS", "AirlineKnobs", "build_world"]

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
LOCATOR_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"
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
MILES_FACTOR = {"blue": 1, "silver": 3, "gold": 6, "platinum": 10}
"""A passenger's miles, by tier: a draw up to 40,000 times this."""
FARE_FACTOR = {"economy": 1, "premium economy": 1.8, "business": 3.6}
"""A booking's fare, by cabin: this times the economy fare for the distance."""
FLEET = (
    (2200, ("Embraer E195-E2", "Airbus A220-300", "Airbus A320neo")),
    (4500, ("Airbus A321LR", "Boeing 737 MAX 8")),
    (math.inf, ("Boeing 787-9", "Airbus A350-900", "Airbus A330-900")),
)
"""The aircraft a route may be flown with: (up to this many km, the types)."""


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


def _aircraft(rng: random.Random, km: float) -> str:
    """The aircraft type of a route ``km`` long."""
    types = next(types for reach, types in FLEET if km < reach)
    return rng.choice(list(types))


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
            aircraft = _aircraft(rng, km)
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
    passengers = _passengers(rng, knobs)
    trips = _Trips(rng, schedule, knobs)
    for passenger in passengers:
        for _ in range(rng.choice(knobs.bookings_per_passenger)):
            trips.book(passenger)
    rows = {
        "airports": airports,
        "passengers": table_rows(passengers),
        "flights": schedule.flights,
        "bookings": trips.bookings,
        "segments": trips.segments,
        "bags": trips.bags,
        "refunds": trips.refunds,
    }
    return make_world("airline", SCHEMA, COLUMNS, rows, TOOLS)


@dataclass(frozen=True)
class _Passenger:
    """A ``passengers`` row (its fields are the table's columns, in order)."""

    id: int
    name: str
    email: str
    ff_number: str
    home_city: str
    tier: str
    miles: int
    joined_on: str


def _passengers(rng: random.Random, knobs: AirlineKnobs) -> list[_Passenger]:
    people = People(rng, twin_share=knobs.twin_share)
    passengers: list[_Passenger] = []
    ff_numbers: set[str] = set()
    for pid in range(1, knobs.passengers + 1):
        name = people.name()
        ff = draw_new(lambda: f"MR{rng.randrange(10**7, 10**8)}", ff_numbers)
        tier = rng.choice(TIERS)
        passengers.append(
            _Passenger(
                pid,
                name,
                people.email(name),
                ff,
                rng.choice(AIRPORTS)[2],
                tier,
                rng.randrange(0, 40_000) * MILES_FACTOR[tier],
                (NOW.date() - timedelta(days=rng.randint(30, 4000))).isoformat(),
            )
        )
    return passengers


class _Trips:
    """Bookings, each with its legs (segments), their checked bags, and a refund request if any."""

    def __init__(self, rng: random.Random, schedule: _Schedule, knobs: AirlineKnobs):
        self.rng = rng
        self.schedule = schedule
        self.knobs = knobs
        self.city_code = {a[2]: a[0] for a in AIRPORTS}
        self.bookings: list[list[Any]] = []
        self.segments: list[list[Any]] = []
        self.bags: list[list[Any]] = []
        self.refunds: list[list[Any]] = []
        self.locators: set[str] = set()
        self.first_tag = rng.randrange(100_000, 900_000)
        self.first_ticket = rng.randrange(21 * 10**8, 23 * 10**8)

    def book(self, passenger: _Passenger) -> None:
        """A booking of ``passenger``'s: a trip in the past, under way, about to leave or ahead."""
        rng, schedule = self.rng, self.schedule
        when = rng.random()
        soon = 0.55 <= when < 0.73  # leaves within a day: online check-in is open
        legs = _itinerary(rng, self.city_code[passenger.home_city], 0.3 if soon else 0.55)
        flown = self._fly(legs, OPENS_MINUTE if soon else self._first_day(when, legs) * DAY)
        cabin = rng.choice(CABIN_POOL)
        fare_cents = self._fare(legs, cabin)
        first_departs, first_arrives = schedule.times[flown[0][0] - 1]
        booked = first_departs - rng.randint(1, 120) * DAY - rng.randint(0, 900)
        booked = min(booked, NOW_MINUTE - rng.randint(2, 48) * 60)
        departed = [schedule.flights[fid - 1][7] in ("departed", "landed") for fid, _ in flown]
        cancelled = rng.random() < self.knobs.cancelled_share
        status = "cancelled" if cancelled else "completed" if all(departed) else "confirmed"
        locator = draw_new(lambda: "".join(rng.choices(LOCATOR_LETTERS, k=6)), self.locators)
        bid = len(self.bookings) + 1
        self.bookings.append(
            [
                bid,
                passenger.id,
                locator,
                f"417{self.first_ticket + bid * 7 + rng.randrange(7)}",
                _when(booked),
                cabin,
                fare_cents,
                status,
            ]
        )
        for (fid, _), gone in zip(flown, departed, strict=True):
            self._segment(bid, fid, cabin, gone=gone, cancelled=cancelled)
        if status != "cancelled" and any(departed) and rng.random() < self.knobs.refund_share:
            self._refund(bid, first_arrives, fare_cents)

    def _first_day(self, when: float, legs: list[tuple[str, str]]) -> int:
        """The day the trip starts (a draw below 0.55 of ``when``: in the past; above: ahead)."""
        if when < 0.42:
            return -self.rng.randint(3, 330)
        if when < 0.55 and len(legs) > 1:
            return -self.rng.randint(1, 6)  # a trip under way: the way back is still to fly
        return self.rng.randint(2, 75)

    def _fly(self, legs: list[tuple[str, str]], moment: int) -> list[tuple[int, int]]:
        """The flights of the legs from ``moment`` on: (flight id, arrival) each."""
        flown: list[tuple[int, int]] = []
        for n, (a, b) in enumerate(legs):
            if n and legs[n - 1] == (b, a):  # the way back, some days later
                moment += self.rng.randint(2, 12) * DAY
            elif n:
                moment += 50  # a connection
            fid, moment = self.schedule.flight(a, b, moment)
            flown.append((fid, moment))
        return flown

    def _fare(self, legs: list[tuple[str, str]], cabin: str) -> int:
        """The fare in cents: by distance and cabin, give or take, ending in 00, 50 or 99."""
        km = sum(self.schedule.routes[leg][4] for leg in legs)
        fare = int((45 + km * 0.085) * FARE_FACTOR[cabin])
        return int(fare * self.rng.uniform(0.8, 1.4)) * 100 + self.rng.choice([0, 0, 50, 99])

    def _segment(self, bid: int, fid: int, cabin: str, *, gone: bool, cancelled: bool) -> None:
        """A leg of booking ``bid`` on flight ``fid``, with its bags once checked in or flown."""
        flight = self.schedule.flights[fid - 1]
        sid = len(self.segments) + 1
        meal = self.rng.choice(MEAL_POOL)
        leg_status, checked_in = self._leg_status(fid, gone=gone, cancelled=cancelled)
        seat = self.schedule.seat(fid, cabin)
        self.segments.append([sid, bid, fid, seat, meal, leg_status, checked_in])
        if leg_status in ("flown", "checked in"):
            self._bags(sid, flight, leg_status)

    def _leg_status(self, fid: int, *, gone: bool, cancelled: bool) -> tuple[str, str | None]:
        """A leg's status, and when it was checked in (online check-in opens a day ahead)."""
        rng = self.rng
        if cancelled:
            return "cancelled", None
        if gone:
            return "no show" if rng.random() < 0.04 else "flown", None
        departs = self.schedule.times[fid - 1][0]
        if (
            OPENS_MINUTE <= departs <= CLOSES_MINUTE
            and self.schedule.flights[fid - 1][7] != "cancelled"
            and rng.random() < 0.45
        ):
            opened = departs - DAY
            return "checked in", _when(opened + rng.randint(1, max(NOW_MINUTE - opened - 2, 1)))
        return "booked", None

    def _bags(self, sid: int, flight: list[Any], leg_status: str) -> None:
        rng = self.rng
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
            self.bags.append(
                [
                    len(self.bags) + 1,
                    sid,
                    f"0417{self.first_tag + len(self.bags)}",
                    round(rng.uniform(6.0, 31.5), 1),
                    bag_status,
                ]
            )

    def _refund(self, bid: int, first_arrives: int, fare_cents: int) -> None:
        rng = self.rng
        opened = min(first_arrives + rng.randint(0, 20) * DAY, NOW_MINUTE)
        refund_status = rng.choice(["requested", "approved", "paid", "rejected"])
        amount = (
            int(fare_cents * rng.choice([0.25, 0.4, 0.5, 1.0]))
            if refund_status in ("approved", "paid")
            else None
        )
        self.refunds.append(
            [
                len(self.refunds) + 1,
                bid,
                rng.choice(REFUND_REASONS),
                _date(opened),
                amount,
                refund_status,
            ]
        )
