"""``segrl lm levels``: the representation-level study, with every level an open-vocabulary model of
characters.

The study (thesis ch. 5, §5.2) trained one LSTM LM on characters, BPE units, Morfessor morphs and words
and compared their held-out loss per character. A word-level LM with ``<unk>`` would get an unfair
advantage (it never pays for spelling a rare word), so here every level is the same ``segment-lstm``
(``segrl.lm.segment_lstm``): an LSTM over the level's units, each unit's input composed from its
characters, each unit predicted by a lexicon of the level's frequent units mixed with a character
speller that can spell any other. Every level is thus a proper model of the characters, and the
numbers compare directly:

    bits per character = -log2 p(X, S_level) / (characters of X, spaces included, + 1 end of text)

summed over held-out sentences, where ``S_level`` is the level's own segmentation of X (a deterministic
function of X, so ``p(X, S_level) <= p(X)``: each level also pays for the probability its model puts on
segmentations the tokenizer never produces).

Levels: ``characters``, ``bpe`` (SentencePiece), ``yttm-bpe`` (youtokentome, when installed),
``morfessor`` (Morfessor Baseline), ``words``; each tokenizer is trained on the training split and
segments words (spaces are known boundaries). The lexicon holds the level's units seen at least
``lexicon_min_count`` times in the training segmentation, at most ``lexicon_size`` of them.
"""

from __future__ import annotations

import copy
import dataclasses
import random
import time
import typing
from dataclasses import dataclass, field
from typing import Literal

from tqdm import tqdm

from segrl.baselines.yttm import yttm_available
from segrl.config import BaselineConfig, DataConfig, TrackingConfig, validate_config
from segrl.data import Corpus, load_corpus, read_lines
from segrl.data.batching import iterate_batches
from segrl.data.corpus import NormalizationSettings, normalize
from segrl.errors import ConfigError, DataError
from segrl.experiments.baseline import make_segmenter
from segrl.lm.config import LMConfig
from segrl.lm.lexicon import build_lexicon
from segrl.lm.models import build_lm
from segrl.lm.training import LMTrainer, bits_per_char
from segrl.metrics import BITS_PER_CHAR, units_per_char
from segrl.runtime import resolve_device, seed_everything
from segrl.tables import format_table
from segrl.tracking.runs import (
    log_data,
    log_dict,
    log_figure,
    log_metrics,
    log_table,
    log_text,
    start_run,
)

LMLevel = Literal["characters", "bpe", "yttm-bpe", "morfessor", "words"]
LEVELS: tuple[str, ...] = typing.get_args(LMLevel)
TOOLS = {
    "characters": "-",
    "bpe": "SentencePiece",
    "yttm-bpe": "youtokentome",
    "morfessor": "Morfessor Baseline",
    "words": "-",
}


def levels_lm() -> LMConfig:
    """The study's model: ``segment-lstm`` with a lexicon of each level's frequent units."""
    return LMConfig(model="segment-lstm", lexicon_size=10000)


@dataclass
class LevelsConfig:
    """``segrl lm levels``: the same LSTM LM over characters, BPE, Morfessor morphs and words."""

    lm: LMConfig = field(default_factory=levels_lm)
    """The model (``segrl.lm.LMConfig``; ``lm.hidden_dim`` and so on): ``segment-lstm`` (the only
    one the study takes) with a lexicon of each level's 10,000 most frequent units by default."""
    levels: list[LMLevel] = field(default_factory=lambda: list(LEVELS))
    """Levels to compare; ``yttm-bpe`` is skipped with a note where youtokentome is not installed."""
    vocab_size: int = 5000
    """Vocabulary of the BPE tokenizers (the study's 5000)."""
    epochs: int = 3
    """Epochs of each level's LM (the best one on valid is kept)."""
    batch_size: int = 32
    """Segmented sentences per update."""
    lr: float = 2e-3
    """Adam learning rate of the LM."""
    clip: float = 1.0
    max_train_sentences: int | None = None
    """Train on at most this many training sentences (the first ones); None: all."""
    max_eval_sentences: int | None = None
    """Measure on at most this many valid / test sentences; None: all."""
    test_corpus: str | None = None
    """A text file to report held-out bits per character on instead of the corpus's test split (e.g.
    PTB's test file); normalised like the corpus, characters outside its vocabulary mapped to the
    placeholder."""
    device: str = "auto"
    """Where the LMs train: ``auto`` (a GPU where there is one), ``cpu``, ``cuda`` or ``cuda:N``."""
    seed: int = 0
    data: DataConfig = field(default_factory=DataConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)

    def check(self, prefix: str) -> None:
        if self.lm.model != "segment-lstm":
            raise ConfigError(
                f"the levels study uses the segment-lstm model ({prefix}lm.model = 'segment-lstm')"
            )


@dataclass
class LevelResult:
    level: str
    tool: str
    lexicon: int
    units_per_char: float
    lexicon_coverage: float
    """Fraction of the held-out units that are in the lexicon (the rest are spelled)."""
    valid_bits_per_char: float
    test_bits_per_char: float
    epochs: int
    train_seconds: float
    curve: list[float] = field(default_factory=list)
    """Valid bits per character after each epoch."""


def held_out_sentences(path: str, corpus: Corpus) -> list[str]:
    """Sentences of the file at ``path``, normalised as the corpus was (no rare-character mapping: the
    corpus's vocabulary decides, and characters outside it become the placeholder)."""
    settings = NormalizationSettings(**{**corpus.settings["normalization"], "min_char_count": 0})
    sentences, _ = normalize(read_lines(path), settings)
    if not sentences:
        raise DataError(f"{path}: no sentences left after normalisation")
    vocab = corpus.vocab
    return [
        "".join(c if c in vocab or c == " " else vocab.placeholder for c in s) for s in sentences
    ]


def segment_texts(segmenter, sentences: list[str]) -> list[list[str]]:
    """Each sentence as the segmenter's units with single-space segments between words."""
    out = []
    for sentence in sentences:
        units: list[str] = []
        for word_units in segmenter.segment_sentence(sentence):
            if units:
                units.append(" ")
            units.extend(word_units)
        out.append(units)
    return out


def run_level(config: LevelsConfig, level: str, corpus: Corpus, splits: dict) -> LevelResult:
    """Train the level's tokenizer and LM; measure held-out bits per character."""
    baseline = BaselineConfig(method=level, vocab_size=config.vocab_size, data=config.data)
    segmenter = make_segmenter(baseline).train(corpus)
    train, valid, test = (
        segment_texts(segmenter, splits[name]) for name in ("train", "valid", "test")
    )
    lexicon = build_lexicon(train, config.lm.lexicon_size, config.lm.lexicon_min_count)
    seed_everything(config.seed)
    device = resolve_device(config.device)
    model = build_lm(config.lm, corpus.vocab, lexicon or None).to(device)
    trainer = LMTrainer(model, config.lr, config.clip)
    best, best_bpc, curve = copy.deepcopy(model.state_dict()), float("inf"), []
    started = time.perf_counter()
    for epoch in range(config.epochs):
        order = list(train)
        random.Random(config.seed + epoch).shuffle(order)
        batches = list(iterate_batches(order, config.batch_size))
        desc = f"{level} epoch {epoch + 1}/{config.epochs}"
        # disable=None: no bar where stderr is not a terminal (the epoch's line below says it)
        for chunk in tqdm(batches, desc=desc, leave=False, disable=None):
            stats = trainer.step(model.segmented(segments=chunk))
            if trainer.steps % 50 == 0:
                log_metrics({f"{level}.train_bits_per_char": stats["bits_per_char"]}, trainer.steps)
        valid_bpc = bits_per_char(model, splits["valid"], valid, config.batch_size)
        curve.append(valid_bpc)
        log_metrics({f"{level}.valid_bits_per_char": valid_bpc}, epoch + 1)
        print(f"[{level}] epoch {epoch + 1}: valid {valid_bpc:.3f} bits/char", flush=True)
        if valid_bpc < best_bpc:
            best, best_bpc = copy.deepcopy(model.state_dict()), valid_bpc
    train_seconds = time.perf_counter() - started
    model.load_state_dict(best)
    known = set(lexicon)
    test_units = [u for units in test for u in units if u != " "]
    return LevelResult(
        level=level,
        tool=TOOLS[level],
        lexicon=len(lexicon),
        units_per_char=units_per_char(test),
        lexicon_coverage=sum(u in known for u in test_units) / max(len(test_units), 1),
        valid_bits_per_char=best_bpc,
        test_bits_per_char=bits_per_char(model, splits["test"], test, config.batch_size),
        epochs=config.epochs,
        train_seconds=train_seconds,
        curve=curve,
    )


def run_levels(config: LevelsConfig, corpus: Corpus | None = None) -> list[LevelResult]:
    """Run every level of ``config``, log the table and a plot to MLflow, and return the results."""
    validate_config(config)
    levels = [level for level in config.levels if level != "yttm-bpe" or yttm_available()]
    if len(levels) < len(config.levels):
        print("youtokentome is not installed: the yttm-bpe level is skipped", flush=True)
    corpus = corpus or load_corpus(config.data)
    splits = _splits(config, corpus)
    results = []
    with start_run(config, config.tracking.experiment, config.tracking.run_name or "lm-levels"):
        log_data(corpus)
        log_dict({k: len(v) for k, v in splits.items()}, "sentences.json")
        for level in levels:
            result = run_level(config, level, corpus, splits)
            results.append(result)
            log_metrics(
                {
                    f"{level}.test_{BITS_PER_CHAR}": result.test_bits_per_char,
                    f"{level}.units_per_char": result.units_per_char,
                    f"{level}.lexicon_coverage": result.lexicon_coverage,
                }
            )
        rows = [{k: v for k, v in dataclasses.asdict(r).items() if k != "curve"} for r in results]
        log_table(rows, "levels.json")
        log_text(format_results(results), "levels.txt")
        log_figure(plot_results(results), "levels.png")
    return results


def _splits(config: LevelsConfig, corpus: Corpus) -> dict[str, list[str]]:
    limit = config.max_eval_sentences
    test = held_out_sentences(config.test_corpus, corpus) if config.test_corpus else corpus.test
    return {
        "train": corpus.train[: config.max_train_sentences],
        "valid": corpus.valid[:limit],
        "test": test[:limit],
    }


def format_results(results: list[LevelResult]) -> str:
    """The results as a plain-text table."""
    columns = [
        "level", "tool", "lexicon", "units_per_char", "lexicon_coverage",
        "valid_bits_per_char", "test_bits_per_char", "train_seconds",
    ]  # fmt: skip
    rows = [dataclasses.asdict(r) for r in results]
    return format_table(rows, columns) + "\n"


def plot_results(results: list[LevelResult]):
    """Held-out bits per character by level (bars) and valid bits per character by epoch (curves)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (bars, curves) = plt.subplots(1, 2, figsize=(10, 4))
    names = [r.level for r in results]
    bars.bar(names, [r.test_bits_per_char for r in results], color="tab:blue")
    for i, r in enumerate(results):
        bars.text(i, r.test_bits_per_char, f"{r.test_bits_per_char:.3f}", ha="center", va="bottom")
    bars.set_ylabel("held-out bits per character")
    bars.set_title("LSTM LM by representation level")
    for r in results:
        curves.plot(range(1, len(r.curve) + 1), r.curve, marker="o", label=r.level)
    curves.set_xlabel("epoch")
    curves.set_ylabel("valid bits per character")
    curves.legend()
    figure.tight_layout()
    return figure


__all__ = ["LEVELS", "LevelResult", "LevelsConfig", "run_levels"]
