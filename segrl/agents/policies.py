"""Segmenter policies: an encoder gives features per position, a decision head a distribution.

Position ``i`` is the boundary between characters ``i`` and ``i + 1``; a batch of width ``L`` has
``P = L - 1`` positions. The encoder (``features``) and the head are separate modules so that other
agents can reuse the encoder alone (e.g. as a stable-baselines3 features extractor).

- ``BiLSTMEncoder``: the architecture of Cao & Rei (2016) used in the study: at each position the
  word is split into a left and a right part; a forward LSTM summarises the left part (characters up
  to ``i``), a backward LSTM the right part (from ``i + 1``), and the two states, concatenated,
  represent the position.
- ``TransformerEncoder``: a 2-layer, 2-head Transformer encoder over characters (learned positions);
  a position is represented by the states of the two characters beside it.

Context (``PolicyConfig.context``): with ``word`` (the default) and known word boundaries, each
encoder reads every word on its own, as Cao & Rei's model reads words: a decision inside a word
depends on that word alone, and the recurrence runs over words (~15 steps) instead of sentences
(~128), several times faster on CPU. With ``text``, or when spaces are hidden (the text is then one
"word"), the encoder reads the whole text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from segrl.config import validate_config
from segrl.errors import ConfigError

PolicyKind = Literal["bilstm", "transformer"]
PolicyContext = Literal["word", "text"]
BUCKETS = 4
"""Length groups a batch is encoded in (see ``bucketed_char_states``)."""


@dataclass
class PolicyConfig:
    """The segmenter policy's architecture (``TrainConfig.policy``: ``--set policy.kind=...``)."""

    kind: PolicyKind = "bilstm"
    """``bilstm`` (Cao & Rei 2016) or ``transformer`` (2 layers, 2 heads, as in the study)."""
    embedding_dim: int = 64
    """Character embeddings of the BiLSTM (the Transformer's are ``hidden_dim`` wide)."""
    hidden_dim: int = 64
    """LSTM units per direction; the Transformer's model width."""
    layers: int = 1
    """LSTM layers (the Transformer's layer count is ``transformer_layers``)."""
    transformer_layers: int = 2
    transformer_heads: int = 2
    dropout: float = 0.1
    context: PolicyContext = "word"
    """``word``: each word is encoded on its own (with known word boundaries; each distinct word of a
    batch once, its dropout shared by its occurrences); ``text``: the whole text is the context of
    every decision."""

    def check(self, prefix: str) -> None:
        """Sizes (``segrl.config.validate_config`` checks the choices and calls this)."""
        if self.hidden_dim % self.transformer_heads:
            raise ConfigError(
                f"{prefix}hidden_dim ({self.hidden_dim}) must be a multiple of "
                f"{prefix}transformer_heads ({self.transformer_heads})"
            )
        if min(self.embedding_dim, self.hidden_dim, self.layers, self.transformer_layers) < 1:
            raise ConfigError(f"{prefix.rstrip('.')} sizes and layer counts must be at least 1")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"{prefix}dropout must be in [0, 1), got {self.dropout}")


@dataclass
class WordLayout:
    """Where the words of a padded batch are: what ``word_layout`` gives and ``merge_words`` undoes."""

    ids: torch.Tensor  # [W, Lw] character ids of each word, 0-padded
    lengths: torch.Tensor  # [W] characters per word
    source: torch.Tensor  # [W, Lw] flat index (into B * L) of each word character
    valid: torch.Tensor  # [W, Lw] bool, True at word characters
    shape: tuple[int, int]  # (B, L)


def word_layout(ids: torch.Tensor, lengths: torch.Tensor, separator_id: int) -> WordLayout:
    """The words (maximal runs of characters other than ``separator_id``) of ``ids`` [B, L] as a
    batch of their own."""
    batch, width = ids.shape
    steps = torch.arange(width, device=ids.device)
    in_word = (steps.unsqueeze(0) < lengths.unsqueeze(1)) & (ids != separator_id)  # [B, L]
    before = torch.zeros_like(in_word)
    before[:, 1:] = in_word[:, :-1]
    starts = (in_word & ~before).flatten()  # [B * L] True at a word's first character
    flat = in_word.flatten()
    word = torch.cumsum(starts.long(), 0) - 1  # [B * L] word of each character
    start_at = torch.nonzero(starts).squeeze(1)  # [W]
    n_words = len(start_at)
    if n_words == 0:  # no word at all: one empty "word" keeps shapes valid
        empty = torch.zeros(1, 1, dtype=torch.long, device=ids.device)
        return WordLayout(empty, empty[:, 0] + 1, empty, empty.bool(), (batch, width))
    chars = torch.nonzero(flat).squeeze(1)  # [C] flat index of every word character
    offset = chars - start_at[word[chars]]  # [C] position in its word
    word_lengths = torch.bincount(word[chars], minlength=n_words)  # [W]
    longest = max(int(word_lengths.max()), 2)
    source = torch.zeros(n_words, longest, dtype=torch.long, device=ids.device)
    valid = torch.zeros(n_words, longest, dtype=torch.bool, device=ids.device)
    source[word[chars], offset] = chars
    valid[word[chars], offset] = True
    word_ids = torch.where(valid, ids.flatten()[source], torch.zeros_like(source))
    return WordLayout(word_ids, word_lengths, source, valid, (batch, width))


def merge_words(states: torch.Tensor, layout: WordLayout) -> torch.Tensor:
    """Per-character states of the words [W, Lw, D] back in place: [B, L, D], zero at separators
    and padding."""
    batch, width = layout.shape
    out = states.new_zeros(batch * width, states.shape[-1])
    out[layout.source[layout.valid]] = states[layout.valid]
    return out.view(batch, width, -1)


class BiLSTMEncoder(nn.Module):
    """Cao & Rei's position features: ``[forward state after char i; backward state at char i+1]``.

    The two directions are separate LSTM stacks (with more than one layer, neither sees the other's
    states, so the left and right parts stay disjoint). The backward stack reads each text reversed
    within its length, so padding never enters a state; no packed sequences (slow on CPU).
    """

    def __init__(self, vocab_size: int, config: PolicyConfig):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, config.embedding_dim, padding_idx=0)
        dropout = config.dropout if config.layers > 1 else 0.0
        sizes = (config.embedding_dim, config.hidden_dim, config.layers)
        self.forward_lstm = nn.LSTM(*sizes, batch_first=True, dropout=dropout)
        self.backward_lstm = nn.LSTM(*sizes, batch_first=True, dropout=dropout)
        self.dropout = nn.Dropout(config.dropout)
        self.hidden_dim = config.hidden_dim
        self.feature_dim = 2 * config.hidden_dim

    def char_states(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """``ids`` [B, L] (0-padded), ``lengths`` [B] -> [B, L, 2H]: at character ``t`` the forward
        state over characters ``0..t`` and the backward state over ``t..n-1``."""
        embedded = self.dropout(self.embedding(ids))  # [B, L, E]
        reverse = reverse_index(lengths, ids.shape[1])  # [B, L]
        left, _ = self.forward_lstm(embedded)  # [B, L, H]
        right, _ = self.backward_lstm(gather_steps(embedded, reverse))
        return torch.cat([left, gather_steps(right, reverse)], dim=-1)  # [B, L, 2H]

    def position_features(self, states: torch.Tensor) -> torch.Tensor:
        """[B, L, 2H] character states -> [B, L - 1, 2H]: left part up to i, right part from i+1."""
        hidden = self.hidden_dim
        return self.dropout(torch.cat([states[:, :-1, :hidden], states[:, 1:, hidden:]], dim=-1))


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

    def __init__(self, vocab_size: int, config: PolicyConfig, max_len: int):
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

    def char_states(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """``ids`` [B, L] (0-padded), ``lengths`` [B] -> [B, L, D] character states."""
        width = ids.shape[1]
        if width > self.max_len:
            raise ValueError(f"texts of {width} characters; this encoder takes {self.max_len}")
        steps = torch.arange(width, device=ids.device)
        padding = steps.unsqueeze(0) >= lengths.unsqueeze(1)  # [B, L] True at padding
        x = self.embedding(ids) + self.position(steps).unsqueeze(0)  # [B, L, D]
        return self.norm(self.encoder(x, src_key_padding_mask=padding))  # [B, L, D]

    def position_features(self, states: torch.Tensor) -> torch.Tensor:
        """[B, L, D] -> [B, L - 1, 2D]: the states of the characters before and after i."""
        return torch.cat([states[:, :-1], states[:, 1:]], dim=-1)


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
    ``p(S | X) = prod_i p(s_i | X)``.

    ``separator_id``: the vocabulary id of the space, for ``context="word"`` (None: no words, the
    whole text is the context).

    ``reads_teacher``: the policy reads its teacher's log-odds of a split ``t`` [B, P] (the
    environments' ``teacher`` observation, ``EnvConfig.teacher_features``) and adds ``w * t`` to its
    own split-against-no-split logit, ``w`` a learnt weight that starts at 1: it starts as its
    teacher's posterior (up to the head's small initial logits) and learns from its own reading of
    the characters where to depart from it. Split/no-split actions only.
    """

    def __init__(
        self,
        vocab_size: int,
        n_actions: int,
        max_len: int,
        config: PolicyConfig | None = None,
        separator_id: int | None = None,
        reads_teacher: bool = False,
    ):
        super().__init__()
        config = config or PolicyConfig()
        validate_config(config, "policy.")
        if reads_teacher and n_actions != 2:
            raise ConfigError("a policy that reads its teacher takes split/no-split actions only")
        self.config = config
        self.n_actions = n_actions
        self.max_len = max_len
        self.teacher_weight = nn.Parameter(torch.ones(())) if reads_teacher else None
        self.separator_id = separator_id if config.context == "word" else None
        if config.kind == "bilstm":
            self.encoder: nn.Module = BiLSTMEncoder(vocab_size, config)
        else:
            self.encoder = TransformerEncoder(vocab_size, config, max_len)
        self.head = DecisionHead(self.encoder.feature_dim, config.hidden_dim, n_actions)

    @property
    def reads_teacher(self) -> bool:
        return self.teacher_weight is not None

    @property
    def feature_dim(self) -> int:
        return self.encoder.feature_dim

    def features(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """[B, L] ids, [B] lengths -> [B, P, F] per-position features (with word context, zero
        beside separators, where nothing is decided)."""
        if self.separator_id is None:
            states = bucketed_char_states(self.encoder, ids, lengths)  # [B, L, D]
        else:
            words = word_layout(ids, lengths, self.separator_id)
            # each distinct word once: a word's states depend on the word alone
            distinct, which = torch.unique(words.ids, dim=0, return_inverse=True)
            distinct_lengths = words.lengths.new_zeros(len(distinct)).scatter(
                0, which, words.lengths
            )
            states = bucketed_char_states(self.encoder, distinct, distinct_lengths)
            states = merge_words(states[which], words)
        return self.encoder.position_features(states)

    def logits(self, features: torch.Tensor, teacher: torch.Tensor | None = None) -> torch.Tensor:
        """[B, P, F] features (and, for a policy that reads its teacher, ``teacher`` [B, P] log-odds
        of a split) -> [B, P, A] logits."""
        logits = self.head(features)
        if self.teacher_weight is None:
            return logits
        if teacher is None:
            raise ValueError("this policy reads its teacher: give the teacher's log-odds")
        half = (self.teacher_weight * teacher[:, : logits.shape[1]] / 2).unsqueeze(-1)  # [B, P, 1]
        return logits + torch.cat([-half, half], dim=-1)

    def forward(
        self, ids: torch.Tensor, lengths: torch.Tensor, teacher: torch.Tensor | None = None
    ) -> torch.Tensor:
        """[B, L] ids, [B] lengths (, [B, P] teacher log-odds) -> [B, P, A] logits."""
        return self.logits(self.features(ids, lengths), teacher)


def bucketed_char_states(
    encoder: nn.Module, ids: torch.Tensor, lengths: torch.Tensor, buckets: int = BUCKETS
) -> torch.Tensor:
    """``encoder.char_states`` of ``ids`` [B, L] computed in ``buckets`` groups of similar length,
    each cut to its longest text: the same result with far less padding to run through (words of a
    batch range from 1 to ~20 characters). -> [B, L, D]."""
    if len(ids) < 2 * buckets:
        return encoder.char_states(ids, lengths)
    order = torch.argsort(lengths)
    parts = []
    for rows in order.tensor_split(buckets):
        width = max(int(lengths[rows].max()), 2)
        parts.append((rows, encoder.char_states(ids[rows, :width], lengths[rows])))
    out = parts[0][1].new_zeros(ids.shape[0], ids.shape[1], parts[0][1].shape[-1])
    for rows, states in parts:
        out[rows, : states.shape[1]] = states
    return out


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` [B, P, ...] over the positions where ``mask`` [B, P] is True -> [B, ...]."""
    weights = mask.to(values.dtype)
    while weights.dim() < values.dim():
        weights = weights.unsqueeze(-1)
    return (values * weights).sum(1) / weights.sum(1).clamp(min=1.0)
