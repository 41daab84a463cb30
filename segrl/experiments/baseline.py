"""``segrl baseline``: train a classic segmenter on the corpus, score it against the gold set with
``segrl.metrics``, and log everything to MLflow."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from segrl.baselines.base import Segmenter
from segrl.baselines.flatcat import FlatCatSegmenter
from segrl.baselines.morfessor import MorfessorSegmenter
from segrl.baselines.registry import segmenter_class
from segrl.baselines.sentencepiece import SentencePieceSegmenter
from segrl.config import BaselineConfig, validate_config
from segrl.data import (
    Corpus,
    GoldWord,
    check_gold_fits,
    load_corpus,
    load_gold,
    refuse_gold_file,
    without_spaces,
)
from segrl.errors import ConfigError
from segrl.files import check_own_folder
from segrl.metrics import evaluate_word_discovery, evaluate_word_segmenter
from segrl.model_files import CLASSIC_META_FILE
from segrl.segmentation import render
from segrl.tracking.models import log_segmenter_model
from segrl.tracking.runs import log_data, log_segmenter, start_run
from segrl.tracking.store import ensure_reachable

N_SAMPLES = 25


def make_segmenter(config: BaselineConfig) -> Segmenter:
    """The untrained segmenter that ``config.method`` names, with the options that apply to it."""
    validate_config(config)
    cls = segmenter_class(config.method)
    seed = config.data.seed if config.seed is None else config.seed
    if issubclass(cls, FlatCatSegmenter):
        return cls(
            perplexity_threshold=config.flatcat_perplexity_threshold,
            corpusweight=config.flatcat_corpus_weight,
            max_epochs=config.flatcat_max_epochs,
            baseline_corpusweight=config.morfessor_corpus_weight,
            dampening=config.morfessor_dampening,
            seed=seed,
            baseline_annotations=config.morfessor_annotations,
            baseline_annotation_weight=config.morfessor_annotation_weight,
            baseline_max_epochs=config.morfessor_max_epochs,
            cache_dir=config.cache_dir,
        )
    if issubclass(cls, MorfessorSegmenter):
        return cls(
            corpusweight=config.morfessor_corpus_weight,
            annotations=config.morfessor_annotations,
            annotation_weight=config.morfessor_annotation_weight,
            cache_dir=config.cache_dir,
            seed=seed,
            dampening=config.morfessor_dampening,
            max_epochs=config.morfessor_max_epochs,
            viterbi_smoothing=config.morfessor_viterbi_smoothing,
        )
    if issubclass(cls, SentencePieceSegmenter):
        return cls(vocab_size=config.vocab_size, character_coverage=config.character_coverage)
    if config.method == "yttm-bpe":
        return cls(vocab_size=config.vocab_size)
    return cls()


def segmenter_name(config: BaselineConfig) -> str:
    """The segmenter's name in ``segrl compare``: the method with the options that distinguish its
    runs (``unigram-8000``; ``morfessor-log`` where counts are not types; ``-cw0.5`` a Morfessor
    corpus weight, ``-e3`` a cap on Morfessor's epochs, ``-vs1`` a Morfessor Viterbi smoothing other
    than 0 and ``-cc0.9995`` a SentencePiece character coverage other than 1;
    ``-annotated`` Morfessor trained semi-supervised). FlatCat is named for its own options
    (``flatcat-p100`` a perplexity threshold other than 10, ``-cw2`` its corpus weight, ``-e2`` its
    epochs) and then for those of the Baseline it starts from, as Morfessor is
    (``flatcat-p100-log-bcw0.5``, ``b`` for Baseline in ``-bcw`` and ``-be``)."""
    name = config.method
    if config.method in ("bpe", "unigram", "yttm-bpe"):
        name = f"{config.method}-{config.vocab_size}"
    if config.method in ("bpe", "unigram") and config.character_coverage != 1:
        name += f"-cc{config.character_coverage:g}"
    baseline = "b" if config.method == "flatcat" else ""  # the Baseline FlatCat starts from
    if config.method == "flatcat" and config.flatcat_perplexity_threshold != 10:
        name += f"-p{config.flatcat_perplexity_threshold:g}"
    if config.method == "flatcat" and config.flatcat_corpus_weight != 1:
        name += f"-cw{config.flatcat_corpus_weight:g}"
    if config.method == "flatcat" and config.flatcat_max_epochs != 4:
        name += f"-e{config.flatcat_max_epochs}"
    morfessor = config.method in ("morfessor", "flatcat")
    if morfessor and config.morfessor_dampening != "ones":
        name += f"-{config.morfessor_dampening}"
    if morfessor and config.morfessor_corpus_weight != 1:
        name += f"-{baseline}cw{config.morfessor_corpus_weight:g}"
    if morfessor and config.morfessor_max_epochs is not None:
        name += f"-{baseline}e{config.morfessor_max_epochs}"
    if config.method == "morfessor" and config.morfessor_viterbi_smoothing != 0:
        name += f"-vs{config.morfessor_viterbi_smoothing:g}"
    if morfessor and config.morfessor_annotations is not None:
        name += "-annotated"
    return name


def baseline_samples(segmenter: Segmenter, sentences: list[str], n: int = N_SAMPLES) -> str:
    """The first ``n`` sentences, segmented, one per line (segments joined by ``-``)."""
    return "\n".join(render(segmenter.segment_sentence(s)) for s in sentences[:n]) + "\n"


def check_out_folder(out: Path) -> None:
    """Raise ``ConfigError`` unless ``out`` can take a saved segmenter: new, empty, or one an earlier
    run saved in (which it replaces; a folder of other files would be lost, so it is refused)."""
    check_own_folder(out, "--out", {CLASSIC_META_FILE}, "one segrl baseline saved a segmenter in")


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
    if not 0 < config.character_coverage <= 1:
        raise ConfigError(
            f"--character-coverage must be in (0, 1], got {config.character_coverage:g}"
        )
    if not config.morfessor_corpus_weight > 0:
        raise ConfigError(
            f"--corpus-weight must be above 0, got {config.morfessor_corpus_weight:g}"
        )
    if not config.morfessor_viterbi_smoothing >= 0:
        raise ConfigError(
            f"--viterbi-smoothing must be 0 or more, got {config.morfessor_viterbi_smoothing:g}"
        )
    if config.morfessor_max_epochs is not None and config.morfessor_max_epochs < 1:
        raise ConfigError(
            f"--morfessor-epochs must be at least 1, got {config.morfessor_max_epochs}"
        )
    if not config.flatcat_perplexity_threshold > 0:
        raise ConfigError(
            f"--perplexity-threshold must be above 0, got {config.flatcat_perplexity_threshold:g}"
        )
    if not config.flatcat_corpus_weight > 0:
        raise ConfigError(
            f"--flatcat-corpus-weight must be above 0, got {config.flatcat_corpus_weight:g}"
        )
    if config.flatcat_max_epochs < 1:
        raise ConfigError(f"--flatcat-epochs must be at least 1, got {config.flatcat_max_epochs}")
    if config.out is not None:
        check_out_folder(Path(config.out))
    corpus = corpus or load_corpus(config.data)
    texts = corpus  # what the segmenter trains on and segments
    if corpus.gold_from_spaces:  # word discovery: the utterances without their spaces
        refuse_gold_file(config.gold.path)
        texts, gold = without_spaces(corpus), None
    else:
        gold = gold if gold is not None else load_gold(config.gold.path, config.gold.max_words)
        check_gold_fits(gold, corpus, config.gold.path)
    segmenter = make_segmenter(config)
    name = segmenter_name(config)
    run_name = config.tracking.run_name or name
    ensure_reachable()
    started = time.perf_counter()
    segmenter.train(texts)
    train_seconds = time.perf_counter() - started
    with start_run(config, config.tracking.experiment, run_name):
        log_data(corpus, config.gold.path, gold)
        if gold is None:
            metrics = evaluate_word_discovery(segmenter.segment_words, corpus.test)
        else:
            metrics = evaluate_word_segmenter(segmenter.segment_words, gold, corpus.test)
        metrics["train_seconds"] = train_seconds
        log_segmenter(name, "baseline", metrics, baseline_samples(segmenter, texts.test))
        with tempfile.TemporaryDirectory() as tmp:
            saved = segmenter.save(Path(config.out) if config.out else Path(tmp) / "segmenter")
            log_segmenter_model(saved, config.tracking.register)
    return metrics
