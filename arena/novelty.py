"""Task novelty: signatures, a distance between them, and an archive that scores new tasks.

A :class:`TaskSignature` keeps what makes two tasks alike (plan shape,
features, tools, tables, domain) and drops what does not (row keys, names,
values). :func:`distance` compares two in [0, 1]; a :class:`NoveltyArchive`
scores a task by its mean distance to the ``k`` nearest tasks seen so far
(OMNI-EPIC's interestingness, as a number); :func:`repetition_penalties` is
R-Zero's penalty for near-duplicates in a batch; :func:`diversity` and
:func:`distinct_share` measure a pool. See ``docs/novelty.md``. Nothing here
is random or depends on the order of a set or dict.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import numpy as np
from coevo.arena.difficulty import TASK_FEATURES
from coevo.arena.spec import SUBMIT, TaskSpec, WorldSpec

__all__ = [
    "NOVELTY_FORMAT",
    "REPEAT_DISTANCE",
    "WEIGHTS",
    "NoveltyArchive",
    "TaskSignature",
    "distance",
    "distances",
    "distinct_share",
    "diversity",
    "repetition_penalties",
    "signature",
]

NOVELTY_FORMAT: Final = "coevo.novelty/1"
"""The ``format`` of :meth:`NoveltyArchive.state`."""

WEIGHTS: Final[Mapping[str, float]] = {
    "plan": 0.30,
    "features": 0.25,
    "tools": 0.25,
    "schema": 0.10,
    "domain": 0.10,
}
"""The weight of each part of a signature in :func:`distance` (they sum to 1)."""

REPEAT_DISTANCE: Final = 0.05
"""Two tasks closer than this count as repeats (:func:`repetition_penalties`)."""

_SET_PARTS: Final = ("plan", "tools", "schema", "domain")
_TABLE_NAME = re.compile(
    r"^\s*CREATE\s+(?:TEMP\w*\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?[\"`\[]?([^\s\"`\]\(]+)",
    flags=re.IGNORECASE,
)


@dataclass(frozen=True)
class TaskSignature:
    """What makes two tasks alike, as plain sorted data.

    Attributes:
        domain: the world's domain, or ``None`` when the world is not at hand.
        plan: sorted tokens of the plan's shape (family, anchor, hops, picks,
            goal, choice names), or ``None`` for a task without a plan.
        features: ``(name, value)`` pairs of the task's measured features
            (those of :data:`~coevo.arena.difficulty.TASK_FEATURES` it has),
            sorted; ``None`` when it has none.
        tools: the reference solution's tool names in order, ``submit`` left out.
        schema: the world's table names, sorted, or ``None`` when the world is not at hand.
    """

    domain: str | None
    plan: tuple[str, ...] | None
    features: tuple[tuple[str, float], ...] | None
    tools: tuple[str, ...]
    schema: tuple[str, ...] | None

    def tokens(self, part: str) -> tuple[str, ...] | None:
        """The token set a part other than ``features`` is compared by (``None``: unknown).

        ``domain`` is a set of one; ``tools`` holds each call numbered by its
        repeat (``open_return#2``: the multiset counts) and each consecutive
        pair (``a>b``: the order counts).
        """
        if part == "tools":
            seen: dict[str, int] = {}
            numbered = []
            for name in self.tools:
                seen[name] = seen.get(name, 0) + 1
                numbered.append(f"{name}#{seen[name]}")
            pairs = [f"{a}>{b}" for a, b in zip(self.tools, self.tools[1:], strict=False)]
            return tuple(sorted({*numbered, *pairs}))
        if part == "domain":
            return None if self.domain is None else (self.domain,)
        value = getattr(self, part)
        return None if value is None else tuple(sorted(set(value)))

    def to_json(self) -> dict[str, Any]:
        """The signature as JSON-ready data."""
        return {
            "domain": self.domain,
            "plan": None if self.plan is None else list(self.plan),
            "features": None if self.features is None else dict(self.features),
            "tools": list(self.tools),
            "schema": None if self.schema is None else list(self.schema),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskSignature:
        """The signature stored by :meth:`to_json`."""
        plan, features, schema = data.get("plan"), data.get("features"), data.get("schema")
        return cls(
            domain=data.get("domain"),
            plan=None if plan is None else tuple(sorted(plan)),
            features=None if features is None else tuple(sorted(features.items())),
            tools=tuple(data.get("tools", ())),
            schema=None if schema is None else tuple(sorted(schema)),
        )

    def key(self) -> str:
        """A stable text key: equal signatures, equal keys (canonical JSON)."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))


Signed: TypeAlias = TaskSpec | TaskSignature
"""A task, or its signature: what the functions below accept."""


def signature(task: TaskSpec, worlds: Mapping[str, WorldSpec] | None = None) -> TaskSignature:
    """The signature of a task.

    Args:
        task: any task; a plan in ``provenance["plan"]`` (the procedural
            planner's) adds the plan's shape, without it the signature holds
            features, tools, schema and domain.
        worlds: world id → world, to look up a task whose ``world`` is an id.
            Without it (or without the id in it) the schema is unknown, the
            domain is ``provenance["domain"]`` when that is a string, and plan
            tokens scoped by an unknown domain match no other domain's.
    """
    world = task.world if isinstance(task.world, WorldSpec) else (worlds or {}).get(task.world)
    domain = world.domain if world is not None else task.provenance.get("domain")
    domain = domain if isinstance(domain, str) else None
    schema = None if world is None else _tables(world)
    plan = task.provenance.get("plan")
    features = tuple(
        (name, task.features[name]) for name in sorted(TASK_FEATURES) if name in task.features
    )
    return TaskSignature(
        domain=domain,
        plan=_plan_tokens(plan, domain) if isinstance(plan, Mapping) else None,
        features=features or None,
        tools=tuple(call.tool for call in task.solution if call.tool != SUBMIT),
        schema=schema,
    )


def _tables(world: WorldSpec) -> tuple[str, ...]:
    names = {m.group(1).lower() for s in world.schema_sql if (m := _TABLE_NAME.match(s))}
    return tuple(sorted(names | {name.lower() for name in world.data}))


def _plan_tokens(plan: Mapping[str, Any], domain: str | None) -> tuple[str, ...]:
    """The plan's shape as tokens; catalog indices are scoped by the domain (they index its catalog)."""
    scope = f"{domain or '?'}/"
    hops = [int(h) for h in plan.get("hops") or ()]
    goal = [int(g) for g in plan.get("goal") or ()]
    tokens = {f"family:{plan.get('family')}", f"hops:{len(hops)}", f"goals:{len(goal)}"}
    if plan.get("anchor") is not None:
        tokens.add(f"anchor:{scope}{plan['anchor']}")
    for j, hop in enumerate(hops):
        tokens |= {f"hop:{scope}{hop}", f"hop{j}:{scope}{hop}"}
    for j, pick in enumerate(plan.get("picks") or ()):
        if not isinstance(pick, Mapping):
            tokens.add(f"pick{j}:up")
            continue
        flags = []
        if pick.get("filter") is not None:
            flags.append("filter")
        if pick.get("order") is not None:
            flags.append("order:" + ("highest" if pick.get("highest", True) else "lowest"))
        if pick.get("every"):
            flags.append("every")
        tokens |= {f"pick{j}:{flag}" for flag in flags or ["one"]}
    tokens |= {f"goal{j}:{scope}{g}" for j, g in enumerate(goal)}
    tokens |= {f"choice:{name}" for name in (plan.get("choices") or {})}
    return tuple(sorted(tokens))


def _as_signature(item: Signed) -> TaskSignature:
    return item if isinstance(item, TaskSignature) else signature(item)


@dataclass(frozen=True)
class _Codes:
    """Signatures as arrays: per token part a 0/1 matrix over a shared vocabulary, its sizes and known-ness."""

    sets: dict[str, np.ndarray]  # part -> (n, V) float32 0/1
    sizes: dict[str, np.ndarray]  # part -> (n,) token count
    known: dict[str, np.ndarray]  # part -> (n,) bool
    features: np.ndarray  # (n, F) float64, NaN where absent

    def __len__(self) -> int:
        return len(self.features)

    def rows(self, keep: slice) -> _Codes:
        return _Codes(
            {p: m[keep] for p, m in self.sets.items()},
            {p: m[keep] for p, m in self.sizes.items()},
            {p: m[keep] for p, m in self.known.items()},
            self.features[keep],
        )

    def then(self, later: _Codes) -> _Codes:
        """These rows, then ``later``'s (encoded after them, so their vocabulary may be wider)."""
        sets = {}
        for part, matrix in self.sets.items():
            wide = np.zeros((len(self), later.sets[part].shape[1]), dtype=np.float32)
            wide[:, : matrix.shape[1]] = matrix
            sets[part] = np.concatenate([wide, later.sets[part]])
        return _Codes(
            sets,
            {p: np.concatenate([s, later.sizes[p]]) for p, s in self.sizes.items()},
            {p: np.concatenate([k, later.known[p]]) for p, k in self.known.items()},
            np.concatenate([self.features, later.features]),
        )


class _Vocabulary:
    """Token → column, per part, in order of first appearance (the layout never changes a distance)."""

    def __init__(self) -> None:
        self.columns: dict[str, dict[str, int]] = {p: {} for p in _SET_PARTS}

    def copy(self) -> _Vocabulary:
        other = _Vocabulary()
        other.columns = {p: dict(c) for p, c in self.columns.items()}
        return other

    def encode(self, sigs: Sequence[TaskSignature]) -> _Codes:
        """The signatures as arrays; their new tokens join the vocabulary."""
        n = len(sigs)
        sets, sizes, known = {}, {}, {}
        for part in _SET_PARTS:
            columns = self.columns[part]
            tokens = [s.tokens(part) for s in sigs]
            for row in tokens:
                for token in row or ():
                    columns.setdefault(token, len(columns))
            matrix = np.zeros((n, len(columns)), dtype=np.float32)
            for i, row in enumerate(tokens):
                hits = [columns[t] for t in row or ()]
                matrix[i, hits] = 1.0
            sets[part] = matrix
            sizes[part] = np.array([len(row or ()) for row in tokens], dtype=np.float64)
            known[part] = np.array([row is not None for row in tokens], dtype=bool)
        features = np.full((n, len(TASK_FEATURES)), np.nan)
        index = {name: j for j, name in enumerate(TASK_FEATURES)}
        for i, s in enumerate(sigs):
            for name, value in s.features or ():
                if name in index:
                    features[i, index[name]] = float(value)
        return _Codes(sets, sizes, known, features)


def _accumulate(
    total: np.ndarray, weight: np.ndarray, w: float, part_d: np.ndarray, mask: np.ndarray
) -> None:
    """Add one part's weighted distances where both sides know the part."""
    if mask.all():  # the usual case: no masking to do
        total += w * part_d
        weight += w
    else:
        total += w * np.where(mask, part_d, 0.0)
        weight += w * mask


def _pairwise(a: _Codes, b: _Codes, chunk: int = 128) -> np.ndarray:
    """The (len(a), len(b)) matrix of distances; both encoded by one (growing) vocabulary."""
    out = np.empty((len(a), len(b)))
    b_present, b_values = ~np.isnan(b.features), np.nan_to_num(b.features)
    for start in range(0, len(a), chunk):
        rows = slice(start, start + chunk)
        total = np.zeros((len(a.features[rows]), len(b)))
        weight = np.zeros_like(total)
        for part in _SET_PARTS:
            qa, xb = a.sets[part][rows], b.sets[part]
            width = min(qa.shape[1], xb.shape[1])  # later columns hold tokens the other side lacks
            inter = (xb[:, :width] @ qa[:, :width].T).T.astype(np.float64)
            union = a.sizes[part][rows, None] + b.sizes[part][None, :] - inter
            part_d = 1.0 - np.divide(inter, union, out=np.ones_like(inter), where=union > 0)
            known = a.known[part][rows, None] & b.known[part][None, :]
            _accumulate(total, weight, WEIGHTS[part], part_d, known)
        a_present, a_values = ~np.isnan(a.features[rows]), np.nan_to_num(a.features[rows])
        gaps, count = np.zeros_like(total), np.zeros_like(total)
        dense = a_present.all() and b_present.all()  # the usual case: every feature on both sides
        for j in range(a_values.shape[1]):  # one feature at a time: no (rows, n, F) temporaries
            spread = np.abs(a_values[:, j, None]) + np.abs(b_values[None, :, j])
            gap = np.abs(a_values[:, j, None] - b_values[None, :, j])
            np.divide(gap, spread, out=gap, where=spread > 0)
            both = True if dense else a_present[:, j, None] & b_present[None, :, j]
            gaps += gap if dense else np.where(both, gap, 0.0)
            count += both
        _accumulate(total, weight, WEIGHTS["features"], gaps / np.maximum(count, 1), count > 0)
        out[rows] = np.clip(total / weight, 0.0, 1.0)  # weight > 0: tools are always known
    return out


def distances(items: Sequence[Signed], others: Sequence[Signed] | None = None) -> np.ndarray:
    """The matrix of :func:`distance` between ``items`` and ``others`` (default: ``items`` itself)."""
    left = [_as_signature(x) for x in items]
    right = left if others is None else [_as_signature(x) for x in others]
    vocabulary = _Vocabulary()
    codes = vocabulary.encode([*left, *right] if others is not None else left)
    return _pairwise(
        codes.rows(slice(0, len(left))), codes.rows(slice(len(codes) - len(right), None))
    )


def distance(a: Signed, b: Signed) -> float:
    """How unlike two tasks are, in [0, 1]: 0 for equal signatures, 1 when no part is shared.

    The weighted mean (:data:`WEIGHTS`) of per-part distances, over the parts
    both sides know (a task without a plan, or with its world given only by id,
    is compared on the rest, the weights renormalised):

    - ``plan``, ``tools``, ``schema``: Jaccard distance of token sets,
      ``1 - |A ∩ B| / |A ∪ B|`` (0 when both are empty);
    - ``features``: the mean over features both have of ``|a - b| / (|a| + |b|)``
      (0 when both are 0);
    - ``domain``: 0 when equal, else 1.

    Symmetric, 0 on equal signatures; with every part known on both sides it
    is a pseudometric (each part is one, and so is a weighted sum).
    """
    return float(distances([a], [b])[0, 0])


class NoveltyArchive:
    """The signatures of tasks seen so far, to score new ones by how unlike them they are.

    Novelty is the mean :func:`distance` to the ``k`` nearest archived
    signatures (all of them when fewer than ``k``; 1.0 for an empty archive).
    Duplicates are kept: a task seen ``k`` times has novelty 0. Past
    ``capacity`` the oldest signatures go first (first in, first out).

    Args:
        k: how many nearest neighbours novelty averages over (at least 1).
        capacity: how many signatures the archive holds (at least 1).
    """

    def __init__(self, k: int = 5, capacity: int = 4096) -> None:
        if k < 1 or capacity < 1:
            raise ValueError(f"NoveltyArchive(k={k}, capacity={capacity}): both must be at least 1")
        self.k, self.capacity = int(k), int(capacity)
        self._signatures: list[TaskSignature] = []
        self._vocabulary = _Vocabulary()
        self._codes = self._vocabulary.encode([])
        self.seen = 0

    def __len__(self) -> int:
        return len(self._signatures)

    @property
    def signatures(self) -> tuple[TaskSignature, ...]:
        """The archived signatures, oldest first."""
        return tuple(self._signatures)

    def novelty(self, item: Signed) -> float:
        """One task's novelty against the archive, in [0, 1]."""
        return self.novelties([item])[0]

    def novelties(self, items: Iterable[Signed]) -> list[float]:
        """The novelty of each task of a batch; the archive is not changed.

        Task ``i`` is scored against the archive as it was before the batch
        plus the batch's earlier tasks ``0..i-1``, so the second copy of a
        task in one batch scores as if the first had been archived (a batch
        cannot earn novelty by repeating itself). The first task of a batch
        with an empty archive scores 1.0.
        """
        sigs = [_as_signature(x) for x in items]
        if not sigs:
            return []
        batch = self._vocabulary.copy().encode(sigs)
        to_archive = _pairwise(batch, self._codes)
        within = _pairwise(batch, batch)
        within[np.triu_indices(len(sigs))] = np.inf  # only earlier tasks of the batch count
        pool = np.concatenate([to_archive, within], axis=1)
        available = np.minimum(len(self._signatures) + np.arange(len(sigs)), self.k)
        k = min(self.k, pool.shape[1])
        nearest = np.sort(np.partition(pool, k - 1, axis=1)[:, :k], axis=1)
        return [float(nearest[i, :c].mean()) if c else 1.0 for i, c in enumerate(available)]

    def add(self, items: Iterable[Signed]) -> None:
        """Archive tasks (in order); past capacity, drop the oldest."""
        sigs = [_as_signature(x) for x in items]
        if not sigs:
            return
        self.seen += len(sigs)
        self._signatures.extend(sigs)
        self._codes = self._codes.then(self._vocabulary.encode(sigs))
        excess = len(self._signatures) - self.capacity
        if excess > 0:
            del self._signatures[:excess]
            self._codes = self._codes.rows(slice(excess, None))
            used = sum(int(m.any(axis=0).sum()) for m in self._codes.sets.values())
            if sum(map(len, self._vocabulary.columns.values())) > 2 * used + 256:
                self._vocabulary = _Vocabulary()  # drop the columns only evicted tasks used
                self._codes = self._vocabulary.encode(self._signatures)

    def state(self) -> dict[str, Any]:
        """The archive as JSON-ready data, for a checkpoint (:meth:`from_state` resumes it)."""
        return {
            "format": NOVELTY_FORMAT,
            "k": self.k,
            "capacity": self.capacity,
            "seen": self.seen,
            "signatures": [s.to_json() for s in self._signatures],
        }

    def load(self, state: Mapping[str, Any]) -> None:
        """Replace this archive's contents with a :meth:`state`."""
        if state.get("format") != NOVELTY_FORMAT:
            raise ValueError(
                f"not a {NOVELTY_FORMAT} state: pass what NoveltyArchive.state() returned"
            )
        fresh = NoveltyArchive(k=state["k"], capacity=state["capacity"])
        fresh.add(TaskSignature.from_json(s) for s in state["signatures"])
        fresh.seen = int(state.get("seen", len(fresh)))
        self.__dict__.update(fresh.__dict__)

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> NoveltyArchive:
        """The archive a :meth:`state` describes."""
        archive = cls()
        archive.load(state)
        return archive


def _sample(items: Iterable[Signed], limit: int) -> list[TaskSignature]:
    """At most ``limit`` signatures: the first by a hash of their key (the same pool, the same sample)."""
    sigs = [_as_signature(x) for x in items]
    if len(sigs) <= limit:
        return sigs
    order = sorted(
        range(len(sigs)), key=lambda i: (hashlib.sha256(sigs[i].key().encode()).hexdigest(), i)
    )
    return [sigs[i] for i in order[:limit]]


def diversity(items: Iterable[Signed], sample: int = 512) -> float:
    """A pool's diversity: the mean distance over its distinct pairs (0.0 for fewer than 2 tasks).

    A pool larger than ``sample`` is measured on a deterministic subsample:
    the ``sample`` signatures first by the sha256 of their key.
    """
    sigs = _sample(items, sample)
    if len(sigs) < 2:
        return 0.0
    matrix = distances(sigs)
    return float(matrix[np.triu_indices(len(sigs), k=1)].mean())


def distinct_share(items: Iterable[Signed]) -> float:
    """Distinct signatures per task of a pool (1.0: no two alike; 0.0 for an empty pool)."""
    keys = [_as_signature(x).key() for x in items]
    return len(set(keys)) / len(keys) if keys else 0.0


def repetition_penalties(
    items: Sequence[Signed], threshold: float = REPEAT_DISTANCE
) -> list[float]:
    """R-Zero's repetition penalty for each task of a batch: ``|C| / B``.

    Tasks closer than ``threshold`` are linked, the clusters ``C`` are the
    linked groups (single linkage), and ``B`` is the batch size; a task alone
    scores ``1 / B``. R-Zero clusters by BLEU; here :func:`distance` does.
    """
    sigs = [_as_signature(x) for x in items]
    if not sigs:
        return []
    linked = distances(sigs) < threshold
    np.fill_diagonal(linked, True)  # every task is in its own cluster, whatever the threshold
    labels = np.arange(len(sigs))
    while True:  # each task takes the smallest label it is linked to, until none changes
        spread = np.where(linked, labels[None, :], len(sigs)).min(axis=1)
        if np.array_equal(spread, labels):
            break
        labels = spread
    sizes = np.bincount(labels, minlength=len(sigs))
    return [float(sizes[label]) / len(sigs) for label in labels]
