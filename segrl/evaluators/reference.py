"""Rewards against reference decisions, as in the study's sanity experiments (spec §4, §5).

A reference evaluator knows the right segmentation of (some) words; from it, every position of a
sentence has a right decision: split inside a word where the word's reference analysis splits, split
at every word boundary. Rewards count only at the agent's free positions where the reference is known:

- **sequence** (eq. 5.6, made a score): ``-(alpha * missed + (1 - alpha) * spurious) / n`` where
  ``missed`` counts positions the reference splits and the agent does not (the study's "wrong
  splits"), ``spurious`` positions the agent splits and the reference does not (its "wrong
  non-splits"), and ``n`` the scored positions; ``alpha = 0.75`` weights missed splits more because
  most positions are not splits. Dividing by ``n`` puts sentences of every length on one scale,
  ``[-max(alpha, 1 - alpha), 0]``, as the LM score is per character (eq. 5.1). 0 is perfect.
- **per-action** (eq. 5.7): ``+1`` for a right decision, ``-1`` for a wrong one, 0 elsewhere.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Sequence

import numpy as np

from segrl.evaluators.base import Evaluator, SegmentationBatch, decision_layout
from segrl.segmentation import decisions_of

DEFAULT_ALPHA = 0.75
MAX_CACHED_SENTENCES = 200_000
_WORD = re.compile(r"\S+")


class ReferenceEvaluator(Evaluator):
    """An evaluator with a right answer per word. Subclasses implement ``segment_word``.

    ``alpha`` weights missed splits against spurious ones in the sequence score (0.75 in the study).
    """

    def __init__(self, alpha: float = DEFAULT_ALPHA):
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        self.alpha = alpha
        self._words: dict[str, np.ndarray | None] = {}
        self._sentences: dict[tuple[str, bool], tuple[np.ndarray, np.ndarray]] = {}
        self._padded_rows: dict[tuple[str, bool, int], np.ndarray] = {}

    @abstractmethod
    def segment_word(self, word: str) -> Sequence[str] | None:
        """The reference segmentation of ``word`` (no spaces), or None where there is none."""

    # --- reference decisions -------------------------------------------------------------------------
    def word_decisions(self, word: str) -> np.ndarray | None:
        """[len(word) - 1] bool: the reference's splits inside ``word`` (cached), or None."""
        if word not in self._words:
            segments = self.segment_word(word)
            self._words[word] = (
                None if segments is None else np.array(decisions_of(segments), dtype=bool)
            )
        return self._words[word]

    def sentence_reference(self, sentence: str, hide_spaces: bool) -> tuple[np.ndarray, np.ndarray]:
        """``(splits, known)`` for the text of ``sentence``, each ``[n - 1]`` bool (cached).

        Word boundaries are always known splits; positions inside a word are known where the word has
        a reference segmentation.
        """
        key = (sentence, hide_spaces)
        cached = self._sentences.get(key)
        if cached is not None:
            return cached
        _text, _free, boundary = decision_layout(sentence, hide_spaces)
        splits = boundary.copy()
        known = boundary.copy()
        removed = 0  # spaces removed before the current word (hidden spaces)
        previous_end = 0
        for match in _WORD.finditer(sentence):
            if hide_spaces:
                removed += match.start() - previous_end
                previous_end = match.end()
            start = match.start() - removed
            inside = self.word_decisions(match.group())
            if inside is not None and len(inside):
                splits[start : start + len(inside)] = inside
                known[start : start + len(inside)] = True
        if len(self._sentences) >= MAX_CACHED_SENTENCES:
            self._sentences.clear()
        self._sentences[key] = (splits, known)
        return splits, known

    def reference(self, batch: SegmentationBatch) -> tuple[np.ndarray, np.ndarray]:
        rows = [self._padded(s, batch.hide_spaces, batch.positions) for s in batch.sentences]
        if not rows:
            empty = np.zeros(batch.decisions.shape, dtype=bool)
            return empty, empty.copy()
        return np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])

    def _padded(self, sentence: str, hide_spaces: bool, width: int) -> np.ndarray:
        """``sentence_reference`` padded to ``width`` positions, as one [2, width] array (cached)."""
        key = (sentence, hide_spaces, width)
        padded = self._padded_rows.get(key)
        if padded is None:
            splits, known = self.sentence_reference(sentence, hide_spaces)
            padded = np.zeros((2, width), dtype=bool)
            padded[0, : len(splits)] = splits
            padded[1, : len(known)] = known
            if len(self._padded_rows) >= MAX_CACHED_SENTENCES:
                self._padded_rows.clear()
            self._padded_rows[key] = padded
        return padded

    def errors(self, batch: SegmentationBatch) -> dict[str, np.ndarray]:
        """Per row ([B] int64): ``scored`` positions, ``missed`` and ``spurious`` splits."""
        reference, known = self.reference(batch)
        scored = batch.free_mask & known
        splits = batch.splits
        return {
            "scored": scored.sum(axis=1),
            "missed": (scored & reference & ~splits).sum(axis=1),
            "spurious": (scored & ~reference & splits).sum(axis=1),
        }

    # --- rewards -------------------------------------------------------------------------------------
    def score(self, batch: SegmentationBatch) -> np.ndarray:
        errors = self.errors(batch)
        cost = self.alpha * errors["missed"] + (1.0 - self.alpha) * errors["spurious"]
        return -cost / np.maximum(errors["scored"], 1)

    def action_rewards(self, batch: SegmentationBatch) -> np.ndarray:
        reference, known = self.reference(batch)
        scored = batch.free_mask & known
        right = batch.splits == reference
        return np.where(scored, np.where(right, 1.0, -1.0), 0.0)
