"""An ``slm``'s own segmentation of words, as a segmenter: Viterbi or posterior decoding. ``segrl lm
train`` scores and saves its model with it, the loader segments with a saved ``slm`` through it, and
the LM evaluator offers its co-trained model's decodings with it (``LMEvaluator.own_segmenters``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from segrl.config import limit
from segrl.errors import ConfigError
from segrl.lm.slm import DECODING_MAX_SEGMENT_LENGTH, SLM, SPANS_PER_PASS, has_long_word

LMDecoding = Literal["viterbi", "posterior"]

LM_KIND = "lm"
"""The ``segrl.kind`` of segmenters that are language models (``segrl compare --kind lm``)."""


class LMSegmenter:
    """Segmentation of words by a trained ``slm``: ``viterbi`` (the most probable segmentation) or
    ``posterior`` (a split wherever the exact posterior probability that a segment ends there is
    above ``threshold``; at one half, the default, the segmentation with the most boundaries right
    in expectation; lower, denser: ``tools/teacher_density.py`` reads a teacher along its density
    this way). Segments have at most the model's ``max_segment_length`` characters or, where it
    sets none, ``longest`` (``DECODING_MAX_SEGMENT_LENGTH``; None: no limit, memory growing with
    the square of a word's length). Words go in batches of at most ``batch_size`` words, and those
    longer than ``DECODING_MAX_SEGMENT_LENGTH`` in batches of at most ``SPANS_PER_PASS`` spans
    (one alone, scored in passes, if need be), so that memory grows linearly in their length."""

    kind: str = LM_KIND
    """The ``segrl.kind`` it is logged as."""

    def __init__(
        self,
        model: SLM,
        batch_size: int = 256,
        decoding: LMDecoding = "viterbi",
        threshold: float = 0.5,
        longest: int | None = DECODING_MAX_SEGMENT_LENGTH,
    ):
        if decoding not in ("viterbi", "posterior"):
            raise ConfigError(f"decoding must be viterbi or posterior, got {decoding!r}")
        if not 0.0 < threshold < 1.0:
            raise ConfigError(f"the posterior threshold must be between 0 and 1, got {threshold}")
        self.model = model
        self.batch_size = batch_size
        self.decoding = decoding
        self.threshold = threshold
        self.longest = limit(model.config.max_segment_length) or longest
        """The most characters per segment (None: no limit)."""

    def segment_words(self, words: list[str]) -> list[list[str]]:
        out: list[list[str]] = [[] for _ in words]
        self.model.eval()
        for chunk in self._batches(words):
            texts = [words[i] for i in chunk]
            chars = self.model.encode(texts)
            per_pass = SPANS_PER_PASS if self.longest and has_long_word(texts) else None
            if self.decoding == "posterior":
                posteriors = self.model.boundary_posteriors(chars, self.longest, per_pass)
                ends = posteriors.cpu() > self.threshold  # [B, L]
                for i, text, row in zip(chunk, texts, ends, strict=True):
                    cuts = [k + 1 for k in range(len(text) - 1) if row[k]]
                    out[i] = [
                        text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)
                    ]
                continue
            best, _ = self.model.viterbi(chars, self.longest, per_pass)
            for i, segments in zip(chunk, best.segments(), strict=True):
                out[i] = segments
        return out

    def _batches(self, words: list[str]) -> Iterator[list[int]]:
        """Indices of the non-empty ``words``, shortest first, in batches of at most
        ``batch_size`` words; with a ``longest``, the words longer than
        ``DECODING_MAX_SEGMENT_LENGTH`` in batches of at most ``SPANS_PER_PASS`` spans too (but
        for a longer word alone)."""
        order = sorted((i for i, w in enumerate(words) if w), key=lambda i: len(words[i]))
        batch: list[int] = []
        for i in order:
            width = len(words[i])  # the batch's longest word so far
            spans = (len(batch) + 1) * width * (min(width, self.longest or width) + 1)
            long = self.longest is not None and width > DECODING_MAX_SEGMENT_LENGTH
            if batch and (
                len(batch) == self.batch_size
                or (long and spans > SPANS_PER_PASS)
                or (long and len(words[batch[-1]]) <= DECODING_MAX_SEGMENT_LENGTH)
            ):
                yield batch
                batch = []
            batch.append(i)
        if batch:
            yield batch

    def segment_sentence(self, sentence: str) -> list[list[str]]:
        return self.segment_words(sentence.split())
