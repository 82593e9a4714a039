"""Hashed features of *roles*, never of raw values, for a policy over the :class:`ActionSpace`.

A feature is a small tuple naming a relation, e.g. ``("o.pc", "cancel_order",
"order_id", "id")`` (the parameter ``order_id`` of ``cancel_order`` fed from an
observation's ``id`` column) or ``("o.ext", "min", "lowest")`` (the source row
holds the least value of some column, and the instruction says *lowest*). Ids,
names and amounts never appear in a feature, so what a policy learns in one
world carries over to a world with other rows: a policy that memorised ids
would have nothing to go on.

Tuples are hashed with CRC-32 (stable across processes and Python versions,
unlike :func:`hash`) into a fixed number of buckets.

The *priors* (:func:`tool_prior`, :func:`value_prior`, :func:`answer_prior`)
are a careful reader's first guesses, as scores a policy adds to its own: a
key just looked up for the parameter it names, an instruction value of the
kind a parameter wants, a tool the instruction names, the row the
instruction describes. They make multi-step tasks reachable by sampling; the
learnt weights correct them.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Final

import numpy as np
from coevo.agents.action_space import Choice, Source, instruction_values
from coevo.arena.outcomes import Observation
from coevo.arena.spec import ToolCall

__all__ = [
    "Context",
    "FeatureHasher",
    "answer_features",
    "answer_prior",
    "tool_features",
    "tool_prior",
    "value_features",
    "value_prior",
]

_WORD: Final = re.compile(r"[A-Za-z]+")
_STOPWORDS: Final = frozenset(
    [
        "the",
        "a",
        "an",
        "of",
        "to",
        "for",
        "in",
        "on",
        "at",
        "by",
        "with",
        "and",
        "or",
        "is",
        "it",
        "its",
        "their",
        "his",
        "her",
        "that",
        "this",
        "be",
        "as",
        "from",
        "what",
        "which",
        "who",
        "whose",
        "value",
        "exactly",
        "system",
        "shows",
        "answer",
    ]
)
_NOT_SUPERLATIVE: Final = frozenset(
    [
        "request",
        "interest",
        "rest",
        "guest",
        "test",
        "contest",
        "forest",
        "honest",
        "modest",
        "suggest",
        "invest",
        "protest",
    ]
)
_ORDER_WORDS: Final = frozenset(
    ["first", "last", "least", "most", "latest", "recent", "next", "top"]
)


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 4 and word.endswith("s") and not word.endswith("ss") else word


@lru_cache(maxsize=65536)
def _tokens(name: str) -> frozenset[str]:
    return frozenset(_stem(w.lower()) for w in _WORD.findall(name.replace("_", " ")) if len(w) > 1)


class FeatureHasher:
    """Feature tuples to bucket indices (CRC-32 of the tuple's ``repr``), cached.

    Args:
        dim: the number of buckets (the policy's weight count).
    """

    def __init__(self, dim: int):
        self.dim = dim
        self._cache: dict[tuple[Any, ...], int] = {}

    def __call__(self, key: tuple[Any, ...]) -> int:
        """The bucket of ``key``."""
        index = self._cache.get(key)
        if index is None:
            index = zlib.crc32(repr(key).encode()) % self.dim
            if len(self._cache) < 2_000_000:
                self._cache[key] = index
        return index

    def indices(self, keys: Sequence[tuple[Any, ...]]) -> np.ndarray:
        """The bucket of every key, as an int array."""
        found = list(map(self._cache.get, keys))
        if None in found:
            found = [self(k) if i is None else i for k, i in zip(keys, found, strict=True)]
        return np.array(found, dtype=np.int64)


@dataclass
class Context:
    """What a policy knows at one step of an episode: the instruction's words and the calls so far.

    Attributes:
        instruction: the task's instruction.
        words: the instruction's words (lower case, light stemming), without
            stop words and without the words of the values it states (names,
            codes), so that no feature ever holds a value.
        superlatives: the words that order rows (*lowest*, *most recent*, *earliest*).
        asks: whether the instruction is a question.
        mentioned: the instruction in lower case, to test whether a cell is stated in it.
        quoted: the values the instruction quotes ('damaged in transit'): free text it asks for, however often.
        kind_order: each stated value's place among the stated values of its kind
            (the first name, the second name), whatever other kinds come between.
        calls: the tool calls made so far (``submit`` excluded).
        observations: what each returned, aligned with :attr:`calls`.
        effects: each tool's effect (``read`` or ``write``).
    """

    instruction: str
    effects: dict[str, str]
    words: tuple[str, ...] = ()
    superlatives: tuple[str, ...] = ()
    asks: bool = False
    mentioned: str = ""
    stated: frozenset[Any] = frozenset()
    quoted: frozenset[Any] = frozenset()
    kind_order: dict[Any, int] = field(default_factory=dict)
    kinds: tuple[tuple[str, str], ...] = ()
    calls: list[ToolCall] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    _hits: dict[int, tuple[Observation, list[int]]] = field(default_factory=dict, repr=False)
    _more: tuple[int, tuple[str | None, int]] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, instruction: str, effects: dict[str, str]) -> Context:
        """The context at the start of an episode of ``instruction``."""
        values = instruction_values(instruction)
        value_words = {w.lower() for v, _ in values if isinstance(v, str) for w in _WORD.findall(v)}
        words: list[str] = []
        for word in _WORD.findall(instruction):
            low = word.lower()
            if len(low) < 3 or low in _STOPWORDS or low in value_words:
                continue
            stem = _stem(low)
            if stem not in words:
                words.append(stem)
        superlatives = tuple(
            w
            for w in words
            if w in _ORDER_WORDS or (w.endswith("est") and len(w) > 4 and w not in _NOT_SUPERLATIVE)
        )
        return cls(
            instruction=instruction,
            effects=effects,
            words=tuple(words),
            superlatives=superlatives,
            asks="?" in instruction,
            mentioned=instruction.lower(),
            stated=frozenset(v for v, _ in values),
            quoted=frozenset(v for v, kind in values if kind == "quoted"),
            kind_order=_kind_order(values),
            # a sorted tuple, not a set: feature order must not depend on the hash seed
            kinds=tuple(
                sorted(
                    {("integer" if isinstance(v, int) else "string", kind) for v, kind in values}
                )
            ),
        )

    @property
    def step(self) -> int:
        """Tool calls made so far."""
        return len(self.calls)

    def hits(self, obs: Observation) -> list[int]:
        """Per row of ``obs``, how many of its cells the instruction states (cached per observation)."""
        found = self._hits.get(id(obs))
        if found is None or found[0] is not obs:
            found = self._hits[id(obs)] = (obs, [_mentions(row, self) for row in obs.rows or ()])
        return found[1]

    def writes_done(self) -> int:
        """Write calls that succeeded so far."""
        return sum(
            1
            for c, o in zip(self.calls, self.observations, strict=True)
            if o.ok and self.effects.get(c.tool) == "write"
        )


def _kind_order(values: Sequence[tuple[Any, str]]) -> dict[Any, int]:
    seen: dict[str, int] = {}
    out: dict[Any, int] = {}
    for value, kind in values:
        out[value] = seen.get(kind, 0)
        seen[kind] = out[value] + 1
    return out


def _bucket(n: int) -> str:
    return str(n) if n < 3 else ("3-5" if n <= 5 else "6+")


def _rows(obs: Observation | None) -> str:
    if obs is None:
        return "start"
    if not obs.ok:
        return "error"
    if obs.rows is None:
        return f"changed:{_bucket(obs.rowcount or 0)}"
    return f"rows:{_bucket(len(obs.rows))}"


def tool_features(choices: Sequence[Choice | None], ctx: Context) -> list[list[tuple[Any, ...]]]:
    """Features of each choice: calling its tool now, or submitting (``None``)."""
    last = ctx.observations[-1] if ctx.observations else None
    last_tool = ctx.calls[-1].tool if ctx.calls else "start"
    last_effect = ctx.effects.get(last_tool, "start")
    writes = _bucket(ctx.writes_done())
    step = _bucket(ctx.step)
    shape = _rows(last)
    words = set(ctx.words)
    shows = _shows(last, words)
    more_tool, more = _more(ctx)
    times: dict[str, int] = {}
    for call in ctx.calls:
        times[call.tool] = times.get(call.tool, 0) + 1
    out: list[list[tuple[Any, ...]]] = []
    for choice in choices:
        if choice is None:
            feats: list[tuple[Any, ...]] = [
                ("s.bias",),
                ("s.shows", ctx.asks, shows, shape),
                ("s.asks", ctx.asks, writes, shape),
                ("s.last", ctx.asks, last_effect, shape),
                ("s.step", ctx.asks, step),
            ]
            feats += [("s.word", w, writes) for w in ctx.words]
            if more_tool is not None:
                feats.append(("s.more", more > 0))
                feats += [("s.mword", w, more > 0) for w in ctx.words]
            out.append(feats)
            continue
        name, effect = choice.tool, choice.effect
        overlap = len(_tokens(name) & words)
        links = [_link(p, last, last_tool) for p in choice.params]
        called = name in times
        feats = [
            ("t.bias", name, called),
            ("t.effect", effect, ctx.asks),
            ("t.overlap", effect, _bucket(overlap)),
            ("t.step", effect, step),
            ("t.prev", name, last_tool),
            ("t.after", effect, last_effect, shape),
            ("t.times", effect, _bucket(times.get(name, 0))),
            ("t.writes", effect, writes, ctx.asks),
        ]
        feats += [("t.word", name, w, called) for w in ctx.words]
        feats.append(("t.feed", effect, max(links), shape))
        if more_tool is not None:
            feats.append(("t.more", name == more_tool, more > 0))
        for param, schema, link in zip(choice.params, choice.schemas, links, strict=True):
            feats.append(("t.link", param, link))
            wanted = "integer" if schema.get("type") in ("integer", "number") else "string"
            feats += [("t.pk", param, kind) for typ, kind in ctx.kinds if typ == wanted]
            if "enum" in schema:
                feats.append(("t.enum", param))
        out.append(feats)
    return out


def _more(ctx: Context) -> tuple[str | None, int]:
    """:func:`_find_more`, once per step."""
    if ctx._more is None or ctx._more[0] != len(ctx.calls):
        ctx._more = (len(ctx.calls), _find_more(ctx))
    return ctx._more[1]


def _find_more(ctx: Context) -> tuple[str | None, int]:
    """The last write that went through, and how many rows of the listing that fed it are left for it.

    A row is left when the instruction describes it as well as the written
    row and it has not had the write yet ("open a return for *every*
    delivered order"); whether to go on is for the policy to learn.
    """
    for i in range(len(ctx.calls) - 1, -1, -1):
        call, obs = ctx.calls[i], ctx.observations[i]
        if ctx.effects.get(call.tool) != "write":
            continue
        if not obs.ok or not (obs.rows or obs.rowcount):
            return None, 0
        for param, value in call.arguments.items():
            if not isinstance(value, int) or isinstance(value, bool):
                continue
            for listing in reversed(ctx.observations[:i]):
                rows = listing.rows or []
                if len(rows) < 2 or not listing.columns:
                    continue
                for index, column in enumerate(listing.columns):
                    if not _keyed(param, column, listing.tool or ""):
                        continue
                    at = next((r for r, row in enumerate(rows) if row[index] == value), None)
                    if at is None:
                        continue
                    done = {c.arguments.get(param) for c in ctx.calls if c.tool == call.tool}
                    hits = ctx.hits(listing)
                    left = sum(
                        1
                        for r, row in enumerate(rows)
                        if hits[r] == hits[at] and row[index] not in done
                    )
                    return call.tool, left
        return call.tool, 0
    return None, 0


def _keyed(param: str, column: str, tool: str) -> bool:
    """Whether ``column`` of ``tool``'s result is the key ``param`` names (``order_id``: an orders tool's ``id``)."""
    p, c = param.lower(), column.lower()
    return c == p or (c == "id" and p.endswith("_id") and p.removesuffix("_id")[:5] in tool.lower())


def _shows(obs: Observation | None, words: set[str]) -> str:
    """Whether an observation has a column the instruction names ("the *carrier* of ...")."""
    if obs is None or not obs.ok or not obs.columns or not obs.rows:
        return "nothing"
    best = "none"
    for column in obs.columns:
        tokens = _tokens(column)
        if tokens and tokens <= words:
            return "named"
        if tokens & words:
            best = "partly"
    return best


def _link(param: str, last: Observation | None, last_tool: str) -> int:
    """How an observation can feed ``param``: 3 by a column of its name, 2 by the id of its entity, 1 by some id.

    0: not at all.
    """
    if last is None or not last.ok or not last.columns or not last.rows:
        return 0
    low = param.lower()
    best = 0
    for column in last.columns:
        c = column.lower()
        if c == low:
            return 3
        if c == "id" and low.endswith("_id"):
            entity = low.removesuffix("_id")[:5]
            best = max(best, 2 if entity in last_tool.lower() else 1)
    return best


def _row_facts(source: Source, ctx: Context, keyed: bool | None = None) -> list[tuple[Any, ...]]:
    """Facts about the row an observation value came from: is it the one the instruction points at?

    Only facts relative to the other rows (the best match, an extreme), so
    that they mean the same in a listing of one row or of ten. For a value
    given to a parameter, ``keyed`` (whether the source column is the
    parameter's key) is part of each fact: the customer's row being the best
    match says nothing about an ``order_id``.
    """
    obs = ctx.observations[len(ctx.observations) - 1 - source.age]
    rows = obs.rows or []
    row = rows[source.row]
    count = len(rows)
    position = (
        "only"
        if count == 1
        else ("first" if source.row == 0 else ("last" if source.row == count - 1 else "mid"))
    )
    hits = ctx.hits(obs)
    mine = hits[source.row]
    best = max(hits)
    feats: list[tuple[Any, ...]] = [
        ("r.pos", position),
        ("r.best", mine == best and mine > 0, hits.count(best) == 1),
    ]
    if count > 1:
        # an extreme among the rows the instruction describes best ("the cheapest *delivered* order")
        among = [r for r in range(count) if hits[r] == best] if mine == best else range(count)
        for index, column in enumerate(obs.columns or ()):
            cells = [rows[r][index] for r in among]
            ordered = _ordered(cells, row[index])
            if ordered is None:
                continue
            cells, mine_cell = ordered
            top, bottom = max(cells), min(cells)
            if top == bottom:
                continue
            named = bool(_tokens(column) & set(ctx.words))
            for direction, extreme in (("max", top), ("min", bottom)):
                if mine_cell == extreme and cells.count(extreme) == 1:
                    kind = "date" if isinstance(extreme, str) else "number"
                    for word in ctx.superlatives or ("none",):
                        feats.append(("r.ext", direction, word, kind, named))
    if keyed is None:
        return feats
    return [(f[0], keyed, *f[1:]) for f in feats]


def _ordered(cells: list[Any], mine: Any) -> tuple[list[Any], Any] | None:
    """Cells as comparable values (numbers, amounts written as text, ISO dates), with the row's own; None if unordered."""
    if len(cells) < 2 or not all(
        isinstance(c, (int, float, str)) and not isinstance(c, bool) for c in cells
    ):
        return None
    if not all(isinstance(c, str) for c in cells):
        return (cells, mine) if not any(isinstance(c, str) for c in cells) else None
    if not all(c[:2].isdigit() for c in cells):
        return None  # only numbers and dates are ordered
    try:
        return [float(c) for c in cells], float(mine)  # "92.96" is less than "2334.93"
    except ValueError:
        return cells, mine  # dates: ISO text sorts as it reads


def _mentions(row: Sequence[Any], ctx: Context) -> int:
    hits = 0
    for cell in row:
        if isinstance(cell, str):
            if len(cell) > 2 and cell.lower() in ctx.mentioned:
                hits += 1
        elif isinstance(cell, int) and not isinstance(cell, bool) and cell in ctx.stated:
            hits += 1
    return hits


def value_features(
    tool: str, param: str, value: Any, source: Source, ctx: Context, rank: int = 0
) -> list[tuple[Any, ...]]:
    """Features of giving ``value`` (from ``source``) to ``param`` of ``tool``.

    ``rank``: the value's place in the action space's own ranking (0: best fit by name and recency).
    """
    effect = ctx.effects.get(tool, "read")
    used_here = sum(
        1
        for c, o in zip(ctx.calls, ctx.observations, strict=True)
        if c.tool == tool and o.ok and c.arguments.get(param) == value
    )
    used = any(value in c.arguments.values() for c in ctx.calls)
    feats: list[tuple[Any, ...]] = [
        ("v.used", effect, used, _bucket(used_here)),
        ("v.rank", source.origin, _bucket(rank)),
    ]
    for c, o in zip(ctx.calls, ctx.observations, strict=True):
        if c.tool == tool and c.arguments.get(param) == value:
            feats.append(("v.again", effect, _rows(o)))
    if source.origin == "instruction":
        feats += [
            ("i.kind", source.kind),
            ("i.param", param, source.kind),
            ("i.tool", tool, param, source.kind),
            ("i.order", _bucket(ctx.kind_order.get(value, source.row)), source.kind),
        ]
        feats += [("i.ptok", source.kind, t) for t in sorted(_tokens(param))]
    elif source.origin == "enum":
        feats += [("e.said", param, source.kind)]
    else:
        column = source.column or ""
        param_low, column_low = param.lower(), column.lower()
        entity = param_low.removesuffix("_id")
        keyed = column_low == param_low or (
            column_low == "id"
            and param_low.endswith("_id")
            and entity[:5] in (source.tool or "").lower()
        )
        feats += [
            ("o.pc", tool, param, column),
            ("o.src", tool, param, source.tool),
            ("o.key", keyed, isinstance(value, int), _bucket(source.age)),
            ("o.names", bool(_tokens(param) & _tokens(column))),
            (
                "o.link",
                _link(
                    param,
                    ctx.observations[len(ctx.observations) - 1 - source.age],
                    source.tool or "",
                ),
                column.lower() == param_low,
            ),
        ]
        feats += _row_facts(source, ctx, keyed)
    return feats


def answer_features(
    answer: str | None, source: Source | None, ctx: Context
) -> list[tuple[Any, ...]]:
    """Features of submitting ``answer`` (None: no answer)."""
    if answer is None or source is None:
        return [("a.none", ctx.asks)]
    column = source.column or ""
    column_words = _tokens(column)
    overlap = len(column_words & set(ctx.words))
    feats: list[tuple[Any, ...]] = [
        ("a.col", column),
        ("a.overlap", _bucket(overlap), overlap == len(column_words)),
        ("a.age", _bucket(source.age)),
        ("a.tool", source.tool),
        ("a.stated", answer.lower() in ctx.mentioned),
        ("a.id", column.lower() == "id" or column.lower().endswith("_id")),
    ]
    feats += [("a.word", column, w) for w in ctx.words]
    feats += _row_facts(source, ctx)
    return feats


# ---- priors: a careful reader's first guesses, added to the policy's scores ----

_KIND_HINTS: Final = {
    "email": ("email",),
    "name": ("name", "title"),
    "code": ("number", "code", "sku", "locator", "ticket", "mrn"),
}
"""Words of a parameter's name that say which kind of stated value it takes."""


def _gap(source: Source, ctx: Context) -> int:
    """How many fewer stated values the source row holds than the best row of its observation."""
    hits = ctx.hits(ctx.observations[len(ctx.observations) - 1 - source.age])
    return max(hits) - hits[source.row] if len(hits) > 1 else 0


def value_prior(tool: str, param: str, value: Any, source: Source, ctx: Context) -> float:
    """A first guess at giving ``value`` to ``param`` of ``tool`` (higher is likelier).

    A key just looked up for the parameter that names it (``order_id`` from
    an orders listing's ``id``: 3, another entity's key: 1), less for older
    observations and for rows the instruction describes less well than
    another; a stated value of the kind the parameter wants (an email for
    ``email``, a quoted text for a free-text ``reason``: 3); an enum value
    the instruction says (3); −2 for the value this parameter of this tool
    already had, unless the instruction states it and it is not a key (a
    reason given to every order, an email looked up again). A quoted value
    that a write echoed back counts as the instruction's.
    """
    name = param.lower()
    if source.origin == "observation" and isinstance(value, str) and value in ctx.quoted:
        source = replace(source, origin="instruction", kind="quoted")  # a write echoing it back
    again = (source.origin != "instruction" or name.endswith("_id")) and any(
        c.tool == tool and o.ok and c.arguments.get(param) == value
        for c, o in zip(ctx.calls, ctx.observations, strict=True)
    )
    score = -2.0 if again else 0.0
    if source.origin == "observation":
        if isinstance(value, int) and not isinstance(value, bool) and name.endswith("_id"):
            score += 3.0 if _keyed(param, source.column or "", source.tool or "") else 1.0
        return score - 0.5 * source.age - 2.0 * _gap(source, ctx)
    if source.origin == "instruction":
        wanted = [kind for kind, hints in _KIND_HINTS.items() if any(h in name for h in hints)]
        if source.kind in wanted or (not wanted and source.kind == "quoted"):
            return score + 3.0
        return score + (0.0 if wanted else 1.0)
    return score + (3.0 if source.kind == "said" else 0.0)


def tool_prior(choice: Choice | None, ctx: Context) -> float:
    """A first guess at calling ``choice`` now (``None``: submitting).

    Twice the share of the tool's name the instruction says; 1 when a
    parameter can be fed the key the last call just showed; 1 for the write
    just made when rows it has not had, described as well, are left; for
    ``submit``, 2 right after a write that went through when no such row is
    left (an instruction, not a question, done as asked).
    """
    if choice is None:
        if ctx.asks or not ctx.calls or ctx.effects.get(ctx.calls[-1].tool) != "write":
            return 0.0
        more_tool, more = _more(ctx)
        return 2.0 if more_tool == ctx.calls[-1].tool and more == 0 else 0.0
    tokens = _tokens(choice.tool)
    score = 2.0 * len(tokens & set(ctx.words)) / len(tokens) if tokens else 0.0
    last = ctx.observations[-1] if ctx.observations else None
    last_tool = ctx.calls[-1].tool if ctx.calls else "start"
    if max((_link(p, last, last_tool) for p in choice.params), default=0) >= 2:
        score += 1.0
    more_tool, more = _more(ctx)
    if more_tool == choice.tool and more > 0:
        score += 1.0
    return score


def answer_prior(answer: str | None, source: Source | None, ctx: Context) -> float:
    """A first guess at answering ``answer``: 3 × the share of its column's name the question says, less for worse rows."""
    if answer is None or source is None:
        return 0.0
    tokens = _tokens(source.column or "")
    share = len(tokens & set(ctx.words)) / len(tokens) if tokens else 0.0
    return 3.0 * share - 2.0 * _gap(source, ctx)
