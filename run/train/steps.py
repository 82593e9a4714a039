"""One optimizer step of an adapter, guarded: nothing that is not finite reaches a weight.

:class:`Stepper` is what ``coevo train`` and ``coevo sft`` share around
their losses: the learning rate of each step (warm-up and schedule, counted
over the whole run, resumes included), gradients accumulated over the
micro-batches of a step, and the guard. A step is *skipped* (its gradients
dropped, the weights and the optimizer's moments left as they were, the
reason kept for the journal and the report) when a micro-batch's loss or
the gradients' norm is not finite. So a batch with a NaN that slipped past
the row checks, or a learning rate that overflows, costs a step, never the
adapter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from coevo.run.train.policy import trainable
from coevo.run.train.settings import AdapterSettings, learning_rate_at

__all__ = ["StepReport", "Stepper"]


@dataclass(frozen=True)
class StepReport:
    """What one optimizer step did.

    Attributes:
        taken: whether the weights moved (False: skipped, see ``why``).
        lr: its learning rate.
        grad_norm: the gradients' norm before clipping (None: not reached).
        why: why it was skipped.
    """

    taken: bool
    lr: float
    grad_norm: float | None
    why: str | None = None


class Stepper:
    """AdamW on an adapter's parameters, a step at a time (see the module docstring).

    Args:
        model: the model whose trainable parameters are stepped.
        settings: the learning rate, its schedule, weight decay and the gradient clip.
        total: the steps a decaying schedule spans (None: no decay unless ``schedule_steps``).
        done: optimizer steps taken before (a resumed run's).
    """

    def __init__(self, model: Any, settings: AdapterSettings, total: int | None, done: int = 0):
        self.settings = settings
        self.params = list(trainable(model).values())
        self.optimizer = torch.optim.AdamW(
            self.params, lr=settings.learning_rate, weight_decay=settings.weight_decay
        )
        self.total = total
        self.done = done
        self._bad: str | None = None

    def begin(self) -> None:
        """Start a step: no gradient yet."""
        self.optimizer.zero_grad(set_to_none=True)
        self._bad = None

    def backward(self, loss: torch.Tensor, what: str = "a micro-batch") -> bool:
        """Add ``loss``'s gradients to the step's; False (and the step is to be skipped) when it is not finite."""
        if self._bad is not None:
            return False
        value = float(loss.detach())
        if not math.isfinite(value):
            self._bad = f"the loss of {what} is {value}"
            return False
        loss.backward()
        return True

    def finish(self) -> StepReport:
        """Take the step, unless a loss or the gradients' norm is not finite; its report."""
        lr = learning_rate_at(self.settings, self.done, self.total)
        if self._bad is not None:
            self.optimizer.zero_grad(set_to_none=True)
            return StepReport(False, lr, None, self._bad)
        norm = float(torch.nn.utils.clip_grad_norm_(self.params, self.settings.max_grad_norm))
        if not math.isfinite(norm):
            self.optimizer.zero_grad(set_to_none=True)
            return StepReport(False, lr, None, f"the gradients' norm is {norm}")
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.done += 1
        return StepReport(True, lr, norm)
