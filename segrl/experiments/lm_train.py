"""``segrl lm train``: ``slm`` as an unsupervised segmenter on its own.

The model is trained by marginal likelihood (``-log p(X)``, summed over all segmentations by the
forward algorithm) on the training split, as word types (each distinct word once, the default) or as
whole sentences; held-out bits per character are measured on the valid split after every epoch, and
training stops when they have not improved for ``patience`` epochs (the model overfits quickly on a
small corpus), keeping the best weights. The best model then segments words by Viterbi decoding and is
scored with ``segrl.metrics`` like every other segmenter, and registered for ``segrl compare``; its
``bits_per_char`` is the marginal one on the test texts (unseen word types, or sentences).

The model has no context by default (``context`` None resolves to ``none``: ``LM_DEFAULTS``, read
once where the job starts by ``resolve_lm_train_config``): trained by marginal likelihood with
the character context (or the preceding words) as context, ``slm`` puts whole words in one segment,
while without context it has to reuse pieces across words, and its Viterbi segments are morph-like.
On text without spaces (word discovery) it has none either (``WORD_DISCOVERY_CONTEXT``,
``word_discovery_lm``): there its segments should be words, its lexicon's entries are substrings of
the utterances that must pay for their spelling, and a length penalty sets its density.

The job (``segrl.jobs.Job``) has a budget of steps: ``epochs`` times the batches of an epoch, or
``steps`` where that is fewer. The data order is a function of (seed, step), an epoch's end is
the job's evaluation (held-out bits per character, the best weights kept, early stopping), and a
checkpoint follows it; an interrupted run resumes from its last checkpoint (same config, same ``--out``
folder). A finished run keeps its checkpoint, so asking for more epochs (or steps) continues it.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from segrl.config import DataConfig, GoldConfig, RunOptions, TrackingConfig, validate_config
from segrl.data import (
    Corpus,
    GoldWord,
    check_gold_fits,
    load_corpus,
    load_gold,
    refuse_gold_file,
    without_spaces,
)
from segrl.data.batching import training_batches
from segrl.errors import ConfigError
from segrl.jobs import RUNS_ROOT, Cadence, Job, JobStart, RunDir, TrainResult, resolve_job_tables
from segrl.lm.base import SegmentLM
from segrl.lm.config import LEXICON_COST, LMConfig, LMTexts, resolve_lm_config, table_lm
from segrl.lm.decoding import LM_KIND, LMSegmenter
from segrl.lm.models import build_word_lm, save_lm
from segrl.lm.training import LMTrainer, bits_per_char, improved, settled, training_texts
from segrl.metrics import (
    BITS_PER_CHAR,
    BOUNDARY_F1,
    BOUNDARY_PRECISION,
    BOUNDARY_RECALL,
    F1_BY_LENGTH,
    GOLD_UNITS_PER_CHAR,
    POSTERIOR_PREFIX,
    evaluate_word_discovery,
    evaluate_word_segmenter,
)
from segrl.runtime import resolve_device, seed_everything, set_threads
from segrl.segmentation import render
from segrl.tracking.models import log_segmenter_model
from segrl.tracking.runs import log_data, log_metrics, log_segmenter

LOG_EVERY = 50
"""Steps between logs of the training bits per character (their mean)."""
CURVE_METRICS = (BOUNDARY_F1, BOUNDARY_PRECISION, BOUNDARY_RECALL, GOLD_UNITS_PER_CHAR)
"""What the epochs' gold sample logs (as ``eval/<name>``): the curve of the segmentation."""


def segmenter_lm() -> LMConfig:
    """``segrl lm train``'s model by default: ``slm`` without context (on text without spaces too),
    with a priced lexicon whose logits are learnt directly; its options left unset
    (None) resolve by ``LM_DEFAULTS`` (``resolve_lm_train_config``)."""
    return table_lm(lexicon_cost=LEXICON_COST)


@dataclass
class LMTrainConfig(RunOptions):
    """``segrl lm train``: train ``slm`` by marginal likelihood and use it as a segmenter. Its run
    options (``out``: ``runs/lm-train``, ``-2``, ... by default; ``seed``, ``device``,
    ``threads``) are every job's (``RunOptions``); its cadences follow its epochs."""

    lm: LMConfig = field(default_factory=segmenter_lm)
    """The model (``segrl.lm.LMConfig``; ``lm.hidden_dim`` and so on). Its defaults here (the options
    left None resolve by ``segrl.lm.config.LM_DEFAULTS``' rows for ``segrl lm train``): ``slm``
    without context (marginal likelihood then favours reusable, morph-like segments; with the
    character context, or the preceding words, as context it keeps whole words), on text without
    spaces too, where whole words are the aim: there a lexicon of the utterances' substrings and
    the length penalty ``WORD_DISCOVERY_LENGTH_PENALTY`` (``word_discovery_lm``); ``lexicon_size``
    None: ``SLM_LEXICON_SIZE`` substrings mixed with the speller (``segrl.lm.lexicon``), so that
    reusing a morph across words pays, on a word list and on running text while ``lexicon_cost``
    prices its entries (0: every segment spelled); ``lexicon_cost`` ``LEXICON_COST``, nats per
    character that an entry's spelling costs once, when the corpus uses it: Morfessor's lexicon
    code, so that long entries that a few words share give way to their parts (0: the plain
    marginal likelihood); ``lexicon_logits`` None: ``direct`` (one set per category with categories), the
    lexicon's logits learnt as themselves, at ``lexicon_lr``: several times cheaper updates, a
    better teacher in Hungarian, Czech and on running text, a worse one in Spanish
    (docs/studies/2026-11-26-teacher.md)."""
    texts: LMTexts = "word-types"
    """What the model reads: ``word-types`` (each distinct training word once, as its own text) or
    ``sentences`` (training sentences, spaces as known boundaries)."""
    epochs: int = 20
    """Epochs over the training texts, at most (``patience`` may stop it sooner)."""
    batch_size: int = 64
    """Texts per update."""
    lr: float = 2e-3
    """Adam learning rate of the model."""
    clip: float = 1.0
    weight_decay: float = 0.0
    patience: int = 2
    """Stop after this many epochs without a better held-out bits per character."""
    steps: int | None = None
    """Stop after this many updates in all (None: no limit), the budget's name in every job;
    resolved to the budget the job runs (``train_steps``)."""
    eval_gold_words: int = 2000
    """Gold words scored (Viterbi) after every epoch, logged as ``eval/...`` at its step: the
    segmentation's curve beside the held-out bits per character, to the stopping point (a fixed
    sample of the gold set, the same at every epoch and in every seed; 0: none; word discovery
    scores its test utterances at the end only)."""
    data: DataConfig = field(default_factory=DataConfig)
    gold: GoldConfig = field(default_factory=GoldConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)

    RESUMABLE: ClassVar[frozenset[str]] = RunOptions.RESUMABLE | {
        "epochs",
        "steps",
        "patience",
        "eval_gold_words",
        "tracking.",
        "gold.",
    }
    """Options that may change when a run resumes: every job's (``RunOptions.RESUMABLE``); more
    epochs or steps may be asked for."""

    OLD_NAMES: ClassVar[dict[str, str]] = {"max_steps": "steps"}
    """Options under their old names, read as the new ones: config files and run folders saved
    when the budget was ``max_steps`` still load."""

    def check(self, prefix: str) -> None:
        self.check_run_options()
        if self.eval_gold_words < 0:
            raise ConfigError(
                f"{prefix}eval_gold_words must be at least 0, got {self.eval_gold_words}"
            )
        if self.lm.model != "slm":
            raise ConfigError(
                f"segrl lm train trains slm by marginal likelihood; {prefix}lm.model = "
                f"{self.lm.model!r} needs given segmentations (see segrl lm levels)"
            )


def train_steps(config: LMTrainConfig, texts: int) -> int:
    """The budget of ``segrl lm train`` on ``texts`` training texts: ``epochs`` epochs of them, or
    ``steps`` where that is fewer."""
    steps = config.epochs * math.ceil(texts / config.batch_size)
    return steps if config.steps is None else min(steps, config.steps)


def resolve_lm_train_config(config: LMTrainConfig, start: JobStart) -> LMTrainConfig:
    """``config`` as ``segrl lm train`` trains it, every option a value (a copy: ``config`` is not
    changed; a resolved config resolves to itself): the model's options left unset from
    ``LM_DEFAULTS``' row for ``segrl lm train`` on the corpus's text (``unspaced`` for a segmented
    corpus, word discovery); ``steps``, the budget it runs (``train_steps`` over ``start.texts``);
    the device; and every job's tables (``resolve_job_tables``: run folder, corpus and gold set by
    their names, the run's name ``slm``)."""
    config = copy.deepcopy(config)
    text = "unspaced" if start.spaces_are_gold else start.corpus_kind
    resolved = replace(
        config,
        lm=resolve_lm_config(config.lm, text),
        steps=train_steps(config, start.texts),
        device=start.device,
        threads=start.threads if config.threads is None else config.threads,
    )
    return resolve_job_tables(resolved, start, "slm")


def lm_and_trainer(
    config: LMTrainConfig, lm_options: LMConfig, texts: Corpus, train: list[str]
) -> tuple[SegmentLM, LMTrainer]:
    """The model that ``train_lm_segmenter`` trains, seeded by ``config.seed``, on
    ``config.device``, its lexicon drawn from ``texts``'s training words, and its trainer on the
    texts ``train``."""
    seed_everything(config.seed)
    words = texts.word_counts("train")
    model = build_word_lm(lm_options, texts.vocab, words).to(resolve_device(config.device))
    trainer = LMTrainer(model, config.lr, config.clip, config.weight_decay, corpus=train)
    return model, trainer


def train_lm_segmenter(
    config: LMTrainConfig,
    corpus: Corpus | None = None,
    gold: list[GoldWord] | None = None,
    on_step: Callable[[int, dict[str, float]], bool] | None = None,
) -> TrainResult:
    """Train, score and log an ``slm`` segmenter (see the module docstring); returns its metrics
    and where it is.

    ``on_step(step, stats)`` is called after every update; returning True stops training there as a
    Ctrl-C does (checkpoint, then ``TrainingInterrupted``).
    """
    validate_config(config)
    corpus = corpus or load_corpus(config.data)
    if corpus.gold_from_spaces:  # word discovery: utterances without their spaces, whole
        refuse_gold_file(config.gold.path)
        gold, texts = None, without_spaces(corpus)
        train, valid, test = texts.train, texts.valid, texts.test
    else:
        gold = gold if gold is not None else load_gold(config.gold.path, config.gold.max_words)
        check_gold_fits(gold, corpus, config.gold.path)
        texts = corpus
        train, valid, test = training_texts(corpus, config.texts)
    start = JobStart.of(corpus, config.device, len(train))
    run = RunDir.open(
        config,
        config.out,
        Path(RUNS_ROOT) / "lm-train",
        config.RESUMABLE,
        train_steps(config, len(train)),
        lambda given, folder: resolve_lm_train_config(given, start.at(folder)),
    )
    config = run.config  # resolved: every option a value, as logged
    with run.preparing():
        validate_config(config)
        set_threads(config.threads)
        model, trainer = lm_and_trainer(config, config.lm, texts, train)
    training = LMTraining(config, model, trainer, run, corpus, texts, gold, (train, valid, test))
    per_epoch = training.per_epoch
    cadence = Cadence(
        config.steps, log_every=LOG_EVERY, eval_every=per_epoch, checkpoint_every=per_epoch
    )
    job = Job(
        run, training, cadence, on_step=on_step, log_prefix="train_", map_location=model.device
    )
    with job:
        if job.resumed_from is None:
            log_data(corpus, config.gold.path, gold)
        else:
            print(f"continuing after epoch {job.step // per_epoch}", flush=True)
        if training.progress["bad_epochs"] >= config.patience:  # stopped early before
            job.finish_early()
        batches = training_batches(train, config.batch_size, config.seed, job.step)
        for step in job.loop():
            stats = trainer.marginal_step(next(batches))  # the update: -log p(X) per character
            training.progress["epoch_losses"].append(stats["bits_per_char"])
            job.end_step(step, {"bits_per_char": stats["bits_per_char"]})
        return job.finish()


class LMTraining:
    """``segrl lm train``'s model as its job sees it (``segrl.jobs.Trainable``): an epoch's end is
    the evaluation (held-out bits per character, the best weights kept, early stopping); the end
    scores, saves and registers the best weights."""

    label = "slm"
    shown = ("bits_per_char", "valid_bits_per_char")

    def __init__(
        self,
        config: LMTrainConfig,
        model: SegmentLM,
        trainer: LMTrainer,
        run: RunDir,
        corpus: Corpus,
        texts: Corpus,
        gold: list[GoldWord] | None,
        splits: tuple[list[str], list[str], list[str]],
    ):
        self.config = config
        self.model = model
        self.trainer = trainer
        self.run = run
        self.corpus = corpus
        self.texts = texts
        """The corpus the model reads (without its spaces in word discovery)."""
        self.gold = gold
        """The gold set (None: word discovery, scored on the test utterances)."""
        self.train, self.valid, self.test = splits
        self.curve_gold = (gold or [])[: config.eval_gold_words]  # the epochs' fixed sample
        self.per_epoch = math.ceil(len(self.train) / config.batch_size)
        # early stopping: the best held-out bits per character, its weights, epochs since it
        # improved; a lexicon that the last pruning changed by more than SETTLED_PRUNING
        # (segrl.lm.training) is not settled yet: its model is the new best whatever its held-out
        # bits, and early stopping starts again from it
        self.progress = {
            "best_bpc": float("inf"),
            "bad_epochs": 0,
            "epoch_losses": [],
            "settled": True,
        }
        self.best = copy.deepcopy(model.state_dict())
        self.epoch_started = time.perf_counter()

    def state_dict(self) -> dict[str, Any]:
        return {
            "trainer": self.trainer.state_dict(),
            "best": self.best,
            "progress": dict(self.progress),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.trainer.load_state_dict(state["trainer"])
        self.best = state["best"]
        self.progress.update(state["progress"])

    def evaluate(self, step: int, job: Job) -> dict[str, float]:
        """After an epoch (or the budget's part of one): held-out bits per character, the best
        weights kept, early stopping."""
        config, model, progress = self.config, self.model, self.progress
        epoch = math.ceil(step / self.per_epoch)
        valid_bpc = bits_per_char(model, self.valid, batch_size=config.batch_size)
        losses = progress["epoch_losses"]
        train_bpc = sum(losses) / max(len(losses), 1)
        log_metrics({"valid_bits_per_char": valid_bpc, "epoch": epoch}, step)
        curve = ""
        if self.curve_gold:
            scores = evaluate_word_segmenter(LMSegmenter(model).segment_words, self.curve_gold)
            log_metrics({f"eval/{name}": scores[name] for name in CURVE_METRICS}, step)
            curve = (
                f"; gold boundary F1 {scores[BOUNDARY_F1]:.3f} at "
                f"{scores[GOLD_UNITS_PER_CHAR]:.3f} gold units/char"
            )
        if improved(progress, valid_bpc):
            self.best = copy.deepcopy(model.state_dict())
        # the lexicon's entries that do not pay go once the epoch's model is judged (and kept
        # where best): the next epoch's model is judged after training on without them
        pruned = self.trainer.prune_lexicon(min_updates=self.per_epoch)  # a whole epoch's uses
        if pruned:
            log_metrics(pruned, step)
            curve += f"; lexicon {pruned['lexicon_entries']:.0f} entries"
            progress["settled"] = settled(pruned)
        print(
            f"epoch {epoch}: train {train_bpc:.3f} bits/char, valid {valid_bpc:.3f} "
            f"({time.perf_counter() - self.epoch_started:.0f}s){curve}",
            flush=True,
        )
        progress["epoch_losses"] = []
        self.epoch_started = time.perf_counter()
        if progress["bad_epochs"] >= config.patience:
            job.finish_early()
        return {"valid_bits_per_char": valid_bpc}

    def finish(self, job: Job) -> dict[str, float]:
        """The last epoch's evaluation (checkpointed with it), then the best weights scored, saved
        and registered."""
        config, model, gold, step = self.config, self.model, self.gold, job.step
        corpus, texts = self.corpus, self.texts
        if step == config.steps or step % self.per_epoch:
            self.evaluate(step, job)
            job.save()
        model.load_state_dict(self.best)
        segmenter = LMSegmenter(model)
        posterior = LMSegmenter(model, decoding="posterior").segment_words
        # Viterbi, and the posterior decoding beside it (either is the LM's own segmentation)
        if gold is None:  # word discovery
            metrics = evaluate_word_discovery(segmenter.segment_words, corpus.test)
            beside = evaluate_word_discovery(posterior, corpus.test)
        else:
            metrics = evaluate_word_segmenter(segmenter.segment_words, gold, corpus.test)
            beside = evaluate_word_segmenter(posterior, gold, corpus.test)
        for name, value in beside.items():
            if not name.startswith(F1_BY_LENGTH):  # the figure by word length stays Viterbi's
                metrics[f"{POSTERIOR_PREFIX}{name}"] = value
        metrics[BITS_PER_CHAR] = bits_per_char(model, self.test, batch_size=config.batch_size)
        metrics["train_seconds"] = job.train_seconds
        samples = "\n".join(render(segmenter.segment_sentence(s)) for s in texts.test[:25]) + "\n"
        log_segmenter("slm", LM_KIND, metrics, samples)
        saved = save_lm(model, self.run.path / "best")
        log_segmenter_model(saved, config.tracking.register)
        return metrics
