"""Tools and a task catalog derived from any world's schema and data.

For each table with a key: ``get_<table>`` by key; ``list_<child>_by_<fk>``
along every foreign key; ``find_<table>_by_<column>`` for unique text columns
and ``search_<table>_by_<column>`` for names; ``set_<table>_<column>`` for
status-like columns (a handful of distinct short values), ``add_<table>`` for
tables that can take a row given a parent and a few stated values, and
``delete_<table>`` for rows nothing references. The catalog walks the same
foreign keys with the same tools. Everything is a pure function of the
schema and the rows, so the catalog of a mined world can be rebuilt from the
world record alone (that is how mined tasks are mutated).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field, replace
from typing import Any

from coevo.agents.synthesizers.catalog import (
    Action,
    Anchor,
    Attribute,
    Catalog,
    Filter,
    Hop,
    Order,
    quote,
)
from coevo.agents.synthesizers.mining.schema import Column, Link, SchemaGraph, Table, words
from coevo.agents.synthesizers.planner import slot
from coevo.agents.synthesizers.procedural.base import read_tool, write_tool
from coevo.arena.spec import ToolSpec

__all__ = ["Derived", "derive"]

LIST_LIMIT = 50
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


def snake(name: str) -> str:
    """An identifier as a tool-name part: ``Order Details`` → ``order_details``, ``InvoiceId`` → ``invoice_id``."""
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    text = re.sub(r"[^0-9A-Za-z]+", "_", text).strip("_").lower()
    if not text or not text[0].isalpha():
        text = "t_" + text
    return text[:30]


def singular(phrase: str) -> str:
    """A noun phrase's last word made singular, crudely (``invoice lines`` → ``invoice line``)."""
    head, _, last = phrase.rpartition(" ")
    if last.endswith("ies") and len(last) > 4:
        last = last[:-3] + "y"
    elif last.endswith(("sses", "ches", "shes", "xes")):
        last = last[:-2]
    elif last.endswith("s") and not last.endswith(("ss", "us", "is")):
        last = last[:-1]
    return f"{head} {last}".strip()


def _article(noun: str) -> str:
    return "an" if noun[:1].lower() in "aeiou" else "a"


def _plural(noun: str) -> str:
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    return noun + "s"


@dataclass
class _Profile:
    """What the data says about one column."""

    distinct: int
    nonnull: int
    texts: int
    numbers: int
    blobs: int
    dates: int
    avg_length: float
    values: list[Any] = field(default_factory=list)  # the distinct values when few


def _profile(conn: sqlite3.Connection, table: Table, column: Column) -> _Profile:
    col, tab = quote(column.name), quote(table.name)
    row = conn.execute(
        f"SELECT count(DISTINCT {col}), count({col}), "
        f"ifnull(sum(typeof({col}) = 'text'), 0), ifnull(sum(typeof({col}) IN ('integer', 'real')), 0), "
        f"ifnull(sum(typeof({col}) = 'blob'), 0), "
        f"ifnull(sum(typeof({col}) = 'text' AND {col} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*'), 0), "
        f"ifnull(avg(length(CASE WHEN typeof({col}) = 'text' THEN {col} END)), 0) FROM {tab}"
    ).fetchone()
    distinct, nonnull, texts, numbers, blobs, dates = (int(v) for v in row[:6])
    profile = _Profile(distinct, nonnull, texts, numbers, blobs, dates, float(row[6]))
    if 0 < profile.distinct <= 12:
        profile.values = [
            r[0]
            for r in conn.execute(
                f"SELECT DISTINCT {col} FROM {tab} WHERE {col} IS NOT NULL ORDER BY {col}"
            )
        ]
    return profile


@dataclass
class Derived:
    """A world's tools and the catalog that makes tasks with them."""

    tools: list[ToolSpec]
    catalog: Catalog


class _Names:
    def __init__(self) -> None:
        self.used: set[str] = set()

    def take(self, name: str) -> str:
        candidate, n = name[:60], 2
        while candidate in self.used:
            candidate, n = f"{name[:56]}_{n}", n + 1
        self.used.add(candidate)
        return candidate


def _json_type(column: Column, profile: _Profile) -> dict[str, Any]:
    if profile.nonnull and profile.numbers == profile.nonnull:
        return {"type": "integer"} if column.affinity == "INTEGER" else {"type": "number"}
    return {"type": "string"}


def _plain(name: str) -> bool:
    """Whether an identifier can appear in task templates (braces would read as placeholders)."""
    return "{" not in name and "}" not in name


def _templatable(schema: SchemaGraph) -> SchemaGraph:
    """The schema without tables and columns whose names hold braces (kept in the world, not used by tasks)."""
    tables = {
        name: replace(table, columns=tuple(c for c in table.columns if _plain(c.name)))
        for name, table in schema.tables.items()
        if _plain(name)
    }
    links = [
        link
        for link in schema.links
        if link.child in tables
        and link.parent in tables
        and all(_plain(c) for c in (*link.child_columns, *link.parent_columns))
    ]
    return replace(schema, tables=tables, links=links)


def derive(conn: sqlite3.Connection, schema: SchemaGraph) -> Derived:
    """The tools and catalog for the world whose initial state ``conn`` holds.

    Tables and columns whose names hold ``{`` or ``}`` get no tools (their
    names would read as template placeholders); their rows stay in the world.
    """
    # rows of any table (used by tasks or not) may reference a row: such rows are never deleted
    referenced = {link.parent for link in schema.links if link.parent != link.child}
    schema = _templatable(schema)
    names = _Names()
    tools: list[ToolSpec] = []
    keys: dict[str, str] = {}
    anchors: list[Anchor] = []
    hops: list[Hop] = []
    attributes: list[Attribute] = []
    actions: list[Action] = []
    profiles: dict[tuple[str, str], _Profile] = {}
    shown: dict[str, str] = {}
    get_tool: dict[str, tuple[str, str]] = {}
    fk_columns = {(link.child, c) for link in schema.links for c in link.child_columns}
    for name in sorted(schema.tables):
        table = schema.tables[name]
        if table.key is None or table.rows == 0:
            continue
        keys[name] = table.key
        for column in table.columns:
            profiles[(name, column.name)] = _profile(conn, table, column)
        parts = ["rowid AS rowid"] if table.key == "rowid" else []
        for column in table.columns:
            p = profiles[(name, column.name)]
            if p.blobs or (column.affinity == "BLOB" and p.texts + p.numbers == 0 and p.nonnull):
                parts.append(f"length({quote(column.name)}) AS {quote(column.name + '_bytes')}")
            else:
                parts.append(quote(column.name))
        shown[name] = ", ".join(parts)
        noun = singular(words(name)) or "row"
        if table.key != "rowid":
            key_col = table.column(table.key)
            assert key_col is not None
            param = snake(table.key)
            tool = names.take(f"get_{snake(name)}")
            tools.append(
                read_tool(
                    tool,
                    f"One {noun} by its {words(table.key)}.",
                    {param: _json_type(key_col, profiles[(name, table.key)])},
                    f"SELECT {shown[name]} FROM {quote(name)} WHERE {quote(table.key)} = :{param}",
                )
            )
            get_tool[name] = (tool, param)
        _anchors_of(table, profiles, names, tools, anchors, shown[name], noun, fk_columns)
        for column in table.columns:
            p = profiles[(name, column.name)]
            if (
                column.name == table.key
                or (name, column.name) in fk_columns
                or p.blobs
                or not p.nonnull
            ):
                continue
            if p.avg_length <= 60:
                attributes.append(
                    Attribute(
                        table=name, expr=quote(column.name), phrase=f"the {words(column.name)}"
                    )
                )
        _status_actions(table, profiles, names, tools, actions, noun)
        if table.key != "rowid" and name not in referenced:
            tool = names.take(f"delete_{snake(name)}")
            param = snake(table.key)
            key_col = table.column(table.key)
            assert key_col is not None
            tools.append(
                write_tool(
                    tool,
                    f"Delete one {noun} by its {words(table.key)}.",
                    {param: _json_type(key_col, profiles[(name, table.key)])},
                    [f"DELETE FROM {quote(name)} WHERE {quote(table.key)} = :{param}"],
                )
            )
            k = quote(table.key)
            actions.append(
                Action(
                    name=f"delete_{snake(name)}",
                    table=name,
                    tool=tool,
                    args={param: "key"},
                    when="1",
                    ask="delete {target}",
                    check=f"SELECT NOT EXISTS (SELECT 1 FROM {quote(name)} WHERE {k} = {{target}})",
                    frame={name: f"{k} = {{key}}"},
                )
            )
    for link in sorted(schema.links, key=lambda lk: (lk.child, lk.child_columns, lk.parent)):
        _hops_of(link, schema, keys, profiles, names, tools, hops, shown, get_tool, actions)
    actions = [_with_trigger_writes(a, schema) for a in actions]
    return Derived(
        tools=tools,
        catalog=Catalog(
            keys=keys,
            anchors=tuple(anchors),
            hops=tuple(hops),
            attributes=tuple(attributes),
            actions=tuple(actions),
        ),
    )


def _with_trigger_writes(action: Action, schema: SchemaGraph) -> Action:
    """The action with every table its tool's triggers may write framed as ``"*"``.

    A write tool's statement touches one table; the source's triggers on that
    table may write others (an audit log). Those tables may change in any way
    the trigger decides, so the frame allows it instead of failing the oracle.
    """
    written: set[str] = set()
    touched = {action.table, *action.frame}
    for table in touched:
        written |= schema.written_by_triggers(table)
    extra = {t: "*" for t in sorted(written) if t not in action.frame}
    return replace(action, frame={**action.frame, **extra}) if extra else action


def _is_label(p: _Profile) -> bool:
    return p.texts == p.nonnull and p.nonnull >= 2 and 2 <= p.avg_length <= 60 and not p.dates


def _anchors_of(
    table: Table,
    profiles: dict[tuple[str, str], _Profile],
    names: _Names,
    tools: list[ToolSpec],
    anchors: list[Anchor],
    shown: str,
    noun: str,
    fk_columns: set[tuple[str, str]],
) -> None:
    labels = [
        c
        for c in table.columns
        if c.name != table.key
        and (table.name, c.name) not in fk_columns
        and _is_label(profiles[(table.name, c.name)])
    ]
    unique = [
        c
        for c in labels
        if profiles[(table.name, c.name)].distinct == profiles[(table.name, c.name)].nonnull
    ]
    named = [
        c for c in labels if re.search("name|title", c.name, re.IGNORECASE) and c not in unique
    ]
    for column in unique[:2]:
        param = snake(column.name)
        tool = names.take(f"find_{snake(table.name)}_by_{param}")
        tools.append(
            read_tool(
                tool,
                f"Look a {noun} up by its {words(column.name)} (exact).",
                {param: {"type": "string"}},
                f"SELECT {shown} FROM {quote(table.name)} WHERE {quote(column.name)} = :{param}",
            )
        )
        anchors.append(
            Anchor(
                table=table.name,
                tool=tool,
                param=param,
                column=column.name,
                phrase=f"the {noun} whose {words(column.name)} is '{{{slot(column.name)}}}'",
            )
        )
    for column in named[:1]:
        # tell namesakes apart by a plain attribute (a city) before a unique one (an email)
        others = sorted(
            (c for c in labels if c is not column),
            key=lambda c: (c in unique, -profiles[(table.name, c.name)].distinct),
        )
        if not others:
            continue
        other = others[0]
        param = snake(column.name)
        tool = names.take(f"search_{snake(table.name)}_by_{param}")
        tools.append(
            read_tool(
                tool,
                f"Find {_plural(noun)} whose {words(column.name)} contains the text (at most 20).",
                {param: {"type": "string", "minLength": 2}},
                f"SELECT {shown} FROM {quote(table.name)} WHERE {quote(column.name)} LIKE '%' || :{param} || '%' "
                f"ORDER BY {'rowid' if table.key == 'rowid' else quote(table.key or 'rowid')} LIMIT 20",
            )
        )
        anchors.append(
            Anchor(
                table=table.name,
                tool=tool,
                param=param,
                column=column.name,
                phrase=f"the {noun} '{{{slot(column.name)}}}' whose {words(other.name)} is '{{{slot(other.name)}}}'",
                disambiguate=(other.name,),
            )
        )


def _status_columns(table: Table, profiles: dict[tuple[str, str], _Profile]) -> list[Column]:
    found = []
    for column in table.columns:
        p = profiles[(table.name, column.name)]
        if column.name == table.key or column.generated or not p.values:
            continue
        if (
            p.texts == p.nonnull
            and 2 <= p.distinct <= 12
            and p.distinct <= 0.25 * p.nonnull
            and p.avg_length <= 24
            and not p.dates
            and not re.search("name|title|email|url|phone|address", column.name, re.IGNORECASE)
        ):
            found.append(column)
    return found


def _status_actions(
    table: Table,
    profiles: dict[tuple[str, str], _Profile],
    names: _Names,
    tools: list[ToolSpec],
    actions: list[Action],
    noun: str,
) -> None:
    if table.key is None or table.key == "rowid":
        return
    key_col = table.column(table.key)
    assert key_col is not None
    for column in _status_columns(table, profiles)[:2]:
        values = [str(v) for v in profiles[(table.name, column.name)].values]
        key_param, param = snake(table.key), snake(column.name)
        if param == key_param:
            param = "new_" + param
        tool = names.take(f"set_{snake(table.name)}_{snake(column.name)}")
        tools.append(
            write_tool(
                tool,
                f"Set the {words(column.name)} of one {noun}.",
                {
                    key_param: _json_type(key_col, profiles[(table.name, table.key)]),
                    param: {"type": "string", "enum": values},
                },
                [
                    f"UPDATE {quote(table.name)} SET {quote(column.name)} = :{param} WHERE {quote(table.key)} = :{key_param}"
                ],
            )
        )
        choice = "v_" + slot(column.name)
        col, k = quote(column.name), quote(table.key)
        actions.append(
            Action(
                name=f"set_{snake(column.name)}",
                table=table.name,
                tool=tool,
                args={key_param: "key", param: f"choice:{choice}"},
                when=f"{col} IS NOT {{{choice}}}",
                ask=f"set the {words(column.name)} of {{target}} to '{{{choice}}}'",
                check=f"SELECT {col} = {{{choice}}} FROM {quote(table.name)} WHERE {k} = {{target}}",
                frame={table.name: {"where": f"{k} = {{key}}", "columns": [column.name]}},
                choices={choice: tuple(values)},
            )
        )


def _hops_of(
    link: Link,
    schema: SchemaGraph,
    keys: dict[str, str],
    profiles: dict[tuple[str, str], _Profile],
    names: _Names,
    tools: list[ToolSpec],
    hops: list[Hop],
    shown: dict[str, str],
    get_tool: dict[str, tuple[str, str]],
    actions: list[Action],
) -> None:
    if len(link.child_columns) != 1 or link.parent not in keys or link.child not in keys:
        return
    child, parent = schema.tables[link.child], schema.tables[link.parent]
    fk = link.child_columns[0]
    fk_col = child.column(fk)
    if fk_col is None:
        return
    child_noun = singular(words(child.name)) or "row"
    parent_noun = singular(words(parent.name)) or "row"
    param = snake(fk)
    tool = names.take(f"list_{snake(child.name)}_by_{param}")
    order_key = "rowid" if child.key == "rowid" else quote(child.key or "rowid")
    tools.append(
        read_tool(
            tool,
            f"The {_plural(child_noun)} of one {parent_noun} (by {words(fk)}; at most {LIST_LIMIT}).",
            {param: _json_type(fk_col, profiles[(child.name, fk)])},
            f"SELECT {shown[child.name]} FROM {quote(child.name)} WHERE {quote(fk)} = :{param} ORDER BY {order_key} LIMIT {LIST_LIMIT}",
        )
    )
    orders: list[Order] = []
    for column in child.columns:
        p = profiles[(child.name, column.name)]
        if (
            column.name == child.key
            or p.blobs
            or not p.nonnull
            or (child.name, column.name)
            in {(lk.child, c) for lk in schema.links for c in lk.child_columns}
        ):
            continue
        if p.dates == p.nonnull:  # every value ISO 8601, so text order is time order
            orders.append(Order(expr=quote(column.name), highest="most recent", lowest="earliest"))
        elif p.numbers == p.nonnull and p.distinct > 2:
            label = words(column.name)
            orders.append(
                Order(expr=quote(column.name), highest=f"highest-{label}", lowest=f"lowest-{label}")
            )
    filters = tuple(
        Filter(column=quote(c.name), words=f"with {words(c.name)} '{{value}}'", after=True)
        for c in _status_columns(child, profiles)[:2]
    )
    # Two links between the same tables (a flight's origin and destination airports), or a
    # link from a table to itself (an employee's manager): "the airport of the flight" would
    # have two readings, so such hops say which key they follow.
    ambiguous = (
        link.child == link.parent
        or sum(
            1 for other in schema.links if {other.child, other.parent} == {link.child, link.parent}
        )
        > 1
    )
    role = re.sub(r"\s*(?:id|code|key|no|number)$", "", words(fk)) or words(fk)
    hops.append(
        Hop(
            source=parent.name,
            target=child.name,
            fk=fk,
            tool=tool,
            param=param,
            noun=child_noun,
            plural=_plural(child_noun),
            orders=tuple(orders[:3]),
            filters=filters,
            limit=LIST_LIMIT,
            of=f"whose {role} is" if ambiguous else "of",
        )
    )
    parent_key = keys[parent.name]
    if link.parent_columns == (parent_key,) and parent.name in get_tool:
        get_name, get_param = get_tool[parent.name]
        hops.append(
            Hop(
                source=child.name,
                target=parent.name,
                fk=fk,
                tool=get_name,
                param=get_param,
                noun=f"{role} {parent_noun}" if ambiguous and role != parent_noun else parent_noun,
                plural=_plural(parent_noun),
                down=False,
            )
        )
    _insert_action(
        link, child, parent, profiles, names, tools, actions, child_noun, parent_noun, keys
    )


def _insert_action(
    link: Link,
    child: Table,
    parent: Table,
    profiles: dict[tuple[str, str], _Profile],
    names: _Names,
    tools: list[ToolSpec],
    actions: list[Action],
    child_noun: str,
    parent_noun: str,
    keys: dict[str, str],
) -> None:
    """``add_<child>``: a new child row for a parent, with up to two stated values."""
    fk = link.child_columns[0]
    if link.parent_columns != (keys[parent.name],) or child.without_rowid:
        return
    required = [
        c
        for c in child.columns
        if not c.generated
        and c.name != fk
        and (c.notnull and c.default is None)
        and not (c.pk and c.affinity == "INTEGER" and len(child.primary_key) == 1)
    ]
    unique_cols = {c for cols in child.unique for c in cols}
    if len(required) > 2 or any(c.name in unique_cols for c in required):
        return
    stated: list[tuple[Column, list[Any]]] = []
    for column in required:
        p = profiles[(child.name, column.name)]
        if not p.values or p.blobs:
            return
        stated.append((column, [str(v) if p.texts else v for v in p.values[:6]]))
    if not stated:
        extra = next((c for c in _status_columns(child, profiles) if c.name != fk), None)
        if extra is None:
            return
        stated = [(extra, [str(v) for v in profiles[(child.name, extra.name)].values[:6]])]
    properties: dict[str, Any] = {
        snake(fk): _json_type(child.column(fk) or required[0], profiles[(child.name, fk)])
    }
    for column, _ in stated:
        properties[snake(column.name)] = _json_type(column, profiles[(child.name, column.name)])
    if len(properties) != 1 + len(stated):
        return
    columns = [fk] + [c.name for c, _ in stated]
    tool = names.take(f"add_{snake(child.name)}")
    tools.append(
        write_tool(
            tool,
            f"Add a {child_noun} to one {parent_noun}.",
            properties,
            [
                f"INSERT INTO {quote(child.name)} ({', '.join(quote(c) for c in columns)}) "
                f"VALUES ({', '.join(':' + snake(c) for c in columns)})"
            ],
        )
    )
    ident = "rowid" if child.key == "rowid" else quote(child.key or "rowid")
    conditions = " AND ".join(f"{quote(c.name)} = {{v_{slot(c.name)}}}" for c, _ in stated)
    phrase = " and ".join(f"{words(c.name)} '{{v_{slot(c.name)}}}'" for c, _ in stated)
    args = {snake(fk): "key", **{snake(c.name): f"choice:v_{slot(c.name)}" for c, _ in stated}}
    actions.append(
        Action(
            name=f"add_{snake(child.name)}",
            table=parent.name,
            tool=tool,
            args=args,
            when="1",
            ask=f"add {_article(child_noun)} {child_noun} with {phrase} to {{target}}",
            check=(
                f"SELECT count(*) = 1 FROM {quote(child.name)} WHERE {quote(fk)} = {{target}} AND {conditions} "
                f"AND {ident} NOT IN (SELECT {ident} FROM {{db}}{quote(child.name)})"
            ),
            frame={
                child.name: (
                    f"{quote(fk)} = {{key}} AND {conditions}"
                    if child.key == "rowid"
                    else f"{ident} > {{last[{child.name}]}} AND {quote(fk)} = {{key}} AND {conditions}"
                )
            },
            choices={f"v_{slot(c.name)}": tuple(values) for c, values in stated},
        )
    )
