"""Real-world-shaped SQLite databases for the miner's tests, written here (nothing is downloaded).

``build_shop``: the sample shop database coevo ships (:mod:`coevo.arena.examples.shop`: mixed-case
identifiers with spaces, JSON text with braces, a composite primary key, a
table without keys, a view, triggers (one writing an audit log), BLOBs, NULLs,
dates as text, a declared foreign key and an undeclared one (``CustomerId``),
foreign-key violations in the data), here with a 120,000-row table.

``build_library``: snake_case with no declared foreign keys at all (every
link inferred: ``author_id`` → ``authors.id``), a WITHOUT ROWID table keyed by
text, AUTOINCREMENT, a generated column, NULL-heavy columns, an empty table,
and a full-text (virtual) table with its shadow tables.

``build_empty``: tables, no rows.
"""

from __future__ import annotations

import contextlib
import random
import sqlite3
from pathlib import Path

from coevo.arena.examples.shop import CITIES, FIRST_NAMES, LAST_NAMES
from coevo.arena.examples.shop import build_shop as _build_shop


def build_shop(path: Path, *, views: int = 120_000) -> Path:
    """The sample shop database (:mod:`coevo.arena.examples.shop`), with a 120,000-row table to sample."""
    return _build_shop(path, views=views)


def build_library(path: Path) -> Path:
    """The library database (see the module docstring)."""
    rng = random.Random(2)
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE authors (id INTEGER PRIMARY KEY AUTOINCREMENT, full_name TEXT NOT NULL, country TEXT, born TEXT);
        CREATE TABLE genres (code TEXT PRIMARY KEY, label TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE books (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            author_id INTEGER,
            genre_code TEXT,
            title TEXT NOT NULL,
            isbn TEXT UNIQUE,
            pages INTEGER,
            published_on TEXT,
            title_length INTEGER GENERATED ALWAYS AS (length(title)) VIRTUAL
        );
        CREATE TABLE members (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT UNIQUE, tier TEXT);
        CREATE TABLE loans (
            id INTEGER PRIMARY KEY,
            book_id INTEGER NOT NULL,
            member_id INTEGER NOT NULL,
            loaned_on TEXT NOT NULL,
            due_on TEXT,
            state TEXT NOT NULL DEFAULT 'out'
        );
        CREATE TABLE reservations (id INTEGER PRIMARY KEY, book_id INTEGER, member_id INTEGER);
        """
    )
    with contextlib.suppress(sqlite3.OperationalError):  # no FTS5: every other quirk remains
        conn.execute("CREATE VIRTUAL TABLE book_search USING fts5(title, content='')")
    conn.executemany(
        "INSERT INTO genres VALUES (?, ?)",
        [("FIC", "Fiction"), ("SCI", "Science"), ("HIS", "History"), ("POE", "Poetry")],
    )
    authors = [
        (
            None,
            f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}",
            rng.choice([*CITIES, None]),
            None if n % 4 else f"19{rng.randint(30, 99)}-01-01",
        )
        for n in range(25)
    ]
    conn.executemany("INSERT INTO authors VALUES (?, ?, ?, ?)", authors)
    words = [
        "River",
        "Night",
        "Glass",
        "Garden",
        "Winter",
        "Atlas",
        "Salt",
        "Orchard",
        "Signal",
        "Harbor",
    ]
    books = []
    for n in range(1, 121):
        title = f"The {rng.choice(words)} {rng.choice(words)}"
        books.append(
            (
                None,
                rng.randint(1, 25),
                rng.choice(["FIC", "SCI", "HIS", "POE", None]),
                title,
                f"978-{n:07d}",
                rng.randint(90, 700) if n % 5 else None,
                f"20{rng.randint(0, 24):02d}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
            )
        )
    conn.executemany(
        "INSERT INTO books (id, author_id, genre_code, title, isbn, pages, published_on) VALUES (?, ?, ?, ?, ?, ?, ?)",
        books,
    )
    members = [
        (
            n,
            f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}",
            f"m{n}@library.example",
            rng.choice(["basic", "plus", None]),
        )
        for n in range(1, 41)
    ]
    conn.executemany("INSERT INTO members VALUES (?, ?, ?, ?)", members)
    loans = [
        (
            n,
            rng.randint(1, 120),
            rng.randint(1, 40),
            f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            None if n % 6 == 0 else f"2026-0{rng.randint(1, 9)}-15",
            rng.choice(["out", "returned", "returned", "lost"]),
        )
        for n in range(1, 301)
    ]
    conn.executemany("INSERT INTO loans VALUES (?, ?, ?, ?, ?, ?)", loans)
    conn.commit()
    conn.close()
    return path


def build_empty(path: Path) -> Path:
    """Tables with no rows."""
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE a (id INTEGER PRIMARY KEY, name TEXT); CREATE TABLE b (id INTEGER PRIMARY KEY, a_id INTEGER REFERENCES a(id));"
    )
    conn.close()
    return path


def build_odd(path: Path) -> Path:
    """Shapes that trip naive miners.

    Two links between the same tables (a flight's origin and destination),
    a self-reference (an employee's manager), a text primary key referenced by
    an integer column, names that a ``LIKE`` search over-matches ("Name 1"
    matches "Name 10" … "Name 19"), a date column holding some non-dates, and
    a table and a column whose names hold braces.
    """
    rng = random.Random(3)
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE airports (id INTEGER PRIMARY KEY, code TEXT UNIQUE NOT NULL, city TEXT NOT NULL);
        CREATE TABLE flights (
            id INTEGER PRIMARY KEY, flight_no TEXT UNIQUE NOT NULL,
            origin_id INTEGER REFERENCES airports(id), dest_id INTEGER REFERENCES airports(id),
            status TEXT NOT NULL
        );
        CREATE TABLE staff (
            id INTEGER PRIMARY KEY, email TEXT UNIQUE NOT NULL, name TEXT NOT NULL, city TEXT NOT NULL,
            manager_id INTEGER REFERENCES staff(id)
        );
        CREATE TABLE visits (id INTEGER PRIMARY KEY, staff_id INTEGER REFERENCES staff(id), visited_on TEXT, note TEXT);
        CREATE TABLE codes (id TEXT PRIMARY KEY, label TEXT UNIQUE NOT NULL);
        CREATE TABLE uses (id INTEGER PRIMARY KEY, codes_id INTEGER REFERENCES codes(id), amount INTEGER);
        CREATE TABLE "p{x}" (id INTEGER PRIMARY KEY, "na{m}e" TEXT UNIQUE, city TEXT);
        """
    )
    cities = ["Oslo", "Rome", "Lima", "Kyiv", "Doha", "Pune", "Cork", "Bern", "Riga", "Nice"]
    conn.executemany(
        "INSERT INTO airports VALUES (?, ?, ?)",
        [(i, c[:3].upper() + "X", c) for i, c in enumerate(cities, 1)],
    )
    flights = []
    for i in range(1, 61):
        origin, dest = rng.sample(range(1, 11), 2)
        flights.append(
            (i, f"XY{100 + i}", origin, dest, rng.choice(["scheduled", "departed", "landed"]))
        )
    conn.executemany("INSERT INTO flights VALUES (?, ?, ?, ?, ?)", flights)
    staff = [
        (
            i,
            f"s{i}@corp.example",
            f"Name {i % 25}",
            rng.choice(cities),
            None if i <= 3 else rng.randint(1, i - 1),
        )
        for i in range(1, 61)
    ]
    conn.executemany("INSERT INTO staff VALUES (?, ?, ?, ?, ?)", staff)
    visits = [
        (
            i,
            rng.randint(1, 60),
            rng.choice(["2024-01-15", "2024-06-30", "2025-02-01", "not recorded"]),
            f"note {i}",
        )
        for i in range(1, 121)
    ]
    conn.executemany("INSERT INTO visits VALUES (?, ?, ?, ?)", visits)
    conn.executemany(
        "INSERT INTO codes VALUES (?, ?)", [(str(i), f"code {i}") for i in range(1, 31)]
    )
    conn.executemany(
        "INSERT INTO uses VALUES (?, ?, ?)",
        [(i, rng.randint(1, 30), rng.randint(1, 99)) for i in range(1, 91)],
    )
    conn.executemany(
        'INSERT INTO "p{x}" VALUES (?, ?, ?)',
        [(i, f"p{i}", rng.choice(cities)) for i in range(1, 30)],
    )
    conn.commit()
    conn.close()
    return path
