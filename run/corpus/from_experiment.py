"""An experiment file's Synthesizer as a corpus source (``coevo corpus build --experiment``).

What the corpus's manifest records of it (:class:`ExperimentSynthesizer`:
its name, its config without secrets, the file's hash), what a worker
builds it from (:class:`SynthesizerRole`, with the variables its
registration passes, never written anywhere), and the environment a worker
sets while it builds a shard (:func:`environment`). :mod:`coevo.run.corpus.build`
builds the corpus.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coevo.agents.registry import REGISTRY
from coevo.arena.errors import CoevoError
from coevo.arena.examples import find_bundled
from coevo.arena.secrets import redact_value
from coevo.run.experiment import load_experiment
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CorpusError",
    "ExperimentSynthesizer",
    "SynthesizerRole",
    "environment",
    "experiment_synthesizer",
    "public_config",
]


class CorpusError(CoevoError):
    """A corpus cannot be built or read (the message says why and what to do)."""


class ExperimentSynthesizer(BaseModel):
    """The Synthesizer of an experiment file, as a corpus's manifest records it (source kind ``experiment``).

    Attributes:
        name: the registered Synthesizer (the experiment's ``[synthesizer] name``).
        config: its ``config`` without secrets (see :func:`public_config`): an LLM role's
            names the *variable* that holds its key, never the key.
        sha256: the experiment file's SHA-256 (a build from another file is refused).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    config: dict[str, Any] = Field(default_factory=dict)
    sha256: str


@dataclass(frozen=True)
class SynthesizerRole:
    """What a worker builds an experiment's Synthesizer from; never written to a file or a log.

    Attributes:
        name: the registered Synthesizer.
        config: its ``config`` as the experiment gives it.
        env: the variables its registration hands to its processes (an API key and the
            server's address: ``RoleInfo.env(settings).passed``), set in the worker while it
            builds a shard.
    """

    name: str
    config: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict, repr=False)


def public_config(value: Any, name: str = "") -> Any:
    """``value`` (a role's config) without secrets, as a manifest may record it.

    The one rule of :mod:`coevo.arena.secrets` (:func:`~coevo.arena.secrets.redact_value`):
    a string under a name that is or ends in ``key``, ``token``, ``secret`` or
    ``password`` (``api_key``, ``hf_token``; not ``api_key_env``, the name of a
    variable), a URL's password, a key-shaped token and any key of the
    environment become ``[redacted]``.
    """
    return redact_value(value, name)


def experiment_synthesizer(path: str) -> tuple[ExperimentSynthesizer, SynthesizerRole]:
    """The Synthesizer of experiment file ``path``: as the manifest records it, and as workers build it.

    Checked before anything starts, as ``coevo run`` checks an experiment: the
    file (:func:`~coevo.run.experiment.load_experiment`), the roles'
    settings, the variables the Synthesizer needs, and its start-up check (an
    LLM role's server answers and serves its model).

    Raises:
        ExperimentError: the file is missing, not TOML, or not a valid experiment.
        CorpusError: a variable the Synthesizer needs is not set.
        CoevoError: its start-up check failed (the message says what to fix).
    """
    experiment = load_experiment(path)
    file = Path(path) if Path(path).is_file() else find_bundled(str(path), "experiment").path
    if "synthesizer" not in tomllib.loads(file.read_text(encoding="utf-8")):
        raise CorpusError(
            f"{path} has no [synthesizer] table: name the synthesizer the corpus is built with "
            '([synthesizer] name = "claude-synth", ...; `coevo roles` lists them), or build '
            "procedural worlds without --experiment"
        )
    settings = experiment.role_settings()["synthesizer"]
    table = experiment.synthesizer
    info = REGISTRY.get(table.name)
    needs = info.env(settings)
    for variable in needs.required:
        if not os.environ.get(variable):
            raise CorpusError(
                f"the synthesizer {table.name!r} of {path} needs {variable}: set it in the "
                "environment (on every node, for a cluster) and run again"
            )
    info.preflight(settings)
    recorded = ExperimentSynthesizer(
        name=table.name,
        config=public_config(table.config),
        sha256=hashlib.sha256(file.read_bytes()).hexdigest(),
    )
    env = {k: os.environ[k] for k in needs.passed if k in os.environ}
    return recorded, SynthesizerRole(table.name, dict(table.config), env)


@contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """``env`` set in this process for the block, then as it was (a Ray worker serves other tasks after)."""
    saved = {k: os.environ.pop(k) for k in env if k in os.environ}
    os.environ.update(env)
    try:
        yield
    finally:
        for name in env:
            os.environ.pop(name, None)
        os.environ.update(saved)
