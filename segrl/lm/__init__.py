"""Segmental language models: proper probabilities of characters under a segmentation.

Every model gives ``log p(X, S)`` of a text X with a segmentation S, generating the text segment by
segment: each segment is spelled character by character and closed by a terminator,

- ``<eos>`` when the next segment follows inside the same word,
- the space character when a space follows (the end of a word),

and an empty segment (``<eos>`` before any character) ends the text. A space is never spelled inside
a segment nor starts one, so the space between two words is generated exactly once, as the terminator
of the segment before it. This makes ``p(X, S)`` a proper joint distribution over texts and their
segmentations (every (X, S) pair is one sequence of choices, and the probabilities of all of them sum
to 1; tests check this by enumeration), so the scores of different segmentations of the same text are
comparable: an all-characters segmentation pays a terminator after every character, an all-words one
spells long segments; neither wins by construction.

With spaces in the text, word boundaries are known: segment boundaries are free only inside words
(``SegmentedBatch.flippable``). For word discovery give the text without spaces.

Models (``build_lm``): ``slm`` (segments conditioned on the character context: exact marginal
``log p(X)``, posterior boundary probabilities, Viterbi, local flip scores) and ``segment-lstm``
(the study's LSTM over the segment sequence, optionally with a lexicon).

    >>> from segrl.data import load_corpus
    >>> corpus = load_corpus()
    >>> lm = build_lm(LMConfig(model="slm"), corpus.vocab)
    >>> batch = lm.segmented(segments=[["walk", "ed", " ", "home"]])
    >>> scores = lm.score(batch)          # scores.total: log p(X, S) in nats, [B]
    >>> flips = lm.flip_scores(batch)     # [B, L], 0 where a decision is forced
"""

import importlib
from typing import TYPE_CHECKING, Any

from segrl.lm.config import MODELS, LMConfig

if TYPE_CHECKING:
    from segrl.lm.base import SegmentLM, SegmentScores
    from segrl.lm.lexicon import build_lexicon
    from segrl.lm.models import build_lm, build_word_lm, load_lm, save_lm
    from segrl.lm.segment_lstm import SegmentLSTM
    from segrl.lm.segmented import SegmentedBatch
    from segrl.lm.slm import SLM

_LAZY = {
    "SegmentLM": "base",
    "SegmentScores": "base",
    "build_lexicon": "lexicon",
    "build_lm": "models",
    "build_word_lm": "models",
    "load_lm": "models",
    "save_lm": "models",
    "SegmentLSTM": "segment_lstm",
    "SegmentedBatch": "segmented",
    "SLM": "slm",
}
"""The models import PyTorch when first named, so that a config (``segrl.lm.config``) does not."""


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'segrl.lm' has no attribute {name!r}")
    return getattr(importlib.import_module(f"segrl.lm.{_LAZY[name]}"), name)


__all__ = [
    "MODELS",
    "SLM",
    "LMConfig",
    "SegmentLM",
    "SegmentLSTM",
    "SegmentScores",
    "SegmentedBatch",
    "build_lexicon",
    "build_lm",
    "build_word_lm",
    "load_lm",
    "save_lm",
]
