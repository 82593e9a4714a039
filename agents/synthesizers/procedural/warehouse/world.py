"""The warehouse world: its knobs, the warehouses, suppliers' countries and products, and one small generator a table."""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import partial
from typing import Any

from coevo.agents.synthesizers.procedural.base import day, draw_new, make_world, weighted
from coevo.agents.synthesizers.procedural.names import COMPANY_SUFFIXES, COMPANY_WORDS
from coevo.agents.synthesizers.procedural.warehouse.schema import CLAIM_REASONS, COLUMNS, SCHEMA
from coevo.agents.synthesizers.procedural.warehouse.tools import TOOLS
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import WorldSpec

__all__ = ["DEFAULT_KNOBS", "PRODUCTS", "WAREHOUSES", "WarehouseKnobs", "build_world"]

WAREHOUSES = [
    ["LIS", "Lisbon DC", "Lisbon", "Portugal"],
    ["RTM", "Rotterdam DC", "Rotterdam", "Netherlands"],
    ["WAW", "Warsaw DC", "Warsaw", "Poland"],
    ["LDS", "Leeds DC", "Leeds", "United Kingdom"],
]
CODES = [w[0] for w in WAREHOUSES]
SUPPLIER_COUNTRIES = {
    # country: (city, email domain suffix, lead time range in days)
    "Portugal": ("Porto", "pt", (5, 12)),
    "Germany": ("Hamburg", "de", (4, 10)),
    "Poland": ("Poznan", "pl", (4, 9)),
    "Vietnam": ("Ho Chi Minh City", "vn", (35, 55)),
    "Mexico": ("Monterrey", "mx", (20, 35)),
    "Taiwan": ("Taichung", "tw", (30, 50)),
    "Italy": ("Bologna", "it", (5, 12)),
    "Kenya": ("Nairobi", "co.ke", (25, 40)),
    "Canada": ("Toronto", "ca", (14, 25)),
    "Sweden": ("Gothenburg", "se", (5, 12)),
    "Japan": ("Osaka", "co.jp", (30, 45)),
    "Turkey": ("Izmir", "com.tr", (10, 20)),
}
# category: (SKU prefix, [(name, unit of measure, standard cost range in cents)])
PRODUCTS: dict[str, tuple[str, list[tuple[str, str, tuple[int, int]]]]] = {
    "packaging": (
        "PKG",
        [
            ("Stretch wrap, hand grade", "roll", (900, 1800)),
            ("Stretch wrap, hand grade", "case", (5200, 9800)),
            ("Stretch wrap, machine grade", "roll", (2400, 4200)),
            ("Packing tape, clear", "roll", (180, 420)),
            ("Packing tape, clear", "case", (6500, 11000)),
            ("Corrugated box, small", "pack", (1800, 3200)),
            ("Corrugated box, medium", "pack", (2400, 4100)),
            ("Corrugated box, large", "pack", (3100, 5600)),
            ("Void fill paper", "roll", (2200, 3900)),
            ("Bubble wrap", "roll", (1900, 3400)),
            ("Polyester strapping", "roll", (3500, 6200)),
            ("Strapping seals", "box", (1100, 2300)),
            ("Corner edge protectors", "pack", (1500, 2800)),
        ],
    ),
    "safety": (
        "PPE",
        [
            ("Nitrile gloves", "box", (650, 1200)),
            ("Nitrile gloves", "case", (5800, 10500)),
            ("Cut-resistant gloves", "pair", (450, 1100)),
            ("Safety glasses, clear", "piece", (300, 900)),
            ("Hi-vis vest", "piece", (350, 800)),
            ("Hard hat, white", "piece", (900, 2100)),
            ("Foam ear plugs", "box", (1500, 3200)),
            ("Steel-toe safety boots", "pair", (4500, 9500)),
            ("First aid kit refill", "piece", (1800, 3900)),
            ("Disposable dust masks", "box", (1200, 2600)),
        ],
    ),
    "material handling": (
        "MHE",
        [
            ("Manual pallet jack", "piece", (28000, 52000)),
            ("Folding hand truck", "piece", (7500, 16000)),
            ("Plastic pallet", "piece", (3200, 6800)),
            ("Euro pallet, wooden", "piece", (900, 1800)),
            ("Stacking crate, grey", "piece", (700, 1600)),
            ("Small parts tote", "piece", (180, 450)),
            ("Large parts tote", "piece", (450, 1100)),
            ("Roll cage", "piece", (14000, 26000)),
            ("Ratchet load strap", "piece", (600, 1500)),
        ],
    ),
    "cleaning": (
        "CLN",
        [
            ("Floor degreaser", "case", (3600, 7200)),
            ("Absorbent granules", "bag", (1200, 2500)),
            ("Spill kit", "piece", (6500, 13000)),
            ("Paper towel rolls", "case", (2400, 4800)),
            ("Heavy-duty bin liners", "roll", (600, 1300)),
            ("Heavy-duty bin liners", "box", (3800, 7400)),
            ("Microfibre cloths", "pack", (900, 1900)),
            ("Wide push broom", "piece", (1800, 3600)),
        ],
    ),
    "labels and scanning": (
        "LBL",
        [
            ("Thermal barcode labels", "roll", (800, 1700)),
            ("Thermal barcode labels", "box", (7200, 14000)),
            ("Label printer ribbon", "box", (2600, 5400)),
            ("Desktop thermal printer", "piece", (24000, 46000)),
            ("Handheld barcode scanner", "piece", (18000, 39000)),
            ("Scanner battery", "piece", (2900, 6100)),
            ("Pallet label holders", "pack", (1400, 2900)),
            ("Permanent markers, black", "box", (700, 1500)),
        ],
    ),
    "spare parts": (
        "SPR",
        [
            ("Forklift tyre, solid", "piece", (16000, 31000)),
            ("Conveyor roller", "piece", (2100, 4600)),
            ("Hydraulic oil", "case", (8500, 16500)),
            ("Dock seal pad", "piece", (12000, 24000)),
            ("Rack beam safety clips", "box", (1600, 3300)),
            ("Rack upright protector", "piece", (3800, 7900)),
            ("LED high-bay lamp", "piece", (9500, 18500)),
        ],
    ),
}
BULK_UOMS = ("box", "case", "roll", "pack", "bag")
PAYMENT_TERMS = {"net 30": 5, "net 45": 3, "net 60": 2, "prepaid": 1}
"""Suppliers' payment terms, by weight."""
EXPENSIVE_CENTS = 10_000
"""A product that costs more is stocked, reordered and bought a few at a time."""
BIN_CAPACITY = {"pick": 60, "reserve": 400, "quarantine": 25}
"""The most a bin of each zone holds (an eighth of it for an expensive product)."""


@dataclass(frozen=True)
class WarehouseKnobs:
    """The numbers that shape a warehouse world (the defaults are the built-in domain's).

    A draw pool is a tuple drawn from uniformly: a value that repeats is drawn
    more often. The products and warehouses are data (``PRODUCTS``, ``WAREHOUSES``).
    """

    supplier_names: int = 11
    """How many supplier company names."""
    sister_companies: int = 3
    """How many of those names belong to two suppliers in different countries (a distractor)."""
    new_suppliers: int = 5
    """How many suppliers are newly onboarded, with few purchase orders so far."""
    orders_per_supplier: tuple[int, int] = (10, 28)
    """An established supplier's number of purchase orders: at least, at most."""
    orders_per_new_supplier: tuple[int, ...] = (1, 1, 2, 2, 3)
    """The draw pool of a new supplier's number of purchase orders."""
    warehouses_per_product: tuple[int, ...] = (1, 1, 1, 2, 2, 3, 4)
    """The draw pool of the number of warehouses that stock a product."""
    products_per_order: tuple[int, ...] = (1, 1, 2, 2, 3, 3, 4, 5)
    """The draw pool of a purchase order's number of lines (each a different product)."""


DEFAULT_KNOBS = WarehouseKnobs()
"""The knobs of the warehouse domain's worlds."""


def build_world(seed: int, knobs: WarehouseKnobs = DEFAULT_KNOBS) -> WorldSpec:
    """A warehouse world: suppliers, products, bin stock, purchase orders, as ``knobs`` shape it.

    With the default knobs: 14 suppliers, 55 products, ~200 bins, ~180 purchase orders.
    """
    rng = random.Random(derive_seed("warehouse", "world", seed))
    suppliers = _suppliers(rng, knobs)
    supplier_ids = [s[0] for s in suppliers]
    products = _products(rng)
    catalogue = _sources(rng, products, supplier_ids)
    stock = _Stock(rng, knobs)
    for product in products:
        stock.add(product)
    raised = _raised(rng, supplier_ids, catalogue, knobs)
    purchasing = _Purchasing(rng, suppliers)
    for order in raised:
        purchasing.add(*order)
    rows = {
        "suppliers": suppliers,
        "warehouses": [list(w) for w in WAREHOUSES],
        "products": products,
        "stock_levels": stock.levels,
        "purchase_orders": purchasing.orders,
        "po_lines": purchasing.lines,
        "supplier_claims": purchasing.claims(),
        "cycle_counts": stock.counts(),
    }
    return make_world("warehouse", SCHEMA, COLUMNS, rows, TOOLS)


def _suppliers(rng: random.Random, knobs: WarehouseKnobs) -> list[list[Any]]:
    """The suppliers; some names belong to two sister companies in different countries."""
    names: list[str] = []
    while len(names) < knobs.supplier_names:
        name = f"{rng.choice(COMPANY_WORDS)} {rng.choice(COMPANY_SUFFIXES)}"
        if name not in names:
            names.append(name)
    countries = list(SUPPLIER_COUNTRIES)
    rows: list[tuple[str, str]] = [(name, rng.choice(countries)) for name in names]
    for name, country in rng.sample(rows, knobs.sister_companies):
        rows.append((name, rng.choice([c for c in countries if c != country])))
    rng.shuffle(rows)
    suppliers: list[list[Any]] = []
    for sid, (name, country) in enumerate(rows, start=1):
        city, tld, (low, high) = SUPPLIER_COUNTRIES[country]
        slug = name.lower().replace(" ", "")
        local = rng.choice(["orders", "sales", "purchasing", "po"])
        suppliers.append(
            [
                sid,
                name,
                country,
                city,
                f"{local}@{slug}.{tld}",
                rng.randint(low, high),
                weighted(rng, PAYMENT_TERMS),
                "on_hold" if rng.random() < 0.1 else "active",
            ]
        )
    return suppliers


def _sku(rng: random.Random, prefix: str) -> str:
    return f"{prefix}-{rng.randint(3000, 9899)}"


def _products(rng: random.Random) -> list[list[Any]]:
    """One product a row of :data:`PRODUCTS`: a unique SKU, a cost, when and how much to reorder."""
    products: list[list[Any]] = []
    skus: set[str] = set()
    for category, (prefix, items) in PRODUCTS.items():
        for name, uom, (low, high) in items:
            pid = len(products) + 1
            sku = draw_new(partial(_sku, rng, prefix), skus)
            cost = rng.randrange(low, high, 5)
            expensive = cost > EXPENSIVE_CENTS
            reorder_point = rng.choice([2, 3, 4, 5]) if expensive else rng.randrange(10, 130, 5)
            reorder_qty = (
                rng.choice([2, 4, 5, 6]) if expensive else reorder_point * rng.choice([2, 3, 4])
            )
            products.append([pid, sku, name, category, uom, reorder_point, reorder_qty, cost, 0])
    return products


def _sources(
    rng: random.Random, products: list[list[Any]], supplier_ids: list[int]
) -> dict[int, list[list[Any]]]:
    """Each supplier's catalogue: it is the preferred source of a few products and also sells a few more.

    Sets every product's preferred supplier.
    """
    order = list(range(len(products)))
    rng.shuffle(order)
    for n, index in enumerate(order):
        products[index][8] = supplier_ids[n % len(supplier_ids)]
    catalogue: dict[int, list[list[Any]]] = {sid: [] for sid in supplier_ids}
    for product in products:
        catalogue[product[8]].append(product)
        for other in rng.sample(supplier_ids, 2):
            if other != product[8] and rng.random() < 0.35:
                catalogue[other].append(product)
    return catalogue


def _bin(rng: random.Random, warehouse: str, zone: str) -> tuple[str, str]:
    """A bin of a zone of a warehouse: (warehouse code, bin code)."""
    if zone == "pick":
        code = f"{rng.choice('ABCDEF')}{rng.randint(1, 24):02d}-{rng.randint(1, 30):02d}-{rng.randint(1, 3)}"
    elif zone == "reserve":
        code = f"R{rng.randint(1, 16):02d}-{rng.randint(1, 40):02d}-{rng.randint(2, 6)}"
    else:
        code = f"QC-{rng.randint(1, 60):02d}"
    return warehouse, code


class _Stock:
    """The bins that hold each product in the warehouses that stock it, and their cycle counts."""

    def __init__(self, rng: random.Random, knobs: WarehouseKnobs):
        self.rng = rng
        self.knobs = knobs
        self.levels: list[list[Any]] = []
        self._counts: list[list[Any]] = []  # day offsets; made rows by counts()
        self.bins: set[tuple[str, str]] = set()

    def add(self, product: list[Any]) -> None:
        """A product's bins: a pick bin in each warehouse that stocks it, sometimes more."""
        rng = self.rng
        for warehouse in sorted(rng.sample(CODES, rng.choice(self.knobs.warehouses_per_product))):
            zones = ["pick"]
            if rng.random() < 0.55:
                zones.append("reserve")
            if rng.random() < 0.12:
                zones.append("pick")
            if rng.random() < 0.07:
                zones.append("quarantine")
            for zone in zones:
                self._level(product, warehouse, zone)

    def _level(self, product: list[Any], warehouse: str, zone: str) -> None:
        rng = self.rng
        _, code = draw_new(partial(_bin, rng, warehouse, zone), self.bins)
        top = BIN_CAPACITY[zone] // (8 if product[7] > EXPENSIVE_CENTS else 1)
        on_hand = rng.randint(0 if zone != "quarantine" else 1, max(top, 2))
        allocated = rng.randint(0, on_hand // 3) if zone == "pick" else 0
        stock_id = len(self.levels) + 1
        last_counted = self._count(stock_id, zone, on_hand)
        self.levels.append(
            [stock_id, product[0], warehouse, code, zone, on_hand, allocated, day(last_counted)]
        )

    def _count(self, stock_id: int, zone: str, on_hand: int) -> int:
        """The bin's cycle counts, done and still open; returns the day it was last counted."""
        rng = self.rng
        last_counted = -rng.randint(120, 480)
        for _ in range(rng.choice([0, 0, 1, 1, 2])):
            requested = -rng.randint(5, 330)
            counted = min(requested + rng.randint(0, 4), -1)
            counted_qty = max(0, on_hand + rng.choice([0, 0, 0, -2, -1, 1, 3]))
            self._counts.append([0, stock_id, requested, "counted", counted_qty, counted])
            last_counted = max(last_counted, counted)
        if zone != "quarantine" and rng.random() < 0.08:
            self._counts.append([0, stock_id, -rng.randint(0, 6), "open", None, None])
        elif rng.random() < 0.03:
            self._counts.append([0, stock_id, -rng.randint(20, 200), "cancelled", None, None])
        return last_counted

    def counts(self) -> list[list[Any]]:
        """The cycle counts, numbered in the order they were requested."""
        counts = sorted(self._counts, key=lambda c: (c[2], c[1]))
        return [
            [n, c[1], day(c[2]), c[3], c[4], None if c[5] is None else day(c[5])]
            for n, c in enumerate(counts, start=1)
        ]


def _order_age(rng: random.Random, onboarded: bool) -> int:
    """A purchase order's age in days: a few this week, more in recent weeks, most over the year."""
    band = rng.random()
    if band < 0.12:
        return rng.randint(0, 6)
    if band < 0.35 or onboarded:
        return rng.randint(7, 50)
    return rng.randint(51, 420)


def _raised(
    rng: random.Random,
    supplier_ids: list[int],
    catalogue: dict[int, list[list[Any]]],
    knobs: WarehouseKnobs,
) -> list[tuple[int, int, str, list[list[Any]]]]:
    """The purchase orders raised, in the order they were: (day, supplier, warehouse, products) each."""
    raised: list[tuple[int, int, str, list[list[Any]]]] = []
    onboarded = set(rng.sample(supplier_ids, knobs.new_suppliers))  # with few orders so far
    for sid in supplier_ids:
        count = (
            rng.choice(knobs.orders_per_new_supplier)
            if sid in onboarded
            else rng.randint(*knobs.orders_per_supplier)
        )
        for _ in range(count):
            age = _order_age(rng, sid in onboarded)
            sells = catalogue[sid]
            picked = rng.sample(sells, min(len(sells), rng.choice(knobs.products_per_order)))
            # Leeds, the newest warehouse, receives fewer orders than the others
            raised.append((-age, sid, rng.choice(CODES[:3] + CODES), picked))
    return sorted(raised, key=lambda r: (r[0], r[1]))


class _Purchasing:
    """Purchase orders with their lines, and the claims opened against received ones."""

    def __init__(self, rng: random.Random, suppliers: list[list[Any]]):
        self.rng = rng
        self.base = rng.randint(30, 80) * 1000
        self.lead_of = {s[0]: s[5] for s in suppliers}
        self.status_of = {s[0]: s[7] for s in suppliers}
        self.orders: list[list[Any]] = []
        self.lines: list[list[Any]] = []
        self._claims: list[list[Any]] = []  # day offsets; made rows by claims()

    def add(self, created: int, sid: int, warehouse: str, picked: list[list[Any]]) -> None:
        """A purchase order raised on day ``created``: its status follows its age and the supplier's lead time."""
        rng = self.rng
        poid = len(self.orders) + 1
        expected = created + self.lead_of[sid] + rng.randint(-1, 4)
        arrival = expected + rng.randint(-2, 8)
        status = self._status(sid, -created, arrival)
        total, short = self._lines(poid, picked, status)
        self.orders.append(
            [
                poid,
                f"PO-{self.base + poid}",
                sid,
                warehouse,
                status,
                day(created),
                day(max(expected, created)),
                day(min(arrival, -1)) if status == "received" else None,
                total,
            ]
        )
        if status == "received" and (short or rng.random() < 0.04):
            self._claim(poid, arrival, short)

    def _status(self, sid: int, age: int, arrival: int) -> str:
        rng = self.rng
        if self.status_of[sid] == "on_hold" and age < 30:
            return rng.choice(["sent", "cancelled"]) if age > 4 else "cancelled"
        if age <= 4:
            return rng.choice(["draft", "draft", "sent"])
        if rng.random() < 0.07:
            return "cancelled"
        if arrival <= -1:
            return "received"
        if age <= 12 and rng.random() < 0.15:
            return "draft"
        return "sent"

    def _lines(self, poid: int, picked: list[list[Any]], status: str) -> tuple[int, bool]:
        """The order's lines; returns its total and whether a received line came short."""
        rng = self.rng
        total = 0
        short = False
        for product in picked:
            cost = max(5, round(product[7] * rng.uniform(0.9, 1.1) / 5) * 5)
            quantity = _quantity(rng, product)
            received = None
            if status == "received":
                received = quantity
                if rng.random() < 0.06:
                    received = max(0, quantity - rng.randint(1, max(1, quantity // 3)))
                    short = True
            self.lines.append([len(self.lines) + 1, poid, product[0], quantity, cost, received])
            total += quantity * cost
        return total, short

    def _claim(self, poid: int, arrival: int, short: bool) -> None:
        rng = self.rng
        opened = min(arrival + rng.randint(0, 6), 0)
        reason = "short shipment" if short else rng.choice(CLAIM_REASONS[1:])
        status = "open" if opened > -21 else rng.choice(["accepted", "accepted", "rejected"])
        self._claims.append([0, poid, reason, opened, status])

    def claims(self) -> list[list[Any]]:
        """The supplier claims, numbered in the order they were opened."""
        claims = sorted(self._claims, key=lambda c: (c[3], c[1]))
        return [[n, c[1], c[2], day(c[3]), c[4]] for n, c in enumerate(claims, start=1)]


def _quantity(rng: random.Random, product: list[Any]) -> int:
    """How many of a product an order line asks for: few if expensive, many if sold in bulk."""
    if product[7] > EXPENSIVE_CENTS:
        return rng.choice([1, 1, 2, 2, 3, 4, 6])
    if product[4] in BULK_UOMS:
        return rng.choice([10, 12, 20, 24, 30, 40, 48, 60, 80, 100])
    return rng.choice([5, 6, 10, 12, 15, 20, 25, 30, 50])
