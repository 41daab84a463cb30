"""``segrl segment`` (a trained segmenter on words or text, streaming) and ``segrl evaluate`` (a
segmenter, or any tool's predictions, against gold segmentations)."""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from segrl.cli.common import where_to_look
from segrl.errors import DataError

CHUNK = 512
"""Items segmented (and written) at a time: output streams while the input is read."""
INPUT_FORMATS = ("auto", "words", "counts", "text", "utterances")
STDIN = "<stdin>"
MODEL_HELP = (
    "a folder a segrl job wrote, an MLflow model URI, a SentencePiece .model, a Morfessor "
    "segmentation file (morfessor -S) or a FlatCat tarball (flatcat-train -s model.tar.gz)"
)


def register(subparsers: argparse._SubParsersAction) -> None:
    from segrl.formats import MIN_COVERAGE, OUTPUT_FORMATS, PREDICTION_FORMATS

    parser = subparsers.add_parser(
        "segment",
        help="segment words or text with a trained segmenter (stdin to stdout)",
        description="Segment words (one per line), word-count lists or running text with a trained "
        "segmenter: a folder a segrl job wrote, an MLflow URI (runs:/RUN_ID/model, "
        "models:/NAME/VERSION), a SentencePiece model, a Morfessor segmentation file or a FlatCat tarball. Reads FILE or stdin, writes to stdout as it goes.",
    )
    parser.add_argument("--model", required=True, metavar="M", help=MODEL_HELP)
    parser.add_argument("file", nargs="?", metavar="FILE", help="input (default: stdin)")
    parser.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        default="auto",
        help="words (one per line), counts ('count word' or 'word<TAB>count'), text (a sentence "
        "per line), utterances (word discovery: a line is an utterance, segmented whole with its "
        "spaces removed, its words written separated by spaces), or auto (told apart by the "
        "first lines; default; never utterances)",
    )
    parser.add_argument(
        "--format",
        choices=OUTPUT_FORMATS,
        help="morfessor ('un expected ly', counted '12 un + expected + ly' as Morfessor's "
        "segmentation files; the default for words), sigmorphon ('word<TAB>un "
        "@@expected @@ly'; the default for text) or separator ('un-expected-ly', see --separator)",
    )
    parser.add_argument("--separator", default="-", help="the separator of --format separator")
    parser.add_argument(
        "--sample",
        type=float,
        metavar="ALPHA",
        help="a SentencePiece unigram model only: sample each segmentation (subword "
        "regularisation) from its 64 best with smoothing ALPHA in (0, 1] instead of taking the best",
    )
    parser.add_argument("--seed", type=int, default=0, help="the seed of --sample (default 0)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--threads", type=int, metavar="N", help="PyTorch CPU threads")
    parser.set_defaults(func=run_segment)

    evaluate = subparsers.add_parser(
        "evaluate",
        help="score a segmenter, or any tool's predictions, against gold segmentations",
        description="Score a trained segmenter (--model) or a predictions file (--predictions, in "
        "Morfessor's, SIGMORPHON 2022's or a separator format) against gold files (Morpho Challenge "
        "or SIGMORPHON 2022; several allowed; default: the bundled English set) with the metrics "
        "of segrl.metrics. --log records each as an MLflow run that segrl compare shows.",
    )
    source = evaluate.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", metavar="M", help=MODEL_HELP)
    source.add_argument("--predictions", metavar="FILE", help="segmentations, one word a line")
    evaluate.add_argument(
        "--predictions-format",
        choices=PREDICTION_FORMATS,
        default="auto",
        help="auto (sigmorphon where a line has a tab; else told by its marks: '▁' sentencepiece, "
        "'@@' bpe, ' + ' or spaces morfessor, --separator in lone words separator), morfessor, "
        "sigmorphon, separator, sentencepiece, bpe",
    )
    evaluate.add_argument("--separator", default="-", help="the separator of a separator format")
    evaluate.add_argument(
        "--min-coverage",
        type=float,
        default=MIN_COVERAGE,
        metavar="F",
        help="the smallest fraction of a gold file's words the predictions must segment to be "
        f"scored (default {MIN_COVERAGE:g})",
    )
    evaluate.add_argument(
        "--gold", action="append", metavar="FILE", help="a gold file (repeat for several)"
    )
    evaluate.add_argument("--log", action="store_true", help="record the scores in MLflow")
    evaluate.add_argument(
        "--name",
        help="the segmenter's name in segrl compare, and its run's with --log (default: the "
        "registered model's name and version, NAME-v1, or the run's id or the file's name)",
    )
    evaluate.add_argument("--experiment", default="segrl", help="MLflow experiment (with --log)")
    evaluate.set_defaults(func=run_evaluate)


def input_lines(path: str | None) -> Iterator[tuple[str, int, str]]:
    """``(file, line number, text)`` of a file or of stdin, checked alike (``segrl.data.read_lines``:
    UTF-8, no line longer than its limit)."""
    from segrl.data.corpus import read_lines, stream_lines

    if path not in (None, "-"):
        yield from read_lines(path)
        return
    yield from stream_lines(sys.stdin.buffer, STDIN)


def detect_input_format(lines: Iterator) -> tuple[str, Iterator]:
    """The input's format from its first lines, and the lines (none lost)."""
    from segrl.data.wordlists import DETECT_LINES, detect_format

    head = list(itertools.islice(lines, DETECT_LINES))
    return detect_format(head), itertools.chain(head, lines)


def run_segment(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from segrl.formats import format_sentence, format_word
    from segrl.loading import load_segmenter

    if not args.separator:
        raise DataError("--separator must not be empty")
    if args.threads is not None:
        from segrl.runtime import set_threads

        set_threads(args.threads)
    segmenter = load_segmenter(args.model)
    if args.sample is not None:
        segmenter.sample(args.sample, args.seed)
    lines = input_lines(args.file)
    fmt = args.input_format
    if fmt == "auto":
        fmt, lines = detect_input_format(lines)
    if fmt == "utterances" and args.format is not None:
        raise DataError(
            f"--format {args.format}: utterances are written as the words found, separated by "
            "spaces (the form of a segmented corpus); leave --format out"
        )
    out_format = args.format or ("sigmorphon" if fmt == "text" else "morfessor")
    if fmt == "text" and out_format == "morfessor":
        format_sentence("", [], "morfessor")  # refuses: no word boundaries in Morfessor's format
    progress = tqdm(
        lines, unit=" lines", file=sys.stderr, disable=True if args.quiet else None, leave=False
    )
    out = sys.stdout
    for chunk in _chunks(_items(progress, fmt), CHUNK):
        texts = [text for text, _count in chunk]
        if fmt == "utterances":
            rendered = [" ".join(s) for s in segmenter.segment_utterances(texts)]
        elif fmt == "text":
            found = segmenter.segment_sentences(texts)
            rendered = [
                format_sentence(t, s, out_format, args.separator)
                for t, s in zip(texts, found, strict=True)
            ]
        else:
            found = segmenter.segment_words(texts)
            rendered = [
                format_word(t, s, out_format, args.separator, count)
                for (t, count), s in zip(chunk, found, strict=True)
            ]
        out.write("\n".join(rendered) + "\n")
        out.flush()
    progress.close()
    return 0


def _items(lines: Iterable[tuple[str, int, str]], fmt: str) -> Iterator[tuple[str, int | None]]:
    """``(text, count)``: each word (``words``), each counted word (``counts``) or each sentence."""
    if fmt == "counts":
        from segrl.data.wordlists import read_word_counts

        yield from read_word_counts(lines, "counts", "--input-format")
        return
    for _file, _number, line in lines:
        if fmt in ("text", "utterances"):
            if line.strip():
                yield " ".join(line.split()), None
        else:
            for word in line.split():
                yield word, None


def _chunks(items: Iterable, size: int) -> Iterator[list]:
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def run_evaluate(args: argparse.Namespace) -> int:
    from segrl.scoring import evaluate_model, evaluate_predictions, print_scores

    golds = args.gold or [None]
    if args.model:
        results = evaluate_model(args.model, golds)
        name = args.name or _model_name(args.model)
    else:
        if not 0 <= args.min_coverage <= 1:
            raise DataError(f"--min-coverage {args.min_coverage:g}: give a fraction from 0 to 1")
        results = evaluate_predictions(
            args.predictions, golds, args.predictions_format, args.separator, args.min_coverage
        )
        name = args.name or Path(args.predictions).name
    print_scores(name, results)
    if args.log:
        from segrl.scoring import log_scores

        options = None
        if args.predictions:
            options = {
                "predictions.format": args.predictions_format,
                "predictions.separator": args.separator,
                "predictions.min_coverage": f"{args.min_coverage:g}",
            }
        log_scores(name, results, args.model or args.predictions, args.experiment, options)
        print(where_to_look(args.experiment))
    return 0


def _model_name(model: str) -> str:
    """The name a scored model's segmenter (and its run) gets without ``--name``: a registered
    model's name and version (``models:/NAME/2`` is ``NAME-v2``; ``models:/NAME@ALIAS`` is
    ``NAME@ALIAS``), a run's id (``runs:/RUN_ID/model``), else the folder's name."""
    text = model.rstrip("/")
    if text.startswith("models:/"):
        name, _, version = text.removeprefix("models:/").partition("/")
        if version.isdigit():
            return f"{name}-v{version}"
        return f"{name}-{version}" if version else name
    return text.rsplit("/", 2)[-2] if text.endswith("/model") else Path(text).name
