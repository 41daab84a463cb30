"""Nonparametric Variational Information Bottleneck (NVIB) for self-attention.

An attention layer reads a set of vectors; NVIB treats that set as a distribution and puts a
Dirichlet-process posterior on it (Henderson & Fehr 2023; Behjati, Fehr & Henderson 2023). For the
``n`` vectors ``x_i`` entering a layer, ``NVIBLayer`` gives ``n + 1`` mixture components: per token a
Gaussian ``N(mu_i, diag sigma_i^2)`` with pseudo-count ``alpha_i``, plus the prior component
(``alpha = 1, mu = 0, sigma = 1``), stored **last**.

- Pseudo-counts use the exponential activation with a multiplicative skip connection:
  ``log alpha_i^(l) = x_i w + b + log alpha_i^(l-1)`` (raw, un-thresholded values of the previous NVIB
  layer, token positions only). At test time a pseudo-count below ``threshold`` (0.1) is zero: its
  vector is dropped.
- Training (``sample_log_weights``, ``sample_vectors``): mixture weights ``pi ~ Dir(alpha)`` through
  Gamma draws, vectors ``z_i = mu_i + sigma_i * eps`` (reparameterised). The Gamma draws are made in
  log space with the boosting identity ``Gamma(a) = Gamma(a + 1) * U^(1/a)``: exact in distribution,
  reparameterised (implicit gradients for ``Gamma(a + 1)``), and free of the underflow that makes
  ``Gamma(a)`` samples exactly 0 for small ``a`` (for ``a = 0.01`` about 40% of fp32 draws are 0).
- Denoising attention, training form: ordinary attention over the sampled ``Z`` with the per-key bias
  ``log pi_i - |z_i|^2 / (2 sqrt(d))`` (``training_key_bias``; ``d`` is the per-head key dimension).
- Denoising attention, test form (``denoising_attention_eval``): the posterior mean over the
  Gaussian mixture with weights ``alpha / alpha_0``, as printed in the paper (eq. 7); with
  ``exact=True`` it keeps the ``-sum_h u_h^2 / (2 (sigma^r_h)^2)`` term the paper drops, which makes
  it the exact posterior mean when components have different variances.
- KL terms (``kl_dirichlet``, ``kl_gaussian``), the per-layer weights ``l / sum(l)``
  (``layer_weights``) and the KL annealing schedule (``kl_annealing``).

Parameter projections, sampling, attention logits and KL terms run in fp32 (KL in fp64) whatever
autocast says: exponentials of pseudo-counts and squared norms overflow fp16.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from segrl.units.layers import Attention, masked_softmax

THRESHOLD = 0.1
"""Test-time pseudo-count threshold: components with ``alpha < THRESHOLD`` are dropped."""
PRIOR_ALPHA = 1.0
LOG_ALPHA_MAX = 30.0
"""Pseudo-counts are ``exp(min(log alpha, 30))`` (about 1e13) so that sums stay finite."""
LOG_ALPHA_MIN_SAMPLING = -30.0
"""Below this a pseudo-count is sampled as if it were ``exp(-30)``: its weight is 0 in fp32 anyway
and its gradient would otherwise overflow."""


@dataclass
class DPParameters:
    """The Dirichlet-process posterior an NVIB layer gives a batch: ``S = L + 1`` components, tokens
    first, the prior component last."""

    mu: torch.Tensor  # [B, S, P] means
    logvar: torch.Tensor  # [B, S, P] log variances
    log_alpha: torch.Tensor  # [B, S] log pseudo-counts (prior: 0; padding: whatever, masked)
    mask: torch.Tensor  # [B, S] bool, True at real components (characters and the prior)

    @property
    def alpha(self) -> torch.Tensor:
        """Pseudo-counts ``[B, S]``, 0 at padding."""
        alpha = torch.exp(self.log_alpha.clamp(max=LOG_ALPHA_MAX))
        return alpha * self.mask.to(alpha.dtype)

    @property
    def token_log_alpha(self) -> torch.Tensor:
        """Raw log pseudo-counts of the tokens ``[B, L]``: what the next NVIB layer adds to its own."""
        return self.log_alpha[:, :-1]

    def kept(self, threshold: float = THRESHOLD) -> torch.Tensor:
        """``[B, S]`` bool: components with ``alpha >= threshold`` (the prior is always kept)."""
        kept = self.mask & (self.alpha >= threshold)
        kept[:, -1] = True
        return kept

    def token_kept(self, threshold: float = THRESHOLD) -> torch.Tensor:
        """``[B, L]`` bool: the characters whose vectors survive the threshold."""
        return self.kept(threshold)[:, :-1]


class NVIBLayer(nn.Module):
    """Maps vectors ``x [B, L, P]`` (mask ``[B, L]`` True at characters) to ``DPParameters``.

    ``mu = x W_mu + b``, ``log sigma^2 = x W_s + b``, ``log alpha = x w + b (+ log alpha of the previous
    NVIB layer)``; the prior component ``(log alpha 0, mu = prior_mu, log sigma^2 0)`` is appended.

    The options of the NVIB fine-tuning paper ("Fine-Tuning Pretrained Models with NVIB for Improved
    Generalisation"): ``quadratic_alpha`` adds ``(x * x) w_1``
    to ``log alpha``; ``clip`` ``(epsilon, omega)`` clips the tokens' pseudo-counts proportionally
    (``clip_pseudo_counts``); ``identity_init`` makes the layer start as the identity.
    """

    def __init__(
        self,
        dim: int,
        learn_prior_mean: bool = False,
        quadratic_alpha: bool = False,
        clip: tuple[float, float] | None = None,
        prior_alpha: float = PRIOR_ALPHA,
    ):
        super().__init__()
        self.prior_alpha = prior_alpha
        self.mu = nn.Linear(dim, dim)
        self.logvar = nn.Linear(dim, dim)
        self.log_alpha = nn.Linear(dim, 1)
        self.log_alpha_quadratic = nn.Linear(dim, 1, bias=False) if quadratic_alpha else None
        self.clip = clip
        prior = torch.zeros(dim)
        if learn_prior_mean:
            self.prior_mu = nn.Parameter(prior)
        else:
            self.register_buffer("prior_mu", prior)

    @torch.no_grad()
    def identity_init(self, tau_sigma: float, tau_alpha: float, head_dim: int) -> None:
        """The fine-tuning paper's initialisation: ``mu = x`` (``W_mu = I``, ``b = 0``), ``sigma^2 =
        tau_sigma^2`` everywhere, ``log alpha = |x|^2 / (2 sqrt(head_dim)) + tau_alpha`` and the prior's
        mean at 0. Then every token key's bias ``log alpha - |mu|^2 / (2 sqrt(d))`` is the same
        (``tau_alpha``), so denoising attention over the means is the attention the layer had before,
        except for the prior key, whose share shrinks as ``exp(-tau_alpha)``."""
        if self.log_alpha_quadratic is None:
            raise ValueError("identity_init needs quadratic_alpha (the |x|^2 term of log alpha)")
        dim = self.mu.in_features
        self.mu.weight.copy_(torch.eye(dim))
        self.mu.bias.zero_()
        self.logvar.weight.zero_()
        self.logvar.bias.fill_(2.0 * math.log(max(tau_sigma, 1e-8)))
        self.log_alpha.weight.zero_()
        self.log_alpha.bias.fill_(tau_alpha)
        self.log_alpha_quadratic.weight.fill_(1.0 / (2.0 * math.sqrt(head_dim)))
        self.prior_mu.zero_()

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor,
        log_alpha_skip: torch.Tensor | None = None,
    ) -> DPParameters:
        b, length, dim = x.shape
        with torch.autocast(x.device.type, enabled=False):
            x = x.float()
            mu = self.mu(x)  # [B, L, P]
            logvar = self.logvar(x)  # [B, L, P]
            log_alpha = self.log_alpha(x).squeeze(-1)  # [B, L]
            if self.log_alpha_quadratic is not None:
                log_alpha = log_alpha + self.log_alpha_quadratic(x * x).squeeze(-1)
            if log_alpha_skip is not None:
                log_alpha = log_alpha + log_alpha_skip.float()
            if self.clip is not None:
                log_alpha = clip_pseudo_counts(log_alpha, mask, *self.clip)
            prior_mu = self.prior_mu.float().expand(b, 1, dim)
            mu = torch.cat([mu, prior_mu], dim=1)  # [B, S, P]
            logvar = torch.cat([logvar, x.new_zeros(b, 1, dim)], dim=1)
            log_alpha = torch.cat(
                [log_alpha, x.new_full((b, 1), math.log(self.prior_alpha))], dim=1
            )
            full_mask = torch.cat([mask, mask.new_ones(b, 1)], dim=1)  # [B, S]
        return DPParameters(mu, logvar, log_alpha, full_mask)


def clip_pseudo_counts(
    log_alpha: torch.Tensor, mask: torch.Tensor, epsilon: float, omega: float
) -> torch.Tensor:
    """Proportional clipping of the tokens' pseudo-counts (the fine-tuning paper's eq. 5), in log
    space: ``alpha <- max(epsilon, alpha / sum(alpha)) * min(omega, sum(alpha))`` over the positions
    where ``mask`` is True (the prior component is not clipped). Keeps the expected weights
    ``alpha / sum(alpha)`` (above ``epsilon``) and bounds the total, the noise level, by ``omega``."""
    masked = log_alpha.masked_fill(~mask, -math.inf)
    total = torch.logsumexp(masked, dim=-1, keepdim=True)  # [B, 1]
    total = torch.where(torch.isfinite(total), total, torch.zeros_like(total))
    relative = (log_alpha - total).clamp_min(math.log(epsilon))
    return relative + total.clamp_max(math.log(omega))


def sample_log_weights(log_alpha: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``log pi`` for ``pi ~ Dir(alpha)`` over the components where ``mask`` is True, ``[B, S]``.

    ``gamma_i = G_i * U_i^(1/alpha_i)`` with ``G_i ~ Gamma(alpha_i + 1, 1)`` (reparameterised) and
    ``U_i ~ U(0, 1)``, normalised in log space. Masked components get ``log pi = -inf``.
    """
    with torch.autocast(log_alpha.device.type, enabled=False):
        log_alpha = log_alpha.float().clamp(LOG_ALPHA_MIN_SAMPLING, LOG_ALPHA_MAX)
        alpha = torch.exp(log_alpha)
        gamma = torch.distributions.Gamma(alpha + 1.0, torch.ones_like(alpha), validate_args=False)
        boosted = gamma.rsample()  # (no validation: it would wait for a GPU; alpha + 1 > 0)
        uniform = torch.rand_like(alpha).clamp_min(torch.finfo(alpha.dtype).tiny)
        log_gamma = torch.log(boosted) + torch.log(uniform) * torch.exp(-log_alpha)  # [B, S]
        log_gamma = log_gamma.masked_fill(~mask, -math.inf)
        return log_gamma - torch.logsumexp(log_gamma, dim=-1, keepdim=True)


def sample_vectors(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """``z = mu + sigma * eps``, ``eps ~ N(0, I)`` (reparameterised), ``[B, S, P]``."""
    return mu + torch.exp(0.5 * logvar) * torch.randn_like(mu)


def training_key_bias(log_pi: torch.Tensor, z: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Per-key bias of training-time denoising attention: ``log pi - |z|^2 / (2 sqrt(d))`` ``[B, S]``.

    Masked components (``log pi = -inf``) get ``-inf``: pass the component mask to the attention too.
    """
    return log_pi - z.pow(2).sum(-1) / (2.0 * math.sqrt(head_dim))


def denoising_attention_train(
    attention: Attention, queries: torch.Tensor, params: DPParameters, need_weights: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Training-time denoising self-attention of ``queries [B, L, P]`` over a sample of ``params``.

    Returns ``(output [B, L, P], weights [B, H, L, S] | None, log_pi [B, S])``; the weights are
    None with ``fused`` attention unless ``need_weights``.
    """
    with torch.autocast(queries.device.type, enabled=False):
        log_pi = sample_log_weights(params.log_alpha, params.mask)
        z = sample_vectors(params.mu, params.logvar)  # [B, S, P]
        bias = training_key_bias(log_pi, z, attention.head_dim)
        keep = params.mask & torch.isfinite(log_pi)
        output, weights = attention(
            queries.float(), z, key_mask=keep, key_bias=bias, need_weights=need_weights
        )
    return output, weights, log_pi


def denoising_attention_eval(
    attention: Attention,
    queries: torch.Tensor,
    params: DPParameters,
    threshold: float = THRESHOLD,
    exact: bool = False,
    log_variance_weight: float = 0.5,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Test-time denoising self-attention of ``queries [B, L, P]`` over the posterior mean of
    ``params`` (mixture weights ``alpha / alpha_0`` after the threshold), per head::

        u        = q W_K                     (the query mapped into the components' space)
        s        = sqrt(d) + sigma^2         (d: key dimension per head)
        logit_i  = u . (mu_i / s_i) - 1/2 |mu_i|^2_(1/s_i) - c sum log s_i + log(alpha_i / alpha_0)
                   [- 1/2 |u|^2_(1/s_i) with ``exact``]
        value_i  = (sigma_i^2 * u + sqrt(d) mu_i) / s_i
        output   = (sum_i softmax(logit)_i value_i) W_V + b_V, then the output projection

    with ``c = log_variance_weight``: 1/2 in the paper's equation and the reference code's later
    version, 1 in its v2.0 code.

    Returns ``(output [B, L, P], weights [B, H, L, S])``.
    """
    heads, head_dim = attention.heads, attention.head_dim
    with torch.autocast(queries.device.type, enabled=False):
        queries = queries.float()
        dim = queries.shape[-1]
        q = attention.split_heads(attention.query(queries))  # [B, H, L, Dh]
        key_weight = attention.key.weight.float().view(heads, head_dim, dim)  # [H, Dh, P]
        u = torch.einsum("bhld,hdp->bhlp", q, key_weight)  # [B, H, L, P]
        var = torch.exp(params.logvar)  # [B, S, P]
        s = math.sqrt(head_dim) + var  # [B, S, P]
        keep = params.kept(threshold)  # [B, S]
        alpha = params.alpha * keep.to(var.dtype)
        log_weight = torch.log(alpha.clamp_min(torch.finfo(alpha.dtype).tiny)) - torch.log(
            alpha.sum(-1, keepdim=True)
        )  # [B, S]
        key_bias = (
            log_weight
            - 0.5 * (params.mu.pow(2) / s).sum(-1)
            - log_variance_weight * torch.log(s).sum(-1)
        )  # [B, S]
        logits = u @ (params.mu / s).transpose(-1, -2).unsqueeze(1)  # [B, H, L, S]
        logits = logits + key_bias[:, None, None, :]
        if exact:
            logits = logits - 0.5 * (u.pow(2) @ (1.0 / s).transpose(-1, -2).unsqueeze(1))
        weights = masked_softmax(logits, keep[:, None, None, :])  # [B, H, L, S]
        mixed = u * (weights @ (var / s).unsqueeze(1)) + math.sqrt(head_dim) * (
            weights @ (params.mu / s).unsqueeze(1)
        )  # [B, H, L, P] posterior mean in the components' space
        value_weight = attention.value.weight.float().view(heads, head_dim, dim)  # [H, Dh, P]
        values = torch.einsum("bhlp,hdp->bhld", mixed, value_weight)  # [B, H, L, Dh]
        value_bias = attention.value.bias.float().view(1, heads, 1, head_dim)
        values = values + weights.sum(-1, keepdim=True) * value_bias
        output = attention.out(attention.merge_heads(values))  # [B, L, P]
    return output, weights


def denoising_attention_simplified(
    attention: Attention, queries: torch.Tensor, params: DPParameters, threshold: float = THRESHOLD
) -> tuple[torch.Tensor, torch.Tensor]:
    """The fine-tuning paper's test-time denoising attention (its eq. 20-21): the training function
    at ``z = mu`` and ``pi = alpha / alpha_0`` (after the threshold), with no variance terms.

    Returns ``(output [B, L, P], weights [B, H, L, S])``.
    """
    with torch.autocast(queries.device.type, enabled=False):
        keep = params.kept(threshold)  # [B, S]
        alpha = params.alpha * keep.to(params.mu.dtype)
        log_pi = torch.log(alpha.clamp_min(torch.finfo(alpha.dtype).tiny)) - torch.log(
            alpha.sum(-1, keepdim=True)
        )
        bias = training_key_bias(log_pi, params.mu, attention.head_dim)
        return attention(queries.float(), params.mu, key_mask=keep, key_bias=bias)


def kl_dirichlet(
    alpha0_q: torch.Tensor,
    alpha0_p: torch.Tensor,
    kappa0: torch.Tensor | float,
    check: bool = True,
) -> torch.Tensor:
    """The Dirichlet KL term ``L_D`` of NVIB (Henderson & Fehr 2023), elementwise, in fp64:

    ``KL(Dir(alpha0_q / k, ... x k) || Dir(alpha0_p / k, ... x k))`` with ``k = kappa0``, the number of
    sampled vectors (``n + 1``), i.e.
    ``lgamma(a_q) - lgamma(a_p) + (a_q - a_p)(digamma(a_q/k) - digamma(a_q)) + k (lgamma(a_p/k) -
    lgamma(a_q/k))``. Non-negative, 0 when the totals agree. (The formula printed in the stacked-NVIB
    paper, eq. 4, is not this and is never positive; it is not used.)

    ``check=False`` skips the check that every argument is positive (on a GPU the check waits for
    the device): for callers whose arguments are positive by construction.
    """
    a_q = torch.as_tensor(alpha0_q, dtype=torch.float64)
    a_p = torch.as_tensor(alpha0_p, dtype=torch.float64, device=a_q.device)
    k = torch.as_tensor(kappa0, dtype=torch.float64, device=a_q.device)
    if check and ((a_q <= 0).any() or (a_p <= 0).any() or (k <= 0).any()):
        raise ValueError("kl_dirichlet needs positive total pseudo-counts and kappa0")
    return (
        torch.lgamma(a_q)
        - torch.lgamma(a_p)
        + (a_q - a_p) * (torch.digamma(a_q / k) - torch.digamma(a_q))
        + k * (torch.lgamma(a_p / k) - torch.lgamma(a_q / k))
    )


def kl_dirichlet_exact(
    alpha: torch.Tensor, alpha0_p: torch.Tensor | float, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """``KL(Dir(alpha) || Dir(alpha * alpha0_p / alpha0_q))`` over the last axis (masked entries left
    out), in fp64: the exact Dirichlet term for one sample per component."""
    alpha = alpha.double()
    present = torch.ones_like(alpha, dtype=torch.bool) if mask is None else mask
    if ((alpha <= 0) & present).any():
        raise ValueError("kl_dirichlet_exact needs positive pseudo-counts where mask is True")
    safe = torch.where(present, alpha, torch.ones_like(alpha))
    a_q = (alpha * present).sum(-1)
    a_p = torch.as_tensor(alpha0_p, dtype=torch.float64, device=alpha.device)
    scaled = safe * (a_p / a_q).unsqueeze(-1)
    terms = (
        torch.lgamma(scaled)
        - torch.lgamma(safe)
        + safe
        * (1 - (a_p / a_q).unsqueeze(-1))
        * (torch.digamma(safe) - torch.digamma(a_q)[..., None])
    )
    return torch.lgamma(a_q) - torch.lgamma(a_p) + (terms * present).sum(-1)


def kl_gaussian(params: DPParameters, prior_logvar: float = 0.0) -> torch.Tensor:
    """The Gaussian KL term ``L_G`` per example ``[B]``, normalised by the number of components and
    the dimension (``L_G / (kappa0 p)``)::

        1/2 sum_i (alpha_i / alpha_0) mean_h[ (mu_ih - mu^p_h)^2 / s_p + sigma_ih^2 / s_p - 1
                                              - log(sigma_ih^2 / s_p) ]

    with the prior ``N(mu^p, s_p)`` (``mu^p`` is the prior component's mean, ``s_p = exp(prior_logvar)``).
    """
    with torch.autocast(params.mu.device.type, enabled=False):
        prior_mu = params.mu[:, -1:, :]  # [B, 1, P]
        log_ratio = params.logvar - prior_logvar  # [B, S, P]
        per_dim = (params.mu - prior_mu).pow(2) / math.exp(prior_logvar) + torch.exp(log_ratio)
        per_component = 0.5 * (per_dim - 1.0 - log_ratio).mean(-1)  # [B, S]
        per_component = per_component.masked_fill(~params.mask, 0.0)
        alpha = params.alpha
        weights = alpha / alpha.sum(-1, keepdim=True)
        return (weights * per_component).sum(-1)


def layer_weights(n_layers: int, weighting: str = "linear") -> list[float]:
    """Weights of the KL terms of stacked NVIB layers (bottom first): ``linear`` gives layer ``l``
    weight ``l / sum(1..N)`` (stronger regularisation higher up), ``uniform`` ``1 / N``."""
    if weighting == "linear":
        total = n_layers * (n_layers + 1) / 2
        return [layer / total for layer in range(1, n_layers + 1)]
    if weighting == "uniform":
        return [1.0 / n_layers] * n_layers
    raise ValueError(f"unknown layer weighting {weighting!r}: use linear or uniform")


def kl_annealing(progress: float, start: float = 0.3, end: float = 0.6) -> float:
    """Weight of the KL terms after ``progress`` (fraction of training steps done): 0 until
    ``start``, a linear ramp to 1 at ``end``, 1 after."""
    if progress <= start:
        return 0.0
    if progress >= end or end <= start:
        return 1.0
    return (progress - start) / (end - start)
