"""The NVIB character autoencoder of Behjati, Fehr & Henderson (2023): stacked self-attention whose top
layers are NVIB layers, trained as a denoising autoencoder.

Encoder: ``encoder_layers`` pre-LN layers (6 in the paper); the last ``nvib_layers`` (3) replace
self-attention by an NVIB layer and denoising self-attention (queries: the layer's normalised input;
keys and values: the ``n + 1`` NVIB components, sampled in training, their posterior mean at test
time). Pseudo-counts pass from each NVIB layer to the next through the multiplicative skip connection.
Decoder: ``decoder_layers`` (2) ordinary layers whose cross-attention reads only the final encoder
vectors whose last-layer pseudo-count is at least ``threshold`` (0.1), in training and at test time.

Loss (per example, then batch mean): reconstruction cross-entropy plus
``w(t) sum_l beta_l (lambda_d L_D^(l) / (n + 1) + lambda_g L_G^(l))`` with the conditional prior
``alpha_0^p' = prior_alpha + n alpha_delta`` (``prior_alpha`` 1 in the papers), ``beta_l = l /
sum(l)`` over the NVIB layers, and ``w(t)`` the KL annealing ramp (0 until 30% of training, 1 from
60%). See ``segrl.units.nvib`` for the pieces.

Segments are read off the last layer's test-time attention (``S = n + 1`` keys, the prior last; a
character whose argmax is the prior belongs to a run keyed by the prior like any other key).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from segrl.errors import ConfigError
from segrl.units.base import Encoding, UnitModel
from segrl.units.layers import Attention, FeedForward
from segrl.units.nvib import (
    THRESHOLD,
    DPParameters,
    NVIBLayer,
    denoising_attention_eval,
    denoising_attention_simplified,
    denoising_attention_train,
    kl_annealing,
    kl_dirichlet,
    kl_gaussian,
    layer_weights,
)
from segrl.units.transformer import TransformerAutoencoder, TransformerConfig

KL_DIRICHLET = "kl_dirichlet"
KL_GAUSSIAN = "kl_gaussian"


@dataclass
class NVIBConfig(TransformerConfig):
    """The NVIB autoencoder: the Transformer's shape plus the NVIB options (paper values)."""

    nvib_layers: int = 3
    """How many of the top encoder layers are NVIB layers."""
    lambda_d: float = 1.0
    """Weight of the Dirichlet KL (lambda'_D; divided by n + 1 inside)."""
    lambda_g: float = 1e-2
    """Weight of the Gaussian KL (lambda'_G; the term is a mean over components' dimensions, as in
    the authors' code; the stacked-NVIB paper's appendix, read literally, divides by n more)."""
    alpha_delta: float = 0.25
    """Conditional prior: pseudo-count added per character, alpha_0^p' = prior_alpha + n
    alpha_delta."""
    prior_alpha: float = 1.0
    """The prior component's pseudo-count (the papers': 1). Characters' pseudo-counts settle near
    ``alpha_delta``, so with a small ``alpha_delta`` a prior of 1 outweighs any one of them in the
    attention's ``log(alpha / alpha_0)`` term; a prior on their scale does not."""
    threshold: float = THRESHOLD
    kl_anneal_start: float = 0.3
    kl_anneal_end: float = 0.6
    layer_weighting: Literal["linear", "uniform"] = "linear"
    """linear (beta_l = l / sum l, the paper's) or uniform."""
    eval_log_variance_weight: float = 0.5
    """Weight of ``sum_h log s_ih`` in the test-time attention logits: 0.5 is the paper's equation
    (and the reference code's later version); 1.0 the reference code's v2.0 (the code of the
    stacked-NVIB paper)."""
    exact_eval_attention: bool = False
    """Keep the query-variance term the paper's test-time attention drops (the exact posterior mean)."""
    learn_prior_mean: bool = False
    alpha_skip: bool = True
    """Add the previous NVIB layer's log pseudo-counts (the multiplicative skip connection)."""
    # The NVIB fine-tuning paper's modifications (``segrl units finetune`` turns them on):
    quadratic_alpha: bool = False
    """log alpha = (x * x) w_1 + x w_2 + b instead of x w + b."""
    identity_init: bool = False
    """Start each NVIB layer as the identity: mu = x, sigma = tau_sigma, log alpha = |x|^2 /
    (2 sqrt(d / heads)) + tau_alpha (needs quadratic_alpha, and alpha_skip off)."""
    tau_sigma: float = 0.1
    """Initial standard deviation of the components under identity_init."""
    tau_alpha: float = 10.0
    """Initial log pseudo-count offset under identity_init: the larger, the smaller the prior's share."""
    clip_alpha: bool = False
    """Proportional clipping of the pseudo-counts: alpha <- max(clip_epsilon, alpha / sum alpha)
    * min(clip_omega, sum alpha)."""
    clip_epsilon: float = 1e-6
    clip_omega: float = 1e10
    simplified_eval_attention: bool = False
    """Test-time attention as the training function at z = mu, pi = alpha / alpha_0 (no variance
    terms): the same function the layer computes in training, without the noise."""

    def check(self, prefix: str) -> None:
        super().check(prefix)
        if self.eval_log_variance_weight < 0:
            raise ConfigError(
                f"{prefix}eval_log_variance_weight must be >= 0, got {self.eval_log_variance_weight}"
            )
        if not 1 <= self.nvib_layers <= self.encoder_layers:
            raise ConfigError(
                f"{prefix}nvib_layers must be between 1 and {prefix}encoder_layers ({self.encoder_layers}), "
                f"got {self.nvib_layers}"
            )
        if min(self.lambda_d, self.lambda_g, self.alpha_delta, self.threshold) < 0:
            raise ConfigError(f"{prefix}lambda_d, lambda_g, alpha_delta and threshold must be >= 0")
        if self.prior_alpha <= 0:
            raise ConfigError(f"{prefix}prior_alpha must be above 0, got {self.prior_alpha}")
        if self.identity_init and (not self.quadratic_alpha or self.alpha_skip):
            raise ConfigError(
                f"{prefix}identity_init needs {prefix}quadratic_alpha = true and {prefix}alpha_skip = false "
                "(the |x|^2 term makes the identity; the skip connection would add the previous "
                "layer's pseudo-counts and break it)"
            )
        if self.exact_eval_attention and self.simplified_eval_attention:
            raise ConfigError(
                f"choose one of {prefix}exact_eval_attention and {prefix}simplified_eval_attention"
            )
        if self.clip_alpha and not (0 < self.clip_epsilon < 1 < self.clip_omega):
            raise ConfigError(
                f"{prefix}clip_epsilon must be in (0, 1) and {prefix}clip_omega above 1"
            )


class NVIBEncoderLayer(nn.Module):
    """Pre-LN encoder layer with NVIB: ``h = LN(x)``; DP parameters of ``h``; ``x + DAttn(h)``; then
    ``x + FF(LN(x))``.

    ``forward(x [B, L, D], mask [B, L], log_alpha_skip [B, L] | None)`` ->
    ``(x [B, L, D], weights [B, H, L, L + 1], params)``; the weights are None in training with fused
    attention.
    """

    def __init__(self, config: NVIBConfig):
        super().__init__()
        c = config
        self.attention_norm = nn.LayerNorm(c.dim)
        clip = (c.clip_epsilon, c.clip_omega) if c.clip_alpha else None
        self.nvib = NVIBLayer(c.dim, c.learn_prior_mean, c.quadratic_alpha, clip, c.prior_alpha)
        self.attention = Attention(
            c.dim, c.heads, c.attention_dropout, c.attention_init, c.fused_attention
        )
        self.feed_forward_norm = nn.LayerNorm(c.dim)
        self.feed_forward = FeedForward(c.dim, c.feed_forward, c.dropout)
        self.dropout = nn.Dropout(c.dropout)
        self.threshold = c.threshold
        self.exact = c.exact_eval_attention
        self.log_variance_weight = c.eval_log_variance_weight
        self.simplified = c.simplified_eval_attention

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, log_alpha_skip: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None, DPParameters]:
        h = self.attention_norm(x)
        params = self.nvib(h, mask, log_alpha_skip)
        if self.training:
            attended, weights, _ = denoising_attention_train(self.attention, h, params)
        elif self.simplified:
            attended, weights = denoising_attention_simplified(
                self.attention, h, params, self.threshold
            )
        else:
            attended, weights = denoising_attention_eval(
                self.attention, h, params, self.threshold, self.exact, self.log_variance_weight
            )
        x = x + self.dropout(attended)
        x = x + self.dropout(self.feed_forward(self.feed_forward_norm(x)))
        return x, weights, params


PSEUDO_COUNT_QUANTILES = (0.1, 0.5, 0.9)


def pseudo_count_spread(
    params: DPParameters, mask: torch.Tensor, number: int
) -> dict[str, torch.Tensor]:
    """The 10th, 50th and 90th percentiles of a layer's characters' pseudo-counts in the batch
    (``pseudo_count_p10/layer_N``, ...): a model that keeps vectors by concentrating its total on a
    few has a 10th percentile far below the threshold and a 90th far above it; one that spreads the
    total evenly (and keeps all or none) has the three close together."""
    with torch.no_grad():
        alpha = params.alpha[:, :-1].float().masked_fill(~mask, float("nan")).flatten()
        values = torch.nanquantile(alpha, torch.tensor(PSEUDO_COUNT_QUANTILES, device=alpha.device))
    return {
        f"pseudo_count_p{round(100 * q)}/layer_{number}": v
        for q, v in zip(PSEUDO_COUNT_QUANTILES, values, strict=True)
    }


class NVIBAutoencoder(TransformerAutoencoder):
    """Character denoising autoencoder with NVIB on the top encoder layers (see the module docstring)."""

    config_class = NVIBConfig
    finetune_defaults = {
        "arch.identity_init": True,
        "arch.quadratic_alpha": True,
        "arch.alpha_skip": False,
        "arch.learn_prior_mean": True,
        "arch.clip_alpha": True,
        "arch.simplified_eval_attention": True,
        "arch.alpha_delta": 0.0,
        "arch.lambda_d": 1e-3,
        "arch.lambda_g": 1e-3,
        "arch.kl_anneal_start": 0.0,
        "arch.kl_anneal_end": 0.3,
    }
    """The fine-tuning paper's model: identity initialisation, the |x|^2 term, no skip connection, a
    learned prior mean, proportional clipping, the simplified test-time attention, no conditional
    prior, lambda_G = lambda_D (1e-3: on the CPU Transformer, 5e-3 and above drop the top layer's
    vectors all at once and the reconstruction with them; docs/results.md), and the KL ramped up over
    the first 30% of the steps."""

    def __init__(self, config: NVIBConfig, vocab_size: int):
        super().__init__(config, vocab_size)
        if config.identity_init:
            head_dim = config.dim // config.heads
            for layer in self.encoder_layers:
                if isinstance(layer, NVIBEncoderLayer):
                    layer.nvib.identity_init(config.tau_sigma, config.tau_alpha, head_dim)

    @classmethod
    def finetune_options(cls, trained: Any) -> dict[str, Any]:
        """From a model without NVIB layers: as many of the default ``nvib_layers`` as its encoder
        has layers."""
        options = dict(cls.finetune_defaults)
        if not hasattr(trained.arch, "nvib_layers"):
            layers = min(NVIBConfig.nvib_layers, trained.arch.encoder_layers)
            options["arch.nvib_layers"] = layers
        return options

    def init_from_pretrained(self, source: UnitModel) -> None:
        """Start from a trained plain Transformer autoencoder of the same shape: every weight it has
        is copied; the NVIB layers keep their own initialisation (the identity, with
        ``identity_init``)."""
        if type(source) is not TransformerAutoencoder:
            super().init_from_pretrained(source)
            return
        self.copy_weights_of(source, TransformerConfig, new=[".nvib."])

    def make_encoder_layer(self, index: int) -> nn.Module:
        c = self.config
        if index >= c.encoder_layers - c.nvib_layers:
            return NVIBEncoderLayer(c)
        return super().make_encoder_layer(index)

    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> Encoding:
        c = self.config
        x = self.embedding(ids)  # [B, L, D]
        maps: dict[str, torch.Tensor] = {}
        stats: dict[str, torch.Tensor] = {}
        dp_layers: list[tuple[int, DPParameters]] = []
        skip = None
        n_chars = mask.sum(1).clamp_min(1)  # [B]
        for i, layer in enumerate(self.encoder_layers):
            number = i + 1
            if isinstance(layer, NVIBEncoderLayer):
                x, weights, params = layer(x, mask, skip)
                skip = params.token_log_alpha if c.alpha_skip else None
                dp_layers.append((number, params))
                kept = params.token_kept(c.threshold) & mask  # [B, L]
                stats[f"kept_fraction/layer_{number}"] = (kept.sum(1) / n_chars).mean()
                stats.update(pseudo_count_spread(params, mask, number))
            else:
                x, weights = layer(x, mask)
            if weights is not None:  # None in training
                maps[f"layer {number}"] = weights.mean(dim=1)  # [B, L, S] averaged over heads
        final_kept = dp_layers[-1][1].token_kept(c.threshold) & mask  # [B, L]
        return Encoding(
            memory=self.encoder_norm(x),
            memory_mask=final_kept,
            attention=maps.get(f"layer {len(self.encoder_layers)}"),
            kept=final_kept.sum(1).float(),
            layer_attention=maps,
            stats=stats,
            extras={"nvib": dp_layers},
        )

    def penalty(self, encoding: Encoding, progress: float) -> dict[str, torch.Tensor]:
        """The annealed, layer-weighted KL terms; per-layer raw values go to ``encoding.stats``."""
        c = self.config
        dp_layers: list[tuple[int, DPParameters]] = encoding.extras["nvib"]
        betas = layer_weights(len(dp_layers), c.layer_weighting)
        anneal = kl_annealing(progress, c.kl_anneal_start, c.kl_anneal_end)
        dirichlet = gaussian = 0.0
        for beta, (number, params) in zip(betas, dp_layers, strict=True):
            n = params.mask[:, :-1].sum(1).double()  # [B] characters
            kappa0 = n + 1
            alpha0_q = params.alpha.double().sum(-1)  # [B], prior included
            alpha0_p = c.prior_alpha + n * c.alpha_delta
            # positive by construction: alpha0_q holds the prior's pseudo-count, prior_alpha > 0
            l_d = (kl_dirichlet(alpha0_q, alpha0_p, kappa0, check=False) / kappa0).mean().float()
            l_g = kl_gaussian(params).mean()
            encoding.stats[f"{KL_DIRICHLET}/layer_{number}"] = l_d.detach()
            encoding.stats[f"{KL_GAUSSIAN}/layer_{number}"] = l_g.detach()
            dirichlet = dirichlet + beta * l_d
            gaussian = gaussian + beta * l_g
        encoding.stats["kl_weight"] = torch.tensor(anneal, device=encoding.memory.device)
        return {
            KL_DIRICHLET: anneal * c.lambda_d * dirichlet,
            KL_GAUSSIAN: anneal * c.lambda_g * gaussian,
        }
