"""One marginal-likelihood update of ``segrl lm train``'s word-discovery ``slm`` with each context, in
one run: the characters before each segment (``lstm``, the default on text without spaces), the
segment before it alone (``segment``, a bigram over segments), and ``segment`` with the
expected-length regulariser.

Builds the model ``segrl lm train`` builds on a corpus without spaces (segments of at most
``WORD_MAX_SEGMENT_LENGTH`` characters) and times ``LMTrainer.marginal_step`` on the same batches
of training utterances from the same seed, printing the median seconds per update of each and its
ratio to the ``lstm`` context's. The weights' values do not change the cost of an update.

    .venv/bin/python bench/word_context_step.py                  # the bundled corpus's sentences
    .venv/bin/python bench/word_context_step.py --corpus segmented:../shared/data/brent/br-phono
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics

import torch
from lm_step import seconds_per_update  # bench/, the folder this script runs from

from segrl.config import DataConfig
from segrl.data import load_corpus, without_spaces
from segrl.experiments.lm_train import segmenter_lm
from segrl.lm import build_lm
from segrl.lm.config import resolve_lm_config
from segrl.lm.training import LMTrainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="segmented:bundled")
    parser.add_argument("--max-len", type=int, default=48)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--expected-length", type=float, default=0.015)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    corpus = without_spaces(load_corpus(DataConfig(corpus=args.corpus, max_len=args.max_len)))
    options = resolve_lm_config(segmenter_lm(), "unspaced")  # as segrl lm train resolves it
    texts = list(corpus.train)
    random.Random(0).shuffle(texts)
    batches = [
        texts[i * args.batch_size : (i + 1) * args.batch_size] for i in range(args.updates + 1)
    ]
    mean = statistics.mean(len(t) for batch in batches for t in batch)
    print(
        f"{args.corpus}: {args.batch_size} texts a batch, {mean:.1f} characters a text, "
        f"segments of at most {options.max_segment_length}"
    )
    runs = {
        "lstm": options,
        "segment": dataclasses.replace(options, context="segment"),
        f"segment, expected length {args.expected_length}": dataclasses.replace(
            options, context="segment", expected_length_weight=args.expected_length
        ),
    }
    base = None
    for name, config in runs.items():
        torch.manual_seed(0)
        seconds = seconds_per_update(LMTrainer(build_lm(config, corpus.vocab)), batches)
        base = base or seconds
        print(f"{name:<34} {seconds:.3f} s per update ({seconds / base:.2f}x the lstm context's)")


if __name__ == "__main__":
    main()
