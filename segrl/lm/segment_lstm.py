"""``segment-lstm``: the study's language model, an LSTM over the sequence of segments.

Each segment enters the LSTM as an embedding composed from its characters (a character LSTM reads the
segment and its terminator, so the model knows where words end); the LSTM's state before segment k
conditions the speller (optionally mixed with a lexicon, ``segrl.lm.lexicon``) that gives the segment's
probability::

    log p(X, S) = sum_k log p(m_k, t_k | h_k)  +  log p(end | h_K),   h_k = LSTM(m_<k)

Unlike ``slm``, a segment's probability depends on the segmentation of everything before it, so there
is no exact marginal over segmentations and flip scores are computed by rescoring (``flip_scores``,
one full pass per position).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from segrl.data.vocab import CharVocab
from segrl.errors import ModelError
from segrl.lm.base import SegmentLM, SegmentScores
from segrl.lm.config import LMConfig
from segrl.lm.lexicon import Lexicon
from segrl.lm.rnn import RaggedLSTM
from segrl.lm.segmented import SegmentedBatch, space_at


class SegmentLSTM(SegmentLM):
    """LSTM over composed segment embeddings; see the module docstring.

    Args:
        vocab: the character vocabulary.
        config: sizes; ``lexicon_size`` is ignored here, ``lexicon`` gives the entries.
        lexicon: segments of the lexicon mixed with the speller (None or empty: spell everything).
    """

    name = "segment-lstm"

    def __init__(self, vocab: CharVocab, config: LMConfig, lexicon: Sequence[str] | None = None):
        super().__init__(vocab, config)
        self.embedding = nn.Embedding(len(vocab), config.char_dim, padding_idx=vocab.pad_id)
        self.composer = RaggedLSTM(self.embedding, config.speller_dim)
        self.compose_out = nn.Linear(config.speller_dim, config.embedding_dim)
        self.start = nn.Parameter(torch.zeros(config.embedding_dim))
        self.lstm = nn.LSTM(config.embedding_dim, config.hidden_dim, batch_first=True)
        self.dropout = nn.Dropout(config.dropout)
        self.speller = self.make_speller(self.embedding)
        self.lexicon = Lexicon(lexicon, config.hidden_dim) if lexicon else None

    def segment_states(self, batch: SegmentedBatch) -> tuple[torch.Tensor, torch.Tensor, tuple]:
        """The LSTM's states ``[B, K + 1, H]`` (state k has read the first k segments), segments per
        text ``[B]``, and the segments as ``(row, start, length)``."""
        rows, starts, lengths = batch.segment_spans()  # [N] each, in text order
        n_texts = len(batch)
        counts = torch.bincount(rows, minlength=n_texts)  # [B]
        most = int(counts.max()) if n_texts else 0
        inputs = self.start.expand(n_texts, most + 1, -1).clone()  # [B, K + 1, E]
        if rows.numel():
            offsets = torch.cumsum(counts, 0) - counts  # first segment of each text
            index = torch.arange(rows.shape[0], device=rows.device) - offsets[rows]
            inputs[rows, index + 1] = self._compose(batch, rows, starts, lengths)
        states, _ = self.lstm(inputs)  # [B, K + 1, H]; steps past a text's segments are unused
        return self.dropout(states), counts, (rows, starts, lengths)

    def _compose(self, batch, rows, starts, lengths) -> torch.Tensor:
        """[N, E] segment embeddings: a character LSTM over each segment and its terminator."""
        ids, space = batch.chars.ids, batch.space
        width = ids.shape[1]
        offsets = torch.arange(int(lengths.max()) + 1, device=ids.device)
        positions = (starts.unsqueeze(1) + offsets).clamp(max=width - 1)  # [N, T]
        inside = offsets.unsqueeze(0) < lengths.unsqueeze(1)
        chars = torch.where(inside, ids[rows.unsqueeze(1), positions], self.vocab.pad_id)
        space_after = space_at(space, rows, starts + lengths)
        term = torch.full_like(starts, self.vocab.eos_id)
        if self.space_id is not None:
            term = torch.where(space_after, self.space_id, term)
        chars = chars.scatter(1, lengths.unsqueeze(1), term.unsqueeze(1))
        _, _, _, last = self.composer(chars, lengths + 1)  # [N, speller_dim]
        return self.compose_out(last)

    def segment_scores(self, batch: SegmentedBatch) -> SegmentScores:
        states, counts, (rows, starts, lengths) = self.segment_states(batch)
        n_texts = len(batch)
        position_in_text = (
            torch.arange(rows.shape[0], device=rows.device)
            - (torch.cumsum(counts, 0) - counts)[rows]
        )
        cond = states[rows, position_in_text]  # [N, H], the state before each segment
        spans = self.speller.span_scores(
            cond, batch.chars.ids, batch.space, rows, starts, lengths
        )  # [N, R + 1]
        segment_lp = spans.gather(1, lengths.unsqueeze(1)).squeeze(1)  # [N]
        final = states[torch.arange(n_texts, device=rows.device), counts]  # [B, H]
        end_lp = self.speller.end_scores(final)  # [B]
        if self.lexicon is not None:
            texts = batch.texts
            strings = [
                texts[r][s : s + n]
                for r, s, n in zip(rows.tolist(), starts.tolist(), lengths.tolist(), strict=True)
            ]
            space_follows = space_at(batch.space, rows, starts + lengths)
            ids = self.lexicon.ids(strings, cond.device)
            segment_lp = self.lexicon.mix(cond, ids, segment_lp, space_follows)
            end_lp = self.lexicon.end(final, end_lp)
        per_position = torch.zeros(batch.ends.shape, device=cond.device, dtype=segment_lp.dtype)
        per_position = per_position.index_put((rows, starts + lengths - 1), segment_lp)
        texts = torch.arange(n_texts, device=cond.device)
        per_position = per_position.index_put(
            (texts, batch.chars.lengths - 1), end_lp, accumulate=True
        )
        return SegmentScores(per_position, per_position.sum(1), batch.chars.lengths + 1)

    def _prefix_condition(self, prefix: Sequence[str]) -> torch.Tensor:
        if self.lexicon is not None:
            raise ModelError(
                "with a lexicon, segment-lstm picks whole segments, not one symbol at a time"
            )
        if not "".join(prefix):
            output, _ = self.lstm(self.start.view(1, 1, -1))
            return output[0, 0]
        batch = SegmentedBatch.from_segments(
            self.vocab, [list(prefix)], device=self.device, prefixes=True
        )
        states, counts, _ = self.segment_states(batch)
        return states[0, counts[0]]
