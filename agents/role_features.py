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
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final

import numpy as np
from coevo.agents.action_space import Choice, Source, instruction_values
from coevo.arena.outcomes import Observation
from coevo.arena.spec import ToolCall

__all__ = ["Context", "FeatureHasher", "answer_features", "tool_features", "value_features"]

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
        return np.fromiter((self(k) for k in keys), dtype=np.int64, count=len(keys))


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
    kinds: tuple[tuple[str, str], ...] = ()
    calls: list[ToolCall] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)

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

    def writes_done(self) -> int:
        """Write calls that succeeded so far."""
        return sum(
            1
            for c, o in zip(self.calls, self.observations, strict=True)
            if o.ok and self.effects.get(c.tool) == "write"
        )


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
        for param, schema, link in zip(choice.params, choice.schemas, links, strict=True):
            feats.append(("t.link", param, link))
            wanted = "integer" if schema.get("type") in ("integer", "number") else "string"
            feats += [("t.pk", param, kind) for typ, kind in ctx.kinds if typ == wanted]
            if "enum" in schema:
                feats.append(("t.enum", param))
        out.append(feats)
    return out


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


def _row_facts(source: Source, ctx: Context) -> list[tuple[Any, ...]]:
    """Facts about the row an observation value came from: is it the one the instruction points at?"""
    obs = ctx.observations[len(ctx.observations) - 1 - source.age]
    rows = obs.rows or []
    row = rows[source.row]
    count = len(rows)
    position = (
        "only"
        if count == 1
        else ("first" if source.row == 0 else ("last" if source.row == count - 1 else "mid"))
    )
    hits = [_mentions(row, ctx) for row in rows]
    mine = hits[source.row]
    best = max(hits)
    feats: list[tuple[Any, ...]] = [
        ("r.pos", position),
        ("r.count", _bucket(count)),
        ("r.mention", _bucket(mine)),
        ("r.best", mine == best and mine > 0, hits.count(best) == 1),
    ]
    if count > 1:
        columns = obs.columns or ()
        for index, column in enumerate(columns):
            cells = [r[index] for r in rows]
            if not all(isinstance(c, (int, float, str)) and not isinstance(c, bool) for c in cells):
                continue
            if all(isinstance(c, str) for c in cells) and not all(c[:2].isdigit() for c in cells):
                continue  # only numbers and dates are ordered
            mine_cell = row[index]
            try:
                top, bottom = max(cells), min(cells)
            except TypeError:
                continue
            if top == bottom:
                continue
            named = bool(_tokens(column) & set(ctx.words))
            for direction, extreme in (("max", top), ("min", bottom)):
                if mine_cell == extreme and cells.count(extreme) == 1:
                    kind = "date" if isinstance(extreme, str) else "number"
                    for word in ctx.superlatives or ("none",):
                        feats.append(("r.ext", direction, word, kind, named))
    return feats


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
            ("i.order", _bucket(source.row), source.kind),
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
        feats += _row_facts(source, ctx)
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
