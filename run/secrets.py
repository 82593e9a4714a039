"""The secrets a run holds in its environment, and text with them taken out: one rule for events and messages."""

from __future__ import annotations

import os
from typing import Final

__all__ = ["SECRET_SUFFIXES", "redacted", "secrets"]

SECRET_SUFFIXES: Final = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
"""Variables whose names end so hold secrets (``OPENAI_API_KEY``, ``VLLM_KEY``, ``HF_TOKEN``, ...)."""


def secrets() -> list[str]:
    """The values of the environment's secret variables (8 characters or more: shorter ones are placeholders)."""
    return [
        value
        for name, value in os.environ.items()
        if name.endswith(SECRET_SUFFIXES) and len(value) >= 8
    ]


def redacted(text: str) -> str:
    """``text`` with every secret of the environment replaced by ``[redacted]``."""
    for secret in secrets():
        text = text.replace(secret, "[redacted]")
    return text
