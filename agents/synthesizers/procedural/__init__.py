"""Procedural domains: professional SQL worlds and the tasks in them, made offline and by seed.

``DOMAINS`` is the registry (``coevo synth --list``, :mod:`.domains`);
:class:`ProceduralSynthesizer` is the Synthesizer role over it. Each domain is
a package (``retail/``, ``airline/``, ``clinic/``, ``hr/``, ``warehouse/``) of
the same five modules: ``schema.py``, ``world.py`` (the knobs dataclass that
shapes its worlds and ``build_world(seed, knobs)``, one small generator a
table), ``tools.py``, ``catalog.py`` and its ``DOMAIN`` in ``__init__.py``; see
:mod:`.base`. To add a domain, copy ``retail/`` and add its ``DOMAIN`` to
:mod:`.domains`; the registry-wide test then checks every family at every
level against the Judge.
"""

from __future__ import annotations

from coevo.agents.synthesizers.procedural.base import Domain
from coevo.agents.synthesizers.procedural.domains import DOMAINS, domain_named
from coevo.agents.synthesizers.procedural.synthesizer import ProceduralSynthesizer

__all__ = ["DOMAINS", "Domain", "ProceduralSynthesizer", "domain_named"]
