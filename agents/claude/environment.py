"""The environment the Claude roles need: the API key's variable, and the variables their actors get.

Kept apart from the client so that the role registry can say what a Claude
role needs without importing the Anthropic SDK.
"""

from __future__ import annotations

from typing import Any, Final

from coevo.agents.protocols import RoleEnvironment

__all__ = ["KEY_VARIABLE", "PASSED_ENV", "REQUIRED_ENV", "anthropic_environment"]

KEY_VARIABLE: Final = "ANTHROPIC_API_KEY"
"""The variable holding the API key (its value is never logged)."""
REQUIRED_ENV: Final = (KEY_VARIABLE,)
"""What every Claude role needs set before a run starts."""
PASSED_ENV: Final = (KEY_VARIABLE, "ANTHROPIC_BASE_URL")
"""What every Claude role's actors are handed (never logged)."""


def anthropic_environment(settings: Any) -> RoleEnvironment:
    """The environment of a Claude role (the same whatever its settings)."""
    return RoleEnvironment(REQUIRED_ENV, PASSED_ENV)
