"""``segrl baseline``: train a classic segmenter on the corpus, score it against the gold set with
``segrl.metrics``, and log everything to MLflow."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from segrl.baselines.base import Segmenter
from segrl.baselines.morfessor import MorfessorSegmenter
from segrl.baselines.registry import segmenter_class
from segrl.config import BaselineConfig, check_choices
from segrl.data import Corpus, GoldWord, check_gold_fits, load_corpus, load_gold
from segrl.errors import ConfigError
from segrl.metrics import evaluate_word_segmenter
from segrl.segmentation import render
from segrl.tracking.models import log_segmenter_model
from segrl.tracking.runs import log_data, log_segmenter, start_run
from segrl.tracking.store import ensure_reachable

N_SAMPLES = 25


def make_segmenter(config: BaselineConfig) -> Segmenter:
    """The untrained segmenter that ``config.method`` names, with the options that apply to it."""
    check_choices(config)
    cls = segmenter_class(config.method)
    if issubclass(cls, MorfessorSegmenter):
        seed = config.data.seed if config.seed is None else config.seed
        return cls(cache_dir=config.cache_dir, seed=seed, dampening=config.morfessor_dampening)
    if config.method in ("bpe", "unigram", "yttm-bpe"):
        return cls(vocab_size=config.vocab_size)
    return cls()


def segmenter_name(config: BaselineConfig) -> str:
    """The segmenter's name in ``segrl compare``: the method with the options that distinguish its
    runs (``unigram-8000``; ``morfessor-log`` where counts are not types)."""
    if config.method in ("bpe", "unigram", "yttm-bpe"):
        return f"{config.method}-{config.vocab_size}"
    if config.method == "morfessor" and config.morfessor_dampening != "ones":
        return f"morfessor-{config.morfessor_dampening}"
    return config.method


def baseline_samples(segmenter: Segmenter, sentences: list[str], n: int = N_SAMPLES) -> str:
    """The first ``n`` sentences, segmented, one per line (segments joined by ``-``)."""
    return "\n".join(render(segmenter.segment_sentence(s)) for s in sentences[:n]) + "\n"


def run_baseline(
    config: BaselineConfig, corpus: Corpus | None = None, gold: list[GoldWord] | None = None
) -> dict[str, float]:
    """Train, score and log one segmenter; returns its metrics.

    The corpus and gold set are read (and checked), the store reached and the segmenter trained
    before the MLflow run starts, so a bad input or a failed training never leaves a half-logged run
    behind.
    """
    if config.method in ("bpe", "unigram", "yttm-bpe") and config.vocab_size < 2:
        raise ConfigError(
            f"--vocab-size must be at least 2 for {config.method}, got {config.vocab_size}"
        )
    corpus = corpus or load_corpus(config.data)
    gold = gold if gold is not None else load_gold(config.gold.path, config.gold.max_words)
    check_gold_fits(gold, corpus, config.gold.path)
    segmenter = make_segmenter(config)
    name = segmenter_name(config)
    run_name = config.tracking.run_name or name
    ensure_reachable()
    started = time.perf_counter()
    segmenter.train(corpus)
    train_seconds = time.perf_counter() - started
    with start_run(config, config.tracking.experiment, run_name):
        log_data(corpus, config.gold.path, gold)
        metrics = evaluate_word_segmenter(segmenter.segment_words, gold, corpus.test)
        metrics["train_seconds"] = train_seconds
        log_segmenter(name, "baseline", metrics, baseline_samples(segmenter, corpus.test))
        with tempfile.TemporaryDirectory() as tmp:
            saved = segmenter.save(Path(tmp) / "segmenter")
            log_segmenter_model(saved, config.tracking.register)
    return metrics
