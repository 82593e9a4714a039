"""Which SQLite functions untrusted SQL may call, and why each one's cost is bounded.

A world's tools, verifier checks, frame conditions, views, triggers and
column defaults are untrusted SQL. Their cost is bounded by the VM
instruction budget (:mod:`coevo.arena.sqlguard`), but SQLite counts one
instruction for a whole function call, and a progress handler cannot stop a
function halfway. So every function untrusted SQL may call is on
:data:`FUNCTION_POLICY` with the reason its one call is cheap: its work is
constant, or linear in its arguments and result (both capped at
``SQLITE_LIMIT_LENGTH``, 1 MB by default, a few milliseconds), or coevo
bounds it another way. A function not on the list is refused when the
statement compiles, with its name in the message.

Measured on SQLite 3.40 (the figures behind each decision):

* ``printf('%.*c', 2147483647, 'x')`` builds its 2 GB of padding before the
  length check, about 10 s in one call (and a literal ``%.999999c``, 4 ms,
  repeated a hundred times in one format, 0.4 s): ``printf``/``format``
  formats must be literal strings with every width and precision written
  out (no ``*``), adding up to at most the length limit; checked when the
  statement compiles.
* ``instr`` and ``replace`` compare the pattern at every position: 4 s for a
  900 KB text and a 400 KB pattern; ``trim``/``ltrim``/``rtrim`` with a
  character set scan the set for every character. coevo installs
  implementations that are linear in their arguments (Python's string
  search), with SQLite's own results.
* ``LIKE``/``GLOB`` cost the text's length times the pattern's: 1 s for 90 KB
  against a 10 KB pattern. Patterns are limited to
  :data:`LIKE_PATTERN_BYTES` bytes, which bounds one call, not tightly: a
  256-byte pattern against a 1 MB text takes 0.5–0.7 s (SQLite 3.40.1, the
  2-core development VM; up to 1.2 s while it was busier). A statement
  that makes many such calls keeps within its instruction budget and is
  stopped by the wall clock: the backstop of a call or check (10 s), and
  the Judge's per task in its worker (60 s), which the ``llm-synth``
  Synthesizer's self-checks run under too.
* ``json_patch`` is quadratic in the keys it merges (3.3 s for two objects of
  30,000 keys): refused.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from typing import Any, Final

__all__ = [
    "FUNCTION_POLICY",
    "LIKE_PATTERN_BYTES",
    "format_problem",
    "install_linear_functions",
]

#: The longest LIKE/GLOB pattern, in bytes (``SQLITE_LIMIT_LIKE_PATTERN_LENGTH``).
LIKE_PATTERN_BYTES: Final = 256

_CONSTANT = "constant work per call"
_LINEAR = "linear in its arguments and result, each capped by the length limit"
_AGGREGATE = "one step per row, each step counted by the instruction budget; result capped by the length limit"
_MATH = "a math function: constant work per call"
_CLOCK = "coevo's world clock: a wrapper around SQLite's own date function, linear in its format"

#: Every function untrusted SQL may call, with the reason its cost is bounded.
#: (Functions left out: ``random``, ``randomblob``, ``changes``,
#: ``total_changes``, ``last_insert_rowid``, ``sqlite_*`` — they read something
#: other than the world's state; ``load_extension`` — it loads code;
#: ``json_patch`` — quadratic; ``subtype`` — internal.)
FUNCTION_POLICY: Final[dict[str, str]] = {
    # scalar, constant work
    **{
        name: _CONSTANT
        for name in [
            "abs",
            "coalesce",
            "ifnull",
            "iif",
            "nullif",
            "likelihood",
            "likely",
            "unlikely",
            "typeof",
            "sign",
            "round",
            "max",
            "min",
            "mod",
        ]
    },
    **{
        name: _MATH
        for name in [
            "acos",
            "acosh",
            "asin",
            "asinh",
            "atan",
            "atan2",
            "atanh",
            "ceil",
            "ceiling",
            "cos",
            "cosh",
            "degrees",
            "exp",
            "floor",
            "ln",
            "log",
            "log10",
            "log2",
            "pi",
            "pow",
            "power",
            "radians",
            "sin",
            "sinh",
            "sqrt",
            "tan",
            "tanh",
            "trunc",
        ]
    },
    # scalar, linear
    **{
        name: _LINEAR
        for name in [
            "char",
            "hex",
            "length",
            "lower",
            "upper",
            "quote",
            "soundex",
            "substr",
            "substring",
            "unicode",
            "zeroblob",
            "json",
            "json_array",
            "json_array_length",
            "json_extract",
            "json_insert",
            "json_object",
            "json_quote",
            "json_remove",
            "json_replace",
            "json_set",
            "json_type",
            "json_valid",
            "->",
            "->>",
        ]
    },
    "trim": _LINEAR + " (with a character set: coevo's linear implementation)",
    "ltrim": _LINEAR + " (with a character set: coevo's linear implementation)",
    "rtrim": _LINEAR + " (with a character set: coevo's linear implementation)",
    "instr": "coevo's linear implementation (SQLite's is quadratic: 4 s for 900 KB × 400 KB)",
    "replace": "coevo's linear implementation (SQLite's is quadratic: 4 s for 900 KB × 400 KB)",
    "like": f"text length × pattern length, patterns limited to {LIKE_PATTERN_BYTES} bytes",
    "glob": f"text length × pattern length, patterns limited to {LIKE_PATTERN_BYTES} bytes",
    "printf": "a literal format with written-out widths and precisions (no *), adding up to at most the length limit",
    "format": "a literal format with written-out widths and precisions (no *), adding up to at most the length limit",
    # the world clock
    **{
        name: _CLOCK
        for name in [
            "date",
            "time",
            "datetime",
            "julianday",
            "unixepoch",
            "strftime",
            "current_date",
            "current_time",
            "current_timestamp",
        ]
    },
    # aggregates and window functions
    **{
        name: _AGGREGATE
        for name in [
            "avg",
            "count",
            "group_concat",
            "json_group_array",
            "json_group_object",
            "sum",
            "total",
            "cume_dist",
            "dense_rank",
            "first_value",
            "lag",
            "last_value",
            "lead",
            "nth_value",
            "ntile",
            "percent_rank",
            "rank",
            "row_number",
        ]
    },
}

#: Functions whose format argument (the first) is checked when a statement compiles.
FORMAT_FUNCTIONS: Final = frozenset({"printf", "format"})

_SPEC = re.compile(r"%([-+ 0#,!]*)(\*|\d+)?(?:\.(\*|\d+))?([a-zA-Z%])?")


def format_problem(name: str, fmt: str, max_value_bytes: int) -> str | None:
    """Why ``name(fmt, ...)`` may not run, or None when every width and precision is bounded.

    Args:
        name: ``printf`` or ``format``.
        fmt: the literal format string.
        max_value_bytes: the length limit.
    """
    total = 0
    for match in _SPEC.finditer(fmt):
        width, precision = match.group(2), match.group(3)
        if "*" in (width, precision):
            return (
                f"{name}({_short(fmt)}, ...) takes a width or precision from an argument (*), "
                "which has no bound; write the number in the format"
            )
        for label, value in (("width", width), ("precision", precision)):
            if value is not None and int(value) > max_value_bytes:
                return (
                    f"{name}({_short(fmt)}, ...) has a {label} of {int(value):,}, over the "
                    f"length limit of {max_value_bytes:,} bytes"
                )
        # SQLite pads each conversion before it checks the length: the sum is what one call costs
        total += max(int(width or 0), int(precision or 0))
    if total > max_value_bytes:
        return (
            f"{name}({_short(fmt)}, ...) has widths and precisions adding up to {total:,}, over "
            f"the length limit of {max_value_bytes:,} bytes"
        )
    return None


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def install_linear_functions(
    conn: sqlite3.Connection, helper: sqlite3.Connection, max_value_bytes: int
) -> None:
    """Replace ``instr``, ``replace`` and the two-argument trims by linear-time versions.

    Every argument is searched as SQLite searches it, with Python's string
    search (linear): two BLOBs byte by byte, anything else as text (a number
    as SQLite writes it, a BLOB's bytes as UTF-8), and a pattern or
    character set read up to its first NUL, as SQLite's C code reads it.
    Text that is not UTF-8 (a BLOB searched as text) is handled byte by byte
    as SQLite does, up to :data:`_RAW_TEXT_BYTES` bytes; longer, the call
    fails. No argument reaches SQLite's own quadratic functions.

    Args:
        conn: the world connection.
        helper: a private connection, for SQLite's text of a REAL.
        max_value_bytes: the length limit: a ``replace`` whose result would be
            longer fails before building it, as SQLite's own does.
    """

    def raw(value: Any) -> bytes:
        """The bytes SQLite searches when it reads ``value`` as text."""
        if value.__class__ is bytes:
            return value
        if value.__class__ is str:
            return value.encode("utf-8")
        if value.__class__ is int:
            return str(value).encode()
        return str(helper.execute("SELECT CAST(? AS TEXT)", (value,)).fetchone()[0]).encode()

    def text(value: Any) -> str:
        if value.__class__ is str:
            return value
        return raw(value).decode("utf-8")

    def instr(haystack: Any, needle: Any) -> Any:
        if haystack is None or needle is None:
            return None
        if haystack.__class__ is bytes and needle.__class__ is bytes:
            return haystack.find(needle) + 1
        try:
            return text(haystack).find(text(needle)) + 1
        except UnicodeDecodeError:
            return _raw_instr(raw(haystack), raw(needle))

    too_big = "x" * (max_value_bytes + 1)  # SQLite refuses it: "string or blob too big"

    def replace(value: Any, old: Any, new: Any) -> Any:
        if value is None or old is None:
            return None
        pattern = raw(old)
        if not pattern or pattern[0] == 0:  # an empty pattern (up to a NUL): the value as it is,
            return _as_text(value) if value.__class__ is bytes else value  # a BLOB read as text
        if new is None:
            return None
        haystack, replacement = raw(value), raw(new)
        grow = len(replacement) - len(pattern)
        if grow > 0 and len(haystack) + haystack.count(pattern) * grow > max_value_bytes:
            return too_big
        return _as_text(haystack.replace(pattern, replacement))

    def trimmer(left: bool, right: bool) -> Callable[[Any, Any], Any]:
        strip = str.strip if left and right else (str.lstrip if left else str.rstrip)

        def trim(value: Any, chars: Any) -> Any:
            if value is None or chars is None:
                return None
            try:
                return strip(text(value), text(chars).split("\0", 1)[0])
            except UnicodeDecodeError:
                return _as_text(_raw_trim(raw(value), raw(chars), left, right))

        return trim

    conn.create_function("instr", 2, instr, deterministic=True)
    conn.create_function("replace", 3, replace, deterministic=True)
    conn.create_function("trim", 2, trimmer(True, True), deterministic=True)
    conn.create_function("ltrim", 2, trimmer(True, False), deterministic=True)
    conn.create_function("rtrim", 2, trimmer(False, True), deterministic=True)


_RAW_TEXT_BYTES: Final = 4096
"""The longest text that is not UTF-8 the string functions take (SQLite's byte-wise trim is quadratic)."""


def _as_text(data: bytes) -> str:
    """``data`` as the TEXT result SQLite would give (text that is not UTF-8 cannot reach Python: an error)."""
    return data.decode("utf-8")


def _boundaries(data: bytes) -> list[int]:
    """Where SQLite's characters start in ``data`` (it skips bytes ``10xxxxxx`` after each)."""
    return [i for i, byte in enumerate(data) if i == 0 or byte & 0xC0 != 0x80]


def _raw_instr(haystack: bytes, needle: bytes) -> int:
    """SQLite's ``instr`` on text that is not UTF-8: the character position of the first match at a character start."""
    if len(haystack) > _RAW_TEXT_BYTES:
        raise ValueError("text that is not UTF-8 is too long to search")
    starts = [*_boundaries(haystack), len(haystack)]
    for count, start in enumerate(starts):
        if len(needle) > len(haystack) - start:
            return 0
        if haystack.startswith(needle, start):
            return count + 1
    return 0


def _raw_trim(data: bytes, chars: bytes, left: bool, right: bool) -> bytes:
    """SQLite's two-argument trims on text that is not UTF-8, byte by byte as its C code does."""
    if len(data) > _RAW_TEXT_BYTES or len(chars) > _RAW_TEXT_BYTES:
        raise ValueError("text that is not UTF-8 is too long to trim")
    chars = chars.split(b"\0", 1)[0]
    pieces, i = [], 0
    while i < len(
        chars
    ):  # SQLite's SQLITE_SKIP_UTF8: a byte, and its continuations after a lead byte
        start, lead = i, chars[i]
        i += 1
        if lead >= 0xC0:
            while i < len(chars) and chars[i] & 0xC0 == 0x80:
                i += 1
        pieces.append(chars[start:i])
    # SQLite removes the first character of the set (in set order) that matches; by length, each
    # step is a few dictionary lookups instead of a scan of the set
    first: dict[bytes, int] = {}
    for index, piece in enumerate(pieces):
        first.setdefault(piece, index)
    lengths = sorted({len(piece) for piece in first})

    def match(end: bool) -> int:
        found = [
            (first[part], size)
            for size in lengths
            if size <= len(data) and (part := data[-size:] if end else data[:size]) in first
        ]
        return min(found)[1] if found else 0

    if left:
        while data and (size := match(end=False)):
            data = data[size:]
    if right:
        while data and (size := match(end=True)):
            data = data[: len(data) - size]
    return data
