"""The loss of coevo train: the truncated importance weight against the behaviour policy, the clip against the old policy, the KL term, token-level normalisation."""

from __future__ import annotations

import math

import torch
from coevo.run.train.objective import sft_loss, token_loss


def loss(logp, old, behaviour, advantage, **given):
    settings = {"clip": 0.2, "clip_high": 0.2, "cap": 2.0, "normaliser": logp.numel(), **given}
    n = logp.numel()
    return token_loss(
        logp,
        old if isinstance(old, torch.Tensor) else torch.full((n,), float(old)),
        behaviour if isinstance(behaviour, torch.Tensor) else torch.full((n,), float(behaviour)),
        torch.full((n,), float(advantage)),
        **settings,
    )


def test_on_fresh_data_the_weight_is_1_and_the_gradient_is_the_advantage_per_token() -> None:
    """logp = old = behaviour: loss -A·n/N, each token's gradient -A/N, nothing clipped or capped."""
    logp = torch.tensor([-1.0, -2.0, -0.5], requires_grad=True)
    part = loss(logp, logp.detach().clone(), logp.detach().clone(), 2.0, normaliser=6)
    part.loss.backward()
    assert math.isclose(float(part.loss.detach()), -2.0 * 3 / 6)
    assert torch.allclose(logp.grad, torch.full((3,), -2.0 / 6))
    assert part.clipped == 0 and part.capped == 0 and part.abs_mismatch_sum == 0.0
    assert math.isclose(part.weight_sum, 3.0)


def test_the_server_s_gap_is_an_importance_weight_not_policy_movement() -> None:
    """old − behaviour = 0.3 nats on a token (serving precision, staleness): weight e^0.3, no clip; the ratio against old is 1."""
    logp = torch.tensor([-1.0], requires_grad=True)
    part = loss(logp, logp.detach().clone(), torch.tensor([-1.3]), 1.0)
    part.loss.backward()
    assert part.clipped == 0
    assert math.isclose(part.weight_sum, math.exp(0.3), rel_tol=1e-5)
    assert math.isclose(float(logp.grad), -math.exp(0.3), rel_tol=1e-5)


def test_the_importance_weight_is_capped_so_a_negative_advantage_cannot_blow_up() -> None:
    """old − behaviour = 5 nats (e^5 ≈ 148): the weight is held at the cap, counted, for either sign of A."""
    for advantage in (1.0, -1.0):
        logp = torch.tensor([-0.1], requires_grad=True)
        part = loss(logp, logp.detach().clone(), torch.tensor([-5.1]), advantage, cap=2.0)
        part.loss.backward()
        assert part.capped == 1 and part.weight_max == 2.0
        assert math.isclose(float(logp.grad), -2.0 * advantage, rel_tol=1e-5)


def test_the_clip_is_against_the_old_policy_and_stops_the_gradient_beyond_it() -> None:
    """A ratio of 1.5 to the old policy with A > 0, or 0.5 with A < 0, is held: no gradient, counted."""
    for ratio, advantage in ((1.5, 1.0), (0.5, -1.0)):
        logp = torch.tensor([math.log(ratio)], requires_grad=True)
        part = loss(logp, torch.zeros(1), torch.zeros(1), advantage)
        part.loss.backward()
        assert float(logp.grad.abs().sum()) == 0.0 and part.clipped == 1
    inside = torch.tensor([math.log(1.1)], requires_grad=True)
    part = loss(inside, torch.zeros(1), torch.zeros(1), 1.0)
    part.loss.backward()
    assert math.isclose(float(inside.grad), -1.1, rel_tol=1e-5) and part.clipped == 0


def test_a_ratio_past_the_clip_against_the_advantage_still_pulls_back() -> None:
    """PPO's min: a ratio of 1.5 with A < 0 is not clipped (the unclipped term is the smaller)."""
    logp = torch.tensor([math.log(1.5)], requires_grad=True)
    part = loss(logp, torch.zeros(1), torch.zeros(1), -1.0)
    part.loss.backward()
    assert float(logp.grad) > 0 and part.clipped == 0


def test_the_kl_term_is_zero_at_the_reference_and_positive_away_from_it() -> None:
    """k3(ref, logp) = exp(ref - logp) - (ref - logp) - 1: 0 (and no gradient) at ref, > 0 elsewhere."""
    logp = torch.tensor([-1.0, -2.0], requires_grad=True)
    part = loss(logp, logp.detach(), logp.detach(), 0.0, ref=logp.detach(), kl=0.1)
    part.loss.backward()
    assert part.kl_sum == 0.0 and float(logp.grad.abs().sum()) == 0.0
    away = loss(logp, logp.detach(), logp.detach(), 0.0, ref=logp.detach() - 0.5, kl=0.1)
    assert away.kl_sum > 0 and float(away.loss.detach()) > 0


def test_losses_are_normalised_by_the_batch_s_tokens_so_long_rollouts_weigh_by_length() -> None:
    """Two rollouts of 1 and 3 tokens, each summed and divided by the batch's 4: their sum is the token mean."""
    short = loss(torch.zeros(1), 0.0, 0.0, 1.0, normaliser=4)
    long = loss(torch.zeros(3), 0.0, 0.0, -1.0, normaliser=4)
    assert math.isclose(float(short.loss + long.loss), (-1.0 + 3 * 1.0) / 4)


def test_the_warm_start_s_loss_is_the_mean_negative_log_likelihood() -> None:
    """sft_loss sums -logp over the tokens and divides by the batch's count."""
    logp = torch.tensor([-0.5, -1.5], requires_grad=True)
    value = sft_loss(logp, normaliser=4)
    value.backward()
    assert math.isclose(float(value), 0.5) and torch.allclose(logp.grad, torch.full((2,), -0.25))
