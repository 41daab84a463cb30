"""A custom agent's policy (or any function) as a segrl segmenter: ``FunctionSegmenter`` runs an
episode of the real environment per text and is scored by ``segrl.metrics`` like any segmenter."""

from __future__ import annotations

import gymnasium as gym
import pytest

from segrl import FunctionSegmenter, ModelError
from segrl.data import load_gold
from segrl.metrics import evaluate_sentence_segmenter, evaluate_word_segmenter

from .conftest import write_small_corpus

SPLIT, NO_SPLIT = 1, 0


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    corpus = write_small_corpus(tmp_path_factory.mktemp("corpus") / "small.txt")
    return gym.make("segrl/CharSegment-v0", corpus=str(corpus), evaluator="morfessor")


@pytest.fixture
def gold(tmp_path):
    path = tmp_path / "gold.tsv"
    path.write_text("walked\twalk @@ed\njumping\tjump @@ing\n", encoding="utf-8")
    return load_gold(path)


def test_an_agent_that_always_splits_is_scored_by_the_metrics(env, gold):
    segmenter = FunctionSegmenter.from_agent(lambda observation: SPLIT, env, "always")
    assert segmenter.segment_words(["walked", ""]) == [list("walked"), []]
    metrics = evaluate_word_segmenter(segmenter.segment_words, gold)
    # 2 gold boundaries among the 5 + 6 places a split can go: all found
    assert metrics["boundary_recall"] == 1.0
    assert metrics["boundary_precision"] == pytest.approx(2 / 11)


def test_an_agent_that_never_splits_keeps_words_and_spaces(env, gold):
    segmenter = FunctionSegmenter.from_agent(lambda observation: NO_SPLIT, env)
    assert segmenter.segment_sentences(["the  man\twalked"]) == [["the", " ", "man", " ", "walked"]]
    metrics = evaluate_sentence_segmenter(segmenter.segment_sentences, gold, ["the man walked"])
    assert metrics["boundary_recall"] == 0.0 and metrics["word_boundary_f1"] == 1.0


def test_a_plain_function_is_a_segmenter():
    segmenter = FunctionSegmenter(lambda text: [text[:-2], text[-2:]], "last-two")
    assert segmenter.segment_words(["walked", "talks"]) == [["walk", "ed"], ["tal", "ks"]]


def test_segments_that_do_not_spell_the_text_are_refused():
    segmenter = FunctionSegmenter(lambda text: [text.upper()], "shouting")
    with pytest.raises(ModelError, match="shouting: segments \\['WALKED'\\]"):
        segmenter.segment_words(["walked"])


def test_its_scores_are_logged_as_a_segmenter_run(mlflow_store, env, gold):
    from segrl.tracking.queries import segmenter_runs
    from segrl.tracking.runs import log_segmenter, start_run

    segmenter = FunctionSegmenter.from_agent(lambda observation: SPLIT, env, "always")
    metrics = evaluate_word_segmenter(segmenter.segment_words, gold)
    with start_run({"agent": "always"}, "segrl", "always"):
        log_segmenter("always", "agent", metrics)
    (run,) = segmenter_runs("segrl")
    assert run["segmenter"] == "always" and run["kind"] == "agent"
    assert run["boundary_precision"] == 0.1818  # 2 / 11, logged to 4 decimals
