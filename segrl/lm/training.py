"""Training steps and held-out evaluation for the segmental LMs.

``LMTrainer`` owns an optimiser and makes one update at a time, on given segmentations (the co-training
update of an LM evaluator) or, for ``slm``, on the marginal likelihood of raw text. ``bits_per_char``
measures held-out text under given segmentations, or marginally (``slm``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from segrl.data.batching import CharBatch, iterate_batches
from segrl.data.corpus import Corpus
from segrl.errors import ModelError
from segrl.lm.base import SegmentLM
from segrl.lm.config import LMTexts
from segrl.lm.lexicon import DirectLexicon, LexiconUsage
from segrl.lm.segmented import SegmentedBatch
from segrl.lm.slm import require_slm
from segrl.metrics import nats_to_bits_per_char
from segrl.runtime import eval_mode

SETTLED_PRUNING = 0.01
"""A pruning that removes at most this share of the lexicon's entries leaves it settled: only
models of a settled lexicon are compared on held-out bits per character for early stopping (a
pruned lexicon is a worse model of unseen words at first, and no less true to its objective)."""


def settled(pruned: dict[str, float]) -> bool:
    """Whether a pruning (``LMTrainer.prune_lexicon``'s stats; {}: none) leaves the lexicon settled
    (``SETTLED_PRUNING``)."""
    if not pruned:
        return True
    before = pruned["lexicon_entries"] + pruned["lexicon_pruned"]
    return pruned["lexicon_pruned"] <= SETTLED_PRUNING * before


def improved(progress: dict[str, Any], bpc: float) -> bool:
    """Early stopping's judgement of a model by its held-out bits per character ``bpc``, shared
    by ``segrl lm train`` (after every epoch) and the LM evaluator (every epoch's worth of
    updates): it is the new best where it improved on ``progress["best_bpc"]`` or where the
    lexicon's last pruning left it unsettled (``progress["settled"]``; ``settled``), and then
    ``progress["bad_epochs"]`` starts again from 0; otherwise it counts one more. Returns whether
    it is the new best (the caller keeps its weights and stops after its patience in bad epochs)."""
    if bpc < progress["best_bpc"] or not progress["settled"]:
        progress["best_bpc"], progress["bad_epochs"] = bpc, 0
        return True
    progress["bad_epochs"] += 1
    return False


class LMTrainer:
    """One optimiser (Adam) for one model; every step clips the gradient norm.

    Adam runs fused (one vectorised pass over each parameter): a projected lexicon of 100,000
    entries holds about 51 million parameters, and the unfused step over them took more than half
    of an update on a CPU (``bench/lm_step.py``). The model's ``parameter_groups`` set the learning
    rates (a direct lexicon's logits train at their own).

    Args:
        model: the language model to train.
        lr: learning rate; clip: largest gradient norm; weight_decay: Adam's L2 term.
        corpus: the training texts, for ``slm`` with a lexicon whose ``config.lexicon_cost`` is above
            0: the lexicon's description length for as many segments as there are texts
            (``SLM.lexicon_description_length``), divided by their characters (each text's end
            counted), is added to every marginal update's loss; and for a lexicon with a prior
            (``config.lexicon_prior``) its cross-entropy, at as many pseudo-uses a text.
    """

    def __init__(
        self,
        model: SegmentLM,
        lr: float = 2e-3,
        clip: float = 1.0,
        weight_decay: float = 0.0,
        corpus: Sequence[str] = (),
    ):
        self.model = model
        self.clip = clip
        self.optimizer = torch.optim.Adam(
            model.parameter_groups(lr), lr=lr, weight_decay=weight_decay, fused=_fused(model)
        )
        self.lexicon_uses = len(corpus)
        self.corpus_chars = sum(len(text) + 1 for text in corpus)
        self.steps = 0
        lexicon = getattr(model, "lexicon", None)
        prunes = model.config.lexicon_prune and isinstance(lexicon, DirectLexicon)
        self.usage = LexiconUsage(lexicon) if prunes else None
        """The lexicon's counted uses, for ``prune_lexicon`` (``LMConfig.lexicon_prune``)."""

    def step(self, batch: SegmentedBatch) -> dict[str, float]:
        """One update on ``-log p(X, S)`` per character of the segmented texts; returns the loss in
        nats and bits per character (before the update)."""
        self.model.check_segment_lengths(batch)
        return self._update(lambda: self.model.loss(batch))

    def marginal_step(self, texts: Sequence[str]) -> dict[str, float]:
        """One update on the marginal ``-log p(X)`` per character (``slm`` only)."""
        model = require_slm(self.model, "marginal likelihood")
        probe = self.usage.probe() if self.usage is not None else None

        def loss() -> tuple[torch.Tensor, dict[str, float]]:
            chars = model.encode(texts)
            nll, stats = model.marginal_loss(chars, regularise=True)
            if model.config.speller_words:  # the speller learns the texts' spelling too
                spelled = _spelled_nll(model, chars)
                stats["speller_bits_per_char"] = spelled.item() / math.log(2)
                nll = nll + model.config.speller_words * spelled
            if model.config.speller_entries and self.usage is not None:  # and the kept entries'
                spelled = _spelled_nll(model, self._entry_sample(len(texts)))
                stats["speller_entry_bits_per_char"] = spelled.item() / math.log(2)
                nll = nll + model.config.speller_entries * spelled
            if model.config.lexicon_prior and self.corpus_chars:  # a Dirichlet prior's pull
                prior = model.lexicon.prior_cross_entropy()
                stats["lexicon_prior_nats"] = prior.item()
                weight = model.config.lexicon_prior * self.lexicon_uses / self.corpus_chars
                nll = nll + weight * prior
            if not (self.corpus_chars and model.config.lexicon_cost):
                return nll, stats
            length = model.lexicon_description_length(self.lexicon_uses)
            stats["lexicon_nats"] = length.item()
            return nll + length / self.corpus_chars, stats

        try:
            return self._update(loss)
        finally:
            if probe is not None:  # the loss is -log p(X) over the batch's characters
                self.usage.add(probe, scale=-1.0 / sum(len(t) + 1 for t in texts))

    def _entry_sample(self, size: int) -> CharBatch:
        """``size`` of the lexicon's kept entries, drawn uniformly with replacement (each entry a
        text of its own), for ``LMConfig.speller_entries``."""
        kept = self.usage.kept().nonzero().flatten()
        picks = kept[torch.randint(len(kept), (size,))].tolist()
        entries = self.model.lexicon.entries
        return self.model.encode([entries[i] for i in picks])

    def count_uses(self, texts: Sequence[str], batch_size: int) -> None:
        """Counts the lexicon's uses in ``texts`` afresh (the counts so far dropped), as an epoch
        of updates on them would count them, under the model as it is (no dropout, no update): a
        pruning on uses that no sample of the texts biases (the LM evaluator's updates read the
        agent's draws, where the words only a few draws hold read as unused). Nothing where the
        model does not prune."""
        if self.usage is None:
            return
        model = require_slm(self.model, "lexicon uses")
        self.usage.reset()
        was_training = model.training
        model.eval()
        try:
            for chunk in iterate_batches(list(texts), batch_size):
                probe = self.usage.probe()
                loss, _ = model.marginal_loss(model.encode(chunk))
                (probe.grad,) = torch.autograd.grad(loss, probe, allow_unused=True)
                self.usage.add(probe, scale=-1.0 / sum(len(t) + 1 for t in chunk))
        finally:
            model.train(was_training)
            model.lexicon.count_probe = None

    def prune_lexicon(
        self, min_updates: int = 1, uses_in: Sequence[str] | None = None, batch_size: int = 64
    ) -> dict[str, float]:
        """Prunes the lexicon entries that do not pay for their spelling, from the uses counted
        since the last pruning (``LexiconUsage.prune``); {} where the model does not prune or
        fewer than ``min_updates`` updates were counted since (an epoch's: an entry's price is
        weighed against its uses in the whole corpus, and the uses of a part of it read as fewer,
        so that a pruning on them takes entries that pay). With ``uses_in``, a pruning that is due
        weighs the uses in those texts instead, counted afresh (``count_uses``, ``batch_size``
        texts at a time)."""
        if self.usage is None or self.usage.updates < max(min_updates, 1):
            return {}
        if uses_in is not None:
            self.count_uses(uses_in, batch_size)
        model = require_slm(self.model, "lexicon pruning")
        kept = self.usage.kept()
        entries = [
            entry for entry, keep in zip(model.lexicon.entries, kept.tolist(), strict=True) if keep
        ]
        gains = torch.zeros(self.usage.counts.shape)  # [M], or [K, M] with categories
        gains[..., kept] = model.entry_gains(entries).cpu()
        config = model.config
        return self.usage.prune(gains, config.lexicon_cost, config.lexicon_prune_fraction)

    def _update(self, compute) -> dict[str, float]:
        was_training = self.model.training
        self.model.train()
        try:
            loss, stats = compute()
            if not torch.isfinite(loss):
                raise ModelError(
                    f"the language model's loss is {loss.item()}; lower the learning rate"
                )
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            stats["grad_norm"] = float(
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
            )
            self.optimizer.step()
            self.steps += 1
        finally:
            self.model.train(was_training)
        return stats

    def state_dict(self) -> dict[str, Any]:
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "steps": self.steps,
        }
        if self.usage is not None:
            state["lexicon_usage"] = self.usage.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = state["steps"]
        if self.usage is not None and "lexicon_usage" in state:
            self.usage.load_state_dict(state["lexicon_usage"])


def _spelled_nll(model: SegmentLM, chars: CharBatch) -> torch.Tensor:
    """Differentiable: the speller's negative log-likelihood of ``chars``' texts, each spelled whole,
    per character (each text's end counted)."""
    return -model.spelled_whole(chars).sum() / (chars.lengths + 1).sum()


def _fused(model: SegmentLM) -> bool | None:
    """Fused Adam where PyTorch has it for the model's device (CPU and CUDA); None: its default."""
    return True if model.device.type in ("cpu", "cuda") else None


@torch.no_grad()
def bits_per_char(
    model: SegmentLM,
    texts: Sequence[str],
    segmentations: Sequence[Sequence[str]] | None = None,
    batch_size: int = 64,
) -> float:
    """Held-out bits per character of ``texts`` (spaces and one end-of-text per text counted):
    under ``segmentations`` (one list of segments per text), or, when None, marginally over all
    segmentations (``slm`` only)."""
    nats, chars = 0.0, 0
    with eval_mode(model):
        if segmentations is None:
            slm = require_slm(model, "marginal bits per character")
            for chunk in iterate_batches(list(texts), batch_size):
                nats -= slm.log_marginal(slm.encode(chunk)).sum().item()
                chars += sum(len(t) + 1 for t in chunk)
        else:
            for text, segments in zip(texts, segmentations, strict=True):
                if "".join(segments) != text:
                    raise ValueError(f"segments {list(segments)[:5]}... do not spell {text[:40]!r}")
            for chunk in iterate_batches(list(segmentations), batch_size):
                scores = model.score(model.segmented(segments=chunk))
                nats -= scores.total.sum().item()
                chars += int(scores.n_chars.sum())
    return nats_to_bits_per_char(nats, chars) if chars else math.nan


def training_texts(corpus: Corpus, kind: LMTexts) -> tuple[list[str], list[str], list[str]]:
    """Train / valid / test texts: sentences, or word types (held-out types are those of the split
    that are not training types, so held-out bits per character measure unseen words; all the split's
    types where every one was seen in training)."""
    if kind == "sentences":
        return corpus.train, corpus.valid, corpus.test
    train = sorted(corpus.word_counts("train"))
    seen = set(train)
    held_out = []
    for split in ("valid", "test"):
        types = set(corpus.word_counts(split))
        held_out.append(sorted(types - seen) or sorted(types))
    return train, held_out[0], held_out[1]
