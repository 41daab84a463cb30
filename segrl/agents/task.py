"""What a training run plays and is measured on, from its config: episodes, the evaluator, held-out
texts, the references its agreement is measured against, and the gold words it is scored on.

- Corpus evaluators (Morfessor; a co-trained LM): episodes are the corpus's training sentences;
  agreement is measured on the validation sentences during training and on the test sentences at the
  end; the gold metrics use the configured gold set.
- The gold evaluator (``EvaluatorSpec.plays_gold_words``): the gold words are split (seeded) into
  reward words, which are the episodes (one word per episode), and held-out words, on which
  agreement and the gold metrics are measured; the bundled corpus covers too few gold words for
  sentence-level gold rewards.

Agreement with Morfessor is always measured (a common yardstick, and the collapse diagnostic of
LM-rewarded runs); with the gold evaluator, agreement with the gold analyses too.

The task is built from a resolved config (``segrl.experiments.agent_train.resolve_train_config``):
the LM evaluator's model, whether the policy reads its teacher and the rest are decided there, once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

import torch

from segrl.agents.config import TrainConfig
from segrl.agents.segmenter import EVAL_BATCH, AgentSegmenter
from segrl.data import (
    Corpus,
    GoldWord,
    check_gold_fits,
    evaluator_corpus,
    load_corpus,
    load_gold,
    refuse_gold_file,
)
from segrl.envs.setup import EnvSetup
from segrl.errors import ConfigError
from segrl.evaluators import (
    Evaluator,
    ReferenceEvaluator,
    build_evaluator,
    encode_segmentation_batch,
)
from segrl.evaluators.gold import GoldEvaluator
from segrl.evaluators.morfessor import MorfessorEvaluator
from segrl.evaluators.registry import LMEvaluatorConfig
from segrl.lm.config import LM_DEFAULTS, WORD_DISCOVERY_EVALUATOR_CONTEXT


@dataclass
class TrainingTask:
    corpus: Corpus
    setup: EnvSetup
    """Training episodes and the evaluator that rewards them."""
    heldout: list[str]
    """Texts for agreement during training."""
    final_heldout: list[str]
    """Texts for agreement at the end."""
    references: dict[str, ReferenceEvaluator]
    gold: list[GoldWord]
    """Gold words of the final standard metrics."""
    gold_sample: list[GoldWord]
    """Gold words of the periodic standard metrics."""
    text: list[str]
    """Held-out corpus sentences for units per character during training."""
    final_text: list[str]

    @property
    def evaluator(self) -> Evaluator:
        return self.setup.evaluator


def build_task(
    config: TrainConfig, corpus: Corpus | None = None, gold: list[GoldWord] | None = None
) -> TrainingTask:
    """Load (or take) the corpus and gold set and build the task that ``config``, resolved
    (``segrl.experiments.agent_train.resolve_train_config``), describes."""
    corpus = corpus or load_corpus(config.data)
    if config.evaluator.spec.plays_gold_words:
        everything = gold if gold is not None else load_gold(config.gold.path)
        reward_words, heldout_words = split_gold(
            everything, config.gold_heldout_fraction, config.seed
        )
        if config.gold.max_words is not None:
            heldout_words = heldout_words[: config.gold.max_words]
        evaluator: Evaluator = build_evaluator(config.evaluator, corpus, reward_words)
        episodes = [g.word for g in reward_words]
        heldout = [g.word for g in heldout_words]
        references: dict[str, ReferenceEvaluator] = {
            "gold": GoldEvaluator(everything, alpha=config.evaluator.alpha)
        }
        final_gold = heldout_words
        periodic_heldout, final_heldout = heldout[: config.eval_gold_words], heldout
    else:
        if corpus.gold_from_spaces:  # word discovery: the test utterances' spaces are the gold
            check_word_discovery(config)
            final_gold = []
        else:
            final_gold = (
                gold if gold is not None else load_gold(config.gold.path, config.gold.max_words)
            )
            check_gold_fits(final_gold, corpus, config.gold.path)
        readable = evaluator_corpus(corpus, config.env.hide_spaces)  # no gold boundary in it
        evaluator = build_evaluator(config.evaluator, readable, final_gold)
        episodes = corpus.train
        references = {}
        periodic_heldout, final_heldout = corpus.valid, corpus.test
    if isinstance(evaluator, MorfessorEvaluator):
        references["morfessor"] = evaluator
    elif not corpus.gold_from_spaces:  # a reference of morphs; not of words, where it would be
        # trained on the unspaced utterances (on PTB it does not finish a seed in 50 minutes)
        morfessor = replace(config.evaluator, name="morfessor")
        references["morfessor"] = MorfessorEvaluator.from_config(morfessor, corpus)
    setup = EnvSetup.create(
        corpus=corpus,
        texts=episodes,
        max_len=config.data.max_len,
        hide_spaces=config.env.hide_spaces,
        evaluator=evaluator,
        reward=config.env.reward,
        rules=config.env.rules,
        teacher_features=bool(config.env.teacher_features),
    )
    sample = random.Random(config.seed).sample(
        final_gold, min(config.eval_gold_words, len(final_gold))
    )
    return TrainingTask(
        corpus=corpus,
        setup=setup,
        heldout=list(periodic_heldout),
        final_heldout=list(final_heldout),
        references=references,
        gold=list(final_gold),
        gold_sample=sample,
        text=list(corpus.valid),
        final_text=list(corpus.test),
    )


def check_word_discovery(config: TrainConfig) -> None:
    """A segmented corpus (``segmented:PATH``) is for word discovery: its spaces are the gold, so
    they must be hidden from the agent and no other gold set be given."""
    refuse_gold_file(config.gold.path)
    if config.evaluator.spec.plays_gold_words:
        raise ConfigError("a segmented corpus's gold is its spaces; use another evaluator")
    if not config.env.hide_spaces:
        raise ConfigError(
            f"{config.data.corpus}: a segmented corpus is for word discovery (its spaces are the "
            "gold word boundaries); add --hide-spaces"
        )


def hidden_spaces_lm_options(lm: LMEvaluatorConfig) -> LMEvaluatorConfig:
    """The LM evaluator's options with spaces hidden, for a caller that builds an evaluator from
    Python (``segrl train`` resolves them with the rest, ``resolve_train_config``): the context of
    the evaluator without a lexicon and the maximum segment length of ``LM_DEFAULTS``' row for the
    evaluator on text without spaces unless given (``WORD_DISCOVERY_EVALUATOR_CONTEXT``:
    conditioned on the characters before each segment, the lexicon-free LM is the better teacher
    of words, and a lexicon must be drawn from unspaced utterances, which ``segrl train`` gives it;
    ``WORD_MAX_SEGMENT_LENGTH``: its dynamic programs would otherwise span whole sentences), the
    rest left as they are."""
    row = LM_DEFAULTS["evaluator", "unspaced"]
    options = lm.lm
    options = replace(
        options,
        context=WORD_DISCOVERY_EVALUATOR_CONTEXT if options.context is None else options.context,
        max_segment_length=(
            row.max_segment_length
            if options.max_segment_length is None
            else options.max_segment_length
        ),
    )
    return replace(lm, lm=options)


def split_gold(
    gold: list[GoldWord], heldout_fraction: float, seed: int
) -> tuple[list[GoldWord], list[GoldWord]]:
    """A seeded split of gold words into reward words and held-out words."""
    order = list(range(len(gold)))
    random.Random(seed).shuffle(order)
    n_heldout = max(1, round(len(gold) * heldout_fraction))
    heldout = [gold[i] for i in order[:n_heldout]]
    reward = [gold[i] for i in order[n_heldout:]]
    return reward, heldout


def pretrain_evaluator(
    task: TrainingTask, segmenter: AgentSegmenter, seed: int
) -> dict[str, float]:
    """Give the evaluator the untrained policy's segmentations of every training episode (sampled,
    seeded) to learn from before training starts (``Evaluator.pretrain``; the LM evaluator's
    pre-training). Nothing is sampled for an evaluator that does not pre-train. Any agent calls this
    once, on a fresh run: a resumed run has the pre-trained evaluator in its checkpoint."""
    evaluator = task.evaluator
    if type(evaluator).pretrain is Evaluator.pretrain:
        return {}
    generator = torch.Generator().manual_seed(seed)
    sentences = task.setup.sentences
    batches = [
        segmenter.decide(
            encode_segmentation_batch(
                task.corpus.vocab,
                sentences[start : start + EVAL_BATCH],
                task.setup.max_len,
                task.setup.config.hide_spaces,
            ),
            sample=True,
            generator=generator,
        )
        for start in range(0, len(sentences), EVAL_BATCH)
    ]
    return evaluator.pretrain(batches)
