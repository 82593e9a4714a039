"""Parquet read within its decoded size: run-length encoding refused by the footer, a footer that lies refused as it is decoded."""

from __future__ import annotations

import decimal
import gc
import re
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from coevo.arena import bounded
from coevo.arena.bounded import parquet_footer_sizes, read_parquet, read_parquet_bytes
from coevo.arena.errors import FileRefusedError

ZEROS = 2_000_000
"""Zeros in a hostile file: 15.3 MiB decoded (int64), a few KB on disk."""

LIMIT = 1 << 20
"""The limit the tests read under (the real ones are 256 MiB and 1 GiB): 1 MiB."""


def _parquet(table: pa.Table, **options: object) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **options)  # type: ignore[arg-type]
    return sink.getvalue().to_pybytes()


def _peak(read: Callable[[], object]) -> tuple[int, str]:
    """The most bytes Arrow held while ``read`` ran (a memory pool of its own), and the refusal it raised ("" if none)."""
    pool = pa.proxy_memory_pool(pa.default_memory_pool())
    before = pa.default_memory_pool()
    pa.set_memory_pool(pool)
    refused = ""
    try:
        read()
    except FileRefusedError as exc:
        refused = str(exc)
    finally:
        pa.set_memory_pool(before)
    gc.collect()
    assert pool.bytes_allocated() == 0, "what was read must be freed before its pool is"
    return pool.max_memory(), refused


HOSTILE = {
    "a column of zeros": pa.table({"x": pa.array(np.zeros(ZEROS, dtype=np.int64))}),
    "one list of zeros": pa.table(
        {"x": pa.array([np.zeros(ZEROS, dtype=np.int64)], type=pa.list_(pa.int64()))}
    ),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_run_of_zeros_is_refused_by_its_footer_before_a_page_is_decoded(name: str) -> None:
    """Two million zeros (run-length or dictionary encoded: a few KB on disk, and a few KB uncompressed by the footer, so the decompressed-size check alone lets them through) are refused by their decoded size, 15 MiB, with no page decoded."""
    data = _parquet(HOSTILE[name])
    decompressed, decoded = parquet_footer_sizes(pq.read_metadata(pa.BufferReader(data)))
    assert len(data) < 64 << 10 and decompressed < 64 << 10, "the old check passes it"
    assert decoded >= 8 * ZEROS
    peak, refused = _peak(lambda: read_parquet_bytes(data, "hostile.parquet", limit=LIMIT))
    assert f"hostile.parquet holds 15.3 MiB ({decoded} bytes) once decoded" in refused
    assert f"by its Parquet footer ({ZEROS} values)" in refused
    assert "more than coevo reads from one file (1.0 MiB)" in refused
    assert "'Size limits' in docs/security.md" in refused
    assert peak < 64 << 10, f"nothing may be decoded: {peak} bytes held"


def test_a_footer_that_lies_is_refused_as_the_file_is_decoded(monkeypatch) -> None:
    """A footer that claims nothing (as a hand-made one may) does not get the file read whole: the read stops within a batch of passing the limit, holding about the limit, not the 15 MiB the file decodes to."""
    data = _parquet(HOSTILE["a column of zeros"])
    monkeypatch.setattr(bounded, "parquet_footer_sizes", lambda metadata: (0, 0))
    peak, refused = _peak(lambda: read_parquet_bytes(data, "liar.parquet", limit=LIMIT))
    assert re.search(
        rf"liar\.parquet holds 1\.0 MiB .* once its values are decoded \(in its first \d+ of "
        rf"{ZEROS} rows\)",
        refused,
    ), refused
    assert "it was not read whole" in refused
    assert peak < 2 * LIMIT, f"{peak} bytes held, for a limit of {LIMIT}"


def test_a_text_many_rows_share_is_counted_for_every_row() -> None:
    """One 64 KiB value in 64 rows of a list column: the footer counts it once; read, it is counted 64 times and refused before it is expanded."""
    table = pa.table({"m": pa.array([["A" * (64 << 10)]] * 64, pa.list_(pa.string()))})
    data = _parquet(table, compression="zstd")
    decompressed, decoded = parquet_footer_sizes(pq.read_metadata(pa.BufferReader(data)))
    assert max(decompressed, decoded) < LIMIT < table.nbytes
    peak, refused = _peak(lambda: read_parquet_bytes(data, "shared.parquet", limit=LIMIT))
    assert "shared.parquet holds 4.0 MiB" in refused and "once its values are decoded" in refused
    assert peak < LIMIT


def _every_type() -> pa.Table:
    n = 10_000
    rows = {
        "ints": pa.array(np.arange(n)),
        "floats": pa.array(np.linspace(0, 1, n)),
        "flags": pa.array([i % 3 == 0 if i % 7 else None for i in range(n)]),
        "texts": pa.array([f"row {i % 50}" if i % 11 else None for i in range(n)]),
        "unique": pa.array([f"unique {i}" * (i % 5) for i in range(n)], pa.large_string()),
        "bytes": pa.array([bytes([i % 256]) * (i % 4) for i in range(n)]),
        "encoded": pa.array([f"level {i % 4}" for i in range(n)]).dictionary_encode(),
        "turns": pa.array(
            [[[i, i + 1], []] if i % 5 else None for i in range(n)], pa.list_(pa.list_(pa.int64()))
        ),
        "reasons": pa.array(
            [["stop", None] if i % 2 else [] for i in range(n)], pa.list_(pa.string())
        ),
        "pairs": pa.array([[("k", i)] for i in range(n)], pa.map_(pa.string(), pa.int64())),
        "record": pa.array([{"a": i, "b": str(i)} for i in range(n)]),
        "fixed": pa.array([[i, i] for i in range(n)], pa.list_(pa.int32(), 2)),
        "money": pa.array([decimal.Decimal(i) / 4 for i in range(n)], pa.decimal128(12, 2)),
        "when": pa.array(np.arange(n), pa.timestamp("ms")),
    }
    return pa.table(rows).replace_schema_metadata({b"coevo.format": b"test/1"})


def test_a_good_file_reads_as_pyarrow_reads_it() -> None:
    """Every column type, several row groups and batches: the table is the one pyarrow reads, its schema and metadata included, whole or only some columns."""
    table = _every_type()
    data = _parquet(table, row_group_size=3_000)
    expected = pq.read_table(pa.BufferReader(data))
    read = read_parquet_bytes(data, "good.parquet")
    assert read.equals(expected) and read.equals(table)
    assert read.schema.equals(expected.schema, check_metadata=True)
    some = read_parquet(pa.BufferReader(data), "good.parquet", columns=["texts", "turns", "gone"])
    assert some.equals(pq.read_table(pa.BufferReader(data), columns=["texts", "turns"]))
    empty = table.slice(0, 0)
    assert read_parquet_bytes(_parquet(empty), "empty.parquet").equals(empty)


def test_the_footer_bounds_what_a_good_file_takes_decoded() -> None:
    """By the footer, columns of fixed width and lists take at least what they take in memory: what a read lets through is bounded (text is counted as it is decoded)."""
    table = _every_type().select(["ints", "floats", "flags", "turns", "fixed", "money", "when"])
    _, decoded = parquet_footer_sizes(pq.read_metadata(pa.BufferReader(_parquet(table))))
    assert table.nbytes <= decoded < 4 * table.nbytes
