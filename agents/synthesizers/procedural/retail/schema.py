"""The retail schema: its tables, the value sets its checks, tools and catalog share, and each table's columns."""

from __future__ import annotations

from typing import Final

ISSUE_KINDS = ("defect", "missing part", "safety", "listing error")
RETURN_REASONS = (
    "damaged in transit",
    "wrong size",
    "changed mind",
    "arrived late",
    "not as described",
)

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


COLUMNS: Final = {
    "customers": ("id", "name", "email", "city", "tier", "joined_on"),
    "suppliers": ("id", "name", "country", "contact_email"),
    "products": ("id", "sku", "name", "category", "price_cents", "supplier_id"),
    "orders": ("id", "customer_id", "placed_on", "status", "total_cents", "ship_city"),
    "order_items": ("id", "order_id", "product_id", "quantity", "unit_price_cents"),
    "shipments": ("id", "order_id", "carrier", "tracking_number", "shipped_on", "delivered_on"),
    "returns": ("id", "order_id", "reason", "opened_on", "status"),
    "product_issues": ("id", "product_id", "kind", "reported_on", "status"),
}
"""Each table's columns, in the order a world's rows hold them (and the world lists its tables)."""
