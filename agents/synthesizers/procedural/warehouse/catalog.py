"""The warehouse catalog: how the planner names suppliers and products, walks to orders, lines and bins, asks and acts."""

from __future__ import annotations

from coevo.agents.synthesizers.catalog import Action, Anchor, Attribute, Catalog, Filter, Hop, Order
from coevo.agents.synthesizers.procedural.base import TODAY
from coevo.agents.synthesizers.procedural.warehouse.schema import CLAIM_REASONS

STATUS = Filter(column="status", words="{value}")
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
