"""Reading a corpus (``coevo corpus build``): its manifest, its game-log tables, its split by world.

A corpus folder holds the game log's ``worlds``, ``tasks`` and ``verdicts``
tables partitioned ``shard=N`` (docs/corpus.md); :func:`read_corpus`
reads them as the log's tables (the shard as ``gen``), only committed
shards (the parts of a shard being written are hidden). :func:`held_out`
is the split rule.
"""

from __future__ import annotations

from typing import Any, Final

import pyarrow as pa
from coevo.arena.errors import CoevoError
from coevo.arena.gamelog.rows import SCHEMAS
from coevo.arena.gamelog.rundir import RunDir

__all__ = ["CORPUS_FORMAT", "CORPUS_MANIFEST", "held_out", "read_corpus"]

CORPUS_FORMAT: Final = "coevo.corpus/1"
"""The ``format`` of a corpus's manifest."""

CORPUS_MANIFEST: Final = "corpus.json"
"""The manifest's file name, in the corpus folder."""


def held_out(world_id: str, share: float) -> bool:
    """Whether a world is in a corpus's eval split: the first eight hex digits of its id below ``share × 16⁸``."""
    return int(world_id.removeprefix("sha256:")[:8], 16) < share * 16**8


def read_corpus(folder: str) -> tuple[dict[str, Any], dict[str, pa.Table]]:
    """The manifest and every game-log table of a corpus (its shard as ``gen``; tables it lacks empty).

    Raises:
        CoevoError: no corpus there, or its manifest is not one.
    """
    run = RunDir(folder)
    if not run.exists(CORPUS_MANIFEST):
        raise CoevoError(
            f"{folder} holds no corpus (no {CORPUS_MANIFEST}); build one with `coevo corpus build`"
        )
    try:
        manifest = run.read_json(CORPUS_MANIFEST)
    except ValueError as exc:
        raise CoevoError(f"{folder}/{CORPUS_MANIFEST} is not JSON ({exc})") from exc
    except OSError as exc:  # a link, a device, too big: refused unread
        raise CoevoError(f"{folder}/{CORPUS_MANIFEST} cannot be read ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != CORPUS_FORMAT:
        raise CoevoError(f"{folder}/{CORPUS_MANIFEST} is not a {CORPUS_FORMAT} manifest")
    # lazy: pyarrow.dataset loads pandas (half a second), which most users of this module never need
    import pyarrow.dataset as ds

    tables = {}
    for name, schema in SCHEMAS.items():
        with_gen = schema.append(pa.field("gen", pa.int32()))
        if name in manifest.get("tables", []) and run.exists(name):
            for part in run.walk(name):  # the parts the dataset reads: regular, within limits
                if part.endswith(".parquet") and not part.rsplit("/", 1)[-1].startswith((".", "_")):
                    try:
                        run.parquet_footer(part)
                    except (OSError, pa.ArrowException) as exc:
                        raise CoevoError(f"{folder}: {part} cannot be read ({exc})") from exc
            data = ds.dataset(
                run.path(name),
                filesystem=run.fs,
                format="parquet",
                partitioning=ds.partitioning(pa.schema([("shard", pa.int32())]), flavor="hive"),
            ).to_table()
            data = data.rename_columns([c if c != "shard" else "gen" for c in data.column_names])
            tables[name] = data.select(with_gen.names).cast(with_gen)
        else:
            tables[name] = with_gen.empty_table()
    return manifest, tables
