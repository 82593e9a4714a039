"""temporary"""

from coevo.agents.synthesizers.procedural.clinic.world import DOMAIN

__all__ = ["DOMAIN"]
