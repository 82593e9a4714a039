"""The sample shop database: the code that writes ``shop.sqlite``, the database ``coevo mine`` is shown on.

The file is made here, from a seeded generator, so it is ours to
redistribute and can be rebuilt exactly (a test rebuilds it and compares its
content with the shipped file). It has what real databases have:
mixed-case identifiers with spaces (``"Order Details"``, ``"First Name"``),
JSON text with braces, a composite primary key, a table without keys, a
view, two triggers (one writing an audit log with ``datetime('now')``, which
the miner drops with a note), BLOBs, NULLs, dates as text, a declared foreign
key and an undeclared one (``"Order"."CustomerId"``), and foreign-key
violations in the data (orders of a customer that does not exist).

``python -m coevo.arena.examples.shop [PATH]`` writes it (default: the
shipped file, next to this module). The test suite builds the same database
with 120,000 page views to exercise the miner's sampling.
"""

from __future__ import annotations

import random
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from coevo.arena.examples import SHOP

__all__ = ["CITIES", "FIRST_NAMES", "LAST_NAMES", "SAMPLE_PAGE_VIEWS", "build_shop", "main"]

SAMPLE_PAGE_VIEWS: Final = 400
"""Rows of ``page_views`` in the shipped file: more than the miner keeps of a table (120), so it samples."""

FIRST_NAMES = [
    "Ana",
    "Ben",
    "Chloe",
    "Dev",
    "Eva",
    "Farid",
    "Gita",
    "Hugo",
    "Ines",
    "Jon",
    "Kemi",
    "Luis",
]
LAST_NAMES = ["Silva", "Okoro", "Berg", "Nakamura", "Haddad", "Kowalski", "Reyes", "Moreau", "Osei"]
CITIES = ["Lisbon", "Oslo", "Lagos", "Kyoto", "Quito", "Perth"]
"""The people and places the sample data is drawn from (the miner's test databases use them too)."""
_PRODUCTS = ["Kettle", "Lamp", "Desk", "Chair", "Mug", "Rug", "Clock", "Fan", "Shelf", "Vase"]

_SCHEMA = """
CREATE TABLE "Customer" (
    "CustomerId" INTEGER PRIMARY KEY,
    "First Name" TEXT NOT NULL,
    "Last Name" TEXT NOT NULL,
    "Email" TEXT UNIQUE,
    "City" TEXT,
    "Status" TEXT NOT NULL DEFAULT 'active' CHECK ("Status" IN ('active', 'suspended', 'closed')),
    "Prefs" TEXT
);
CREATE TABLE "Order" (
    "OrderId" INTEGER PRIMARY KEY,
    "CustomerId" INTEGER,
    "Order Date" TEXT,
    "Status" TEXT NOT NULL,
    "Total" REAL
);
CREATE TABLE "Product" (sku TEXT PRIMARY KEY, "Name" TEXT NOT NULL, photo BLOB, price REAL);
CREATE TABLE "Order Details" (
    "OrderId" INTEGER NOT NULL REFERENCES "Order"("OrderId"),
    sku TEXT NOT NULL REFERENCES "Product"(sku),
    qty INTEGER NOT NULL,
    PRIMARY KEY ("OrderId", sku)
);
CREATE TABLE audit_log (at TEXT, message TEXT);
CREATE TABLE page_views (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER REFERENCES "Customer"("CustomerId"),
    url TEXT,
    viewed_at TEXT
);
CREATE INDEX "Order by customer" ON "Order"("CustomerId");
CREATE VIEW "Big Spenders" AS
    SELECT c."Email", sum(o."Total") AS spent FROM "Customer" c JOIN "Order" o USING ("CustomerId")
    GROUP BY c."CustomerId" HAVING spent > 500;
CREATE TRIGGER "log status" AFTER UPDATE OF "Status" ON "Order"
    BEGIN INSERT INTO audit_log VALUES (datetime('now'), 'order ' || new."OrderId" || ' -> ' || new."Status"); END;
CREATE TRIGGER no_closed_orders BEFORE INSERT ON "Order"
    WHEN (SELECT "Status" FROM "Customer" WHERE "CustomerId" = new."CustomerId") = 'closed'
    BEGIN SELECT RAISE(ABORT, 'the customer account is closed'); END;
"""


def build_shop(path: str | Path, *, views: int = SAMPLE_PAGE_VIEWS) -> Path:
    """Write the shop database to ``path`` (a new file); the same ``views`` writes the same content.

    Args:
        path: where to write it; the file must not exist yet.
        views: rows of ``page_views`` (every 9,000th of them by a customer that does not exist).

    Returns:
        ``path``.

    Raises:
        FileExistsError: ``path`` exists already.
    """
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists; the shop database is written to a new file")
    rng = random.Random(1)
    conn = sqlite3.connect(path)
    try:
        conn.executescript(_SCHEMA)
        customers = []
        for cid in range(1, 61):
            first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
            email = None if cid % 17 == 0 else f"{first}.{last}.{cid}@example.org".lower()
            customers.append(
                (
                    cid,
                    first,
                    last,
                    email,
                    rng.choice([*CITIES, None]),
                    rng.choice(["active"] * 5 + ["suspended"]),
                    None if cid % 3 else '{"newsletter": ' + ("true" if cid % 2 else "false") + "}",
                )
            )
        conn.executemany('INSERT INTO "Customer" VALUES (?, ?, ?, ?, ?, ?, ?)', customers)
        products = [
            (
                f"SKU-{n:03d}",
                name,
                bytes(rng.randrange(256) for _ in range(24)) if n % 3 else None,
                round(rng.uniform(2, 300), 2),
            )
            for n, name in enumerate(_PRODUCTS, 1)
        ]
        conn.executemany('INSERT INTO "Product" VALUES (?, ?, ?, ?)', products)
        orders, details = [], []
        for oid in range(1, 241):
            # every 50th order is by a customer that does not exist (a foreign-key violation)
            cid = rng.randint(1, 60) if oid % 50 else 9_999
            date = (
                None if oid % 37 == 0 else f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            )
            status = rng.choice(["new", "paid", "shipped", "refunded"])
            total = 0.0
            for sku, _, _, price in rng.sample(products, rng.randint(1, 4)):
                qty = rng.randint(1, 3)
                details.append((oid, sku, qty))
                total += qty * price
            orders.append((oid, cid, date, status, round(total, 2)))
        conn.executemany('INSERT INTO "Order" VALUES (?, ?, ?, ?, ?)', orders)
        conn.executemany('INSERT INTO "Order Details" VALUES (?, ?, ?)', details)
        conn.executemany(
            "INSERT INTO audit_log VALUES (?, ?)",
            [(f"2025-01-{d:02d}", f"import batch {d}") for d in range(1, 20)],
        )
        conn.executemany(
            "INSERT INTO page_views VALUES (?, ?, ?, ?)",
            (
                (
                    n,
                    5_555 if n % 9_000 == 0 else rng.randint(1, 60),
                    f"/p/{rng.randint(1, 10)}",
                    f"2025-06-{rng.randint(1, 28):02d}",
                )
                for n in range(1, views + 1)
            ),
        )
        conn.commit()
        conn.execute("VACUUM")  # the smallest file for the content
    finally:
        conn.close()
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Write the sample database: ``python -m coevo.arena.examples.shop [PATH]`` (default: the shipped file)."""
    args = list(sys.argv[1:] if argv is None else argv)
    target = Path(args[0]) if args else SHOP
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    build_shop(partial)
    partial.replace(target)
    print(f"wrote {target} ({target.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
