"""Curricula by name: the built-ins and plugins found through the ``coevo.curricula`` entry points.

A plugin package declares its curriculum in its ``pyproject.toml``::

    [project.entry-points."coevo.curricula"]
    my-curriculum = "my_package.curricula:MyCurriculum"

where ``MyCurriculum`` subclasses :class:`~coevo.curricula.base.Curriculum`
and names its settings class (a :class:`~coevo.curricula.base.CurriculumConfig`)
in ``Config``. An experiment then says ``[curriculum] name = "my-curriculum"``
with that curriculum's own keys. :func:`curriculum_config` reads the
``[curriculum]`` table into the named curriculum's settings — the union of
every curriculum's settings, discriminated by ``name``: a key the chosen
curriculum does not take is an error naming the key and the curriculum.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

from coevo.arena.errors import ConfigError, RegistryError
from coevo.arena.plugins import PluginRegistry, first_line, import_object
from coevo.arena.settings import validate_settings
from coevo.curricula.base import Curriculum, CurriculumConfig

__all__ = [
    "CURRICULA",
    "ENTRY_POINT_GROUP",
    "CurriculumInfo",
    "curriculum_config",
    "make_curriculum",
    "recorded_curriculum",
]

ENTRY_POINT_GROUP: Final = "coevo.curricula"


@dataclass(frozen=True)
class CurriculumInfo:
    """One registered curriculum.

    Attributes:
        name: the name experiments use.
        entry_point: the :class:`~coevo.curricula.base.Curriculum` subclass, or its import path
            ``"package.module:Class"`` (imported on first use).
        origin: ``coevo`` for a built-in, else the distribution that provides it.
        description: one line for ``coevo roles``.
    """

    name: str
    entry_point: str | type[Curriculum]
    origin: str = "coevo"
    description: str = ""

    @cached_property
    def cls(self) -> type[Curriculum]:
        """The curriculum class (imported now if it was given as an import path)."""
        found = (
            self.entry_point
            if isinstance(self.entry_point, type)
            else import_object(self.entry_point, what=f"curriculum {self.name!r}")
        )
        if not (isinstance(found, type) and issubclass(found, Curriculum)):
            raise RegistryError(
                f"curriculum {self.name!r}: {found!r} is not a subclass of "
                "coevo.curricula.base.Curriculum"
            )
        return found

    @property
    def config(self) -> type[CurriculumConfig]:
        """Its settings class."""
        return self.cls.Config

    @property
    def kind(self) -> str:
        """``curriculum`` (listed beside the roles by ``coevo roles``)."""
        return "curriculum"


def _from_entry_point(name: str, obj: Any, origin: str) -> CurriculumInfo:
    if not (isinstance(obj, type) and issubclass(obj, Curriculum)):
        raise RegistryError(
            f"curriculum {name!r}: {obj!r} is not a subclass of coevo.curricula.base.Curriculum"
        )
    return CurriculumInfo(name, obj, origin, first_line(obj))


_BUILTINS: Final = (
    CurriculumInfo(
        "uniform",
        "coevo.curricula.uniform:Uniform",
        description="fresh tasks each generation, levels and domains drawn uniformly; no replay",
    ),
    CurriculumInfo(
        "plr",
        "coevo.curricula.plr:PLR",
        description="Prioritized Level Replay: replay the tasks a scorer rates most learnable",
    ),
    CurriculumInfo(
        "accel",
        "coevo.curricula.accel:ACCEL",
        description="PLR plus harder or easier mutations of the highest-scoring tasks",
    ),
    CurriculumInfo(
        "target-band",
        "coevo.curricula.target_band:TargetBand",
        description="tasks predicted in a success band around a frontier level that follows the Solver",
    ),
)


def _builtins(registry: PluginRegistry[CurriculumInfo]) -> None:
    for info in _BUILTINS:
        registry.register(info)


CURRICULA: Final = PluginRegistry[CurriculumInfo](
    ENTRY_POINT_GROUP, "curriculum", builtins=_builtins, from_entry_point=_from_entry_point
)
"""The registry experiments and ``coevo roles`` use."""


def curriculum_config(
    table: Mapping[str, Any] | CurriculumConfig, *, where: str = "curriculum"
) -> CurriculumConfig:
    """The ``[curriculum]`` table read into the settings of the curriculum it names.

    Keys at the top of the table are the chosen curriculum's settings. A
    sub-table named after a curriculum (``[curriculum.plr]``) holds that
    curriculum's own settings and applies only when it is the one chosen, so
    one file can carry the settings of several (to compare them with ``--set
    curriculum.name=...``); every sub-table is checked against its curriculum.

    Raises:
        RegistryError: no curriculum of that name (with the closest ones).
        ConfigError: a key that curriculum does not take, or a bad value; the message names both.
    """
    if isinstance(table, CurriculumConfig):
        return (
            table
            if isinstance(table, CURRICULA.get(table.name).config)
            else curriculum_config(table.model_dump(), where=where)
        )
    data = dict(table)
    name = str(data.get("name", CurriculumConfig.model_fields["name"].default))
    chosen = CURRICULA.get(name)
    known = {info.name for info in CURRICULA.specs()}
    shared = {k: v for k, v in data.items() if not (k in known and isinstance(v, Mapping))}
    for key, value in shared.items():
        if isinstance(value, Mapping) and key not in chosen.config.model_fields:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"; did you mean '{where}.{close[0]}'?" if close else ""
            raise ConfigError(
                f"[{where}.{key}] is not a curriculum{hint} (curricula: {', '.join(sorted(known))})"
            )
        if key not in chosen.config.model_fields:
            owners = [i.name for i in CURRICULA.specs() if key in i.config.model_fields]
            if owners:
                raise ConfigError(
                    f"'{where}.{key}' is a setting of {' and '.join(map(repr, owners))}, not of "
                    f"{name!r}: put it under [{where}.{owners[0]}], where it applies only when "
                    f"{owners[0]!r} is the one chosen"
                )
    common = {k: v for k, v in shared.items() if k in CurriculumConfig.model_fields}
    for other in sorted(known & data.keys() - {name}):
        own = {**common, **data[other], "name": other}
        validate_settings(
            CURRICULA.get(other).config,
            own,
            where=f"{where}.{other}",
            owner=f"the curriculum {other!r}",
        )
    settings = {**shared, **dict(data.get(name, {})), "name": name}
    return validate_settings(chosen.config, settings, where=where, owner=f"the curriculum {name!r}")


def recorded_curriculum(table: Mapping[str, Any]) -> CurriculumConfig:
    """The settings a run directory recorded, read as that run read them.

    ``experiment.json`` of a run made before curricula had settings of their
    own holds every curriculum's keys; those the named curriculum does not take
    were ignored then, and are dropped here, so an old run reads as it ran. A
    ``target-band`` recorded before it moved on observed success (no
    ``observed`` key) reads with ``observed = false``, ``explore = 0`` and
    ``distinct = false``: as it ran.
    """
    name = str(table.get("name", CurriculumConfig.model_fields["name"].default))
    fields = CURRICULA.get(name).config.model_fields
    kept = {k: v for k, v in table.items() if k in fields}
    if name == "target-band" and not {"observed", "explore"} & set(table):
        # recorded before target-band moved on observed success: it ran on predictions alone
        kept.update(observed=False, explore=0.0, distinct=False)
    return curriculum_config(kept)


def make_curriculum(config: Mapping[str, Any] | CurriculumConfig, seed: int) -> Curriculum:
    """The curriculum ``config`` names, made with its settings and the run's seed."""
    settings = curriculum_config(config)
    return CURRICULA.get(settings.name).cls(settings, seed)
