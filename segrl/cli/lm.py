"""``segrl lm train`` and ``segrl lm levels``: the segmental language models on their own."""

from __future__ import annotations

import argparse

from segrl.cli.common import (
    add_config_args,
    add_data_args,
    add_gold_args,
    add_tracking_args,
    config_from_args,
    where_to_look,
)


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
    train.add_argument(
        "--texts", dest="texts", metavar="KIND", help="word-types (default) or sentences"
    )
    _add_training_args(train)
    train.add_argument("--patience", dest="patience", type=int, metavar="N")
    train.add_argument("--max-steps", dest="max_steps", type=int, metavar="N")
    train.add_argument(
        "--train-seed", dest="seed", type=int, metavar="N", help="seed of initialisation and order"
    )
    train.add_argument(
        "--out",
        dest="out",
        metavar="DIR",
        help="run folder: checkpoint and best model (default runs/lm-train); a rerun resumes it",
    )
    _add_common_args(train, gold=True)
    train.set_defaults(func=run_train)

    levels = commands.add_parser(
        "levels",
        help="the same LSTM LM on characters, BPE, Morfessor morphs and words: bits per character",
        description="Train the segment-lstm LM over the units of each level (characters, "
        "SentencePiece BPE, youtokentome BPE, Morfessor morphs, words), every level an "
        "open-vocabulary model of characters, and report held-out bits per character as a table "
        "and a plot logged to MLflow.",
    )
    levels.add_argument(
        "--levels",
        dest="levels",
        type=lambda text: [v.strip() for v in text.split(",") if v.strip()],
        metavar="A,B",
        help="characters,bpe,yttm-bpe,morfessor,words (default: all)",
    )
    levels.add_argument("--vocab-size", dest="vocab_size", type=int, metavar="N")
    _add_training_args(levels)
    levels.add_argument("--max-train-sentences", dest="max_train_sentences", type=int, metavar="N")
    levels.add_argument("--max-eval-sentences", dest="max_eval_sentences", type=int, metavar="N")
    levels.add_argument(
        "--test-corpus",
        dest="test_corpus",
        metavar="PATH",
        help="report bits per character on this file instead of the corpus's test split",
    )
    _add_common_args(levels, gold=False)
    levels.set_defaults(func=run_levels_command)


def _add_training_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("training")
    group.add_argument("--epochs", dest="epochs", type=int, metavar="N")
    group.add_argument("--batch-size", dest="batch_size", type=int, metavar="N")
    group.add_argument("--lr", dest="lr", type=float, metavar="X")
    group.add_argument("--device", dest="device", metavar="NAME", help="auto (default), cpu, cuda")
    group.add_argument(
        "--threads", dest="_threads", type=int, metavar="N", help="PyTorch CPU threads"
    )


def _add_common_args(parser: argparse.ArgumentParser, gold: bool) -> None:
    _add_lm_args(parser)
    add_config_args(parser, "lm.hidden_dim=128 --set lm.lexicon_cost=1")
    add_data_args(parser)
    if gold:
        add_gold_args(parser)
    add_tracking_args(parser)


def _add_lm_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("language model")
    group.add_argument("--model", dest="lm.model", metavar="NAME", help="slm or segment-lstm")
    group.add_argument("--context", dest="lm.context", metavar="KIND", help="slm: lstm or none")
    group.add_argument("--max-segment-length", dest="lm.max_segment_length", type=int, metavar="K")
    group.add_argument("--hidden-dim", dest="lm.hidden_dim", type=int, metavar="N")
    group.add_argument("--embedding-dim", dest="lm.embedding_dim", type=int, metavar="N")
    group.add_argument("--speller-dim", dest="lm.speller_dim", type=int, metavar="N")
    group.add_argument("--dropout", dest="lm.dropout", type=float, metavar="X")
    group.add_argument(
        "--length-penalty",
        dest="lm.length_penalty",
        type=float,
        metavar="X",
        help="slm: prior against long segments (default: 0.05 on a word list, 0 on running text)",
    )
    group.add_argument("--lexicon-size", dest="lm.lexicon_size", type=int, metavar="N")
    group.add_argument(
        "--lexicon-cost",
        dest="lm.lexicon_cost",
        type=float,
        metavar="X",
        help="slm: nats per character that a lexicon entry's spelling costs once (default 3; 0: none)",
    )
    group.add_argument(
        "--categories",
        dest="lm.categories",
        metavar="KIND",
        help="slm with a lexicon: none (default) or prefix-stem-suffix (hidden segment categories)",
    )


def _threads(args: argparse.Namespace) -> None:
    from segrl.runtime import set_threads

    set_threads(args._threads)


def run_train(args: argparse.Namespace) -> int:
    from segrl.data import load_corpus, load_gold
    from segrl.lm.segmenter import LMTrainConfig, train_lm_segmenter
    from segrl.metrics import metrics_summary
    from segrl.tracking.store import ensure_reachable

    config = config_from_args(LMTrainConfig, args, lm_command=None)
    _threads(args)
    ensure_reachable()
    corpus = load_corpus(config.data)
    gold = None if corpus.gold_from_spaces else load_gold(config.gold.path, config.gold.max_words)
    print(f"corpus: {corpus.settings['source']}: {len(corpus.train)} training sentences")
    metrics = train_lm_segmenter(config, corpus, gold)
    print(f"[slm] {metrics_summary(metrics)}, held-out {metrics['bits_per_char']:.3f} bits/char")
    print(where_to_look(config.tracking.experiment))
    return 0


def run_levels_command(args: argparse.Namespace) -> int:
    from segrl.data import load_corpus
    from segrl.lm.levels import LevelsConfig, format_results, run_levels
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
