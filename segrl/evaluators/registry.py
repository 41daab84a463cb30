"""Evaluators by name, and their config.

Each evaluator class has ``from_config(config, corpus, gold) -> Evaluator``; ``EVALUATORS`` names the
class by import path so that naming one does not import the others (an LM evaluator imports torch).
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Literal

from segrl.config import validate_config
from segrl.errors import ConfigError
from segrl.lm.config import LMConfig, table_lm

if TYPE_CHECKING:
    from pathlib import Path

    import torch

    from segrl.data import Corpus, GoldWord
    from segrl.evaluators.base import Evaluator, Teacher

EvaluatorName = Literal["morfessor", "gold", "lm"]
"""The evaluators ``EvaluatorConfig.name`` may name, in the order of ``EVALUATORS``."""


@dataclass(frozen=True)
class EvaluatorSpec:
    """An evaluator: its class and what an agent's config may ask of its kind before it is built
    (``EvaluatorConfig``'s methods read these; the agents never compare an evaluator's name)."""

    path: str
    """Its ``Evaluator`` subclass, ``"module:Class"``."""
    mirrored: bool = False
    """Whether its per-action rewards are mirrored (see ``EvaluatorConfig.mirrored_action_rewards``);
    for an LM evaluator, its reward variant's ``LMRewardSpec.mirrored`` says."""
    lm: bool = False
    """Whether it is a co-trained language model: its options are ``evaluator.lm``
    (``LMEvaluatorConfig``), its rewards the ``LM_REWARDS`` variant that
    ``evaluator.lm.reward_variant`` chooses, and an ``slm``'s posterior is a teacher a policy can read (``Evaluator.teacher``)."""
    plays_gold_words: bool = False
    """Whether the agent's episodes are the gold words it rewards against (most of them, the rest
    held out and scored), instead of the corpus's sentences (``segrl.agents.task.build_task``)."""


EVALUATORS: dict[str, EvaluatorSpec] = {
    "morfessor": EvaluatorSpec("segrl.evaluators.morfessor:MorfessorEvaluator", mirrored=True),
    "gold": EvaluatorSpec(
        "segrl.evaluators.gold:GoldEvaluator", mirrored=True, plays_gold_words=True
    ),
    "lm": EvaluatorSpec("segrl.evaluators.lm:LMEvaluator", lm=True),
}

LMSequenceReward = Literal["likelihood", "entropy", "marginal", "space-penalty"]
LMPerActionReward = Literal["posterior", "flip", "resample", "incremental", "description-length"]
LMReward = Literal[LMSequenceReward, LMPerActionReward]
LM_SEQUENCE_REWARDS: tuple[str, ...] = typing.get_args(LMSequenceReward)
LM_PER_ACTION_REWARDS: tuple[str, ...] = typing.get_args(LMPerActionReward)
"""The LM evaluator's rewards by reward mode, the default first (``LM_REWARDS`` says what each
can do, ``segrl.evaluators.lm`` computes them)."""
STUDENT_PER_ACTION_REWARD = "description-length"
"""The LM's per-action reward where ``evaluator.lm.reward_variant`` is unset and the policy reads
its teacher (``env.teacher_features``; REINFORCE on a word list or text without spaces, by
default), instead of the mode's first (``posterior``): a student that reads its teacher's log-odds
and is rewarded by them only becomes its teacher's posterior; rewarded by the description length of
its batch's segmentation it passes its teacher on word lists
(docs/studies/2026-11-29-student-reward.md) and on Brent (docs/studies/2026-12-06-words-student.md)."""


@dataclass(frozen=True)
class LMRewardSpec:
    """An LM reward variant (``LMEvaluatorConfig.reward_variant``): what the configs, the
    environments and the learners may ask of it. ``segrl.evaluators.lm`` computes it (``LMEvaluator.SEQUENCE_REWARDS``
    or ``LMEvaluator.ACTION_REWARDS``)."""

    mode: str
    """The reward mode it belongs to: ``sequence`` (a score per sentence) or ``per-action``."""
    mirrored: bool = False
    """Per-action: the other action at a decision would have been rewarded with minus the reward,
    so a learner may take the expectation over both actions
    (``ReinforceConfig.per_action_gradient``)."""
    reads_policy: bool = False
    """It reads the sampling policy's probabilities (``SegmentationBatch.policy_probs``), which only
    a learner that decides a whole sentence at once hands over (``space-penalty`` only with
    ``gamma > 0``)."""
    causal: bool = False
    """Its reward at a decision depends only on the decisions up to it (or it is given once, at the
    end), so ``CharSegment`` can give it step by step (``Evaluator.check_stepwise``)."""
    needs_slm: bool = False
    """It reads the ``slm``'s exact posterior (``LMEvaluatorConfig.check``)."""
    forward_kl: bool = False
    """REINFORCE fits it by the forward KL unless told otherwise
    (``TrainConfig.per_action_gradient``): its optimum is the LM's own posterior."""
    counts_segments: bool = False
    """It prices the lexicon of the agent's segmentations (``description_length_counts``)."""


LM_REWARDS: dict[str, LMRewardSpec] = {
    "likelihood": LMRewardSpec("sequence", causal=True),
    "entropy": LMRewardSpec("sequence", reads_policy=True),
    "marginal": LMRewardSpec("sequence", reads_policy=True),
    "space-penalty": LMRewardSpec("sequence", reads_policy=True),
    "posterior": LMRewardSpec("per-action", mirrored=True, needs_slm=True, forward_kl=True),
    "flip": LMRewardSpec("per-action", mirrored=True),
    "resample": LMRewardSpec("per-action", reads_policy=True),
    "incremental": LMRewardSpec("per-action", causal=True),
    "description-length": LMRewardSpec("per-action", mirrored=True, counts_segments=True),
}
"""Every LM reward variant and what it can do, each mode's in the order of its ``Literal``
(``LMSequenceReward``, ``LMPerActionReward``; ``tests/test_architecture.py`` checks they agree)."""


def lm_rewards(reward_mode: str) -> tuple[str, ...]:
    """The LM reward variants of ``reward_mode`` (``sequence`` or ``per-action``), the default
    first."""
    return LM_SEQUENCE_REWARDS if reward_mode == "sequence" else LM_PER_ACTION_REWARDS


LMObjective = Literal["joint", "marginal"]

EvaluatorTexts = Literal["word-types", "sentences", "corpus-words"]
"""What the LM evaluator's marginal objective reads (``LMEvaluatorConfig.texts``)."""


def evaluator_lm() -> LMConfig:
    """The LM evaluator's model by default: ``slm``, smaller than ``segrl lm train``'s, the options
    left unset resolved by the evaluator's rows of ``segrl.lm.config.LM_DEFAULTS`` (where the job
    starts, ``segrl.experiments.agent_train.resolve_train_config``): without context (with the LSTM
    context where spaces are hidden), its lexicon and its price decided by the corpus, the lexicon's
    logits learnt directly, as ``segrl lm train``'s."""
    return table_lm(hidden_dim=128, speller_dim=128)


@dataclass
class LMEvaluatorConfig:
    """The co-trained language model evaluator: its model (``lm``), its reward, its training."""

    lm: LMConfig = field(default_factory=evaluator_lm)
    """The LM (``segrl.lm.LMConfig``; ``evaluator.lm.lm.hidden_dim`` and so on), named ``lm`` as
    in ``segrl lm train`` and ``segrl lm levels`` (``arch`` in configs saved before). Its defaults
    here (the options left None resolve by ``segrl.lm.config.LM_DEFAULTS``' evaluator rows):
    ``slm`` without context, 128 wide; with hidden spaces and no lexicon the LSTM context
    (``WORD_DISCOVERY_EVALUATOR_CONTEXT``). ``lexicon_size`` None: by the corpus: on a word list
    and, with hidden spaces, on a segmented corpus (its unspaced utterances' substrings), for a
    student that reads its teacher, ``SLM_LEXICON_SIZE`` entries whose spelling costs
    ``LEXICON_COST`` (the teacher of ``segrl lm train``), on running text none (there the
    lexicon-free LM's posterior in the sentence is the better teacher;
    docs/studies/2026-11-26-teacher.md); 0: no lexicon. ``lexicon_cost`` None: ``LEXICON_COST``
    where the resolved lexicon has entries, else 0. ``lexicon_logits`` None: ``direct``, as
    ``segrl lm train``'s (model files saved before the option load as ``projected``)."""
    reward_variant: LMReward | None = None
    """The LM's reward within the reward mode (``env.reward``; ``segrl.evaluators.lm``; named
    ``reward`` in configs saved before): with sequence rewards ``likelihood``,
    ``entropy``, ``marginal``, ``space-penalty``; with per-action rewards ``posterior``, ``flip``,
    ``resample``, ``incremental``, ``description-length``. None: the first of the reward mode's
    list (resolved so where ``segrl train`` starts)."""
    objective: LMObjective = "marginal"
    """How the LM learns from the agent's texts: ``joint`` (``-log p(X, S)`` under the agent's
    segmentations, the study's co-training) or ``marginal`` (``-log p(X)`` over all segmentations,
    ``slm`` only: the agent's segmentations do not feed back into the LM)."""
    texts: EvaluatorTexts = "word-types"
    """What the marginal objective reads: of the sampled sentences, ``word-types`` (their distinct
    words, each a text of its own, as ``segrl lm train`` does: a frequent word counts once, as in
    Morfessor) or ``sentences`` (as they are; with hidden spaces a sentence is one word); or
    ``corpus-words``: ``batch_size`` words drawn from the training corpus's word types by
    log-dampened count, whatever the agent samples, so that a word list and running text give the
    LM the same kind of data (on running text the sampled sentences' word types are mostly the
    frequent short words, in every batch)."""
    description_length_counts: Literal["batch", "corpus"] = "batch"
    """Whose segments the ``description-length`` reward's lexicon counts: ``batch``, the batch's texts
    alone (a piece that other words of the batch use is nearly free, and the pieces 64 random words
    share are the frequent ones), or ``corpus``, the latest segmentation of every training text, as
    Morfessor's lexicon (nearly every short piece is in it, so splitting anywhere is nearly free:
    lower in every language but English over three seeds, docs/studies/2026-11-26-teacher.md)."""
    description_length_weight: float = 1.0
    """The ``description-length`` reward's weight on the lexicon's part (the LM's corpus part 1), as
    Morfessor's corpus weight sets the balance the other way round."""
    posterior_floor: float = 1e-6
    """The ``posterior`` reward reads the LM's boundary probability clamped to ``[floor, 1 - floor]``,
    so a decision's reward is at most ``log((1 - floor) / floor)`` nats either way; with the entropy
    bonus at 2, the policy's optimum ``pi = q`` then never drops below ``floor``, so splits keep being
    sampled (and rewarded) where the LM changes its mind. Its decisions (``q > 0.5``) stay the same."""
    gamma: float = 0.1
    """Weight of the policy's entropy in the ``entropy`` and ``space-penalty`` rewards."""
    beta: float = 1.0
    """Penalty per word boundary the agent does not split (``space-penalty``; hidden spaces)."""
    pretrain_epochs: int = 1
    """Epochs over the untrained policy's segmentations of the training sentences before training."""
    pretrain_steps: int | None = None
    """LM updates of that pre-training at most (None: all of ``pretrain_epochs``, which ``segrl
    train`` resolves to their updates): a budget in updates where an epoch of the corpus is more
    than a run can afford (an epoch of PTB is 657 updates of 64 sentences)."""
    buffer_size: int = 4096
    """Segmented sentences kept for co-training (the most recent ones)."""
    update_every: int = 1
    """Co-training steps happen every this many agent batches."""
    batch_size: int = 64
    """Sentences per LM update."""
    lr: float = 2e-3
    weight_decay: float = 0.0
    prune_uses: Literal["updates", "corpus"] = "corpus"
    """Which uses a pruning of the LM's lexicon weighs (``LMConfig.lexicon_prune``), every epoch of
    the corpus's word types in updates: ``corpus``, an exact count over the corpus's training word
    types (``LMTrainer.count_uses``), as ``segrl lm train``'s epoch counts them, or ``updates``,
    those counted in the texts of its updates (drawn from the agent's replay buffer: the words few
    draws hold read as unused, and every pruning takes some of their entries for good; Mongolian's
    lexicon shrank from 1,873 entries to 293 in 6,000 agent updates and the agent's F1 from 0.75 to
    0.68, docs/studies/2026-11-28-transfer.md)."""
    patience: int | None = None
    """Early stopping of the LM's co-training: every epoch of the corpus's word types in updates
    (``LMEvaluator.check_every``) the LM's marginal bits per character on the corpus's held-out
    word types are measured (``slm``), and once they have not improved for ``patience`` such
    checks the LM takes back its best weights and stops learning, as ``segrl lm train`` stops on
    its patience; the agent then learns from a fixed teacher. A check right after a pruning that
    changed the lexicon by more than ``segrl.lm.training.SETTLED_PRUNING`` is the new best whatever
    its bits. 0: the LM learns as long as the agent does. None: ``EVALUATOR_PATIENCE`` for an
    ``slm`` that reads spaced text (``segrl train`` resolves it), 0 with hidden spaces (where
    the LM learns utterances, not word types) or another LM."""

    OLD_NAMES: ClassVar[dict[str, str]] = {
        "arch": "lm",
        "reward": "reward_variant",
        **{f.name: f"lm.{f.name}" for f in dataclasses.fields(LMConfig)},
    }
    """Options under their old names, read as the new ones (``build_config``), so that saved
    configs, run folders and ``--set`` still load: the LM's table was ``arch``
    (``evaluator.lm.arch.hidden_dim``), and before that its options sat flat here
    (``evaluator.lm.hidden_dim``); the reward variant was ``reward``, the word that names the
    reward mode (``env.reward``)."""

    def variant(self, reward_mode: str) -> str:
        """The reward variant used with ``reward_mode`` (``sequence`` or ``per-action``)."""
        choices = lm_rewards(reward_mode)
        return self.reward_variant if self.reward_variant in choices else choices[0]

    def check(self, prefix: str) -> None:
        """Options that must go together, and ranges (``segrl.config.validate_config`` checks the
        choices, and ``lm`` before this; ``TrainConfig`` that the reward goes with the reward
        mode)."""
        if self.lm.model != "slm" and (
            self.objective == "marginal" or LM_REWARDS[self.variant("per-action")].needs_slm
        ):
            raise ConfigError(
                f"the marginal objective and the posterior reward need {prefix}lm.model = 'slm'"
            )
        if self.lm.model != "slm" and self.patience:
            raise ConfigError(
                f"{prefix}patience reads the LM's marginal bits per character: it needs "
                f"{prefix}lm.model = 'slm' (or {prefix}patience = 0)"
            )
        if self.description_length_weight < 0:
            raise ConfigError(
                f"{prefix}description_length_weight must be at least 0, got "
                f"{self.description_length_weight}"
            )
        if (
            min(self.buffer_size, self.update_every, self.batch_size) < 1
            or min(self.pretrain_epochs, self.patience or 0) < 0
            or (self.pretrain_steps is not None and self.pretrain_steps < 0)
        ):
            raise ConfigError(
                f"{prefix}buffer_size, update_every and batch_size must be at least 1, "
                "pretrain_epochs, pretrain_steps and patience at least 0"
            )
        if self.texts == "corpus-words" and self.objective != "marginal":
            raise ConfigError(
                f"{prefix}texts = 'corpus-words' goes with the marginal objective only (the "
                "joint one learns the agent's segmentations of its own sentences)"
            )
        if not 0 < self.posterior_floor < 0.5:
            raise ConfigError(
                f"{prefix}posterior_floor must be between 0 and 0.5, got {self.posterior_floor}"
            )
        if self.lr <= 0 or self.gamma < 0 or self.beta < 0:
            raise ConfigError(f"{prefix}lr must be positive, gamma and beta at least 0")


EVALUATOR_PATIENCE = 2
"""``LMEvaluatorConfig.patience`` where it is left None, as ``segrl lm train``'s patience."""


def evaluator_patience(config: LMEvaluatorConfig, hide_spaces: bool) -> int:
    """``config.patience``, or where None: ``EVALUATOR_PATIENCE`` for an ``slm`` reading spaced
    text, else 0."""
    if config.patience is not None:
        return config.patience
    return EVALUATOR_PATIENCE if config.lm.model == "slm" and not hide_spaces else 0


@dataclass
class EvaluatorConfig:
    """Which evaluator rewards the agent, and its options."""

    name: EvaluatorName = "morfessor"
    """``morfessor`` (a Morfessor Baseline model of the corpus), ``gold`` (a gold segmentation) or
    ``lm`` (a co-trained segmental language model)."""
    alpha: float = 0.75
    """Weight of missed splits against spurious ones in the sequence score (the study's 0.75)."""
    cache_dir: str | None = None
    """Where trained Morfessor models are cached; None uses ``$SEGRL_CACHE_DIR`` or ~/.cache/segrl
    (resolved to that folder where ``segrl train`` starts; "": no cache)."""
    seed: int = 0
    """Seed of Morfessor's training (and of the LM evaluator's sampling)."""
    lm: LMEvaluatorConfig = field(default_factory=LMEvaluatorConfig)
    """Options of the ``lm`` evaluator."""

    def check(self, prefix: str) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise ConfigError(f"{prefix}alpha must be in [0, 1], got {self.alpha}")

    @property
    def spec(self) -> EvaluatorSpec:
        """The registry's entry for this evaluator (``EVALUATORS``)."""
        return EVALUATORS[self.name]

    def reward_variant(self, reward_mode: str) -> str | None:
        """The reward variant used with ``reward_mode`` where the evaluator has them (an LM's,
        ``LMEvaluatorConfig.variant``), else None."""
        return self.lm.variant(reward_mode) if self.spec.lm else None

    def check_reward_mode(self, reward_mode: str) -> None:
        """Raise ``ConfigError`` where the reward variant asked for
        (``evaluator.lm.reward_variant``) is not one of ``reward_mode``'s."""
        rewards = lm_rewards(reward_mode)
        variant = self.lm.reward_variant
        if self.spec.lm and variant is not None and variant not in rewards:
            raise ConfigError(
                f"the LM reward {variant!r} does not go with {reward_mode} rewards; choose "
                f"one of: {', '.join(rewards)}"
            )

    def mirrored_action_rewards(self) -> bool:
        """Whether the per-action rewards are mirrored: at every decision the other action would
        have been rewarded with minus the reward of the one taken (agreement +-1 with Morfessor or
        gold, ``LMRewardSpec.mirrored``), so that a learner can take the expectation over both
        actions instead of sampling one (``ReinforceConfig.per_action_gradient = "expected"``)."""
        variant = self.reward_variant("per-action")
        return self.spec.mirrored if variant is None else LM_REWARDS[variant].mirrored

    def fits_by_forward_kl(self) -> bool:
        """Whether REINFORCE fits the per-action rewards by the forward KL unless told otherwise
        (``LMRewardSpec.forward_kl``: the LM's ``posterior``)."""
        variant = self.reward_variant("per-action")
        return variant is not None and LM_REWARDS[variant].forward_kl

    def teaches(self) -> bool:
        """Whether the evaluator may give a policy its boundary log-odds to read
        (``env.teacher_features``, ``Evaluator.teacher``): an LM's."""
        return self.spec.lm

    def teaches_by_default(self, hide_spaces: bool) -> bool:
        """Whether a policy that can read its teacher does so where ``env.teacher_features`` is left
        unset (``segrl train`` resolves it): the evaluator's LM, resolved, is an ``slm`` with a
        lexicon, a confident teacher that decides by whole words (docs/studies/2026-11-26-teacher.md),
        or any LM on text without spaces (``hide_spaces``, word discovery), where a student that
        reads only the characters stayed below its teacher on Brent and one that reads it passed it
        on all three corpora (docs/studies/2026-12-06-words-student.md)."""
        lm = self.lm.lm
        lexicon = lm.model == "slm" and lm.lexicon_size > 0
        return self.teaches() and (lexicon or hide_spaces)


def evaluator_class(name: str) -> type[Evaluator]:
    try:
        module, _, attribute = EVALUATORS[name].path.partition(":")
    except KeyError:
        raise ConfigError(
            f"unknown evaluator {name!r}; choose one of: {', '.join(EVALUATORS)}"
        ) from None
    return getattr(importlib.import_module(module), attribute)


TEACHER = "segrl.evaluators.lm:PosteriorTeacher"
"""The class of the teachers a saved agent keeps beside its policy (``Teacher``), by import path: the
LM evaluator's posterior, the one an evaluator gives (``EvaluatorConfig.teaches``)."""


def load_teacher(path: Path, device: str | torch.device = "cpu") -> Teacher:
    """The teacher saved in the folder ``path`` (``Teacher.save``), for a saved agent whose policy
    reads it; a ``ModelError`` where there is none or it is damaged."""
    module, _, attribute = TEACHER.partition(":")
    return getattr(importlib.import_module(module), attribute).load(path, device)


def build_evaluator(
    config: EvaluatorConfig, corpus: Corpus, gold: Sequence[GoldWord] | None = None
) -> Evaluator:
    """The evaluator ``config.name`` names, built for ``corpus`` (and ``gold`` where it needs one)."""
    validate_config(config, "evaluator.")
    return evaluator_class(config.name).from_config(config, corpus, gold)
