"""``segrl lm train`` and ``segrl lm levels``: the segmental language models on their own."""

from __future__ import annotations

import argparse

from segrl.cli.common import (
    add_job_args,
    config_from_args,
    where_to_look,
)
from segrl.cli.flags import Flag, FlagTable

LM_SET_EXAMPLE = "lm.hidden_dim=128 --set lm.lexicon_cost=1"
LM_TRAIN = "segrl.experiments.lm_train:LMTrainConfig"
LEVELS = "segrl.experiments.lm_levels:LevelsConfig"
TRAINING_FLAGS = (
    Flag("--epochs", "epochs", int, "N"),
    Flag("--batch-size", "batch_size", int, "N"),
    Flag("--lr", "lr", float, "X"),
    Flag("--device", "device", str, "NAME"),
)
LM_TRAIN_FLAGS = (
    Flag("--texts", "texts", str, "KIND"),
    *TRAINING_FLAGS,
    Flag("--patience", "patience", int, "N"),
    Flag("--steps", "steps", int, "N", old_names=("--max-steps",)),
    Flag("--eval-gold-words", "eval_gold_words", int, "N"),
    Flag("--train-seed", "seed", int, "N"),
    Flag("--threads", "threads", int, "N"),
    Flag("--out", "out", str, "DIR"),
)
"""``segrl lm train``'s own flags (with the model's, ``LM_FLAGS``), options of ``LMTrainConfig``."""
LEVELS_FLAGS = (
    Flag("--levels", "levels", list, "A,B"),
    Flag("--vocab-size", "vocab_size", int, "N"),
    *TRAINING_FLAGS,
    Flag("--max-train-sentences", "max_train_sentences", int, "N"),
    Flag("--max-eval-sentences", "max_eval_sentences", int, "N"),
    Flag("--test-corpus", "test_corpus", str, "PATH"),
)
"""``segrl lm levels``'s own flags (with the model's, ``LM_FLAGS``), options of ``LevelsConfig``."""
LM_FLAGS = (
    Flag("--model", "lm.model", str, "NAME"),
    Flag("--context", "lm.context", str, "KIND"),
    Flag("--max-segment-length", "lm.max_segment_length", int, "K"),
    Flag("--hidden-dim", "lm.hidden_dim", int, "N"),
    Flag("--embedding-dim", "lm.embedding_dim", int, "N"),
    Flag("--speller-dim", "lm.speller_dim", int, "N"),
    Flag("--dropout", "lm.dropout", float, "X"),
    Flag("--length-penalty", "lm.length_penalty", float, "X"),
    Flag("--expected-length", "lm.expected_length_weight", float, "X"),
    Flag("--lexicon-size", "lm.lexicon_size", int, "N"),
    Flag("--lexicon-cost", "lm.lexicon_cost", float, "X"),
    Flag("--categories", "lm.categories", str, "KIND"),
)
"""The model's flags (``lm.*``, a ``segrl.lm.LMConfig``), the same in both commands; each command's
help gives its own defaults."""


def command_flags(config: str, flags: tuple[Flag, ...]) -> list[tuple[str | None, FlagTable]]:
    """The argument groups of an ``lm`` command whose config class is at ``config``."""
    return [(None, FlagTable(config, flags)), ("language model", FlagTable(config, LM_FLAGS))]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "lm",
        help="segmental language models: train slm as a segmenter, the representation-level study",
        description="Segmental language models on their own (the RL evaluator uses them too).",
    )
    commands = parser.add_subparsers(dest="lm_command", required=True, metavar="COMMAND")

    train = commands.add_parser(
        "train",
        help="train slm by marginal likelihood and score its Viterbi segmentation",
        description="Train the slm segmental LM by marginal likelihood on the corpus (word types or "
        "sentences), stop early on held-out bits per character, segment the gold words by Viterbi "
        "decoding, and log it to MLflow as a segmenter (it shows in segrl compare).",
    )
    for title, table in command_flags(LM_TRAIN, LM_TRAIN_FLAGS):
        table.add_to(train, title)
    add_job_args(train, LM_SET_EXAMPLE)
    train.set_defaults(func=run_train, _config_of=lm_train_config)

    levels = commands.add_parser(
        "levels",
        help="the same LSTM LM on characters, BPE, Morfessor morphs and words: bits per character",
        description="Train the segment-lstm LM over the units of each level (characters, "
        "SentencePiece BPE, youtokentome BPE, Morfessor morphs, words), every level an "
        "open-vocabulary model of characters, and report held-out bits per character as a table "
        "and a plot logged to MLflow.",
    )
    for title, table in command_flags(LEVELS, LEVELS_FLAGS):
        table.add_to(levels, title)
    _add_threads(levels)
    add_job_args(levels, LM_SET_EXAMPLE, gold=False)
    levels.set_defaults(func=run_levels_command)


def _add_threads(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--threads", dest="_threads", type=int, metavar="N", help="PyTorch CPU threads"
    )


def _threads(args: argparse.Namespace) -> None:
    from segrl.runtime import set_threads

    set_threads(args._threads)


def lm_train_config(args: argparse.Namespace):
    """The config ``segrl lm train`` trains with, from its parsed command line."""
    from segrl.experiments.lm_train import LMTrainConfig

    return config_from_args(LMTrainConfig, args, lm_command=None)


def run_train(args: argparse.Namespace) -> int:
    from segrl.data import load_corpus, load_gold
    from segrl.experiments.lm_train import train_lm_segmenter
    from segrl.metrics import metrics_summary, posterior_metrics
    from segrl.tracking.store import ensure_reachable

    config = lm_train_config(args)
    ensure_reachable()
    corpus = load_corpus(config.data)
    gold = None if corpus.gold_from_spaces else load_gold(config.gold.path, config.gold.max_words)
    print(f"corpus: {corpus.settings['source']}: {len(corpus.train)} training sentences")
    metrics = train_lm_segmenter(config, corpus, gold).metrics
    print(f"[slm] {metrics_summary(metrics)}, held-out {metrics['bits_per_char']:.3f} bits/char")
    posterior = posterior_metrics(metrics)
    if posterior:
        print(f"[slm-posterior] {metrics_summary(posterior)}")
    print(where_to_look(config.tracking.experiment))
    return 0


def run_levels_command(args: argparse.Namespace) -> int:
    from segrl.data import load_corpus
    from segrl.experiments.lm_levels import LevelsConfig, format_results, run_levels
    from segrl.tracking.store import ensure_reachable

    config = config_from_args(LevelsConfig, args, lm_command=None)
    _threads(args)
    ensure_reachable()
    corpus = load_corpus(config.data)
    print(f"corpus: {corpus.settings['source']}: {len(corpus.train)} training sentences")
    results = run_levels(config, corpus)
    print()
    print(format_results(results), end="")
    print(where_to_look(config.tracking.experiment))
    return 0
