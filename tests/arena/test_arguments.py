"""Tool parameters: the scalar JSON Schema subset, compiled once, agrees with a reference validator."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from coevo.arena.arguments import compile_parameters
from hypothesis import given, settings
from hypothesis import strategies as st


def binder(properties: dict[str, Any], required: list[str] | None = None, **extra: Any):
    schema = {"type": "object", "properties": properties, "required": required or [], **extra}
    compiled, problems = compile_parameters("t", schema, "parameters")
    assert not problems, problems
    return compiled


def test_missing_optional_binds_null_and_integral_float_binds_int():
    """Every declared parameter is bound; 3.0 for an integer binds 3."""
    b = binder({"a": {"type": "integer"}, "b": {"type": ["string", "null"]}}, ["a"])
    binds, error = b.bind({"a": 3.0})
    assert error is None and binds == {"a": 3, "b": None} and type(binds["a"]) is int


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"a": {"type": "object"}}, "not a scalar type"),
        ({"a": {"type": "string", "pattern": "^x"}}, "regular expressions are not supported"),
        ({"a": {"type": "string", "default": "x"}}, "coalesce(:x, <default>)"),
        ({"a": {"type": "array", "items": {}}}, "read it with json_each()"),
        ({"a": {}}, "has no 'type'"),
        ({"a b": {"type": "string"}}, "cannot be an SQL parameter"),
        ({"a": {"type": "integer", "minimum": "1"}}, "minimum must be a number"),
        ({"a": {"type": "string", "enum": []}}, "non-empty list"),
    ],
)
def test_unsupported_schemas_are_problems_with_a_fix(schema, fragment):
    """Each unsupported construct is named and the fix is given."""
    _, problems = compile_parameters(
        "t", {"type": "object", "properties": schema}, "world.tools[0].parameters"
    )
    assert problems and fragment in str(problems[0])
    assert problems[0].path.startswith("world.tools[0].parameters")


def test_required_must_be_declared():
    """A required name that is not a property is a problem."""
    _, problems = compile_parameters(
        "t", {"type": "object", "properties": {}, "required": ["x"]}, "p"
    )
    assert "'x' is required but not declared" in str(problems[0])


def test_open_schema_ignores_extra_arguments():
    """additionalProperties: true lets unknown arguments through (and does not bind them)."""
    b = binder({"a": {"type": "integer"}}, additionalProperties=True)
    assert b.bind({"a": 1, "zzz": 2}) == ({"a": 1}, None)


scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-1000, max_value=1000),
    st.floats(min_value=-1000, max_value=1000, allow_nan=False),
    st.sampled_from([0.0, 1.0, 2.5, -3.0]),
    st.text(max_size=6),
)
types = st.sampled_from(["string", "integer", "number", "boolean", "null"])


@st.composite
def property_schemas(draw):
    prop: dict[str, Any] = {}
    if draw(st.booleans()):
        prop["type"] = draw(st.one_of(types, st.lists(types, min_size=1, max_size=3, unique=True)))
    if draw(st.booleans()) or "type" not in prop:
        prop["enum"] = draw(st.lists(scalar, min_size=1, max_size=4))
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if draw(st.integers(0, 4)) == 0:
            prop[key] = draw(st.integers(-5, 5) | st.floats(-5, 5, allow_nan=False))
    for key in ("minLength", "maxLength"):
        if draw(st.integers(0, 3)) == 0:
            prop[key] = draw(st.integers(0, 4))
    if draw(st.integers(0, 5)) == 0:
        prop["const"] = draw(scalar)
    return prop


@settings(max_examples=500, deadline=None)
@given(
    props=st.dictionaries(st.sampled_from(["a", "b", "c"]), property_schemas(), max_size=3),
    required=st.lists(st.sampled_from(["a", "b", "c"]), unique=True, max_size=3),
    open_=st.booleans(),
    arguments=st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), scalar, max_size=4),
)
def test_binder_agrees_with_jsonschema(props, required, open_, arguments):
    """For any supported schema and arguments, the binder accepts exactly what jsonschema (2020-12) accepts."""
    required = [r for r in required if r in props]
    schema = {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": open_,
    }
    compiled, problems = compile_parameters("t", schema, "p")
    assert not problems
    expected = jsonschema.Draft202012Validator(schema).is_valid(arguments)
    binds, error = compiled.bind(arguments)
    assert (error is None) == expected, (schema, arguments, error)
    if binds is not None:
        assert set(binds) == set(props)
