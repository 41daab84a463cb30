"""What every segmental language model offers: ``log p(X, S)`` of texts under segmentations, per
segment and per text, and flip scores.

Conventions shared by all models (see ``segrl.lm`` for the generative story):

- scores are natural-log probabilities (nats); higher is better;
- ``SegmentScores.per_position[b, i]`` is the log-probability of the segment whose last character is
  character ``i`` (with its terminator; the last segment also carries the end of the text), and 0 at
  every other position, so a row sums to ``log p(X, S)``: the incremental reward of the decision
  "split after character i" is ``per_position[b, i]``;
- ``flip_scores[b, i] = log p(X, S) - log p(X, S with decision i flipped)`` at word-internal
  decisions (``SegmentedBatch.flippable``), 0 elsewhere: positive when the decision taken is the
  better one. +inf where the flipped segmentation has probability 0 (a segment longer than
  ``max_segment_length``);
- bits per character count the characters of the text, spaces included, plus one for the end of the
  text (as a newline ends each line of a character-level corpus).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from segrl.config import limit
from segrl.data.batching import CharBatch, encode_batch
from segrl.data.vocab import CharVocab
from segrl.errors import ModelError
from segrl.lm.config import MARKOV_ORDERS, LMConfig
from segrl.lm.segmented import SPACE, SegmentedBatch
from segrl.lm.speller import MarkovSpeller, Speller


@dataclass
class SegmentScores:
    """Log-probabilities of segmented texts, in nats."""

    per_position: torch.Tensor  # [B, L], segment log-probabilities at each segment's last character
    total: torch.Tensor  # [B], log p(X, S)
    n_chars: torch.Tensor  # [B] long, characters scored: the text's, spaces included, plus 1

    def bits_per_char(self) -> torch.Tensor:
        """[B] ``-log2 p(X, S)`` per character."""
        return -self.total / (self.n_chars * math.log(2))


class SegmentLM(nn.Module, ABC):
    """A proper language model of characters under a segmentation: ``log p(X, S)``."""

    name: ClassVar[str]

    def __init__(self, vocab: CharVocab, config: LMConfig):
        super().__init__()
        self.vocab = vocab
        self.config = config
        self.space_id = vocab.encode(SPACE)[0] if SPACE in vocab else None

    # --- to implement ------------------------------------------------------------------------------
    @abstractmethod
    def segment_scores(self, batch: SegmentedBatch) -> SegmentScores:
        """Differentiable ``log p(X, S)`` of each text, per segment and in total."""

    @abstractmethod
    def _prefix_condition(self, prefix: Sequence[str]) -> torch.Tensor:
        """The speller's conditioning vector ``[cond_dim]`` after the complete segments ``prefix``
        (a segment ending with a space was terminated by that space)."""

    # --- shared ----------------------------------------------------------------------------------
    def make_speller(self, embedding: nn.Embedding) -> Speller:
        """The speller of this model: conditioned on ``hidden_dim`` vectors, reading ``embedding``
        (``config.speller``: a character LSTM, or a Markov speller of order 0 or 1, ``unigram`` or
        ``bigram``, without condition)."""
        if self.config.speller in MARKOV_ORDERS:
            return MarkovSpeller(
                embedding,
                eos_id=self.vocab.eos_id,
                space_id=self.space_id,
                pad_id=self.vocab.pad_id,
                bos_id=self.vocab.bos_id,
                max_length=limit(self.config.max_segment_length),
                order=MARKOV_ORDERS[self.config.speller],
            )
        return Speller(
            embedding,
            cond_dim=self.config.hidden_dim,
            hidden_dim=self.config.speller_dim,
            eos_id=self.vocab.eos_id,
            space_id=self.space_id,
            pad_id=self.vocab.pad_id,
            bos_id=self.vocab.bos_id,
            max_length=limit(self.config.max_segment_length),
            dropout=self.config.dropout,
        )

    def parameter_groups(self, lr: float) -> list[dict]:
        """The optimiser's parameter groups (``LMTrainer``): every parameter at ``lr``."""
        return [{"params": list(self.parameters()), "lr": lr}]

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def encode(self, texts: Sequence[str]) -> CharBatch:
        """``texts`` as a character batch on the model's device."""
        return encode_batch(self.vocab, list(texts), device=self.device)

    def segmented(
        self,
        texts: Sequence[str] | None = None,
        decisions=None,
        segments: Sequence[Sequence[str]] | None = None,
    ) -> SegmentedBatch:
        """A ``SegmentedBatch`` on the model's device from ``texts`` and ``decisions [B, W]``, or from
        ``segments`` (one list of segments per text)."""
        if segments is not None:
            return SegmentedBatch.from_segments(self.vocab, segments, device=self.device)
        if texts is None or decisions is None:
            raise ValueError("give texts and decisions, or segments")
        return SegmentedBatch.from_decisions(self.vocab, texts, decisions, device=self.device)

    @torch.no_grad()
    def score(self, batch: SegmentedBatch) -> SegmentScores:
        """``segment_scores`` without gradients."""
        return self.segment_scores(batch.to(self.device))

    def loss(self, batch: SegmentedBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """Mean negative log-likelihood per character of the segmented texts (to minimise), and its
        value in bits per character."""
        scores = self.segment_scores(batch.to(self.device))
        chars = scores.n_chars.sum()
        loss = -scores.total.sum() / chars
        return loss, {"nll": loss.item(), "bits_per_char": loss.item() / math.log(2)}

    @torch.no_grad()
    def flip_scores(self, batch: SegmentedBatch) -> torch.Tensor:
        """``[B, L]``: ``log p(X, S) - log p(X, S with decision i flipped)`` at word-internal decisions,
        0 elsewhere. This default rescores every flipped segmentation in full."""
        return self.brute_force_flip_scores(batch)

    @torch.no_grad()
    def brute_force_flip_scores(self, batch: SegmentedBatch, chunk: int = 256) -> torch.Tensor:
        """Flip scores by rescoring each flipped segmentation with ``segment_scores`` (one full pass
        per word-internal position, ``chunk`` texts at a time)."""
        batch = batch.to(self.device)
        total = self.segment_scores(batch).total  # [B]
        rows, positions = batch.flippable.nonzero(as_tuple=True)  # [F] each
        flips = torch.zeros(batch.ends.shape, device=self.device)
        for begin in range(0, rows.shape[0], chunk):
            r, p = rows[begin : begin + chunk], positions[begin : begin + chunk]
            ends = batch.ends[r].clone()
            ends[torch.arange(r.shape[0], device=self.device), p] ^= True
            chars = CharBatch(
                batch.chars.ids[r],
                batch.chars.lengths[r],
                batch.chars.mask[r],
                [batch.texts[i] for i in r.tolist()],
            )
            variant = SegmentedBatch(chars, ends, batch.space[r])
            flips[r, p] = total[r] - self.segment_scores(variant).total
        return flips

    @torch.no_grad()
    def next_symbol_log_probs(self, prefix: Sequence[str], spelled: str) -> torch.Tensor:
        """``[V]`` log-probabilities of the next symbol of the generative process: after the complete
        segments ``prefix`` (one ending with a space was terminated by it) and the characters
        ``spelled`` of the current segment. The next symbol is a character, ``<eos>`` (end of the
        segment; with nothing spelled: end of the text) or the space (end of the segment and word)."""
        cond = self._prefix_condition(prefix).unsqueeze(0)  # [1, cond_dim]
        inputs = torch.tensor(
            [[self.vocab.bos_id, *self.vocab.encode(spelled)]], device=self.device
        )
        after_space = torch.tensor(
            [bool(prefix) and prefix[-1].endswith(SPACE)], device=self.device
        )
        lengths = torch.tensor([inputs.shape[1]], device=self.device)
        logp = self.speller.log_probs(cond, inputs, lengths, after_space)
        return logp[0, -1]

    def check_segment_lengths(self, batch: SegmentedBatch) -> None:
        """Raise ``ModelError`` when a segment is longer than the model allows."""
        longest = limit(self.config.max_segment_length)
        if longest is None:
            return
        _, _, lengths = batch.segment_spans()
        if lengths.numel() and int(lengths.max()) > longest:
            raise ModelError(
                f"a segment of {int(lengths.max())} characters is longer than the model's "
                f"max_segment_length={longest}; raise max_segment_length or split the segment"
            )
