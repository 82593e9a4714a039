"""The warehouse schema: its tables, the value sets its checks, tools and catalog share, and each table's columns."""

from __future__ import annotations

from typing import Final

CLAIM_REASONS = (
    "short shipment",
    "damaged goods",
    "wrong item",
    "late delivery",
    "price discrepancy",
)
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

COLUMNS: Final = {
    "suppliers": (
        "id",
        "name",
        "country",
        "city",
        "contact_email",
        "lead_time_days",
        "payment_terms",
        "status",
    ),
    "warehouses": ("code", "name", "city", "country"),
    "products": (
        "id",
        "sku",
        "name",
        "category",
        "uom",
        "reorder_point",
        "reorder_qty",
        "standard_cost_cents",
        "preferred_supplier_id",
    ),
    "stock_levels": (
        "id",
        "product_id",
        "warehouse_code",
        "bin",
        "zone",
        "on_hand",
        "allocated",
        "last_counted_on",
    ),
    "purchase_orders": (
        "id",
        "po_number",
        "supplier_id",
        "warehouse_code",
        "status",
        "created_on",
        "expected_on",
        "received_on",
        "total_cents",
    ),
    "po_lines": ("id", "po_id", "product_id", "quantity", "unit_cost_cents", "received_qty"),
    "supplier_claims": ("id", "po_id", "reason", "opened_on", "status"),
    "cycle_counts": ("id", "stock_level_id", "requested_on", "status", "counted_qty", "counted_on"),
}
"""Each table's columns, in the order a world's rows hold them (and the world lists its tables)."""
