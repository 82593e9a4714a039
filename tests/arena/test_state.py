"""Role state as data (``coevo.state/1``): round trips, and everything else refused with the reason."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from coevo.arena.errors import StateError
from coevo.arena.state import pack_state, peek_state, unpack_state
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

_DTYPES = st.sampled_from(["<f8", "<f4", "<i8", "<i4", "<u2", "|b1", "|u1"])


@given(
    arrays=st.dictionaries(
        st.text(min_size=1, max_size=8),
        _DTYPES.flatmap(
            lambda d: hnp.arrays(d, hnp.array_shapes(min_dims=0, max_dims=3, max_side=4))
        ),
        max_size=4,
    ),
    meta=st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8), max_size=4),
)
def test_any_numeric_state_round_trips_exactly(arrays, meta):
    """Whatever bool, integer or float arrays and JSON meta go in come back equal, dtype and shape included."""
    data = pack_state("model", 3, meta, arrays)
    assert peek_state(data) == ("model", 3)
    back = unpack_state(data, role="model", versions={3})
    assert back.meta == meta
    assert back.arrays.keys() == arrays.keys()
    for name, array in arrays.items():
        assert back.arrays[name].shape == array.shape
        assert back.arrays[name].dtype == array.dtype.newbyteorder("<")
        np.testing.assert_array_equal(back.arrays[name], array)


def test_object_arrays_cannot_be_saved():
    """An object array would need pickling: it is refused when the state is made."""
    with pytest.raises(StateError, match="only bool, integer and float arrays"):
        pack_state("model", 1, {}, {"bad": np.array([object()], dtype=object)})


def test_a_pickle_is_refused_without_being_loaded(tmp_path):
    """A pickle in place of a state is named as such and never unpickled (its payload does not run)."""
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    with pytest.raises(StateError, match="looks like a Python pickle"):
        unpack_state(pickle.dumps(Payload()), role="irt", versions={1})
    assert not marker.exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"weights", "not a coevo.state/1 state"),
        (pack_state("irt", 1, {})[:-3], "truncated"),
        (pack_state("irt", 1, {}, {"w": np.zeros(4)})[:-1], "truncated"),
        (pack_state("linear-pg", 1, {}), "written by 'linear-pg', not 'irt'"),
        (pack_state("irt", 7, {}), "layout version 7; this coevo reads 1"),
    ],
)
def test_damaged_or_foreign_states_say_what_is_wrong(data, message):
    """Other formats, roles, versions and truncated bytes raise StateError naming the problem."""
    with pytest.raises(StateError, match=message):
        unpack_state(data, role="irt", versions={1})


def _with_header(blob: bytes, edit) -> bytes:
    import json as _json

    from coevo.arena.state import STATE_FORMAT

    start = len(STATE_FORMAT) + 1
    size = int.from_bytes(blob[start : start + 4], "little")
    header = _json.loads(blob[start + 4 : start + 4 + size])
    edit(header)
    text = _json.dumps(header).encode()
    return blob[:start] + len(text).to_bytes(4, "little") + text + blob[start + 4 + size :]


@pytest.mark.parametrize(
    "edit",
    [
        lambda h: h["arrays"][0].update(shape=[-1]),
        lambda h: h["arrays"][0].update(offset="0"),
        lambda h: h["arrays"][0].pop("dtype"),
        lambda h: h["arrays"][0].update(dtype="not a dtype"),
        lambda h: h["arrays"][0].update(dtype="|O"),
        lambda h: h.update(arrays={"w": 1}),
        lambda h: h.update(meta=[1, 2]),
    ],
)
def test_a_damaged_header_is_refused_with_state_error(edit):
    """A header edited by hand (negative shape, missing dtype, object dtype, wrong types) raises StateError only."""
    blob = _with_header(pack_state("irt", 1, {"k": 1}, {"w": np.zeros(3)}), edit)
    with pytest.raises(StateError):
        unpack_state(blob, role="irt", versions={1})
