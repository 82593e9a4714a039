"""The registry of procedural domains: every domain package's ``DOMAIN``, by name.

To add a domain, copy the ``retail/`` package (``schema.py``; ``world.py``
with the knobs dataclass, ``DEFAULT_KNOBS`` and ``build_world(seed, knobs)``;
``tools.py``; ``catalog.py``; ``DOMAIN`` in ``__init__.py``; see :mod:`.base`),
give its knobs the numbers your world needs, and add its ``DOMAIN`` here; the
registry-wide test then checks every family at every level against the Judge.
"""

from __future__ import annotations

import difflib
from types import MappingProxyType
from typing import Final

from coevo.agents.synthesizers.procedural import airline, clinic, hr, retail, warehouse
from coevo.agents.synthesizers.procedural.base import Domain
from coevo.arena.errors import CoevoError

__all__ = ["DOMAINS", "domain_named"]

DOMAINS: Final = MappingProxyType(
    {d.name: d for d in (retail.DOMAIN, airline.DOMAIN, clinic.DOMAIN, hr.DOMAIN, warehouse.DOMAIN)}
)
"""Every procedural domain by name."""


def domain_named(name: str) -> Domain:
    """The registered domain called ``name``.

    Raises:
        CoevoError: no such domain; the message lists the domains and the closest name.
    """
    if name in DOMAINS:
        return DOMAINS[name]
    close = difflib.get_close_matches(name, list(DOMAINS), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise CoevoError(f"unknown domain {name!r}; {hint}choose from {', '.join(DOMAINS)}")
