"""The two trivial segmentations every comparison needs: all characters and whole words."""

from __future__ import annotations

from segrl.baselines.base import Segmenter
from segrl.data.corpus import Corpus


class CharacterSegmenter(Segmenter):
    """Every character is a unit (the all-splits collapse of the study)."""

    method = "characters"

    def _train(self, corpus: Corpus) -> None:
        pass

    def _segment(self, word: str) -> list[str]:
        return list(word)


class WordSegmenter(Segmenter):
    """Every word is one unit (the no-splits collapse of the study)."""

    method = "words"

    def _train(self, corpus: Corpus) -> None:
        pass

    def _segment(self, word: str) -> list[str]:
        return [word]
