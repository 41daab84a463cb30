"""The cost of denormal floats in ``segrl lm train``'s update, with and without flushing them to
zero, in one run.

A trained segmental LM's lexicon drives some probabilities below float32's normal range; a CPU
computes on such denormal numbers many times more slowly. ``segrl.runtime.set_threads`` (every
job's CPU settings) flushes them to zero. This builds the model ``segrl lm train`` builds on a word
list (``segmenter_lm``: ``slm`` without context, the direct lexicon of 100,000 entries at
``LEXICON_COST``, started from their counts: ``build_word_lm``), trains it ``--warm`` updates
(flushed, the fast way), then times ``--updates`` further updates from the same weights and
optimiser state twice: denormals kept, then flushed.
Prints the median seconds per update of each and their ratio, and the held-out bits per character
after each, which should agree. (With the lexicon started flat the flushed update was 2.62x as fast
after 300 updates; started from its counts, the default, about 1.0x: no denormals then.)

    .venv/bin/python bench/lm_denormals.py                          # wordfreq:cs, 300 + 20 updates
    .venv/bin/python bench/lm_denormals.py --corpus wordfreq:hu --warm 600
"""

from __future__ import annotations

import argparse
import copy
import random

import torch
from lm_step import seconds_per_update  # bench/ is run as a folder of scripts

from segrl.config import DataConfig
from segrl.data import load_corpus
from segrl.experiments.lm_train import segmenter_lm
from segrl.lm.config import resolve_lm_config
from segrl.lm.models import build_word_lm
from segrl.lm.training import LMTrainer, bits_per_char
from segrl.runtime import seed_everything


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="wordfreq:cs")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--warm", type=int, default=300)
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    corpus = load_corpus(DataConfig(corpus=args.corpus))
    options = resolve_lm_config(segmenter_lm(), corpus.kind)
    words = sorted(corpus.word_counts("train"))
    held_out = sorted(set(corpus.word_counts("valid")) - set(words))[:2000]
    seed_everything(0)
    model = build_word_lm(options, corpus.vocab, words)
    trainer = LMTrainer(model, corpus=words)
    order = words[:]
    random.Random(0).shuffle(order)
    size = args.batch_size
    starts = ((i * size) % len(order) for i in range(args.warm + args.updates + 1))
    batches = [order[start : start + size] for start in starts]
    torch.set_flush_denormal(True)
    for batch in batches[: args.warm]:
        trainer.marginal_step(batch)
    state = copy.deepcopy(trainer.state_dict())
    timed = batches[args.warm :]

    def run(flush: bool) -> tuple[float, float]:
        trainer.load_state_dict(copy.deepcopy(state))
        torch.manual_seed(1)  # the same dropout in both
        torch.set_flush_denormal(flush)
        seconds = seconds_per_update(trainer, timed)
        torch.set_flush_denormal(True)
        return seconds, bits_per_char(model, held_out, batch_size=256)

    kept, kept_bits = run(False)
    flushed, flushed_bits = run(True)
    print(f"{args.corpus}: after {args.warm} updates, {args.updates} more timed")
    print(f"denormals kept:    {kept:.3f} s per update, held-out {kept_bits:.4f} bits/char")
    print(
        f"denormals flushed: {flushed:.3f} s per update, held-out {flushed_bits:.4f} bits/char "
        f"({kept / flushed:.2f}x faster)"
    )


if __name__ == "__main__":
    main()
