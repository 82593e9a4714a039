"""Bounded reads: regular files only, no link followed, sizes checked before reading, Parquet by its footer."""

from __future__ import annotations

import io
import os
import re
import tracemalloc
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from coevo.arena import bounded
from coevo.arena.bounded import (
    MAX_FILE_BYTES,
    check_parquet_size,
    load_document,
    loads_json,
    read_parquet_bytes,
    read_regular,
    read_within,
)
from coevo.arena.errors import FileRefusedError
from coevo.arena.gamelog import RunDir

DOCS = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def test_a_regular_file_within_its_limit_is_read_and_one_over_it_is_refused_unread(
    tmp_path,
) -> None:
    """The limit is checked on the open file before reading; the message names the file and the limit."""
    path = tmp_path / "f.json"
    path.write_bytes(b"x" * 100)
    assert read_regular(path, limit=100) == b"x" * 100
    with pytest.raises(FileRefusedError, match=rf"{path} is 101 bytes .* more than coevo reads"):
        path.write_bytes(b"x" * 101)
        read_regular(path, limit=100)


@pytest.mark.parametrize("kind", ["link to /dev/zero", "link to a file", "fifo", "directory"])
def test_links_devices_fifos_and_folders_are_refused_before_a_byte_is_read(kind, tmp_path) -> None:
    """A link (even to a regular file), a FIFO with no writer (no wait), a folder: refused, naming the file and what it is."""
    path = tmp_path / "f"
    if kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "link to a file":
        (tmp_path / "real").write_text("{}")
        path.symlink_to(tmp_path / "real")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    what = {"fifo": "is a FIFO", "directory": "is a directory"}.get(kind, "is a symbolic link")
    with pytest.raises(FileRefusedError, match=f"{path} {what}"):
        read_regular(path, limit=1 << 20)


def test_a_run_directory_refuses_a_device_a_link_out_and_a_folder_that_links_out(tmp_path) -> None:
    """RunDir.read_bytes: a link to /dev/zero and a folder that is a link out of the run are refused; read_json says how deep is too deep."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "zero.json").symlink_to("/dev/zero")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "state.json").write_text("{}")
    (run / "checkpoints").symlink_to(elsewhere)
    (run / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    rundir = RunDir(str(run))
    with pytest.raises(FileRefusedError, match=r"zero\.json is a symbolic link"):
        rundir.read_json("zero.json")
    with pytest.raises(FileRefusedError, match="is in a folder that is a link out of"):
        rundir.read_bytes("checkpoints", "state.json")
    with pytest.raises(ValueError, match=r"deep\.json is nested too deep"):
        rundir.read_json("deep.json")
    with pytest.raises(FileRefusedError, match="more than coevo reads"):
        (run / "big.json").write_text("[" + "1," * 100 + "1]")
        rundir.read_json("big.json", limit=100)


def test_an_object_store_file_over_its_limit_is_refused() -> None:
    """On a pyarrow filesystem URI the size comes from the store's listing, and the read stops past the limit."""
    run = RunDir("mock:///bounded")
    run.write_bytes(b"x" * 1000, "a.json")
    assert run.read_bytes("a.json", limit=1000) == b"x" * 1000
    with pytest.raises(FileRefusedError, match=r"a\.json is 1000 bytes"):
        run.read_bytes("a.json", limit=999)


def test_a_small_file_read_under_a_big_limit_takes_memory_for_its_size_not_the_limit(
    tmp_path,
) -> None:
    """read_regular of a 21 KB file under MAX_FILE_BYTES allocates about 21 KB, not 1 GiB (a MemoryError under `prlimit --as`)."""
    path = tmp_path / "suite.jsonl"
    path.write_bytes(b"x" * 21_000)
    tracemalloc.start()
    try:
        data = read_regular(path, limit=MAX_FILE_BYTES)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert data == b"x" * 21_000
    assert peak < 1 << 20, f"reading 21 KB took {peak} bytes at its peak"


class _Stream(io.BytesIO):
    """A file that grew after its size was taken, counting what each read asks for."""

    def __init__(self, data: bytes, asked: list[int]):
        super().__init__(data)
        self.asked = asked

    def read(self, size: int | None = -1, /) -> bytes:
        self.asked.append(-1 if size is None else size)
        return super().read(size)


def test_a_file_that_grows_while_read_is_read_on_and_still_stops_one_byte_past_the_limit() -> None:
    """Asked for its size and one byte first; what came since is read in chunks, never past limit + 1."""
    asked: list[int] = []
    assert read_within(_Stream(b"x" * 100, asked), 10, 1000) == b"x" * 100
    assert asked[0] == 11 and max(asked) <= 1000
    assert read_within(_Stream(b"x" * 100, []), 10, 50) == b"x" * 51


def test_an_object_store_file_is_read_asking_for_its_size_not_the_limit() -> None:
    """RunDir.read_bytes on an object store asks the stream for the listed size and one byte, not MAX_FILE_BYTES + 1."""
    asked: list[int] = []

    class Store:  # what read_bytes uses of a pyarrow filesystem
        def get_file_info(self, path: str) -> Any:
            return SimpleNamespace(type=pafs.FileType.File, size=4)

        def open_input_stream(self, path: str) -> _Stream:
            return _Stream(b"{}\n\n", asked)

    run = RunDir("mock:///store")
    run.__dict__["_resolved"] = (Store(), "/store")  # the cached filesystem, replaced
    assert run.read_bytes("checkpoints", "state.json") == b"{}\n\n"
    assert asked == [5], asked


def test_parquet_is_refused_by_its_footer_and_by_its_decoded_size(tmp_path) -> None:
    """Decompressed size from the footer, before any column is read; one value shared by many rows by its decoded size."""
    distinct = pa.table({"m": [c * (1 << 20) for c in "ABCD"]})
    shared = pa.table({"m": ["A" * (1 << 20)] * 4})
    for name, table in (("distinct", distinct), ("shared", shared)):
        pq.write_table(table, tmp_path / f"{name}.parquet", compression="zstd")
    assert (tmp_path / "distinct.parquet").stat().st_size < 16 << 10
    with pytest.raises(
        FileRefusedError, match=r"holds 4\.0 MiB .* once decompressed, by its Parquet footer"
    ):
        check_parquet_size(str(tmp_path / "distinct.parquet"), "distinct", limit=2 << 20)
    data = (tmp_path / "shared.parquet").read_bytes()
    check_parquet_size(pa.BufferReader(data), "shared", limit=2 << 20)  # the footer counts it once
    with pytest.raises(
        FileRefusedError, match=r"shared holds 4\.0 MiB .* once its values are decoded"
    ):
        read_parquet_bytes(data, "shared", limit=2 << 20)
    assert read_parquet_bytes(data, "shared", limit=8 << 20).equals(shared)


def test_documents_nested_too_deep_or_linking_out_are_refused(tmp_path) -> None:
    """load_document: JSON 200,000 deep, TOML 5,000 deep, JSON past MAX_IMPORT_DEPTH: a ValueError naming the file; a link out of the roots: refused."""
    root = tmp_path / "checkout"
    root.mkdir()
    cases = {
        "a.json": "[" * 200_000 + "]" * 200_000,
        "b.toml": "x = " + "[" * 5_000 + "]" * 5_000,
        "c.json": "[" * (bounded.MAX_IMPORT_DEPTH + 1) + "]" * (bounded.MAX_IMPORT_DEPTH + 1),
    }
    for name, text in cases.items():
        (root / name).write_text(text)
        with pytest.raises(ValueError, match=f"{root / name} is nested more than"):
            load_document(root / name, [root])
    (root / "ok.json").write_text("[" * bounded.MAX_IMPORT_DEPTH + "]" * bounded.MAX_IMPORT_DEPTH)
    assert load_document(root / "ok.json", [root])
    (tmp_path / "secret.txt").write_text("{}")
    (root / "policy.json").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(FileRefusedError, match="points out of the checkout"):
        load_document(root / "policy.json", [root])
    with pytest.raises(ValueError, match="where is nested too deep"):
        loads_json("[" * 100_000, "where")


def _shown(value: int) -> str:
    if value < 1 << 10:
        return f"{value} levels"
    return f"{value >> 30} GiB" if value % (1 << 30) == 0 else f"{value >> 20} MiB"


def test_the_security_page_states_every_limit_as_the_code_has_it() -> None:
    """docs/security.md's "Size limits" table has a row per MAX_ constant of coevo.arena.bounded, with its value."""
    page = DOCS.read_text()
    limits = {n: getattr(bounded, n) for n in bounded.__all__ if n.startswith("MAX_")}
    assert len(limits) >= 6
    for name, value in limits.items():
        assert re.search(rf"\| `{name}` \| {re.escape(_shown(value))} \|", page), (
            f"docs/security.md must list {name} = {_shown(value)} under 'Size limits'"
        )
