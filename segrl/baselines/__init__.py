"""Classic segmenters behind one interface: Morfessor Baseline, Morfessor FlatCat, SentencePiece
BPE and unigram, youtokentome BPE (optional), characters, words."""

from segrl.baselines.base import Segmenter
from segrl.baselines.flatcat import FlatCatSegmenter
from segrl.baselines.morfessor import MorfessorSegmenter
from segrl.baselines.registry import SEGMENTERS, available_methods, segmenter_class
from segrl.baselines.sentencepiece import SentencePieceBPE, SentencePieceUnigram
from segrl.baselines.trivial import CharacterSegmenter, WordSegmenter
from segrl.baselines.yttm import YttmBPE

__all__ = [
    "SEGMENTERS",
    "CharacterSegmenter",
    "FlatCatSegmenter",
    "MorfessorSegmenter",
    "Segmenter",
    "SentencePieceBPE",
    "SentencePieceUnigram",
    "WordSegmenter",
    "YttmBPE",
    "available_methods",
    "segmenter_class",
]
