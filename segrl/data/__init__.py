"""Corpora, the character vocabulary, and gold segmentations."""

from segrl.data.corpus import (
    Corpus,
    NormalizationSettings,
    evaluator_corpus,
    load_corpus,
    read_lines,
    without_spaces,
)
from segrl.data.gold import (
    GoldWord,
    bundled_gold,
    check_gold_fits,
    load_gold,
    read_gold,
    refuse_gold_file,
)
from segrl.data.vocab import CharVocab

__all__ = [
    "CharVocab",
    "Corpus",
    "GoldWord",
    "NormalizationSettings",
    "bundled_gold",
    "check_gold_fits",
    "evaluator_corpus",
    "load_corpus",
    "load_gold",
    "read_gold",
    "read_lines",
    "refuse_gold_file",
    "without_spaces",
]
