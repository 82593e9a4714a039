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
    tables = {}
    for name, schema in SCHEMAS.items():
        with_gen = schema.append(pa.field("gen", pa.int32()))
        parts = []
        for part in run.walk(name) if name in manifest.get("tables", []) else []:
            directory, _, file = part.rpartition("/")
            if not file.endswith(".parquet") or file.startswith((".", "_")):
                continue  # a part being written, or not a part
            try:  # a regular file within its limits, by its footer and as it is decoded
                table = run.read_parquet(part, schema=schema)
                shard = _shard(directory)
            except (OSError, ValueError, pa.ArrowException) as exc:
                raise CoevoError(f"{folder}: {part} cannot be read ({exc})") from exc
            gen = pa.repeat(pa.scalar(shard, pa.int32()), table.num_rows)
            parts.append(pa.Table.from_arrays([*table.columns, gen], schema=with_gen))
        tables[name] = pa.concat_tables(parts) if parts else with_gen.empty_table()
    return manifest, tables


def _shard(directory: str) -> int | None:
    """The shard a part's folder names (``shard=N``, as a hive-partitioned dataset reads it), None when none does.

    Raises:
        ValueError: ``shard=`` followed by no number.
    """
    names = [n for n in directory.split("/") if n.startswith("shard=")]
    return int(names[-1].removeprefix("shard=")) if names else None
