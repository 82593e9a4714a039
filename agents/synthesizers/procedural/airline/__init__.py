"""temporary"""

from coevo.agents.synthesizers.procedural.airline.world import DOMAIN

__all__ = ["DOMAIN"]
