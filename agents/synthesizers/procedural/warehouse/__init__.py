"""Warehouse: suppliers, purchase orders and their lines, products, bin stock and cycle counts.

A regional distribution network (four fixed warehouses) buys packaging,
safety gear, handling equipment and spare parts from a dozen suppliers.
The hidden state an agent has to uncover: which of two suppliers with the
same name (sister companies in different countries) or two products with the
same name (sold per box or per case) is meant, which purchase order is "the
most recent sent one", whether a purchase order has been received (cancel it,
or open a supplier claim instead), whether it is still a draft (only then may
its lines change), and which bins hold a product in which warehouse.
"""

from __future__ import annotations

from coevo.agents.synthesizers.procedural.base import Domain
from coevo.agents.synthesizers.procedural.warehouse.catalog import CATALOG
from coevo.agents.synthesizers.procedural.warehouse.schema import SCHEMA
from coevo.agents.synthesizers.procedural.warehouse.tools import TOOLS
from coevo.agents.synthesizers.procedural.warehouse.world import (
    DEFAULT_KNOBS,
    WarehouseKnobs,
    build_world,
)

__all__ = ["CATALOG", "DEFAULT_KNOBS", "DOMAIN", "SCHEMA", "TOOLS", "WarehouseKnobs", "build_world"]

DOMAIN = Domain(
    name="warehouse",
    description="inventory and purchasing: suppliers, purchase orders and lines, products, bin stock, cycle counts",
    build_world=build_world,
    catalog=CATALOG,
    knobs=DEFAULT_KNOBS,
)
