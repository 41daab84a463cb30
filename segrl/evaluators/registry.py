"""Evaluators by name, and their config.

Each evaluator class has ``from_config(config, corpus, gold) -> Evaluator``; ``EVALUATORS`` names the
class by import path so that naming one does not import the others (an LM evaluator imports torch).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from segrl.errors import ConfigError

if TYPE_CHECKING:
    from segrl.data import Corpus, GoldWord
    from segrl.evaluators.base import Evaluator

EVALUATORS: dict[str, str] = {
    "morfessor": "segrl.evaluators.morfessor:MorfessorEvaluator",
    "gold": "segrl.evaluators.gold:GoldEvaluator",
}


@dataclass
class EvaluatorConfig:
    """Which evaluator rewards the agent, and its options."""

    name: str = "morfessor"
    """``morfessor`` (a Morfessor Baseline model of the corpus) or ``gold`` (a gold segmentation)."""
    alpha: float = 0.75
    """Weight of missed splits against spurious ones in the sequence score (the study's 0.75)."""
    cache_dir: str | None = None
    """Where trained Morfessor models are cached; None uses ``$SEGRL_CACHE_DIR`` or ~/.cache/segrl."""
    seed: int = 0
    """Seed of Morfessor's training."""


def evaluator_class(name: str) -> type[Evaluator]:
    try:
        module, _, attribute = EVALUATORS[name].partition(":")
    except KeyError:
        raise ConfigError(
            f"unknown evaluator {name!r}; choose one of: {', '.join(EVALUATORS)}"
        ) from None
    return getattr(importlib.import_module(module), attribute)


def build_evaluator(
    config: EvaluatorConfig, corpus: Corpus, gold: Sequence[GoldWord] | None = None
) -> Evaluator:
    """The evaluator ``config.name`` names, built for ``corpus`` (and ``gold`` where it needs one)."""
    if not 0.0 <= config.alpha <= 1.0:
        raise ConfigError(f"evaluator.alpha must be in [0, 1], got {config.alpha}")
    return evaluator_class(config.name).from_config(config, corpus, gold)
