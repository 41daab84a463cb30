"""A student beside its teacher read at several densities: is the student's gain its boundaries' or
its density's?

A student that beats its teacher's posterior decoding (a split where the boundary's posterior is
above one half) may do it by splitting more often where the gold is dense. This prints, on the gold
words, the student's boundary precision / recall / F1 and units per character, then its teacher's
posterior decoded at lower and higher thresholds (``segrl.lm.decoding.LMSegmenter``'s
``threshold``): where the teacher at the student's density scores as well, the student's gain is
the density's. The thresholds read the gold, so they are a diagnosis, never a setting.

    python tools/teacher_density.py runs/RUN --gold ../shared/data/sigmorphon2022/ces.word.dev.tsv

``RUN`` is a ``segrl train`` run folder whose evaluator was an ``slm`` (its ``segmenter/teacher``),
or ``segrl lm train``'s run folder or a saved ``slm`` (a teacher alone: its Viterbi decoding, then its
posterior at each threshold; does any density reach a target?). Without ``--gold`` the words are the
bundled gold set's, all of them, as ``segrl lm train`` scores them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import segrl
from segrl.data.gold import GoldWord, load_gold
from segrl.errors import SegrlError
from segrl.evaluators.lm import PosteriorTeacher
from segrl.lm.decoding import LMSegmenter
from segrl.lm.models import SegmentLM, load_lm
from segrl.metrics import segmentation_metrics

THRESHOLDS = (0.7, 0.5, 0.4, 0.3, 0.2, 0.15, 0.1, 0.05)
GOLD_FILE_WORDS = 10_000
"""The gold words read from a ``--gold`` file unless ``--gold-max-words`` says otherwise (as the
sigmorphon suite scores them)."""


def add_gold_arguments(parser: argparse.ArgumentParser) -> None:
    """``--gold`` and ``--gold-max-words``, read by ``read_gold_words`` (the diagnosis tools that
    score a teacher on gold words share them)."""
    parser.add_argument(
        "--gold", type=Path, help="a gold word segmentation file (default: the bundled gold set)"
    )
    parser.add_argument(
        "--gold-max-words",
        type=int,
        metavar="N",
        help=f"score on this many gold words (default: {GOLD_FILE_WORDS:,} of a --gold file, "
        "all of the bundled set)",
    )


def read_gold_words(gold_path: Path | None, max_words: int | None) -> list[GoldWord]:
    """The gold words of ``--gold`` (the bundled set without it), ``GOLD_FILE_WORDS`` of a file
    unless ``max_words`` says otherwise."""
    if max_words is None and gold_path is not None:
        max_words = GOLD_FILE_WORDS
    return load_gold(gold_path, max_words=max_words)


def load_teacher_lm(path: Path) -> SegmentLM:
    """A ``segrl lm train`` run folder's best model, or a saved ``slm``."""
    return load_lm(path / "best" if (path / "best").is_dir() else path)


def rows(
    run: Path, gold_path: Path | None, max_words: int | None, thresholds: tuple[float, ...]
) -> list[str]:
    gold = read_gold_words(gold_path, max_words)
    words = [g.word for g in gold]
    if (run / "segmenter").is_dir():  # a segrl train run: the student, then its teacher
        student = segrl.load_segmenter(run / "segmenter")
        lm = PosteriorTeacher.load(run / "segmenter" / "teacher").lm
        segmenters = [("student", student.segment_words)]
    else:  # segrl lm train's run folder (its best model) or a saved slm: the teacher alone
        lm = load_teacher_lm(run)
        segmenters = [("teacher, Viterbi", LMSegmenter(lm).segment_words)]
    segmenters += [
        (
            f"teacher, posterior > {t}",
            LMSegmenter(lm, decoding="posterior", threshold=t).segment_words,
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
            f"{metrics['boundary_f1']:.3f} | {metrics['gold_units_per_char']:.3f} |"
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "run",
        type=Path,
        help="a segrl train run folder with an slm evaluator, a segrl lm train run folder or a saved slm",
    )
    add_gold_arguments(parser)
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
