"""Evaluators: the segmentation batch, reference decisions, the study's rewards and their signs."""

import numpy as np
import pytest

from segrl.data import CharVocab, GoldWord
from segrl.data.corpus import PLACEHOLDER
from segrl.errors import ConfigError
from segrl.evaluators import (
    EvaluatorConfig,
    build_evaluator,
    decision_layout,
    encode_segmentation_batch,
    with_spaces,
)
from segrl.evaluators.gold import GoldEvaluator
from segrl.evaluators.morfessor import MorfessorEvaluator

GOLD = [
    GoldWord("walked", (("walk", "ed"),)),
    GoldWord("cats", (("cat", "s"),)),
    GoldWord("the", (("the",),)),
]
VOCAB = CharVocab.from_texts(["the cats walked home"], PLACEHOLDER)


def decisions_at(batch, row, positions):
    actions = np.zeros_like(batch.decisions)
    actions[row, positions] = 1
    return batch.with_decisions(actions)


def test_layout_known_and_hidden_spaces():
    text, free, boundary = decision_layout("ab cd", hide_spaces=False)
    assert text == "ab cd"
    # positions: a|b, b|_, _|c, c|d: the two beside the space are forced word boundaries
    assert free.tolist() == [True, False, False, True]
    assert boundary.tolist() == [False, True, True, False]
    text, free, boundary = decision_layout("ab cd", hide_spaces=True)
    assert text == "abcd"
    assert free.tolist() == [True, True, True]
    assert boundary.tolist() == [False, True, False]


def test_batch_forces_word_boundaries_and_pads():
    batch = encode_segmentation_batch(VOCAB, ["the cats", "cats"], max_len=10)
    assert batch.ids.shape == (2, 10) and batch.decisions.shape == (2, 9)
    assert batch.lengths.tolist() == [8, 4]
    assert batch.decisions[0].tolist() == [0, 0, 1, 1, 0, 0, 0, 0, 0]
    assert not batch.free_mask[1, 3:].any()  # beyond "cats": padding
    actions = np.ones_like(batch.decisions)
    decided = batch.with_decisions(actions)
    assert decided.segments(0) == ["t", "h", "e", " ", "c", "a", "t", "s"]
    assert decided.decisions[1, 3:].tolist() == [0] * 6  # padding stays 0
    with pytest.raises(ValueError, match="does not fit"):
        encode_segmentation_batch(VOCAB, ["the cats walked"], max_len=5)


def test_with_spaces_puts_spaces_back():
    assert with_spaces("the cat", ["th", "ecat"]) == ["th", "e cat"]
    assert with_spaces("the cat", ["the", "cat"]) == ["the", " ", "cat"]
    assert "".join(with_spaces("a b c", ["ab", "c"])) == "a b c"


def test_gold_reference_decisions_known_spaces():
    gold = GoldEvaluator(GOLD)
    batch = encode_segmentation_batch(VOCAB, ["the cats walked"])
    splits, known = gold.reference(batch)
    # the|_|cat|s|_|walk|ed : splits after e(2), space(3), t(6), s(7), space(8), k(12)
    assert np.flatnonzero(splits[0]).tolist() == [2, 3, 6, 7, 8, 12]
    assert known[0].all()


def test_gold_unknown_words_are_not_scored():
    gold = GoldEvaluator(GOLD)
    batch = encode_segmentation_batch(VOCAB, ["cats home"])
    _splits, known = gold.reference(batch)
    assert known[0, :3].all()  # inside "cats"
    assert not known[0, 5:8].any()  # inside "home": no gold analysis
    # a split inside "home" is neither rewarded nor punished
    rewards = gold.action_rewards(decisions_at(batch, 0, [6]))
    assert rewards[0, 6] == 0.0


def test_reference_with_hidden_spaces_includes_word_boundaries():
    gold = GoldEvaluator(GOLD)
    batch = encode_segmentation_batch(VOCAB, ["the  cats"], hide_spaces=True)
    assert batch.texts == ["thecats"]
    splits, known = gold.reference(batch)
    assert np.flatnonzero(splits[0]).tolist() == [2, 5]  # the|cat|s
    assert known[0, :6].all()


def test_per_action_rewards_are_plus_minus_one():
    gold = GoldEvaluator(GOLD)
    batch = encode_segmentation_batch(VOCAB, ["walked"])
    # reference: walk|ed (position 3); the agent splits at 1 (wrong) and 3 (right)
    rewards = gold.action_rewards(decisions_at(batch, 0, [1, 3]))
    assert rewards[0].tolist() == [1.0, -1.0, 1.0, 1.0, 1.0]


def test_sequence_score_weights_missed_splits_by_alpha():
    gold = GoldEvaluator(GOLD, alpha=0.75)
    batch = encode_segmentation_batch(VOCAB, ["walked"])
    perfect = gold.score(decisions_at(batch, 0, [3]))
    missed = gold.score(decisions_at(batch, 0, []))  # one missed split out of 5 decisions
    spurious = gold.score(decisions_at(batch, 0, [1, 3]))  # one spurious split
    assert perfect[0] == 0.0
    assert missed[0] == pytest.approx(-0.75 / 5)
    assert spurious[0] == pytest.approx(-0.25 / 5)
    assert perfect[0] > spurious[0] > missed[0]  # higher is better; missing a split costs more
    errors = gold.errors(decisions_at(batch, 0, [1]))
    assert (errors["missed"][0], errors["spurious"][0], errors["scored"][0]) == (1, 1, 5)


def test_fixed_evaluators_do_not_update():
    gold = GoldEvaluator(GOLD)
    assert gold.update(encode_segmentation_batch(VOCAB, ["cats"])) == {}
    assert gold.state_dict() == {}


def test_morfessor_evaluator_rewards_its_own_segmentation(corpus, tmp_path):
    evaluator = build_evaluator(EvaluatorConfig(cache_dir=str(tmp_path)), corpus)
    assert isinstance(evaluator, MorfessorEvaluator)
    batch = encode_segmentation_batch(corpus.vocab, ["the man walked home", "she is jumping"])
    splits, known = evaluator.reference(batch)
    assert known[batch.free_mask].all()  # Morfessor has an answer for every word
    assert evaluator.segment_word("walked") == ["walk", "ed"]
    perfect = batch.with_decisions(splits.astype(np.int64))
    assert evaluator.score(perfect).tolist() == [0.0, 0.0]
    rewards = evaluator.action_rewards(perfect)
    assert (rewards[batch.free_mask] == 1.0).all()
    assert (rewards[~batch.free_mask] == 0.0).all()
    flipped = batch.with_decisions((~splits).astype(np.int64))
    assert (evaluator.action_rewards(flipped)[batch.free_mask] == -1.0).all()
    assert (evaluator.score(flipped) < 0).all()


def test_unknown_evaluator_is_a_config_error(corpus):
    with pytest.raises(
        ConfigError, match="^evaluator.name must be one of: morfessor, gold, lm; got 'bogus'$"
    ):
        build_evaluator(EvaluatorConfig(name="bogus"), corpus)
    with pytest.raises(ConfigError, match="alpha"):
        build_evaluator(EvaluatorConfig(name="gold", alpha=2.0), corpus)
