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

import random
from dataclasses import dataclass
from typing import Any

from coevo.agents.synthesizers.catalog import Action, Anchor, Attribute, Catalog, Filter, Hop, Order
from coevo.agents.synthesizers.procedural.base import (
    Domain,
    day,
    make_world,
    read_tool,
    write_tool,
)
from coevo.agents.synthesizers.procedural.names import COMPANY_SUFFIXES, COMPANY_WORDS
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import WorldSpec

SCHEMA = [
    "CREATE TABLE suppliers(id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL, "
    "city TEXT NOT NULL, contact_email TEXT NOT NULL UNIQUE, "
    "lead_time_days INTEGER NOT NULL CHECK (lead_time_days BETWEEN 1 AND 120), "
    "payment_terms TEXT NOT NULL CHECK (payment_terms IN ('net 30', 'net 45', 'net 60', 'prepaid')), "
    "status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'on_hold')), "
    "UNIQUE (name, country))",
    "CREATE TABLE warehouses(code TEXT PRIMARY KEY NOT NULL CHECK (length(code) = 3), "
    "name TEXT NOT NULL UNIQUE, city TEXT NOT NULL, country TEXT NOT NULL)",
    "CREATE TABLE products(id INTEGER PRIMARY KEY, sku TEXT NOT NULL UNIQUE, name TEXT NOT NULL, "
    "category TEXT NOT NULL, uom TEXT NOT NULL CHECK (uom IN ('piece', 'pair', 'box', 'case', 'roll', 'pack', 'bag')), "
    "reorder_point INTEGER NOT NULL CHECK (reorder_point >= 0), "
    "reorder_qty INTEGER NOT NULL CHECK (reorder_qty > 0), "
    "standard_cost_cents INTEGER NOT NULL CHECK (standard_cost_cents > 0), "
    "preferred_supplier_id INTEGER REFERENCES suppliers(id), UNIQUE (name, uom))",
    "CREATE TABLE stock_levels(id INTEGER PRIMARY KEY, product_id INTEGER NOT NULL REFERENCES products(id), "
    "warehouse_code TEXT NOT NULL REFERENCES warehouses(code), bin TEXT NOT NULL, "
    "zone TEXT NOT NULL CHECK (zone IN ('pick', 'reserve', 'quarantine')), "
    "on_hand INTEGER NOT NULL CHECK (on_hand >= 0), "
    "allocated INTEGER NOT NULL DEFAULT 0 CHECK (allocated BETWEEN 0 AND on_hand), "
    "last_counted_on TEXT NOT NULL, UNIQUE (warehouse_code, bin))",
    "CREATE TABLE purchase_orders(id INTEGER PRIMARY KEY, po_number TEXT NOT NULL UNIQUE, "
    "supplier_id INTEGER NOT NULL REFERENCES suppliers(id), "
    "warehouse_code TEXT NOT NULL REFERENCES warehouses(code), "
    "status TEXT NOT NULL CHECK (status IN ('draft', 'sent', 'received', 'cancelled')), "
    "created_on TEXT NOT NULL, expected_on TEXT NOT NULL CHECK (expected_on >= created_on), received_on TEXT, "
    "total_cents INTEGER NOT NULL CHECK (total_cents >= 0), "
    "CHECK ((status = 'received') = (received_on IS NOT NULL)))",
    "CREATE TABLE po_lines(id INTEGER PRIMARY KEY, po_id INTEGER NOT NULL REFERENCES purchase_orders(id), "
    "product_id INTEGER NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL CHECK (quantity > 0), "
    "unit_cost_cents INTEGER NOT NULL CHECK (unit_cost_cents > 0), "
    "received_qty INTEGER CHECK (received_qty BETWEEN 0 AND quantity), UNIQUE (po_id, product_id))",
    "CREATE TABLE supplier_claims(id INTEGER PRIMARY KEY, po_id INTEGER NOT NULL REFERENCES purchase_orders(id), "
    "reason TEXT NOT NULL CHECK (reason IN ('short shipment', 'damaged goods', 'wrong item', "
    "'late delivery', 'price discrepancy')), opened_on TEXT NOT NULL DEFAULT (date('now')), "
    "status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'accepted', 'rejected')))",
    "CREATE TABLE cycle_counts(id INTEGER PRIMARY KEY, stock_level_id INTEGER NOT NULL REFERENCES stock_levels(id), "
    "requested_on TEXT NOT NULL DEFAULT (date('now')), "
    "status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'counted', 'cancelled')), "
    "counted_qty INTEGER CHECK (counted_qty >= 0), counted_on TEXT, "
    "CHECK ((status = 'counted') = (counted_on IS NOT NULL AND counted_qty IS NOT NULL)))",
    "CREATE INDEX pos_by_supplier ON purchase_orders(supplier_id, created_on)",
    "CREATE INDEX lines_by_po ON po_lines(po_id)",
    "CREATE INDEX stock_by_product ON stock_levels(product_id)",
    "CREATE INDEX claims_by_po ON supplier_claims(po_id)",
    "CREATE INDEX counts_by_stock ON cycle_counts(stock_level_id, status)",
    "CREATE TRIGGER po_cancel_only_open BEFORE UPDATE OF status ON purchase_orders "
    "WHEN new.status = 'cancelled' AND old.status NOT IN ('draft', 'sent') "
    "BEGIN SELECT RAISE(ABORT, 'only a draft or sent purchase order can be cancelled; "
    "open a supplier claim for a received one'); END",
    "CREATE TRIGGER claims_only_after_receipt BEFORE INSERT ON supplier_claims "
    "WHEN (SELECT status FROM purchase_orders WHERE id = new.po_id) IS NOT 'received' "
    "BEGIN SELECT RAISE(ABORT, 'a supplier claim can only be opened for a received purchase order; "
    "cancel a draft or sent one instead'); END",
    "CREATE TRIGGER lines_fixed_unless_draft BEFORE UPDATE ON po_lines "
    "WHEN (SELECT status FROM purchase_orders WHERE id = old.po_id) <> 'draft' "
    "BEGIN SELECT RAISE(ABORT, 'lines can only be changed while the purchase order is a draft; "
    "a sent order has to be amended with the supplier'); END",
    "CREATE TRIGGER lines_kept_unless_draft BEFORE DELETE ON po_lines "
    "WHEN (SELECT status FROM purchase_orders WHERE id = old.po_id) <> 'draft' "
    "BEGIN SELECT RAISE(ABORT, 'lines can only be removed while the purchase order is a draft'); END",
    "CREATE TRIGGER po_keeps_a_line BEFORE DELETE ON po_lines "
    "WHEN (SELECT count(*) FROM po_lines WHERE po_id = old.po_id) = 1 "
    "BEGIN SELECT RAISE(ABORT, 'a purchase order keeps at least one line; "
    "cancel the purchase order instead'); END",
    "CREATE TRIGGER one_open_count_per_bin BEFORE INSERT ON cycle_counts "
    "WHEN EXISTS (SELECT 1 FROM cycle_counts WHERE stock_level_id = new.stock_level_id AND status = 'open') "
    "BEGIN SELECT RAISE(ABORT, 'this bin already has an open cycle count; wait for it to be counted'); END",
    "CREATE TRIGGER no_cycle_count_in_quarantine BEFORE INSERT ON cycle_counts "
    "WHEN (SELECT zone FROM stock_levels WHERE id = new.stock_level_id) = 'quarantine' "
    "BEGIN SELECT RAISE(ABORT, 'quarantined stock is counted by quality control, not by cycle counts'); END",
]

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
CLAIM_REASONS = (
    "short shipment",
    "damaged goods",
    "wrong item",
    "late delivery",
    "price discrepancy",
)
PAYMENT_TERMS = ("net 30", "net 45", "net 60", "prepaid")


def _bin_code(rng: random.Random, zone: str) -> str:
    if zone == "pick":
        return f"{rng.choice('ABCDEF')}{rng.randint(1, 24):02d}-{rng.randint(1, 30):02d}-{rng.randint(1, 3)}"
    if zone == "reserve":
        return f"R{rng.randint(1, 16):02d}-{rng.randint(1, 40):02d}-{rng.randint(2, 6)}"
    return f"QC-{rng.randint(1, 60):02d}"


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
                rng.choices(PAYMENT_TERMS, [5, 3, 2, 1])[0],
                "on_hold" if rng.random() < 0.1 else "active",
            ]
        )
    return suppliers


def build_world(seed: int, knobs: WarehouseKnobs = DEFAULT_KNOBS) -> WorldSpec:
    """A warehouse world: suppliers, products, bin stock, purchase orders, as ``knobs`` shape it.

    With the default knobs: 14 suppliers, 55 products, ~200 bins, ~180 purchase orders.
    """
    rng = random.Random(derive_seed("warehouse", "world", seed))
    suppliers = _suppliers(rng, knobs)
    supplier_ids = [s[0] for s in suppliers]

    products: list[list[Any]] = []
    skus: set[str] = set()
    for category, (prefix, items) in PRODUCTS.items():
        for name, uom, (low, high) in items:
            pid = len(products) + 1
            sku = f"{prefix}-{rng.randint(3000, 9899)}"
            while sku in skus:
                sku = f"{prefix}-{rng.randint(3000, 9899)}"
            skus.add(sku)
            cost = rng.randrange(low, high, 5)
            expensive = cost > 10000
            reorder_point = rng.choice([2, 3, 4, 5]) if expensive else rng.randrange(10, 130, 5)
            reorder_qty = (
                rng.choice([2, 4, 5, 6]) if expensive else reorder_point * rng.choice([2, 3, 4])
            )
            products.append([pid, sku, name, category, uom, reorder_point, reorder_qty, cost, 0])
    # every supplier is the preferred source of a few products; it also sells a few more
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

    stock: list[list[Any]] = []
    counts: list[list[Any]] = []
    used_bins: set[tuple[str, str]] = set()
    for product in products:
        expensive = product[7] > 10000
        for wcode in sorted(rng.sample(CODES, rng.choice(knobs.warehouses_per_product))):
            zones = ["pick"]
            if rng.random() < 0.55:
                zones.append("reserve")
            if rng.random() < 0.12:
                zones.append("pick")
            if rng.random() < 0.07:
                zones.append("quarantine")
            for zone in zones:
                code = _bin_code(rng, zone)
                while (wcode, code) in used_bins:
                    code = _bin_code(rng, zone)
                used_bins.add((wcode, code))
                top = {"pick": 60, "reserve": 400, "quarantine": 25}[zone] // (
                    8 if expensive else 1
                )
                on_hand = rng.randint(0 if zone != "quarantine" else 1, max(top, 2))
                allocated = rng.randint(0, on_hand // 3) if zone == "pick" else 0
                stock_id = len(stock) + 1
                last_counted = -rng.randint(120, 480)
                for _ in range(rng.choice([0, 0, 1, 1, 2])):
                    requested = -rng.randint(5, 330)
                    counted = min(requested + rng.randint(0, 4), -1)
                    counted_qty = max(0, on_hand + rng.choice([0, 0, 0, -2, -1, 1, 3]))
                    counts.append([0, stock_id, requested, "counted", counted_qty, counted])
                    last_counted = max(last_counted, counted)
                if zone != "quarantine" and rng.random() < 0.08:
                    counts.append([0, stock_id, -rng.randint(0, 6), "open", None, None])
                elif rng.random() < 0.03:
                    counts.append([0, stock_id, -rng.randint(20, 200), "cancelled", None, None])
                stock.append(
                    [
                        stock_id,
                        product[0],
                        wcode,
                        code,
                        zone,
                        on_hand,
                        allocated,
                        day(last_counted),
                    ]
                )
    counts.sort(key=lambda c: (c[2], c[1]))
    cycle_counts = [
        [n, c[1], day(c[2]), c[3], c[4], None if c[5] is None else day(c[5])]
        for n, c in enumerate(counts, start=1)
    ]

    # purchase orders, numbered in the order they were raised
    raised: list[tuple[int, int, str, list[list[Any]]]] = []  # (day, supplier, warehouse, products)
    onboarded = set(rng.sample(supplier_ids, knobs.new_suppliers))  # with few orders so far
    for sid in supplier_ids:
        raised_by_supplier = (
            rng.choice(knobs.orders_per_new_supplier)
            if sid in onboarded
            else rng.randint(*knobs.orders_per_supplier)
        )
        for _ in range(raised_by_supplier):
            band = rng.random()
            age = (
                rng.randint(0, 6)
                if band < 0.12
                else rng.randint(7, 50)
                if band < 0.35 or sid in onboarded
                else rng.randint(51, 420)
            )
            picked = rng.sample(
                catalogue[sid], min(len(catalogue[sid]), rng.choice(knobs.products_per_order))
            )
            # Leeds, the newest warehouse, receives fewer orders than the others
            raised.append((-age, sid, rng.choice(CODES[:3] + CODES), picked))
    raised.sort(key=lambda r: (r[0], r[1]))
    base = rng.randint(30, 80) * 1000
    purchase_orders: list[list[Any]] = []
    lines: list[list[Any]] = []
    claims: list[list[Any]] = []
    lead_of = {s[0]: s[5] for s in suppliers}
    status_of = {s[0]: s[7] for s in suppliers}
    for created, sid, wcode, picked in raised:
        poid = len(purchase_orders) + 1
        age = -created
        expected = created + lead_of[sid] + rng.randint(-1, 4)
        arrival = expected + rng.randint(-2, 8)
        if status_of[sid] == "on_hold" and age < 30:
            status = rng.choice(["sent", "cancelled"]) if age > 4 else "cancelled"
        elif age <= 4:
            status = rng.choice(["draft", "draft", "sent"])
        elif rng.random() < 0.07:
            status = "cancelled"
        elif arrival <= -1:
            status = "received"
        elif age <= 12 and rng.random() < 0.15:
            status = "draft"
        else:
            status = "sent"
        total = 0
        short = False
        for product in picked:
            cost = max(5, round(product[7] * rng.uniform(0.9, 1.1) / 5) * 5)
            if product[7] > 10000:
                quantity = rng.choice([1, 1, 2, 2, 3, 4, 6])
            elif product[4] in BULK_UOMS:
                quantity = rng.choice([10, 12, 20, 24, 30, 40, 48, 60, 80, 100])
            else:
                quantity = rng.choice([5, 6, 10, 12, 15, 20, 25, 30, 50])
            received = None
            if status == "received":
                received = quantity
                if rng.random() < 0.06:
                    received = max(0, quantity - rng.randint(1, max(1, quantity // 3)))
                    short = True
            lines.append([len(lines) + 1, poid, product[0], quantity, cost, received])
            total += quantity * cost
        purchase_orders.append(
            [
                poid,
                f"PO-{base + poid}",
                sid,
                wcode,
                status,
                day(created),
                day(max(expected, created)),
                day(min(arrival, -1)) if status == "received" else None,
                total,
            ]
        )
        if status == "received" and (short or rng.random() < 0.04):
            opened = min(arrival + rng.randint(0, 6), 0)
            reason = "short shipment" if short else rng.choice(CLAIM_REASONS[1:])
            claims.append(
                [
                    0,
                    poid,
                    reason,
                    opened,
                    "open" if opened > -21 else rng.choice(["accepted", "accepted", "rejected"]),
                ]
            )
    claims.sort(key=lambda c: (c[3], c[1]))
    supplier_claims = [[n, c[1], c[2], day(c[3]), c[4]] for n, c in enumerate(claims, start=1)]
    return make_world(
        "warehouse",
        SCHEMA,
        *_split({
            "suppliers": (
                [
                    "id",
                    "name",
                    "country",
                    "city",
                    "contact_email",
                    "lead_time_days",
                    "payment_terms",
                    "status",
                ],
                suppliers,
            ),
            "warehouses": (["code", "name", "city", "country"], [list(w) for w in WAREHOUSES]),
            "products": (
                [
                    "id",
                    "sku",
                    "name",
                    "category",
                    "uom",
                    "reorder_point",
                    "reorder_qty",
                    "standard_cost_cents",
                    "preferred_supplier_id",
                ],
                products,
            ),
            "stock_levels": (
                [
                    "id",
                    "product_id",
                    "warehouse_code",
                    "bin",
                    "zone",
                    "on_hand",
                    "allocated",
                    "last_counted_on",
                ],
                stock,
            ),
            "purchase_orders": (
                [
                    "id",
                    "po_number",
                    "supplier_id",
                    "warehouse_code",
                    "status",
                    "created_on",
                    "expected_on",
                    "received_on",
                    "total_cents",
                ],
                purchase_orders,
            ),
            "po_lines": (
                ["id", "po_id", "product_id", "quantity", "unit_cost_cents", "received_qty"],
                lines,
            ),
            "supplier_claims": (
                ["id", "po_id", "reason", "opened_on", "status"],
                supplier_claims,
            ),
            "cycle_counts": (
                ["id", "stock_level_id", "requested_on", "status", "counted_qty", "counted_on"],
                cycle_counts,
            ),
        }),
        TOOLS,
    )


ID = {"type": "integer", "minimum": 1}
SUPPLIER_COLUMNS = "id, name, country, city, contact_email, lead_time_days, payment_terms, status"
PRODUCT_COLUMNS = (
    "id, sku, name, category, uom, reorder_point, reorder_qty, "
    "printf('%.2f', standard_cost_cents / 100.0) AS standard_cost, preferred_supplier_id"
)
PO_COLUMNS = (
    "o.id, o.po_number, o.supplier_id, o.warehouse_code, w.name AS warehouse, o.status, o.created_on, "
    "o.expected_on, o.received_on, printf('%.2f', o.total_cents / 100.0) AS total"
)
TOOLS = [
    read_tool(
        "find_supplier_by_email",
        "Look a supplier up by its contact email address (case-insensitive).",
        {"email": {"type": "string", "description": "The supplier's contact email address."}},
        f"SELECT {SUPPLIER_COLUMNS} FROM suppliers WHERE lower(contact_email) = lower(trim(:email))",
    ),
    read_tool(
        "search_suppliers",
        "Find suppliers whose name contains the given text (at most 20).",
        {"name": {"type": "string", "minLength": 2}},
        f"SELECT {SUPPLIER_COLUMNS} FROM suppliers WHERE name LIKE '%' || :name || '%' ORDER BY name, id LIMIT 20",
    ),
    read_tool(
        "get_supplier",
        "A supplier's details by id, with its quoted lead time and payment terms.",
        {"supplier_id": ID},
        f"SELECT {SUPPLIER_COLUMNS} FROM suppliers WHERE id = :supplier_id",
    ),
    read_tool(
        "list_purchase_orders",
        "A supplier's purchase orders, newest first, optionally only those with one status.",
        {
            "supplier_id": ID,
            "status": {"type": "string", "enum": ["draft", "sent", "received", "cancelled"]},
        },
        f"SELECT {PO_COLUMNS} FROM purchase_orders o JOIN warehouses w ON w.code = o.warehouse_code "
        "WHERE o.supplier_id = :supplier_id AND (:status IS NULL OR o.status = :status) "
        "ORDER BY o.created_on DESC, o.id DESC LIMIT 50",
        required=["supplier_id"],
    ),
    read_tool(
        "find_purchase_order",
        "Look a purchase order up by its PO number (like PO-41234).",
        {"po_number": {"type": "string", "minLength": 3}},
        f"SELECT {PO_COLUMNS} FROM purchase_orders o JOIN warehouses w ON w.code = o.warehouse_code "
        "WHERE upper(o.po_number) = upper(trim(:po_number))",
    ),
    read_tool(
        "list_po_lines",
        "The lines of a purchase order, with product, quantities and costs.",
        {"po_id": ID},
        "SELECT l.id, l.po_id, l.product_id, p.sku, p.name, p.uom, l.quantity, "
        "printf('%.2f', l.unit_cost_cents / 100.0) AS unit_cost, "
        "printf('%.2f', l.quantity * l.unit_cost_cents / 100.0) AS line_total, l.received_qty "
        "FROM po_lines l JOIN products p ON p.id = l.product_id WHERE l.po_id = :po_id ORDER BY l.id LIMIT 50",
    ),
    read_tool(
        "find_product_by_sku",
        "Look a product up by its SKU (case-insensitive).",
        {"sku": {"type": "string", "minLength": 3}},
        f"SELECT {PRODUCT_COLUMNS} FROM products WHERE upper(sku) = upper(trim(:sku))",
    ),
    read_tool(
        "search_products",
        "Find products whose name contains the given text (at most 20).",
        {"name": {"type": "string", "minLength": 2}},
        f"SELECT {PRODUCT_COLUMNS} FROM products WHERE name LIKE '%' || :name || '%' ORDER BY name, id LIMIT 20",
    ),
    read_tool(
        "get_product",
        "A product's details by id.",
        {"product_id": ID},
        f"SELECT {PRODUCT_COLUMNS} FROM products WHERE id = :product_id",
    ),
    read_tool(
        "list_stock_levels",
        "The bins holding a product in every warehouse, with quantities and open cycle counts.",
        {"product_id": ID},
        "SELECT s.id, s.product_id, s.warehouse_code, w.name AS warehouse, s.bin, s.zone, s.on_hand, "
        "s.allocated, s.on_hand - s.allocated AS available, s.last_counted_on, "
        "(SELECT count(*) FROM cycle_counts c WHERE c.stock_level_id = s.id AND c.status = 'open') AS open_counts "
        "FROM stock_levels s JOIN warehouses w ON w.code = s.warehouse_code "
        "WHERE s.product_id = :product_id ORDER BY s.warehouse_code, s.zone, s.bin LIMIT 50",
    ),
    read_tool(
        "list_supplier_claims",
        "The claims opened with the supplier for a purchase order.",
        {"po_id": ID},
        "SELECT id, po_id, reason, opened_on, status FROM supplier_claims WHERE po_id = :po_id ORDER BY id LIMIT 50",
    ),
    write_tool(
        "cancel_purchase_order",
        "Cancel a draft or sent purchase order.",
        {"po_id": ID},
        ["UPDATE purchase_orders SET status = 'cancelled' WHERE id = :po_id"],
    ),
    write_tool(
        "open_supplier_claim",
        "Open a claim with the supplier for a received purchase order.",
        {"po_id": ID, "reason": {"type": "string", "enum": list(CLAIM_REASONS)}},
        [
            "INSERT INTO supplier_claims(po_id, reason) VALUES (:po_id, :reason)",
            "SELECT id, po_id, reason, opened_on, status FROM supplier_claims "
            "WHERE id = (SELECT max(id) FROM supplier_claims)",
        ],
    ),
    write_tool(
        "change_po_line_quantity",
        "Change the quantity of a line on a draft purchase order (the order total follows).",
        {"line_id": ID, "quantity": {"type": "integer", "minimum": 1, "maximum": 10000}},
        [
            "UPDATE po_lines SET quantity = :quantity WHERE id = :line_id",
            "UPDATE purchase_orders SET total_cents = (SELECT sum(quantity * unit_cost_cents) FROM po_lines "
            "WHERE po_id = purchase_orders.id) WHERE id = (SELECT po_id FROM po_lines WHERE id = :line_id)",
        ],
    ),
    write_tool(
        "remove_po_line",
        "Remove a line from a draft purchase order (the order total follows).",
        {"line_id": ID},
        [
            "UPDATE purchase_orders SET total_cents = total_cents - "
            "(SELECT quantity * unit_cost_cents FROM po_lines WHERE id = :line_id) "
            "WHERE id = (SELECT po_id FROM po_lines WHERE id = :line_id)",
            "DELETE FROM po_lines WHERE id = :line_id",
        ],
    ),
    write_tool(
        "set_reorder_point",
        "Set the stock level at which a product is reordered.",
        {"product_id": ID, "reorder_point": {"type": "integer", "minimum": 0, "maximum": 100000}},
        ["UPDATE products SET reorder_point = :reorder_point WHERE id = :product_id"],
    ),
    write_tool(
        "request_cycle_count",
        "Ask the floor team to count a bin (not for quarantine bins; one open count per bin).",
        {"stock_level_id": ID},
        [
            "INSERT INTO cycle_counts(stock_level_id) VALUES (:stock_level_id)",
            "SELECT id, stock_level_id, requested_on, status FROM cycle_counts "
            "WHERE id = (SELECT max(id) FROM cycle_counts)",
        ],
    ),
    write_tool(
        "set_supplier_status",
        "Put a supplier on hold (no new purchase orders) or make it active again.",
        {"supplier_id": ID, "status": {"type": "string", "enum": ["active", "on_hold"]}},
        ["UPDATE suppliers SET status = :status WHERE id = :supplier_id"],
    ),
]

STATUS = Filter(column="status", words="{value}")
TODAY = day(0)
DRAFT_LINE = "(SELECT o.status FROM {db}purchase_orders o WHERE o.id = po_id) = 'draft'"

CATALOG = Catalog(
    keys={
        "warehouses": "code",
        **{
            t: "id"
            for t in (
                "suppliers",
                "products",
                "stock_levels",
                "purchase_orders",
                "po_lines",
                "supplier_claims",
                "cycle_counts",
            )
        },
    },
    anchors=(
        Anchor(
            table="suppliers",
            tool="find_supplier_by_email",
            param="email",
            column="contact_email",
            phrase="{name} ({contact_email})",
        ),
        Anchor(
            table="suppliers",
            tool="search_suppliers",
            param="name",
            column="name",
            phrase="{name} ({country})",
            disambiguate=("country",),
        ),
        Anchor(
            table="products",
            tool="find_product_by_sku",
            param="sku",
            column="sku",
            phrase="{name} (SKU {sku})",
        ),
        Anchor(
            table="products",
            tool="search_products",
            param="name",
            column="name",
            phrase="{name} (per {uom})",
            disambiguate=("uom",),
        ),
        Anchor(
            table="purchase_orders",
            tool="find_purchase_order",
            param="po_number",
            column="po_number",
            phrase="purchase order {po_number}",
        ),
    ),
    hops=(
        Hop(
            source="suppliers",
            target="purchase_orders",
            fk="supplier_id",
            tool="list_purchase_orders",
            param="supplier_id",
            noun="purchase order",
            plural="purchase orders",
            orders=(
                Order(expr="created_on", highest="most recent", lowest="oldest"),
                Order(expr="total_cents", highest="highest-value", lowest="lowest-value"),
            ),
            filters=(STATUS,),
        ),
        Hop(
            source="purchase_orders",
            target="po_lines",
            fk="po_id",
            tool="list_po_lines",
            param="po_id",
            noun="line",
            plural="lines",
            of="on",
            orders=(
                Order(
                    expr="quantity * unit_cost_cents",
                    highest="highest-total",
                    lowest="lowest-total",
                ),
                Order(expr="quantity", highest="highest-quantity", lowest="lowest-quantity"),
            ),
            filters=(Filter(column="received_qty < quantity", words="short-delivered", value=1),),
        ),
        Hop(
            source="po_lines",
            target="products",
            fk="product_id",
            tool="get_product",
            param="product_id",
            noun="product",
            plural="products",
            down=False,
            of="on",
        ),
        Hop(
            source="products",
            target="stock_levels",
            fk="product_id",
            tool="list_stock_levels",
            param="product_id",
            noun="bin",
            plural="bins",
            of="holding",
            orders=(Order(expr="on_hand", highest="fullest", lowest="emptiest"),),
            filters=(
                Filter(column="zone", words="{value}"),
                Filter(column="warehouse_code", words="at warehouse {value}", after=True),
            ),
        ),
        Hop(
            source="purchase_orders",
            target="suppliers",
            fk="supplier_id",
            tool="get_supplier",
            param="supplier_id",
            noun="supplier",
            plural="suppliers",
            down=False,
        ),
        Hop(
            source="products",
            target="suppliers",
            fk="preferred_supplier_id",
            tool="get_supplier",
            param="supplier_id",
            noun="preferred supplier",
            plural="preferred suppliers",
            down=False,
        ),
        Hop(
            source="purchase_orders",
            target="supplier_claims",
            fk="po_id",
            tool="list_supplier_claims",
            param="po_id",
            noun="supplier claim",
            plural="supplier claims",
            of="on",
            orders=(Order(expr="opened_on", highest="latest", lowest="earliest"),),
            filters=(STATUS,),
        ),
    ),
    attributes=(
        Attribute(table="suppliers", expr="contact_email", phrase="the contact email"),
        Attribute(table="suppliers", expr="country", phrase="the country"),
        Attribute(
            table="suppliers",
            expr="lead_time_days",
            phrase="the quoted lead time in days",
            hint="as a number",
        ),
        Attribute(table="suppliers", expr="payment_terms", phrase="the payment term"),
        Attribute(table="purchase_orders", expr="po_number", phrase="the PO number"),
        Attribute(table="purchase_orders", expr="status", phrase="the status"),
        Attribute(
            table="purchase_orders",
            expr="expected_on",
            phrase="the expected delivery date",
            hint="as YYYY-MM-DD",
        ),
        Attribute(
            table="purchase_orders",
            expr="created_on",
            phrase="the order date",
            hint="as YYYY-MM-DD",
        ),
        Attribute(
            table="purchase_orders",
            expr="printf('%.2f', total_cents / 100.0)",
            phrase="the order total",
            hint="as shown, like 1234.50",
        ),
        Attribute(
            table="purchase_orders",
            expr="warehouse_code",
            phrase="the receiving warehouse",
            hint="as its warehouse code",
        ),
        Attribute(
            table="po_lines", expr="quantity", phrase="the quantity ordered", hint="as a number"
        ),
        Attribute(
            table="po_lines",
            expr="received_qty",
            phrase="the received quantity",
            hint="as a number",
        ),
        Attribute(
            table="po_lines",
            expr="printf('%.2f', unit_cost_cents / 100.0)",
            phrase="the unit cost",
            hint="as shown, like 12.50",
        ),
        Attribute(
            table="po_lines",
            expr="printf('%.2f', quantity * unit_cost_cents / 100.0)",
            phrase="the line total",
            hint="as shown, like 1234.50",
        ),
        Attribute(table="products", expr="sku", phrase="the SKU"),
        Attribute(
            table="products", expr="reorder_point", phrase="the reorder point", hint="as a number"
        ),
        Attribute(
            table="products",
            expr="reorder_qty",
            phrase="the standard reorder quantity",
            hint="as a number",
        ),
        Attribute(table="products", expr="category", phrase="the category"),
        Attribute(table="stock_levels", expr="bin", phrase="the bin code"),
        Attribute(
            table="stock_levels", expr="on_hand", phrase="the quantity on hand", hint="as a number"
        ),
        Attribute(
            table="stock_levels",
            expr="on_hand - allocated",
            phrase="the available quantity (on hand minus allocated)",
            hint="as a number",
        ),
        Attribute(
            table="stock_levels",
            expr="last_counted_on",
            phrase="the date it was last counted",
            hint="as YYYY-MM-DD",
        ),
        Attribute(table="supplier_claims", expr="status", phrase="the status"),
        Attribute(table="supplier_claims", expr="reason", phrase="the stated reason"),
    ),
    actions=(
        Action(
            name="cancel",
            table="purchase_orders",
            tool="cancel_purchase_order",
            args={"po_id": "key"},
            when="status IN ('draft', 'sent')",
            ask="cancel {target}",
            check="SELECT status = 'cancelled' FROM purchase_orders WHERE id = {target}",
            frame={"purchase_orders": {"where": "id = {key}", "columns": ["status"]}},
            instead="cancel {target} instead",
            blocked="if it has already been received",
        ),
        Action(
            name="open_claim",
            table="purchase_orders",
            tool="open_supplier_claim",
            args={"po_id": "key", "reason": "choice:reason"},
            when="status = 'received'",
            ask="open a supplier claim for {target} with the reason '{reason}'",
            check="SELECT count(*) = 1 FROM supplier_claims WHERE po_id = {target} AND reason = {reason} "
            "AND status = 'open' AND id NOT IN (SELECT id FROM {db}supplier_claims)",
            frame={
                "supplier_claims": f"id > {{last[supplier_claims]}} AND po_id = {{key}} AND reason = {{reason}} AND status = 'open' "
                f"AND opened_on = '{TODAY}'"
            },
            choices={"reason": CLAIM_REASONS},
            instead="open a supplier claim for {target} with the reason '{reason}' instead",
            blocked="if it has not been received yet",
        ),
        Action(
            name="change_quantity",
            table="po_lines",
            tool="change_po_line_quantity",
            args={"line_id": "key", "quantity": "choice:quantity"},
            when=f"quantity <> {{quantity}} AND {DRAFT_LINE}",
            ask="change the quantity of {target} to {quantity}",
            check="SELECT l.quantity = {quantity} AND o.total_cents = (SELECT sum(quantity * unit_cost_cents) "
            "FROM po_lines WHERE po_id = o.id) FROM po_lines l JOIN purchase_orders o ON o.id = l.po_id "
            "WHERE l.id = {target}",
            frame={
                "po_lines": {"where": "id = {key}", "columns": ["quantity"]},
                "purchase_orders": {"where": "id = {row[po_id]}", "columns": ["total_cents"]},
            },
            choices={"quantity": (10, 20, 25, 40, 50, 80, 120)},
        ),
        Action(
            name="remove_line",
            table="po_lines",
            tool="remove_po_line",
            args={"line_id": "key"},
            when=f"{DRAFT_LINE} AND (SELECT count(*) FROM {{db}}po_lines s WHERE s.po_id = po_lines.po_id) > 1",
            ask="remove {target}",
            check="SELECT NOT EXISTS (SELECT 1 FROM po_lines WHERE id = {target}) AND "
            "(SELECT total_cents FROM purchase_orders WHERE id = {row[po_id]}) = "
            "(SELECT sum(quantity * unit_cost_cents) FROM po_lines WHERE po_id = {row[po_id]})",
            frame={
                "po_lines": "id = {key}",
                "purchase_orders": {"where": "id = {row[po_id]}", "columns": ["total_cents"]},
            },
            bulk=False,
        ),
        Action(
            name="set_reorder_point",
            table="products",
            tool="set_reorder_point",
            args={"product_id": "key", "reorder_point": "choice:reorder_point"},
            when="reorder_point <> {reorder_point}",
            ask="set the reorder point of {target} to {reorder_point}",
            check="SELECT reorder_point = {reorder_point} FROM products WHERE id = {target}",
            frame={"products": {"where": "id = {key}", "columns": ["reorder_point"]}},
            choices={"reorder_point": (80, 100, 120, 150, 200, 250)},
        ),
        Action(
            name="request_count",
            table="stock_levels",
            tool="request_cycle_count",
            args={"stock_level_id": "key"},
            when="zone <> 'quarantine' AND NOT EXISTS (SELECT 1 FROM {db}cycle_counts c "
            "WHERE c.stock_level_id = stock_levels.id AND c.status = 'open')",
            ask="request a cycle count of {target}",
            check="SELECT count(*) = 1 FROM cycle_counts WHERE stock_level_id = {target} AND status = 'open' "
            "AND id NOT IN (SELECT id FROM {db}cycle_counts)",
            frame={
                "cycle_counts": f"id > {{last[cycle_counts]}} AND stock_level_id = {{key}} AND status = 'open' AND requested_on = '{TODAY}'"
            },
        ),
        Action(
            name="hold_supplier",
            table="suppliers",
            tool="set_supplier_status",
            args={"supplier_id": "key", "status": "choice:status"},
            when="status = 'active'",
            ask="put {target} on hold",
            check="SELECT status = 'on_hold' FROM suppliers WHERE id = {target}",
            frame={"suppliers": {"where": "id = {key}", "columns": ["status"]}},
            choices={"status": ("on_hold",)},
        ),
    ),
)

DOMAIN = Domain(
    name="warehouse",
    description="inventory and purchasing: suppliers, purchase orders and lines, products, bin stock, cycle counts",
    build_world=build_world,
    catalog=CATALOG,
    knobs=DEFAULT_KNOBS,
)


def _split(tables):  # temporary, during the restructuring
    return {k: v[0] for k, v in tables.items()}, {k: v[1] for k, v in tables.items()}
