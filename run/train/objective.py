"""The losses ``coevo train`` and ``coevo sft`` minimise, on the model's own tokens.

**The policy gradient** (:func:`token_loss`). For every token ``t`` the model
sampled (the loss mask's ones) in a rollout with advantage ``A``, three
log-probabilities of it: ``logp`` under the policy being trained (with
gradient), ``old`` under the trainer's policy when the batch's first step
began (no gradient), and ``behaviour`` as the server recorded it when it
sampled the token. Two corrections, each with its own job::

    weight    = min(exp(old - behaviour), cap)           # truncated importance weight (TIS)
    ratio     = exp(logp - old)                          # PPO's ratio, against the old policy
    surrogate = min(ratio * A, clamp(ratio, 1 - clip, 1 + clip_high) * A)
    loss_t    = -weight * surrogate + kl * (exp(ref - logp) - (ref - logp) - 1)

* The **importance weight** corrects for the gap between the policy that
  sampled (vLLM, in bf16, possibly a version or more behind with
  ``run.max_staleness``) and the trainer's: a plain ratio against the
  server's log-probs would let the clip treat that numerical gap (0.03 nats
  on average, up to 1 on a token) as policy movement, and would be
  unbounded above for negative advantages. Truncated at ``cap`` and
  detached, as TIS (Yao et al., 2025, "Your efficient RL framework secretly
  brings you off-policy RL training") and TRL's ``vllm_importance_sampling_cap``.
* The **clip** is PPO's trust region against the trainer's own old policy:
  with one optimizer step per batch ``old = logp`` detached, the ratio is 1
  and the clip never binds (the gradient is the plain policy gradient);
  with mini-batches or several epochs it bounds how far later steps move.

The batch's loss is the sum over every scored token divided by their number
(token-level normalisation, as DAPO and TRL's ``loss_type="dapo"``). The KL
term (``kl > 0``) is the k3 estimator against the reference: the policy the
run started from (its ``--adapter``, else the model).

**The warm start** (:func:`sft_loss`): the negative log-likelihood of the
assistant's tokens, summed and divided by the batch's token count.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["TokenLoss", "sft_loss", "token_loss"]


@dataclass(frozen=True)
class TokenLoss:
    """A set of tokens' loss, and what a step reports of it.

    Attributes:
        loss: the sum of their losses divided by the batch's token count (backward this).
        tokens: the tokens scored.
        mismatch_sum: the sum of ``old - behaviour`` (the trainer's view less the server's).
        abs_mismatch_sum: the sum of ``|old - behaviour|``.
        weight_sum: the sum of the importance weights.
        weight_max: the largest importance weight (after the cap).
        capped: tokens whose importance weight the cap held.
        clipped: tokens whose ratio the clip held (their gradient is 0).
        kl_sum: the sum of the k3 KL estimates (0 without a reference).
    """

    loss: torch.Tensor
    tokens: int
    mismatch_sum: float
    abs_mismatch_sum: float
    weight_sum: float
    weight_max: float
    capped: int
    clipped: int
    kl_sum: float


def token_loss(
    logp: torch.Tensor,
    old: torch.Tensor,
    behaviour: torch.Tensor,
    advantage: torch.Tensor,
    *,
    clip: float,
    clip_high: float,
    cap: float,
    normaliser: int,
    ref: torch.Tensor | None = None,
    kl: float = 0.0,
) -> TokenLoss:
    """The policy-gradient loss of a set of tokens (see the module docstring); every tensor has shape ``[n]``.

    Args:
        logp: the trained policy's log-probs (with gradient).
        old: the trainer's old policy's log-probs (no gradient; ``logp`` detached for a
            batch's only step).
        behaviour: the log-probs the server recorded when it sampled the tokens.
        advantage: each token's advantage (its rollout's).
        clip: the clip range below 1.
        clip_high: the clip range above 1.
        cap: the importance weight's cap.
        normaliser: the batch's number of scored tokens (the loss is summed, then divided by it).
        ref: the reference policy's log-probs (for the KL term).
        kl: the KL coefficient.
    """
    old = old.detach().to(logp.dtype)
    behaviour = behaviour.detach().to(logp.dtype)
    advantage = advantage.detach().to(logp.dtype)
    mismatch = old - behaviour
    raw_weight = torch.exp(mismatch)
    weight = torch.clamp(raw_weight, max=cap)
    ratio = torch.exp(logp - old)
    clamped = torch.clamp(ratio, 1.0 - clip, 1.0 + clip_high)
    surrogate = torch.minimum(ratio * advantage, clamped * advantage)
    per_token = -weight * surrogate
    kl_sum = 0.0
    if ref is not None and kl > 0:
        delta = ref.detach().to(logp.dtype) - logp
        estimate = torch.exp(delta) - delta - 1.0
        per_token = per_token + kl * estimate
        kl_sum = float(estimate.detach().sum())
    held = (ratio.detach() * advantage > clamped.detach() * advantage).sum()
    count = int(logp.numel())
    return TokenLoss(
        loss=per_token.sum() / max(normaliser, 1),
        tokens=count,
        mismatch_sum=float(mismatch.sum()),
        abs_mismatch_sum=float(mismatch.abs().sum()),
        weight_sum=float(weight.sum()),
        weight_max=float(weight.max()) if count else 0.0,
        capped=int((raw_weight > cap).sum()),
        clipped=int(held),
        kl_sum=kl_sum,
    )


def sft_loss(logp: torch.Tensor, *, normaliser: int) -> torch.Tensor:
    """The warm start's loss: ``-sum(logp) / normaliser`` over the assistant's tokens (``logp``: ``[n]``, with gradient)."""
    return -logp.sum() / max(normaliser, 1)
