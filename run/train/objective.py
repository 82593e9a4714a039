"""The loss ``coevo train`` minimises: a clipped, importance-weighted policy gradient on the model's own tokens.

For every token ``t`` the model sampled (the loss mask's ones) in a rollout
with advantage ``A``, with ``logp`` its log-probability under the policy
being trained and ``old`` under the behaviour policy that sampled it (the
log-prob the server recorded)::

    ratio     = exp(logp - old)
    surrogate = min(ratio * A, clamp(ratio, 1 - clip, 1 + clip_high) * A)
    loss_t    = -surrogate + kl * (exp(ref - logp) - (ref - logp) - 1)

and the batch's loss is the sum over every token of every rollout divided by
the number of those tokens (token-level normalisation, as DAPO and TRL's
``loss_type="dapo"``: a long rollout weighs by its tokens, not as one). The
ratio against the *behaviour* policy's log-probs is the off-policy
correction: a rollout played ``k`` versions ago (``run.max_staleness``) is
weighted by how much more or less likely the trained policy makes it, and
the clip bounds how far one batch moves it. On fresh data the ratio is 1 up
to the difference between the server's and the trainer's arithmetic (bf16
serving against float32 training: a few hundredths of a nat per token).

The KL term (``kl > 0``) is the k3 estimator of KL(policy ‖ reference) used
by GRPO and TRL, against the model without its adapter (one more forward
pass per rollout). This mirrors TRL's ``GRPOTrainer`` loss with
``num_iterations > 1`` (where its "old" log-probs are the behaviour's); TRL's
trainer owns its rollouts (it generates them itself), so its loss is a
method of that trainer rather than a function coevo could call on a batch
made elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["TokenLoss", "token_loss"]


@dataclass(frozen=True)
class TokenLoss:
    """One rollout's loss, and what a step reports of it.

    Attributes:
        loss: the sum of its tokens' losses divided by the batch's token count (backward this).
        tokens: its tokens under the mask.
        log_ratio_sum: the sum of ``logp - old`` (the mean |log ratio| is the off-policy gap).
        abs_log_ratio_sum: the sum of ``|logp - old|``.
        clipped: tokens whose ratio the clip held.
        kl_sum: the sum of the k3 KL estimates (0 without a reference).
    """

    loss: torch.Tensor
    tokens: int
    log_ratio_sum: float
    abs_log_ratio_sum: float
    clipped: int
    kl_sum: float


def token_loss(
    logp: torch.Tensor,
    old: torch.Tensor,
    advantage: float,
    *,
    clip: float,
    clip_high: float,
    normaliser: int,
    ref: torch.Tensor | None = None,
    kl: float = 0.0,
) -> TokenLoss:
    """The loss of one rollout's masked tokens (see the module docstring).

    Args:
        logp: the trained policy's log-probs of the tokens (with gradient), shape ``[n]``.
        old: the behaviour policy's log-probs of the same tokens, shape ``[n]``.
        advantage: the rollout's advantage.
        clip: the clip range below 1.
        clip_high: the clip range above 1.
        normaliser: the batch's number of masked tokens (the loss is summed, then divided by it).
        ref: the reference policy's log-probs (for the KL term), shape ``[n]``.
        kl: the KL coefficient.
    """
    old = old.detach().to(logp.dtype)
    log_ratio = logp - old
    ratio = torch.exp(log_ratio)
    clamped = torch.clamp(ratio, 1.0 - clip, 1.0 + clip_high)
    surrogate = torch.minimum(ratio * advantage, clamped * advantage)
    per_token = -surrogate
    kl_sum = 0.0
    if ref is not None and kl > 0:
        delta = ref.detach().to(logp.dtype) - logp
        estimate = torch.exp(delta) - delta - 1.0
        per_token = per_token + kl * estimate
        kl_sum = float(estimate.detach().sum())
    held = (ratio * advantage > clamped * advantage).sum()
    return TokenLoss(
        loss=per_token.sum() / max(normaliser, 1),
        tokens=int(logp.numel()),
        log_ratio_sum=float(log_ratio.detach().sum()),
        abs_log_ratio_sum=float(log_ratio.detach().abs().sum()),
        clipped=int(held),
        kl_sum=kl_sum,
    )
