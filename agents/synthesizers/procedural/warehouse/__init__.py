"""temporary"""

from coevo.agents.synthesizers.procedural.warehouse.world import DOMAIN

__all__ = ["DOMAIN"]
