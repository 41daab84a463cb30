"""A direct lexicon's first logits: the log of the number of training word types that hold each
entry (``LMConfig.lexicon_init`` ``counts``), or all equal (``uniform``)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from segrl.config import validate_config
from segrl.errors import ConfigError
from segrl.lm import LMConfig
from segrl.lm.lexicon import seed_lexicon, type_substring_counts
from tests.test_lm_probability import LEXICON, tiny

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = ["abab", "aba", "bab", "ab", "ab", "b"]
"""Types: abab, aba, bab, ab, b (``ab`` twice counts once)."""


def held(words, entries=LEXICON):
    """Each entry's number of ``words`` that hold it, as ``seed_lexicon`` reads them."""
    counts = type_substring_counts(words, max_length=12)
    return {entry: counts.get(entry, 0) for entry in entries}


def test_an_entry_counts_the_word_types_that_hold_it():
    assert held(WORDS) == {"a": 4, "ab": 4, "ba": 3, "bab": 2}
    # a substring held twice by one word counts once; one held by no word counts 0
    assert list(held(["aaaa"], ["aa", "b"]).values()) == [1, 0]


def direct_lm(init: str):
    lm = tiny("slm", context="none", lexicon=LEXICON, lexicon_logits="direct", speller="bigram")
    lm.config = replace(lm.config, lexicon_init=init)
    return lm


def test_counts_start_each_entry_at_its_log_count_and_uniform_leaves_them_equal():
    assert LEXICON == ["a", "ab", "ba", "bab"]
    seeded = direct_lm("counts")
    seed_lexicon(seeded, held(WORDS))
    expected = torch.tensor([math.log(4), math.log(4), math.log(3), math.log(2)])
    assert torch.allclose(seeded.lexicon.logits.detach(), expected)
    flat = direct_lm("uniform")
    before = flat.lexicon.logits.detach().clone()
    seed_lexicon(flat, held(WORDS))
    assert torch.equal(flat.lexicon.logits.detach(), before)
    assert torch.count_nonzero(before) == 0


def test_an_entry_no_word_holds_starts_as_one_held_once():
    lm = direct_lm("counts")
    seed_lexicon(lm, held(["aab"]))  # "a" and "ab" are held, "ba" and "bab" not
    logits = lm.lexicon.logits.detach()
    assert torch.equal(logits, torch.zeros(4))  # each held once, or by none: log 1, never -inf


def test_the_teacher_and_the_evaluator_start_from_counts_by_default():
    """``LM_DEFAULTS``: ``segrl lm train``'s direct lexicon starts from its counts on word lists and
    running text, the agent's LM evaluator's on word lists (on running text it has none); a
    projected lexicon starts flat."""
    from segrl.experiments.lm_train import segmenter_lm
    from segrl.lm.config import LEXICON_INIT, resolve_lm_config, table_lm
    from segrl.lm.models import SAVED_UNSET

    assert LEXICON_INIT == "counts"
    for text, user, config, init in [
        ("words", "lm-train", segmenter_lm(), "counts"),
        ("text", "lm-train", segmenter_lm(), "counts"),
        ("words", "evaluator", table_lm(), "counts"),
        ("text", "evaluator", table_lm(), "uniform"),
        ("words", "lm-train", replace(segmenter_lm(), lexicon_logits="projected"), "uniform"),
        ("words", "lm-train", replace(segmenter_lm(), lexicon_init="uniform"), "uniform"),
    ]:
        assert resolve_lm_config(config, text, user).lexicon_init == init, (text, user)
    assert SAVED_UNSET["lexicon_init"] == "uniform"  # files that predate it started flat


def test_an_unknown_start_is_a_config_error():
    with pytest.raises(ConfigError, match="lexicon_init must be one of: uniform, counts"):
        validate_config(LMConfig(lexicon_init="frequency"), "lm.")


def test_a_model_built_on_its_words_has_their_lexicon_started_from_their_counts():
    """``build_word_lm``: the lexicon of ``slm_lexicon`` on the words, each entry's first logit the
    log of the words that hold it, where the config asks for counts; flat where it does not."""
    from segrl.data.vocab import CharVocab
    from segrl.lm.config import resolve_lm_config, table_lm
    from segrl.lm.lexicon import slm_lexicon
    from segrl.lm.models import build_word_lm

    vocab = CharVocab.from_texts(WORDS, "?")
    config = replace(resolve_lm_config(table_lm(), "words"), lexicon_size=3)
    assert config.lexicon_init == "counts"
    model = build_word_lm(config, vocab, WORDS)
    assert model.lexicon.entries == slm_lexicon(config, WORDS) == ["b", "a", "ab"]
    expected = torch.tensor([math.log(5), math.log(4), math.log(4)])
    assert torch.allclose(model.lexicon.logits.detach(), expected)
    flat = build_word_lm(replace(config, lexicon_init="uniform"), vocab, WORDS)
    assert torch.count_nonzero(flat.lexicon.logits.detach()) == 0
