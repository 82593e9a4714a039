"""The retail catalog: how the planner names customers, walks from them to orders and on, asks and acts."""

from __future__ import annotations

from coevo.agents.synthesizers.catalog import Action, Anchor, Attribute, Catalog, Filter, Hop, Order
from coevo.agents.synthesizers.procedural.retail.schema import ISSUE_KINDS, RETURN_REASONS

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
