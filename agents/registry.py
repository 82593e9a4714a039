"""Roles by name: coevo's built-ins and plugins found through the ``coevo.roles`` entry points.

The registry holds a :class:`RoleInfo` per role — its name, kind, the import
path of its factory (imported only when the role is used), its settings
model and the environment it needs — never a live object. A plugin package
declares its roles in its ``pyproject.toml``::

    [project.entry-points."coevo.roles"]
    my-solver = "my_package.solvers:MySolver"

and is usable from an experiment file by name (``name = "my-solver"``) with
no change to coevo. The entry point names a factory (a class or a function)
called with the role's settings, or a :class:`RoleInfo` when the role needs
environment variables or a settings model of its own. A role can also be
named by import path (``"my_package.solvers:MySolver"``) with no entry point.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

from coevo.agents.llm.environment import anthropic_environment, openai_environment
from coevo.agents.protocols import ROLE_KINDS, RoleEnvironment, capabilities_of, kind_of
from coevo.arena.errors import RegistryError
from coevo.arena.plugins import PluginRegistry, first_line, import_object
from coevo.arena.settings import Settings, settings_model, validate_settings

__all__ = ["ENTRY_POINT_GROUP", "REGISTRY", "Registry", "RoleEnvironment", "RoleInfo", "role"]

ENTRY_POINT_GROUP: Final = "coevo.roles"


@dataclass(frozen=True)
class RoleInfo:
    """One registered role: everything needed to check its settings and make it, without making it.

    Attributes:
        name: the name experiments use.
        kind: synthesizer, solver, judge or world model.
        entry_point: the factory (a class or a function called with the settings), or its
            import path ``"package.module:Factory"`` (imported on first use).
        origin: ``coevo`` for a built-in, else the distribution (name and version) that provides it.
        description: one line for ``coevo roles``.
        settings: the settings model; by default derived from the factory's signature.
        environment: the variables the role needs, computed from its validated settings.
    """

    name: str
    kind: str
    entry_point: str | Callable[..., Any]
    origin: str = "coevo"
    description: str = ""
    settings: type[Settings] | None = None
    environment: Callable[[Settings], RoleEnvironment] | None = None

    def __post_init__(self) -> None:
        if self.kind not in ROLE_KINDS:
            raise RegistryError(
                f"role {self.name!r}: unknown kind {self.kind!r}; kinds: {', '.join(ROLE_KINDS)}"
            )

    @cached_property
    def factory(self) -> Callable[..., Any]:
        """The factory (imported now if it was given as an import path)."""
        if callable(self.entry_point):
            return self.entry_point
        return import_object(self.entry_point, what=f"role {self.name!r}")

    @cached_property
    def settings_model(self) -> type[Settings]:
        """The model the role's settings are validated against."""
        return self.settings or settings_model(self.factory, self.name.title().replace("-", ""))

    @property
    def capabilities(self) -> list[str]:
        """The capabilities the factory's instances have (for a class; empty for a function)."""
        return capabilities_of(self.factory) if isinstance(self.factory, type) else []

    def validate(self, config: Mapping[str, Any], *, where: str = "config") -> Settings:
        """The role's settings read from ``config``.

        Raises:
            ConfigError: a key the role does not take (with the closest one), or a value of the wrong type.
        """
        return validate_settings(
            self.settings_model, config, where=where, owner=f"the {self.kind} {self.name!r}"
        )

    def env(self, settings: Settings) -> RoleEnvironment:
        """The environment variables the role needs with these settings."""
        return self.environment(settings) if self.environment is not None else RoleEnvironment()

    def preflight(self, settings: Settings) -> None:
        """The role's start-up check of these settings, when its factory has one (``preflight(settings)``).

        An LLM role checks that its servers answer and serve its model, so a
        run stops before anything starts instead of failing in every actor.

        Raises:
            CoevoError: what the check found, saying what to fix.
        """
        check = getattr(self.factory, "preflight", None)
        if callable(check):
            check(settings)

    def create(self, config: Mapping[str, Any] | Settings) -> Any:
        """An instance of the role made with ``config`` (validated first)."""
        settings = config if isinstance(config, Settings) else self.validate(config)
        return self.factory(**settings.arguments())


def _from_entry_point(name: str, obj: Any, origin: str) -> RoleInfo:
    """The :class:`RoleInfo` of an entry point or import path: a RoleInfo itself, or a factory."""
    if isinstance(obj, RoleInfo):
        return dataclasses.replace(obj, name=name, origin=origin)
    kind = kind_of(obj)
    declared = getattr(obj, "kind", None)
    if kind is None and declared is not None:
        raise RegistryError(
            f"role {name!r} declares kind {declared!r} but lacks that protocol's methods "
            "(see coevo.agents.protocols)"
        )
    if kind is None:
        raise RegistryError(
            f"role {name!r}: cannot tell its kind; give it a `kind` attribute "
            f"({', '.join(ROLE_KINDS)}) or the methods of one of the protocols in coevo.agents.protocols"
        )
    return RoleInfo(name, kind, obj, origin, first_line(obj))


class Registry(PluginRegistry[RoleInfo]):
    """Role names to :class:`RoleInfo`; plugins are read from the ``coevo.roles`` entry points on first use."""

    def __init__(self, *, builtins: Callable[[PluginRegistry[RoleInfo]], None] | None = None):
        super().__init__(
            ENTRY_POINT_GROUP,
            "role",
            builtins=builtins or (lambda registry: None),
            from_entry_point=_from_entry_point,
        )

    def add(
        self,
        name: str,
        factory: Callable[..., Any],
        *,
        kind: str | None = None,
        description: str = "",
    ) -> RoleInfo:
        """Register ``factory`` under ``name`` in this process (its kind from ``kind``, its attribute or its methods)."""
        info = _from_entry_point(name, factory, "coevo")
        return self.register(
            dataclasses.replace(
                info, kind=kind or info.kind, description=description or info.description
            )
        )

    def create(self, name: str, **config: Any) -> Any:
        """An instance of role ``name`` made with ``config``."""
        return self.get(name).create(config)

    def roles(self) -> list[RoleInfo]:
        """Every registered role, by kind then name."""
        order = {kind: i for i, kind in enumerate(ROLE_KINDS)}
        return sorted(self.specs(), key=lambda r: (order[r.kind], r.name))


_BUILTINS: Final = (
    RoleInfo(
        "procedural",
        "synthesizer",
        "coevo.agents.synthesizers.procedural:ProceduralSynthesizer",
        description="tasks in five seeded professional domains, at a difficulty level (offline)",
    ),
    RoleInfo(
        "learned-synth",
        "synthesizer",
        "coevo.agents.synthesizers.learned:LearnedSynthesizer",
        description="procedural (and mined) tasks from a policy over the planner's choice points, learnt by policy gradient on the proposer reward (offline)",
    ),
    RoleInfo(
        "miner",
        "synthesizer",
        "coevo.agents.synthesizers.mining:Miner",
        description="a world and tasks mined from a real SQLite database (config: path)",
    ),
    RoleInfo(
        "corpus",
        "synthesizer",
        "coevo.agents.synthesizers.corpus:CorpusSynthesizer",
        description="accepted tasks sampled from a corpus (coevo corpus build; config: path); eval requests from its held-out worlds",
    ),
    RoleInfo(
        "llm-synth",
        "synthesizer",
        "coevo.agents.llm.synthesizer:LLMSynthesizer",
        description="a model on an OpenAI-compatible server writes scenario, world, task and a reference-blind verifier (needs OPENAI_API_KEY)",
        environment=openai_environment,
    ),
    RoleInfo(
        "claude-synth",
        "synthesizer",
        "coevo.agents.claude.roles:ClaudeSynthesizer",
        description="Claude writes scenario, world, task and a reference-blind verifier, checked by the Judge (needs ANTHROPIC_API_KEY)",
        environment=anthropic_environment,
    ),
    RoleInfo(
        "linear-pg",
        "solver",
        "coevo.agents.linear_pg:LinearPGSolver",
        description="log-linear policy over pointer-style actions, learnt by policy gradient (numpy, offline)",
    ),
    RoleInfo(
        "llm-solver",
        "solver",
        "coevo.agents.llm.solver:LLMSolver",
        description="your model on an OpenAI-compatible server (vLLM, SGLang, Ollama) as a tool-use agent; trajectories with token ids (needs OPENAI_API_KEY)",
        environment=openai_environment,
    ),
    RoleInfo(
        "claude",
        "solver",
        "coevo.agents.claude.roles:ClaudeSolver",
        description="Claude as a multi-turn tool-use agent over the world's tools (needs ANTHROPIC_API_KEY)",
        environment=anthropic_environment,
    ),
    RoleInfo(
        "mechanical",
        "judge",
        "coevo.agents.judges:MechanicalJudge",
        description="the mechanical checks (valid, oracle, noop, unsolved, partial, determinism, grounded)",
    ),
    RoleInfo(
        "search",
        "judge",
        "coevo.agents.judges:SearchJudge",
        description="the mechanical checks, then solvable: a search that never saw the solution must earn 1",
    ),
    RoleInfo(
        "llm-judge",
        "judge",
        "coevo.agents.llm.judge:LLMJudge",
        description="mechanical checks, then k attempts of a model on an OpenAI-compatible server (solvable) and an ambiguity review (needs OPENAI_API_KEY)",
        environment=openai_environment,
    ),
    RoleInfo(
        "claude-judge",
        "judge",
        "coevo.agents.claude.roles:ClaudeJudge",
        description="mechanical checks, then k Claude attempts (solvable) and an ambiguity review (needs ANTHROPIC_API_KEY)",
        environment=anthropic_environment,
    ),
    RoleInfo(
        "irt",
        "world model",
        "coevo.agents.world_models:IRTWorldModel",
        description="online item-response model: ability per solver version, difficulty from task features",
    ),
    RoleInfo(
        "family-irt",
        "world model",
        "coevo.agents.family_world_model:FamilyWorldModel",
        description="the irt model plus a recency-weighted difficulty per kind of task (family, tool sequence, tool): sharper at the frontier",
    ),
    RoleInfo(
        "llm-world-model",
        "world model",
        "coevo.agents.llm.world_model:LLMWorldModel",
        description="a model on an OpenAI-compatible server predicts P(success) from the task (needs OPENAI_API_KEY)",
        environment=openai_environment,
    ),
    RoleInfo(
        "claude-world-model",
        "world model",
        "coevo.agents.claude.roles:ClaudeWorldModel",
        description="Claude predicts P(success) from the task, and can simulate the tools (needs ANTHROPIC_API_KEY)",
        environment=anthropic_environment,
    ),
)


def _builtins(registry: PluginRegistry[RoleInfo]) -> None:
    for info in _BUILTINS:
        registry.register(info)


REGISTRY: Final = Registry(builtins=_builtins)
"""The registry experiments and ``coevo roles`` use."""


def role(name: str, *, kind: str | None = None, description: str = "") -> Callable[[Any], Any]:
    """Class decorator registering a role defined in this process under ``name``."""

    def decorate(factory: Any) -> Any:
        REGISTRY.add(name, factory, kind=kind, description=description)
        return factory

    return decorate
