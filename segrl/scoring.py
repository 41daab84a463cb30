"""Scoring any segmenter against gold files after the fact: a trained one (``segrl.load_segmenter``)
or another tool's predictions (``segrl.formats``), with the metrics of ``segrl.metrics``.

    >>> results = evaluate_predictions("morfessor.out", ["eng.word.dev.tsv"])
    >>> results[0].metrics["boundary_f1"]
"""

from __future__ import annotations

import hashlib
import shlex
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from segrl.data.corpus import gold_utterances
from segrl.data.gold import (
    BUNDLED_GOLD,
    GoldWord,
    check_gold_characters,
    gold_fingerprint,
    load_gold,
)
from segrl.data.languages import gold_language
from segrl.data.segmented import is_segmented
from segrl.errors import DataError, DataWarning
from segrl.formats import MIN_COVERAGE
from segrl.metrics import (
    BOUNDARY_F1,
    BOUNDARY_PRECISION,
    BOUNDARY_RECALL,
    COVERED_FRACTION,
    GOLD_UNITS_PER_CHAR,
    GOLD_WORDS,
    MORPH_F1,
    WORD_F1,
    evaluate_word_discovery,
    evaluate_word_segmenter,
    metrics_summary,
    segmentation_metrics,
    word_discovery_metrics,
)

EVALUATED_KIND = "evaluated"
"""The ``segrl.kind`` of runs ``segrl evaluate --log`` records."""


@dataclass
class GoldScores:
    """The scores of one segmenter on one gold file."""

    gold: str
    """The gold file (``bundled:...`` for the bundled set)."""
    metrics: dict[str, float]
    fingerprint: str
    """``segrl.data.gold.gold_fingerprint`` of the gold set."""
    size: int
    """The gold set's words."""
    covered: int
    """The gold words scored (all of them, but for a predictions file)."""


def gold_label(path: str | None) -> str:
    return path or f"bundled:{BUNDLED_GOLD}"


def utterance_fingerprint(utterances: Sequence[str]) -> str:
    """A hash of gold utterances (word discovery): equal gold texts have equal fingerprints."""
    return hashlib.sha256("\n".join(utterances).encode("utf-8")).hexdigest()[:16]


def evaluate_model(model: str, golds: Sequence[str | None]) -> list[GoldScores]:
    """A trained segmenter (folder or MLflow URI) on each gold file (None: the bundled set); a
    segmented source (``segmented:PATH``) scores it as word discovery on its utterances. A gold
    set most of whose characters the model does not know (another script) is a ``DataError``, as
    it is against a corpus (``segrl.data.gold.check_gold_characters``)."""
    from segrl.loading import load_segmenter

    segmenter = load_segmenter(model)
    out = []
    for path in golds:
        if is_segmented(path):
            utterances = gold_utterances(path)
            metrics = evaluate_word_discovery(segmenter.segment_words, utterances)
            n = len(utterances)
            out.append(GoldScores(path, metrics, utterance_fingerprint(utterances), n, n))
            continue
        gold = load_gold(path)
        if segmenter.characters:  # the gold check of baseline and train, against the model's
            check_gold_characters(
                gold,
                segmenter.characters,
                path,
                f"the model {model}",
                "the language and script the model was trained on (or a model of the gold "
                "set's language)",
            )
        metrics = evaluate_word_segmenter(segmenter.segment_words, gold)
        out.append(
            GoldScores(gold_label(path), metrics, gold_fingerprint(gold), len(gold), len(gold))
        )
    return out


def evaluate_predictions(
    predictions: str,
    golds: Sequence[str | None],
    fmt: str = "auto",
    separator: str = "-",
    min_coverage: float = MIN_COVERAGE,
) -> list[GoldScores]:
    """A predictions file on each gold file: the gold words it segments are scored (lower-cased, as
    gold files are read); ``covered_fraction`` says how many of them it has, and a gold file of
    which it segments less than ``min_coverage`` (or none) is a ``DataError``."""
    from segrl.data.corpus import read_lines
    from segrl.formats import predictions_by_word

    lines = list(read_lines(predictions))
    predicted: dict[str, list[str]] = {}
    if not all(is_segmented(path) for path in golds):  # word discovery reads utterances
        predicted, conflicts = predictions_by_word(lines, fmt, separator)
        if not predicted:
            raise DataError(f"{predictions}: no segmentations in it")
        if conflicts:
            warnings.warn(
                DataWarning(
                    f"{predictions}: lines that segment a word differently from its first "
                    f"line, which is the one scored: {len(conflicts)} ({conflicts[0]})"
                ),
                stacklevel=2,
            )
    out = []
    for path in golds:
        if is_segmented(path):
            out.append(_score_utterances(predictions, [t for _, _, t in lines], path))
            continue
        gold = load_gold(path)
        covered: list[GoldWord] = [g for g in gold if g.word in predicted]
        if not covered or len(covered) / len(gold) < min_coverage:
            raise DataError(
                f"{predictions}: segments {len(covered)} of the {len(gold)} words of "
                f"{gold_label(path)} ({len(covered) / len(gold):.1%}, below --min-coverage "
                f"{min_coverage:g}) {_format_read([t for _, _, t in lines], fmt, separator)}; give "
                "the predictions for that gold file's words, the format with --predictions-format, "
                "or a lower --min-coverage"
            )
        metrics = segmentation_metrics([predicted[g.word] for g in covered], covered)
        metrics[COVERED_FRACTION] = len(covered) / len(gold)
        out.append(
            GoldScores(gold_label(path), metrics, gold_fingerprint(gold), len(gold), len(covered))
        )
    return out


def _score_utterances(predictions: str, lines: Sequence[str], source: str) -> GoldScores:
    """Word discovery: a predictions file of utterances, one a line with the words found separated
    by spaces (as ``segrl segment --input-format utterances`` writes them), against the gold
    utterances of ``source``, line by line."""
    utterances = gold_utterances(source)
    found = [line.split() for line in lines if line.strip()]
    if len(found) != len(utterances):
        raise DataError(
            f"{predictions}: {len(found)} utterances for the {len(utterances)} of {source}; give "
            "one line per gold utterance, in its order"
        )
    for number, (words, utterance) in enumerate(zip(found, utterances, strict=True), start=1):
        if "".join(words) != utterance.replace(" ", ""):
            raise DataError(
                f"{predictions}: utterance {number} spells {''.join(words)!r}, the gold "
                f"{utterance.replace(' ', '')!r}; give the predictions for {source}'s utterances"
            )
    metrics = word_discovery_metrics(found, utterances)
    n = len(utterances)
    return GoldScores(source, metrics, utterance_fingerprint(utterances), n, n)


SEPARATOR_GUESSES = ("-", "+", "|", "/", "=")
"""The separators a predictions file read with another ``--separator`` is checked for (for an
error's hint)."""


def _format_read(texts: Sequence[str], fmt: str, separator: str) -> str:
    """How the predictions were read, and the marker that chose the format (for an error). A file
    with no format's marker (read as Morfessor's, one morph a line) is said to look separated by
    one of ``SEPARATOR_GUESSES`` where its words are, else nothing is guessed."""
    from segrl.formats import detect_predictions_format

    found, marker = detect_predictions_format(texts, separator)
    read = "read as " + (found if fmt == "auto" else f"--predictions-format {fmt}")
    if fmt == "separator":
        read += f" with --separator {shlex.quote(separator)}"
    if any(marker in t for t in texts):
        if fmt == "auto":
            return f"{read} (saw {marker!r})"
        return f"{read}, though it looks {found} (saw {marker!r})" if found != fmt else read
    guess = next(
        (
            s
            for s in SEPARATOR_GUESSES
            if s != separator and detect_predictions_format(texts, s) == ("separator", s)
        ),
        None,
    )
    if guess is None:
        return read if fmt != "auto" else f"{read} (no line has a format's marker)"
    flags = f"--predictions-format separator --separator {shlex.quote(guess)}"
    return f"{read}, though its words look separated by {guess!r} ({flags})"


def print_scores(name: str, results: Sequence[GoldScores]) -> None:
    """One line per gold file: boundary P/R/F1, morph F1 (SIGMORPHON 2022's), units per character
    of the gold words."""
    for r in results:
        m = r.metrics
        if WORD_F1 in m:
            print(f"[{name}] {r.gold}: {metrics_summary(m)} ({r.size} utterances)", flush=True)
            continue
        covered = (
            f", {m[COVERED_FRACTION]:.1%} of gold words covered" if COVERED_FRACTION in m else ""
        )
        print(
            f"[{name}] {r.gold} ({gold_language(r.gold)}): boundary P/R/F1 {m[BOUNDARY_PRECISION]:.3f} / "
            f"{m[BOUNDARY_RECALL]:.3f} / {m[BOUNDARY_F1]:.3f}, morph F1 {m[MORPH_F1]:.3f}, "
            f"gold units/char {m[GOLD_UNITS_PER_CHAR]:.3f} ({m[GOLD_WORDS]:.0f} words{covered})",
            flush=True,
        )


def log_scores(
    name: str,
    results: Sequence[GoldScores],
    source: str,
    experiment: str,
    predictions_options: Mapping[str, str] | None = None,
) -> None:
    """One MLflow run per gold file, a segmenter of kind ``evaluated`` that ``segrl compare`` shows
    beside the trained ones (grouped by its gold file), with the gold file as its dataset input
    (``evaluation``) and the share of it scored (``covered_fraction``: 1.0 for a model). ``predictions_options``: ``source`` is a predictions file, read with these
    options (``predictions.format``, ...), logged as params, and the file is an input too
    (``predictions``)."""
    from segrl.tracking.runs import log_dataset_input, log_segmenter, set_tags, start_run
    from segrl.tracking.tags import (
        GOLD_COVERAGE_TAG,
        GOLD_FINGERPRINT_TAG,
        GOLD_LANGUAGE_TAG,
        GOLD_TAG,
        gold_coverage,
        label_tags,
    )

    for r in results:
        params = {"source": source, "gold.words": str(r.size), "gold.covered": str(r.covered)}
        params |= predictions_options or {}
        if not r.gold.startswith("bundled:"):
            params["gold.path"] = r.gold
        with start_run(params, experiment, name):
            tags = {
                GOLD_TAG: r.gold,
                GOLD_FINGERPRINT_TAG: r.fingerprint,
                GOLD_LANGUAGE_TAG: gold_language(r.gold),
                GOLD_COVERAGE_TAG: gold_coverage(
                    r.covered, r.size, "utterances" if WORD_F1 in r.metrics else "words"
                ),
            }
            set_tags({**tags, **label_tags(tags)})
            log_dataset_input("gold", r.gold, r.fingerprint, "evaluation")
            if predictions_options is not None and Path(source).is_file():
                digest = hashlib.sha256(Path(source).read_bytes()).hexdigest()[:16]
                log_dataset_input("predictions", source, digest, "predictions")
            log_segmenter(name, EVALUATED_KIND, {COVERED_FRACTION: r.covered / r.size, **r.metrics})
