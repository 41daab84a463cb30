"""Flip scores of every position versus one scoring pass, for the segmental LMs, in one run.

For one batch of held-out sentences of the bundled corpus under three segmentations (random splits,
all characters, whole words), times

- one ``slm`` scoring pass (``log p(X, S)`` per sentence and per segment),
- ``slm`` flip scores of every word-internal position, computed locally (``SLM.flip_scores``),
- the same flip scores by brute force (one full rescoring per position),
- and, for reference, ``segment-lstm``'s scoring pass and its (brute-force) flip scores,

and prints each as a ratio to the scoring pass of its model (target: local flips <= 3x one ``slm``
scoring pass). The models are untrained: the cost does not depend on the weights.

    .venv/bin/python bench/bench_lm.py [--batch-size 32] [--threads 1] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from segrl.data import load_corpus
from segrl.lm import LMConfig, SegmentedBatch, build_lm


def timed(function, repeats: int) -> tuple[float, object]:
    """Median wall time of ``repeats`` calls (after one warm-up call), and the last result."""
    result = function()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def segmentations(vocab, sentences, seed: int) -> dict[str, SegmentedBatch]:
    width = max(len(s) for s in sentences)
    generator = torch.Generator().manual_seed(seed)
    random_splits = torch.rand(len(sentences), width, generator=generator) < 0.3
    return {
        "random 30%": SegmentedBatch.from_decisions(vocab, sentences, random_splits),
        "characters": SegmentedBatch.from_decisions(
            vocab, sentences, torch.ones(len(sentences), width)
        ),
        "words": SegmentedBatch.from_decisions(
            vocab, sentences, torch.zeros(len(sentences), width)
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    corpus = load_corpus()
    sentences = corpus.test[: args.batch_size]
    slm = build_lm(LMConfig(model="slm"), corpus.vocab).eval()
    segment_lstm = build_lm(LMConfig(model="segment-lstm"), corpus.vocab).eval()
    chars = sum(len(s) for s in sentences)
    print(
        f"batch: {len(sentences)} sentences, {chars} characters; torch threads {args.threads}; "
        f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}"
    )
    header = f"{'segmentation':<12} {'model':<13} {'what':<22} {'seconds':>9} {'x score':>8}"
    print(header)
    print("-" * len(header))
    for name, batch in segmentations(corpus.vocab, sentences, args.seed).items():
        flippable = int(batch.flippable.sum())
        score_time, _ = timed(lambda b=batch: slm.score(b), args.repeats)
        local_time, local = timed(lambda b=batch: slm.flip_scores(b), args.repeats)
        brute_time, brute = timed(lambda b=batch: slm.brute_force_flip_scores(b), 1)
        difference = (local - brute).abs().max().item()
        lstm_score, _ = timed(lambda b=batch: segment_lstm.score(b), args.repeats)
        lstm_flips, _ = timed(lambda b=batch: segment_lstm.flip_scores(b), 1)
        rows = [
            ("slm", "score", score_time, score_time),
            ("slm", "flips, local", local_time, score_time),
            ("slm", "flips, brute force", brute_time, score_time),
            ("segment-lstm", "score", lstm_score, lstm_score),
            ("segment-lstm", "flips (brute force)", lstm_flips, lstm_score),
        ]
        for model, what, seconds, reference in rows:
            print(f"{name:<12} {model:<13} {what:<22} {seconds:9.4f} {seconds / reference:8.2f}")
        print(
            f"{name:<12} {flippable} flippable positions; local vs brute force max |diff| {difference:.2e}"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
