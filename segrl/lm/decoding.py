"""An ``slm``'s own segmentation of words, as a segmenter: Viterbi or posterior decoding. ``segrl lm
train`` scores and saves its model with it, the loader segments with a saved ``slm`` through it, and
the LM evaluator offers its co-trained model's decodings with it (``LMEvaluator.own_segmenters``).
"""

from __future__ import annotations

from typing import Literal

from segrl.errors import ConfigError
from segrl.lm.slm import SLM

LMDecoding = Literal["viterbi", "posterior"]

LM_KIND = "lm"
"""The ``segrl.kind`` of segmenters that are language models (``segrl compare --kind lm``)."""


class LMSegmenter:
    """Segmentation of words by a trained ``slm``: ``viterbi`` (the most probable segmentation) or
    ``posterior`` (a split wherever the exact posterior probability that a segment ends there is
    above ``threshold``; at one half, the default, the segmentation with the most boundaries right
    in expectation; lower, denser: ``tools/teacher_density.py`` reads a teacher along its density
    this way)."""

    kind: str = LM_KIND
    """The ``segrl.kind`` it is logged as."""

    def __init__(
        self,
        model: SLM,
        batch_size: int = 256,
        decoding: LMDecoding = "viterbi",
        threshold: float = 0.5,
    ):
        if decoding not in ("viterbi", "posterior"):
            raise ConfigError(f"decoding must be viterbi or posterior, got {decoding!r}")
        if not 0.0 < threshold < 1.0:
            raise ConfigError(f"the posterior threshold must be between 0 and 1, got {threshold}")
        self.model = model
        self.batch_size = batch_size
        self.decoding = decoding
        self.threshold = threshold

    def segment_words(self, words: list[str]) -> list[list[str]]:
        order = sorted(range(len(words)), key=lambda i: len(words[i]))
        out: list[list[str]] = [[] for _ in words]
        self.model.eval()
        for begin in range(0, len(order), self.batch_size):
            chunk = [i for i in order[begin : begin + self.batch_size] if words[i]]
            if not chunk:
                continue
            texts = [words[i] for i in chunk]
            chars = self.model.encode(texts)
            if self.decoding == "posterior":
                ends = self.model.boundary_posteriors(chars).cpu() > self.threshold  # [B, L]
                for i, text, row in zip(chunk, texts, ends, strict=True):
                    cuts = [k + 1 for k in range(len(text) - 1) if row[k]]
                    out[i] = [
                        text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)
                    ]
                continue
            best, _ = self.model.viterbi(chars)
            for i, segments in zip(chunk, best.segments(), strict=True):
                out[i] = segments
        return out

    def segment_sentence(self, sentence: str) -> list[list[str]]:
        return self.segment_words(sentence.split())
