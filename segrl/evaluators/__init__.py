"""Reward sources behind one interface (``Evaluator``): Morfessor, a gold segmentation (and a
co-trained language model). ``SegmentationBatch`` is what they all score."""

from segrl.evaluators.base import (
    NO_SPLIT,
    RULES,
    SPLIT,
    Evaluator,
    SegmentationBatch,
    decision_layout,
    encode_segmentation_batch,
    text_of,
    with_spaces,
)
from segrl.evaluators.reference import ReferenceEvaluator
from segrl.evaluators.registry import EVALUATORS, EvaluatorConfig, build_evaluator, evaluator_class

__all__ = [
    "EVALUATORS",
    "NO_SPLIT",
    "RULES",
    "SPLIT",
    "Evaluator",
    "EvaluatorConfig",
    "ReferenceEvaluator",
    "SegmentationBatch",
    "build_evaluator",
    "decision_layout",
    "encode_segmentation_batch",
    "evaluator_class",
    "text_of",
    "with_spaces",
]
