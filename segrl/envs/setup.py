"""What every segmentation environment is made of: a corpus, the sentences it plays, an evaluator, a
reward mode and a rule set; resolved once from the options ``gymnasium.make`` passes.

    setup = EnvSetup.create(corpus="my_texts/", evaluator="morfessor", reward="per-action")
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from segrl.config import DataConfig, validate_config
from segrl.data import Corpus, GoldWord, evaluator_corpus, load_corpus
from segrl.errors import ConfigError, DataError
from segrl.evaluators import (
    RULES,
    Evaluator,
    EvaluatorConfig,
    build_evaluator,
    decision_layout,
)

RewardMode = Literal["sequence", "per-action"]
RuleSet = Literal["binary", "full"]
REWARD_MODES: tuple[str, ...] = typing.get_args(RewardMode)
RULE_SETS = {"binary": 2, "full": len(RULES)}
"""Actions per decision: ``binary`` (no split / split, the study's main set) or ``full`` (``RULES``)."""


@dataclass
class EnvConfig:
    """How episodes are played (the corpus, its ``max_len`` and the evaluator are configured apart)."""

    reward: RewardMode = "per-action"
    """``sequence``: one score per sentence, at the end; ``per-action``: a reward for every decision."""
    hide_spaces: bool = False
    """False: spaces are known word boundaries (the study's setting); True: spaces are removed and
    word boundaries must be discovered too."""
    rules: RuleSet = "binary"
    """``binary`` (no split / split) or ``full`` (also split with repeat, delete, modify)."""
    teacher_features: bool | None = None
    """Observations also carry ``teacher`` [P]: the evaluator's own log-odds of a split at every
    position (``Evaluator.teacher``; the LM evaluator's posterior), so that a student can read what
    its teacher would decide. Binary rules only. None (off for an environment): ``segrl train``
    resolves it to on where its reinforce agent's LM evaluator has a lexicon
    (``segrl.experiments.agent_train.resolve_train_config``)."""

    def check(self, prefix: str) -> None:
        if self.teacher_features and self.rules != "binary":
            raise ConfigError(f"{prefix}teacher_features goes with binary rules only")


def has_decision(sentence: str, hide_spaces: bool) -> bool:
    """Whether ``sentence`` leaves the agent at least one decision."""
    _text, free, _boundary = decision_layout(sentence, hide_spaces)
    return bool(free.any())


@functools.lru_cache(maxsize=4)
def _load_corpus_cached(path: str | None, max_len: int) -> Corpus:
    return load_corpus(DataConfig(corpus=path, max_len=max_len))


def resolve_corpus(corpus: Corpus | str | Path | None, max_len: int | None) -> Corpus:
    """A ``Corpus`` as is; a path (or None for the bundled corpus) loaded with default settings."""
    if isinstance(corpus, Corpus):
        return corpus
    default = DataConfig().max_len
    return _load_corpus_cached(None if corpus is None else str(corpus), max_len or default)


@dataclass
class EnvSetup:
    """Everything an environment needs, resolved and checked."""

    corpus: Corpus
    sentences: list[str]
    """The sentences episodes are drawn from (only those that leave at least one decision)."""
    weights: list[int] | None
    """For a word list, how often each of ``sentences`` is drawn relative to the others (its
    dampened count); None draws every sentence once per epoch."""

    @functools.cached_property
    def draw_probabilities(self) -> np.ndarray | None:
        """``weights`` normalised to sum to 1 (computed once); None without weights."""
        if self.weights is None:
            return None
        w = np.asarray(self.weights, dtype=np.float64)
        if w.shape != (len(self.sentences),) or (w < 0).any() or w.sum() <= 0:
            raise DataError("weights must be one non-negative number per text, not all zero")
        return w / w.sum()

    evaluator: Evaluator
    config: EnvConfig
    max_len: int
    """Width ``L`` of the character arrays; there are ``L - 1`` positions."""

    @property
    def n_actions(self) -> int:
        return RULE_SETS[self.config.rules]

    @property
    def vocab_size(self) -> int:
        return len(self.corpus.vocab)

    @classmethod
    def create(
        cls,
        corpus: Corpus | str | Path | None = None,
        split: str = "train",
        texts: Sequence[str] | None = None,
        max_len: int | None = None,
        hide_spaces: bool = False,
        evaluator: str | Evaluator = "morfessor",
        reward: str = "per-action",
        rules: str = "binary",
        gold: Sequence[GoldWord] | None = None,
        teacher_features: bool = False,
    ) -> EnvSetup:
        """Resolve an environment's options (see ``CharSegmentEnv`` for what each means)."""
        config = EnvConfig(
            reward=reward, hide_spaces=hide_spaces, rules=rules, teacher_features=teacher_features
        )
        validate_config(config, "env.")
        resolved = resolve_corpus(corpus, max_len)
        width = max_len or resolved.settings.get("normalization", {}).get("max_len", 128)
        if width < 2:
            raise ConfigError(f"max_len must be at least 2, got {width}")
        if texts is not None:
            source = list(texts)
        else:  # as the corpus loader does, sentences longer than max_len are left out
            source = [s for s in resolved.split(split) if len(s) <= width]
        too_long = [t for t in source if len(t) > width]
        if too_long:
            raise DataError(
                f"{len(too_long)} of the texts are longer than max_len={width} characters "
                f"(the first: {too_long[0][:60]!r}...); raise max_len or shorten them"
            )
        sentences = [s for s in source if has_decision(s, hide_spaces)]
        if not sentences:
            raise DataError(
                f"no text of at most max_len={width} characters leaves a decision to make (with "
                "known word boundaries, only words of two or more characters do); give longer "
                "texts, or raise max_len"
            )
        if isinstance(evaluator, str):
            readable = evaluator_corpus(resolved, hide_spaces)  # no gold boundary to learn from
            evaluator = build_evaluator(EvaluatorConfig(name=evaluator), readable, gold)
        elif not isinstance(evaluator, Evaluator):
            raise ConfigError(
                f"evaluator must be a name or an Evaluator, got {type(evaluator).__name__}"
            )
        if teacher_features and evaluator.teacher is None:
            raise ConfigError(
                f"teacher_features: the {evaluator.name} evaluator has no boundary probabilities "
                "of its own to show; use the lm evaluator (an slm)"
            )
        weights = resolved.weights(sentences)
        return cls(resolved, sentences, weights, evaluator, config, int(width))


class SentenceSource:
    """Sentences in seeded shuffled epochs: every sentence once per epoch; resumable.

    With ``probabilities`` (a word list's dampened counts, normalised), an epoch is as many draws
    with replacement, each text drawn with its probability.
    ``state_dict``/``load_state_dict`` keep the epoch's order and the cursor, so a resumed training
    run sees the same sentences as an uninterrupted one.
    """

    def __init__(
        self, sentences: Sequence[str], seed: int = 0, probabilities: np.ndarray | None = None
    ):
        if not sentences:
            raise DataError("no sentences to draw episodes from")
        self.sentences = list(sentences)
        self.p = probabilities
        """Each sentence's probability per draw (``EnvSetup.draw_probabilities``); None: epochs."""
        self.rng = np.random.default_rng(seed)
        self.order = self._new_order()
        self.cursor = 0
        self.epoch = 0

    def _new_order(self) -> np.ndarray:
        n = len(self.sentences)
        if self.p is None:
            return self.rng.permutation(n)
        return self.rng.choice(n, size=n, replace=True, p=self.p)

    def take(self, n: int) -> list[str]:
        out = []
        for _ in range(n):
            if self.cursor == len(self.order):
                self.order = self._new_order()
                self.cursor = 0
                self.epoch += 1
            out.append(self.sentences[self.order[self.cursor]])
            self.cursor += 1
        return out

    def state_dict(self) -> dict:
        return {
            "rng": self.rng.bit_generator.state,
            "order": self.order.copy(),
            "cursor": self.cursor,
            "epoch": self.epoch,
        }

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.order = np.asarray(state["order"])
        self.cursor = int(state["cursor"])
        self.epoch = int(state["epoch"])
