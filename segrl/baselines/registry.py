"""Segmenters by name."""

from __future__ import annotations

from segrl.baselines.base import Segmenter
from segrl.baselines.flatcat import FlatCatSegmenter
from segrl.baselines.morfessor import MorfessorSegmenter
from segrl.baselines.sentencepiece import SentencePieceBPE, SentencePieceUnigram
from segrl.baselines.trivial import CharacterSegmenter, WordSegmenter
from segrl.baselines.yttm import YttmBPE, yttm_available
from segrl.errors import ConfigError

SEGMENTERS: dict[str, type[Segmenter]] = {
    cls.method: cls
    for cls in (
        MorfessorSegmenter,
        FlatCatSegmenter,  # after Morfessor: `--method all` trains its Baseline first
        SentencePieceBPE,
        SentencePieceUnigram,
        YttmBPE,
        CharacterSegmenter,
        WordSegmenter,
    )
}


def available_methods() -> list[str]:
    """Names of the segmenters usable here (``yttm-bpe`` only where youtokentome is installed)."""
    return [m for m in SEGMENTERS if m != YttmBPE.method or yttm_available()]


def segmenter_class(method: str) -> type[Segmenter]:
    try:
        return SEGMENTERS[method]
    except KeyError:
        raise ConfigError(
            f"unknown segmenter {method!r}; choose one of: {', '.join(SEGMENTERS)}"
        ) from None
