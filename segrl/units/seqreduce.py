"""The attention-based sequence-reduction autoencoder of Biermann et al. (2024): a character sequence
reduced to fewer vectors by attention whose queries are learned mixtures of positions, and rebuilt
from them the same way.

In attention the number of outputs is the number of queries, so ``m < n`` queries read an
``n``-character sequence into ``m`` vectors. The queries come from a trainable matrix over the
sequence axis, ``W^S [m, n]``: ``Q = W^S (X W^Q)``, ``A = softmax(Q K^T / sqrt(d)) V`` (``ReducingAttention``).
The decoder expands the ``m`` latent vectors back to one vector per position with a second such
matrix ``[n + 1, m]`` and predicts every character at once (not autoregressively), as the paper's
mechanism reads; the loss is the cross-entropy at every position, ``<eos>`` included.

Model::

    chars -> embedding + sinusoidal positions -> ``encoder_layers`` self-attention layers
          -> reducing attention (``m`` queries) -> + feed-forward -> latent vectors [m, dim]
          -> expanding attention (one query per output position) -> ``decoder_layers``
             self-attention layers -> per-position character logits

What the paper leaves open, chosen here: pre-LN layers around the reduction (the paper gives only the
attention step), sinusoidal positions, no dropout (the paper's best), and ``W^S`` initialised as a
window average (latent ``j`` starts as the mean of the queries of characters ``j / ratio`` to
``(j + 1) / ratio``; ``scale_init = "random"`` draws it instead).

``ratio`` is the latent length as a fraction of the input length. ``latents = "fixed"`` is the
paper's model: every sentence is read into ``ceil(ratio * max_len)`` vectors whatever its length
(inputs padded to ``max_len``). ``latents = "proportional"`` (the default) gives a sentence of ``n``
characters ``ceil(ratio * n)`` of them (the first rows of ``W^S``), so units per character are
``ratio`` for every sentence, comparable with NVIB's kept vectors and stride's units. Queries are
mixed only over a sentence's own characters and the decoder's self-attention reads only the output
positions its latents cover, so a sentence's encoding does not depend on the batch it is in.

Segments are read off the expanding attention (rows: the characters, columns: the latent vectors a
character is rebuilt from); the reducing attention, transposed (characters over the latents that read
them), is drawn beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from segrl.config import validate_config
from segrl.errors import ConfigError
from segrl.units.base import Encoding, UnitModel
from segrl.units.layers import CharEmbedding, EncoderLayer, FeedForward, masked_softmax

Latents = Literal["proportional", "fixed"]
ScaleInit = Literal["window", "random"]
EXPANSION_MAP = "expansion"
REDUCTION_MAP = "reduction"


@dataclass
class SeqReduceConfig:
    """Shape of a sequence-reduction autoencoder (CPU-sized defaults; the paper: dim 256,
    attention_dim 512)."""

    ratio: float = 0.25
    """Latent length as a fraction of the input length (the paper's "512to128" is 0.25)."""
    latents: Latents = "proportional"
    """proportional: ceil(ratio * n) vectors for a sentence of n characters; fixed: the paper's
    ceil(ratio * max_len) for every sentence."""
    dim: int = 128
    """Embedding and model width."""
    attention_dim: int = 256
    """Width of the reducing and expanding attention's queries, keys and values."""
    heads: int = 1
    feed_forward: int = 256
    encoder_layers: int = 1
    """Self-attention layers before the reduction (0: the reduction reads the embeddings)."""
    decoder_layers: int = 1
    """Self-attention layers after the expansion."""
    dropout: float = 0.0
    scale_init: ScaleInit = "window"
    """window: W^S starts as a window average over the positions each latent covers; random."""
    max_len: int = 256
    """Input positions (the width of W^S); the longest sentence plus one must fit."""
    fused_attention: bool = True
    """Attention through PyTorch's fused scaled-dot-product kernels where its weights are not needed
    (training); false computes the weights explicitly everywhere (slower, the same function)."""

    def check(self, prefix: str) -> None:
        if not 0 < self.ratio <= 1:
            raise ConfigError(f"{prefix}ratio must be in (0, 1], got {self.ratio}")
        if self.attention_dim % self.heads:
            raise ConfigError(
                f"{prefix}attention_dim ({self.attention_dim}) must be divisible by {prefix}heads "
                f"({self.heads})"
            )
        if min(self.encoder_layers, self.decoder_layers) < 0:
            raise ConfigError(f"{prefix}encoder_layers and {prefix}decoder_layers must be >= 0")

    @property
    def max_latents(self) -> int:
        return math.ceil(self.ratio * self.max_len)


def window_scale(rows: int, cols: int, ratio: float, reduce: bool) -> torch.Tensor:
    """``[rows, cols]``: row ``r`` averages the columns that ``r`` covers. Reducing (rows are latents,
    columns positions), latent ``j`` covers positions ``i`` with ``floor(i * ratio) == j``; expanding
    (rows are positions, columns latents), position ``i`` reads latent ``floor(i * ratio)``."""
    r = torch.arange(rows).unsqueeze(1)
    c = torch.arange(cols).unsqueeze(0)
    covered = (c * ratio).floor() == r if reduce else (r * ratio).floor().clamp(max=cols - 1) == c
    weights = covered.float()
    return weights / weights.sum(1, keepdim=True).clamp_min(1.0)


class ReducingAttention(nn.Module):
    """Attention with ``rows`` queries made by a trainable matrix over the sequence axis.

    ``forward(x [B, L, D], mask [B, L], rows)`` -> ``(out [B, rows, D], weights [B, H, rows, L])``
    with ``Q = W^S[:rows, :L] ((x W^Q) * mask)``: queries mix only the positions where ``mask`` is
    True, and masked positions are not attended to.
    """

    def __init__(
        self, max_rows: int, max_cols: int, dim: int, attention_dim: int, heads: int,
        scale: torch.Tensor,
    ):  # fmt: skip
        super().__init__()
        if scale.shape != (max_rows, max_cols):
            raise ValueError(f"scale of shape {tuple(scale.shape)}, not {(max_rows, max_cols)}")
        self.heads = heads
        self.head_dim = attention_dim // heads
        self.query = nn.Linear(dim, attention_dim)
        self.key = nn.Linear(dim, attention_dim)
        self.value = nn.Linear(dim, attention_dim)
        self.out = nn.Linear(attention_dim, dim)
        self.scale = nn.Parameter(scale.clone())

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, length, _ = x.shape
        return x.view(b, length, self.heads, self.head_dim).transpose(1, 2)  # [B, H, L, Dh]

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, rows: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        b, length, _ = x.shape
        max_rows, max_cols = self.scale.shape
        if rows > max_rows or length > max_cols:
            raise ValueError(
                f"{rows} outputs from {length} inputs exceed the model's {max_rows} x {max_cols}"
            )
        queries = self.query(x) * mask.unsqueeze(-1).to(x.dtype)  # [B, L, A]
        mixed = torch.einsum("rl,bla->bra", self.scale[:rows, :length].to(x.dtype), queries)
        q, k, v = self._split(mixed), self._split(self.key(x)), self._split(self.value(x))
        logits = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)  # [B, H, rows, L]
        weights = masked_softmax(logits, mask[:, None, None, :])
        out = (weights @ v.to(weights.dtype)).transpose(1, 2).reshape(b, rows, -1)  # [B, rows, A]
        return self.out(out), weights


class SeqReduceAutoencoder(UnitModel):
    """The sequence-reduction autoencoder (see the module docstring)."""

    config_class = SeqReduceConfig
    unit_key_maps = (EXPANSION_MAP, REDUCTION_MAP)
    train_defaults = {
        "optimizer": "adamw",
        "lr": 1e-3,
        "weight_decay": 0.01,
        "grad_clip": 1.0,
        "deletion_prob": 0.0,
        "batch_size": 16,
    }
    """The paper's AdamW at 1e-3 (decayed; here by the shared cosine schedule), batches of 16, no
    noise: the paper reconstructs its input."""

    def __init__(self, config: SeqReduceConfig, vocab_size: int):
        super().__init__(config, vocab_size)
        c = config
        validate_config(c, "arch.")
        self.embedding = CharEmbedding(vocab_size, c.dim, c.max_len, c.dropout)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(c.dim, c.heads, c.feed_forward, c.dropout, fused=c.fused_attention)
            for _ in range(c.encoder_layers)
        )
        latents, outputs = c.max_latents, c.max_len + 1

        def scale(rows: int, cols: int, reduce: bool) -> torch.Tensor:
            if c.scale_init == "window":
                return window_scale(rows, cols, c.ratio, reduce)
            return torch.randn(rows, cols) / math.sqrt(cols)

        self.reduce_norm = nn.LayerNorm(c.dim)
        self.reduce = ReducingAttention(
            latents, c.max_len, c.dim, c.attention_dim, c.heads, scale(latents, c.max_len, True)
        )
        self.latent_norm = nn.LayerNorm(c.dim)
        self.latent_feed_forward = FeedForward(c.dim, c.feed_forward, c.dropout)
        self.memory_norm = nn.LayerNorm(c.dim)
        self.expand = ReducingAttention(
            outputs, latents, c.dim, c.attention_dim, c.heads, scale(outputs, latents, False)
        )
        self.decoder_layers = nn.ModuleList(
            EncoderLayer(c.dim, c.heads, c.feed_forward, c.dropout, fused=c.fused_attention)
            for _ in range(c.decoder_layers)
        )
        self.output_norm = nn.LayerNorm(c.dim)
        self.output = nn.Linear(c.dim, vocab_size)

    def latent_counts(self, lengths: torch.Tensor) -> torch.Tensor:
        """Latent vectors per sentence ``[B]`` for sentences of ``lengths`` characters."""
        c = self.config
        if c.latents == "fixed":
            return torch.full_like(lengths, c.max_latents)
        return torch.ceil(lengths.double() * c.ratio).long().clamp(1, c.max_latents)

    def output_positions(self, counts: torch.Tensor) -> torch.Tensor:
        """Output positions ``[B]`` the latents of each sentence cover (its characters and ``<eos>``)."""
        c = self.config
        if c.latents == "fixed":
            return torch.full_like(counts, c.max_len + 1)
        return torch.ceil(counts.double() / c.ratio).long().clamp(max=c.max_len) + 1

    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> Encoding:
        x = self.embedding(ids)  # [B, L, D]
        maps: dict[str, torch.Tensor] = {}
        for i, layer in enumerate(self.encoder_layers):
            x, weights = layer(x, mask)
            if weights is not None:  # None in training
                maps[f"layer {i + 1}"] = weights.mean(dim=1)
        counts = self.latent_counts(mask.sum(1))  # [B]
        rows = int(counts.max())
        latent_mask = torch.arange(rows, device=ids.device).unsqueeze(0) < counts.unsqueeze(1)
        latents, reduction = self.reduce(self.reduce_norm(x), mask, rows)  # [B, K, D], [B,H,K,L]
        latents = latents + self.latent_feed_forward(self.latent_norm(latents))
        memory = self.memory_norm(latents) * latent_mask.unsqueeze(-1).to(latents.dtype)
        _, expansion = self.expand(memory, latent_mask, ids.shape[1])  # [B, H, L, K]
        maps[REDUCTION_MAP] = reduction.mean(dim=1).transpose(1, 2) * mask.unsqueeze(-1)
        maps[EXPANSION_MAP] = expansion.mean(dim=1)
        return Encoding(
            memory=memory,
            memory_mask=latent_mask,
            attention=maps[EXPANSION_MAP],
            kept=counts.float(),
            layer_attention=maps,
        )

    def decode(self, encoding: Encoding, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Logits of every output position at once; ``inputs`` gives only how many (the decoder is
        not autoregressive and reads no characters)."""
        counts = encoding.memory_mask.sum(1)  # [B]
        covered = self.output_positions(counts)  # [B]
        wanted = inputs.shape[1]
        rows = max(wanted, int(covered.max()))
        x, _ = self.expand(encoding.memory, encoding.memory_mask, rows)  # [B, rows, D]
        out_mask = torch.arange(rows, device=x.device).unsqueeze(0) < covered.unsqueeze(1)
        for layer in self.decoder_layers:
            x, _ = layer(x, out_mask)
        return self.output(self.output_norm(x[:, :wanted]))
