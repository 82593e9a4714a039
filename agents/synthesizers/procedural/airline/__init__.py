"""Airline: passengers, bookings and their flight legs, flights and airports, checked bags, refunds.

A customer-service desk of one airline (Meridian Air, code MR). The hidden
state an agent has to uncover: which of two passengers with the same name is
meant, which booking is "the most recent confirmed one", whether any flight of
a booking has departed (cancel it, or request a refund instead), whether
online check-in is open for a leg, which bag is the heaviest, what a booking
contains.
"""

from __future__ import annotations

from coevo.agents.synthesizers.procedural.airline.catalog import CATALOG
from coevo.agents.synthesizers.procedural.airline.schema import SCHEMA
from coevo.agents.synthesizers.procedural.airline.tools import TOOLS
from coevo.agents.synthesizers.procedural.airline.world import (
    DEFAULT_KNOBS,
    AirlineKnobs,
    build_world,
)
from coevo.agents.synthesizers.procedural.base import Domain

__all__ = ["CATALOG", "DEFAULT_KNOBS", "DOMAIN", "SCHEMA", "TOOLS", "AirlineKnobs", "build_world"]

DOMAIN = Domain(
    name="airline",
    description="airline customer service: passengers, bookings and flight legs, flights, airports, bags, refunds",
    build_world=build_world,
    catalog=CATALOG,
    knobs=DEFAULT_KNOBS,
)
