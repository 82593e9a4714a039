"""Registries of named plugins: built-ins registered lazily, others found through entry points.

Roles (:mod:`coevo.agents.registry`) and curricula
(:mod:`coevo.curricula.registry`) are registered the same way: by name, with
an entry point (``"package.module:Object"``) that is imported only when the
thing is used, and with "did you mean" when a name is misspelt. A plugin
package adds its own through an entry-point group in its ``pyproject.toml``::

    [project.entry-points."coevo.roles"]
    my-solver = "my_package.solvers:MySolver"

:class:`PluginRegistry` holds the specs (never live objects) and reads the
group on first use; a plugin that fails to load is reported in
:attr:`PluginRegistry.plugin_errors` and left out, so it cannot take coevo down.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from coevo.arena.errors import RegistryError

__all__ = ["Named", "PluginRegistry", "first_line", "import_object"]


def first_line(obj: Any) -> str:
    """The first line of ``obj``'s docstring, as plain text (a plugin's one-line description)."""
    doc = (getattr(obj, "__doc__", None) or "").strip()
    return doc.splitlines()[0].rstrip(".").replace("``", "") if doc else ""


def import_object(path: str, *, what: str) -> Any:
    """The object an import path ``"package.module:attribute"`` names.

    Raises:
        RegistryError: the module or the attribute cannot be imported; the message says which
            and why, and what ``what`` was being loaded.
    """
    module_name, sep, attribute = path.partition(":")
    if not sep or not module_name or not attribute:
        raise RegistryError(f"{what}: {path!r} is not an import path like 'package.module:Object'")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise RegistryError(
            f"{what}: cannot import {attribute!r} from {module_name!r} "
            f"({type(exc).__name__}: {exc}); is the package installed, and on the path of every Ray worker?"
        ) from exc


class Named(Protocol):
    """What a registry holds: a spec with a name and an origin."""

    @property
    def name(self) -> str:
        """The name experiments use."""
        ...

    @property
    def origin(self) -> str:
        """``coevo`` for a built-in, else the distribution (or module) that provides it."""
        ...


Spec = TypeVar("Spec", bound=Named)


class PluginRegistry(Generic[Spec]):
    """Names to specs: built-ins, plugins from an entry-point group, and import paths.

    Args:
        group: the entry-point group plugins register in (``coevo.roles``).
        what: what the registry holds, for messages ("role", "curriculum").
        builtins: registers the built-in specs (called on first use).
        from_entry_point: makes a spec from an entry point's name, loaded object and origin.
    """

    def __init__(
        self,
        group: str,
        what: str,
        *,
        builtins: Callable[[PluginRegistry[Spec]], None],
        from_entry_point: Callable[[str, Any, str], Spec],
    ):
        self.group = group
        self.what = what
        self._builtins = builtins
        self._from_entry_point = from_entry_point
        self._specs: dict[str, Spec] = {}
        self._loaded = False
        self.plugin_errors: list[str] = []
        """One line per entry point that failed to load (reported by ``coevo roles``)."""

    def register(self, spec: Spec) -> Spec:
        """Add ``spec`` under its name.

        Raises:
            RegistryError: the name is taken by another spec.
        """
        old = self._specs.get(spec.name)
        if old is not None and old != spec:
            raise RegistryError(
                f"{self.what} {spec.name!r} is already registered by {old.origin}; choose another name"
            )
        self._specs[spec.name] = spec
        return spec

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        self._builtins(self)
        for entry in importlib.metadata.entry_points(group=self.group):
            dist = entry.dist
            origin = f"{dist.metadata['Name']} {dist.version}" if dist is not None else entry.value
            try:
                self.register(self._from_entry_point(entry.name, entry.load(), origin))
            except Exception as exc:  # a broken plugin must not take coevo down with it
                self.plugin_errors.append(
                    f"entry point {entry.name!r} ({entry.value}, from {origin}): "
                    f"{type(exc).__name__}: {exc}"
                )

    def reload(self) -> None:
        """Forget plugins and read the entry points again (after installing a plugin)."""
        self._specs = {k: v for k, v in self._specs.items() if v.origin == "coevo"}
        self._loaded = False
        self.plugin_errors = []
        self._load()

    def get(
        self, name: str, *, among: Callable[[Spec], bool] | None = None, what: str | None = None
    ) -> Spec:
        """The spec called ``name`` (a registered name, or an import path ``"package.module:Object"``).

        Args:
            name: the name or import path.
            among: when there is no such name, suggest only the specs this holds for (e.g. the
                roles of one kind).
            what: what those are called in the message (``solver``); default: this registry's.

        Raises:
            RegistryError: no such name; the message names the closest ones and every registered one.
        """
        self._load()
        if name in self._specs:
            return self._specs[name]
        if ":" in name:
            obj = import_object(name, what=f"{self.what} {name!r}")
            return self.register(self._from_entry_point(name, obj, name.partition(":")[0]))
        names = [n for n, spec in self._specs.items() if among is None or among(spec)]
        close = difflib.get_close_matches(name, names, n=2)
        hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
        raise RegistryError(
            f"no {what or self.what} called {name!r}; {hint}registered: "
            f"{', '.join(sorted(names)) or 'none'} "
            f"(`coevo roles` lists them; a plugin registers through the {self.group!r} entry points)"
        )

    def specs(self) -> list[Spec]:
        """Every registered spec, by name."""
        self._load()
        return [self._specs[name] for name in sorted(self._specs)]
