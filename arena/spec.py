"""The task format, ``coevo.task/1``, and the world format, ``coevo.world/1``.

A task is data, never code: an SQLite world (schema, seed rows, named
parameterised SQL tools), an instruction, a verifier of read-only SELECT
checks plus a frame of what may change, and a reference solution. These
pydantic models check the *shape* of a record (fields and JSON types);
:mod:`coevo.arena.validation` checks everything SQLite has to see (SQL,
parameters, frames) and :mod:`coevo.arena.ids` gives a record its id.

The full semantics are in ``docs/task-format.md``.
"""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any, Final, Literal, Self

from coevo.arena import ids
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
)

__all__ = [
    "TASK_FORMAT",
    "WORLD_FORMAT",
    "Blob",
    "Cell",
    "CheckSpec",
    "FrameColumns",
    "FrameRule",
    "Lineage",
    "TableData",
    "TaskSpec",
    "ToolCall",
    "ToolSpec",
    "VerifierSpec",
    "WorldSpec",
]

TASK_FORMAT: Final = "coevo.task/1"
WORLD_FORMAT: Final = "coevo.world/1"
SUBMIT = "submit"
WORLD_ID_PATTERN = r"^sha256:[0-9a-f]{64}$"


class _Model(BaseModel):
    """Frozen, strict about unknown fields, serialised by alias (``$base64``, ``schema``)."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        populate_by_name=True,
        serialize_by_alias=True,
        allow_inf_nan=False,
        ser_json_inf_nan="null",
    )

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy, with ``update`` applied; cached ids are recomputed, never copied."""
        copied = super().model_copy(update=update, deep=deep)
        for name in _CACHED:
            # only cached properties: WorldSpec.data is a field, Blob.data is cached
            if isinstance(getattr(type(self), name, None), cached_property):
                copied.__dict__.pop(name, None)
        return copied


_CACHED = ("world_id", "task_id", "data")


class Blob(_Model):
    """A BLOB cell value, written in JSON as ``{"$base64": "..."}``."""

    base64: str = Field(alias="$base64", description="The bytes, base64-encoded (RFC 4648).")

    @field_validator("base64")
    @classmethod
    def _decodable(cls, value: str) -> str:
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"not valid base64 ({exc}); encode the bytes with RFC 4648") from exc
        return value

    @cached_property
    def data(self) -> bytes:
        """The decoded bytes."""
        return base64.b64decode(self.base64, validate=True)

    @classmethod
    def of(cls, data: bytes) -> Blob:
        """The cell value for ``data``."""
        return cls(**{"$base64": base64.b64encode(data).decode("ascii")})


Cell = StrictInt | StrictFloat | StrictStr | StrictBool | None | Blob
"""One value of a seed row: JSON null, boolean, integer, number, string, or a :class:`Blob`."""


class TableData(_Model):
    """The seed rows of one table."""

    columns: Annotated[list[StrictStr], Field(min_length=1)]
    rows: list[list[Cell]] = Field(default_factory=list)


class ToolSpec(_Model):
    """A named, parameterised SQL tool the agent may call.

    The statements run as one transaction (rolled back on any error); the
    tool returns the rows of the last statement (with column names) or, when
    that statement returns no columns, its row count.
    """

    name: StrictStr = Field(description="Tool name, [A-Za-z_][A-Za-z0-9_]* (at most 64).")
    description: StrictStr = Field(description="What the tool does, for the agent.")
    parameters: dict[str, Any] = Field(
        description="JSON Schema of the arguments: an object whose properties are scalars."
    )
    sql: Annotated[list[StrictStr], Field(min_length=1)] = Field(
        description="One SQL statement per item, with :name parameters."
    )
    effect: Literal["read", "write"] = Field(
        description="'read' tools cannot change the world; 'write' tools may."
    )


class WorldSpec(_Model):
    """A ``coevo.world/1`` record: one SQLite world that many tasks share."""

    format: Literal["coevo.world/1"] = WORLD_FORMAT
    id: StrictStr | None = Field(
        default=None, description="sha256 id; computed when absent, checked when given."
    )
    domain: StrictStr
    now: StrictStr = Field(description="The world's fixed clock, ISO 8601 without a time zone.")
    schema_sql: list[StrictStr] = Field(
        alias="schema",
        description="CREATE TABLE / INDEX / VIEW / TRIGGER statements, one per item.",
    )
    data: dict[StrictStr, TableData] = Field(default_factory=dict)
    tools: list[ToolSpec]

    @cached_property
    def world_id(self) -> str:
        """The world's id, ``sha256:`` + hex digest of its canonical JSON."""
        return ids.world_id(self)


class CheckSpec(_Model):
    """One verifier check: a read-only SELECT that passes when it returns a single non-zero number."""

    name: StrictStr
    sql: StrictStr


class FrameColumns(_Model):
    """Frame form ``{"where": ..., "columns": [...]}``: only these columns of these rows may change."""

    where: StrictStr
    columns: Annotated[list[StrictStr], Field(min_length=1)]


FrameRule = StrictStr | FrameColumns
"""A frame entry: ``"*"``, a row condition, or :class:`FrameColumns`."""


MAX_CHECKS: Final = 64
"""The most checks a verifier may have: each runs on every episode (a task has a few)."""


class VerifierSpec(_Model):
    """The checks (at most :data:`MAX_CHECKS`) and the frame that together decide the binary reward."""

    checks: list[CheckSpec] = Field(max_length=MAX_CHECKS)
    frame: dict[StrictStr, FrameRule]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call of a tool by name with JSON arguments (``submit`` included).

    Attributes:
        tool: the tool's name.
        arguments: argument name to JSON value.
    """

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def __deepcopy__(self, memo: dict[int, Any]) -> ToolCall:
        """A deep copy, field by field: what ``copy.deepcopy`` makes, faster (see ``Observation``)."""
        return ToolCall(self.tool, copy.deepcopy(self.arguments, memo))


class Lineage(_Model):
    """Where a task came from when it was made from another one (mutation)."""

    parent: StrictStr | None = None
    operator: StrictStr | None = None


class TaskSpec(_Model):
    """A ``coevo.task/1`` record: instruction, verifier and reference solution over a world."""

    format: Literal["coevo.task/1"] = TASK_FORMAT
    id: StrictStr | None = Field(
        default=None, description="sha256 id; computed when absent, checked when given."
    )
    world: WorldSpec | Annotated[StrictStr, Field(pattern=WORLD_ID_PATTERN)] = Field(
        description="The world inline, or the id of a world record."
    )
    instruction: StrictStr
    verifier: VerifierSpec
    solution: list[ToolCall]
    features: dict[StrictStr, StrictInt | StrictFloat] = Field(default_factory=dict)
    lineage: Lineage = Field(default_factory=Lineage)
    provenance: dict[StrictStr, Any] = Field(default_factory=dict)

    @cached_property
    def world_id(self) -> str:
        """The id of the task's world (computed for an inline world)."""
        return self.world.world_id if isinstance(self.world, WorldSpec) else self.world

    @cached_property
    def task_id(self) -> str:
        """The task's id: the hash of its format, world id, instruction and verifier."""
        return ids.task_id(self)
