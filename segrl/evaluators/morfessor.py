"""Morfessor as the evaluator: the study's sanity experiments (spec §4 and §5).

The reference decisions come from a Morfessor Baseline model trained on the word counts of the
corpus's training split (``segrl.baselines.MorfessorSegmenter``, cached by corpus fingerprint, so
every run on the same corpus rewards against the same model). Rewards: ``ReferenceEvaluator``.
"""

from __future__ import annotations

from collections.abc import Sequence

from segrl.baselines.morfessor import MorfessorSegmenter
from segrl.data import Corpus, GoldWord
from segrl.evaluators.reference import DEFAULT_ALPHA, ReferenceEvaluator
from segrl.evaluators.registry import EvaluatorConfig


class MorfessorEvaluator(ReferenceEvaluator):
    """Rewards against a trained ``MorfessorSegmenter``'s decisions (every word has one)."""

    name = "morfessor"

    def __init__(self, segmenter: MorfessorSegmenter, alpha: float = DEFAULT_ALPHA):
        super().__init__(alpha)
        self.segmenter = segmenter

    @classmethod
    def from_config(
        cls, config: EvaluatorConfig, corpus: Corpus, gold: Sequence[GoldWord] | None = None
    ) -> MorfessorEvaluator:
        """Train (or load from the cache) Morfessor on ``corpus`` and reward against it."""
        segmenter = MorfessorSegmenter(cache_dir=config.cache_dir, seed=config.seed)
        return cls(segmenter.train(corpus), alpha=config.alpha)

    def segment_word(self, word: str) -> list[str]:
        return self.segmenter.segment(word)
