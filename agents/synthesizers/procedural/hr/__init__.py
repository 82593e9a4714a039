"""temporary"""

from coevo.agents.synthesizers.procedural.hr.world import DOMAIN

__all__ = ["DOMAIN"]
