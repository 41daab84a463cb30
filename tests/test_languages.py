"""The languages of corpora and gold sets: how they are read, and a corpus scored against the bundled
English gold set only when it is English (or its language is not known)."""

from __future__ import annotations

import warnings

import pytest

from segrl.data.languages import (
    UNKNOWN,
    check_gold_language,
    corpus_language,
    gold_language,
)
from segrl.errors import DataError, DataWarning


@pytest.mark.parametrize(
    ("source", "language"),
    [
        (None, "eng"),
        ("bundled:wikitext2_test.txt.gz", "eng"),
        ("wordfreq:fi", "fin"),
        ("wordfreq:en", "eng"),
        ("wordfreq:zh-hant", "zho"),
        ("wordfreq:qq", UNKNOWN),
        ("hf:wikitext", UNKNOWN),
        ("/data/fin.txt", UNKNOWN),
    ],
)
def test_corpus_language(source, language):
    assert corpus_language(source) == language


@pytest.mark.parametrize(
    ("path", "language"),
    [
        (None, "eng"),
        ("bundled:sigmorphon2022_eng_word_dev_surface.tsv.gz", "eng"),
        ("/shared/data/sigmorphon2022/hun.word.dev.tsv", "hun"),
        ("ces.word.test.gold.tsv", "ces"),
        ("goldstd_develset.segmentation.fin", "fin"),
        ("my_gold.tsv", UNKNOWN),
        ("eng_vs_fin.tsv", UNKNOWN),
    ],
)
def test_gold_language(path, language):
    assert gold_language(path) == language


def test_only_a_known_other_language_against_the_bundled_gold_is_refused():
    with pytest.raises(DataError, match=r"^wordfreq:hu: the corpus is in hun but the bundled gold"):
        check_gold_language("wordfreq:hu", None)
    check_gold_language("wordfreq:en", None)
    check_gold_language("wordfreq:hu", "hun.word.dev.tsv")
    check_gold_language("wordfreq:hu", "eng.word.dev.tsv")  # chosen explicitly
    with pytest.warns(
        DataWarning, match=r"^/data/magyar.txt: language unknown: scoring on eng gold"
    ):
        check_gold_language("/data/magyar.txt", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_gold_language("/data/magyar.txt", "hun.word.dev.tsv")  # a gold file chosen


def test_a_corpus_file_scored_on_the_bundled_gold_says_so_in_one_line(
    mlflow_store, small_corpus_file, capsys
):
    from segrl.cli import main

    args = ["baseline", "--method", "characters", "--corpus", str(small_corpus_file)]
    assert main([*args, "--min-char-count", "1", "--gold-max-words", "50"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"segrl: warning: {small_corpus_file}: language unknown: scoring on eng gold (the bundled "
        "set); give a gold set in the corpus's language with --gold FILE"
    ]
