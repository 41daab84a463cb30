"""``slm``: a segmental language model whose segments are conditioned on the character context.

An LSTM reads the text character by character; before each segment, its state ``h_a`` after the
characters ``x_<a`` (the context, whatever the segmentation) conditions the speller, which spells the
segment and its terminator (``segrl.lm.speller``)::

    log p(X, S) = sum over segments (a, l) of log p(x[a : a + l], terminator | h_a)  +  log p(end | h_n)

Because a segment's score depends only on its own span and the fixed characters before it:

- the exact marginal ``log p(X) = log sum_S p(X, S)`` comes from the forward algorithm over segment
  ends, with the exact posterior probability of a boundary at every position and Viterbi decoding
  (``segrl.lm.lattice``);
- flipping one decision changes one or two segments only, so the flip scores of every position come
  from one speller pass per position over the few spans involved (``flip_scores``), not from one
  full rescoring per position.

This is in the spirit of the segmental neural language models of Kawakami, Dyer and Blunsom (2019);
their lexical memory is here a lexicon of frequent substrings mixed with the speller
(``lexicon_size``, without context only: ``segrl.lm.lexicon``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from segrl.config import limit
from segrl.data.batching import CharBatch
from segrl.data.vocab import CharVocab
from segrl.errors import ConfigError
from segrl.lm import lattice, morphotactics
from segrl.lm.base import SegmentLM, SegmentScores
from segrl.lm.config import LMConfig
from segrl.lm.lattice import NEG_INF
from segrl.lm.lexicon import (
    FREE_CLASS_INIT_SCALE,
    CategoryDirectLexicon,
    DirectLexicon,
    EntryPairs,
    Lexicon,
)
from segrl.lm.segmented import SegmentedBatch, segment_bounds, space_at, space_mask

DECODING_MAX_SEGMENT_LENGTH = 64
"""The most characters per segment that a segmenter considers (``LMSegmenter``, a loaded agent's
teacher) where the model sets no ``max_segment_length``: a word of up to this many characters is
segmented as without a limit, a longer one into segments of at most this many. Without it the
dynamic programs score every substring of a word, memory growing with the square of its length
(a 5,000-letter word took more than 6 GB); with it, memory grows linearly."""
SPANS_PER_PASS = 1 << 15
"""The most spans (characters times the segment lengths considered, ``R + 1``) that a segmenter
scores at once in texts with a word longer than ``DECODING_MAX_SEGMENT_LENGTH``: such words go in
batches of at most this many, and one longer still has its spans scored in passes of this many
(``span_runs``' ``per_pass``). Texts of shorter words are decoded as they always were."""


def has_long_word(texts: Sequence[str]) -> bool:
    """Whether a word of ``texts`` (a run between spaces) is longer than
    ``DECODING_MAX_SEGMENT_LENGTH``: the texts a segmenter decodes in passes."""
    return any(len(word) > DECODING_MAX_SEGMENT_LENGTH for text in texts for word in text.split())


class SLM(SegmentLM):
    """Segmental LM over a character-context LSTM; see the module docstring."""

    name = "slm"

    def __init__(self, vocab: CharVocab, config: LMConfig, lexicon: Sequence[str] | None = None):
        super().__init__(vocab, config)
        self.embedding = nn.Embedding(len(vocab), config.char_dim, padding_idx=vocab.pad_id)
        self.context = nn.LSTM(config.char_dim, config.hidden_dim, batch_first=True)
        self.no_context = nn.Parameter(torch.zeros(config.hidden_dim))
        self.dropout = nn.Dropout(config.dropout)
        self.speller = self.make_speller(self.embedding)
        if lexicon and config.context != "none":
            raise ConfigError("slm's lexicon needs context = 'none'")
        direct = config.lexicon_logits == "direct"
        categorised = config.categories != "none"
        self.lexicon: Lexicon | None = None
        categories = morphotactics.category_count(config.categories, config.free_categories)
        if lexicon and direct and categorised:  # one distribution per category
            scale = 0.1 if config.categories != "free" else FREE_CLASS_INIT_SCALE
            if categories == 1:  # nothing to tell apart: the counts alone, as without classes
                scale = 0.0
            self.lexicon = CategoryDirectLexicon(lexicon, categories, init_scale=scale)
        elif lexicon:
            self.lexicon = (
                DirectLexicon(
                    lexicon, pairs=config.lexicon_pairs, pairs_gate=config.lexicon_pairs_gate
                )
                if direct
                else Lexicon(lexicon, config.hidden_dim)
            )
        if config.lexicon_pairs and (categorised or not direct or not lexicon):
            raise ConfigError(
                "slm's lexicon_pairs are a bigram over a direct lexicon's entries: it needs a "
                "lexicon, lexicon_logits = 'direct' and no categories"
            )
        self.transitions: morphotactics.Transitions | None = None
        if categorised:
            if self.lexicon is None:
                raise ConfigError(
                    f"slm's categories ({config.categories}) need a lexicon (lexicon_size > 0): "
                    "each category is its own distribution over the lexicon's entries"
                )
            if not direct:
                # the lexicon's context per category, [K, H] (each its own softmax over the entries)
                self.category_contexts = nn.Parameter(
                    0.1 * torch.randn(categories, config.hidden_dim)
                )
            self.transitions = morphotactics.Transitions(config.categories, config.free_categories)

    @property
    def pairs(self) -> EntryPairs | None:
        """The bigram over the lexicon's entries (``LMConfig.lexicon_pairs``), or None."""
        return getattr(self.lexicon, "pairs", None)

    @property
    def bigram(self) -> bool:
        """Whether a segment's probability depends on the segment before it (``context =
        "segment"``, or ``lexicon_pairs``): span tables ``[B, L, R + 1, R + 1]``, read by
        ``lattice.bigram_forward``."""
        return self.config.context == "segment" or self.pairs is not None

    def parameter_groups(self, lr: float) -> list[dict]:
        """The optimiser's groups: a ``direct`` lexicon's logits at ``config.lexicon_lr``, the rest
        at ``lr``."""
        if not isinstance(self.lexicon, DirectLexicon):
            return super().parameter_groups(lr)
        lexical = set(map(id, self.lexicon.parameters()))
        rest = [p for p in self.parameters() if id(p) not in lexical]
        return [
            {"params": rest, "lr": lr},
            {"params": list(self.lexicon.parameters()), "lr": self.config.lexicon_lr},
        ]

    # --- the context -----------------------------------------------------------------------------
    def context_states(self, chars: CharBatch) -> torch.Tensor:
        """``[B, L + 1, H]``: what conditions a segment starting at ``a``: the LSTM's state after
        ``<bos>`` and the characters before ``a`` (``context = "words"``: before ``a``'s word;
        ``"none"``: one learnt vector everywhere)."""
        if self.config.context == "none":
            return self.no_context.expand(len(chars), chars.ids.shape[1] + 1, -1)
        if self.config.context == "segment":
            raise ConfigError("context = 'segment' conditions each segment on the one before it")
        bos = torch.full((len(chars), 1), self.vocab.bos_id, device=chars.ids.device)
        output, _ = self.context(self.embedding(torch.cat([bos, chars.ids], dim=1)))
        if self.config.context == "words":
            output = output.gather(
                1, _word_starts(chars, self.space_id).unsqueeze(-1).expand_as(output)
            )
        return self.dropout(output)

    def _prefix_condition(self, prefix: Sequence[str]) -> torch.Tensor:
        if self.config.context == "segment":  # the last segment, or the empty one at the start
            ids = [self.vocab.bos_id, *self.vocab.encode(prefix[-1] if prefix else "")]
            output, _ = self.context(self.embedding(torch.tensor([ids], device=self.device)))
            return output[0, -1]
        chars = self.encode(["".join(prefix)])
        return self.context_states(chars)[0, -1]

    def segment_encodings(self, chars: CharBatch, room: torch.Tensor) -> torch.Tensor:
        """``context = "segment"``: ``[B, L, R + 1, H]``, the context LSTM's state after ``<bos>``
        and the ``p`` characters from ``j`` (``out[b, j, p]``, ``R`` the most of ``room [B, L]``,
        characters from each position to the end of its text): what conditions the segment after
        the segment ``(j, p)``; ``p = 0``: the empty segment, the start of the text. Past
        ``room`` the states read padding, and are never used."""
        batch, width = chars.ids.shape
        longest = max(int(room.max()) if room.numel() else 0, 1)
        offsets = torch.arange(longest, device=chars.ids.device)
        positions = torch.arange(width, device=chars.ids.device).unsqueeze(1) + offsets  # [L, R]
        inside = positions < chars.lengths.view(-1, 1, 1)  # [B, L, R]
        windows = chars.ids[:, positions.clamp(max=width - 1)]  # [B, L, R]
        windows = torch.where(inside, windows, self.vocab.pad_id)
        bos = torch.full((batch, width, 1), self.vocab.bos_id, device=chars.ids.device)
        inputs = torch.cat([bos, windows], dim=2).flatten(0, 1)  # [B * L, R + 1]
        output, _ = self.context(self.embedding(inputs))
        return self.dropout(output.view(batch, width, longest + 1, -1))

    # --- spans -----------------------------------------------------------------------------------
    def span_runs(
        self,
        chars: CharBatch,
        space: torch.Tensor,
        run_length: torch.Tensor,
        whole_from_lexicon: bool = True,
        speller_price: float = 0.0,
        per_pass: int | None = None,
        ends_apart: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """``[B, L, R + 1]``: for every start ``a`` with ``run_length[b, a] > 0``, the log-probability
        of the segment of each length ``l <= run_length[b, a]`` starting there (terminator included,
        and the end of the text for a span that reaches it); -inf elsewhere. With
        ``whole_from_lexicon`` False, a span that is a whole text comes from the speller alone, as
        if the lexicon had no entry for it (``entry_gains``); ``speller_price`` nats per character
        are taken from the speller's path of every span (the training objective's price,
        ``objective_table``). ``per_pass``: the most spans (starts times ``R + 1``) scored in one
        pass of the speller and the lexicon, the starts taken in turn (None: all at once): the
        same spans (but for rounding: a speller LSTM's matrix products may round otherwise in
        another size), in memory that grows with ``per_pass``, not with the texts' length. With
        ``ends_apart``, the spans without the end of the text, and that end [B] beside them."""
        states = self.context_states(chars)  # [B, L + 1, H]
        batch, width = chars.ids.shape
        rows, starts = (run_length > 0).nonzero(as_tuple=True)  # [N]
        lengths = run_length[rows, starts]
        longest = int(lengths.max()) if lengths.numel() else 0
        step = max(len(rows) if per_pass is None else per_pass // (longest + 1), 1)
        table, at_end, text_end = None, None, None
        for first in range(0, max(len(rows), 1), step):  # one pass, where per_pass is None
            part = slice(first, first + step)
            spans, at_end, text_end = self._start_spans(
                chars,
                space,
                states,
                at_end,
                rows[part],
                starts[part],
                lengths[part],
                whole_from_lexicon,
                speller_price,
                not ends_apart,
            )  # fmt: skip  [n, R' + 1] or [n, R' + 1, K]
            if table is None:
                table = spans.new_full((batch, width, longest + 1, *spans.shape[2:]), NEG_INF)
            table[rows[part], starts[part], : spans.shape[1]] = spans
        return (table, text_end) if ends_apart else table

    def _start_spans(
        self,
        chars: CharBatch,
        space: torch.Tensor,
        states: torch.Tensor,
        at_end: torch.Tensor | None,
        rows: torch.Tensor,
        starts: torch.Tensor,
        lengths: torch.Tensor,
        whole_from_lexicon: bool,
        speller_price: float,
        with_end: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``span_runs``' spans of the starts ``(rows, starts)`` ([N] each, ``lengths`` [N] their
        runs): ``[N, R + 1]`` (``[N, R + 1, K]`` with categories), ``R`` their longest run, the end
        of the text added to a span that reaches it (not ``with_end``: left out); ``at_end`` [B],
        the speller's end of each text, computed by the first pass (None) right after its spans,
        as one pass always computed it: a speller in training draws its dropout in that order; and
        the end of each text under the model [B] (or [B, K])."""
        longest = int(lengths.max()) if lengths.numel() else 0
        if self.config.context == "none":  # one condition: every substring scored once
            spans = self._shared_spans(chars, space, rows, starts, lengths)
        else:
            spans = self.speller.span_scores(
                states[rows, starts], chars.ids, space, rows, starts, lengths
            )  # [N, R + 1]
        spans = _priced(spans, speller_price)
        if at_end is None:
            texts = torch.arange(chars.ids.shape[0], device=states.device)
            at_end = self.speller.end_scores(states[texts, chars.lengths])  # [B]
        speller_end = at_end
        if self.lexicon is not None:  # [N, R + 1] and [B], or per category [N, R + 1, K], [B, K]
            contexts = self._lexicon_contexts()
            mixed = [
                self._mix_lexicon(
                    chars, space, rows, starts, lengths, spans, context, whole_from_lexicon
                )
                for context in contexts
            ]
            ends = [self.lexicon.end(context, at_end) for context in contexts]
            if self.transitions is None:
                spans, at_end = mixed[0], ends[0]
            else:
                spans, at_end = torch.stack(mixed, -1), _end_given_a_segment(torch.stack(ends, -1))
        reaches_end = (starts.unsqueeze(1) + torch.arange(longest + 1, device=spans.device)) == (
            chars.lengths[rows].unsqueeze(1)
        )
        if self.transitions is not None:
            reaches_end = reaches_end.unsqueeze(-1)
        if not with_end:
            return spans, speller_end, at_end
        return spans + torch.where(reaches_end, at_end[rows].unsqueeze(1), 0.0), speller_end, at_end

    def _lexicon_contexts(self) -> list[torch.Tensor]:
        """What conditions the lexicon: ``no_context``, or each category's context."""
        if self.transitions is None:
            return [self.no_context]
        if isinstance(self.lexicon, CategoryDirectLexicon):
            return list(self.lexicon.conditions.unbind(0))
        return list(self.category_contexts.unbind(0))

    def _shared_spans(
        self,
        chars: CharBatch,
        space: torch.Tensor,
        rows: torch.Tensor,
        starts: torch.Tensor,
        lengths: torch.Tensor,
    ) -> torch.Tensor:
        """``speller.span_scores`` of the runs ``(rows, starts, lengths)`` without context, where
        every run shares the condition ``no_context`` (``Speller.shared_span_scores``)."""
        coded = ["".join(map(chr, ids)) for ids in chars.ids.tolist()]
        row_list, start_list = rows.tolist(), starts.tolist()
        runs = [
            coded[r][a : a + n]
            for r, a, n in zip(row_list, start_list, lengths.tolist(), strict=True)
        ]
        space_after = space_at(space, rows, starts + lengths)
        after_space = space_at(space, rows, starts - 1)
        return self.speller.shared_span_scores(self.no_context, runs, after_space, space_after)

    def _mix_lexicon(
        self,
        chars: CharBatch,
        space: torch.Tensor,
        rows: torch.Tensor,
        starts: torch.Tensor,
        lengths: torch.Tensor,
        spans: torch.Tensor,
        context: torch.Tensor,
        whole_from_lexicon: bool = True,
    ) -> torch.Tensor:
        """``spans`` (the speller's ``[N, R + 1]``) with every span mixed with the lexicon's path
        under ``context`` ([H]) (but whole texts where ``whole_from_lexicon`` is False)."""
        offsets = torch.arange(spans.shape[1], device=spans.device)
        spannable = (offsets >= 1) & (offsets <= lengths.unsqueeze(1))
        longest = limit(self.config.max_segment_length)
        if longest is not None:  # longer entries stay impossible
            spannable &= offsets <= longest
        run, length = spannable.nonzero(as_tuple=True)
        texts, row_list, start_list = chars.texts, rows.tolist(), starts.tolist()
        strings = [
            texts[row_list[n]][start_list[n] : start_list[n] + k]
            for n, k in zip(run.tolist(), length.tolist(), strict=True)
        ]
        space_follows = space_at(space, rows[run], starts[run] + length)  # after the span
        ids = self.lexicon.ids(strings, spans.device)
        if not whole_from_lexicon:
            whole = (starts[run] == 0) & (length == chars.lengths[rows[run]])
            ids = torch.where(whole, -1, ids)
        mixed = self.lexicon.mix(context, ids, spans[run, length], space_follows)
        return spans.index_put((run, length), mixed)

    def span_table(
        self,
        chars: CharBatch,
        space: torch.Tensor | None = None,
        whole_from_lexicon: bool = True,
        speller_price: float = 0.0,
        longest: int | None = None,
        per_pass: int | None = None,
    ) -> torch.Tensor:
        """``[B, L, R + 1]``: every possible segment of every text (within words; at most
        ``max_segment_length`` characters, and at most ``longest`` where given: the longer ones
        left out, -inf, the others' probabilities unchanged); ``whole_from_lexicon``,
        ``speller_price`` and ``per_pass`` as in ``span_runs``."""
        space = space_mask(self.vocab, chars) if space is None else space
        room = _room(chars, space, _shorter(limit(self.config.max_segment_length), longest))
        if self.config.context == "segment":
            return self.bigram_table(chars, space, room, speller_price)
        if self.pairs is not None:
            return self.pair_table(chars, space, room, whole_from_lexicon, speller_price, per_pass)
        return self.span_runs(chars, space, room, whole_from_lexicon, speller_price, per_pass)

    def bigram_table(
        self, chars: CharBatch, space: torch.Tensor, room: torch.Tensor, speller_price: float = 0.0
    ) -> torch.Tensor:
        """``context = "segment"``: ``[B, L, R + 1, R + 1]``, ``out[b, a, l, p]`` the
        log-probability of the segment of ``l`` characters from ``a`` (``l <= room[b, a]``; its
        terminator, and the end of the text for one that reaches it) spelled from the state of the
        segment of ``p`` characters before it (``segment_encodings``; ``p = 0``: the start of the
        text, at ``a = 0`` only); -inf elsewhere (``lattice.bigram_forward``)."""
        if bool(space.any()):
            raise ConfigError(
                "context = 'segment' segments text without spaces (word discovery): give a "
                "segmented corpus to segrl lm train, or --hide-spaces to segrl train, or another "
                "context (lstm, words, none)"
            )
        batch, width = chars.ids.shape
        top = max(int(room.max()) if room.numel() else 0, 1)
        states = self.segment_encodings(chars, room)  # [B, L, R + 1, H]
        starts = torch.arange(width, device=room.device).unsqueeze(1)  # [L, 1]
        previous = torch.arange(top + 1, device=room.device)  # [R + 1]
        allowed = torch.where(starts == 0, previous == 0, (previous >= 1) & (previous <= starts))
        rows, at, before = ((room > 0).unsqueeze(2) & allowed).nonzero(as_tuple=True)  # [N] each
        spans = self.speller.span_scores(
            states[rows, at - before, before], chars.ids, space, rows, at, room[rows, at]
        )  # [N, R' + 1]
        spans = _priced(spans, speller_price)
        table = spans.new_full((batch, width, top + 1, top + 1), NEG_INF)  # [B, L, P, R + 1]
        table[rows, at, before, : spans.shape[1]] = spans
        # the end of the text, spelled from the state of the segment that reaches it
        last = chars.lengths.unsqueeze(1) - starts.view(1, -1)  # [B, L]: the length that reaches it
        ends_rows, ends_at = ((last >= 1) & (last <= room)).nonzero(as_tuple=True)
        lengths = last[ends_rows, ends_at]
        end = self.speller.end_scores(states[ends_rows, ends_at, lengths])  # [E]
        at_end = spans.new_zeros(batch, width, top + 1).index_put(
            (ends_rows, ends_at, lengths), end
        )
        return table.transpose(2, 3) + at_end.unsqueeze(3)  # [B, L, R + 1, P]

    def pair_table(
        self,
        chars: CharBatch,
        space: torch.Tensor,
        room: torch.Tensor,
        whole_from_lexicon: bool = True,
        speller_price: float = 0.0,
        per_pass: int | None = None,
    ) -> torch.Tensor:
        """``lexicon_pairs``: ``[B, L, R + 1, R + 1]``, ``out[b, a, l, p]`` the log-probability of
        the segment of ``l`` characters from ``a`` (its terminator, and the end of the text for one
        that reaches it) after the segment of ``p`` characters before it (``p = 0``: the start of
        the text, at ``a = 0`` only), under the bigram over the lexicon's entries
        (``EntryPairs``): the model without pairs (``span_runs``) where the segment before is no
        entry with pairs, mixed with the pairs' path where it is; the end of the text after a
        segment ``m`` takes ``1 - rho_m``. -inf elsewhere (``lattice.bigram_forward``)."""
        if bool(space.any()):
            raise ConfigError(
                "lexicon_pairs (a bigram over the lexicon's entries) segments text without "
                "spaces: word lists, or text without its spaces (word discovery); give "
                "lexicon_pairs = 0 for running text"
            )
        spans, end = self.span_runs(
            chars, space, room, whole_from_lexicon, speller_price, per_pass, ends_apart=True
        )  # [B, L, R + 1], [B]
        batch, width, top = spans.shape
        ids = self._span_ids(chars, top)  # [B, L, R + 1]
        starts = torch.arange(width, device=spans.device)
        previous = torch.arange(top, device=spans.device)
        before = (starts.view(-1, 1) - previous).clamp(min=0)  # [L, P]: where the one before starts
        after_one = (previous >= 1) & (previous <= starts.view(-1, 1))  # [L, P]: a segment before
        allowed = torch.where(starts.view(-1, 1) == 0, previous == 0, after_one)  # [L, P]
        prior = torch.where(after_one, ids[:, before, previous], -1)  # [B, L, P]: the entry before
        lexicon = self.lexicon
        go, stay, pair = self.pairs.gates(lexicon.kept())  # [M], [M], [P]
        known = prior >= 0
        prior_go = torch.where(known, go[prior.clamp(min=0)], NEG_INF)  # [B, L, P]
        prior_stay = torch.where(known, stay[prior.clamp(min=0)], 0.0)
        table = prior_stay.unsqueeze(2) + spans.unsqueeze(3)  # [B, L, R + 1, P]
        # the pairs' path, where the segment before is an entry with pairs and this one an entry
        b, a, length, p = (torch.isfinite(prior_go).unsqueeze(2) & (ids >= 0).unsqueeze(3)).nonzero(
            as_tuple=True
        )
        row = self.pairs.find(prior[b, a, p], ids[b, a, length])
        hit = row >= 0
        b, a, length, p, row = b[hit], a[hit], length[hit], p[hit], row[hit]
        entry = ids[b, a, length]
        paired = prior_go[b, a, p] + pair[row]
        paired = paired + F.logsigmoid(-lexicon.terminator_logits(self.no_context, entry))
        if lexicon.count_probe is not None:  # a use through a pair is a use of the entry
            paired = paired + lexicon.count_probe[entry]
        # both finite where a pair is live; -inf (a pruned pair): the other path alone
        mixed = lattice.logsumexp(torch.stack([table[b, a, length, p], paired]), dim=0)
        table = table.index_put((b, a, length, p), mixed)
        reaches = starts.view(-1, 1) + torch.arange(top, device=spans.device) == (
            chars.lengths.view(-1, 1, 1)
        )  # [B, L, R + 1]
        last_stays = torch.where(ids >= 0, stay[ids.clamp(min=0)], 0.0)  # 1 - rho of the segment
        table = table + torch.where(reaches, end.view(-1, 1, 1) + last_stays, 0.0).unsqueeze(3)
        return torch.where(allowed.view(1, width, 1, top), table, NEG_INF)

    def _span_ids(self, chars: CharBatch, top: int) -> torch.Tensor:
        """``[B, L, top]``: the lexicon id of the segment of ``l`` characters from ``a``
        (``out[b, a, l]``), -1 where it is no entry or runs past its text."""
        out = torch.full((len(chars), chars.ids.shape[1], top), -1, dtype=torch.long)
        index = self.lexicon.index
        for row, text in enumerate(chars.texts):
            for a in range(len(text)):
                for length in range(1, min(top - 1, len(text) - a) + 1):
                    i = index.get(text[a : a + length])
                    if i is not None:
                        out[row, a, length] = i
        return out.to(chars.ids.device)

    def objective_table(
        self, chars: CharBatch, space: torch.Tensor, whole_from_lexicon: bool = True
    ) -> torch.Tensor:
        """The span table that training maximises the marginal of: ``span_table`` with the
        speller's path priced at ``config.speller_price`` nats a character and every segment of
        length ``l`` at ``config.length_penalty * l ** 2`` (both 0: ``p(X, S)`` itself). Scores,
        posteriors and decoding read ``span_table``, the model's own probabilities."""
        table = self.span_table(chars, space, whole_from_lexicon, self.config.speller_price)
        if self.config.length_penalty:
            lengths = torch.arange(table.shape[2], device=table.device, dtype=table.dtype)
            penalty = self.config.length_penalty * lengths.square()  # [R + 1]
            table = table - penalty.view(-1, *[1] * (table.dim() - 3))
        return table

    @torch.no_grad()
    def entry_gains(self, entries: Sequence[str], batch_size: int = 2048) -> torch.Tensor:
        """``[E]`` nats per use that each of ``entries`` (lexicon entries, each a text of its own)
        gains the training objective: ``log p(m) - log p(m | without m)``, its marginal
        (``objective_table``'s) with and without its own lexicon entry (without it, ``m`` is
        spelled by the speller or made of other segments). ``LexiconUsage.prune`` weighs it by the
        entry's uses.

        With categories, ``[K, E]``: the gain of a use in each category, the entry and its parts
        all of that category (the category's own lexicon and gate, no transitions). Alone, the
        morphotactics would read every entry as a word of one stem, so that a suffix would be
        weighed by what it gains as a stem, little, and pruned however often suffixes use it."""
        gains = []
        was_training = self.training
        self.eval()
        try:
            for begin in range(0, len(entries), batch_size):
                chars = self.encode(list(entries[begin : begin + batch_size]))
                space = space_mask(self.vocab, chars)
                with_it = self.objective_table(chars, space)
                without = self.objective_table(chars, space, whole_from_lexicon=False)
                gains.append(
                    self._partition_by_category(with_it, space, chars.lengths)
                    - self._partition_by_category(without, space, chars.lengths)
                )
        finally:
            self.train(was_training)
        if not gains:
            shape = (0,) if self.transitions is None else (self.transitions.allowed.shape[0] - 1, 0)
            return torch.zeros(shape)
        return torch.cat(gains, dim=-1)

    # --- scores ----------------------------------------------------------------------------------
    def segment_scores(self, batch: SegmentedBatch) -> SegmentScores:
        self._require_no_categories("scores of given segmentations")
        if self.bigram:
            table = self.span_table(batch.chars, batch.space)
            return _bigram_scores(table, batch.ends, batch.chars.lengths)
        first, last = segment_bounds(batch)
        lengths = torch.where(batch.starts, last - _positions(batch) + 1, 0)
        table = self.span_runs(batch.chars, batch.space, lengths)
        return _scores_from_table(batch, table, first)

    @torch.no_grad()
    def flip_scores(self, batch: SegmentedBatch) -> torch.Tensor:
        """Flip scores computed locally: one speller pass from every position over the spans that a
        flip there or next to it involves (the rest of its segment, and for a segment's first character
        also the next segment of the same word)."""
        self._require_no_categories("flip scores")
        batch = batch.to(self.device)
        if self.bigram:  # one table, every flipped segmentation looked up
            table = self.span_table(batch.chars, batch.space)
            total = _bigram_scores(table, batch.ends, batch.chars.lengths).total
            rows, at = batch.flippable.nonzero(as_tuple=True)
            ends = batch.ends[rows].clone()
            ends[torch.arange(len(rows), device=self.device), at] ^= True
            flipped = _bigram_scores(table[rows], ends, batch.chars.lengths[rows]).total
            flips = torch.zeros(batch.ends.shape, device=self.device)
            return flips.index_put((rows, at), total[rows] - flipped)
        first, last = segment_bounds(batch)  # [B, L] each
        positions = _positions(batch)
        width = positions.shape[1]
        flippable = batch.flippable
        word = batch.chars.mask & ~batch.space
        after = (last + 1).clamp(max=width - 1)
        next_length = last.gather(1, after) - last  # [B, L], length of the segment after mine
        merge = batch.starts & flippable.gather(1, last)
        room = torch.where(word, last - positions + 1 + torch.where(merge, next_length, 0), 0)
        longest = limit(self.config.max_segment_length)
        if longest is not None:
            room = room.clamp(max=longest)
        table = self.span_runs(batch.chars, batch.space, room)

        def span(start: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
            return _lookup(table, start, length)

        following = (positions + 1).clamp(max=width - 1)
        own = span(first, last - first + 1)
        # a boundary after i: segments (first, i) and (i + 1, last[i + 1]) merge
        left = span(first, positions - first + 1)
        right_of_boundary = span(following, last.gather(1, following) - positions)
        merged = span(first, last.gather(1, following) - first + 1)
        split_flip = left + right_of_boundary - merged
        # no boundary after i: the segment (first, last) splits into (first, i) and (i + 1, last)
        right_inside = span(following, last - positions)
        join_flip = own - left - right_inside
        flips = torch.where(batch.ends, split_flip, join_flip)
        return torch.where(flippable, flips, torch.zeros_like(flips))

    def spelled_whole(self, chars: CharBatch) -> torch.Tensor:
        """Differentiable ``[B]``: the speller's own log-probability of each text spelled as one
        segment, its end included (``config.speller_words``; without context only: every text
        from ``no_context``)."""
        if self.config.context != "none":
            raise ConfigError(
                "the speller spells whole texts from no context only (context='none')"
            )
        chars = chars.to(self.device)
        space = space_mask(self.vocab, chars)
        rows = torch.arange(len(chars), device=self.device)
        starts = torch.zeros_like(rows)
        spans = self._shared_spans(chars, space, rows, starts, chars.lengths)  # [B, L + 1]
        end = self.speller.end_scores(self.no_context.unsqueeze(0))  # [1]
        return spans[rows, chars.lengths] + end

    def lexicon_description_length(self, uses: float) -> torch.Tensor:
        """The lexicon's description length in nats (``Lexicon.description_length`` at
        ``config.lexicon_cost`` nats per character) for ``uses`` segments; 0 without a lexicon."""
        if self.lexicon is None or not self.config.lexicon_cost:
            return torch.zeros((), device=self.device)
        contexts = torch.stack(self._lexicon_contexts())  # [1 or K, H]
        return self.lexicon.description_length(contexts, uses, self.config.lexicon_cost)

    def _require_no_categories(self, what: str) -> None:
        if self.transitions is not None:
            raise ConfigError(
                f"{what} are not available for slm with categories ({self.config.categories}); "
                "it trains and segments by its marginal (segrl lm train)"
            )

    def _log_partition(
        self, table: torch.Tensor, space: torch.Tensor, lengths: torch.Tensor
    ) -> torch.Tensor:
        """``log p(X)`` [B] from a span table: over segmentations, and categories where there are."""
        if self.bigram:
            return lattice.bigram_forward(table, lengths)[0]
        if self.transitions is None:
            return lattice.log_partition(table, space, lengths)
        return morphotactics.log_partition(table, space, lengths, self.transitions())

    def _partition_by_category(
        self, table: torch.Tensor, space: torch.Tensor, lengths: torch.Tensor
    ) -> torch.Tensor:
        """``_log_partition``, but with categories ``[K, B]``: each category's table on its own,
        every segment of that category and no transitions."""
        if self.transitions is None:
            return self._log_partition(table, space, lengths)
        return torch.stack([lattice.log_partition(t, space, lengths) for t in table.unbind(-1)])

    # --- over all segmentations ------------------------------------------------------------------
    def log_marginal(self, chars: CharBatch) -> torch.Tensor:
        """Differentiable ``[B]`` exact ``log p(X)``, summed over every segmentation."""
        chars = chars.to(self.device)
        space = space_mask(self.vocab, chars)
        return self._log_partition(self.span_table(chars, space), space, chars.lengths)

    def marginal_loss(
        self, chars: CharBatch, regularise: bool = False
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """``-log p(X)`` per character (to minimise), and its value in bits per character; with
        ``config.length_penalty`` > 0, ``-log sum_S p(X, S) exp(-penalty * sum_k |m_k|^2)``, and
        with ``config.speller_price`` the speller's segments priced too (``objective_table``: an
        upper bound of ``-log p(X)``, reported as it is). With ``regularise`` (training's update)
        and ``config.expected_length_weight`` > 0, the loss adds that weight times the expected
        ``sum_k |m_k| ** expected_length_power`` per character under the same table's posterior;
        the stats stay the likelihood's, with the regulariser's value beside them."""
        chars = chars.to(self.device)
        space = space_mask(self.vocab, chars)
        table = self.objective_table(chars, space)  # [B, L, R + 1]
        total = self._log_partition(table, space, chars.lengths)
        characters = (chars.lengths + 1).sum()
        loss = -total.sum() / characters
        stats = {"nll": loss.item(), "bits_per_char": loss.item() / math.log(2)}
        weight = self.config.expected_length_weight
        if regularise and weight:
            power = self.config.expected_length_power
            expected = (
                lattice.bigram_forward(table, chars.lengths, power=power)[1]
                if self.bigram
                else lattice.expected_lengths(table, space, chars.lengths, power)
            )
            per_char = expected.sum() / characters
            stats["expected_length_cost"] = per_char.item()
            loss = loss + weight * per_char
        return loss, stats

    @torch.no_grad()
    def boundary_posteriors(
        self, chars: CharBatch, longest: int | None = None, per_pass: int | None = None
    ) -> torch.Tensor:
        """``[B, L]``: the exact posterior probability ``p(a segment ends at character i | X)``
        (1 before a space and at the end of the text, 0 at spaces and padding); with ``longest``,
        over the segmentations whose segments have at most that many characters (``span_table``,
        with ``per_pass``)."""
        chars = chars.to(self.device)
        space = space_mask(self.vocab, chars)
        table = self.span_table(chars, space, longest=longest, per_pass=per_pass)
        partition = None
        if self.bigram:

            def partition(leaf: torch.Tensor) -> torch.Tensor:
                return lattice.bigram_forward(leaf, chars.lengths)[0]

        elif self.transitions is not None:
            transitions = self.transitions()

            def partition(leaf: torch.Tensor) -> torch.Tensor:
                return morphotactics.log_partition(leaf, space, chars.lengths, transitions)

        return lattice.boundary_marginals(table, space, chars.lengths, partition) * chars.mask

    @torch.no_grad()
    def word_boundary_posteriors(
        self, chars: CharBatch, longest: int | None = None, per_pass: int | None = None
    ) -> torch.Tensor:
        """``[B, L]``: ``boundary_posteriors`` of every word of the texts taken as a text of its own
        (computed once per distinct word), 0 at spaces and padding. For a model trained on word
        types, which never saw a space: in a sentence a word's last segment would end with a space,
        a terminator it gives almost no probability, and with a lexicon (whose entries then lose
        their share) that moves the boundaries; alone, the word is scored as the model learnt it."""
        chars = chars.to(self.device)
        words: dict[str, int] = {}
        rows, starts, which = [], [], []
        for row, text in enumerate(chars.texts):
            for word in re.finditer(r"[^ ]+", text):
                which.append(words.setdefault(word.group(), len(words)))
                rows.append(row)
                starts.append(word.start())
        out = torch.zeros(chars.ids.shape, device=self.device)
        if not words:
            return out
        by_word = self.boundary_posteriors(self.encode(list(words)), longest, per_pass)  # [W, Lw]
        which_t = torch.tensor(which, device=self.device)
        offsets = torch.arange(by_word.shape[1], device=self.device)
        word_lengths = torch.tensor([len(w) for w in words], device=self.device)
        inside = offsets < word_lengths[which_t].unsqueeze(1)  # [O, Lw]
        row_index = torch.tensor(rows, device=self.device).unsqueeze(1).expand_as(inside)
        columns = torch.tensor(starts, device=self.device).unsqueeze(1) + offsets
        out = out.to(by_word.dtype)
        out[row_index[inside], columns[inside]] = by_word[which_t][inside]
        return out

    @torch.no_grad()
    def viterbi(
        self, chars: CharBatch, longest: int | None = None, per_pass: int | None = None
    ) -> tuple[SegmentedBatch, torch.Tensor]:
        """The most probable segmentation of each text, and its ``log p(X, S)`` [B]; with
        ``longest``, the most probable of those whose segments have at most that many characters
        (``span_table``, with ``per_pass``)."""
        chars = chars.to(self.device)
        space = space_mask(self.vocab, chars)
        table = self.span_table(chars, space, longest=longest, per_pass=per_pass)
        if self.transitions is not None:
            ends, _, best = morphotactics.viterbi(table, space, chars.lengths, self.transitions())
            return SegmentedBatch.from_ends(self.vocab, chars, ends), best
        if self.bigram:
            best, ends = lattice.bigram_forward(table, chars.lengths, viterbi=True)
            return SegmentedBatch.from_ends(self.vocab, chars, ends), best
        best, back = lattice.forward(table, space, chars.lengths, viterbi=True)
        ends = lattice.backtrack(back, space, chars.lengths)
        return SegmentedBatch.from_ends(self.vocab, chars, ends), best


def _word_starts(chars: CharBatch, space_id: int | None) -> torch.Tensor:
    """[B, L + 1]: for every position, the first position of its word (just after the last space
    before it; 0 in the first word)."""
    batch, width = chars.ids.shape
    positions = torch.arange(width + 1, device=chars.ids.device).expand(batch, -1)
    after_space = torch.zeros(batch, width + 1, dtype=torch.bool, device=chars.ids.device)
    if space_id is not None:
        after_space[:, 1:] = chars.ids == space_id
    marks = torch.where(after_space, positions, torch.zeros_like(positions))
    return torch.cummax(marks, dim=1).values


def _positions(batch: SegmentedBatch) -> torch.Tensor:
    width = batch.chars.ids.shape[1]
    return torch.arange(width, device=batch.device).expand_as(batch.ends)


def _shorter(limit: int | None, other: int | None) -> int | None:
    """The tighter of two limits (None: none)."""
    return other if limit is None else limit if other is None else min(limit, other)


def _room(chars: CharBatch, space: torch.Tensor, limit: int | None) -> torch.Tensor:
    """[B, L]: characters from each non-space position to the end of its word (capped at ``limit``)."""
    room = lattice.run_remaining(chars.mask & ~space)
    return room if limit is None else room.clamp(max=limit)


def _lookup(table: torch.Tensor, start: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
    """``table[b, start, length]`` for [B, L] index tensors; -inf for lengths outside the table."""
    top = table.shape[2] - 1
    inside = (length >= 1) & (length <= top)
    flat = table.gather(1, start.unsqueeze(-1).expand(-1, -1, top + 1))  # [B, L, R + 1]
    values = flat.gather(2, length.clamp(0, top).unsqueeze(-1)).squeeze(-1)
    return torch.where(inside, values, NEG_INF)


def _scores_from_table(
    batch: SegmentedBatch, table: torch.Tensor, first: torch.Tensor
) -> SegmentScores:
    positions = _positions(batch)
    values = _lookup(table, first, positions - first + 1)
    per_position = torch.where(batch.ends, values, torch.zeros_like(values))
    return SegmentScores(per_position, per_position.sum(1), batch.chars.lengths + 1)


def _end_given_a_segment(end: torch.Tensor) -> torch.Tensor:
    """With categories, ``log(E / (1 - E))`` of each category's end of the text ``E`` (``end``,
    ``log E``, [B, K]): the end of a text is decided by the category of its last segment, after
    it, and each segment's probability is taken given that it is not the end (``p(m | c) / (1 -
    E_c)``), so that every category's segments and end sum to one (``segrl.lm.morphotactics``).
    Without categories the end is a segment slot of its own, as the empty text's is."""
    return end - torch.log(-torch.expm1(end.clamp(max=-1e-6)))


def _priced(spans: torch.Tensor, speller_price: float) -> torch.Tensor:
    """The speller's spans ``[N, R + 1]`` with ``speller_price`` nats taken per character (the
    training objective's price, ``SLM.objective_table``); unchanged at 0."""
    if not speller_price:
        return spans
    offsets = torch.arange(spans.shape[1], device=spans.device, dtype=spans.dtype)
    return spans - speller_price * offsets


def _bigram_scores(table: torch.Tensor, ends: torch.Tensor, lengths: torch.Tensor) -> SegmentScores:
    """``SegmentScores`` of the segmentations ``ends [B, L]`` (True at each segment's last
    character) from a bigram span table (``SLM.bigram_table``, ``[B, L, R + 1, R + 1]``): each
    segment's entry under the length of the segment before it; -inf for a segment longer than
    ``R``."""
    batch, width, top, _ = table.shape
    positions = torch.arange(width, device=table.device).expand(batch, -1)
    starts = torch.cat([torch.ones_like(ends[:, :1]), ends[:, :-1]], dim=1)
    first = torch.cummax(torch.where(starts, positions, 0), dim=1).values  # [B, L]
    before = first.gather(1, (first - 1).clamp(min=0))  # the start of the segment before mine
    previous = torch.where(first == 0, 0, first - before)
    length = positions - first + 1
    inside = length < top
    index = (first * top + length.clamp(max=top - 1)) * top + previous.clamp(max=top - 1)
    values = table.flatten(1).gather(1, index)
    values = torch.where(inside & (previous < top), values, NEG_INF)
    real = ends & (positions < lengths.unsqueeze(1))
    per_position = torch.where(real, values, torch.zeros_like(values))
    return SegmentScores(per_position, per_position.sum(1), lengths + 1)


def require_slm(model: object, what: str) -> SLM:
    """``model`` as an ``SLM``, or a ``ConfigError`` saying that ``what`` needs one."""
    if not isinstance(model, SLM):
        raise ConfigError(
            f"{what} needs the slm language model, not {getattr(model, 'name', model)}"
        )
    return model
