"""A co-trained segmental language model as the evaluator (spec §6): rewards from ``log p(X, S)``.

The LM (``segrl.lm``, ``slm`` by default) is pre-trained on the untrained policy's segmentations
(``pretrain``, ``pretrain_epochs`` epochs over the training sentences), then learns while the agent
does (``update``): every batch the agent segments goes into a replay buffer of the most recent
``buffer_size`` sentences, and every ``update_every`` batches the LM takes one step (its own Adam) on
``batch_size`` sentences drawn from it, by the ``objective``:

- ``joint``: ``-log p(X, S)`` under the agent's segmentations (the study's co-training);
- ``marginal`` (``slm``): ``-log p(X)``, summed over every segmentation; the agent's segmentations do
  not feed back into the LM, which learns the texts the agent sees on its own (by default the
  distinct words of the sampled sentences, ``texts = "word-types"``).

Every epoch of the corpus's word types in updates, an LM with a pruned lexicon prunes it on the uses
of every training word type (``prune_uses``), and the LM's marginal bits per character on the
corpus's held-out word types are checked: once they have not improved for ``patience`` checks the LM
takes back its best weights and learns no more, as ``segrl lm train`` stops (``patience``).

Rewards (higher is better; ``|X|`` is the text's characters plus one for its end, as bits per
character count them; ``pi`` the sampling policy, ``pi(S|X) = prod_i pi(s_i|X)`` over free positions):

Sequence (``score``):

- ``likelihood``: ``log p(X, S) / |X|`` (eq. 5.1).
- ``entropy``: ``(log p(X, S) + gamma H(pi(.|X))) / |X|``, the policy's entropy (a sum over
  positions) rewarded, so that it slows premature convergence (eq. 5.8 with the sign that does).
- ``marginal``: ``(log p(X, S) - log pi(S|X)) / |X|``, the ``P(X)`` correction (eq. 5.9): a
  one-sample estimate of ``log p(X)``, its expectation is ``E[log p(X, S)] + H(pi)``.
- ``space-penalty``: ``(log p(X, S) - beta * missed + gamma H(pi(.|X))) / |X|``, ``missed`` the word
  boundaries (removed spaces) the agent does not split (eq. 5.10; 0 with known spaces).

Per-action (``action_rewards``, ``[B, P]``, nats):

- ``posterior`` (``slm``): ``log p(b_i = s_i | X) - log p(b_i != s_i | X)``, the log-odds of the
  decision taken under the LM's exact posterior boundary probability; of each word alone when the
  LM has a lexicon and learns words (``scores_words_alone``), as it was trained. With the entropy bonus at 2
  (REINFORCE's default for per-action rewards) the policy's optimum is ``pi(split at i) = p(b_i |
  X)``: the agent distils the LM's posterior.
- ``flip``: ``log p(X, S) - log p(X, S with decision i flipped)`` (eq. 5.11, as a log-likelihood):
  positive when the decision taken is the more probable one given all the others.
- ``resample``: decision i is drawn again from ``pi``; the flip reward where the draw changes it,
  else 0 (spec §6.2 C5).
- ``incremental``: ``log p(segment closed at i) / |X|``: the log-probability of the segment whose
  last character is ``i`` (the text's last segment at its last position); 0 where no segment
  closes. Causal, and a row sums to the ``likelihood`` score.
- ``description-length``: how much longer the two-part code would be with decision i flipped:
  ``flip`` (the corpus's part, ``-log p(X, S)`` under the LM) plus ``description_length_weight``
  times the change in the lexicon, whose distinct segments each cost ``lexicon_cost`` nats per
  character (and one for its end) once, however many texts use them (Morfessor's two-part code).
  Whose segments the lexicon counts is ``description_length_counts``: ``batch``, the batch's own
  texts (the default), or ``corpus``, the latest segmentation of every training text (after
  pre-training the LM's posterior decoding of them all, the untrained policy's where the LM has no
  posterior; then each batch's as the agent segments it; a row counts as if its segmentation
  replaced its text's last one). A reward of the agent's whole
  segmentation: splitting a word where other words reuse the parts is cheaper than where they do
  not, which no reading of one word alone can tell.

Rewards that read ``pi`` (``entropy``, ``marginal``, ``space-penalty`` with ``gamma > 0``,
``resample``) need ``SegmentationBatch.policy_probs``, which the sentence-level learners fill with
their decisions (REINFORCE and the batched PPO); SB3's PPO on ``CharSegment`` cannot. ``CharSegment``
gives rewards step by step, so it takes only ``CAUSAL_REWARDS`` (``check_stepwise``): ``incremental``,
whose reward at a position depends only on the decisions up to it, and the sequence ``likelihood``,
given once at the end.

What each reward can do is its entry in ``segrl.evaluators.registry.LM_REWARDS``; here each is a
method, found by its name in ``LMEvaluator.SEQUENCE_REWARDS`` or ``LMEvaluator.ACTION_REWARDS``
(docs/rewards.md: adding a reward).
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from segrl.config import limit, validate_config
from segrl.data import Corpus, GoldWord
from segrl.data.wordlists import dampen
from segrl.errors import ConfigError, ModelError
from segrl.evaluators.base import NO_SPLIT, SPLIT, Evaluator, SegmentationBatch
from segrl.evaluators.registry import (
    LM_REWARDS,
    EvaluatorConfig,
    LMEvaluatorConfig,
    evaluator_patience,
)
from segrl.lm import SegmentedBatch, SegmentLM, build_word_lm, load_lm, save_lm
from segrl.lm.config import LMConfig, resolve_lm_config
from segrl.lm.decoding import LMSegmenter
from segrl.lm.slm import (
    DECODING_MAX_SEGMENT_LENGTH,
    SLM,
    SPANS_PER_PASS,
    has_long_word,
    require_slm,
)
from segrl.lm.training import LMTrainer, bits_per_char, improved, settled, training_texts
from segrl.runtime import eval_mode

HELDOUT_TEXTS = 1000
"""Held-out texts at most (every n-th of the corpus's) whose bits per character the LM's early
stopping reads (``LMEvaluatorConfig.patience``)."""
CAUSAL_REWARDS = tuple(name for name, spec in LM_REWARDS.items() if spec.causal)
"""Variants whose rewards ``CharSegment`` can give step by step (``LMRewardSpec.causal``)."""
TEACHER_FILE = "teacher.json"
"""Beside a saved teacher's language model: how its posterior is read."""
MAX_NATS = 30.0
"""Per-decision rewards are clipped to +-this (a flip to a segmentation of probability 0 is +inf)."""


class LMEvaluator(Evaluator):
    """Rewards from a co-trained segmental LM; see the module docstring.

    Args:
        lm: the language model (trained from here on).
        config: the evaluator's options. ``score`` gives its sequence reward (``likelihood`` when
            ``config.reward_variant`` is a per-action one), ``action_rewards`` its per-action reward
            (``posterior`` when ``config.reward_variant`` is a sequence one or None).
        seed: seed of the replay buffer's draws and of ``resample``'s redraws.
        words: the training corpus's word counts (``texts = "corpus-words"`` draws from them).
        heldout: held-out texts, whose marginal bits per character the LM's early stopping reads
            (``config.patience``; ``from_config`` gives the corpus's held-out word types); none:
            no early stopping, where ``config.patience`` is None or 0.
    """

    name = "lm"

    def __init__(
        self,
        lm: SegmentLM,
        config: LMEvaluatorConfig,
        seed: int = 0,
        words: Mapping[str, int] | None = None,
        heldout: Sequence[str] = (),
    ):
        validate_config(config, "evaluator.lm.")
        if config.patience and not heldout:
            raise ConfigError("evaluator.lm.patience needs held-out texts (heldout=)")
        if config.texts == "corpus-words" and not words:
            raise ConfigError(
                "evaluator.lm.texts = 'corpus-words' needs the corpus's word counts (words=)"
            )
        self.lm = lm
        self.config = config
        self.words = sorted(words) if words else []
        weights = np.array([dampen(words[w], "log") for w in self.words], dtype=np.float64)
        self.word_probs = weights / weights.sum() if self.words else None
        self.sequence_variant = config.variant("sequence")
        self.action_variant = config.variant("per-action")
        self.trainer = LMTrainer(
            lm,
            lr=config.lr,
            weight_decay=config.weight_decay,
            corpus=self.words,
        )
        if config.prune_uses == "corpus" and self.trainer.usage is not None and not self.words:
            raise ConfigError(
                "evaluator.lm.prune_uses = 'corpus' needs the corpus's word counts (words=)"
            )
        self.buffer: deque[tuple[str, list[str]]] = deque(maxlen=config.buffer_size)
        self.segmentation_lexicon = SegmentationLexicon()
        self.rng = np.random.default_rng(seed)
        self.batches_seen = 0
        self.pretrained = False
        self.prune_every = max(1, math.ceil(len(self.words) / config.batch_size))
        """LM updates between prunings of its lexicon (``LMConfig.lexicon_prune``): an epoch of the
        corpus's word types, as ``segrl lm train`` prunes after every epoch; a pruning weighs the
        uses counted over at least that many updates, never fewer."""
        self.heldout = list(heldout)
        self.check_every = self.prune_every
        """LM updates between the checks of its held-out bits per character (``config.patience``):
        the same epoch of the corpus's word types, as ``segrl lm train`` checks after every
        epoch."""
        self.lm_updates = 0
        """The LM's co-training updates since pre-training."""
        self.stopping = {"best_bpc": math.inf, "bad_epochs": 0, "stopped": False, "settled": True}
        """Early stopping (``segrl.lm.training.improved``): the best held-out bits per character,
        checks since it improved (``bad_epochs``, an epoch's worth of updates each), whether the LM
        stopped learning, whether its last pruning left its lexicon settled."""
        self.best_weights: dict[str, torch.Tensor] | None = None

    @classmethod
    def from_config(
        cls,
        config: EvaluatorConfig,
        corpus: Corpus,
        gold: Sequence[GoldWord] | None = None,
    ) -> LMEvaluator:
        """A new LM over ``corpus``'s characters, initialised from ``config.seed``; with
        ``lexicon_size`` (``slm``), its lexicon is the substrings found in most training word types.
        A job's config comes resolved (``segrl.agents.config.resolve_train_config``); options a
        caller leaves unset resolve for ``corpus`` with its spaces shown (``evaluator_lm_options``)."""
        lm_options = evaluator_lm_options(config.lm, corpus.kind)
        words = corpus.word_counts("train")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            lm = build_word_lm(lm_options, corpus.vocab, words)
        kind = "sentences" if config.lm.texts == "sentences" else "word-types"
        heldout = training_texts(corpus, kind)[1]
        step = max(1, math.ceil(len(heldout) / HELDOUT_TEXTS))
        return cls(lm, config.lm, config.seed, words, heldout[::step])

    @property
    def scores_words_alone(self) -> bool:
        """Whether the ``posterior`` reward reads each word alone: an ``slm`` with a lexicon that
        learns words (the marginal objective on ``word-types`` or ``corpus-words``). In a sentence its
        words' last segments end with a space, which it never saw: with a lexicon, whose entries
        then lose their share, that moved the agent's boundaries (bundled corpus, boundary F1 0.26
        against 0.51 alone). Without a lexicon the sentence is kept: alone, its words stay whole
        (0.22 against 0.51; docs/results.md)."""
        return (
            getattr(self.lm, "lexicon", None) is not None
            and self.config.objective == "marginal"
            and self.config.texts != "sentences"
        )

    @property
    def teacher(self) -> PosteriorTeacher | None:
        """The LM's posterior boundary log-odds, as the ``posterior`` reward reads them (``slm``)."""
        if not isinstance(self.lm, SLM):
            return None
        return PosteriorTeacher(self.lm, self.scores_words_alone, self.config.posterior_floor)

    def own_segmenters(self) -> dict[str, LMSegmenter]:
        """The co-trained ``slm``'s own segmentations: Viterbi (``lm-viterbi``) and posterior
        decoding (``lm-posterior``: a split where its posterior probability of a boundary is above
        one half); none for another LM."""
        if not isinstance(self.lm, SLM):
            return {}
        return {f"lm-{d}": LMSegmenter(self.lm, decoding=d) for d in ("viterbi", "posterior")}

    def check_stepwise(self, reward_mode: str) -> None:
        """Raise ``ConfigError`` unless the ``reward_mode`` rewards can be given one decision at a
        time, from the decisions so far (``CharSegment``)."""
        variant = self.config.variant(reward_mode)
        spec = LM_REWARDS[variant]
        if not spec.causal or spec.reads_policy:
            raise ConfigError(
                f"the LM reward {variant!r} needs every decision of a sentence at once; "
                f"CharSegment supports {' and '.join(CAUSAL_REWARDS)} (use SentenceSegment)"
            )

    # --- scoring -------------------------------------------------------------------------------------
    def segmented(self, batch: SegmentationBatch) -> SegmentedBatch:
        if batch.hide_spaces and limit(self.lm.config.max_segment_length) is None:
            raise ConfigError(
                "with hidden spaces the LM needs evaluator.lm.lm.max_segment_length (segrl "
                "train sets 12, segrl.lm.config.WORD_MAX_SEGMENT_LENGTH, unless one is given; in "
                "Python, segrl.agents.task.hidden_spaces_lm_options does)"
            )
        return self.lm.segmented(texts=batch.texts, decisions=batch.splits)

    def _log_probs(self, batch: SegmentationBatch) -> tuple[np.ndarray, np.ndarray]:
        """``(log p(X, S) [B], |X| [B])`` in eval mode. A segmentation the LM cannot generate (a
        segment longer than ``max_segment_length``) scores ``-MAX_NATS`` per character."""
        with eval_mode(self.lm):
            scores = self.lm.score(self.segmented(batch))
        total = scores.total.double().cpu().numpy()
        n_chars = scores.n_chars.double().cpu().numpy()
        return np.maximum(total, -MAX_NATS * n_chars), n_chars

    def score(self, batch: SegmentationBatch) -> np.ndarray:
        total, n_chars = self._log_probs(batch)
        return self.SEQUENCE_REWARDS[self.sequence_variant](self, batch, total) / n_chars

    def action_rewards(self, batch: SegmentationBatch) -> np.ndarray:
        segmented = self.segmented(batch)
        with eval_mode(self.lm):
            return self.ACTION_REWARDS[self.action_variant](self, batch, segmented)

    # The sequence rewards: ``log p(X, S)`` [B] of each row -> its score in nats (before ``/ |X|``).
    def _likelihood(self, batch: SegmentationBatch, total: np.ndarray) -> np.ndarray:
        return total

    def _entropy(self, batch: SegmentationBatch, total: np.ndarray) -> np.ndarray:
        return total + self.config.gamma * _policy_entropy(batch)

    def _marginal(self, batch: SegmentationBatch, total: np.ndarray) -> np.ndarray:
        return total - _policy_log_prob(batch)

    def _space_penalty(self, batch: SegmentationBatch, total: np.ndarray) -> np.ndarray:
        missed = (batch.word_boundary_mask & batch.free_mask & ~batch.splits).sum(axis=1)
        total = total - self.config.beta * missed
        if self.config.gamma > 0:
            total = total + self.config.gamma * _policy_entropy(batch)
        return total

    # The per-action rewards: the batch and its segmentation -> [B, P] rewards (in eval mode).
    def _incremental(self, batch: SegmentationBatch, segmented: SegmentedBatch) -> np.ndarray:
        scores = self.lm.score(segmented)
        values = scores.per_position / scores.n_chars.unsqueeze(1)
        return _to_positions(values, batch, last_carries=True)

    def _posterior(self, batch: SegmentationBatch, segmented: SegmentedBatch) -> np.ndarray:
        require_slm(self.lm, "the posterior reward")
        log_odds = self.teacher.log_odds(batch)
        return _free_rewards(np.where(batch.splits, log_odds, -log_odds), batch)

    def _flip_scores(self, batch: SegmentationBatch, segmented: SegmentedBatch) -> np.ndarray:
        """``lm.flip_scores`` at the decisions, within ``+-MAX_NATS``. Where a segment is longer
        than the LM allows (hidden spaces: ``max_segment_length``) and its flip leaves one too
        (both segmentations impossible, ``-inf - -inf``), a decision that keeps characters
        together scores ``-MAX_NATS`` and a split 0: never NaN, which would reach the gradient."""
        flips = _to_positions(self.lm.flip_scores(segmented).double(), batch)
        impossible = np.where(batch.splits, 0.0, -MAX_NATS)
        return np.clip(np.where(np.isnan(flips), impossible, flips), -MAX_NATS, MAX_NATS)

    def _flip(self, batch: SegmentationBatch, segmented: SegmentedBatch) -> np.ndarray:
        return _free_rewards(self._flip_scores(batch, segmented), batch)

    def _resample(self, batch: SegmentationBatch, segmented: SegmentedBatch) -> np.ndarray:
        rewards = self._flip_scores(batch, segmented)
        return _free_rewards(rewards * self._redraw_changes(batch), batch)

    def _description_length(
        self, batch: SegmentationBatch, segmented: SegmentedBatch
    ) -> np.ndarray:
        rewards = self._flip_scores(batch, segmented)
        weight = self.config.description_length_weight
        return _free_rewards(rewards + weight * self._lexicon_costs(batch), batch)

    SEQUENCE_REWARDS: ClassVar[dict[str, Callable[..., np.ndarray]]] = {
        "likelihood": _likelihood,
        "entropy": _entropy,
        "marginal": _marginal,
        "space-penalty": _space_penalty,
    }
    """Each sequence reward of ``LM_REWARDS``, by name: ``(self, batch, log p(X, S))`` -> nats."""
    ACTION_REWARDS: ClassVar[dict[str, Callable[..., np.ndarray]]] = {
        "posterior": _posterior,
        "flip": _flip,
        "resample": _resample,
        "incremental": _incremental,
        "description-length": _description_length,
    }
    """Each per-action reward of ``LM_REWARDS``, by name: ``(self, batch, segmented)`` -> [B, P]."""

    def _lexicon_costs(self, batch: SegmentationBatch) -> np.ndarray:
        """``lexicon_flip_costs`` over the segments ``description_length_counts`` counts."""
        cost = self.lm.config.lexicon_cost or 0.0
        if self.config.description_length_counts == "batch":
            return lexicon_flip_costs(batch, cost)
        return lexicon_flip_costs(batch, cost, self.segmentation_lexicon)

    def _redraw_changes(self, batch: SegmentationBatch) -> np.ndarray:
        """[B, P] bool: where a decision drawn again from the policy splits otherwise."""
        probs = _require_probs(batch)  # [B, P, A]
        split_prob = 1.0 - probs[..., NO_SPLIT]
        redraw = self.rng.random(split_prob.shape) < split_prob
        return redraw != batch.splits

    # --- learning ------------------------------------------------------------------------------------
    def pretrain(self, batches: Sequence[SegmentationBatch]) -> dict[str, float]:
        """``pretrain_epochs`` epochs of LM steps on ``batches`` (the untrained policy's output),
        ``pretrain_steps`` steps at most."""
        examples = [example for batch in batches for example in _examples(batch)]
        stats: dict[str, float] = {}
        size = self.config.batch_size

        def chunks() -> Iterator[list]:
            for _ in range(self.config.pretrain_epochs):
                order = self.rng.permutation(len(examples))
                for start in range(0, len(order), size):
                    yield [examples[i] for i in order[start : start + size]]

        for chunk in itertools.islice(chunks(), self.config.pretrain_steps):
            stats = self._step(chunk)
        # the pre-trained lexicon's entries that pay, where it counted an epoch's uses
        pruned = self.trainer.prune_lexicon(min_updates=self.prune_every)
        stats.update(pruned)
        self.stopping["settled"] = settled(pruned)
        stats.update(self._check_stopping())  # the pre-trained LM: the first best
        self.buffer.extend(examples)
        if self.counts_segmentations:
            teacher = self.teacher
            for batch in batches:  # the pre-trained teacher's decoding, where there is one
                if teacher is not None:
                    decoded = np.where(teacher.log_odds(batch) > 0, SPLIT, NO_SPLIT)
                    batch = batch.with_decisions(decoded)
                self.segmentation_lexicon.update(_examples(batch))
        self.pretrained = True
        return stats

    @property
    def counts_segmentations(self) -> bool:
        """Whether the evaluator keeps every text's latest segmentation (``SegmentationLexicon``):
        for the ``description-length`` reward over the corpus."""
        return (
            LM_REWARDS[self.action_variant].counts_segments
            and self.config.description_length_counts == "corpus"
        )

    def update(self, batch: SegmentationBatch) -> dict[str, float]:
        """Add ``batch`` to the replay buffer; every ``update_every`` calls, one LM step on a sample
        of it. Returns the step's loss (before it) in bits per character."""
        examples = _examples(batch)
        self.buffer.extend(examples)
        if self.counts_segmentations:
            self.segmentation_lexicon.update(examples)
        self.batches_seen += 1
        if self.batches_seen % self.config.update_every or self.stopping["stopped"]:
            return {}
        size = min(self.config.batch_size, len(self.buffer))
        rows = self.rng.choice(len(self.buffer), size=size, replace=False)
        stats = self._step([self.buffer[i] for i in rows])
        self.lm_updates += 1
        if self.lm_updates % self.check_every == 0:
            stats.update(self._check_stopping())
        return stats

    def _check_stopping(self) -> dict[str, float]:
        """Early stopping (``config.patience``): the LM's held-out marginal bits per character
        against its best; after ``patience`` checks without improvement the best weights come back
        and the LM stops learning. {} where it does not stop early."""
        patience = evaluator_patience(self.config, hide_spaces=False) if self.heldout else 0
        if not patience:
            return {}
        stopping = self.stopping
        bpc = bits_per_char(self.lm, self.heldout, batch_size=self.config.batch_size)
        if improved(stopping, bpc):
            self.best_weights = copy.deepcopy(self.lm.state_dict())
        elif stopping["bad_epochs"] >= patience:
            self.lm.load_state_dict(self.best_weights)
            stopping["stopped"] = True
        return {"lm_valid_bits_per_char": bpc, "lm_stopped": float(stopping["stopped"])}

    def _step(self, examples: list[tuple[str, list[str]]]) -> dict[str, float]:
        if self.config.objective == "marginal":
            texts = [text for text, _ in examples]
            if self.config.texts == "word-types":
                texts = sorted({word for text in texts for word in text.split(" ")})
            elif self.config.texts == "corpus-words":
                drawn = self.rng.choice(len(self.words), self.config.batch_size, p=self.word_probs)
                texts = sorted({self.words[i] for i in drawn})
            stats = self.trainer.marginal_step(texts)
            pruned = self.trainer.prune_lexicon(
                min_updates=self.prune_every,
                uses_in=self.words if self.config.prune_uses == "corpus" else None,
                batch_size=self.config.batch_size,
            )
            if pruned:
                stats.update(pruned)
                self.stopping["settled"] = settled(pruned)
        else:
            longest = limit(self.lm.config.max_segment_length)
            if longest is not None:  # segments the model cannot spell are left out
                examples = [e for e in examples if max(map(len, e[1])) <= longest]
                if not examples:
                    return {}
            stats = self.trainer.step(self.lm.segmented(segments=[s for _, s in examples]))
        out = {"lm_bits_per_char": stats["bits_per_char"], "lm_grad_norm": stats["grad_norm"]}
        if "lexicon_entries" in stats:  # it pruned its lexicon after this update
            out["lm_lexicon_entries"] = stats["lexicon_entries"]
        return out

    def heldout_metrics(self, batches: Sequence[SegmentationBatch]) -> dict[str, float]:
        """The LM's bits per character of held-out texts under the agent's segmentations (texts
        with a segment the LM cannot generate left out, their fraction as ``lm_unscorable``), and
        ``slm``'s marginal bits per character over every segmentation."""
        nats = marginal = chars = all_chars = 0.0
        texts = unscorable = 0
        with eval_mode(self.lm):
            for batch in batches:
                segmented = self.segmented(batch)
                scores = self.lm.score(segmented)
                finite = torch.isfinite(scores.total)
                nats -= float(scores.total[finite].sum())
                chars += float(scores.n_chars[finite].sum())
                all_chars += float(scores.n_chars.sum())
                texts += len(batch)
                unscorable += int((~finite).sum())
                if isinstance(self.lm, SLM):
                    with torch.no_grad():
                        marginal -= float(self.lm.log_marginal(segmented.chars).sum())
        if not texts:
            return {}
        out = {"lm_unscorable": unscorable / texts}
        if chars:
            out["lm_bits_per_char"] = nats / chars / math.log(2)
        if isinstance(self.lm, SLM):
            out["lm_marginal_bits_per_char"] = marginal / all_chars / math.log(2)
        return out

    # --- checkpoints ---------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "trainer": self.trainer.state_dict(),
            "buffer": list(self.buffer),
            "rng": self.rng.bit_generator.state,
            "batches_seen": self.batches_seen,
            "pretrained": self.pretrained,
            "lm_updates": self.lm_updates,
            "stopping": dict(self.stopping),
            "best_weights": self.best_weights,
            "segmentations": [
                [text, list(segments)]
                for text, segments in self.segmentation_lexicon.segmentations.items()
            ],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.trainer.load_state_dict(state["trainer"])
        self.buffer = deque(state["buffer"], maxlen=self.config.buffer_size)
        self.rng.bit_generator.state = state["rng"]
        self.batches_seen = int(state["batches_seen"])
        self.segmentation_lexicon = SegmentationLexicon()
        self.segmentation_lexicon.update(
            (text, segments) for text, segments in state.get("segmentations", [])
        )
        self.pretrained = bool(state["pretrained"])
        self.lm_updates = int(state.get("lm_updates", 0))
        self.stopping.update(state.get("stopping", {}))
        self.best_weights = state.get("best_weights")


def evaluator_lm_options(config: LMEvaluatorConfig, corpus_kind: str) -> LMConfig:
    """The evaluator's LM options with those left unset resolved for a corpus of ``corpus_kind``
    with its spaces shown (``LM_DEFAULTS``' evaluator rows: on a word list the priced lexicon of
    ``segrl lm train``, on running text none); a resolved config is kept as it is."""
    return resolve_lm_config(config.lm, corpus_kind, "evaluator")


class PosteriorTeacher:
    """An ``slm``'s exact posterior boundary probability ``q`` at every position, as log-odds
    ``log q - log(1 - q)`` with ``q`` clamped to ``[floor, 1 - floor]``: what the ``posterior``
    reward reads (``log_odds`` where the agent splits, minus it where it does not) and what a student
    reading its teacher observes (``segrl.evaluators.base.Teacher``).

    ``words_alone``: each word of a text is read as a text of its own (``word_boundary_posteriors``;
    for an LM with a lexicon trained on word types, see ``LMEvaluator.scores_words_alone``).
    ``longest``: in texts with a word longer than ``DECODING_MAX_SEGMENT_LENGTH``, the most
    characters per segment its posteriors consider where the LM sets no ``max_segment_length``,
    their spans scored ``SPANS_PER_PASS`` at a time (a loaded agent's teacher:
    ``DECODING_MAX_SEGMENT_LENGTH``, so that its memory grows linearly with a word's length, as an
    ``LMSegmenter``'s); None: the LM as it is (training).
    """

    def __init__(self, lm: SLM, words_alone: bool, floor: float, longest: int | None = None):
        self.lm = lm
        self.words_alone = words_alone
        self.floor = floor
        self.longest = longest

    def log_odds(self, batch: SegmentationBatch) -> np.ndarray:
        chars = self.lm.encode(batch.texts)
        long = self.longest is not None and has_long_word(batch.texts)
        limits = (self.longest, SPANS_PER_PASS) if long else (None, None)
        with eval_mode(self.lm), torch.no_grad():
            if self.words_alone:
                posterior = self.lm.word_boundary_posteriors(chars, *limits)
            else:
                posterior = self.lm.boundary_posteriors(chars, *limits)
        q = posterior.double().clamp(self.floor, 1 - self.floor)  # [B, W]
        return _to_positions(torch.log(q) - torch.log1p(-q), batch)

    def save(self, path: Path) -> None:
        save_lm(self.lm, path)
        options = {"words_alone": self.words_alone, "floor": self.floor}
        (Path(path) / TEACHER_FILE).write_text(json.dumps(options), encoding="utf-8")

    @classmethod
    def load(
        cls,
        path: Path,
        device: str | torch.device = "cpu",
        longest: int | None = DECODING_MAX_SEGMENT_LENGTH,
    ) -> PosteriorTeacher:
        """A teacher saved by ``save``, its LM read as weights only (``segrl.lm.load_lm``), to
        segment with: ``longest`` as in the constructor, by default bounded as every loaded
        ``slm`` is (``LMSegmenter``)."""
        options_file = Path(path) / TEACHER_FILE
        try:
            options = json.loads(options_file.read_text(encoding="utf-8"))
            words_alone, floor = bool(options["words_alone"]), float(options["floor"])
        except FileNotFoundError:
            raise ModelError(f"{path}: no saved teacher here ({TEACHER_FILE} missing)") from None
        except (KeyError, TypeError, ValueError) as e:
            raise ModelError(f"{options_file}: damaged or not a segrl teacher ({e})") from None
        lm = load_lm(path, device)
        if not isinstance(lm, SLM):
            raise ModelError(f"{path}: the teacher's language model is not an slm")
        return cls(lm, words_alone, floor, longest)


class SegmentationLexicon:
    """The latest segmentation of every text seen (``segmentations``, text -> segments) and how many
    of them use each segment other than a space (``counts``): the lexicon of the agent's
    segmentation of the corpus, as Morfessor keeps its own."""

    def __init__(self) -> None:
        self.segmentations: dict[str, tuple[str, ...]] = {}
        self.counts: Counter[str] = Counter()

    def update(self, examples: Iterable[tuple[str, Sequence[str]]]) -> None:
        """Each text's segmentation replaces its last one (the last of a text's rows wins)."""
        for text, segments in examples:
            segments = tuple(m for m in segments if m != " ")
            for m in self.segmentations.get(text, ()):
                self.counts[m] -= 1
                if not self.counts[m]:  # no text uses it any more
                    del self.counts[m]
            self.counts.update(segments)
            self.segmentations[text] = segments


def lexicon_flip_costs(
    batch: SegmentationBatch, cost: float, lexicon: SegmentationLexicon | None = None
) -> np.ndarray:
    """[B, P] nats: how much the lexicon (its distinct segments other than spaces, each costing
    ``cost * (|m| + 1)`` once) grows when decision i alone is flipped; 0 at padding and forced
    positions. The lexicon is the batch's own segments, or ``lexicon``'s, where a row's
    segmentation replaces its text's last one."""
    out = np.zeros(batch.decisions.shape)
    if not cost:
        return out
    rows = [Counter(m for m in segments if m != " ") for segments in batch.segmentations()]
    counts = lexicon.counts if lexicon is not None else sum(rows, Counter())
    for row, text in enumerate(batch.texts):
        # in ``lexicon``, this row's segmentation in place of its text's last one
        old = Counter(lexicon.segmentations.get(text, ())) if lexicon is not None else Counter()
        new = rows[row] if lexicon is not None else Counter()
        # where the segments before the text's last one end
        ends = np.flatnonzero(batch.splits[row, : len(text) - 1]) + 1
        for i in np.flatnonzero(batch.free_mask[row]):
            start = int(ends[ends <= i].max(initial=0))
            after = ends[ends > i + 1]
            end = int(after.min()) if after.size else len(text)
            left, right = text[start : i + 1], text[i + 1 : end]
            parts, whole = Counter([left, right]), Counter([left + right])
            removed, added = (parts, whole) if batch.splits[row, i] else (whole, parts)
            for m in removed.keys() | added.keys():
                before = counts.get(m, 0) - old[m] + new[m]
                now = before - removed[m] + added[m]
                out[row, i] += cost * (len(m) + 1) * ((now > 0) - (before > 0))
    return out


def _examples(batch: SegmentationBatch) -> list[tuple[str, list[str]]]:
    """``(text, segments)`` per row (spaces are segments of their own)."""
    return list(zip(batch.texts, batch.segmentations(), strict=True))


def _to_positions(
    values: torch.Tensor, batch: SegmentationBatch, last_carries: bool = False
) -> np.ndarray:
    """``[B, W]`` values per character -> ``[B, P]`` per position (value of character i at position
    i). ``last_carries``: each text's last character's value is added to its last position."""
    values = values.double().cpu().numpy()
    out = np.zeros(batch.decisions.shape)
    columns = min(values.shape[1], out.shape[1])
    out[:, :columns] = values[:, :columns]
    if last_carries:
        rows = np.flatnonzero(batch.lengths >= 2)
        last = batch.lengths[rows] - 1
        out[rows, last - 1] += values[rows, last]
    inside = np.arange(out.shape[1]) < (batch.lengths - 1)[:, None]
    return np.where(inside, out, 0.0)


def _free_rewards(rewards: np.ndarray, batch: SegmentationBatch) -> np.ndarray:
    """[B, P] ``rewards`` clipped to ``+-MAX_NATS`` at the free positions, 0 elsewhere."""
    return np.where(batch.free_mask, np.clip(rewards, -MAX_NATS, MAX_NATS), 0.0)


def _require_probs(batch: SegmentationBatch) -> np.ndarray:
    if batch.policy_probs is None:
        raise ConfigError(
            "this LM reward needs the policy's probabilities (SegmentationBatch.policy_probs), "
            "which the agent did not give; use REINFORCE or ppo-batched, or a reward that does not "
            "read them (likelihood, posterior, flip, incremental)"
        )
    return batch.policy_probs


def _policy_entropy(batch: SegmentationBatch) -> np.ndarray:
    """[B] the policy's entropy over the free decisions of each row."""
    probs = np.clip(_require_probs(batch), 1e-12, 1.0)
    entropy = -(probs * np.log(probs)).sum(axis=-1)  # [B, P]
    return np.where(batch.free_mask, entropy, 0.0).sum(axis=1)


def _policy_log_prob(batch: SegmentationBatch) -> np.ndarray:
    """[B] ``log pi(S|X)`` of the decisions taken at the free positions."""
    probs = _require_probs(batch)
    taken = np.take_along_axis(probs, batch.decisions[..., None], axis=-1)[..., 0]
    return np.where(batch.free_mask, np.log(np.clip(taken, 1e-12, 1.0)), 0.0).sum(axis=1)
