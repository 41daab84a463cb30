import math

import pytest

from segrl.data.gold import GoldWord
from segrl.metrics import (
    BOUNDARY_F1,
    BOUNDARY_PRECISION,
    BOUNDARY_RECALL,
    BPR_PRECISION,
    BPR_RECALL,
    GOLD_UNITS_PER_CHAR,
    UNITS_PER_CHAR,
    boundary_prf,
    longest_common_substring,
    metrics_summary,
    nats_to_bits_per_char,
    posterior_metrics,
    prf_from_counts,
    segment_matching_prf,
    segmentation_metrics,
    units_per_char,
    word_averaged_boundary_prf,
    word_boundary_prf,
)


def test_boundary_prf_is_micro_over_boundaries():
    predicted = [["walk", "ed"], ["un", "happi", "ness"]]
    gold = [[["walk", "ed"]], [["un", "happiness"]]]
    prf = boundary_prf(predicted, gold)
    # hits 1 + 1, predicted 1 + 2, gold 1 + 1
    assert (prf.hits, prf.predicted, prf.gold) == (2, 3, 2)
    assert prf.precision == pytest.approx(2 / 3)
    assert prf.recall == pytest.approx(1.0)
    assert prf.f1 == pytest.approx(0.8)


def test_boundary_prf_takes_best_matching_alternative():
    # "abcdef": alternatives ab|cd|ef and abc|def; predicting abc|def matches the second exactly
    gold = [[["ab", "cd", "ef"], ["abc", "def"]]]
    prf = boundary_prf([["abc", "def"]], gold)
    assert (prf.hits, prf.predicted, prf.gold) == (1, 1, 1)
    assert prf.f1 == 1.0
    # predicting nothing: the unsegmented alternative, when there is one, is the best match
    prf = boundary_prf([["played"]], [[["play", "ed"], ["played"]]])
    assert (prf.hits, prf.predicted, prf.gold) == (0, 0, 0)
    assert prf.f1 == 1.0


def test_boundary_prf_empty_segmentations():
    # nothing predicted where gold has boundaries: all zero
    prf = boundary_prf([["walked"]], [[["walk", "ed"]]])
    assert (prf.precision, prf.recall, prf.f1) == (0.0, 0.0, 0.0)
    # nothing predicted, nothing in gold: perfect
    prf = boundary_prf([["cat"]], [[["cat"]]])
    assert (prf.precision, prf.recall, prf.f1) == (1.0, 1.0, 1.0)
    # spurious boundaries on a word gold leaves whole
    prf = boundary_prf([["c", "at"]], [[["cat"]]])
    assert (prf.precision, prf.recall, prf.f1) == (0.0, 0.0, 0.0)
    assert boundary_prf([], []).f1 == 1.0


def test_word_averaged_boundary_prf_is_morfessors_own_evaluation():
    from morfessor.evaluation import EvaluationConfig, MorfessorEvaluation

    gold = {
        "walked": [["walk", "ed"]],
        "unhappiness": [["un", "happi", "ness"]],
        "abcdef": [["ab", "cd", "ef"], ["abc", "def"]],
        "cat": [["cat"]],
        "dogs": [["dog", "s"]],
        "a": [["a"]],
    }
    predicted = {
        "walked": ["walk", "ed"],
        "unhappiness": ["un", "happiness"],
        "abcdef": ["ab", "c", "def"],
        "cat": ["c", "at"],
        "dogs": ["dogs"],
        "a": ["a"],
    }
    words = sorted(gold)
    prf = word_averaged_boundary_prf([predicted[w] for w in words], [gold[w] for w in words])
    # per word P/R: walked 1/1, unhappiness 1/0.5, abcdef 0.5/1 (abc|def's boundary found), cat
    # 0/1, dogs 1/0, and "a" 0/0 (one letter: counted, scored nothing, as Morfessor does)
    assert prf.precision == pytest.approx(3.5 / 6)
    assert prf.recall == pytest.approx(3.5 / 6)
    result = MorfessorEvaluation(gold).evaluate_segmentation(
        [(1, predicted[w]) for w in words], EvaluationConfig(1, len(words))
    )
    assert prf.precision == pytest.approx(result["precision_avg"])
    assert prf.recall == pytest.approx(result["recall_avg"])
    assert prf.f1 == pytest.approx(result["fscore_avg"])
    # micro over boundaries weighs words by their boundaries: 3 of the 5 predicted are right
    assert boundary_prf([predicted[w] for w in words], [gold[w] for w in words]).precision == 3 / 5


def test_boundary_prf_rejects_mismatched_text():
    with pytest.raises(ValueError, match="differ in text"):
        boundary_prf([["walk", "s"]], [[["walk", "ed"]]])
    with pytest.raises(ValueError):
        boundary_prf([["a"]], [])


def test_prf_from_counts():
    prf = prf_from_counts(3, 4, 6)
    assert prf.precision == 0.75 and prf.recall == 0.5
    assert prf.f1 == pytest.approx(0.6)


def test_word_boundary_prf():
    sentences = ["the cats sat"]
    assert word_boundary_prf([["the", "cats", "sat"]], sentences).f1 == 1.0
    prf = word_boundary_prf([["the", "cat", "s", "sat"]], sentences)
    assert prf.precision == pytest.approx(2 / 3) and prf.recall == 1.0


def test_longest_common_substring():
    assert longest_common_substring("abcde", "xbcdy") == 3
    assert longest_common_substring("", "a") == 0
    assert longest_common_substring("cats", "cats") == 4
    assert longest_common_substring("ab", "cd") == 0


def test_segment_matching_prf_hand_computed():
    predicted = [["th", "ecats"], ["ab"]]
    words = [["the", "cats"], ["a", "b"]]
    prf = segment_matching_prf(predicted, words)
    # sentence 1: th~the (P 1, R 2/3, F 0.8), ecats~cats (P 0.8, R 1, F 8/9)
    # sentence 2: ab matched to one word (P 1/2, R 1, F 2/3); the other word is unmatched
    s1 = (0.9, (2 / 3 + 1) / 2, (0.8 + 8 / 9) / 2)
    s2 = (0.5, 1.0, 2 / 3)
    assert prf.precision == pytest.approx((s1[0] + s2[0]) / 2)
    assert prf.recall == pytest.approx((s1[1] + s2[1]) / 2)
    assert prf.f1 == pytest.approx((s1[2] + s2[2]) / 2)


def test_segment_matching_uses_one_to_one_assignment():
    # greedy would pair "abcd" with "abcde" and leave "cde" a poor match; Hungarian maximises the total
    prf = segment_matching_prf([["abcde", "xy"]], [["abcd", "xy"]])
    assert prf.precision == pytest.approx((4 / 5 + 1) / 2)
    assert prf.recall == pytest.approx(1.0)
    assert segment_matching_prf([[]], [["a"]]).f1 == 0.0


def test_bits_per_char():
    assert nats_to_bits_per_char(2 * math.log(2) * 5, 5) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        nats_to_bits_per_char(1.0, 0)


def test_units_per_char_ignores_spaces():
    assert units_per_char([["the"], [" "], ["cat", "s"]]) == pytest.approx(3 / 7)
    assert units_per_char([list("abc")]) == 1.0
    assert units_per_char([]) == 0.0


def test_segmentation_metrics_names_and_values():
    gold = [GoldWord("walked", (("walk", "ed"),)), GoldWord("cat", (("cat",),))]
    metrics = segmentation_metrics([["walk", "ed"], ["c", "at"]], gold)
    assert metrics[BOUNDARY_PRECISION] == 0.5
    assert metrics[BOUNDARY_RECALL] == 1.0
    assert metrics[BOUNDARY_F1] == pytest.approx(2 / 3)
    # without held-out text there is no units_per_char: one name, one meaning
    assert UNITS_PER_CHAR not in metrics and metrics[GOLD_UNITS_PER_CHAR] == pytest.approx(4 / 9)
    assert metrics_summary(metrics).endswith("gold units/char 0.444")
    text = segmentation_metrics([["walk", "ed"], ["c", "at"]], gold, [["the", " ", "cat"]])
    assert metrics_summary(text).endswith(", units/char 0.333")
    assert (text[UNITS_PER_CHAR], text[GOLD_UNITS_PER_CHAR]) == (pytest.approx(2 / 6), 4 / 9)
    assert (metrics[BPR_PRECISION], metrics[BPR_RECALL]) == (0.5, 1.0)  # cat: 0 of 1 predicted


def test_posterior_metrics_are_the_prefixed_ones_renamed():
    metrics = {
        "word_f1": 0.5,
        "posterior/word_f1": 0.6,
        "posterior/boundary_f1": 0.7,
        "system": "slm",
    }
    assert posterior_metrics(metrics) == {"word_f1": 0.6, "boundary_f1": 0.7}
    assert posterior_metrics({"word_f1": 0.5}) == {}
