"""What an LLM role needs from the environment: the key's variable and the server's, per provider.

Kept apart from the client so that the role registry can say what an LLM
role needs without importing an SDK. A role's settings name the *variable*
that holds its API key (``api_key_env``), never the key; the arena checks
that it is set before anything starts and hands it (and the provider's
base-URL variable) to the role's actors, and nothing logs either.
"""

from __future__ import annotations

import re
from typing import Any, Final

from coevo.agents.protocols import RoleEnvironment
from coevo.arena.errors import ConfigError
from coevo.arena.secrets import remember_key_variable

__all__ = [
    "BASE_URL_VARIABLES",
    "KEY_VARIABLES",
    "PROVIDERS",
    "anthropic_environment",
    "key_variable",
    "llm_environment",
    "openai_environment",
]

PROVIDERS: Final = ("anthropic", "openai")
"""The APIs an LLM role can speak: Anthropic's Messages API, and the OpenAI Chat Completions API
(OpenAI itself, vLLM, SGLang, Ollama and any other server that speaks it)."""

KEY_VARIABLES: Final[dict[str, str]] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
}
"""The variable each provider's key is read from unless a role names another (``api_key_env``)."""

BASE_URL_VARIABLES: Final[dict[str, str]] = {
    "anthropic": "ANTHROPIC_BASE_URL",
    "openai": "OPENAI_BASE_URL",
}
"""The variable each SDK reads its server's address from when a role names none (``base_url``)."""


_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def key_variable(provider: str, api_key_env: str | None) -> str:
    """The variable holding the key: the one named, else the provider's own.

    Raises:
        ConfigError: ``api_key_env`` is not a variable's name (perhaps the key itself,
            which the message does not repeat).
    """
    if api_key_env is not None and not _NAME.fullmatch(api_key_env):
        raise ConfigError(
            "api_key_env must be the name of the environment variable that holds the key "
            "(letters, digits and _, e.g. VLLM_API_KEY), never the key itself; "
            "the value given is not such a name"
        )
    name = api_key_env or KEY_VARIABLES[provider]
    remember_key_variable(name)  # its value is a secret wherever coevo writes or prints
    return name


def llm_environment(settings: Any, *, default: str = "openai") -> RoleEnvironment:
    """The environment of an LLM role with these settings: its key's variable, and the base-URL one.

    ``default`` is the provider of a role whose settings name none (``claude*``: anthropic).
    """
    provider = getattr(settings, "provider", None) or default
    key = key_variable(provider, getattr(settings, "api_key_env", None))
    return RoleEnvironment((key,), (key, BASE_URL_VARIABLES[provider]))


def anthropic_environment(settings: Any) -> RoleEnvironment:
    """The environment of a ``claude*`` role (its provider is anthropic unless its settings say otherwise)."""
    return llm_environment(settings, default="anthropic")


def openai_environment(settings: Any) -> RoleEnvironment:
    """The environment of an ``llm-*`` role (its provider is openai unless its settings say otherwise)."""
    return llm_environment(settings, default="openai")
