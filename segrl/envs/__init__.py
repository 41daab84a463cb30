"""Segmentation as Gymnasium environments, and their batched versions.

``import segrl`` registers ``segrl/CharSegment-v0`` and ``segrl/SentenceSegment-v0`` with Gymnasium:

    import gymnasium as gym
    import segrl  # noqa: F401  (registers the environments)

    env = gym.make("segrl/CharSegment-v0", evaluator="morfessor", reward="per-action")
"""

from segrl.envs.base import SegmentationEnv
from segrl.envs.char_segment import CharSegmentEnv
from segrl.envs.episodes import EpisodeSlots
from segrl.envs.sentence_segment import SentenceSegmentEnv
from segrl.envs.setup import REWARD_MODES, RULE_SETS, EnvConfig, EnvSetup, SentenceSource
from segrl.envs.vector import (
    VectorCharSegmentEnv,
    VectorSegmentationEnv,
    VectorSentenceSegmentEnv,
)

CHAR_SEGMENT_ID = "segrl/CharSegment-v0"
SENTENCE_SEGMENT_ID = "segrl/SentenceSegment-v0"

__all__ = [
    "CHAR_SEGMENT_ID",
    "REWARD_MODES",
    "RULE_SETS",
    "SENTENCE_SEGMENT_ID",
    "CharSegmentEnv",
    "EnvConfig",
    "EnvSetup",
    "EpisodeSlots",
    "SegmentationEnv",
    "SentenceSegmentEnv",
    "SentenceSource",
    "VectorCharSegmentEnv",
    "VectorSegmentationEnv",
    "VectorSentenceSegmentEnv",
]
