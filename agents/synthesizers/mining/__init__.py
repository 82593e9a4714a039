"""Mining a real SQLite database into a world and tasks (``coevo mine DB.sqlite``).

The source is opened read-only (``mode=ro``) and never written. Its schema is
read into a foreign-key graph (declared links plus links inferred from names
and confirmed by the data), its rows are sampled into a world of manageable
size that keeps foreign keys walkable, tools and a task catalog are derived
from that world, and the procedural planner draws tasks along foreign-key
paths: multi-hop look-ups ending in a question or a write.

Statements the runtime refuses (a trigger calling ``random()``, a view over
``sqlite_master``) are dropped from the world with a note; seed rows that
break a constraint are dropped with a note; rows that violate foreign keys
are kept (real databases have them) and reported as world warnings.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from coevo.agents.protocols import ProposalRequest
from coevo.agents.synthesizers.catalog import Catalog
from coevo.agents.synthesizers.initial import initial_state
from coevo.agents.synthesizers.mining.derive import Derived, derive
from coevo.agents.synthesizers.mining.sampling import sample_rows
from coevo.agents.synthesizers.mining.schema import SchemaGraph, infer_links, read_schema
from coevo.agents.synthesizers.planner import FAMILIES, FAMILY_LEVELS, Target, TaskSampler, Unfit
from coevo.agents.synthesizers.procedural.base import NOW
from coevo.arena.errors import CoevoError, SpecError
from coevo.arena.seeding import derive_seed
from coevo.arena.spec import Blob, TableData, TaskSpec, ToolSpec, WorldSpec
from coevo.arena.world import World

__all__ = ["MineReport", "Miner", "NothingToMine", "catalog_of_world", "mine_world", "open_source"]


class NothingToMine(CoevoError):
    """The database holds no rows (or no tables a world can use): there is nothing to make tasks from."""


def open_source(path: str | Path) -> sqlite3.Connection:
    """The database at ``path``, opened read-only (it is never modified).

    Raises:
        CoevoError: the file does not exist or is not an SQLite database.
    """
    source = Path(path)
    if not source.is_file():
        raise CoevoError(
            f"{source}: no such file; give the path of an SQLite database file "
            "(`coevo examples --copy shop .` gives you shop.sqlite, a sample one)"
        )
    uri = source.resolve().as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        conn.text_factory = lambda b: b.decode("utf-8", "replace")
        conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()
    except sqlite3.DatabaseError as exc:
        raise CoevoError(f"{source}: not a readable SQLite database ({exc})") from exc
    return conn


@dataclass
class MineReport:
    """What mining did: sizes, links, and everything dropped or repaired.

    Attributes:
        source_tables: tables in the source (kept ones).
        source_rows: rows in the source.
        world_rows: rows kept in the world.
        declared_links: declared foreign keys.
        inferred_links: foreign keys inferred from names and data (``child.col -> parent.col``).
        notes: statements, rows and values dropped or repaired, and why.
    """

    source_tables: int = 0
    source_rows: int = 0
    world_rows: int = 0
    declared_links: int = 0
    inferred_links: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _cell(value: Any) -> Any:
    return Blob.of(value) if isinstance(value, bytes) else value


_PROBE = ToolSpec(
    name="probe",
    description="A placeholder while the world's rows are checked.",
    parameters={"type": "object", "properties": {}},
    sql=["SELECT 1 AS ok"],
    effect="read",
)

_PATH = re.compile(r"^world\.(schema|tools|data)(?:\[(\d+)\]|\.([^.\[]+))?(?:\.rows\[(\d+)\])?")


def _world_of(
    schema: SchemaGraph,
    rows: dict[str, list[tuple[Any, ...]]],
    columns: dict[str, tuple[str, ...]],
    domain: str,
    notes: list[str],
) -> WorldSpec:
    """A world record from the source schema and the kept rows, with refused statements and rows dropped."""
    statements = (
        [t.sql for t in schema.tables.values()]
        + [sql for _, sql in schema.indexes]
        + [sql for _, sql in schema.views]
        + [sql for _, sql, _ in schema.triggers]
    )
    data = {name: [list(map(_cell, r)) for r in kept] for name, kept in rows.items() if kept}
    for _ in range(50):
        spec = WorldSpec(
            domain=domain,
            now=NOW.isoformat(),
            schema_sql=statements,
            data={name: TableData(columns=list(columns[name]), rows=r) for name, r in data.items()},
            tools=[],
        )
        try:
            # a world needs a tool; the real ones are derived once the rows are settled
            World(spec.model_copy(update={"tools": [_PROBE]})).close()
            return spec
        except SpecError as exc:
            dropped = False
            bad_statements: set[int] = set()
            bad_rows: dict[str, set[int]] = {}
            for problem in exc.problems:
                match = _PATH.match(problem.path)
                if not match:
                    continue
                if match.group(1) == "schema" and match.group(2) is not None:
                    bad_statements.add(int(match.group(2)))
                elif match.group(1) == "data" and match.group(3) and match.group(4) is not None:
                    bad_rows.setdefault(match.group(3), set()).add(int(match.group(4)))
                elif match.group(1) == "data" and match.group(3):
                    notes.append(f"dropped the rows of {match.group(3)}: {problem.message}")
                    data.pop(match.group(3), None)
                    dropped = True
            for index in sorted(bad_statements, reverse=True):
                message = next(
                    p.message for p in exc.problems if p.path.startswith(f"world.schema[{index}]")
                )
                notes.append(f"dropped statement {statements[index][:60]!r}: {message}")
                del statements[index]
                dropped = True
            for table, indexes in bad_rows.items():
                notes.append(f"dropped {len(indexes)} rows of {table} the schema refuses")
                data[table] = [r for i, r in enumerate(data.get(table, [])) if i not in indexes]
                dropped = True
            if not dropped:
                raise
    raise CoevoError("the world could not be made valid after dropping statements and rows")


def _without(derived: Derived, exclude: set[str]) -> Derived:
    if not exclude:
        return derived
    c = derived.catalog
    catalog = replace(
        c,
        anchors=tuple(a for a in c.anchors if a.tool not in exclude),
        hops=tuple(h for h in c.hops if h.tool not in exclude),
        actions=tuple(a for a in c.actions if a.tool not in exclude),
    )
    return Derived(tools=[t for t in derived.tools if t.name not in exclude], catalog=catalog)


def _derive_for(world: WorldSpec) -> Derived:
    conn = initial_state(world)
    try:
        schema = read_schema(conn)
        infer_links(conn, schema)
        return derive(conn, schema)
    finally:
        conn.close()


def mine_world(
    path: str | Path, *, seed: int = 0, per_table: int = 120
) -> tuple[WorldSpec, Catalog, MineReport]:
    """A world (with derived tools) sampled from the database at ``path``, its catalog and a report.

    Raises:
        NothingToMine: the database has no rows in any usable table.
        CoevoError: the file cannot be read as an SQLite database.
    """
    report = MineReport()
    conn = open_source(path)
    try:
        schema = read_schema(conn)
        report.notes += [f"skipped {s}" for s in schema.skipped]
        report.source_tables = len(schema.tables)
        report.source_rows = schema.rows
        if not schema.tables or schema.rows == 0:
            raise NothingToMine(
                f"{path}: {'no tables' if not schema.tables else 'every table is empty'}; "
                "there is nothing to make tasks from (fill the database, or mine another)"
            )
        report.declared_links = len(schema.links)
        inferred = infer_links(conn, schema)
        report.inferred_links = [
            f"{lk.child}.{lk.child_columns[0]} -> {lk.parent}.{lk.parent_columns[0]}"
            for lk in inferred
        ]
        sample = sample_rows(conn, schema, seed=seed, per_table=per_table)
    finally:
        conn.close()
    report.notes += sample.notes
    domain = "mined:" + re.sub(r"[^0-9A-Za-z_.-]+", "_", Path(path).stem)
    bare = _world_of(schema, sample.rows, sample.columns, domain, report.notes)
    report.world_rows = sum(len(t.rows) for t in bare.data.values())
    derived = _derive_for(bare)
    exclude: set[str] = set()
    for _ in range(10):
        candidate = _without(derived, exclude)
        if not candidate.tools:
            braces = [t for t in schema.tables if "{" in t or "}" in t]
            raise NothingToMine(
                f"{path}: no table has a one-column key or rowid and rows to look up"
                + (
                    f" (tables named with braces are not used: {', '.join(braces)})"
                    if braces
                    else ""
                )
                + "; no tools, so no tasks can be made"
            )
        world = bare.model_copy(update={"tools": candidate.tools})
        try:
            World(world).close()
        except SpecError as exc:
            refused = {
                candidate.tools[int(m.group(2))].name
                for p in exc.problems
                if (m := _PATH.match(p.path)) and m.group(1) == "tools" and m.group(2) is not None
            }
            if not refused:
                raise
            report.notes += [
                f"dropped tool {name}: the runtime refuses its SQL" for name in sorted(refused)
            ]
            exclude |= refused
            continue
        _CATALOGS[world.world_id] = candidate.catalog
        return world, candidate.catalog, report
    raise CoevoError("the derived tools could not be made valid")


_CATALOGS: OrderedDict[str, Catalog] = OrderedDict()


def catalog_of_world(world: WorldSpec) -> Catalog:
    """The catalog of a mined world, rebuilt from the world record alone (for mutation)."""
    if world.world_id in _CATALOGS:
        _CATALOGS.move_to_end(world.world_id)
        return _CATALOGS[world.world_id]
    bare = world.model_copy(update={"tools": []})
    derived = _derive_for(bare)
    present = {t.name for t in world.tools}
    catalog = _without(derived, {t.name for t in derived.tools if t.name not in present}).catalog
    _CATALOGS[world.world_id] = catalog
    while len(_CATALOGS) > 16:
        _CATALOGS.popitem(last=False)
    return catalog


class Miner:
    """A Synthesizer over one real database: tasks along its foreign-key paths.

    Args:
        path: the SQLite database (opened read-only).
        seed: the sampling seed of the world.
        per_table: rows drawn from each large table.
        attempts: draws per task before giving up on a target.
    """

    name = "miner"

    def __init__(
        self, path: str | Path, *, seed: int = 0, per_table: int = 120, attempts: int = 300
    ):
        self.path = Path(path)
        self.world, self.catalog, self.report = mine_world(path, seed=seed, per_table=per_table)
        if not self.catalog.anchors:
            raise NothingToMine(
                f"{self.path}: no column can name a row a task starts from: a task needs a unique "
                "text column (an email, a code) or a name plus a second column that tells "
                "namesakes apart; no tasks can be made"
            )
        self.sampler = TaskSampler(self.catalog, initial_state(self.world), self.world)
        self.attempts = attempts
        self.misses: list[str] = []
        self.families = tuple(f for f in FAMILIES if any(self.sampler.reach(f)))

    def propose(self, request: ProposalRequest) -> list[TaskSpec]:
        """Up to ``request.n`` tasks in the mined world (see :class:`ProposalRequest`).

        Raises:
            NothingToMine: the catalog has no walk that ends in a question or a write.
        """
        self.misses = []
        return [t for i in range(request.n) if (t := self.draw(request, i)) is not None]

    def draw(self, request: ProposalRequest, index: int) -> TaskSpec | None:
        """Task ``index`` of ``request``, or None with the miss recorded in :attr:`misses`.

        Raises:
            NothingToMine: the catalog has no walk that ends in a question or a write.
        """
        if not self.families:
            raise NothingToMine(
                f"{self.path}: no table has a key and something to ask or do; no tasks can be made"
            )
        wanted: Sequence[str] = [
            f for f in (request.families or self.families) if f in self.families
        ]
        if not wanted:
            raise NothingToMine(
                f"{self.path}: none of the families {request.families} can be made here; try {', '.join(self.families)}"
            )
        level = request.level
        if level is not None:
            wanted = [f for f in wanted if level in FAMILY_LEVELS[f]] or list(wanted)
        target = Target.of(level, request.features, wanted)
        rng = random.Random(derive_seed(request.seed, "task", index))
        provenance = {
            "synthesizer": "miner",
            "source": self.path.name,
            "seed": request.seed,
            "index": index,
        }
        try:
            return self.sampler.sample(rng, target, attempts=self.attempts, provenance=provenance)
        except Unfit as exc:
            self.misses.append(str(exc))
            return None
        except (
            sqlite3.Error,
            ValueError,
            TypeError,
            KeyError,
        ) as exc:  # data coevo cannot plan over
            self.misses.append(
                f"task {index}: the planner failed on this data ({type(exc).__name__}: {exc})"
            )
            return None
