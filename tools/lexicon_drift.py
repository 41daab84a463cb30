"""What a teacher's lexicon did between two of its models: does it lose gold boundaries because the
pruning took the entries that cut there, or because the entries it kept changed their weights?

A teacher trained on past 1,500 updates to its stopping point loses F1 in some languages (Spanish,
Czech). Two causes read differently here. If the pruning ratchets (an entry removed can never come
back, and the pieces that made a cut are gone), the gold boundaries lost are ones where a piece the
earlier model cut with is no longer in the later lexicon. If the unigram's likelihood moves weight
onto longer entries (a frequent sequence of morphs as one entry), the pieces are still there and the
later model prefers the longer entry. This decodes the gold words with both models (Viterbi, as
``segrl lm train`` scores them), sorts the gold boundaries the later model lost and gained, and names
the lexicon entries involved with their log share of the lexicon (``log softmax`` of the kept
entries' logits) in each model.

    python tools/lexicon_drift.py runs/EARLY runs/LATE --gold ../shared/data/sigmorphon2022/spa.word.dev.tsv

``EARLY`` and ``LATE`` are ``segrl lm train`` run folders (their best model) or saved ``slm`` models
with a direct lexicon and no categories (the word lists' teacher). The gold boundaries are those of
each word's first gold analysis.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
from teacher_density import (  # a sibling script: tools/ is on the path of a script run there
    add_gold_arguments,
    load_teacher_lm,
    read_gold_words,
)

from segrl.data.gold import GoldWord
from segrl.errors import SegrlError
from segrl.lm.decoding import LMSegmenter
from segrl.metrics import segmentation_metrics
from segrl.segmentation import boundaries_of

TOP = 15


@dataclass
class Teacher:
    """One model's lexicon (its kept entries' log shares) and its Viterbi segmentations."""

    shares: dict[str, float]
    segmentations: list[list[str]]


def read_teacher(path: Path, words: list[str]) -> Teacher:
    model = load_teacher_lm(path)
    lexicon = getattr(model, "lexicon", None)
    logits = getattr(lexicon, "logits", None)
    if logits is None or logits.dim() != 1 or getattr(model, "transitions", None) is not None:
        raise SegrlError(
            f"{path}: not a direct lexicon without categories (the word lists' teacher); "
            "lexicon_drift reads those only"
        )
    kept = lexicon.kept()
    log_shares = torch.log_softmax(logits.detach()[kept], dim=0).tolist()
    entries = [e for e, k in zip(lexicon.entries, kept.tolist(), strict=True) if k]
    return Teacher(
        dict(zip(entries, log_shares, strict=True)), LMSegmenter(model).segment_words(words)
    )


def piece_at(segments: list[str], boundary: int, after: bool) -> str:
    """The segment that ends (``after`` False) or starts (True) at character ``boundary``."""
    position = 0
    for segment in segments:
        if (after and position == boundary) or (not after and position + len(segment) == boundary):
            return segment
        position += len(segment)
    raise ValueError(f"no segment {'starts' if after else 'ends'} at {boundary} in {segments}")


def covering(segments: list[str], boundary: int) -> str:
    """The segment that spans character ``boundary`` (one that neither ends nor starts there)."""
    position = 0
    for segment in segments:
        if position < boundary < position + len(segment):
            return segment
        position += len(segment)
    raise ValueError(f"no segment spans {boundary} in {segments}")


def gold_morph_after(analysis: tuple[str, ...], boundary: int) -> str:
    return piece_at(list(analysis), boundary, after=True)


def report(early: Teacher, late: Teacher, gold: list[GoldWord]) -> list[str]:
    out = ["| | early | late |", "|---|---:|---:|"]
    scores = [segmentation_metrics(t.segmentations, gold) for t in (early, late)]
    out.append(f"| lexicon entries kept | {len(early.shares):,} | {len(late.shares):,} |")
    for name in ("boundary_precision", "boundary_recall", "boundary_f1", "gold_units_per_char"):
        out.append(f"| {name} | {scores[0][name]:.3f} | {scores[1][name]:.3f} |")

    lost_by_morph: Counter[str] = Counter()
    gained_by_morph: Counter[str] = Counter()
    causes: Counter[str] = Counter()
    merged: Counter[str] = Counter()
    early_uses: Counter[str] = Counter(s for segments in early.segmentations for s in segments)
    for word, seg_early, seg_late in zip(
        gold, early.segmentations, late.segmentations, strict=True
    ):
        analysis = word.analyses[0]
        ref = boundaries_of(analysis)
        before, after = boundaries_of(seg_early), boundaries_of(seg_late)
        for b in sorted((ref & before) - after):
            lost_by_morph[gold_morph_after(analysis, b)] += 1
            pieces = (piece_at(seg_early, b, after=False), piece_at(seg_early, b, after=True))
            pruned = [p for p in pieces if p in early.shares and p not in late.shares]
            causes[
                "a piece early cut with is pruned in late"
                if pruned
                else "no piece early cut with is pruned"
            ] += 1
            merged[covering(seg_late, b)] += 1
        for b in sorted((ref & after) - before):
            gained_by_morph[gold_morph_after(analysis, b)] += 1
    lost, gained = sum(lost_by_morph.values()), sum(gained_by_morph.values())
    out += ["", f"gold boundaries lost {lost:,}, gained {gained:,} (early to late)"]
    out += _table(
        ["lost gold boundaries, by cause", "count"],
        [[cause, f"{n:,}"] for cause, n in causes.most_common()],
    )
    out += _counts("the gold morph after a lost boundary", lost_by_morph)
    out += _counts("the gold morph after a gained boundary", gained_by_morph)

    out += _table(
        ["late's segment over a lost boundary", "uses there", "log share early", "log share late"],
        [
            [f"`{segment}`", str(n), _share(early, segment), _share(late, segment)]
            for segment, n in merged.most_common(TOP)
        ],
    )
    pruned_used = Counter(
        {e: n for e, n in early_uses.items() if e in early.shares and e not in late.shares}
    )
    out += _table(
        ["pruned (kept early, not late)", "uses by early on the gold words", "log share early"],
        [[f"`{e}`", str(n), _share(early, e)] for e, n in pruned_used.most_common(TOP)],
    )
    return out


def _counts(title: str, counts: Counter[str]) -> list[str]:
    return _table([title, "count"], [[f"`{m}`", str(n)] for m, n in counts.most_common(TOP)])


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table after an empty line, its first column text, the others numbers."""
    lines = ["", f"| {' | '.join(header)} |", "|---|" + "---:|" * (len(header) - 1)]
    return lines + [f"| {' | '.join(row)} |" for row in rows]


def _share(teacher: Teacher, entry: str) -> str:
    share = teacher.shares.get(entry)
    return "not an entry" if share is None else f"{share:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("early", type=Path, help="the earlier model: a run folder or a saved slm")
    parser.add_argument("late", type=Path, help="the later model: a run folder or a saved slm")
    add_gold_arguments(parser)
    args = parser.parse_args()
    try:
        gold = read_gold_words(args.gold, args.gold_max_words)
        words = [g.word for g in gold]
        table = report(read_teacher(args.early, words), read_teacher(args.late, words), gold)
    except SegrlError as e:  # a folder or gold file that is not one: say which, as the CLI does
        print(f"lexicon_drift: error: {e}", file=sys.stderr)
        return 2
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
