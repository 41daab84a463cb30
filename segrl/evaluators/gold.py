"""A gold segmentation as the evaluator, for supervised sanity runs.

Same rewards as Morfessor's (``ReferenceEvaluator``), from the gold analysis of each word (the first
one where a word has alternatives). Words the gold set does not cover have no reference: positions
inside them are not rewarded and do not count in the sequence score (word boundaries still do).
"""

from __future__ import annotations

from collections.abc import Sequence

from segrl.data import Corpus, GoldWord, load_gold
from segrl.errors import DataError
from segrl.evaluators.reference import DEFAULT_ALPHA, ReferenceEvaluator
from segrl.evaluators.registry import EvaluatorConfig


class GoldEvaluator(ReferenceEvaluator):
    """Rewards against ``gold``: a sequence of ``GoldWord``."""

    name = "gold"

    def __init__(self, gold: Sequence[GoldWord], alpha: float = DEFAULT_ALPHA):
        super().__init__(alpha)
        if not gold:
            raise DataError("the gold evaluator needs at least one gold word")
        self.analyses = {g.word: g.analyses[0] for g in gold}

    @classmethod
    def from_config(
        cls, config: EvaluatorConfig, corpus: Corpus, gold: Sequence[GoldWord] | None = None
    ) -> GoldEvaluator:
        """Reward against ``gold`` (the bundled gold set when None)."""
        return cls(gold if gold is not None else load_gold(), alpha=config.alpha)

    def segment_word(self, word: str) -> tuple[str, ...] | None:
        return self.analyses.get(word)

    def coverage(self, words: Sequence[str]) -> float:
        """The fraction of ``words`` (tokens) that have a gold analysis."""
        return sum(w in self.analyses for w in words) / len(words) if words else 0.0
