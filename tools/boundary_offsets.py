"""Where a segmenter's wrong boundaries fall: the gold's convention or the segmenter's mistake?

For any saved segmenter (a folder a segrl job wrote, or another tool's model file) on a gold set,
this prints boundary precision and recall exactly and within one character (a predicted boundary
next to a gold one counts), the cuts per word beside the gold's, and where each predicted boundary
lies against the nearest gold boundary of its word (0: on it; -1: one character before it, ...).
A segmenter whose wrong cuts sit one character before the gold's has found the gold's units and
put the boundary on the other side of a shared letter (Latin's theme vowels: `retract|ārēmus`
against the gold's `retractā|rē|mus`): the gap is the gold's convention, not a missed structure.
With a second segmenter (``--beside``) it also counts the gold boundaries that one finds and the
first misses, by what follows them (Mongolian's case endings).

    python tools/boundary_offsets.py MODEL --gold ../shared/data/sigmorphon2022/lat.word.dev.tsv
    python tools/boundary_offsets.py MODEL --gold G --beside OTHER_MODEL

The gold words are the same deterministic sample the benchmarks score (``--gold-max-words``,
10,000 by default); a word's first gold analysis is the one compared.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from segrl.data.gold import load_gold
from segrl.errors import SegrlError
from segrl.loading import load_segmenter
from segrl.metrics import boundary_prf
from segrl.segmentation import boundaries_of

FAR = 3
"""Offsets beyond this many characters are counted at it."""


def offsets(predicted: list[list[str]], gold: list[tuple[str, ...]]) -> dict[str, float]:
    """Exact and within-one boundary precision and recall, cuts per word, and each predicted
    boundary's offset to its word's nearest gold boundary (shares of the predicted ones)."""
    near = found_near = n_predicted = n_gold = 0
    where: Counter[str] = Counter()
    for segments, analysis in zip(predicted, gold, strict=True):
        cuts, truth = boundaries_of(segments), boundaries_of(analysis)
        n_predicted += len(cuts)
        n_gold += len(truth)
        for cut in cuts:
            if not truth:
                where["no gold boundary"] += 1
                continue
            nearest = min((cut - b for b in truth), key=abs)
            where[f"{max(-FAR, min(FAR, nearest)):+d}"] += 1
            near += any(abs(cut - b) <= 1 for b in truth)
        found_near += sum(any(abs(cut - b) <= 1 for cut in cuts) for b in truth)
    exact = boundary_prf(predicted, [[a] for a in gold])
    figures = {
        "boundary_precision": exact.precision,
        "boundary_recall": exact.recall,
        "precision within 1": near / max(n_predicted, 1),
        "recall within 1": found_near / max(n_gold, 1),
        "cuts per word": n_predicted / max(len(gold), 1),
        "gold cuts per word": n_gold / max(len(gold), 1),
    }
    total = max(sum(where.values()), 1)
    figures.update({f"offset {k}": v / total for k, v in sorted(where.items())})
    return figures


def missed_beside(
    words: list[str], gold: list[tuple[str, ...]], first: list[list[str]], other: list[list[str]]
) -> Counter[str]:
    """What follows each gold boundary that ``other`` finds and ``first`` does not."""
    after: Counter[str] = Counter()
    for word, analysis, mine, theirs in zip(words, gold, first, other, strict=True):
        truth = boundaries_of(analysis)
        for cut in (truth & boundaries_of(theirs)) - boundaries_of(mine):
            after[word[cut:]] += 1
    return after


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a saved segmenter (folder or another tool's model file)")
    parser.add_argument("--gold", required=True, help="a gold segmentation file")
    parser.add_argument("--gold-max-words", type=int, default=10_000)
    parser.add_argument("--beside", help="a second segmenter: the gold boundaries it finds alone")
    args = parser.parse_args(argv)
    try:
        gold = load_gold(args.gold, args.gold_max_words)
        words = [g.word for g in gold]
        analyses = [g.analyses[0] for g in gold]
        first = load_segmenter(args.model).segment_words(words)
        for name, value in offsets(first, analyses).items():
            print(f"{name}: {value:.3f}")
        if args.beside:
            other = load_segmenter(args.beside).segment_words(words)
            after = missed_beside(words, analyses, first, other)
            print(
                f"gold boundaries {args.beside} finds and {args.model} misses: {sum(after.values())}"
            )
            print(
                "  what follows them, most often:",
                ", ".join(f"{s} {n}" for s, n in after.most_common(15)),
            )
    except SegrlError as error:  # a model or gold file that is not one: say which, as the CLI does
        print(f"boundary_offsets: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
