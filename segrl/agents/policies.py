"""Segmenter policies: an encoder gives features per position, a decision head a distribution.

Position ``i`` is the boundary between characters ``i`` and ``i + 1``; a batch of width ``L`` has
``P = L - 1`` positions. The encoder (``features``) and the head are separate modules so that other
agents can reuse the encoder alone (e.g. as a stable-baselines3 features extractor).

- ``BiLSTMEncoder``: the architecture of Cao & Rei (2016) used in the study: the text is split at each
  position into a left and a right part; a forward LSTM summarises the left part (characters
  ``0..i``), a backward LSTM the right part (``i+1..n-1``), and the two states, concatenated, represent
  the position. Here the LSTMs read the whole sentence, so the parts are the sentence's.
- ``TransformerEncoder``: a 2-layer, 2-head Transformer encoder over characters (learned positions);
  a position is represented by the states of the two characters beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from segrl.errors import ConfigError

SEGMENTERS = ("bilstm", "transformer")


@dataclass
class SegmenterConfig:
    """The segmenter policy's architecture."""

    kind: str = "bilstm"
    """``bilstm`` (Cao & Rei 2016) or ``transformer`` (2 layers, 2 heads, as in the study)."""
    embedding_dim: int = 64
    hidden_dim: int = 128
    """LSTM units per direction; the Transformer's model width."""
    layers: int = 1
    """LSTM layers (the Transformer's layer count is ``transformer_layers``)."""
    transformer_layers: int = 2
    transformer_heads: int = 2
    dropout: float = 0.1

    def validate(self) -> None:
        if self.kind not in SEGMENTERS:
            raise ConfigError(
                f"unknown segmenter {self.kind!r}; choose one of: {', '.join(SEGMENTERS)}"
            )
        if self.hidden_dim % self.transformer_heads:
            raise ConfigError(
                f"segmenter.hidden_dim ({self.hidden_dim}) must be a multiple of "
                f"segmenter.transformer_heads ({self.transformer_heads})"
            )
        if min(self.embedding_dim, self.hidden_dim, self.layers, self.transformer_layers) < 1:
            raise ConfigError("segmenter sizes and layer counts must be at least 1")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"segmenter.dropout must be in [0, 1), got {self.dropout}")


class BiLSTMEncoder(nn.Module):
    """Cao & Rei's position features: ``[forward state after char i; backward state at char i+1]``.

    The two directions are separate LSTM stacks (with more than one layer, neither sees the other's
    states, so the left and right parts stay disjoint). The backward stack reads each text reversed
    within its length, so padding never enters a state; no packed sequences (slow on CPU).
    """

    def __init__(self, vocab_size: int, config: SegmenterConfig):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, config.embedding_dim, padding_idx=0)
        dropout = config.dropout if config.layers > 1 else 0.0
        self.forward_lstm = nn.LSTM(
            config.embedding_dim,
            config.hidden_dim,
            config.layers,
            batch_first=True,
            dropout=dropout,
        )
        self.backward_lstm = nn.LSTM(
            config.embedding_dim,
            config.hidden_dim,
            config.layers,
            batch_first=True,
            dropout=dropout,
        )
        self.dropout = nn.Dropout(config.dropout)
        self.hidden_dim = config.hidden_dim
        self.feature_dim = 2 * config.hidden_dim

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """``ids`` [B, L] (0-padded), ``lengths`` [B] -> features [B, L - 1, 2H]."""
        embedded = self.dropout(self.embedding(ids))  # [B, L, E]
        reverse = reverse_index(lengths, ids.shape[1])  # [B, L]
        left, _ = self.forward_lstm(embedded)  # [B, L, H]: state t covers characters 0..t
        right, _ = self.backward_lstm(gather_steps(embedded, reverse))
        right = gather_steps(right, reverse)  # [B, L, H]: state t covers characters t..n-1
        return self.dropout(torch.cat([left[:, :-1], right[:, 1:]], dim=-1))  # [B, P, 2H]


def reverse_index(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """[B, L] indices that reverse each row's first ``lengths[b]`` steps and keep the padding in
    place (the permutation is its own inverse)."""
    steps = torch.arange(width, device=lengths.device).unsqueeze(0)  # [1, L]
    last = (lengths - 1).unsqueeze(1)  # [B, 1]
    return torch.where(steps <= last, last - steps, steps)


def gather_steps(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``values`` [B, L, D] reordered along L by ``index`` [B, L]."""
    return values.gather(1, index.unsqueeze(-1).expand(-1, -1, values.shape[-1]))


class TransformerEncoder(nn.Module):
    """Pre-norm Transformer encoder over characters; a position's features are the states of the
    characters on its two sides."""

    def __init__(self, vocab_size: int, config: SegmenterConfig, max_len: int):
        super().__init__()
        width = config.hidden_dim
        self.embedding = nn.Embedding(vocab_size, width, padding_idx=0)
        self.position = nn.Embedding(max_len, width)
        layer = nn.TransformerEncoderLayer(
            width,
            config.transformer_heads,
            dim_feedforward=2 * width,
            dropout=config.dropout,
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(
            layer, config.transformer_layers, enable_nested_tensor=False
        )
        self.norm = nn.LayerNorm(width)
        self.max_len = max_len
        self.feature_dim = 2 * width

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """``ids`` [B, L] (0-padded), ``lengths`` [B] -> features [B, L - 1, 2D]."""
        width = ids.shape[1]
        if width > self.max_len:
            raise ValueError(f"texts of {width} characters; this encoder takes {self.max_len}")
        steps = torch.arange(width, device=ids.device)
        padding = steps.unsqueeze(0) >= lengths.unsqueeze(1)  # [B, L] True at padding
        x = self.embedding(ids) + self.position(steps).unsqueeze(0)  # [B, L, D]
        states = self.norm(self.encoder(x, src_key_padding_mask=padding))  # [B, L, D]
        return torch.cat([states[:, :-1], states[:, 1:]], dim=-1)  # [B, P, 2D]


class DecisionHead(nn.Module):
    """Per-position features -> logits over the actions (a one-hidden-layer MLP)."""

    def __init__(self, feature_dim: int, hidden_dim: int, n_actions: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(feature_dim, hidden_dim), nn.Tanh(), nn.Linear(hidden_dim, n_actions)
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features)  # [B, P, A]


class SegmenterPolicy(nn.Module):
    """An encoder and a decision head: one categorical distribution per position,
    ``p(S | X) = prod_i p(s_i | X)``."""

    def __init__(
        self, vocab_size: int, n_actions: int, max_len: int, config: SegmenterConfig | None = None
    ):
        super().__init__()
        config = config or SegmenterConfig()
        config.validate()
        self.config = config
        self.n_actions = n_actions
        self.max_len = max_len
        if config.kind == "bilstm":
            self.encoder: nn.Module = BiLSTMEncoder(vocab_size, config)
        else:
            self.encoder = TransformerEncoder(vocab_size, config, max_len)
        self.head = DecisionHead(self.encoder.feature_dim, config.hidden_dim, n_actions)

    @property
    def feature_dim(self) -> int:
        return self.encoder.feature_dim

    def features(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """[B, L] ids, [B] lengths -> [B, P, F] per-position features."""
        return self.encoder(ids, lengths)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """[B, L] ids, [B] lengths -> [B, P, A] logits."""
        return self.head(self.features(ids, lengths))


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` [B, P, ...] over the positions where ``mask`` [B, P] is True -> [B, ...]."""
    weights = mask.to(values.dtype)
    while weights.dim() < values.dim():
        weights = weights.unsqueeze(-1)
    return (values * weights).sum(1) / weights.sum(1).clamp(min=1.0)
