"""The ``claude*`` roles: the LLM roles with Anthropic's Messages API as their default provider.

``claude``, ``claude-synth``, ``claude-judge`` and ``claude-world-model`` are
:class:`~coevo.agents.llm.solver.LLMSolver`,
:class:`~coevo.agents.llm.synthesizer.LLMSynthesizer`,
:class:`~coevo.agents.llm.judge.LLMJudge` and
:class:`~coevo.agents.llm.world_model.LLMWorldModel` under the names older
experiment files use; they take every LLM role's settings
(:mod:`coevo.agents.llm.role`), ``provider`` included.
"""

from __future__ import annotations

from typing import ClassVar

from coevo.agents.llm.judge import LLMJudge
from coevo.agents.llm.solver import LLMSolver
from coevo.agents.llm.synthesizer import LLMSynthesizer
from coevo.agents.llm.world_model import LLMWorldModel

__all__ = ["ClaudeJudge", "ClaudeSolver", "ClaudeSynthesizer", "ClaudeWorldModel"]


class ClaudeSolver(LLMSolver):
    """``claude``: a model (Claude unless the settings say otherwise) as a multi-turn tool-use Solver."""

    name: ClassVar[str] = "claude"
    default_provider: ClassVar[str] = "anthropic"


class ClaudeSynthesizer(LLMSynthesizer):
    """``claude-synth``: a model (Claude unless the settings say otherwise) as the staged Synthesizer."""

    name: ClassVar[str] = "claude-synth"
    default_provider: ClassVar[str] = "anthropic"


class ClaudeJudge(LLMJudge):
    """``claude-judge``: the mechanical checks, then a model (Claude by default) proves solvability and reviews."""

    name: ClassVar[str] = "claude-judge"
    default_provider: ClassVar[str] = "anthropic"


class ClaudeWorldModel(LLMWorldModel):
    """``claude-world-model``: a model (Claude unless the settings say otherwise) predicts P(success)."""

    name: ClassVar[str] = "claude-world-model"
    default_provider: ClassVar[str] = "anthropic"
