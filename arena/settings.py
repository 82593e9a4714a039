"""Typed settings for plugins: a pydantic model per role or curriculum, and errors that say how to fix them.

A role's settings (the ``config`` of its experiment table) are validated
against a model before anything starts. A role declares nothing for this: the
model is derived from its factory's signature (:func:`settings_model`), so
the constructor stays the one owner of every setting's name, type and default.
:func:`validate_settings` reads a mapping into such a model and turns
pydantic's errors into one message per problem, each naming the key, with
"did you mean" for a misspelt one.
"""

from __future__ import annotations

import difflib
import inspect
import json
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from coevo.arena.errors import ConfigError
from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
)

__all__ = [
    "Settings",
    "StrictNumbers",
    "explain",
    "merged",
    "settings_model",
    "validate_settings",
]


def _members(annotation: Any) -> list[Any]:
    """The types an annotation admits (``int | None`` → ``[int, None]``; ``Annotated`` unwrapped)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [annotation]


def _wants_number(annotation: Any) -> bool:
    members = _members(annotation)
    takes_bool = any(m is bool or m is Any for m in members)
    return not takes_bool and any(m is int or m is float for m in members)


def _boolean_for_number(annotation: Any, value: Any) -> bool:
    """True when ``value`` is, or a list of it holds, a boolean where ``annotation`` wants a number."""
    if isinstance(value, bool):
        return _wants_number(annotation)
    if isinstance(value, (list, tuple)) and any(isinstance(v, bool) for v in value):
        items = [a for m in _members(annotation) for a in typing.get_args(m) if a is not Ellipsis]
        return any(_wants_number(a) for a in items)
    return False


class StrictNumbers(BaseModel):
    """A model whose integer and float fields refuse booleans.

    pydantic reads ``true`` as 1 where a number is wanted; in a settings file
    that is a slip (``generations = true``), never a count, so it is an error
    that names the key.
    """

    @field_validator("*", mode="before")
    @classmethod
    def _numbers_are_not_booleans(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and _boolean_for_number(field.annotation, value):
            raise ValueError("a number is wanted here: true and false are not numbers")
        return value


class Settings(StrictNumbers):
    """The base of every settings model: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    def arguments(self) -> dict[str, Any]:
        """The settings as keyword arguments for the factory (validated values, not re-dumped)."""
        return {name: getattr(self, name) for name in type(self).model_fields}


Model = TypeVar("Model", bound=BaseModel)


def settings_model(factory: Callable[..., Any], name: str) -> type[Settings]:
    """A settings model with a field per keyword parameter of ``factory`` (a class or a function).

    A parameter's annotation is its type (``Any`` when it has none) and its
    default is the field's; a ``**kwargs`` parameter lets any other key through.
    A class that declares ``settings_from_bases = True`` hands its ``**kwargs``
    on to its base class's ``__init__`` unchanged: then the bases' keyword
    parameters are its settings too (the nearest base's own, then its bases'
    in turn), and no other key is let through.
    """
    if not (inspect.isclass(factory) and getattr(factory, "settings_from_bases", False)):
        return _model(name, [factory])
    chain = [
        vars(c)["__init__"] for c in factory.__mro__ if "__init__" in vars(c) and c is not object
    ]
    return _model(name, chain or [factory])


def _model(name: str, chain: list[Callable[..., Any]]) -> type[Settings]:
    """The settings of ``chain[0]``, followed through ``**kwargs`` into the rest of ``chain``."""
    fields: dict[str, Any] = {}
    for target in chain:
        try:
            signature = inspect.signature(target)  # a class's honours a pydantic __signature__
            hints = typing.get_type_hints(target.__init__ if inspect.isclass(target) else target)
        except (TypeError, ValueError, NameError):  # no readable signature: take anything
            return create_model(f"{name}Settings", __base__=_Open, **fields)
        open_ended = False
        for parameter in signature.parameters.values():
            if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                open_ended = True
                continue
            if parameter.kind in (
                inspect.Parameter.VAR_POSITIONAL,
                inspect.Parameter.POSITIONAL_ONLY,
            ) or parameter.name in ("self", *fields):
                continue
            default = ... if parameter.default is inspect.Parameter.empty else parameter.default
            given = parameter.annotation  # a pydantic model's __signature__ carries its field types
            written = (
                given
                if given is not inspect.Parameter.empty and not isinstance(given, str)
                else Any
            )
            fields[parameter.name] = (hints.get(parameter.name, written), default)
        if not open_ended:
            return create_model(f"{name}Settings", __base__=Settings, **fields)
    return create_model(f"{name}Settings", __base__=_Open, **fields)


class _Open(Settings):
    model_config = ConfigDict(extra="allow", frozen=True, arbitrary_types_allowed=True)

    def arguments(self) -> dict[str, Any]:
        """Declared settings and every other key given."""
        return {**super().arguments(), **(self.model_extra or {})}


def _as_written(value: Any) -> str:
    """A value as a settings file writes it (``true``, ``"text"``, ``[1, 2]``), not as Python prints it; a long one cut (a 4,000-digit number is said by its length)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else f"{text[:40]}... ({len(text)} characters)"


def explain(
    error: ValidationError, where: str, allowed: Callable[[tuple[Any, ...]], list[str]]
) -> list[str]:
    """One line per problem in ``error``, each naming its key under ``where``.

    Args:
        error: what pydantic found.
        where: the dotted place the validated mapping sits at (``solver.config``).
        allowed: the keys allowed at a location (for "did you mean" on an unknown key).
    """
    lines = []
    prefix = [where] if where else []
    for problem in error.errors():
        location = tuple(problem["loc"])
        dotted = ".".join([*prefix, *map(str, location)])
        if problem["type"] == "extra_forbidden":
            keys = allowed(location[:-1])
            close = difflib.get_close_matches(str(location[-1]), keys, n=1)
            suggestion = ".".join([*prefix, *map(str, location[:-1]), *close[:1]])
            hint = f"; did you mean {suggestion!r}?" if close else ""
            lines.append(
                f"unknown key {dotted!r}{hint} (allowed here: {', '.join(keys) or 'none'})"
            )
        elif problem["type"] == "value_error" and not location:
            # a rule over several settings (a model validator): its message says it all
            lines.append(f"{where or 'settings'}: {problem['ctx']['error']}")
        else:
            lines.append(f"{dotted}: {problem['msg']} (got {_as_written(problem.get('input'))})")
    return lines


def validate_settings(
    model: type[Model], data: Mapping[str, Any], *, where: str, owner: str
) -> Model:
    """``data`` read into ``model``.

    Args:
        model: the settings model.
        data: the settings as given (from TOML or JSON).
        where: where they were given (``solver.config``), for messages.
        owner: what takes them (``the solver 'linear-pg'``), for messages.

    Raises:
        ConfigError: every problem, one per line, each naming its key and what is allowed.
    """
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:

        def allowed(location: tuple[Any, ...]) -> list[str]:
            return list(model.model_fields) if not location else []

        lines = explain(exc, where, allowed)
        raise ConfigError(
            f"{owner} does not accept these settings:\n  " + "\n  ".join(lines)
        ) from exc


def merged(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``update`` laid over it, tables merged key by key (a TOML override, a τ² task's data)."""
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out
