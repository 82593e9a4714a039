"""An LLM Solver's state: which served model plays, and the version its episodes are signed with.

Light on purpose (no LLM SDK, no HTTP client): the run's loop and the trainer
hand-off make and read these states without loading an LLM role.
"""

from __future__ import annotations

from typing import Final

from coevo.arena.errors import StateError
from coevo.arena.state import pack_state, unpack_state

__all__ = ["POLICY_STATE", "policy_state", "read_policy_state"]

POLICY_STATE: Final = "llm-policy"
"""The ``role`` of an LLM Solver's state: which served model plays, and how its episodes are signed."""


def policy_state(model: str, version: str) -> bytes:
    """An LLM Solver's state (``coevo.state/1``): play ``model`` and sign the episodes ``version``.

    The trainer hand-off makes one for each policy a trainer announces and
    gives it to every Solver actor; checkpoints keep it, so a resumed run plays
    the policy it played last.
    """
    return pack_state(POLICY_STATE, 1, {"model": model, "policy_version": version})


def read_policy_state(state: bytes) -> tuple[str, str]:
    """The model and the policy version of an LLM Solver's state.

    Raises:
        StateError: not an LLM Solver's state (naming what it is).
    """
    meta = unpack_state(state, role=POLICY_STATE, versions=(1,)).meta
    if not isinstance(meta.get("model"), str) or not isinstance(meta.get("policy_version"), str):
        raise StateError(f"the {POLICY_STATE!r} state names no model or no policy version")
    return meta["model"], meta["policy_version"]
