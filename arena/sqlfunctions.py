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
  length check, about 10 s in one call: ``printf``/``format`` formats must be
  literal strings with every width and precision written out (no ``*``) and
  at most the length limit; checked when the statement compiles.
* ``instr`` and ``replace`` compare the pattern at every position: 4 s for a
  900 KB text and a 400 KB pattern; ``trim``/``ltrim``/``rtrim`` with a
  character set scan the set for every character. coevo installs
  implementations that are linear in their arguments (Python's string
  search), with SQLite's own results.
* ``LIKE``/``GLOB`` cost the text's length times the pattern's: 1 s for 90 KB
  against a 10 KB pattern. Patterns are limited to
  :data:`LIKE_PATTERN_BYTES` bytes, so one call stays under about 0.3 s.
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
    "printf": "a literal format with written-out widths and precisions (no *), each at most the length limit",
    "format": "a literal format with written-out widths and precisions (no *), each at most the length limit",
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
    return None


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def install_linear_functions(conn: sqlite3.Connection, helper: sqlite3.Connection) -> None:
    """Replace ``instr``, ``replace`` and the two-argument trims by linear-time versions.

    Text arguments (the common case) and two BLOBs are handled by Python's
    string search, which is linear and gives SQLite's results (SQLite counts
    characters of text, bytes of BLOBs). Other mixes (a number, NULL, text
    with a BLOB) go to SQLite's own function on ``helper``, where they are
    short: a number's text is, and a BLOB over 4 KB mixed with text is
    refused rather than searched quadratically.

    Args:
        conn: the world connection.
        helper: a private connection with SQLite's own functions.
    """

    def delegate(name: str, arity: int) -> Callable[..., Any]:
        sql = f"SELECT {name}({','.join('?' * arity)})"
        return lambda *args: helper.execute(sql, args).fetchone()[0]

    own_instr, own_replace = delegate("instr", 2), delegate("replace", 3)

    def instr(haystack: Any, needle: Any) -> Any:
        if haystack.__class__ is str and needle.__class__ is str:
            return haystack.find(needle) + 1
        if haystack.__class__ is bytes and needle.__class__ is bytes:
            return haystack.find(needle) + 1
        return own_instr(*_short_numbers(haystack, needle))

    def replace(text: Any, old: Any, new: Any) -> Any:
        if text.__class__ is str and old.__class__ is str and new.__class__ is str:
            return text.replace(old, new) if old else text
        return own_replace(*_short_numbers(text, old, new))

    def trimmer(name: str, strip: Callable[[str, str], str]) -> Callable[[Any, Any], Any]:
        own = delegate(name, 2)

        def trim(text: Any, chars: Any) -> Any:
            if text.__class__ is str and chars.__class__ is str:
                return strip(text, chars)
            return own(*_short_numbers(text, chars))

        return trim

    conn.create_function("instr", 2, instr, deterministic=True)
    conn.create_function("replace", 3, replace, deterministic=True)
    conn.create_function("trim", 2, trimmer("trim", str.strip), deterministic=True)
    conn.create_function("ltrim", 2, trimmer("ltrim", str.lstrip), deterministic=True)
    conn.create_function("rtrim", 2, trimmer("rtrim", str.rstrip), deterministic=True)


class _TooCostly(Exception):
    """A BLOB argument too long for SQLite's quadratic search."""


def _short_numbers(*args: Any) -> tuple[Any, ...]:
    """``args`` unchanged when SQLite's own function is cheap on them (no long BLOB), else an error."""
    for value in args:
        if value.__class__ is bytes and len(value) > 4096:
            raise _TooCostly
    return args
