"""The decisions behind a learning Solver's episodes, as data: what its players ship to its learner.

``linear-pg`` makes each tool call by a few softmax decisions (which tool,
which value per parameter, which answer); a policy-gradient step needs, for
each, the feature buckets of every option, the prior and the option chosen.
The Solver actor that played an episode recorded them; a learner that is
another instance (the learner actor) would otherwise rebuild them by
replaying the episode through the action space and the features, which costs
about as much as playing it. So the players ship them with their episodes
(:class:`~coevo.agents.protocols.ShipsDecisions`), one blob per batch, and
the learner uses them instead. The decisions do not depend on the weights
(only on the task, the calls and what the tools returned), so shipped and
rebuilt decisions are the same and the learner's step is bit for bit the
same either way (a test, and ``check_role``, say so).

A blob is ``coevo.state/1`` (:mod:`coevo.arena.state`: a JSON header and
numeric arrays, never a pickle), role ``decisions``, version 1, because a
checkpoint holds the blobs of a learner step still pending
(``run.max_staleness`` ≥ 1) and a run directory may come from someone else:

* ``meta["episodes"]``: one row per distinct episode,
  ``[task id, [[tool, arguments as JSON], ...], number of decisions]`` (the
  learner finds an episode's decisions by its task and calls);
* ``meta["kinds"]``: the decision kinds (``tool``, ``answer``,
  ``<tool>.<parameter>``), which ``kind`` below indexes;
* ``idx`` (``<u4``, or ``<i8`` past 2³² buckets): every option's feature
  buckets, option after option, decision after decision;
* ``sizes`` (``<i4``): per option, how many buckets it has;
* ``prior`` (``<f8``): per option, the weighted prior (NaN: the decision has none);
* ``shape`` (``<i4``, one row per decision): options, the option chosen, kind.

:func:`pack_decisions` writes a blob, :func:`unpack_decisions` reads one and
checks it whole (counts that add up, buckets inside the weights, a choice
among the options) before anything is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol, TypeVar

import numpy as np
from coevo.arena.errors import StateError
from coevo.arena.state import pack_state, unpack_state

__all__ = ["DECISIONS_ROLE", "Decided", "TraceKey", "pack_decisions", "unpack_decisions"]

DECISIONS_ROLE: Final = "decisions"
"""The ``role`` a blob of decisions names in its ``coevo.state/1`` header."""

TraceKey = tuple[Any, ...]
"""An episode as the learner looks it up: ``(task id, (tool, arguments as JSON), ...)``."""


class Decided(Protocol):
    """One softmax decision as a policy recorded it (``linear-pg``'s own record has these fields)."""

    idx: np.ndarray
    owner: np.ndarray
    n: int
    chosen: int
    kind: str
    prior: np.ndarray | None


D = TypeVar("D")


def pack_decisions(traces: Mapping[TraceKey, Sequence[Decided]]) -> bytes:
    """The blob of ``traces`` (episode key → its decisions, in order)."""
    episodes: list[list[Any]] = []
    kinds: dict[str, int] = {}
    idx: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    prior: list[np.ndarray] = []
    shape: list[tuple[int, int, int]] = []
    for (task_id, *calls), decisions in traces.items():
        episodes.append([task_id, [list(call) for call in calls], len(decisions)])
        for d in decisions:
            idx.append(d.idx)
            sizes.append(np.bincount(d.owner, minlength=d.n))
            prior.append(np.full(d.n, np.nan) if d.prior is None else d.prior)
            shape.append((d.n, d.chosen, kinds.setdefault(d.kind, len(kinds))))
    flat = np.concatenate(idx) if idx else np.zeros(0, dtype=np.int64)
    wide = flat.size and int(flat.max()) >= 1 << 32
    arrays = {
        "idx": flat.astype(np.int64 if wide else np.uint32),
        "sizes": (np.concatenate(sizes) if sizes else np.zeros(0)).astype(np.int32),
        "prior": (np.concatenate(prior) if prior else np.zeros(0)).astype(np.float64),
        "shape": np.array(shape, dtype=np.int32).reshape(-1, 3),
    }
    return pack_state(DECISIONS_ROLE, 1, {"episodes": episodes, "kinds": list(kinds)}, arrays)


def unpack_decisions(
    data: bytes,
    *,
    dim: int,
    make: Callable[[np.ndarray, np.ndarray, int, int, str, np.ndarray | None], D],
) -> dict[TraceKey, list[D]]:
    """Read a blob of :func:`pack_decisions`: episode key → its decisions, each made by ``make``.

    ``make(idx, owner, n, chosen, kind, prior)`` builds one decision (``idx``
    and ``owner`` are ``int64``, as the policy made them); ``dim``: the
    policy's bucket count, which every bucket must be below.

    Raises:
        StateError: not a blob of decisions, or a damaged one (the message says what does not add up).
    """
    blob = unpack_state(data, role=DECISIONS_ROLE, versions={1})
    rows, kinds = blob.meta.get("episodes"), blob.meta.get("kinds")
    try:
        idx, sizes = blob.arrays["idx"], blob.arrays["sizes"]
        prior, shape = blob.arrays["prior"], blob.arrays["shape"]
    except KeyError as exc:
        raise StateError(f"the blob of decisions has no array {exc.args[0]!r}") from None
    if not isinstance(rows, list) or not isinstance(kinds, list):
        raise StateError("the blob of decisions has no list of episodes or kinds")
    if any(a.dtype.kind not in "iu" for a in (idx, sizes, shape)) or prior.dtype.kind != "f":
        raise StateError(
            "the blob of decisions is damaged: its buckets, sizes and shape must be integers, "
            "its prior floats"
        )
    if idx.ndim != 1 or sizes.ndim != 1 or prior.shape != sizes.shape or shape.ndim != 2:
        raise StateError("the blob of decisions is damaged: its arrays have the wrong shapes")
    if shape.shape[1:] != (3,):
        raise StateError("the blob of decisions is damaged: `shape` is not three columns")
    n, chosen, kind = (shape[:, i].astype(np.int64) for i in range(3))
    if (
        (n < 1).any()
        or (chosen < 0).any()
        or (chosen >= n).any()
        or (kind < 0).any()
        or (kind >= len(kinds)).any()
    ):
        raise StateError(
            "the blob of decisions is damaged: a decision chooses outside its options or kinds"
        )
    if (
        int(n.sum()) != sizes.size
        or (sizes < 0).any()
        or int(sizes.sum(dtype=np.int64)) != idx.size
    ):
        raise StateError("the blob of decisions is damaged: its options and buckets do not add up")
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= dim):
        raise StateError(
            f"the blob of decisions holds buckets outside this policy's {dim}; "
            "it was made by a solver with another `dim`"
        )
    counts = [_row(row, kinds) for row in rows]
    if sum(counts) != len(shape):
        raise StateError("the blob of decisions is damaged: its episodes' decisions do not add up")
    buckets = idx.astype(np.int64)
    option_at = np.concatenate([[0], np.cumsum(n)])
    bucket_at = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    out: dict[TraceKey, list[D]] = {}
    at = 0
    for (task_id, calls, _), count in zip(rows, counts, strict=True):
        decisions = []
        for i in range(at, at + count):
            first, last = int(option_at[i]), int(option_at[i + 1])
            width = int(n[i])
            p = prior[first:last]
            none = np.isnan(p)
            if none.any() and not none.all():
                raise StateError("the blob of decisions is damaged: a prior is partly missing")
            if np.isinf(p).any():
                raise StateError("the blob of decisions is damaged: a prior is infinite")
            decisions.append(
                make(
                    buckets[bucket_at[first] : bucket_at[last]].copy(),  # not a view of the blob
                    np.repeat(np.arange(width), sizes[first:last]),
                    width,
                    int(chosen[i]),
                    str(kinds[int(kind[i])]),
                    None if none.all() else p.copy(),
                )
            )
        out[(task_id, *((tool, arguments) for tool, arguments in calls))] = decisions
        at += count
    return out


def _row(row: Any, kinds: list[Any]) -> int:
    """The number of decisions of one ``meta["episodes"]`` row, once its shape is checked."""
    if (
        isinstance(row, list)
        and len(row) == 3
        and isinstance(row[0], str)
        and isinstance(row[1], list)
        and all(
            isinstance(c, list) and len(c) == 2 and all(isinstance(s, str) for s in c)
            for c in row[1]
        )
        and isinstance(row[2], int)
        and not isinstance(row[2], bool)
        and row[2] >= 0
        and all(isinstance(k, str) for k in kinds)
    ):
        return row[2]
    raise StateError(
        "the blob of decisions is damaged: an episode is not [task id, [[tool, arguments]...], count]"
    )
