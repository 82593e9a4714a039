r"""Role state as data: the ``coevo.state/1`` format that ``get_state`` returns and checkpoints hold.

A role's state is a JSON header and numeric arrays, never a pickle, so a
checkpoint from someone else's run directory is safe to load: reading it
parses JSON and copies numbers, and runs no code. The bytes are::

    b"coevo.state/1\\n"                      the format line
    <4 bytes: header length, little-endian>
    <header: UTF-8 JSON>                     {"role": ..., "version": ..., "meta": {...},
                                              "arrays": [{"name", "dtype", "shape", "offset"}, ...]}
    <array bytes>                            each array's C-order bytes, at its offset

``role`` names what wrote the state (``linear-pg``, ``irt``, ...) and
``version`` that role's own layout of ``meta`` and ``arrays``; a role loading
a state checks both and says what to do when they do not match. ``dtype`` is
a little-endian bool, integer or float type (``<f8``, ``<i8``, ``|b1``, ...):
object arrays cannot be written or read.

:func:`pack_state` writes the format and :func:`unpack_state` reads it;
:func:`peek_state` tells what a blob is without loading its arrays.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
from coevo.arena.bounded import loads_json
from coevo.arena.errors import StateError

__all__ = ["STATE_FORMAT", "RoleState", "pack_state", "peek_state", "unpack_state"]

STATE_FORMAT: Final = "coevo.state/1"
"""The format line every state starts with."""

_MAGIC: Final = (STATE_FORMAT + "\n").encode()
_KINDS: Final = frozenset("biuf")  # bool, signed and unsigned integers, floats


@dataclass(frozen=True)
class RoleState:
    """A role's state, read back.

    Attributes:
        role: what wrote it (a role's registered name).
        version: the role's own version of its layout.
        meta: the JSON part.
        arrays: the numeric arrays, by name.
    """

    role: str
    version: int
    meta: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


def pack_state(
    role: str, version: int, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray] = {}
) -> bytes:
    """The ``coevo.state/1`` bytes of a state.

    Raises:
        StateError: an array of another kind than bool, integer or float, or ``meta`` that is not JSON.
    """
    entries, blobs, offset = [], [], 0
    for name, array in arrays.items():
        value = np.asarray(array)
        if value.dtype.kind not in _KINDS:
            raise StateError(
                f"state of {role!r}: array {name!r} has dtype {value.dtype}; "
                "only bool, integer and float arrays can be saved"
            )
        value = value.astype(value.dtype.newbyteorder("<"), copy=False)
        entries.append(
            {"name": name, "dtype": value.dtype.str, "shape": list(value.shape), "offset": offset}
        )
        blobs.append(value.tobytes(order="C"))
        offset += value.nbytes
    try:
        header = json.dumps(
            {"role": role, "version": version, "meta": dict(meta), "arrays": entries},
            sort_keys=True,
            allow_nan=False,
        ).encode()
    except (TypeError, ValueError) as exc:
        raise StateError(f"state of {role!r}: meta is not JSON ({exc})") from exc
    return b"".join([_MAGIC, len(header).to_bytes(4, "little"), header, *blobs])


def _header(data: bytes) -> tuple[dict[str, Any], int]:
    if not data.startswith(_MAGIC):
        hint = (
            " (it looks like a Python pickle, which coevo never loads)"
            if data[:1] == b"\x80"
            else ""
        )
        raise StateError(f"not a {STATE_FORMAT} state{hint}")
    start = len(_MAGIC) + 4
    size = int.from_bytes(data[len(_MAGIC) : start], "little")
    if start + size > len(data):
        raise StateError(f"the {STATE_FORMAT} state is truncated (its header runs past the end)")
    try:
        header = loads_json(data[start : start + size], f"the {STATE_FORMAT} state's header")
    except ValueError as exc:
        raise StateError(f"the {STATE_FORMAT} state's header is not JSON ({exc})") from exc
    if not isinstance(header, dict) or not isinstance(header.get("role"), str):
        raise StateError(f"the {STATE_FORMAT} state's header has no role")
    return header, start + size


def peek_state(data: bytes) -> tuple[str, int]:
    """The role and version of a state, without reading its arrays.

    Raises:
        StateError: not a ``coevo.state/1`` state.
    """
    header, _ = _header(data)
    return header["role"], int(header.get("version", 0))


def unpack_state(data: bytes, *, role: str, versions: Collection[int]) -> RoleState:
    """Read a state written by ``role`` in one of ``versions``.

    Raises:
        StateError: another format, another role or version, or damaged bytes; the message says which.
    """
    header, body = _header(data)
    if header["role"] != role:
        raise StateError(f"this state was written by {header['role']!r}, not {role!r}")
    version = header.get("version")
    if not isinstance(version, int) or version not in versions:
        raise StateError(
            f"this {role!r} state has layout version {version}; this coevo reads "
            f"{', '.join(map(str, sorted(versions)))}"
        )
    meta, entries = header.get("meta") or {}, header.get("arrays") or []
    if not isinstance(meta, dict) or not isinstance(entries, list):
        raise StateError(
            f"the {role!r} state's header is damaged (meta or arrays of the wrong type)"
        )
    arrays: dict[str, np.ndarray] = {}
    for entry in entries:
        name, dtype, shape, start = _entry(entry, role)
        count = int(np.prod(shape, dtype=np.int64))
        start += body
        if start + count * dtype.itemsize > len(data):
            raise StateError(f"array {name!r} of the {role!r} state is truncated")
        arrays[name] = (
            np.frombuffer(data, dtype=dtype, count=count, offset=start).reshape(shape).copy()
        )
    return RoleState(role, int(version), meta, arrays)


def _entry(entry: Any, role: str) -> tuple[str, np.dtype, tuple[int, ...], int]:
    """An array entry of a header, checked: (name, dtype, shape, offset)."""
    try:
        name, dtype = str(entry["name"]), np.dtype(str(entry["dtype"]))
        shape, offset = tuple(entry["shape"]), entry["offset"]
    except (TypeError, KeyError, ValueError) as exc:
        raise StateError(f"an array entry of the {role!r} state is damaged: {exc}") from exc
    if dtype.kind not in _KINDS or dtype.byteorder == ">":
        raise StateError(f"array {name!r} of the {role!r} state has dtype {dtype}")
    numbers = (*shape, offset)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers):
        raise StateError(f"array {name!r} of the {role!r} state has a bad shape or offset")
    return name, dtype, shape, offset
