"""Procedural domains: professional SQL worlds and the tasks in them, made offline and by seed.

``DOMAINS`` is the registry (``coevo synth --list``, :mod:`.domains`);
:class:`ProceduralSynthesizer` is the Synthesizer role over it. To add a
domain, copy ``retail.py`` (its schema, the knobs dataclass that shapes its
worlds, ``build_world(seed, knobs)``, tools and catalog; see :mod:`.base`) and
add its ``DOMAIN`` to :mod:`.domains`; the registry-wide test then checks every
family at every level against the Judge.
"""

from __future__ import annotations

from coevo.agents.synthesizers.procedural.base import Domain
from coevo.agents.synthesizers.procedural.domains import DOMAINS, domain_named
from coevo.agents.synthesizers.procedural.synthesizer import ProceduralSynthesizer

__all__ = ["DOMAINS", "Domain", "ProceduralSynthesizer", "domain_named"]
