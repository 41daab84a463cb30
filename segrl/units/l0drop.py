"""L0Drop (Zhang et al. 2021) with hard-concrete gates (Louizos, Welling & Kingma 2018), targeted
sparsity (Mai & Henderson 2022) and the exponential lambda schedule of DCSA.

Each vector ``m_i`` gets a gate ``g_i`` in [0, 1] from ``log alpha_i = m_i . w`` (no bias); the layer
outputs ``g_i m_i``. With ``normalize``, ``log alpha_i = LayerNorm(m_i) . w + b`` instead (not the
paper's): the vectors' norm grows as a decoder learns to read them, which drives ``|log alpha|`` to
where the gates' sigmoids are flat and the sparsity penalty's gradient vanishes; on normalised vectors
``|log alpha|`` is bounded by ``|w| sqrt(D) + |b|``. With temperature ``beta`` (0.66) and stretch ``eps`` (0.1):

- training (``sample_gates``): ``u ~ U(0, 1)``,
  ``s = sigmoid((log u - log(1 - u) + log alpha) / beta)``, ``g = clamp(s (1 + 2 eps) - eps, 0, 1)``;
  exact zeros and ones have probability mass, gradients reach ``log alpha`` in between;
- test time (``deterministic_gates``): ``clamp(sigmoid(log alpha) (1 + 2 eps) - eps, 0, 1)`` (deterministic;
  Louizos et al.'s estimator, not the gate's mean);
- ``P(g = 0) = sigmoid(beta log(eps / (1 + eps)) - log alpha)`` (``closed_probability``), so the
  expected number of open gates is ``L0 = sum_i sigmoid(log alpha_i - beta log(eps / (1 + eps)))``
  (``expected_open_gates``), differentiable in ``log alpha``.

Targeted sparsity penalises ``max(L0, N / r)`` instead of ``L0``: below ``N / r`` open gates (``N``
characters, one unit per ``r`` of them) the penalty is constant, so gates stop closing there.
"""

from __future__ import annotations

import math

import torch
from torch import nn

BETA = 0.66
"""Hard-concrete temperature."""
EPS = 0.1
"""Stretch: (0, 1) is stretched to (-eps, 1 + eps) before clamping."""


def closed_log_odds_shift(beta: float = BETA, eps: float = EPS) -> float:
    """``beta log(eps / (1 + eps))``: ``P(g = 0) = sigmoid(shift - log alpha)`` (-1.5826 by default)."""
    return beta * math.log(eps / (1.0 + eps))


def closed_probability(
    log_alpha: torch.Tensor, beta: float = BETA, eps: float = EPS
) -> torch.Tensor:
    """Probability that a training-time gate is exactly 0, elementwise."""
    return torch.sigmoid(closed_log_odds_shift(beta, eps) - log_alpha)


def expected_open_gates(
    log_alpha: torch.Tensor, mask: torch.Tensor | None = None, beta: float = BETA, eps: float = EPS
) -> torch.Tensor:
    """``L0`` per row: the expected number of non-zero gates ``[B]`` of ``log_alpha [B, K]`` (gates
    where ``mask`` is False are not counted)."""
    open_probability = torch.sigmoid(log_alpha - closed_log_odds_shift(beta, eps))  # [B, K]
    if mask is not None:
        open_probability = open_probability * mask.to(open_probability.dtype)
    return open_probability.sum(dim=-1)


def sample_gates(
    log_alpha: torch.Tensor,
    beta: float = BETA,
    eps: float = EPS,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """One hard-concrete sample per gate, reparameterised (gradients reach ``log_alpha``)."""
    u = torch.rand(log_alpha.shape, generator=generator, device=log_alpha.device)
    u = u.clamp(1e-6, 1.0 - 1e-6).to(log_alpha.dtype)
    s = torch.sigmoid((torch.log(u) - torch.log1p(-u) + log_alpha) / beta)
    return (s * (1.0 + 2.0 * eps) - eps).clamp(0.0, 1.0)


def deterministic_gates(log_alpha: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """The deterministic test-time gates."""
    return (torch.sigmoid(log_alpha) * (1.0 + 2.0 * eps) - eps).clamp(0.0, 1.0)


def targeted_sparsity(l0: torch.Tensor, lengths: torch.Tensor, ratio: float) -> torch.Tensor:
    """``max(L0, N / r)`` per row: ``l0 [B]`` expected open gates, ``lengths [B]`` the ``N``s."""
    return torch.maximum(l0, lengths.to(l0.dtype) / ratio)


def lambda_schedule(
    progress: float, start: float, ratio: float, limit: float, every: float
) -> float:
    """The sparsity weight at ``progress`` (fraction of training done): ``start``, multiplied by
    ``ratio`` after every ``every`` of training, capped at ``limit`` (the DCSA schedule: every 10
    of 200 epochs is ``every = 0.05``)."""
    increases = math.floor(progress / every + 1e-9) if every > 0 else 0
    return min(start * ratio**increases, limit)


class L0Drop(nn.Module):
    """Gates vectors: ``forward(vectors [B, K, D], mask [B, K])`` -> ``(gated [B, K, D], gates [B, K],
    log_alpha [B, K])``; gates are sampled in training and deterministic in eval mode, 0 where
    ``mask`` is False."""

    def __init__(self, dim: int, beta: float = BETA, eps: float = EPS, normalize: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(dim))
        nn.init.normal_(self.weight, std=dim**-0.5)
        self.bias = nn.Parameter(torch.zeros(())) if normalize else None
        self.beta = beta
        self.eps = eps

    def log_alpha(self, vectors: torch.Tensor) -> torch.Tensor:
        """``[B, K]`` gate log-odds of ``vectors [B, K, D]`` (see the module docstring)."""
        vectors = vectors.float()
        if self.bias is None:
            return vectors @ self.weight.float()
        normalized = nn.functional.layer_norm(vectors, vectors.shape[-1:])
        return normalized @ self.weight.float() + self.bias.float()

    def forward(
        self, vectors: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        log_alpha = self.log_alpha(vectors)  # [B, K]
        if self.training:
            gates = sample_gates(log_alpha, self.beta, self.eps)
        else:
            gates = deterministic_gates(log_alpha, self.eps)
        gates = gates * mask.to(gates.dtype)  # [B, K]
        return vectors * gates.unsqueeze(-1).to(vectors.dtype), gates, log_alpha
