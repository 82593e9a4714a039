"""The retail tools: look customers, orders, products and shipments up; cancel, return, change, report."""

from __future__ import annotations

from coevo.agents.synthesizers.procedural.base import read_tool, write_tool
from coevo.agents.synthesizers.procedural.retail.schema import ISSUE_KINDS

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
