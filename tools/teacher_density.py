"""A student beside its teacher read at several densities: is the student's gain its boundaries' or
its density's?

A student that beats its teacher's posterior decoding (a split where the boundary's posterior is
above one half) may do it by splitting more often where the gold is dense. This prints, on the gold
words, the student's boundary precision / recall / F1 and units per character, then its teacher's
posterior decoded at lower and higher thresholds (``segrl.lm.segmenter.LMSegmenter``'s
``threshold``): where the teacher at the student's density scores as well, the student's gain is
the density's. The thresholds read the gold, so they are a diagnosis, never a setting.

    python tools/teacher_density.py runs/RUN --gold ../shared/data/sigmorphon2022/ces.word.dev.tsv

``RUN`` is a ``segrl train`` run folder whose evaluator was an ``slm`` (its ``segmenter/teacher``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import segrl
from segrl.data.gold import load_gold
from segrl.errors import SegrlError
from segrl.evaluators.lm import PosteriorTeacher
from segrl.lm.segmenter import LMSegmenter
from segrl.metrics import segmentation_metrics

THRESHOLDS = (0.7, 0.5, 0.4, 0.3, 0.2, 0.15, 0.1, 0.05)


def rows(run: Path, gold_path: Path, max_words: int, thresholds: tuple[float, ...]) -> list[str]:
    gold = load_gold(gold_path, max_words=max_words)
    words = [g.word for g in gold]
    student = segrl.load_segmenter(run / "segmenter")
    teacher = PosteriorTeacher.load(run / "segmenter" / "teacher")
    segmenters = [("student", student.segment_words)]
    segmenters += [
        (
            f"teacher, posterior > {t}",
            LMSegmenter(teacher.lm, decoding="posterior", threshold=t).segment_words,
        )
        for t in thresholds
    ]
    out = [
        "| segmenter | P | R | F1 | units per character (gold words) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, segment_words in segmenters:
        metrics = segmentation_metrics(segment_words(words), gold)  # units per character of these
        out.append(
            f"| {name} | {metrics['boundary_precision']:.3f} | {metrics['boundary_recall']:.3f} | "
            f"{metrics['boundary_f1']:.3f} | {metrics['units_per_char']:.3f} |"
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a segrl train run folder with an slm evaluator")
    parser.add_argument("--gold", type=Path, required=True, help="a gold word segmentation file")
    parser.add_argument("--gold-max-words", type=int, default=10_000, metavar="N")
    parser.add_argument(
        "--thresholds",
        type=float,
        nargs="+",
        default=THRESHOLDS,
        metavar="T",
        help="posterior thresholds to decode the teacher at (default: %(default)s)",
    )
    args = parser.parse_args()
    try:
        table = rows(args.run, args.gold, args.gold_max_words, tuple(args.thresholds))
    except SegrlError as e:  # a folder or gold file that is not one: say which, as the CLI does
        print(f"teacher_density: error: {e}", file=sys.stderr)
        return 2
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
