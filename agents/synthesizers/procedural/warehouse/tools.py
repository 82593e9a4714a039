"""The warehouse tools: look suppliers, products, stock and purchase orders up; raise, change, cancel, claim, count."""

from __future__ import annotations

from coevo.agents.synthesizers.procedural.base import read_tool, write_tool
from coevo.agents.synthesizers.procedural.warehouse.schema import CLAIM_REASONS

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
