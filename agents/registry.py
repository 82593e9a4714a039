"""Roles by name: coevo's built-ins and plugins found through the ``coevo.roles`` entry points.

A plugin package declares its roles in its ``pyproject.toml``::

    [project.entry-points."coevo.roles"]
    my-solver = "my_package.solvers:MySolver"

and is usable from an experiment file by name (``solver = "my-solver"``)
with no change to coevo. The entry point's object is a factory (a class or
a function) called with the role's configuration; its kind comes from a
``kind`` attribute or from the protocol it satisfies
(:func:`coevo.agents.protocols.kind_of`).
"""

from __future__ import annotations

import difflib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from coevo.agents.protocols import ROLE_KINDS, kind_of
from coevo.arena.errors import RegistryError

__all__ = ["ENTRY_POINT_GROUP", "REGISTRY", "Registry", "RoleInfo", "role"]

ENTRY_POINT_GROUP: Final = "coevo.roles"


@dataclass(frozen=True)
class RoleInfo:
    """One registered role.

    Attributes:
        name: the name experiments use.
        kind: synthesizer, solver, judge or world model.
        origin: ``coevo`` for a built-in, else the distribution (name and version) that provides it.
        factory: called with the role's configuration to make an instance.
        description: one line for ``coevo roles``.
    """

    name: str
    kind: str
    origin: str
    factory: Callable[..., Any]
    description: str = ""


def _first_line(obj: Any) -> str:
    doc = (getattr(obj, "__doc__", None) or "").strip()
    return doc.splitlines()[0].rstrip(".") if doc else ""


class Registry:
    """Role names to factories; plugins are loaded from the entry points on first use."""

    def __init__(self, *, builtins: Callable[[Registry], None] | None = None):
        self._roles: dict[str, RoleInfo] = {}
        self._builtins = builtins
        self._loaded = False
        self.plugin_errors: list[str] = []

    def register(
        self,
        name: str,
        factory: Callable[..., Any],
        *,
        kind: str | None = None,
        origin: str = "coevo",
        description: str = "",
    ) -> RoleInfo:
        """Register ``factory`` under ``name``.

        Raises:
            RegistryError: the name is taken by another factory, or the kind is
                unknown or cannot be told from the factory.
        """
        found = kind or getattr(factory, "kind", None) or kind_of(factory)
        if found not in ROLE_KINDS:
            raise RegistryError(
                f"role {name!r}: cannot tell its kind ({found!r}); give it a `kind` attribute "
                f"({', '.join(ROLE_KINDS)}) or the methods of one of the protocols in coevo.agents.protocols"
            )
        old = self._roles.get(name)
        if old is not None and old.factory is not factory:
            raise RegistryError(
                f"role {name!r} is already registered by {old.origin}; choose another name"
            )
        info = RoleInfo(name, found, origin, factory, description or _first_line(factory))
        self._roles[name] = info
        return info

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        if self._builtins is not None:
            self._builtins(self)
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = entry.dist
            origin = f"{dist.metadata['Name']} {dist.version}" if dist is not None else entry.value
            try:
                self.register(entry.name, entry.load(), origin=origin)
            except Exception as exc:  # a broken plugin must not take coevo down with it
                self.plugin_errors.append(
                    f"entry point {entry.name!r} ({entry.value}, from {origin}): "
                    f"{type(exc).__name__}: {exc}"
                )

    def reload(self) -> None:
        """Forget plugins and read the entry points again (after installing a plugin)."""
        self._roles = {k: v for k, v in self._roles.items() if v.origin == "coevo"}
        self._loaded = False
        self.plugin_errors = []
        self._load()

    def get(self, name: str) -> RoleInfo:
        """The role called ``name`` (a registered name, or an import path ``"package.module:Factory"``).

        Raises:
            RegistryError: no such role; the message names the closest ones and every kind's roles.
        """
        self._load()
        if name in self._roles:
            return self._roles[name]
        if ":" in name:
            return self._imported(name)
        close = difflib.get_close_matches(name, list(self._roles), n=2)
        hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
        raise RegistryError(
            f"no role called {name!r}; {hint}registered: {', '.join(sorted(self._roles)) or 'none'} "
            "(`coevo roles` lists them; a plugin registers through the 'coevo.roles' entry points)"
        )

    def _imported(self, name: str) -> RoleInfo:
        """A role named by its import path, ``"package.module:Factory"`` (no entry point needed)."""
        import importlib

        module_name, _, attribute = name.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise RegistryError(
                f"role {name!r}: cannot import {attribute!r} from {module_name!r} "
                f"({type(exc).__name__}: {exc}); is the package installed, or on the path of every Ray worker?"
            ) from None
        return self.register(name, factory, origin=module_name)

    def create(self, name: str, **config: Any) -> Any:
        """An instance of role ``name`` made with ``config``."""
        return self.get(name).factory(**config)

    def roles(self) -> list[RoleInfo]:
        """Every registered role, by kind then name."""
        self._load()
        order = {kind: i for i, kind in enumerate(ROLE_KINDS)}
        return sorted(self._roles.values(), key=lambda r: (order[r.kind], r.name))


def _builtins(registry: Registry) -> None:
    from coevo.agents.claude.judge import ClaudeJudge
    from coevo.agents.claude.solver import ClaudeSolver
    from coevo.agents.claude.synthesizer import ClaudeSynthesizer
    from coevo.agents.claude.world_model import ClaudeWorldModel
    from coevo.agents.judges import MechanicalJudge, SearchJudge
    from coevo.agents.linear_pg import LinearPGSolver
    from coevo.agents.synthesizers.mining import Miner
    from coevo.agents.synthesizers.procedural import ProceduralSynthesizer
    from coevo.agents.world_models import IRTWorldModel

    registry.register(
        "procedural",
        ProceduralSynthesizer,
        kind="synthesizer",
        description="tasks in five seeded professional domains, at a difficulty level (offline)",
    )
    registry.register(
        "miner",
        Miner,
        kind="synthesizer",
        description="a world and tasks mined from a real SQLite database (config: path)",
    )
    registry.register(
        "linear-pg",
        LinearPGSolver,
        kind="solver",
        description="log-linear policy over pointer-style actions, learnt by policy gradient (numpy, offline)",
    )
    registry.register(
        "claude-synth",
        ClaudeSynthesizer,
        kind="synthesizer",
        description="Claude writes scenario, world, task and a reference-blind verifier, checked by the Judge (needs ANTHROPIC_API_KEY)",
    )
    registry.register(
        "claude",
        ClaudeSolver,
        kind="solver",
        description="Claude as a multi-turn tool-use agent over the world's tools (needs ANTHROPIC_API_KEY)",
    )
    registry.register(
        "claude-judge",
        ClaudeJudge,
        kind="judge",
        description="mechanical checks, then k Claude attempts (solvable) and an ambiguity review (needs ANTHROPIC_API_KEY)",
    )
    registry.register(
        "mechanical",
        MechanicalJudge,
        description="the mechanical checks (valid, oracle, noop, unsolved, partial, determinism, grounded)",
    )
    registry.register(
        "search",
        SearchJudge,
        description="the mechanical checks, then solvable: a search that never saw the solution must earn 1",
    )
    registry.register(
        "claude-world-model",
        ClaudeWorldModel,
        kind="world model",
        description="Claude predicts P(success) from the task, and can simulate the tools (needs ANTHROPIC_API_KEY)",
    )
    registry.register(
        "irt",
        IRTWorldModel,
        description="online item-response model: ability per solver version, difficulty from task features",
    )


REGISTRY: Final = Registry(builtins=_builtins)
"""The registry experiments and ``coevo roles`` use."""


def role(name: str, *, kind: str | None = None, description: str = "") -> Callable[[Any], Any]:
    """Class decorator registering a built-in or in-process role under ``name``."""

    def decorate(factory: Any) -> Any:
        REGISTRY.register(name, factory, kind=kind, description=description)
        return factory

    return decorate
