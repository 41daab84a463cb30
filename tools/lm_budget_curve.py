"""Word discovery against the budget: ``segrl lm train``'s model on a corpus without spaces, scored on
its test utterances after each of several update counts, in one run.

Is a target missed for want of updates? ``segrl lm train --steps N`` gives one point; this gives the
curve from one training: the same model, batches and updates as ``segrl lm train`` with its defaults
(``segrl.experiments.lm_train.train_lm_segmenter``; its lexicon, where it has one, pruned after
every epoch as there), the weights at each count scored as that command scores its best ones (Viterbi and posterior word F1 on the test utterances, held-out bits
per character on the valid ones). Nothing is logged to MLflow and no model is saved: a diagnosis, not a run.

    python tools/lm_budget_curve.py 'segmented:../shared/data/ptb/ptb.{split}.txt' --max-len 512 \\
        --at 250,500,750,1000,1500 --train-seed 0 --out ptb-seed0.jsonl

Each count prints one line and, with ``--out``, appends one JSON object to the file (word, boundary
and lexicon F1 and the rest of ``segrl.metrics.word_discovery_metrics``; the posterior decoding's
under ``posterior/``, as ``segrl lm train`` logs them; with a pruned lexicon, the entries it keeps).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

from segrl.cli.common import add_set_arg, parse_set
from segrl.config import DataConfig, build_config, validate_config
from segrl.data import load_corpus, without_spaces
from segrl.data.batching import training_batches
from segrl.errors import ConfigError, SegrlError
from segrl.experiments.lm_train import LMTrainConfig, lm_and_trainer
from segrl.lm.config import resolve_lm_config, word_discovery_lm
from segrl.lm.decoding import LMSegmenter
from segrl.lm.training import bits_per_char
from segrl.metrics import POSTERIOR_PREFIX, evaluate_word_discovery
from segrl.runtime import set_threads


def counts(text: str) -> list[int]:
    """``--at``: increasing positive update counts, comma-separated."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a list of update counts, e.g. 250,500,1000"
        ) from None
    if any(v <= 0 for v in values) or values != sorted(set(values)):
        raise argparse.ArgumentTypeError(
            f"{text!r}: the update counts must be positive and increasing"
        )
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lm_budget_curve", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "corpus", help="a corpus without spaces: segmented:PATH (spaces are the gold)"
    )
    parser.add_argument(
        "--max-len", type=int, default=DataConfig.max_len, help="as segrl lm train's"
    )
    parser.add_argument("--at", type=counts, required=True, help="update counts, e.g. 250,500,1000")
    parser.add_argument("--train-seed", type=int, default=0, help="as segrl lm train's")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--threads", type=int, default=None, help="PyTorch CPU threads")
    parser.add_argument("--out", help="a JSON-lines file that each count's metrics are appended to")
    add_set_arg(parser, "a segrl lm train option by its dotted key, e.g. --set lm.hidden_dim=128")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    try:
        given = parse_set(args._set)
        config = build_config(LMTrainConfig, None, given, "--set")
        config.seed, config.device = args.train_seed, args.device
        config.data = DataConfig(corpus=args.corpus, max_len=args.max_len)
        validate_config(config)
        corpus = load_corpus(config.data)
        if not corpus.gold_from_spaces:
            raise ConfigError(
                f"{args.corpus} is read as text with its spaces: the curve scores word discovery; "
                "give a segmented corpus, segmented:PATH (its spaces are the gold)"
            )
        lm_options = resolve_lm_config(word_discovery_lm(config.lm), corpus.kind)
        texts = without_spaces(corpus)  # as segrl lm train reads a corpus without spaces
        model, trainer = lm_and_trainer(config, lm_options, texts, texts.train)
    except SegrlError as e:
        print(f"lm_budget_curve: error: {e}", file=sys.stderr)
        return 2
    batches = training_batches(texts.train, config.batch_size, config.seed)
    per_epoch = math.ceil(len(texts.train) / config.batch_size)
    step, started = 0, time.perf_counter()
    for target in args.at:
        while step < target:
            if step and step % per_epoch == 0:  # as segrl lm train prunes its lexicon after every
                trainer.prune_lexicon(min_updates=per_epoch)  # epoch, once it has scored it
            trainer.marginal_step(next(batches))
            step += 1
        trained = time.perf_counter() - started
        viterbi = evaluate_word_discovery(LMSegmenter(model).segment_words, corpus.test)
        posterior = evaluate_word_discovery(
            LMSegmenter(model, decoding="posterior").segment_words, corpus.test
        )
        row = {"updates": step, "train_seed": args.train_seed, "train_seconds": round(trained, 1)}
        row["set"] = dict(sorted(given.items()))
        row["valid_bits_per_char"] = bits_per_char(model, texts.valid, batch_size=config.batch_size)
        if trainer.usage is not None:  # a pruned lexicon: the entries it keeps
            row["lexicon_entries"] = int(trainer.usage.kept().sum())
        row.update(viterbi)
        row.update({f"{POSTERIOR_PREFIX}{name}": value for name, value in posterior.items()})
        print(
            f"{step} updates: word F1 {viterbi['word_f1']:.3f} (posterior "
            f"{posterior['word_f1']:.3f}), valid {row['valid_bits_per_char']:.3f} bits/char",
            flush=True,
        )
        if args.out:
            with open(args.out, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
        started = time.perf_counter() - trained  # the time spent scoring is not training's
    return 0


if __name__ == "__main__":
    sys.exit(main())
