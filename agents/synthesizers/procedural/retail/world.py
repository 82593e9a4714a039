"""The retail world: its knobs, the reference data rows are drawn from, and one small generator a table."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from coevo.agents.synthesizers.procedural.base import People, day, make_world, table_rows, weighted
from coevo.agents.synthesizers.procedural.names import (
    CITIES,
    COMPANY_SUFFIXES,
    COMPANY_WORDS,
    COUNTRIES,
)
from coevo.agents.synthesizers.procedural.retail.schema import (
    COLUMNS,
    ISSUE_KINDS,
    RETURN_REASONS,
    SCHEMA,
)
from coevo.agents.synthesizers.procedural.retail.tools import TOOLS
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import WorldSpec

__all__ = ["DEFAULT_KNOBS", "RetailKnobs", "build_world"]

PRODUCTS = {
    "furniture": [
        "Standing desk, oak",
        "Ergonomic office chair",
        "Bookshelf, 5 tiers",
        "Filing cabinet",
        "Monitor arm",
    ],
    "electronics": [
        "27-inch QHD monitor",
        "Noise-cancelling headphones",
        "USB-C dock",
        "Webcam 1080p",
        "Portable SSD 1 TB",
    ],
    "accessories": [
        "LED desk lamp",
        "Mechanical keyboard, 75%",
        "Wireless mouse",
        "USB-C cable, 2 m",
        'Laptop sleeve 14"',
    ],
    "kitchen": [
        "Pour-over coffee set",
        "Cast-iron skillet",
        "Chef's knife, 20 cm",
        "Electric kettle",
        "Glass storage jars",
    ],
    "outdoor": [
        "Trail backpack, 30 L",
        "Insulated bottle",
        "Camping stove",
        "Headlamp",
        "Rain shell jacket",
    ],
}
CARRIERS = ["DHL", "UPS", "FedEx", "PostNL", "DPD"]
TIERS = {"standard": 6, "silver": 3, "gold": 1}
"""Customers' loyalty tiers, by weight."""


@dataclass(frozen=True)
class RetailKnobs:
    """The numbers that shape a retail world (the defaults are the built-in domain's).

    A draw pool is a tuple drawn from uniformly: a value that repeats is drawn more often.
    """

    customers: int = 80
    """How many customers."""
    twin_share: float = 0.15
    """The chance that a customer gets a name already given (a same-name distractor)."""
    suppliers: int = 8
    """How many suppliers."""
    product_issues: int = 6
    """How many product quality issues are already reported."""
    orders_per_customer: tuple[int, ...] = (1, 2, 2, 3, 3, 4, 5, 6, 8, 11)
    """The draw pool of a customer's number of orders."""
    items_per_order: tuple[int, ...] = (1, 1, 2, 2, 3, 3, 4)
    """The draw pool of an order's number of line items (each a different product)."""
    return_share: float = 0.12
    """The chance that a delivered order has a return."""


DEFAULT_KNOBS = RetailKnobs()
"""The knobs of the retail domain's worlds."""


def build_world(seed: int, knobs: RetailKnobs = DEFAULT_KNOBS) -> WorldSpec:
    """A retail world: customers (some sharing a name), products, orders, as ``knobs`` shape it.

    With the default knobs: 80 customers, 25 products, ~340 orders.
    """
    rng = random.Random(derive_seed("retail", "world", seed))
    customers = _customers(rng, knobs)
    suppliers = _suppliers(rng, seed, knobs)
    products = _products(rng, len(suppliers))
    issues = _product_issues(rng, len(products), knobs)
    sales = _Sales(rng, products, knobs)
    for customer in customers:
        sales.orders_of(customer)
    rows = {
        "customers": table_rows(customers),
        "suppliers": suppliers,
        "products": products,
        "orders": sales.orders,
        "order_items": sales.items,
        "shipments": sales.shipments,
        "returns": sales.returns,
        "product_issues": issues,
    }
    return make_world("retail", SCHEMA, COLUMNS, rows, TOOLS)


@dataclass(frozen=True)
class _Customer:
    """A ``customers`` row (its fields are the table's columns, in order)."""

    id: int
    name: str
    email: str
    city: str
    tier: str
    joined_on: str


def _customers(rng: random.Random, knobs: RetailKnobs) -> list[_Customer]:
    people = People(rng, twin_share=knobs.twin_share)
    customers: list[_Customer] = []
    for cid in range(1, knobs.customers + 1):
        name = people.name()
        customers.append(
            _Customer(
                cid,
                name,
                people.email(name),
                rng.choice(CITIES),
                weighted(rng, TIERS),
                day(-rng.randint(60, 2000)),
            )
        )
    return customers


def _suppliers(rng: random.Random, seed: int, knobs: RetailKnobs) -> list[list[Any]]:
    """The suppliers: each a different company name, the first word taken in turn by seed."""
    suppliers: list[list[Any]] = []
    for sid in range(1, knobs.suppliers + 1):
        company = (
            f"{COMPANY_WORDS[(seed + sid * 5) % len(COMPANY_WORDS)]} {rng.choice(COMPANY_SUFFIXES)}"
        )
        while any(s[1] == company for s in suppliers):
            company = f"{rng.choice(COMPANY_WORDS)} {rng.choice(COMPANY_SUFFIXES)}"
        slug = company.lower().replace(" ", "")
        suppliers.append([sid, company, rng.choice(COUNTRIES), f"orders@{slug}.com"])
    return suppliers


def _products(rng: random.Random, suppliers: int) -> list[list[Any]]:
    """One product a name of :data:`PRODUCTS`, with a SKU of its category, a price and a supplier."""
    products: list[list[Any]] = []
    for category, names in PRODUCTS.items():
        for name in names:
            pid = len(products) + 1
            prefix = category[:3].upper()
            products.append(
                [
                    pid,
                    f"{prefix}-{pid:03d}{rng.choice('ABCDEFGHJK')}",
                    name,
                    category,
                    rng.randrange(900, 60000, 100) - 1,
                    rng.randint(1, suppliers),
                ]
            )
    return products


def _product_issues(rng: random.Random, products: int, knobs: RetailKnobs) -> list[list[Any]]:
    return [
        [
            n + 1,
            rng.randint(1, products),
            rng.choice(ISSUE_KINDS),
            day(-rng.randint(1, 300)),
            rng.choice(["new", "investigating", "closed"]),
        ]
        for n in range(knobs.product_issues)
    ]


def _order_status(rng: random.Random, age: int) -> str:
    """An order's status by its age in days: a week pending, then shipping, then mostly delivered."""
    if age < 8:
        return "pending"
    if age < 14:
        return rng.choice(["pending", "shipped", "shipped"])
    return rng.choice(["delivered"] * 5 + ["cancelled"])


class _Sales:
    """The orders of every customer, with their items, shipments and returns (rows made together)."""

    def __init__(self, rng: random.Random, products: list[list[Any]], knobs: RetailKnobs):
        self.rng = rng
        self.products = products
        self.knobs = knobs
        self.orders: list[list[Any]] = []
        self.items: list[list[Any]] = []
        self.shipments: list[list[Any]] = []
        self.returns: list[list[Any]] = []

    def orders_of(self, customer: _Customer) -> None:
        """A customer's orders, each with its line items, and its shipment and return if any."""
        rng = self.rng
        for _ in range(rng.choice(self.knobs.orders_per_customer)):
            oid = len(self.orders) + 1
            age = rng.randint(0, 200)
            status = _order_status(rng, age)
            total = self._items(oid)
            ship_city = customer.city if rng.random() < 0.85 else rng.choice(CITIES)
            self.orders.append([oid, customer.id, day(-age), status, total, ship_city])
            if status in ("shipped", "delivered"):
                self._shipment(oid, age, status)

    def _items(self, oid: int) -> int:
        """The order's line items (each a different product); returns the order's total."""
        rng = self.rng
        total = 0
        for product in rng.sample(self.products, rng.choice(self.knobs.items_per_order)):
            quantity = rng.choice([1, 1, 1, 2, 3])
            self.items.append([len(self.items) + 1, oid, product[0], quantity, product[4]])
            total += quantity * product[4]
        return total

    def _shipment(self, oid: int, age: int, status: str) -> None:
        """The shipment of a shipped or delivered order; a delivered one is sometimes returned."""
        rng = self.rng
        shipped = -age + rng.randint(1, 3)
        tracking = f"{rng.choice(CARRIERS)[:2].upper()}{rng.randrange(10**9, 10**10)}"
        delivered = day(min(shipped + rng.randint(2, 6), 0)) if status == "delivered" else None
        self.shipments.append(
            [
                len(self.shipments) + 1,
                oid,
                rng.choice(CARRIERS),
                tracking,
                day(min(shipped, 0)),
                delivered,
            ]
        )
        if status == "delivered" and rng.random() < self.knobs.return_share:
            self.returns.append(
                [
                    len(self.returns) + 1,
                    oid,
                    rng.choice(RETURN_REASONS),
                    day(min(-age + 10, 0)),
                    rng.choice(["open", "received", "refunded"]),
                ]
            )
