"""What a procedural domain is: the knobs of its worlds, a seeded world builder, the catalog of its tasks.

Each domain is a package (``retail/``, ``airline/``, ...) that defines one
:class:`Domain`. ``retail/`` is the template new domains copy, one module a part:

* ``schema.py``: the ``SCHEMA`` (CREATE statements), the value sets its CHECKs,
  tools and catalog share, and ``COLUMNS``, each table's columns in the order
  its rows are written;
* ``world.py``: its **knobs**, a frozen dataclass (``RetailKnobs``) of the
  numbers that shape a world (how many rows of each kind, the share of
  same-name "twins" that act as distractors, the draw pools of list lengths),
  one docstring per field, with the domain's values as defaults, and
  ``DEFAULT_KNOBS``, an instance of it; the reference data rows are drawn from
  (product names, airports, departments); and ``build_world(seed,
  knobs=DEFAULT_KNOBS)``, which fills the schema with realistic rows,
  deterministic by seed, one small generator a table (or a group of tables
  made together), reading every such number from the knobs rather than
  writing it inline;
* ``tools.py``: the ``TOOLS``;
* ``catalog.py``: the :class:`~coevo.agents.synthesizers.catalog.Catalog` that
  tells the planner how to name rows, walk foreign keys, ask and act;
* ``__init__.py``: ``DOMAIN``, the :class:`Domain` record of all of these.

This module holds what the domains share: the fixed clock and its dates, the
people drawer, the tool constructors, the draw-until-new and renumbering
helpers, and :func:`make_world`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import astuple, dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final, TypeVar

from coevo.agents.synthesizers.catalog import Catalog
from coevo.agents.synthesizers.procedural.names import EMAIL_DOMAINS, FIRST_NAMES, LAST_NAMES
from coevo.arena.spec import TableData, ToolSpec, WorldSpec

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "NOW",
    "TODAY",
    "Domain",
    "People",
    "day",
    "draw_new",
    "make_world",
    "next_weekday",
    "read_tool",
    "renumber",
    "stamp",
    "weighted",
    "write_tool",
]

T = TypeVar("T")

NOW = datetime(2026, 11, 29, 12, 0, 0)
"""Every procedural world's fixed clock."""


@dataclass(frozen=True, kw_only=True)
class Domain:
    """A procedural domain (its package's ``DOMAIN``).

    Attributes:
        name: the domain's name (``--domain``).
        description: one line for ``coevo synth --list`` and ``docs/synthesis.md``.
        build_world: seed → a world record (deterministic by seed), shaped by :attr:`knobs`.
        catalog: how the planner makes tasks in this domain's worlds.
        knobs: the numbers that shape the domain's worlds (row counts, the share
            of same-name twins, list lengths): an instance of the frozen
            dataclass the domain's ``world.py`` declares (``RetailKnobs``, ...), whose
            fields are documented there; :attr:`build_world` builds with these.
    """

    name: str
    description: str
    build_world: Callable[[int], WorldSpec]
    catalog: Catalog
    knobs: DataclassInstance


@lru_cache(maxsize=16_384)
def day(offset: int) -> str:
    """The ISO date ``offset`` days from the fixed clock (negative: in the past)."""
    return (NOW.date() + timedelta(days=offset)).isoformat()


TODAY: Final = day(0)
"""The fixed clock's date (ISO)."""


def next_weekday(offset: int) -> int:
    """The day offset ``offset`` moved forward to the next weekday (Monday to Friday; unchanged if one)."""
    weekday = (NOW.weekday() + offset) % 7
    return offset + (7 - weekday if weekday >= 5 else 0)


def stamp(offset_days: int, minutes: int) -> str:
    """``YYYY-MM-DD HH:MM``, ``minutes`` after midnight ``offset_days`` days from the fixed clock."""
    days, within = divmod(minutes, 24 * 60)
    return f"{day(offset_days + days)} {within // 60:02d}:{within % 60:02d}"


class People:
    """Draws people's names and unique emails, with a share of same-name "twins" (distractors).

    Args:
        rng: the world's random generator.
        twin_share: the chance that a name already given is given again (a
            domain's knob: ``RetailKnobs.twin_share``, ...).
    """

    def __init__(self, rng: random.Random, *, twin_share: float):
        self.rng = rng
        self.twin_share = twin_share
        self.names: list[str] = []
        self.emails: set[str] = set()

    def name(self) -> str:
        """A full name; sometimes one already given (a different person with the same name)."""
        if self.names and self.rng.random() < self.twin_share:
            return self.rng.choice(self.names)
        full = f"{self.rng.choice(FIRST_NAMES)} {self.rng.choice(LAST_NAMES)}"
        self.names.append(full)
        return full

    def email(self, full_name: str) -> str:
        """A unique, plausible email for ``full_name``."""
        first, *rest = full_name.lower().split()
        last = re.sub(r"[^a-z]", "", "".join(rest)) or "x"
        patterns = (f"{first}.{last}", f"{first[0]}{last}", f"{first}{last[:1]}", f"{last}.{first}")
        for attempt in range(50):
            local = patterns[attempt % len(patterns)] + ("" if attempt < 4 else str(attempt))
            address = f"{local}@{self.rng.choice(EMAIL_DOMAINS)}"
            if address not in self.emails:
                self.emails.add(address)
                return address
        raise RuntimeError("could not draw a unique email")  # pragma: no cover


def _object_schema(params: dict[str, Any], required: Sequence[str] | None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": params,
        "required": list(params if required is None else required),
    }


def read_tool(
    name: str,
    description: str,
    params: dict[str, Any],
    sql: str,
    required: Sequence[str] | None = None,
) -> ToolSpec:
    """A read tool; ``params`` maps a parameter to its JSON Schema (all required unless ``required``)."""
    return ToolSpec(
        name=name,
        description=description,
        parameters=_object_schema(params, required),
        sql=[sql],
        effect="read",
    )


def write_tool(
    name: str,
    description: str,
    params: dict[str, Any],
    sql: Sequence[str],
    required: Sequence[str] | None = None,
) -> ToolSpec:
    """A write tool (its statements run as one transaction)."""
    return ToolSpec(
        name=name,
        description=description,
        parameters=_object_schema(params, required),
        sql=list(sql),
        effect="write",
    )


def draw_new(draw: Callable[[], T], taken: set[T]) -> T:
    """A value of ``draw()`` not in ``taken`` (drawn again until it is new), added to ``taken``."""
    value = draw()
    while value in taken:
        value = draw()
    taken.add(value)
    return value


def weighted(rng: random.Random, weights: Mapping[T, float]) -> T:
    """A key of ``weights`` drawn with the chance its weight gives it (one ``rng.choices`` draw)."""
    return rng.choices(list(weights), list(weights.values()))[0]


def renumber(rows: list[list[Any]]) -> list[list[Any]]:
    """``rows`` with their first column (the id) set to 1, 2, 3, ... in their order (in place)."""
    for n, row in enumerate(rows, start=1):
        row[0] = n
    return rows


def table_rows(records: Iterable[Any]) -> list[list[Any]]:
    """Typed rows as a world's table holds them: each a dataclass whose fields are the table's columns, in order."""
    return [list(astuple(record)) for record in records]


def make_world(
    domain: str,
    schema: Sequence[str],
    columns: Mapping[str, Sequence[str]],
    rows: Mapping[str, list[list[Any]]],
    tools: Sequence[ToolSpec],
) -> WorldSpec:
    """A world record from a schema, each table's columns and rows (in the order of ``columns``) and tools."""
    return WorldSpec(
        domain=domain,
        now=NOW.isoformat(),
        schema_sql=list(schema),
        data={
            name: TableData(columns=list(cols), rows=rows[name]) for name, cols in columns.items()
        },
        tools=list(tools),
    )
