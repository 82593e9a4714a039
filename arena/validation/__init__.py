"""Static validation: build a world with SQLite and check every statement against the format's rules.

:func:`compile_world` builds a world's database (tables and indexes, then
seed rows with foreign keys off, then views and triggers), compiles every
tool statement with ``EXPLAIN`` under the recording authorizer, and returns
a :class:`CompiledWorld` ready to run — or raises :class:`SpecError` naming
every problem. :func:`compile_task` does the same for a task's verifier,
frame and reference solution against a compiled world.

SQLite is the judge of what a statement does: the authorizer reports each
table, column and function it touches, the EXPLAIN listing its parameters
and the functions its program calls (column defaults included).

The modules, by what they validate:

- :mod:`~coevo.arena.validation.compiled`: the compiled records handed to the runtime.
- :mod:`~coevo.arena.validation.world`: a world's fields and its build, in order;
  :mod:`~coevo.arena.validation.schema` (its schema statements, tables and
  implicit code), :mod:`~coevo.arena.validation.data` (its seed rows) and
  :mod:`~coevo.arena.validation.tools` (its tools) do the parts.
- :mod:`~coevo.arena.validation.task`: a task's fields, verifier checks and
  reference solution; :mod:`~coevo.arena.validation.frame` its frame.
- :mod:`~coevo.arena.validation.statements`: what every untrusted statement is
  checked for; :mod:`~coevo.arena.validation.problems`: wording they all share.
"""

from __future__ import annotations

from coevo.arena.validation.compiled import (
    CompiledCheck,
    CompiledTask,
    CompiledTool,
    CompiledWorld,
    FrameEntry,
    TableInfo,
)
from coevo.arena.validation.task import compile_task
from coevo.arena.validation.world import clone_world, compile_world

__all__ = [
    "CompiledCheck",
    "CompiledTask",
    "CompiledTool",
    "CompiledWorld",
    "FrameEntry",
    "TableInfo",
    "clone_world",
    "compile_task",
    "compile_world",
]
