"""The metrics every segmenter is measured with, whatever finds its units.

- ``boundary_prf``: boundary precision/recall/F1 against gold, micro-averaged over boundaries; where a
  word has alternative gold analyses, the one that matches the prediction best counts.
- ``morph_prf``: morph precision/recall/F1 as the SIGMORPHON 2022 shared task scores them (per word,
  the longest common subsequence of the predicted and gold morph sequences counts as correct morphs;
  micro over morphs). Unlike boundary F1, a word left whole scores one correct morph when the gold
  leaves it whole too, and one predicted and one gold morph when it does not.
- ``word_averaged_boundary_prf``: boundary precision/recall averaged over words, as Morfessor's own
  evaluation computes them (every word weighs the same; logged as ``bpr_*``).
- ``word_boundary_prf``: the same against word boundaries, for segmentations of text with spaces hidden.
- ``word_discovery_metrics``: word discovery as the field reports it (Brent 1999; Goldwater, Griffiths
  & Johnson 2009; the segmental LMs): segmentations of utterances with their spaces removed against
  the utterances' words: word token P/R/F1 (a predicted word is right when both its edges are gold
  boundaries and none lies inside it), boundary P/R/F1 (utterance edges not counted) and lexicon
  (word type) P/R/F1 (the set of predicted word types against the set of gold ones).
- ``segment_matching_prf``: the segment-matching P/R/F1 used for units read off attention maps (each
  segment/word pair scored by the length of their longest common substring, a one-to-one Hungarian
  matching, P = LCS/|segment|, R = LCS/|word| per matched pair, macro-averaged over pairs, then sentences).
- ``nats_to_bits_per_char`` (a model's own ``bits_per_char`` is ``segrl.lm.training``'s) and
  ``units_per_char``.

``segmentation_metrics`` turns predictions into the dictionary of standard metric names that every
segmenter logs, so one MLflow view compares them all, and ``rounded_scores`` rounds the scores among
them as a run logs them (``SCORE_DECIMALS``); ``length_figure`` draws its boundary F1 by gold word
length.

Conventions for empty counts: a ratio whose denominator is zero is 1.0 when its numerator's reference is
also empty (nothing to find and nothing found) and 0.0 otherwise; F1 is 0.0 when P + R = 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from segrl.segmentation import boundaries_of

# The standard metric names (MLflow keys); every segmenter logs those that apply to it.
BOUNDARY_PRECISION = "boundary_precision"
BOUNDARY_RECALL = "boundary_recall"
BOUNDARY_F1 = "boundary_f1"
UNITS_PER_CHAR = "units_per_char"
"""Units per character of the segmenter's segmentation of held-out corpus text: logged by the runs
that train on a corpus (and in word discovery, where the held-out utterances are the gold); never
by ``segrl evaluate`` of gold words, which has no corpus."""
GOLD_UNITS_PER_CHAR = "gold_units_per_char"
"""Units per character of the segmenter's segmentations of the gold words (the gold utterances in
word discovery), in every scored run: the one to compare across runs, and the one ``segrl compare``
and the MLflow view show."""
GOLD_WORDS_PER_CHAR = "gold_words_per_char"
"""Word discovery: the gold words per non-space character of the utterances, the units per character
of a segmenter that found every word."""
WORD_BOUNDARY_F1 = "word_boundary_f1"
SEGMENT_PRECISION = "segment_precision"
SEGMENT_RECALL = "segment_recall"
SEGMENT_F1 = "segment_f1"
MORPH_PRECISION = "morph_precision"
MORPH_RECALL = "morph_recall"
MORPH_F1 = "morph_f1"
BPR_PRECISION = "bpr_precision"
BPR_RECALL = "bpr_recall"
BPR_F1 = "bpr_f1"
BITS_PER_CHAR = "bits_per_char"
WORD_PRECISION = "word_precision"
WORD_RECALL = "word_recall"
WORD_F1 = "word_f1"
"""Word token F1 of word discovery: the headline of segmenters of unspaced text."""
WORD_BOUNDARY_PRECISION = "word_boundary_precision"
WORD_BOUNDARY_RECALL = "word_boundary_recall"
LEXICON_PRECISION = "lexicon_precision"
LEXICON_RECALL = "lexicon_recall"
LEXICON_F1 = "lexicon_f1"
GOLD_UTTERANCES = "gold_utterances"
POSTERIOR_PREFIX = "posterior/"
"""Prefix of the metrics of an ``slm``'s posterior decoding, logged beside its Viterbi ones in word
discovery (``posterior/word_f1``)."""
GOLD_WORDS = "gold_words"
COVERED_FRACTION = "covered_fraction"
"""The fraction of the gold words a predictions file segments (``segrl evaluate --predictions``:
the others are left out of its scores)."""
F1_BY_LENGTH = "boundary_f1_by_length/"
"""Prefix of boundary F1 on the gold words of each length group (``boundary_f1_by_length/5-7``):
where a segmenter gains and loses, by word length (drawn as a picture in every run)."""
LENGTH_GROUPS = ((1, 4), (5, 7), (8, 10), (11, 13), (14, None))

COMPARE_COLUMNS = (
    BOUNDARY_PRECISION,
    BOUNDARY_RECALL,
    BOUNDARY_F1,
    BPR_F1,
    MORPH_F1,
    GOLD_UNITS_PER_CHAR,
    WORD_F1,
    WORD_BOUNDARY_F1,
    LEXICON_F1,
    SEGMENT_F1,
    BITS_PER_CHAR,
)
"""Columns of ``segrl compare``, in order (a column shows only where some run logged it)."""
SCORES = frozenset(
    {
        *(BOUNDARY_PRECISION, BOUNDARY_RECALL, BOUNDARY_F1),
        *(BPR_PRECISION, BPR_RECALL, BPR_F1),
        *(MORPH_PRECISION, MORPH_RECALL, MORPH_F1),
        *(WORD_PRECISION, WORD_RECALL, WORD_F1),
        *(WORD_BOUNDARY_PRECISION, WORD_BOUNDARY_RECALL, WORD_BOUNDARY_F1),
        *(LEXICON_PRECISION, LEXICON_RECALL, LEXICON_F1),
        *(SEGMENT_PRECISION, SEGMENT_RECALL, SEGMENT_F1),
        *(UNITS_PER_CHAR, GOLD_UNITS_PER_CHAR, GOLD_WORDS_PER_CHAR),
    }
)
"""The standard scores of a segmentation, each in [0, 1]: logged rounded (``rounded_scores``)."""
SCORE_DECIMALS = 4
"""The decimals a segmenter run logs its scores with. A score on gold words is a share of some
thousands of boundaries (or words, or morphs): its sampling error is near 0.01 on 2,000 gold words
and near 0.002 on the 40,298 of the bundled gold set, so the 4th decimal is below it already and the
digits past it say nothing; MLflow's tables show a metric as it was logged."""


def rounded_scores(metrics: Mapping[str, float]) -> dict[str, float]:
    """``metrics`` with its scores rounded to ``SCORE_DECIMALS``: those of ``SCORES``, by their names,
    under ``POSTERIOR_PREFIX`` and by word length (``F1_BY_LENGTH``). The others stay as they are: a
    model's bits per character, counts, times, and the fraction of the gold set a predictions file
    covers (rounded, 39,999 of 40,000 words would read as all of them)."""
    return {
        name: round(value, SCORE_DECIMALS) if _is_score(name) else value
        for name, value in metrics.items()
    }


def _is_score(name: str) -> bool:
    return name.startswith(F1_BY_LENGTH) or name.removeprefix(POSTERIOR_PREFIX) in SCORES


@dataclass(frozen=True)
class PRF:
    """Precision, recall and F1, with the counts they came from (zero for macro averages)."""

    precision: float
    recall: float
    f1: float
    hits: int = 0
    predicted: int = 0
    gold: int = 0


def prf_from_counts(hits: int, predicted: int, gold: int) -> PRF:
    """Micro P/R/F1 from counts of correct, predicted and gold items."""
    precision = hits / predicted if predicted else float(gold == 0)
    recall = hits / gold if gold else float(predicted == 0)
    return PRF(precision, recall, _f1(precision, recall), hits, predicted, gold)


def boundary_prf(
    predicted: Sequence[Sequence[str]], gold: Sequence[Sequence[Sequence[str]]]
) -> PRF:
    """Boundary P/R/F1 of predicted segmentations against gold analyses, micro over boundaries.

    ``predicted[i]`` is a segmentation of item ``i`` and ``gold[i]`` its alternative gold analyses (each
    a segmentation of the same string). Per item the alternative with the highest item-level F1 counts
    (ties: more correct boundaries, then fewer gold boundaries).

        >>> boundary_prf([["walk", "ed"]], [[["walk", "ed"]]]).f1
        1.0
    """
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} gold items")
    hits = n_predicted = n_gold = 0
    for segments, alternatives in zip(predicted, gold, strict=True):
        text = "".join(segments)
        pred = boundaries_of(segments)
        best = None
        for analysis in alternatives:
            if "".join(analysis) != text:
                raise ValueError(
                    f"prediction {list(segments)} and gold {list(analysis)} differ in text"
                )
            ref = boundaries_of(analysis)
            item_hits = len(pred & ref)
            key = (prf_from_counts(item_hits, len(pred), len(ref)).f1, item_hits, -len(ref))
            if best is None or key > best[0]:
                best = (key, item_hits, len(ref))
        if best is None:
            raise ValueError(f"no gold analysis for {text!r}")
        hits += best[1]
        n_predicted += len(pred)
        n_gold += best[2]
    return prf_from_counts(hits, n_predicted, n_gold)


def word_averaged_boundary_prf(
    predicted: Sequence[Sequence[str]], gold: Sequence[Sequence[Sequence[str]]]
) -> PRF:
    """Boundary P/R/F1 averaged over words, as Morfessor's evaluation (``morfessor-evaluate``,
    ``morfessor.evaluation``) computes them.

    Per word, precision is the fraction of its predicted boundaries in a gold analysis and recall the
    fraction of a gold analysis's boundaries predicted, each the best over the alternatives
    (separately); either is 1.0 where it has no boundaries to check. Both are averaged over the
    words, a one-letter word counting as 0 in both (as Morfessor counts it), and F1 is taken of the
    averages. Every word weighs the same, where ``boundary_prf`` weighs each by its boundaries.

        >>> word_averaged_boundary_prf([["jump", "s"]], [[["jumps"]]]).recall
        1.0
    """
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} gold items")
    if not predicted:
        return PRF(1.0, 1.0, 1.0)
    precision_sum = recall_sum = 0.0
    for segments, alternatives in zip(predicted, gold, strict=True):
        if len("".join(segments)) < 2:
            continue
        pred = boundaries_of(segments)
        refs = [boundaries_of(analysis) for analysis in alternatives]
        precision_sum += max(len(pred & ref) / len(pred) if pred else 1.0 for ref in refs)
        recall_sum += max(len(pred & ref) / len(ref) if ref else 1.0 for ref in refs)
    precision, recall = precision_sum / len(predicted), recall_sum / len(predicted)
    return PRF(precision, recall, _f1(precision, recall))


def morph_prf(predicted: Sequence[Sequence[str]], gold: Sequence[Sequence[Sequence[str]]]) -> PRF:
    """Morph P/R/F1 of predicted segmentations against gold analyses, as SIGMORPHON 2022 scores them:
    per item, the longest common subsequence of the two morph sequences counts as its correct morphs;
    micro over morphs. Per item the alternative analysis with the most correct morphs counts (ties:
    fewer gold morphs).

        >>> morph_prf([["walk", "ed"]], [[["walk", "ed"]]]).f1
        1.0
        >>> morph_prf([["walked"]], [[["walk", "ed"]]]).recall
        0.0
    """
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} gold items")
    hits = n_predicted = n_gold = 0
    for segments, alternatives in zip(predicted, gold, strict=True):
        if not alternatives:
            raise ValueError(f"no gold analysis for {''.join(segments)!r}")
        best = max(
            (_common_subsequence(segments, analysis), -len(analysis)) for analysis in alternatives
        )
        hits += best[0]
        n_predicted += len(segments)
        n_gold += -best[1]
    return prf_from_counts(hits, n_predicted, n_gold)


def _common_subsequence(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two morph sequences."""
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if x == y else max(current[j - 1], previous[j]))
        previous = current
    return previous[-1]


def word_boundary_prf(predicted: Sequence[Sequence[str]], sentences: Sequence[str]) -> PRF:
    """Boundary P/R/F1 against the word boundaries of ``sentences``, for segmentations of the sentences
    with their spaces removed (word discovery)."""
    return boundary_prf(predicted, [[sentence.split()] for sentence in sentences])


def word_token_prf(predicted: Sequence[Sequence[str]], gold: Sequence[Sequence[str]]) -> PRF:
    """Word token P/R/F1 of word discovery, micro over tokens: a predicted word counts as correct
    when a gold word spans exactly the same characters of the same utterance.

        >>> word_token_prf([["the", "dog", "gy"]], [["the", "doggy"]]).precision
        0.3333333333333333
    """
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} gold utterances")
    hits = n_predicted = n_gold = 0
    for segments, words in zip(predicted, gold, strict=True):
        if "".join(segments) != "".join(words):
            raise ValueError(f"prediction {list(segments)} and gold {list(words)} differ in text")
        spans, gold_spans = _spans(segments), _spans(words)
        hits += len(spans & gold_spans)
        n_predicted += len(spans)
        n_gold += len(gold_spans)
    return prf_from_counts(hits, n_predicted, n_gold)


def _spans(segments: Sequence[str]) -> set[tuple[int, int]]:
    """The ``(start, end)`` character spans of a segmentation's non-empty segments."""
    spans, offset = set(), 0
    for segment in segments:
        if segment:
            spans.add((offset, offset + len(segment)))
            offset += len(segment)
    return spans


def lexicon_prf(predicted: Sequence[Sequence[str]], gold: Sequence[Sequence[str]]) -> PRF:
    """Lexicon (word type) P/R/F1 of word discovery: the distinct predicted words against the
    distinct gold words, each type counted once however often it occurs.

        >>> lexicon_prf([["a", "dog"], ["a", "dog", "gy"]], [["a", "dog"], ["a", "doggy"]]).recall
        0.6666666666666666
    """
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} gold utterances")
    found = {s for segments in predicted for s in segments if s}
    words = {w for utterance in gold for w in utterance if w}
    return prf_from_counts(len(found & words), len(found), len(words))


def word_discovery_metrics(
    predicted: Sequence[Sequence[str]], utterances: Sequence[str]
) -> dict[str, float]:
    """The word discovery metrics of segmentations of ``utterances`` with their spaces removed
    (``predicted[i]`` concatenates to ``utterances[i].replace(" ", "")``), the spaces being the gold
    word boundaries: word token P/R/F1 (``word_f1``, the headline), boundary P/R/F1 without the
    utterance edges (``word_boundary_*``), lexicon P/R/F1, units per character (the utterances
    being both the held-out text and the gold, under both names) and the gold's own.

        >>> word_discovery_metrics([["yu", "want", "it"]], ["yu want it"])["word_f1"]
        1.0
    """
    words = [utterance.split() for utterance in utterances]
    tokens = word_token_prf(predicted, words)
    boundaries = boundary_prf(predicted, [[w] for w in words])
    lexicon = lexicon_prf(predicted, words)
    return {  # the headline first, as in segmentation_metrics
        WORD_F1: tokens.f1,
        WORD_PRECISION: tokens.precision,
        WORD_RECALL: tokens.recall,
        WORD_BOUNDARY_F1: boundaries.f1,
        WORD_BOUNDARY_PRECISION: boundaries.precision,
        WORD_BOUNDARY_RECALL: boundaries.recall,
        LEXICON_F1: lexicon.f1,
        LEXICON_PRECISION: lexicon.precision,
        LEXICON_RECALL: lexicon.recall,
        UNITS_PER_CHAR: units_per_char(predicted),
        GOLD_UNITS_PER_CHAR: units_per_char(predicted),
        GOLD_WORDS_PER_CHAR: units_per_char(words),
        GOLD_UTTERANCES: float(len(utterances)),
    }


def evaluate_word_discovery(
    segment_texts: Callable[[list[str]], list[list[str]]], utterances: Sequence[str]
) -> dict[str, float]:
    """``word_discovery_metrics`` of a segmenter of unspaced text: ``segment_texts`` maps a batch
    of texts without spaces (one utterance each) to their segmentations."""
    texts = [utterance.replace(" ", "") for utterance in utterances]
    return word_discovery_metrics(segment_texts(texts), utterances)


def posterior_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The metrics of the posterior decoding in ``metrics`` (those under ``POSTERIOR_PREFIX``), named
    as the Viterbi ones are (``posterior/word_f1`` becomes ``word_f1``); empty where none was logged."""
    return {
        key.removeprefix(POSTERIOR_PREFIX): value
        for key, value in metrics.items()
        if key.startswith(POSTERIOR_PREFIX)
    }


def metrics_summary(metrics: Mapping[str, float]) -> str:
    """One line of a segmenter's headline metrics: word discovery's (word, boundary and lexicon
    P/R/F1) where it has them, else boundary P/R/F1 against the gold words; units per character of
    held-out text (``units/char``) where it has them, else of the gold words (``gold units/char``)."""
    if WORD_F1 in metrics:
        line = (
            f"word P/R/F1 {metrics[WORD_PRECISION]:.3f} / {metrics[WORD_RECALL]:.3f} / "
            f"{metrics[WORD_F1]:.3f}, boundary P/R/F1 {metrics[WORD_BOUNDARY_PRECISION]:.3f} / "
            f"{metrics[WORD_BOUNDARY_RECALL]:.3f} / {metrics[WORD_BOUNDARY_F1]:.3f}, lexicon "
            f"P/R/F1 {metrics[LEXICON_PRECISION]:.3f} / {metrics[LEXICON_RECALL]:.3f} / "
            f"{metrics[LEXICON_F1]:.3f}"
        )
    else:
        line = (
            f"boundary P/R/F1 {metrics[BOUNDARY_PRECISION]:.3f} / "
            f"{metrics[BOUNDARY_RECALL]:.3f} / {metrics[BOUNDARY_F1]:.3f}"
        )
    if UNITS_PER_CHAR in metrics:
        return f"{line}, units/char {metrics[UNITS_PER_CHAR]:.3f}"
    return f"{line}, gold units/char {metrics[GOLD_UNITS_PER_CHAR]:.3f}"


def longest_common_substring(a: str, b: str) -> int:
    """Length of the longest common (contiguous) substring of ``a`` and ``b``."""
    if not a or not b:
        return 0
    best = 0
    previous = [0] * (len(b) + 1)
    for ca in a:
        current = [0] * (len(b) + 1)
        for j, cb in enumerate(b, start=1):
            if ca == cb:
                current[j] = previous[j - 1] + 1
                best = max(best, current[j])
        previous = current
    return best


def segment_matching_prf(
    predicted: Sequence[Sequence[str]], gold_words: Sequence[Sequence[str]]
) -> PRF:
    """Segment-matching P/R/F1 (macro): per sentence, Hungarian matching of predicted segments to gold
    words maximising total longest-common-substring length; per matched pair P = LCS/|segment| and
    R = LCS/|word|; averaged over pairs within a sentence, then over sentences. Unmatched segments or
    words do not enter the averages (as in the NVIB papers); sentences with no segments or no words are
    skipped."""
    if len(predicted) != len(gold_words):
        raise ValueError(f"{len(predicted)} predictions for {len(gold_words)} gold sentences")
    sums = np.zeros(3)
    n_sentences = 0
    for segments, words in zip(predicted, gold_words, strict=True):
        segments = [s for s in segments if s]
        if not segments or not words:
            continue
        overlap = np.array([[longest_common_substring(s, w) for w in words] for s in segments])
        rows, cols = linear_sum_assignment(overlap, maximize=True)
        pairs = np.zeros(3)
        for r, c in zip(rows, cols, strict=True):
            p = overlap[r, c] / len(segments[r])
            q = overlap[r, c] / len(words[c])
            pairs += (p, q, _f1(p, q))
        sums += pairs / len(rows)
        n_sentences += 1
    if not n_sentences:
        return PRF(0.0, 0.0, 0.0)
    precision, recall, f1 = (sums / n_sentences).tolist()
    return PRF(precision, recall, f1)


def nats_to_bits_per_char(nll_nats: float, n_chars: int) -> float:
    """Negative log-likelihood in nats, summed over ``n_chars`` characters, as bits per character."""
    if n_chars <= 0:
        raise ValueError("bits per character needs at least one character")
    return nll_nats / (n_chars * math.log(2))


def units_per_char(segmentations: Sequence[Sequence[str]]) -> float:
    """Units per character: segments that are not pure white space, over non-space characters.

    1.0 for a segmentation into characters; about 1/5 for English words.
    """
    units = sum(1 for segments in segmentations for s in segments if s.strip())
    chars = sum(1 for segments in segmentations for s in segments for c in s if not c.isspace())
    return units / chars if chars else 0.0


def segmentation_metrics(
    gold_predictions: Sequence[Sequence[str]],
    gold: Sequence,
    text_predictions: Sequence[Sequence[str]] | None = None,
) -> dict[str, float]:
    """The standard metrics of a segmenter: boundary P/R/F1 (micro and word-averaged) and morph P/R/F1
    of its segmentations of the gold words (``gold`` is a sequence of ``GoldWord``), units per
    character of those (``gold_units_per_char``) and, where ``text_predictions`` (its segmentation
    of held-out corpus text) are given, of those (``units_per_char``)."""
    analyses = [g.analyses for g in gold]
    prf = boundary_prf(gold_predictions, analyses)
    morphs = morph_prf(gold_predictions, analyses)
    per_word = word_averaged_boundary_prf(gold_predictions, analyses)
    text = {} if text_predictions is None else {UNITS_PER_CHAR: units_per_char(text_predictions)}
    by_length = {}
    for low, high in LENGTH_GROUPS:
        rows = [
            i
            for i, g in enumerate(gold)
            if low <= len(g.word) and (high is None or len(g.word) <= high)
        ]
        if rows:
            label = f"{low}-{high}" if high is not None else f"{low}-up"
            group = boundary_prf([gold_predictions[i] for i in rows], [analyses[i] for i in rows])
            by_length[f"{F1_BY_LENGTH}{label}"] = group.f1
    return {  # the headline first: the MLflow UI's comparison plots the first metric it finds
        BOUNDARY_F1: prf.f1,
        BOUNDARY_PRECISION: prf.precision,
        BOUNDARY_RECALL: prf.recall,
        **text,
        GOLD_UNITS_PER_CHAR: units_per_char(gold_predictions),
        MORPH_F1: morphs.f1,
        MORPH_PRECISION: morphs.precision,
        MORPH_RECALL: morphs.recall,
        BPR_F1: per_word.f1,
        BPR_PRECISION: per_word.precision,
        BPR_RECALL: per_word.recall,
        GOLD_WORDS: float(len(gold)),
        **by_length,
    }


def length_figure(name: str, by_length: Mapping[str, float], overall: float | None) -> Any:
    """Bars of boundary F1 by gold word length, with the overall F1 as a line."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5, 3.2), dpi=100)
    axes = figure.subplots()
    axes.bar(list(by_length), list(by_length.values()), color="#4477aa")
    if overall is not None:
        axes.axhline(overall, color="#cc6677", linestyle="--", label=f"all words: {overall:.3f}")
        axes.legend(loc="upper left", frameon=False)
    axes.set_ylim(0, 1)
    axes.set_xlabel("gold word length (characters)")
    axes.set_ylabel("boundary F1")
    axes.set_title(name)
    figure.tight_layout()
    return figure


def evaluate_word_segmenter(
    segment_words: Callable[[list[str]], list[list[str]]],
    gold: Sequence,
    sentences: Sequence[str] = (),
) -> dict[str, float]:
    """``segmentation_metrics`` of a segmenter that segments words (spaces are known boundaries):
    ``segment_words`` maps a batch of words to their segmentations; units per character are measured
    on the words of ``sentences`` (held-out corpus text) when given."""
    gold_predictions = segment_words([g.word for g in gold])
    text_predictions = None
    if sentences:
        words = [w for sentence in sentences for w in sentence.split()]
        text_predictions = segment_words(words)
    return segmentation_metrics(gold_predictions, gold, text_predictions)


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def despace(segments: Sequence[str]) -> list[str]:
    """A segmentation of a sentence with its spaces removed: spaces are deleted from inside segments
    (a unit spanning ``"e c"`` becomes ``"ec"``) and segments left empty are dropped, so word
    boundaries are only found where the segmentation itself puts them."""
    out = [s.replace(" ", "") for s in segments]
    return [s for s in out if s]


def evaluate_sentence_segmenter(
    segment_sentences: Callable[[list[str]], list[list[str]]],
    gold: Sequence,
    sentences: Sequence[str],
) -> dict[str, float]:
    """The standard metrics of a segmenter that segments whole sentences (spaces included, e.g.
    units read off attention or an agent's decisions):

    - boundary P/R/F1 and units per character as in ``segmentation_metrics``: the gold words are
      segmented each as a one-word text; units per character on ``sentences``;
    - ``segment_precision/recall/f1``: segment matching against the words of ``sentences``, with
      white space stripped from the ends of segments (space-only segments dropped);
    - ``word_boundary_f1``: boundaries of the de-spaced segmentation (``despace``) against the words.
    """
    gold_predictions = segment_sentences([g.word for g in gold])
    text_predictions = segment_sentences(list(sentences))
    metrics = segmentation_metrics(gold_predictions, gold, text_predictions)
    words = [s.split() for s in sentences]
    stripped = [[seg.strip() for seg in segs if seg.strip()] for segs in text_predictions]
    matching = segment_matching_prf(stripped, words)
    metrics[SEGMENT_PRECISION] = matching.precision
    metrics[SEGMENT_RECALL] = matching.recall
    metrics[SEGMENT_F1] = matching.f1
    despaced = [despace(segs) for segs in text_predictions]
    metrics[WORD_BOUNDARY_F1] = word_boundary_prf(despaced, sentences).f1
    return metrics
