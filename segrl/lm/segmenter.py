"""``segrl lm train``: ``slm`` as an unsupervised segmenter on its own.

The model is trained by marginal likelihood (``-log p(X)``, summed over all segmentations by the
forward algorithm) on the training split, as word types (each distinct word once, the default) or as
whole sentences; held-out bits per character are measured on the valid split after every epoch, and
training stops when they have not improved for ``patience`` epochs (the model overfits quickly on a
small corpus), keeping the best weights. The best model then segments words by Viterbi decoding and is
scored with ``segrl.metrics`` like every other segmenter, and registered for ``segrl compare``; its
``bits_per_char`` is the marginal one on the test texts (unseen word types, or sentences).

The model has no context by default (``context = "none"``): trained by marginal likelihood with
the character context (or the preceding words) as context, ``slm`` puts whole words in one segment,
while without context it has to reuse pieces across words, and its Viterbi segments are morph-like.

An interrupted run resumes from the checkpoint it writes after every epoch (same config, same ``--out``
folder; ``segrl.jobs``).
"""

from __future__ import annotations

import copy
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tqdm import tqdm

from segrl import tracking
from segrl.config import DataConfig, GoldConfig, TrackingConfig, check_choices
from segrl.data import Corpus, GoldWord, check_gold_fits, load_corpus, load_gold
from segrl.data.batching import iterate_batches
from segrl.errors import ConfigError
from segrl.jobs import RUNS_ROOT, Job, RunDir, TrainingInterrupted
from segrl.lm.config import LEXICON_COST, LMConfig, LMContext, LMTexts, resolve_lm_config
from segrl.lm.lexicon import slm_lexicon
from segrl.lm.models import build_lm, save_lm
from segrl.lm.slm import SLM
from segrl.lm.training import LMTrainer, bits_per_char
from segrl.metrics import BITS_PER_CHAR, evaluate_word_segmenter
from segrl.runtime import resolve_device, seed_everything
from segrl.segmentation import render

RESUMABLE_CHANGES = frozenset(
    {"epochs", "max_steps", "patience", "device", "out", "tracking.", "gold."}
)
"""Options that may change when a run resumes (more epochs or steps may be asked for)."""


@dataclass
class SegmenterLMConfig(LMConfig):
    """``slm`` without context: marginal likelihood then favours reusable, morph-like segments (with
    the character context, or the preceding words, as context it keeps whole words)."""

    context: LMContext = "none"
    lexicon_size: int | None = None
    """None: on a word list ``SLM_LEXICON_SIZE`` substrings mixed with the speller
    (``segrl.lm.lexicon``), so that reusing a morph across words pays; on running text none; 0:
    every segment spelled."""
    lexicon_cost: float = LEXICON_COST
    """Nats per character that a lexicon entry's spelling costs once, when the corpus uses it
    (``segrl.lm.lexicon``): Morfessor's lexicon code, so that long entries that a few words share
    give way to their parts. 0: the plain marginal likelihood."""


@dataclass
class LMTrainConfig:
    """``segrl lm train``: train ``slm`` by marginal likelihood and use it as a segmenter."""

    lm: SegmenterLMConfig = field(default_factory=SegmenterLMConfig)
    texts: LMTexts = "word-types"
    """What the model reads: ``word-types`` (each distinct training word once, as its own text) or
    ``sentences`` (training sentences, spaces as known boundaries)."""
    epochs: int = 20
    batch_size: int = 64
    lr: float = 2e-3
    clip: float = 1.0
    weight_decay: float = 0.0
    patience: int = 2
    """Stop after this many epochs without a better held-out bits per character."""
    max_steps: int | None = None
    """Stop after this many updates in all (None: no limit)."""
    device: str = "auto"
    seed: int = 0
    out: str | None = None
    """The run folder (``segrl.jobs``): checkpoint and best model; None: ``runs/lm-train`` (or
    ``-2``, ...). A run with the same config resumes from its checkpoint."""
    data: DataConfig = field(default_factory=DataConfig)
    gold: GoldConfig = field(default_factory=GoldConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)


LMDecoding = Literal["viterbi", "posterior"]
LM_KIND = "lm"
"""The ``segrl.kind`` of segmenters that are language models (``segrl compare --kind lm``)."""


class LMSegmenter:
    """Segmentation of words by a trained ``slm``: ``viterbi`` (the most probable segmentation) or
    ``posterior`` (a split wherever the exact posterior probability that a segment ends there is
    above one half: the segmentation with the most boundaries right in expectation)."""

    def __init__(self, model: SLM, batch_size: int = 256, decoding: LMDecoding = "viterbi"):
        if decoding not in ("viterbi", "posterior"):
            raise ConfigError(f"decoding must be viterbi or posterior, got {decoding!r}")
        self.model = model
        self.batch_size = batch_size
        self.decoding = decoding

    def segment_words(self, words: list[str]) -> list[list[str]]:
        order = sorted(range(len(words)), key=lambda i: len(words[i]))
        out: list[list[str]] = [[] for _ in words]
        self.model.eval()
        for begin in range(0, len(order), self.batch_size):
            chunk = [i for i in order[begin : begin + self.batch_size] if words[i]]
            if not chunk:
                continue
            texts = [words[i] for i in chunk]
            chars = self.model.encode(texts)
            if self.decoding == "posterior":
                ends = self.model.boundary_posteriors(chars).cpu() > 0.5  # [B, L]
                for i, text, row in zip(chunk, texts, ends, strict=True):
                    cuts = [k + 1 for k in range(len(text) - 1) if row[k]]
                    out[i] = [
                        text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)
                    ]
                continue
            best, _ = self.model.viterbi(chars)
            for i, segments in zip(chunk, best.segments(), strict=True):
                out[i] = segments
        return out

    def segment_sentence(self, sentence: str) -> list[list[str]]:
        return self.segment_words(sentence.split())


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


def train_lm_segmenter(
    config: LMTrainConfig, corpus: Corpus | None = None, gold: list[GoldWord] | None = None
) -> dict[str, float]:
    """Train, score and log an ``slm`` segmenter (see the module docstring); returns its metrics."""
    check_choices(config)
    if config.lm.model != "slm":
        raise ConfigError(
            f"segrl lm train trains slm by marginal likelihood; {config.lm.model} needs given "
            "segmentations (see segrl lm levels)"
        )
    device = resolve_device(config.device)
    corpus = corpus or load_corpus(config.data)
    gold = gold if gold is not None else load_gold(config.gold.path, config.gold.max_words)
    check_gold_fits(gold, corpus.vocab, config.gold.path)
    train, valid, test = training_texts(corpus, config.texts)
    seed_everything(config.seed)
    lm_options = resolve_lm_config(config.lm, corpus.kind)
    lexicon = slm_lexicon(lm_options, corpus.word_counts("train"))
    model = build_lm(lm_options, corpus.vocab, lexicon)
    model = model.to(device)
    trainer = LMTrainer(
        model,
        config.lr,
        config.clip,
        config.weight_decay,
        lexicon_uses=len(train),
        corpus_chars=sum(len(t) + 1 for t in train),
    )
    run = RunDir.open(config, config.out, Path(RUNS_ROOT) / "lm-train", RESUMABLE_CHANGES)
    state = _resume(run, trainer)
    job = Job(
        run,
        config,
        steps=config.max_steps or 0,
        experiment=config.tracking.experiment,
        run_name=config.tracking.run_name or "slm",
        resumed_from=state["step"] if state["epoch"] else None,
    )
    with job:
        if not state["epoch"]:
            tracking.log_data(corpus, config.gold.path, gold)
        best = _fit(config, trainer, train, valid, run, state, job)
        model.load_state_dict(best)
        train_seconds = state["seconds"]
        segmenter = LMSegmenter(model)
        metrics = evaluate_word_segmenter(segmenter.segment_words, gold, corpus.test)
        metrics[BITS_PER_CHAR] = bits_per_char(model, test, batch_size=config.batch_size)
        metrics["train_seconds"] = train_seconds
        samples = "\n".join(render(segmenter.segment_sentence(s)) for s in corpus.test[:25]) + "\n"
        tracking.log_segmenter("slm", LM_KIND, metrics, samples)
        saved = save_lm(model, run.path / "best")
        tracking.log_segmenter_model(saved, config.tracking.register)
        # not marked finished: the checkpoint stays, so more epochs may be asked for later
        run.update_info(step=trainer.steps, metrics=metrics)
    return metrics


def _fit(config, trainer: LMTrainer, train, valid, run: RunDir, state: dict, job: Job) -> dict:
    """Epochs of marginal-likelihood updates with early stopping, a checkpoint after each; returns
    the best weights. A Ctrl-C stops at the next update (the last epoch's checkpoint resumes)."""
    model = trainer.model
    best = state["best"] or copy.deepcopy(model.state_dict())
    for epoch in range(state["epoch"], config.epochs):
        if state["bad_epochs"] >= config.patience or _out_of_steps(config, trainer):
            break
        epoch_started = time.perf_counter()
        order = list(train)
        random.Random(config.seed + epoch).shuffle(order)
        batches = list(iterate_batches(order, config.batch_size))
        losses = []
        for chunk in tqdm(batches, desc=f"epoch {epoch + 1}/{config.epochs}", leave=False):
            if _out_of_steps(config, trainer):
                break
            if job.stop.is_set():
                raise TrainingInterrupted(
                    f"stopped in epoch {epoch + 1}; run again to resume after epoch {epoch}"
                )
            stats = trainer.marginal_step(chunk)
            losses.append(stats["bits_per_char"])
            if trainer.steps % 50 == 0:
                tracking.log_metrics({"train_bits_per_char": stats["bits_per_char"]}, trainer.steps)
        valid_bpc = bits_per_char(model, valid, batch_size=config.batch_size)
        train_bpc = sum(losses) / max(len(losses), 1)
        tracking.log_metrics({"valid_bits_per_char": valid_bpc, "epoch": epoch + 1}, trainer.steps)
        print(
            f"epoch {epoch + 1}: train {train_bpc:.3f} bits/char, valid {valid_bpc:.3f} "
            f"({time.perf_counter() - epoch_started:.0f}s)",
            flush=True,
        )
        if valid_bpc < state["best_bpc"]:
            state["best_bpc"], state["bad_epochs"] = valid_bpc, 0
            best = copy.deepcopy(model.state_dict())
        else:
            state["bad_epochs"] += 1
        state["epoch"] = epoch + 1
        state["seconds"] += time.perf_counter() - epoch_started
        state["step"] = trainer.steps
        run.save(
            step=trainer.steps,
            trainer=trainer.state_dict(),
            best=best,
            progress={k: v for k, v in state.items() if k != "best"},
        )
    return best


def _out_of_steps(config: LMTrainConfig, trainer: LMTrainer) -> bool:
    return config.max_steps is not None and trainer.steps >= config.max_steps


def _resume(run: RunDir, trainer: LMTrainer) -> dict:
    """The progress of the run's last checkpoint (restoring the trainer), or a fresh start."""
    fresh = {
        "epoch": 0, "step": 0, "bad_epochs": 0, "best_bpc": float("inf"), "seconds": 0.0,
        "best": None,
    }  # fmt: skip
    saved = run.load(map_location=trainer.model.device)
    if saved is None:
        return fresh
    trainer.load_state_dict(saved["trainer"])
    print(f"resuming {run.path} after epoch {saved['progress']['epoch']}", flush=True)
    return {**fresh, **saved["progress"], "best": saved["best"]}
