"""The one redaction rule: what counts as a secret, and text and values with every secret taken out.

Everything coevo writes or prints goes through :func:`redact` (text) or
:func:`redact_value` (JSON-like values): ``experiment.json``, events,
MLflow params, tags and artifacts, the corpus manifest, the summary, error
messages (pydantic's included, which echo the input). ``docs/security.md``
("Redaction") states the rule; this module is its only owner.

A **secret** is

1. *by value*: the value of any variable coevo reads a key from. Those are
   the variables whose names end in ``_KEY``, ``_TOKEN``, ``_SECRET`` or
   ``_PASSWORD`` (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``HF_TOKEN``,
   ``MLFLOW_TRACKING_PASSWORD``, ...), plus any other a role names with
   ``api_key_env`` (:func:`remember_key_variable`). A value shorter than 8
   characters is taken for a placeholder (``OPENAI_API_KEY=x`` for a local
   server) and left alone. The value is also found as Python's ``repr`` or
   JSON would quote it, and any run of 12 or more of its characters (an echo
   shortened in the middle, ``'head...tail'``, as pydantic shortens input);
2. *by shape*: a token shaped like a key, whoever's it is (:data:`KEY_SHAPES`):
   ``sk-`` and 16 or more characters (OpenAI, ``sk-proj-``, Anthropic's
   ``sk-ant-``), ``hf_``, ``ghp_``/``gho_``/``ghs_``/``ghu_``/``ghr_``,
   ``github_pat_``, ``xox?-`` (Slack), ``AKIA`` (AWS key ids), ``AIza``
   (Google), a JSON web token, what follows ``Bearer``, and a URL's password
   (``https://user:PASSWORD@host``). The shapes need their prefix, so task
   ids (``sha256:`` and hex), hashes, UUIDs, URLs and words never match. A shape's
   match followed by ``...`` and more key characters takes them too (the
   tail of a shortened echo);
3. *by name*, in a structured value (:func:`redact_value`): a string under a
   key that is or ends in ``key``, ``token``, ``secret`` or ``password``
   (``api_key``, ``hf_token``; not ``api_key_env``, the name of a variable).

Each is replaced by :data:`REDACTED`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "KEY_SHAPES",
    "REDACTED",
    "SECRET_SUFFIXES",
    "redact",
    "redact_value",
    "remember_key_variable",
    "secret_values",
]

REDACTED: Final = "[redacted]"
"""What a secret becomes."""

SECRET_SUFFIXES: Final = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
"""Variables whose names end so hold secrets (``OPENAI_API_KEY``, ``VLLM_KEY``, ``HF_TOKEN``, ...)."""

MIN_SECRET_LENGTH: Final = 8
"""A variable's value shorter than this is a placeholder, not a secret (``OPENAI_API_KEY=x``)."""

_TOKEN: Final = r"[A-Za-z0-9_\-]"
KEY_SHAPES: Final = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:"
    rf"sk-{_TOKEN}{{16,}}"  # OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-)
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"  # GitHub
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|AIza[0-9A-Za-z_\-]{35}"  # Google API key
    rf"|eyJ{_TOKEN}{{8,}}\.eyJ{_TOKEN}{{8,}}\.{_TOKEN}{{8,}}"  # a JSON web token
    r")"
)
"""Tokens shaped like keys: each needs its prefix, so ordinary values never match."""

_TRUNCATED_TAIL: Final = re.compile(re.escape(REDACTED) + rf"(?:\.\.\.|…){_TOKEN}+")
"""A key's head redacted by shape, then ``...`` and its tail: pydantic shortens a long ``input_value`` so."""

_PIECE: Final = re.compile(r"[A-Za-z0-9_\-~+/=]{12,}")
"""A run of key characters long enough that, inside a known key, it is a piece of it (a shortened echo)."""

_BEARER: Final = re.compile(r"(?i)(\bBearer\s+)[A-Za-z0-9._~+/=\-]{16,}")
_URL_PASSWORD: Final = re.compile(r"(://[^/@:\s]+):[^/@\s]+@")
_SECRET_NAMES: Final = tuple(suffix[1:].lower() for suffix in SECRET_SUFFIXES)  # key, token, ...

_named: set[str] = set()


def remember_key_variable(name: str) -> None:
    """Count variable ``name`` as holding a key from now on (a role's ``api_key_env``), in this process."""
    _named.add(name)


def secret_values() -> list[str]:
    """The values of the environment's key variables, each as given and as Python or JSON would quote it, longest first."""
    found: set[str] = set()
    for name, value in os.environ.items():
        if not (name.endswith(SECRET_SUFFIXES) or name in _named):
            continue
        for form in {value, value.strip()}:
            if len(form.strip()) >= MIN_SECRET_LENGTH:
                found.update((form, repr(form)[1:-1], json.dumps(form)[1:-1]))
    return sorted(found, key=len, reverse=True)  # a longer form first, so no piece of it is left


def redact(text: str, known: list[str] | None = None) -> str:
    """``text`` with every secret (by value, by shape) replaced by :data:`REDACTED`.

    ``known``: :func:`secret_values`, when the caller has them already (None: read now).
    """
    secrets = secret_values() if known is None else known
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    if secrets:  # a piece of a known key (an echo shortened in the middle: 'head...tail')
        text = _PIECE.sub(
            lambda m: REDACTED if any(m.group() in s for s in secrets) else m.group(), text
        )
    text = KEY_SHAPES.sub(REDACTED, text)
    text = _TRUNCATED_TAIL.sub(REDACTED, text)
    text = _BEARER.sub(rf"\g<1>{REDACTED}", text)
    return _URL_PASSWORD.sub(rf"\g<1>:{REDACTED}@", text)


def _secret_name(name: str) -> bool:
    lower = name.lower()
    if lower.endswith("_env"):
        return False  # api_key_env: the name of a variable, never the key
    return any(lower == word or lower.endswith("_" + word) for word in _SECRET_NAMES)


def redact_value(value: Any, name: str = "") -> Any:
    """``value`` (JSON-like: mappings, lists, strings, numbers) with every secret taken out.

    Strings are :func:`redact`-ed, and a string under a secret's name (``api_key``,
    ``hf_token``, ``password``) becomes :data:`REDACTED` whole. Mapping keys are redacted too.
    """
    return _redacted(value, name, secret_values())


def _redacted(value: Any, name: str, known: list[str]) -> Any:
    if isinstance(value, Mapping):
        return {
            redact(k, known) if isinstance(k, str) else k: _redacted(v, str(k), known)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_redacted(v, name, known) for v in value]
    if isinstance(value, str):
        return REDACTED if value and _secret_name(name) else redact(value, known)
    return value
