"""The loss of coevo train: the ratio against the behaviour policy, its clip, the KL term and token-level normalisation."""

from __future__ import annotations

import math

import torch
from coevo.run.train.objective import token_loss


def test_on_fresh_data_the_ratio_is_1_and_the_gradient_is_the_advantage_per_token() -> None:
    """logp equal to the recorded log-probs: loss -A·n/N, each token's gradient -A/N, nothing clipped."""
    logp = torch.tensor([-1.0, -2.0, -0.5], requires_grad=True)
    part = token_loss(logp, logp.detach().clone(), 2.0, clip=0.2, clip_high=0.2, normaliser=6)
    part.loss.backward()
    assert math.isclose(float(part.loss.detach()), -2.0 * 3 / 6)
    assert torch.allclose(logp.grad, torch.full((3,), -2.0 / 6))
    assert part.clipped == 0 and part.abs_log_ratio_sum == 0.0


def test_the_clip_stops_the_gradient_beyond_the_range_in_the_advantage_s_direction() -> None:
    """A ratio of 1.5 with A > 0, or 0.5 with A < 0, is held at the clip: no gradient, counted."""
    for ratio, advantage in ((1.5, 1.0), (0.5, -1.0)):
        logp = torch.tensor([math.log(ratio)], requires_grad=True)
        part = token_loss(logp, torch.zeros(1), advantage, clip=0.2, clip_high=0.2, normaliser=1)
        part.loss.backward()
        assert float(logp.grad.abs().sum()) == 0.0 and part.clipped == 1
    inside = torch.tensor([math.log(1.1)], requires_grad=True)
    part = token_loss(inside, torch.zeros(1), 1.0, clip=0.2, clip_high=0.2, normaliser=1)
    part.loss.backward()
    assert math.isclose(float(inside.grad), -1.1, rel_tol=1e-5) and part.clipped == 0


def test_a_ratio_past_the_clip_against_the_advantage_still_pulls_back() -> None:
    """PPO's min: a ratio of 1.5 with A < 0 is not clipped (the unclipped term is the smaller)."""
    logp = torch.tensor([math.log(1.5)], requires_grad=True)
    part = token_loss(logp, torch.zeros(1), -1.0, clip=0.2, clip_high=0.2, normaliser=1)
    part.loss.backward()
    assert float(logp.grad) > 0 and part.clipped == 0


def test_the_kl_term_is_zero_at_the_reference_and_positive_away_from_it() -> None:
    """k3(ref, logp) = exp(ref - logp) - (ref - logp) - 1: 0 (and no gradient) at ref, > 0 elsewhere."""
    logp = torch.tensor([-1.0, -2.0], requires_grad=True)
    part = token_loss(
        logp, logp.detach(), 0.0, clip=0.2, clip_high=0.2, normaliser=2, ref=logp.detach(), kl=0.1
    )
    part.loss.backward()
    assert part.kl_sum == 0.0 and float(logp.grad.abs().sum()) == 0.0
    away = token_loss(
        logp,
        logp.detach(),
        0.0,
        clip=0.2,
        clip_high=0.2,
        normaliser=2,
        ref=logp.detach() - 0.5,
        kl=0.1,
    )
    assert away.kl_sum > 0 and float(away.loss) > 0


def test_losses_are_normalised_by_the_batch_s_tokens_so_long_rollouts_weigh_by_length() -> None:
    """Two rollouts of 1 and 3 tokens, each summed and divided by the batch's 4: their sum is the token mean."""
    short = token_loss(torch.zeros(1), torch.zeros(1), 1.0, clip=0.2, clip_high=0.2, normaliser=4)
    long = token_loss(torch.zeros(3), torch.zeros(3), -1.0, clip=0.2, clip_high=0.2, normaliser=4)
    assert math.isclose(float(short.loss + long.loss), (-1.0 + 3 * 1.0) / 4)
