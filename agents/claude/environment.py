"""The environment the ``claude*`` roles need: Anthropic's key variable, unless their settings name another.

Kept for older imports; :mod:`coevo.agents.llm.environment` owns these facts.
"""

from __future__ import annotations

from typing import Final

from coevo.agents.llm.environment import BASE_URL_VARIABLES, KEY_VARIABLES, anthropic_environment

__all__ = ["KEY_VARIABLE", "PASSED_ENV", "REQUIRED_ENV", "anthropic_environment"]

KEY_VARIABLE: Final = KEY_VARIABLES["anthropic"]
"""The variable holding the API key (its value is never logged)."""
REQUIRED_ENV: Final = (KEY_VARIABLE,)
"""What every Claude role needs set before a run starts (with the default ``api_key_env``)."""
PASSED_ENV: Final = (KEY_VARIABLE, BASE_URL_VARIABLES["anthropic"])
"""What every Claude role's actors are handed (never logged)."""
