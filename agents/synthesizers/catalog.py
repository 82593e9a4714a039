"""What a task generator knows about a world: how to name rows, walk foreign keys, ask and act.

A :class:`Catalog` describes one world's schema in task terms. Procedural
domains write theirs by hand (with natural phrasing); the miner derives one for
any SQLite database. The planner (:mod:`coevo.agents.synthesizers.planner`)
only ever reads a catalog, so both kinds of world get the same task families,
difficulty control and mutation operators.

SQL fragments in a catalog are written over one table's columns. Where a
fragment must read another table (a precondition that looks at the parent
order, say) it writes ``{db}`` before the table name, so the same text runs on
the planning database (``{db}`` empty) and in a verifier (``{db}`` =
``initial.``).

The records take keyword arguments only, so a catalogue reads as what it says:
``Hop(source="customers", target="orders", fk="customer_id", ...)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Action",
    "Anchor",
    "Attribute",
    "Catalog",
    "Filter",
    "Hop",
    "Order",
    "quote",
    "sql_literal",
]


def quote(identifier: str) -> str:
    """An SQL identifier in double quotes (embedded quotes doubled)."""
    return '"' + identifier.replace('"', '""') + '"'


def sql_literal(value: Any) -> str:
    """A Python scalar as an SQL literal (strings quoted, ``None`` as NULL)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} has no SQL literal")
        return repr(value)
    if isinstance(value, bytes):
        return "X'" + value.hex() + "'"
    return "'" + str(value).replace("'", "''") + "'"


@dataclass(frozen=True, kw_only=True)
class Anchor:
    """A way for an instruction to name the row a task starts from.

    Attributes:
        table: the table of the row.
        tool: the read tool that finds it.
        param: the tool parameter that takes :attr:`column`'s value.
        column: the column whose value the instruction states and the tool searches by.
        phrase: how the instruction names the row, formatted with the row's columns.
        disambiguate: for a column that is not unique (a name), the columns that
            tell rows with the same value apart; the phrase must state them and
            the tool must return them.
    """

    table: str
    tool: str
    param: str
    column: str
    phrase: str
    disambiguate: tuple[str, ...] = ()

    @property
    def unique(self) -> bool:
        """Whether :attr:`column` alone identifies a row."""
        return not self.disambiguate


@dataclass(frozen=True, kw_only=True)
class Order:
    """A way to pick one row of a list by an extreme value ("most recent", "most expensive").

    Attributes:
        expr: SQL over the listed table's columns to order by (``{db}`` before
            any other table it reads).
        highest: the phrase for the row with the highest value.
        lowest: the phrase for the row with the lowest value.
    """

    expr: str
    highest: str
    lowest: str


@dataclass(frozen=True, kw_only=True)
class Filter:
    """A condition on the listed rows that the instruction states ("pending", "in economy").

    Attributes:
        column: the column compared (SQL over the listed table).
        words: the phrase; placed before the noun unless :attr:`after`.
        value: the value compared with; ``None`` means "the value the target has",
            chosen when the task is made, and ``words`` is formatted with ``{value}``.
        after: put the phrase after the noun ("order *that has shipped*").

    The column may read other tables with ``{db}`` before their names; a filter whose
    value is left open needs :attr:`column` to be a plain column name, so
    the value can be read off the target row.
    """

    column: str
    words: str
    value: Any = None
    after: bool = False


@dataclass(frozen=True, kw_only=True)
class Hop:
    """One step along a foreign key, made with a tool call.

    A *down* hop lists the rows of :attr:`target` whose :attr:`fk` holds the
    source row's key (one customer → their orders); an *up* hop follows the
    source row's :attr:`fk` to the one row it references (an order item → its
    product).

    Attributes:
        source: the table the hop starts from.
        target: the table the hop reaches.
        fk: the foreign-key column (in ``target`` for a down hop, in ``source`` for an up hop).
        tool: the read tool making the hop.
        param: the tool parameter that takes the key (down) or the foreign-key value (up).
        noun: the target row in words ("order"); :attr:`plural` for several.
        plural: the plural noun.
        down: a down hop (one to many) or an up hop (many to one).
        orders: the ways to pick one listed row by an extreme value.
        filters: conditions the instruction may state about the listed rows.
        limit: the most rows the tool returns; a list longer than this is not used.
        of: the word joining the noun to its source ("the items *in* the order").
    """

    source: str
    target: str
    fk: str
    tool: str
    param: str
    noun: str
    plural: str
    down: bool = True
    orders: tuple[Order, ...] = ()
    filters: tuple[Filter, ...] = ()
    limit: int = 50
    of: str = "of"


@dataclass(frozen=True, kw_only=True)
class Attribute:
    """Something a question task can ask about a row.

    Every tool that can reach a row of :attr:`table` (its anchor look-ups, the
    hops into it) must show the value, since a question may stop at any of them.

    Attributes:
        table: the row's table.
        expr: SQL over the table's columns giving the answer exactly as the tools show it.
        phrase: the attribute in words ("the order total").
        hint: how the answer should be written, appended to the instruction.
    """

    table: str
    expr: str
    phrase: str
    hint: str = "exactly as the system shows it"


@dataclass(frozen=True, kw_only=True)
class Action:
    """A write the instruction can ask for on the target row.

    Template fields are Python format strings. In :attr:`ask`, :attr:`instead`
    and :attr:`blocked`: ``{target}`` is the row in words and each choice its
    value as written (put quotes around free text in the template). In :attr:`check` and :attr:`frame`: ``{target}`` is an SQL
    expression for the row's key computed from the initial state, ``{key}``
    the key as a literal, ``{row[col]}`` a column of the target row as a
    literal, ``{last[table]}`` the largest rowid of a table in the initial
    state (so an insert's frame can allow new rows only: ``id > {last[returns]}``),
    each choice an SQL literal, and ``{db}`` the schema prefix of the initial
    state. Preconditions (:attr:`when`) see the world's fixed clock.

    Attributes:
        name: the action's name ("cancel").
        table: the target row's table.
        tool: the write tool.
        args: tool parameter → where its value comes from: ``"key"`` (the
            target's key), ``"col:NAME"`` (a column of the target row) or
            ``"choice:NAME"`` (a value the instruction states, from :attr:`choices`).
        when: SQL over the target row that must hold before the action (a precondition).
        ask: the request ("cancel {target}").
        check: a SELECT that holds once the action is done on the target.
        frame: table → frame rule (row condition or ``{"where", "columns"}``) the action may change.
        choices: choice name → the values the instruction may state.
        instead: the request as the other branch of a condition ("open a return for it instead").
        blocked: when the action cannot be done, as a condition ("if it has already shipped").
        bulk: the action may be asked for every matching row at once (False when
            doing it to one row changes whether it applies to the others, like
            removing items from an order that must keep one).
    """

    name: str
    table: str
    tool: str
    args: Mapping[str, str]
    when: str
    ask: str
    check: str
    frame: Mapping[str, Any]
    choices: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    instead: str = ""
    blocked: str = ""
    bulk: bool = True


@dataclass(frozen=True, kw_only=True)
class Catalog:
    """Everything the planner needs to make tasks in one world.

    Attributes:
        keys: table → the column tools use as its key.
        anchors: the ways to name a starting row.
        hops: the foreign-key steps tools can make.
        attributes: what question tasks can ask.
        actions: what action tasks can ask for.
    """

    keys: Mapping[str, str]
    anchors: tuple[Anchor, ...]
    hops: tuple[Hop, ...]
    attributes: tuple[Attribute, ...] = ()
    actions: tuple[Action, ...] = ()

    def actions_on(self, table: str) -> list[Action]:
        """The actions that can target a row of ``table``."""
        return [a for a in self.actions if a.table == table]

    def branch_pairs(self, table: str) -> list[tuple[Action, Action]]:
        """Pairs (first choice, fallback) of actions on ``table`` usable in a conditional task."""
        actions = [a for a in self.actions_on(table) if a.blocked]
        return [(a, b) for a in actions for b in self.actions_on(table) if b is not a and b.instead]
