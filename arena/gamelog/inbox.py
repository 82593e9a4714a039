"""The inbox: rollouts an external trainer drove come back into the run, one Parquet part at a time.

A trainer that plays coevo's tasks through an environment library (the
``verifiers`` environment, :mod:`coevo.run.interfaces.verifiers_env`)
writes what it played to ``RUN_DIR/inbox/<part_id>.parquet``; the loop, at
the start of each generation, ingests the parts it has not ingested yet (in
name order), replays each rollout's calls in the task's world, verifies them
with coevo's verifier and logs them, so the episodes are in the game log and
the curriculum and the World model learn from them. Which parts were
ingested is committed with the generation, so each part is ingested exactly
once, across crashes too.

* One row per rollout, the columns of :class:`InboxRollout` (its fields, in
  order; :data:`INBOX_SCHEMA` is derived from it). Every column is data:
  JSON text is parsed, never evaluated, and nothing is unpickled.
* A part is written whole and atomically (:func:`write_part`): on a local
  disk to a temporary name beginning with ``.``, then renamed; on an object
  store with one put, which is visible only once complete. Readers
  (:func:`list_parts`) ignore names beginning with ``.`` or ``_``.
* A part id (:data:`PART_ID_PATTERN`) names one batch. A producer derives it
  from the batch (:func:`batch_part_id`), so writing the same batch again
  replaces the part instead of adding a second copy.
* :func:`read_part` validates every row and the part as a whole; a malformed
  row or part is a :class:`~coevo.arena.errors.LogError` naming the part,
  the row and the column.
* A part is read within limits (:mod:`coevo.arena.bounded`): a regular file
  (a link, a device or a FIFO is refused unread), at most
  :data:`~coevo.arena.bounded.MAX_FILE_BYTES` on disk and
  :data:`~coevo.arena.bounded.MAX_INBOX_PART_BYTES` decompressed and
  decoded, by its footer before any page is decoded, then as it is decoded
  (:func:`~coevo.arena.bounded.read_parquet`). :func:`write_part` refuses to
  write a part the loop would refuse to read.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, ClassVar, Final

import pyarrow as pa
import pyarrow.parquet as pq
from coevo.arena import bounded
from coevo.arena.errors import FileRefusedError, LogError
from coevo.arena.gamelog.rows import Row, _arrow_type
from coevo.arena.gamelog.rundir import RunDir
from coevo.arena.spec import ToolCall
from coevo.arena.trajectory import LOGPROB_FLOOR, is_logprob
from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = [
    "INBOX",
    "INBOX_SCHEMA",
    "MAX_PART_ROWS",
    "PART_ID_PATTERN",
    "InboxRollout",
    "batch_part_id",
    "inbox_markdown",
    "list_parts",
    "read_part",
    "write_part",
]

INBOX: Final = "inbox"
"""The inbox's folder in a run directory."""

PART_ID_PATTERN: Final = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
"""What a part id looks like; the part's file is ``inbox/<part_id>.parquet``."""

MAX_PART_ROWS: Final = 100_000
"""Rollouts one part may hold (a bigger batch is several parts)."""

_TASK_ID: Final = r"^sha256:[0-9a-f]{64}$"
_ROLES: Final = frozenset({"system", "developer", "user", "assistant", "tool"})
_SUFFIX: Final = ".parquet"


def _json_list(text: str, what: str) -> list[Any]:
    """``text`` parsed as a JSON list (``what`` names it in the error)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{what} is not valid JSON ({exc})") from None
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a JSON list, not {type(value).__name__}")
    return value


class InboxRollout(Row):
    """One rollout a trainer drove: the task, the calls made, and what the producer saw.

    The loop trusts none of it blindly: it replays ``calls`` in the task's
    world and verifies the result itself; ``reward`` is what the producer
    computed (with coevo's verifier), kept to record any disagreement.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    table: ClassVar[str] = "inbox"
    about: ClassVar[str] = "one rollout an external trainer drove, waiting to be ingested"

    rollout: int = Field(ge=0, description="its index in the part: 0, 1, 2, ... in row order")
    task_id: str = Field(pattern=_TASK_ID, description="the task played (`sha256:...`)")
    calls: str = Field(
        description="the tool calls made, in order, `[{tool, arguments}]`, as JSON; `submit` last when the agent submitted"
    )
    reward: float = Field(
        ge=0, le=1, description="the reward the producer computed with coevo's verifier"
    )
    messages: str | None = Field(
        default=None, description="the whole conversation in the Chat Completions format, as JSON"
    )
    tools: str | None = Field(
        default=None, description="the tools offered, as OpenAI function tools, as JSON"
    )
    policy_version: str | None = Field(
        default=None, description="the policy that played, as the trainer names it"
    )
    model: str | None = Field(default=None, description="the model the requests named")
    source: str = Field(
        min_length=1,
        max_length=64,
        pattern=r"^[a-z0-9][a-z0-9._-]*$",
        description="what produced it: `verifiers`, ...",
    )
    rollout_id: str | None = Field(
        default=None,
        description="the producer's own id of the rollout (verifiers: the trace id), to find it in the producer's records",
    )
    turn_prompt_ids: list[list[int]] | None = Field(
        default=None, description="each model turn's prompt token ids (null: the producer had none)"
    )
    turn_completion_ids: list[list[int]] | None = Field(
        default=None, description="each model turn's completion token ids"
    )
    turn_logprobs: list[list[float]] | None = Field(
        default=None, description="each model turn's completion log-probabilities"
    )

    @field_validator("calls")
    @classmethod
    def _calls_are_tool_calls(cls, text: str) -> str:
        for n, call in enumerate(_json_list(text, "calls")):
            if not isinstance(call, dict) or set(call) != {"tool", "arguments"}:
                raise ValueError(
                    f"calls[{n}] must be an object with exactly `tool` and `arguments`, got {str(call)[:80]!r}"
                )
            if not isinstance(call["tool"], str) or not call["tool"]:
                raise ValueError(f"calls[{n}].tool must be a tool's name, got {call['tool']!r}")
            if not isinstance(call["arguments"], dict):
                raise ValueError(
                    f"calls[{n}].arguments must be a JSON object, not {type(call['arguments']).__name__}"
                )
        return text

    @field_validator("messages")
    @classmethod
    def _messages_are_chat_messages(cls, text: str | None) -> str | None:
        if text is None:
            return None
        for n, message in enumerate(_json_list(text, "messages")):
            role = message.get("role") if isinstance(message, dict) else None
            if role not in _ROLES:
                raise ValueError(
                    f"messages[{n}] must be a message object with a role of {sorted(_ROLES)}, got {str(message)[:80]!r}"
                )
        return text

    @field_validator("tools")
    @classmethod
    def _tools_are_objects(cls, text: str | None) -> str | None:
        if text is None:
            return None
        for n, tool in enumerate(_json_list(text, "tools")):
            if not isinstance(tool, dict):
                raise ValueError(f"tools[{n}] must be a JSON object, got {str(tool)[:80]!r}")
        return text

    @field_validator("reward")
    @classmethod
    def _reward_is_finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError(f"reward must be a finite number in [0, 1], got {value}")
        return value

    @model_validator(mode="after")
    def _tokens_line_up(self) -> InboxRollout:
        prompts, completions, logprobs = (
            self.turn_prompt_ids,
            self.turn_completion_ids,
            self.turn_logprobs,
        )
        if (prompts is None) != (completions is None):
            raise ValueError(
                "turn_prompt_ids and turn_completion_ids come together: give both or neither"
            )
        if logprobs is not None and completions is None:
            raise ValueError("turn_logprobs needs turn_completion_ids")
        if prompts is not None and completions is not None and len(prompts) != len(completions):
            raise ValueError(
                f"turn_prompt_ids has {len(prompts)} turns but turn_completion_ids {len(completions)}"
            )
        if logprobs is not None and completions is not None:
            if len(logprobs) != len(completions):
                raise ValueError(
                    f"turn_logprobs has {len(logprobs)} turns but turn_completion_ids {len(completions)}"
                )
            for turn, (ids, scores) in enumerate(zip(completions, logprobs, strict=True)):
                if len(ids) != len(scores):
                    raise ValueError(
                        f"turn {turn}: {len(scores)} log-probabilities for {len(ids)} completion tokens"
                    )
                bad = next((v for v in scores if not is_logprob(v)), None)
                if bad is not None:
                    raise ValueError(
                        f"turn {turn}: a log-probability of {bad!r}; each must be a finite number "
                        f"in [{LOGPROB_FLOOR:g}, 0] (NaN, infinities and a server's -9999 floor "
                        "are no log-probabilities: leave the turn's log-probs out instead)"
                    )
        return self

    @cached_property
    def tool_calls(self) -> list[ToolCall]:
        """The calls, as the world takes them."""
        return [ToolCall(c["tool"], c["arguments"]) for c in json.loads(self.calls)]


INBOX_SCHEMA: Final[pa.Schema] = pa.schema(
    [
        pa.field(name, _arrow_type(info.annotation)[0], nullable=_arrow_type(info.annotation)[1])
        for name, info in InboxRollout.model_fields.items()
    ]
)
"""The Arrow schema of an inbox part, derived from :class:`InboxRollout`."""

_REQUIRED: Final = frozenset(f.name for f in INBOX_SCHEMA if not f.nullable)


def inbox_markdown() -> str:
    """The inbox's columns as a Markdown table (``docs/verifiers.md`` holds it)."""
    lines = ["| column | type | meaning |", "|---|---|---|"]
    for name, info in InboxRollout.model_fields.items():
        arrow, nullable = _arrow_type(info.annotation)
        lines.append(f"| `{name}` | {arrow}{' or null' if nullable else ''} | {info.description} |")
    return "\n".join(lines)


def _run_dir(run: RunDir | str) -> RunDir:
    return run if isinstance(run, RunDir) else RunDir(str(run))


def _check_part_id(part_id: str) -> None:
    if not isinstance(part_id, str) or not re.fullmatch(PART_ID_PATTERN, part_id):
        raise LogError(
            f"{part_id!r} is not an inbox part id: it must match {PART_ID_PATTERN} "
            "(a letter or digit, then up to 127 letters, digits, '.', '_' or '-')"
        )


def batch_part_id(source: str, rollout_ids: Sequence[str], started: datetime) -> str:
    """The part id of one batch of rollouts: names sort by time, and the same batch gets the same name.

    ``<source>-<UTC time the batch began, to the microsecond>-<digest of its
    rollouts' ids>``: writing the same batch again (a retried flush) replaces
    its part rather than adding a second copy, and two batches never share a
    name unless they hold the same rollouts.

    Args:
        source: the producer (``verifiers``, ...).
        rollout_ids: the producer's ids of the batch's rollouts, in row order.
        started: when the batch's first rollout came in (a timezone-aware time, or UTC).
    """
    if started.tzinfo is not None:
        started = started.astimezone(UTC)
    digest = hashlib.sha256("\n".join(rollout_ids).encode("utf-8")).hexdigest()[:16]
    part_id = f"{source}-{started:%Y%m%dT%H%M%S%fZ}-{digest}"
    _check_part_id(part_id)
    return part_id


def _rollouts(rows: Sequence[InboxRollout | Mapping[str, Any]], where: str) -> list[InboxRollout]:
    """``rows`` validated, each as an :class:`InboxRollout`, numbered 0, 1, 2, ... in order."""
    out: list[InboxRollout] = []
    problems: list[str] = []
    for n, row in enumerate(rows):
        try:
            rollout = row if isinstance(row, InboxRollout) else InboxRollout.model_validate(row)
        except ValidationError as exc:
            first = exc.errors()[0]
            column = ".".join(str(p) for p in first["loc"]) or "row"
            problems.append(f"row {n}: {column}: {first['msg']}")
            continue
        if rollout.rollout != n:
            problems.append(
                f"row {n}: rollout: is {rollout.rollout}, but the rows must be numbered 0, 1, 2, ... in order"
            )
        out.append(rollout)
    if problems:
        shown = "; ".join(problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise LogError(f"{where}: {shown}{more}")
    return out


def write_part(
    run: RunDir | str, part_id: str, rows: Sequence[InboxRollout | Mapping[str, Any]]
) -> str:
    """Write one part of the inbox, whole and atomically; returns its path relative to the run directory.

    On a local disk the part is written to a temporary name beginning with
    ``.`` in the inbox and renamed into place; on an object store it is one
    put, visible only once complete. A part with this id already there is
    replaced (a part id names one batch: see :func:`batch_part_id`).

    Args:
        run: the run directory (a :class:`RunDir`, a path or a URI).
        part_id: the part's id (:data:`PART_ID_PATTERN`).
        rows: the rollouts (:class:`InboxRollout` or mappings of its columns), ``rollout`` 0, 1, 2, ...

    Raises:
        LogError: a bad part id, no rows or too many, or a row that is not an inbox row (naming it).
    """
    _check_part_id(part_id)
    where = f"inbox part {part_id!r}"
    if not rows:
        raise LogError(f"{where}: no rows; a part holds at least one rollout")
    if len(rows) > MAX_PART_ROWS:
        raise LogError(
            f"{where}: {len(rows)} rows, more than a part may hold ({MAX_PART_ROWS}); write several parts"
        )
    table = pa.Table.from_pylist([r.cells() for r in _rollouts(rows, where)], schema=INBOX_SCHEMA)
    _check_part_size(where, table.nbytes)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    data = sink.getvalue()
    # as read_part counts it, by its footer: a part written is a part the loop reads
    _check_part_size(
        where, max(bounded.parquet_footer_sizes(pq.read_metadata(pa.BufferReader(data))))
    )
    run = _run_dir(run)
    relative = f"{INBOX}/{part_id}{_SUFFIX}"
    target = run.path(relative)
    run.make_dirs(INBOX)  # refused where the inbox is a link out of the run directory
    if not run.is_local:
        with run.fs.open_output_stream(target) as out:  # one put: visible only once complete
            out.write(data)
        return relative
    temporary = run.path(INBOX, f".{part_id}{_SUFFIX}.{uuid.uuid4().hex}")
    try:
        with run.fs.open_output_stream(temporary) as out:
            out.write(data)
        run.fs.move(temporary, target)
    except BaseException:
        if run.exists(INBOX, temporary.rsplit("/", 1)[1]):
            run.fs.delete_file(temporary)
        raise
    return relative


def _check_part_size(where: str, size: int) -> None:
    if size > bounded.MAX_INBOX_PART_BYTES:
        raise LogError(
            f"{where}: {size} bytes of rollouts decoded, more than the loop reads from one part "
            f"({bounded.MAX_INBOX_PART_BYTES}); write several parts"
        )


def list_parts(run: RunDir | str) -> list[str]:
    """The ids of the parts in the inbox, sorted (empty when there is no inbox).

    Only ``*.parquet`` files count, and names beginning with ``.`` (a part
    being written) or ``_`` are ignored. An id that breaks
    :data:`PART_ID_PATTERN` is listed all the same: :func:`read_part` says
    what is wrong with it.
    """
    return sorted(
        name[: -len(_SUFFIX)]
        for name in _run_dir(run).listdir(INBOX)
        if name.endswith(_SUFFIX) and not name.startswith((".", "_"))
    )


def read_part(run: RunDir | str, part_id: str) -> list[InboxRollout]:
    """The rollouts of one part, every row validated.

    A column the part lacks that may be null reads as null (a producer
    older than the column); any other difference from :data:`INBOX_SCHEMA`
    is an error.

    Raises:
        LogError: no such part, a part refused (a link, not a regular file, too
            big on disk, decompressed or decoded), a part that is not Parquet
            or not an inbox part, or a malformed row; the message names the
            part, the row and the column.
    """
    _check_part_id(part_id)
    run = _run_dir(run)
    relative = f"{INBOX}/{part_id}{_SUFFIX}"
    where = f"inbox part {part_id!r} ({relative} in {run.uri})"
    fix = "the producer must write it again with coevo.arena.gamelog.inbox.write_part, or delete it"
    if not run.exists(relative):
        raise LogError(f"{where}: no such part; the inbox holds {list_parts(run) or 'none'}")
    try:
        data = run.read_bytes(relative)
        table = bounded.read_parquet_bytes(data, where, limit=bounded.MAX_INBOX_PART_BYTES)
    except FileRefusedError as exc:  # a link, a device, too big: refused, not read whole
        raise LogError(f"{exc}; {fix}") from exc
    except (OSError, pa.ArrowException) as exc:
        raise LogError(f"{where} cannot be read as Parquet ({exc}); {fix}") from exc
    unknown = [name for name in table.column_names if name not in INBOX_SCHEMA.names]
    missing = sorted(_REQUIRED - set(table.column_names))
    if unknown or missing:
        what = "; ".join(
            [f"unknown column(s) {unknown}"] * bool(unknown)
            + [f"missing column(s) {missing}"] * bool(missing)
        )
        raise LogError(f"{where} is not an inbox part: {what}; {fix}")
    if table.num_rows > MAX_PART_ROWS:
        raise LogError(
            f"{where}: {table.num_rows} rows, more than a part may hold ({MAX_PART_ROWS})"
        )
    columns = []
    for field in INBOX_SCHEMA:
        if field.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        try:
            columns.append(table.column(field.name).cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise LogError(
                f"{where}: column {field.name!r} is {table.schema.field(field.name).type}, "
                f"not {field.type} ({exc}); {fix}"
            ) from exc
    rows = pa.Table.from_arrays(columns, schema=INBOX_SCHEMA).to_pylist()
    if not rows:
        raise LogError(f"{where}: no rows; {fix}")
    return _rollouts(rows, where)
