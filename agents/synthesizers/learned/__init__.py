"""The learned Synthesizer (``learned-synth``): a policy over the planner's choice points, learnt by policy gradient.

The modules, each importing only those listed before it:

================ ================================================================
``policy``       :class:`DesignPolicy`: a softmax per choice point, drawing and crediting
``design``       :class:`Design`: a design as a planner target, its relaxation, what a task realised
``synthesizer``  :class:`LearnedSynthesizer`: the role (propose, learn, state)
================ ================================================================

``docs/self-play.md`` describes the role for users.
"""

from __future__ import annotations

from coevo.agents.synthesizers.learned.design import RELAXATION, Design, realised
from coevo.agents.synthesizers.learned.policy import CHOICE_POINTS, DesignPolicy
from coevo.agents.synthesizers.learned.synthesizer import LearnedSynthesizer

__all__ = [
    "CHOICE_POINTS",
    "RELAXATION",
    "Design",
    "DesignPolicy",
    "LearnedSynthesizer",
    "realised",
]
