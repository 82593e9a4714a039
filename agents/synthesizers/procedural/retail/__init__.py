"""Retail: customers, orders and their items, products and suppliers, shipments and returns.

This package is the template the other domains copy, one module a part:
``schema.py`` (``SCHEMA``, the value sets it shares, ``COLUMNS``);
``world.py`` (the knobs that shape a world: :class:`RetailKnobs`, a frozen
dataclass with a docstring per field and the domain's numbers as defaults, and
``DEFAULT_KNOBS``; the reference data rows are drawn from; a seeded
``build_world(seed, knobs=DEFAULT_KNOBS)`` made of one small generator a table,
which reads how many rows to make, the share of same-name twins and the list
lengths from the knobs); ``tools.py`` (``TOOLS``); ``catalog.py``
(``CATALOG``); and ``DOMAIN`` here, which records the knobs.

The hidden state an agent has to uncover: which of two customers with the
same name is meant, which order is "the most recent pending one", whether an
order has shipped (cancel, or open a return instead), what an order contains.
"""

from __future__ import annotations

from coevo.agents.synthesizers.procedural.base import Domain
from coevo.agents.synthesizers.procedural.retail.catalog import CATALOG
from coevo.agents.synthesizers.procedural.retail.schema import SCHEMA
from coevo.agents.synthesizers.procedural.retail.tools import TOOLS
from coevo.agents.synthesizers.procedural.retail.world import (
    DEFAULT_KNOBS,
    RetailKnobs,
    build_world,
)

__all__ = ["CATALOG", "DEFAULT_KNOBS", "DOMAIN", "SCHEMA", "TOOLS", "RetailKnobs", "build_world"]

DOMAIN = Domain(
    name="retail",
    description="online shop: customers, orders and items, products, suppliers, shipments, returns",
    build_world=build_world,
    catalog=CATALOG,
    knobs=DEFAULT_KNOBS,
)
