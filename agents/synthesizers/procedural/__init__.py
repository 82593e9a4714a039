"""Procedural domains: professional SQL worlds and the tasks in them, made offline and by seed.

``DOMAINS`` is the registry (``coevo synth --list``); :class:`ProceduralSynthesizer`
is the Synthesizer role over it. To add a domain, copy ``retail.py`` and add
its ``DOMAIN`` here; the registry-wide test then checks every family at every
level against the Judge.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from coevo.agents.synthesizers.procedural import airline, clinic, hr, retail, warehouse
from coevo.agents.synthesizers.procedural.base import Domain

__all__ = ["DOMAINS", "Domain"]

DOMAINS: Final = MappingProxyType(
    {d.name: d for d in (retail.DOMAIN, airline.DOMAIN, clinic.DOMAIN, hr.DOMAIN, warehouse.DOMAIN)}
)
"""Every procedural domain by name."""

from coevo.agents.synthesizers.procedural.synthesizer import ProceduralSynthesizer, domain_named  # noqa: E402

__all__ += ["ProceduralSynthesizer", "domain_named"]
