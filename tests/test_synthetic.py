"""The synthetic corpus of known words and pieces (``synthetic:SEED``)."""

from __future__ import annotations

from collections import Counter

import pytest

from segrl.benchmark import load_suite
from segrl.benchmark.cells import source_hash
from segrl.config import DataConfig
from segrl.data.corpus import load_corpus
from segrl.data.gold import check_gold_fits, load_gold
from segrl.data.synthetic import (
    SyntheticSpec,
    parse_synthetic,
    synthetic_lexicon,
    synthetic_sentences,
)
from segrl.errors import DataError


def test_the_lexicon_is_deterministic_zipfian_and_made_of_its_pieces():
    spec = parse_synthetic("synthetic:3")
    lexicon = synthetic_lexicon(spec)
    assert lexicon == synthetic_lexicon(SyntheticSpec(seed=3))
    assert len(lexicon) == 300 == len({w.word for w in lexicon})
    assert all("".join(w.pieces) == w.word and 1 <= len(w.pieces) <= 4 for w in lexicon)
    assert sum(w.probability for w in lexicon) == pytest.approx(1.0)
    assert lexicon[0].probability / lexicon[1].probability == pytest.approx(2.0)  # zipf 1
    assert lexicon[0].probability / lexicon[9].probability == pytest.approx(10.0)
    other_seed = [w.word for w in synthetic_lexicon(SyntheticSpec(seed=4))]
    assert len(set(other_seed) & {w.word for w in lexicon}) < 30
    several = sum(len(w.pieces) > 1 for w in lexicon) / len(lexicon)
    assert 0.5 < several < 0.9  # most words have a prefix or a suffix, some are bare stems


def test_sentences_draw_lexicon_words_by_frequency():
    spec = parse_synthetic("synthetic:0,sentences=3000,min_words=2,max_words=5")
    sentences = synthetic_sentences(spec)
    assert sentences == synthetic_sentences(spec)
    assert len(sentences) == 3000
    lexicon = synthetic_lexicon(spec)
    words = {w.word for w in lexicon}
    tokens = [t for s in sentences for t in s.split(" ")]
    assert all(2 <= len(s.split(" ")) <= 5 for s in sentences)
    assert set(tokens) <= words
    top = Counter(tokens)[lexicon[0].word] / len(tokens)
    assert top == pytest.approx(lexicon[0].probability, abs=0.015)


def test_noise_replaces_letters_of_the_same_sentences():
    clean = synthetic_sentences(parse_synthetic("synthetic:0,sentences=500"))
    noisy = synthetic_sentences(parse_synthetic("synthetic:0,sentences=500,noise=0.1"))
    assert [len(s) for s in noisy] == [len(s) for s in clean]
    letters = changed = 0
    for a, b in zip(clean, noisy, strict=True):
        for x, y in zip(a, b, strict=True):
            assert (x == " ") == (y == " ")
            letters += x != " "
            changed += x != y
    assert 0.08 < changed / letters < 0.1  # 0.1 drawn, 1 in 19 redraws the same letter


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("synthetic:x", "integer seed"),
        ("synthetic:0,size=3", "unknown option 'size'"),
        ("synthetic:0,noise=2", "probabilities"),
        ("synthetic:0,min_words=4,max_words=3", "max_words"),
        ("synthetic:0,words=5000,stems=3", "distinct words"),
    ],
)
def test_bad_specs_are_clear_errors(source, message):
    with pytest.raises(DataError, match=message):
        synthetic_sentences(parse_synthetic(source))


def test_the_loaders_read_the_corpus_and_its_gold_set():
    corpus = load_corpus(DataConfig(corpus="synthetic:1,sentences=400"))
    assert len(corpus.train) + len(corpus.valid) + len(corpus.test) == 400
    assert corpus.settings["source"] == "synthetic:1,sentences=400"
    gold = load_gold("synthetic:1,sentences=400")
    lexicon = synthetic_lexicon(SyntheticSpec(seed=1))
    assert [(g.word, g.analyses) for g in gold] == [(w.word, (w.pieces,)) for w in lexicon]
    check_gold_fits(gold, corpus, "synthetic:1,sentences=400")
    with pytest.raises(DataError, match="give --gold synthetic:1,sentences=400"):
        check_gold_fits(load_gold(None, max_words=50), corpus, None)


def test_the_synthetic_suite_and_source_hash():
    suite = load_suite("synthetic")
    assert list(suite.seeds) == [0, 1, 2]
    assert [s.name for s in suite.systems] == [
        "morfessor",
        "transformer-cpu",
        "nvib-cpu",
        "dcsa-cpu",
        "stride-cpu",
        "seqreduce-cpu",
    ]
    assert suite.languages[0].corpus == suite.languages[0].gold == "synthetic:0"
    assert source_hash("synthetic:0", "corpus") == source_hash("synthetic:0", "corpus")
    assert source_hash("synthetic:0", "corpus") != source_hash("synthetic:1", "corpus")
