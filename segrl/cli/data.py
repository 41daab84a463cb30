"""``segrl data``: load a corpus (and gold set) the way every job does and show what came out."""

from __future__ import annotations

import argparse
import json

from segrl.cli.common import add_job_args


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "data",
        help="check a corpus and gold set: normalisation, split, vocabulary",
        description="Load the corpus and gold set as every job does and print what came out.",
    )
    add_job_args(parser, "data.max_len=64", tracking=False)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from segrl.cli.common import config_from_args
    from segrl.config import BaselineConfig
    from segrl.data import load_corpus, load_gold

    config = config_from_args(BaselineConfig, args)
    corpus = load_corpus(config.data)
    gold = load_gold(config.gold.path, config.gold.max_words)
    print(json.dumps(corpus.settings, indent=2, ensure_ascii=False))
    print(f"vocabulary: {len(corpus.vocab)} symbols: {''.join(corpus.vocab.symbols[3:])!r}")
    print(f"fingerprint: {corpus.fingerprint}")
    print("first training sentences:")
    for sentence in corpus.train[:3]:
        print(f"  {sentence}")
    multi = sum(len(g.analyses) > 1 for g in gold)
    print(
        f"gold: {len(gold)} words ({multi} with alternative analyses), e.g. "
        + ", ".join("-".join(g.analyses[0]) for g in gold[:3])
    )
    return 0
