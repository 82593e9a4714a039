"""Retail: customers, orders and their items, products and suppliers, shipments and returns.

This module is the template the other domains copy: ``SCHEMA``; the knobs
that shape a world (:class:`RetailKnobs`, a frozen dataclass with a docstring
per field and the domain's numbers as defaults, and ``DEFAULT_KNOBS``); a seeded
``build_world(seed, knobs=DEFAULT_KNOBS)`` that reads how many rows to make,
the share of same-name twins and the list lengths from the knobs; ``TOOLS``
and ``CATALOG``; and ``DOMAIN`` at the end, which records the knobs.

The hidden state an agent has to uncover: which of two customers with the
same name is meant, which order is "the most recent pending one", whether an
order has shipped (cancel, or open a return instead), what an order contains.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from coevo.agents.synthesizers.catalog import Action, Anchor, Attribute, Catalog, Filter, Hop, Order
from coevo.agents.synthesizers.procedural.base import (
    Domain,
    People,
    day,
    make_world,
    read_tool,
    write_tool,
)
from coevo.agents.synthesizers.procedural.names import (
    CITIES,
    COMPANY_SUFFIXES,
    COMPANY_WORDS,
    COUNTRIES,
)
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import WorldSpec

SCHEMA = [
    "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL UNIQUE, "
    "city TEXT NOT NULL, tier TEXT NOT NULL DEFAULT 'standard' CHECK (tier IN ('standard', 'silver', 'gold')), "
    "joined_on TEXT NOT NULL)",
    "CREATE TABLE suppliers(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, country TEXT NOT NULL, "
    "contact_email TEXT NOT NULL)",
    "CREATE TABLE products(id INTEGER PRIMARY KEY, sku TEXT NOT NULL UNIQUE, name TEXT NOT NULL, "
    "category TEXT NOT NULL, price_cents INTEGER NOT NULL CHECK (price_cents > 0), "
    "supplier_id INTEGER NOT NULL REFERENCES suppliers(id))",
    "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), "
    "placed_on TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('pending', 'shipped', 'delivered', 'cancelled')), "
    "total_cents INTEGER NOT NULL, ship_city TEXT NOT NULL)",
    "CREATE TABLE order_items(id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id), "
    "product_id INTEGER NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL CHECK (quantity > 0), "
    "unit_price_cents INTEGER NOT NULL)",
    "CREATE TABLE shipments(id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL UNIQUE REFERENCES orders(id), "
    "carrier TEXT NOT NULL, tracking_number TEXT NOT NULL UNIQUE, shipped_on TEXT NOT NULL, delivered_on TEXT)",
    "CREATE TABLE returns(id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id), "
    "reason TEXT NOT NULL, opened_on TEXT NOT NULL DEFAULT (date('now')), "
    "status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'received', 'refunded')))",
    "CREATE TABLE product_issues(id INTEGER PRIMARY KEY, product_id INTEGER NOT NULL REFERENCES products(id), "
    "kind TEXT NOT NULL CHECK (kind IN ('defect', 'missing part', 'safety', 'listing error')), "
    "reported_on TEXT NOT NULL DEFAULT (date('now')), status TEXT NOT NULL DEFAULT 'new')",
    "CREATE INDEX orders_by_customer ON orders(customer_id, placed_on)",
    "CREATE INDEX items_by_order ON order_items(order_id)",
    "CREATE INDEX returns_by_order ON returns(order_id)",
    "CREATE TRIGGER no_cancel_after_shipping BEFORE UPDATE OF status ON orders "
    "WHEN new.status = 'cancelled' AND old.status <> 'pending' "
    "BEGIN SELECT RAISE(ABORT, 'only a pending order can be cancelled; open a return for a shipped one'); END",
    "CREATE TRIGGER returns_only_after_shipping BEFORE INSERT ON returns "
    "WHEN (SELECT status FROM orders WHERE id = new.order_id) NOT IN ('shipped', 'delivered') "
    "BEGIN SELECT RAISE(ABORT, 'only shipped or delivered orders can be returned'); END",
    "CREATE TRIGGER items_fixed_after_shipping BEFORE UPDATE ON order_items "
    "WHEN (SELECT status FROM orders WHERE id = old.order_id) <> 'pending' "
    "BEGIN SELECT RAISE(ABORT, 'items can only be changed while the order is pending'); END",
    "CREATE TRIGGER items_kept_after_shipping BEFORE DELETE ON order_items "
    "WHEN (SELECT status FROM orders WHERE id = old.order_id) <> 'pending' "
    "BEGIN SELECT RAISE(ABORT, 'items can only be removed while the order is pending'); END",
]

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
ISSUE_KINDS = ("defect", "missing part", "safety", "listing error")
RETURN_REASONS = (
    "damaged in transit",
    "wrong size",
    "changed mind",
    "arrived late",
    "not as described",
)


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
    people = People(rng, twin_share=knobs.twin_share)
    customers: list[list[Any]] = []
    for cid in range(1, knobs.customers + 1):
        name = people.name()
        customers.append(
            [
                cid,
                name,
                people.email(name),
                rng.choice(CITIES),
                rng.choices(["standard", "silver", "gold"], [6, 3, 1])[0],
                day(-rng.randint(60, 2000)),
            ]
        )
    suppliers: list[list[Any]] = []
    for sid in range(1, knobs.suppliers + 1):
        company = (
            f"{COMPANY_WORDS[(seed + sid * 5) % len(COMPANY_WORDS)]} {rng.choice(COMPANY_SUFFIXES)}"
        )
        while any(s[1] == company for s in suppliers):
            company = f"{rng.choice(COMPANY_WORDS)} {rng.choice(COMPANY_SUFFIXES)}"
        slug = company.lower().replace(" ", "")
        suppliers.append([sid, company, rng.choice(COUNTRIES), f"orders@{slug}.com"])
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
                    rng.randint(1, len(suppliers)),
                ]
            )
    issues = [
        [
            n + 1,
            rng.randint(1, len(products)),
            rng.choice(ISSUE_KINDS),
            day(-rng.randint(1, 300)),
            rng.choice(["new", "investigating", "closed"]),
        ]
        for n in range(knobs.product_issues)
    ]
    orders: list[list[Any]] = []
    items: list[list[Any]] = []
    shipments: list[list[Any]] = []
    returns: list[list[Any]] = []
    for customer in customers:
        for _ in range(rng.choice(knobs.orders_per_customer)):
            oid = len(orders) + 1
            age = rng.randint(0, 200)
            status = (
                "pending"
                if age < 8
                else rng.choice(["pending", "shipped", "shipped"])
                if age < 14
                else rng.choice(["delivered"] * 5 + ["cancelled"])
            )
            total = 0
            for product in rng.sample(products, rng.choice(knobs.items_per_order)):
                quantity = rng.choice([1, 1, 1, 2, 3])
                items.append([len(items) + 1, oid, product[0], quantity, product[4]])
                total += quantity * product[4]
            ship_city = customer[3] if rng.random() < 0.85 else rng.choice(CITIES)
            orders.append([oid, customer[0], day(-age), status, total, ship_city])
            if status in ("shipped", "delivered"):
                shipped = -age + rng.randint(1, 3)
                tracking = f"{rng.choice(CARRIERS)[:2].upper()}{rng.randrange(10**9, 10**10)}"
                delivered = (
                    day(min(shipped + rng.randint(2, 6), 0)) if status == "delivered" else None
                )
                shipments.append(
                    [
                        len(shipments) + 1,
                        oid,
                        rng.choice(CARRIERS),
                        tracking,
                        day(min(shipped, 0)),
                        delivered,
                    ]
                )
                if status == "delivered" and rng.random() < knobs.return_share:
                    returns.append(
                        [
                            len(returns) + 1,
                            oid,
                            rng.choice(RETURN_REASONS),
                            day(min(-age + 10, 0)),
                            rng.choice(["open", "received", "refunded"]),
                        ]
                    )
    return make_world(
        "retail",
        SCHEMA,
        {
            "customers": (["id", "name", "email", "city", "tier", "joined_on"], customers),
            "suppliers": (["id", "name", "country", "contact_email"], suppliers),
            "products": (["id", "sku", "name", "category", "price_cents", "supplier_id"], products),
            "orders": (
                ["id", "customer_id", "placed_on", "status", "total_cents", "ship_city"],
                orders,
            ),
            "order_items": (
                ["id", "order_id", "product_id", "quantity", "unit_price_cents"],
                items,
            ),
            "shipments": (
                ["id", "order_id", "carrier", "tracking_number", "shipped_on", "delivered_on"],
                shipments,
            ),
            "returns": (["id", "order_id", "reason", "opened_on", "status"], returns),
            "product_issues": (["id", "product_id", "kind", "reported_on", "status"], issues),
        },
        TOOLS,
    )


ID = {"type": "integer", "minimum": 1}
TOOLS = [
    read_tool(
        "find_customer_by_email",
        "Look a customer up by email address (case-insensitive).",
        {"email": {"type": "string", "description": "The customer's email address."}},
        "SELECT id, name, email, city, tier FROM customers WHERE lower(email) = lower(trim(:email))",
    ),
    read_tool(
        "search_customers",
        "Find customers whose name contains the given text (at most 20).",
        {"name": {"type": "string", "minLength": 2}},
        "SELECT id, name, email, city, tier FROM customers WHERE name LIKE '%' || :name || '%' ORDER BY id LIMIT 20",
    ),
    read_tool(
        "get_customer",
        "A customer's details by id.",
        {"customer_id": ID},
        "SELECT id, name, email, city, tier, joined_on FROM customers WHERE id = :customer_id",
    ),
    read_tool(
        "list_orders",
        "A customer's orders, newest first, optionally only those with one status.",
        {
            "customer_id": ID,
            "status": {"type": "string", "enum": ["pending", "shipped", "delivered", "cancelled"]},
        },
        "SELECT id, placed_on, status, printf('%.2f', total_cents / 100.0) AS total, ship_city FROM orders "
        "WHERE customer_id = :customer_id AND (:status IS NULL OR status = :status) ORDER BY placed_on DESC, id DESC LIMIT 50",
        required=["customer_id"],
    ),
    read_tool(
        "get_order",
        "An order's details by id.",
        {"order_id": ID},
        "SELECT id, customer_id, placed_on, status, printf('%.2f', total_cents / 100.0) AS total, ship_city "
        "FROM orders WHERE id = :order_id",
    ),
    read_tool(
        "list_order_items",
        "The line items of an order, with product and prices.",
        {"order_id": ID},
        "SELECT i.id, i.product_id, p.sku, p.name, i.quantity, printf('%.2f', i.unit_price_cents / 100.0) AS unit_price, "
        "printf('%.2f', i.quantity * i.unit_price_cents / 100.0) AS line_total FROM order_items i "
        "JOIN products p ON p.id = i.product_id WHERE i.order_id = :order_id ORDER BY i.id",
    ),
    read_tool(
        "get_product",
        "A product's details by id.",
        {"product_id": ID},
        "SELECT id, sku, name, category, printf('%.2f', price_cents / 100.0) AS price, supplier_id FROM products WHERE id = :product_id",
    ),
    read_tool(
        "search_products",
        "Find products whose name contains the given text.",
        {"name": {"type": "string", "minLength": 2}},
        "SELECT id, sku, name, category, printf('%.2f', price_cents / 100.0) AS price FROM products "
        "WHERE name LIKE '%' || :name || '%' ORDER BY id LIMIT 20",
    ),
    read_tool(
        "get_supplier",
        "A supplier's details by id.",
        {"supplier_id": ID},
        "SELECT id, name, country, contact_email FROM suppliers WHERE id = :supplier_id",
    ),
    read_tool(
        "get_shipment",
        "The shipment of an order, if it has shipped.",
        {"order_id": ID},
        "SELECT id, order_id, carrier, tracking_number, shipped_on, delivered_on FROM shipments WHERE order_id = :order_id",
    ),
    read_tool(
        "list_returns",
        "The returns opened for an order.",
        {"order_id": ID},
        "SELECT id, order_id, reason, opened_on, status FROM returns WHERE order_id = :order_id ORDER BY id",
    ),
    write_tool(
        "cancel_order",
        "Cancel an order that has not shipped yet.",
        {"order_id": ID},
        ["UPDATE orders SET status = 'cancelled' WHERE id = :order_id"],
    ),
    write_tool(
        "open_return",
        "Open a return for a shipped or delivered order.",
        {"order_id": ID, "reason": {"type": "string", "minLength": 3, "maxLength": 200}},
        [
            "INSERT INTO returns(order_id, reason) VALUES (:order_id, :reason)",
            "SELECT id, order_id, reason, opened_on, status FROM returns WHERE id = (SELECT max(id) FROM returns)",
        ],
    ),
    write_tool(
        "mark_return_received",
        "Record that the goods of an open return have arrived back.",
        {"return_id": ID},
        ["UPDATE returns SET status = 'received' WHERE id = :return_id AND status = 'open'"],
    ),
    write_tool(
        "change_item_quantity",
        "Change the quantity of a line item of a pending order (the order total follows).",
        {"item_id": ID, "quantity": {"type": "integer", "minimum": 1, "maximum": 20}},
        [
            "UPDATE order_items SET quantity = :quantity WHERE id = :item_id",
            "UPDATE orders SET total_cents = (SELECT sum(quantity * unit_price_cents) FROM order_items WHERE order_id = orders.id) "
            "WHERE id = (SELECT order_id FROM order_items WHERE id = :item_id)",
        ],
    ),
    write_tool(
        "remove_order_item",
        "Remove a line item from a pending order (the order total follows).",
        {"item_id": ID},
        [
            "UPDATE orders SET total_cents = total_cents - (SELECT quantity * unit_price_cents FROM order_items WHERE id = :item_id) "
            "WHERE id = (SELECT order_id FROM order_items WHERE id = :item_id)",
            "DELETE FROM order_items WHERE id = :item_id",
        ],
    ),
    write_tool(
        "report_product_issue",
        "Report a quality issue with a product to the quality team.",
        {"product_id": ID, "kind": {"type": "string", "enum": list(ISSUE_KINDS)}},
        [
            "INSERT INTO product_issues(product_id, kind) VALUES (:product_id, :kind)",
            "SELECT id, product_id, kind, reported_on, status FROM product_issues WHERE id = (SELECT max(id) FROM product_issues)",
        ],
    ),
    write_tool(
        "set_customer_tier",
        "Move a customer to another loyalty tier.",
        {"customer_id": ID, "tier": {"type": "string", "enum": ["standard", "silver", "gold"]}},
        ["UPDATE customers SET tier = :tier WHERE id = :customer_id"],
    ),
]

STATUS = Filter(column="status", words="{value}")
PENDING_ORDER = "status = 'pending'"

CATALOG = Catalog(
    keys={
        t: "id"
        for t in (
            "customers",
            "suppliers",
            "products",
            "orders",
            "order_items",
            "shipments",
            "returns",
            "product_issues",
        )
    },
    anchors=(
        Anchor(
            table="customers",
            tool="find_customer_by_email",
            param="email",
            column="email",
            phrase="{name} ({email})",
        ),
        Anchor(
            table="customers",
            tool="search_customers",
            param="name",
            column="name",
            phrase="{name} from {city}",
            disambiguate=("city",),
        ),
    ),
    hops=(
        Hop(
            source="customers",
            target="orders",
            fk="customer_id",
            tool="list_orders",
            param="customer_id",
            noun="order",
            plural="orders",
            orders=(
                Order(expr="placed_on", highest="most recent", lowest="oldest"),
                Order(expr="total_cents", highest="most expensive", lowest="cheapest"),
            ),
            filters=(STATUS,),
        ),
        Hop(
            source="orders",
            target="order_items",
            fk="order_id",
            tool="list_order_items",
            param="order_id",
            noun="line item",
            plural="line items",
            of="in",
            orders=(
                Order(
                    expr="quantity * unit_price_cents",
                    highest="highest-total",
                    lowest="lowest-total",
                ),
            ),
        ),
        Hop(
            source="order_items",
            target="products",
            fk="product_id",
            tool="get_product",
            param="product_id",
            noun="product",
            plural="products",
            down=False,
        ),
        Hop(
            source="products",
            target="suppliers",
            fk="supplier_id",
            tool="get_supplier",
            param="supplier_id",
            noun="supplier",
            plural="suppliers",
            down=False,
        ),
        Hop(
            source="orders",
            target="shipments",
            fk="order_id",
            tool="get_shipment",
            param="order_id",
            noun="shipment",
            plural="shipments",
        ),
        Hop(
            source="orders",
            target="returns",
            fk="order_id",
            tool="list_returns",
            param="order_id",
            noun="return",
            plural="returns",
            orders=(Order(expr="opened_on", highest="latest", lowest="earliest"),),
            filters=(STATUS,),
        ),
    ),
    attributes=(
        Attribute(table="customers", expr="tier", phrase="the loyalty tier"),
        Attribute(
            table="orders",
            expr="printf('%.2f', total_cents / 100.0)",
            phrase="the total",
            hint="as shown, like 123.45",
        ),
        Attribute(table="orders", expr="placed_on", phrase="the order date", hint="as YYYY-MM-DD"),
        Attribute(table="orders", expr="status", phrase="the status"),
        Attribute(table="orders", expr="ship_city", phrase="the delivery city"),
        Attribute(
            table="order_items", expr="quantity", phrase="the quantity ordered", hint="as a number"
        ),
        Attribute(
            table="order_items",
            expr="printf('%.2f', quantity * unit_price_cents / 100.0)",
            phrase="the line total",
            hint="as shown, like 123.45",
        ),
        Attribute(table="products", expr="sku", phrase="the SKU"),
        Attribute(table="products", expr="category", phrase="the category"),
        Attribute(table="suppliers", expr="name", phrase="the name"),
        Attribute(table="suppliers", expr="contact_email", phrase="the contact email"),
        Attribute(table="suppliers", expr="country", phrase="the country"),
        Attribute(table="shipments", expr="tracking_number", phrase="the tracking number"),
        Attribute(table="shipments", expr="carrier", phrase="the carrier"),
        Attribute(table="returns", expr="status", phrase="the status"),
        Attribute(table="returns", expr="reason", phrase="the stated reason"),
    ),
    actions=(
        Action(
            name="cancel",
            table="orders",
            tool="cancel_order",
            args={"order_id": "key"},
            when=PENDING_ORDER,
            ask="cancel {target}",
            check="SELECT status = 'cancelled' FROM orders WHERE id = {target}",
            frame={"orders": {"where": "id = {key}", "columns": ["status"]}},
            instead="cancel {target} instead",
            blocked="if it has already shipped",
        ),
        Action(
            name="open_return",
            table="orders",
            tool="open_return",
            args={"order_id": "key", "reason": "choice:reason"},
            when="status IN ('shipped', 'delivered')",
            ask="open a return for {target} with the reason '{reason}'",
            check="SELECT count(*) = 1 FROM returns WHERE order_id = {target} AND lower(trim(reason)) = lower({reason}) "
            "AND status = 'open' AND id NOT IN (SELECT id FROM {db}returns)",
            frame={
                "returns": "id > {last[returns]} AND order_id = {key} AND lower(trim(reason)) = lower({reason})"
            },
            choices={"reason": RETURN_REASONS},
            instead="open a return for {target} with the reason '{reason}' instead",
            blocked="if it has not shipped yet",
        ),
        Action(
            name="receive_return",
            table="returns",
            tool="mark_return_received",
            args={"return_id": "key"},
            when="status = 'open'",
            ask="record that the goods of {target} have arrived back",
            check="SELECT status = 'received' FROM returns WHERE id = {target}",
            frame={"returns": {"where": "id = {key}", "columns": ["status"]}},
        ),
        Action(
            name="change_quantity",
            table="order_items",
            tool="change_item_quantity",
            args={"item_id": "key", "quantity": "choice:quantity"},
            when="quantity <> {quantity} AND (SELECT o.status FROM {db}orders o WHERE o.id = order_id) = 'pending'",
            ask="change the quantity of {target} to {quantity}",
            check="SELECT i.quantity = {quantity} AND o.total_cents = (SELECT sum(quantity * unit_price_cents) "
            "FROM order_items WHERE order_id = o.id) FROM order_items i JOIN orders o ON o.id = i.order_id "
            "WHERE i.id = {target}",
            frame={
                "order_items": {"where": "id = {key}", "columns": ["quantity"]},
                "orders": {"where": "id = {row[order_id]}", "columns": ["total_cents"]},
            },
            choices={"quantity": (1, 2, 3, 4, 5)},
        ),
        Action(
            name="remove_item",
            table="order_items",
            tool="remove_order_item",
            args={"item_id": "key"},
            when="(SELECT o.status FROM {db}orders o WHERE o.id = order_id) = 'pending' "
            "AND (SELECT count(*) FROM {db}order_items s WHERE s.order_id = order_items.order_id) > 1",
            ask="remove {target}",
            check="SELECT NOT EXISTS (SELECT 1 FROM order_items WHERE id = {target}) AND "
            "(SELECT total_cents FROM orders WHERE id = {row[order_id]}) = "
            "(SELECT sum(quantity * unit_price_cents) FROM order_items WHERE order_id = {row[order_id]})",
            frame={
                "order_items": "id = {key}",
                "orders": {"where": "id = {row[order_id]}", "columns": ["total_cents"]},
            },
            bulk=False,
        ),
        Action(
            name="report_issue",
            table="products",
            tool="report_product_issue",
            args={"product_id": "key", "kind": "choice:kind"},
            when="NOT EXISTS (SELECT 1 FROM {db}product_issues x WHERE x.product_id = products.id AND x.status <> 'closed')",
            ask="report a {kind} issue with {target} to the quality team",
            check="SELECT count(*) = 1 FROM product_issues WHERE product_id = {target} AND kind = {kind} "
            "AND status = 'new' AND id NOT IN (SELECT id FROM {db}product_issues)",
            frame={
                "product_issues": "id > {last[product_issues]} AND product_id = {key} AND kind = {kind}"
            },
            choices={"kind": ISSUE_KINDS},
        ),
        Action(
            name="set_tier",
            table="customers",
            tool="set_customer_tier",
            args={"customer_id": "key", "tier": "choice:tier"},
            when="tier <> {tier}",
            ask="move {target} to the {tier} loyalty tier",
            check="SELECT tier = {tier} FROM customers WHERE id = {target}",
            frame={"customers": {"where": "id = {key}", "columns": ["tier"]}},
            choices={"tier": ("silver", "gold")},
        ),
    ),
)

DOMAIN = Domain(
    name="retail",
    description="online shop: customers, orders and items, products, suppliers, shipments, returns",
    build_world=build_world,
    catalog=CATALOG,
    knobs=DEFAULT_KNOBS,
)
