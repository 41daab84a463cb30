"""The plain Transformer character autoencoder: the baseline every unit model is compared with.

Encoder: character embeddings + sinusoidal positions, ``encoder_layers`` pre-LN self-attention layers,
a final LayerNorm; every character's vector is kept. Decoder: ``decoder_layers`` autoregressive layers
with cross-attention over the encoder's vectors. Segments are read off the last encoder layer's
self-attention (averaged over heads). The defaults are a CPU-sized model; the shape of the NVIB
paper (6 encoder layers, 2 decoder layers, one head, 512 wide) is ``configs/nvib_paper.toml``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from segrl.errors import ConfigError
from segrl.units.base import Encoding, UnitModel
from segrl.units.layers import AttentionInit, CharDecoder, CharEmbedding, EncoderLayer


@dataclass
class TransformerConfig:
    """Shape of a Transformer character autoencoder."""

    dim: int = 128
    """Embedding and model width."""
    feed_forward: int = 128
    """Hidden width of the feed-forward sublayers (the NVIB paper uses the model width, 512)."""
    heads: int = 1
    encoder_layers: int = 6
    decoder_layers: int = 2
    dropout: float = 0.1
    max_len: int = 256
    """Longest sequence the position table covers (sentences are at most ``data.max_len`` chars;
    the decoder reads one more, ``<bos>``, and noise may insert characters)."""
    attention_init: AttentionInit = "linear"
    """Query/key/value projections of every attention: ``linear`` (nn.Linear's defaults) or
    ``xavier`` (nn.MultiheadAttention's, as the reference NVIB code has: Xavier weights, zero
    biases)."""
    attention_dropout: float = 0.0
    """Dropout on attention weights in training (the reference NVIB code's: 0.1)."""
    fused_attention: bool = True
    """Attention through PyTorch's fused scaled-dot-product kernels where its weights are not needed
    (training); false computes the weights explicitly everywhere (slower, the same function)."""

    def check(self, prefix: str) -> None:
        if not 0.0 <= self.attention_dropout < 1.0:
            raise ConfigError(
                f"{prefix}attention_dropout must be in [0, 1), got {self.attention_dropout}"
            )


class TransformerAutoencoder(UnitModel):
    """A plain Transformer encoder-decoder that reconstructs characters; units = characters."""

    config_class = TransformerConfig

    def __init__(self, config: TransformerConfig, vocab_size: int):
        super().__init__(config, vocab_size)
        c = config
        self.embedding = CharEmbedding(vocab_size, c.dim, c.max_len, c.dropout)
        self.encoder_layers = nn.ModuleList(
            self.make_encoder_layer(i) for i in range(c.encoder_layers)
        )
        self.encoder_norm = nn.LayerNorm(c.dim)
        self.decoder = CharDecoder(
            vocab_size,
            c.dim,
            c.heads,
            c.feed_forward,
            c.decoder_layers,
            c.max_len + 1,
            c.dropout,
            attention_dropout=c.attention_dropout,
            attention_init=c.attention_init,
            fused=c.fused_attention,
        )

    def make_encoder_layer(self, index: int) -> nn.Module:
        """Encoder layer ``index`` (0-based); subclasses replace some layers."""
        c = self.config
        return EncoderLayer(
            c.dim, c.heads, c.feed_forward, c.dropout, c.attention_dropout, c.attention_init,
            c.fused_attention,
        )  # fmt: skip

    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> Encoding:
        x = self.embedding(ids)  # [B, L, D]
        maps: dict[str, torch.Tensor] = {}
        for i, layer in enumerate(self.encoder_layers):
            x, weights = layer(x, mask)
            if weights is not None:  # None in training
                maps[f"layer {i + 1}"] = weights.mean(dim=1)  # [B, L, L] averaged over heads
        memory = self.encoder_norm(x)
        return Encoding(
            memory=memory,
            memory_mask=mask,
            attention=maps.get(f"layer {len(self.encoder_layers)}"),
            kept=mask.sum(dim=1).float(),
            layer_attention=maps,
        )

    def decode(self, encoding: Encoding, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.decoder(inputs, mask, encoding.memory, encoding.memory_mask)
