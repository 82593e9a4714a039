"""Every derived seed in coevo: :func:`derive_seed`, one hash of the parts that name a random choice.

A run has one seed. Everything random below it — a curriculum's draws, a
proposal request, a Solver chunk, an episode, a task drawn by a synthesizer,
a world, a mutation — takes a seed derived from the seed above it and the
names and indices that say which choice it is::

    derive_seed(run_seed, "solve", gen, "train", chunk)

so the same run seed gives the same log, two runs with different seeds share
no derived seed, and adding a new random choice (a new name) never shifts the
others. The held-out eval suite derives from its own ``[eval] seed`` instead of
the run's, so runs of different seeds are measured on the same tasks.
"""

from __future__ import annotations

import hashlib

__all__ = ["derive_seed"]

_SEPARATOR = "\x1f"  # the unit separator: never inside a name, so ("a", "b:c") ≠ ("a:b", "c")


def derive_seed(*parts: object) -> int:
    """A seed in ``[0, 2**63)`` from ``parts`` (ints and strings), stable across machines and runs.

    Args:
        parts: the seed above and the names and indices of the choice, e.g.
            ``(run_seed, "curriculum", gen, "replay")``.

    Raises:
        TypeError: a part that is not an int or a str (its text would not be stable).
    """
    for part in parts:
        if not isinstance(part, (int, str)) or isinstance(part, bool):
            raise TypeError(f"derive_seed takes ints and strings, not {type(part).__name__}")
    text = _SEPARATOR.join(f"{type(p).__name__}:{p}" for p in parts)
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1
