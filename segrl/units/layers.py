"""Transformer building blocks shared by the character autoencoders of ``segrl.units``.

Pre-LayerNorm layers (``x + f(LN(x))``) with attention that returns its weights, so that segments can
be read off any layer's map. Attention is written out (not ``nn.MultiheadAttention``) because the
unit models need its pieces: a per-key bias (denoising attention adds ``log pi - |z|^2 / 2 sqrt(d)``),
keys and values that are not the queries' inputs, and the projection weights themselves (the NVIB
test-time function maps queries into the space of the keys' inputs).

Two options follow the reference NVIB code (which builds on ``torch.nn.MultiheadAttention``):
``init="xavier"`` initialises the query/key/value projections as that module does (Xavier-uniform over
the packed ``[3 D, D]`` weight, zero biases, zero output bias; ``"linear"``, the default, keeps
``nn.Linear``'s), and ``dropout`` drops attention weights in training (after the softmax).

Masks are boolean and True where a position is real (a character, a kept vector). A query whose keys
are all masked gets weights of zero and an output of zero (plus the value bias): a defined output,
never NaN.

Where the weights are not wanted (training: ``need_weights=False``), ``fused`` attention computes the
same function with ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels on a GPU; the
masks and the per-key bias as an additive mask) and never builds the ``[B, H, L, S]`` weights in
memory; ``fused=False`` always computes them (the reference, and what evaluation uses). Heads wider
than ``FUSED_MAX_HEAD_DIM`` are computed explicitly all the same: the fused kernels are made for
narrow heads, and at the NVIB paper's one 512-wide head the memory-efficient kernel's backward took
2.4 times the GPU time of the explicit products (bench/units_throughput.py on an H200). Causal
attention assumes right-padded keys (as ``segrl.data.batching`` pads): the causal mask then hides
every padding key from every real query, and the key mask is not needed.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import nn

FUSED_MAX_HEAD_DIM = 256
"""The widest head that fused attention computes (flash attention's limit)."""
AttentionInit = Literal["linear", "xavier"]
"""Initialisations of ``Attention``'s projections: nn.Linear's defaults, or MultiheadAttention's."""
ATTENTION_INITS: tuple[str, ...] = get_args(AttentionInit)


def sinusoidal_positions(length: int, dim: int, device: torch.device | None = None) -> torch.Tensor:
    """The sinusoidal position encoding of Vaswani et al. (2017): ``[length, dim]``."""
    position = torch.arange(length, dtype=torch.float32, device=device).unsqueeze(1)  # [L, 1]
    rates = torch.exp(
        torch.arange(0, dim, 2, dtype=torch.float32, device=device) * (-math.log(10000.0) / dim)
    )  # [ceil(dim/2)]
    table = torch.zeros(length, dim, device=device)
    table[:, 0::2] = torch.sin(position * rates)
    table[:, 1::2] = torch.cos(position * rates[: dim // 2])
    return table


def masked_softmax(logits: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
    """Softmax over the last axis, with masked keys (``key_mask`` False) at weight exactly zero.

    ``key_mask`` broadcasts against ``logits`` (e.g. ``[B, 1, 1, S]`` for ``[B, H, L, S]``). Rows with
    no key left get all-zero weights. Masked logits are filled with the dtype's most negative finite
    value rather than ``-inf``, so gradients stay finite even for fully masked rows.
    """
    if key_mask is None:
        return torch.softmax(logits, dim=-1)
    filled = logits.masked_fill(~key_mask, torch.finfo(logits.dtype).min)
    weights = torch.softmax(filled, dim=-1)
    return weights * key_mask.to(weights.dtype)


class Attention(nn.Module):
    """Multi-head scaled dot-product attention that returns its weights.

    ``forward(queries [B, L, D], keys [B, S, D], key_mask [B, S] | None, key_bias [B, S] | None,
    causal)`` -> ``(output [B, L, D], weights [B, H, L, S])``. ``keys`` are also the values' inputs.
    ``key_bias`` is added to every head's logits for that key (shared by all queries and heads).
    ``dropout`` drops attention weights in training; the returned weights are those before dropout.
    ``init``: ``"linear"`` (nn.Linear's defaults) or ``"xavier"`` (``nn.MultiheadAttention``'s).
    """

    def __init__(
        self,
        dim: int,
        heads: int = 1,
        dropout: float = 0.0,
        init: str = "linear",
        fused: bool = True,
    ):
        super().__init__()
        if dim % heads:
            raise ValueError(f"model dimension {dim} is not divisible by {heads} heads")
        if init not in ATTENTION_INITS:
            raise ValueError(f"unknown attention init {init!r}: use one of {ATTENTION_INITS}")
        self.dim = dim
        self.heads = heads
        self.head_dim = dim // heads
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)
        self.weight_dropout = nn.Dropout(dropout)
        self.fused = fused and self.head_dim <= FUSED_MAX_HEAD_DIM
        if init == "xavier":
            self.reset_like_multihead_attention()

    @torch.no_grad()
    def reset_like_multihead_attention(self) -> None:
        """``nn.MultiheadAttention``'s initialisation: Xavier-uniform over the packed query/key/value
        weight ``[3 D, D]`` (bound ``sqrt(6 / (4 D))``), zero query/key/value and output biases; the
        output weight keeps nn.Linear's default."""
        bound = math.sqrt(6.0 / (self.dim + 3 * self.dim))
        for projection in (self.query, self.key, self.value):
            projection.weight.uniform_(-bound, bound)
            projection.bias.zero_()
        self.out.bias.zero_()

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, L, D]`` -> ``[B, H, L, D/H]``."""
        b, length, _ = x.shape
        return x.view(b, length, self.heads, self.head_dim).transpose(1, 2)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, H, L, D/H]`` -> ``[B, L, D]``."""
        b, _, length, _ = x.shape
        return x.transpose(1, 2).reshape(b, length, self.dim)

    def forward(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        key_mask: torch.Tensor | None = None,
        key_bias: torch.Tensor | None = None,
        causal: bool = False,
        need_weights: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        q = self.split_heads(self.query(queries))  # [B, H, L, Dh]
        k = self.split_heads(self.key(keys))  # [B, H, S, Dh]
        v = self.split_heads(self.value(keys))  # [B, H, S, Dh]
        if self.fused and not need_weights:
            return self.out(
                self.merge_heads(self.fused_mix(q, k, v, key_mask, key_bias, causal))
            ), None
        logits = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)  # [B, H, L, S]
        if key_bias is not None:
            logits = logits + key_bias[:, None, None, :].to(logits.dtype)
        mask = None if key_mask is None else key_mask[:, None, None, :]  # [B, 1, 1, S]
        if causal:
            length, size = logits.shape[-2:]
            allowed = torch.ones(length, size, dtype=torch.bool, device=logits.device).tril()
            mask = allowed if mask is None else mask & allowed
        weights = masked_softmax(logits, mask)  # [B, H, L, S]
        mixed = self.weight_dropout(weights) @ v.to(weights.dtype)  # [B, H, L, Dh]
        output = self.out(self.merge_heads(mixed))  # [B, L, D]
        return output, weights

    def fused_mix(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        key_mask: torch.Tensor | None,
        key_bias: torch.Tensor | None,
        causal: bool,
    ) -> torch.Tensor:
        """The mixed values ``[B, H, L, Dh]`` of ``forward`` through scaled-dot-product attention,
        without the weights (see the module docstring for causal attention's key mask)."""
        dropout = self.weight_dropout.p if self.training else 0.0
        v = v.to(q.dtype)
        if causal:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)
        if key_mask is None and key_bias is None:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout)
        bias = q.new_zeros(()) if key_bias is None else key_bias.to(q.dtype)
        if key_mask is None:
            return F.scaled_dot_product_attention(q, k, v, bias[:, None, None, :], dropout)
        lowest = torch.finfo(q.dtype).min  # finite: a row with no key left stays finite
        additive = torch.where(key_mask, bias, lowest)[:, None, None, :]  # [B, 1, 1, S]
        mixed = F.scaled_dot_product_attention(q, k, v, additive, dropout)
        return mixed * key_mask.any(-1)[:, None, None, None].to(mixed.dtype)  # no key: zero


class FeedForward(nn.Module):
    """Position-wise two-layer ReLU network with dropout."""

    def __init__(self, dim: int, hidden: int, dropout: float = 0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class EncoderLayer(nn.Module):
    """Pre-LN self-attention layer: ``x + Attn(LN(x))``, then ``x + FF(LN(x))``.

    ``forward(x [B, L, D], mask [B, L])`` -> ``(x [B, L, D], weights [B, H, L, L])``; the weights
    are None in training with ``fused`` attention. ``attention_dropout``, ``attention_init`` and
    ``fused`` are ``Attention``'s ``dropout``, ``init`` and ``fused``.
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        hidden: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        attention_init: str = "linear",
        fused: bool = True,
    ):
        super().__init__()
        self.attention_norm = nn.LayerNorm(dim)
        self.attention = Attention(dim, heads, attention_dropout, attention_init, fused)
        self.feed_forward_norm = nn.LayerNorm(dim)
        self.feed_forward = FeedForward(dim, hidden, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        h = self.attention_norm(x)
        attended, weights = self.attention(h, h, key_mask=mask, need_weights=not self.training)
        x = x + self.dropout(attended)
        x = x + self.dropout(self.feed_forward(self.feed_forward_norm(x)))
        return x, weights


class DecoderLayer(nn.Module):
    """Pre-LN decoder layer: causal self-attention, cross-attention over a memory, feed-forward."""

    def __init__(
        self,
        dim: int,
        heads: int,
        hidden: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        attention_init: str = "linear",
        fused: bool = True,
    ):
        super().__init__()
        self.self_norm = nn.LayerNorm(dim)
        self.self_attention = Attention(dim, heads, attention_dropout, attention_init, fused)
        self.cross_norm = nn.LayerNorm(dim)
        self.cross_attention = Attention(dim, heads, attention_dropout, attention_init, fused)
        self.feed_forward_norm = nn.LayerNorm(dim)
        self.feed_forward = FeedForward(dim, hidden, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,  # [B, T, D]
        mask: torch.Tensor,  # [B, T] True at real positions
        memory: torch.Tensor,  # [B, K, D]
        memory_mask: torch.Tensor,  # [B, K] True at vectors that may be read
        need_weights: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        h = self.self_norm(x)
        attended, _ = self.self_attention(h, h, key_mask=mask, causal=True, need_weights=False)
        x = x + self.dropout(attended)
        attended, cross_weights = self.cross_attention(
            self.cross_norm(x), memory, key_mask=memory_mask, need_weights=need_weights
        )
        x = x + self.dropout(attended)
        x = x + self.dropout(self.feed_forward(self.feed_forward_norm(x)))
        return x, cross_weights


class CharEmbedding(nn.Module):
    """Character embeddings scaled by ``sqrt(dim)`` plus sinusoidal positions, then dropout.

    Embeddings start with standard deviation ``dim ** -0.5``, so that after scaling they are of the
    same size as the position signal (with PyTorch's default N(0, 1) they would drown it).
    """

    def __init__(self, vocab_size: int, dim: int, max_len: int, dropout: float = 0.1):
        super().__init__()
        self.dim = dim
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=0)
        with torch.no_grad():
            nn.init.normal_(self.embed.weight, std=dim**-0.5)
            self.embed.weight[0].zero_()
        self.register_buffer("positions", sinusoidal_positions(max_len, dim), persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        length = ids.shape[1]
        if length > self.positions.shape[0]:
            raise ValueError(
                f"a sequence of {length} positions is longer than the model's max_len "
                f"{self.positions.shape[0]}"
            )
        x = self.embed(ids) * math.sqrt(self.dim) + self.positions[:length]  # [B, L, D]
        return self.dropout(x)


class CharDecoder(nn.Module):
    """Autoregressive character decoder reading a set of vectors through cross-attention.

    ``forward(inputs [B, T], mask [B, T], memory [B, K, memory_dim], memory_mask [B, K])`` ->
    ``logits [B, T, vocab]``. A memory of another width than the decoder is projected first.
    ``return_attention=True`` also gives the cross-attention maps (segments of models whose units are
    the memory vectors are read off them).
    """

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        heads: int,
        hidden: int,
        layers: int,
        max_len: int,
        dropout: float = 0.1,
        memory_dim: int | None = None,
        attention_dropout: float = 0.0,
        attention_init: str = "linear",
        fused: bool = True,
    ):
        super().__init__()
        self.embedding = CharEmbedding(vocab_size, dim, max_len, dropout)
        self.memory_projection = (
            nn.Linear(memory_dim, dim) if memory_dim not in (None, dim) else nn.Identity()
        )
        self.layers = nn.ModuleList(
            DecoderLayer(dim, heads, hidden, dropout, attention_dropout, attention_init, fused)
            for _ in range(layers)
        )
        self.norm = nn.LayerNorm(dim)
        self.output = nn.Linear(dim, vocab_size)

    def forward(
        self,
        inputs: torch.Tensor,
        mask: torch.Tensor,
        memory: torch.Tensor,
        memory_mask: torch.Tensor,
        return_attention: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits; with ``return_attention`` also each layer's cross-attention ``[B, H, T, K]``."""
        x = self.embedding(inputs)  # [B, T, D]
        memory = self.memory_projection(memory)  # [B, K, D]
        cross = []
        for layer in self.layers:
            x, weights = layer(x, mask, memory, memory_mask, need_weights=return_attention)
            cross.append(weights)
        logits = self.output(self.norm(x))  # [B, T, V]
        return (logits, cross) if return_attention else logits


def token_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Mean cross-entropy (nats) over the positions where ``mask`` is True; computed in fp32."""
    losses = F.cross_entropy(logits.float().transpose(1, 2), targets, reduction="none")  # [B, T]
    weights = mask.to(losses.dtype)
    return (losses * weights).sum() / weights.sum().clamp_min(1.0)
