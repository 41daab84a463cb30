"""Word-count corpora: formats, counts, dampening, and every segmenter and environment reading them."""

from __future__ import annotations

import gzip
from collections import Counter

import numpy as np
import pytest

from segrl.config import DataConfig
from segrl.data import load_corpus
from segrl.data.wordlists import dampen, detect_format
from segrl.errors import ConfigError, DataError

WORDS = {
    "walking": 900,
    "walked": 300,
    "walks": 120,
    "talking": 500,
    "talked": 200,
    "talks": 80,
    "jumping": 60,
    "jumped": 40,
    "jumps": 30,
    "playing": 700,
    "played": 350,
    "plays": 90,
}


def _lines(*texts: str) -> list[tuple[str, int, str]]:
    return [("f.txt", i + 1, t) for i, t in enumerate(texts)]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (("12 walking", "3 walked"), "counts"),
        (("walking\t12", "walked\t3"), "counts"),
        (("walking", "walked", "Jumps"), "words"),
        (("The man walked home.", "She talks."), "text"),
        (("12 walking", "walked"), "text"),  # mixed: not a word list of one kind
    ],
)
def test_format_detection(lines, expected):
    assert detect_format(_lines(*lines)) == expected


def _write_counts(path, order="count word"):
    rows = [f"{n} {w}" if order == "count word" else f"{w}\t{n}" for w, n in WORDS.items()]
    text = "\n".join(rows) + "\n"
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("name", "order"), [("w.txt", "count word"), ("w.tsv.gz", "word tab")])
def test_counts_file_loads_as_a_word_list(tmp_path, name, order):
    path = _write_counts(tmp_path / name, order)
    corpus = load_corpus(DataConfig(corpus=str(path), min_char_count=1, seed=1))
    assert corpus.kind == "words"
    assert corpus.settings["format"] == "counts"
    assert sorted(corpus.sentences) == sorted(WORDS)
    assert not set(corpus.train) & set(corpus.test)
    counts = corpus.word_counts("train")
    assert counts == Counter({w: WORDS[w] for w in corpus.train})


def test_words_file_counts_repeated_lines(tmp_path):
    path = tmp_path / "words.txt"
    path.write_text("Walking\nwalking\nwalked\ntalks\n", encoding="utf-8")
    corpus = load_corpus(
        DataConfig(corpus=str(path), min_char_count=1, valid_fraction=0, test_fraction=0)
    )
    assert corpus.settings["format"] == "words"
    assert corpus.word_counts() == Counter({"walking": 2, "walked": 1, "talks": 1})
    assert corpus.train[0] == "walking"  # most frequent first, before the split's shuffle


def test_bad_count_line_names_file_and_line(tmp_path):
    path = tmp_path / "w.txt"
    path.write_text("12 walking\n3 walked\nmany talks\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"w\.txt:3: a word-count list"):
        load_corpus(DataConfig(corpus=str(path), corpus_format="counts"))


def test_max_words_keeps_the_most_frequent(tmp_path):
    path = _write_counts(tmp_path / "w.txt")
    corpus = load_corpus(DataConfig(corpus=str(path), min_char_count=1, max_words=3))
    assert sorted(corpus.sentences) == ["playing", "talking", "walking"]


def test_fingerprint_covers_the_counts(tmp_path):
    a = _write_counts(tmp_path / "a.txt")
    b = tmp_path / "b.txt"
    b.write_text(a.read_text().replace("900 walking", "901 walking"), encoding="utf-8")
    fa = load_corpus(DataConfig(corpus=str(a), min_char_count=1)).fingerprint
    fb = load_corpus(DataConfig(corpus=str(b), min_char_count=1)).fingerprint
    assert fa != fb


def test_rare_characters_of_a_word_list_are_counted_over_tokens(tmp_path):
    path = tmp_path / "w.txt"
    path.write_text("30 zoo\n30 ooze\n1 quit\n", encoding="utf-8")
    corpus = load_corpus(
        DataConfig(corpus=str(path), min_char_count=25, valid_fraction=0, test_fraction=0)
    )
    # z and o occur 30 and 60 times as tokens (kept); q, u, i, t once (mapped)
    assert set(corpus.train) == {"zoo", "ooze", "\ufffd" * 4}


@pytest.mark.parametrize(
    ("dampening", "expected"), [("none", [900, 1]), ("log", [10, 1]), ("ones", [1, 1])]
)
def test_dampening(dampening, expected):
    assert [dampen(900, dampening), dampen(1, dampening)] == expected


def test_unknown_dampening_is_refused(tmp_path):
    path = _write_counts(tmp_path / "w.txt")
    with pytest.raises(
        ConfigError, match="data.dampening must be one of: none, log, ones; got 'sqrt'"
    ):
        load_corpus(DataConfig(corpus=str(path), dampening="sqrt"))


def test_wordfreq_corpus():
    pytest.importorskip("wordfreq", reason="the optional wordfreq extra is not installed")
    corpus = load_corpus(DataConfig(corpus="wordfreq:cs", max_words=500))
    assert corpus.kind == "words"
    assert len(corpus.sentences) == 500
    assert all(w.isalpha() and w == w.lower() for w in corpus.sentences)
    assert corpus.counts["je"] > corpus.counts[corpus.sentences[-1]] >= 1
    assert "ř" in corpus.vocab  # a letter of the language is kept, not mapped to the placeholder
    with pytest.raises(DataError, match="wordfreq has no list for 'xx'"):
        load_corpus(DataConfig(corpus="wordfreq:xx"))


def test_weighted_episode_sampling_follows_dampened_counts():
    from segrl.envs.setup import SentenceSource

    source = SentenceSource(["rare", "common"], seed=0, probabilities=np.array([0.1, 0.9]))
    draws = Counter(source.take(4000))
    assert 0.87 < draws["common"] / 4000 < 0.93
    again = SentenceSource(["rare", "common"], seed=0, probabilities=np.array([0.1, 0.9]))
    again.load_state_dict(source.state_dict())
    assert again.take(50) == source.take(50)


def test_env_setup_of_a_word_list_weights_its_words(tmp_path):
    from segrl.envs.setup import EnvSetup

    corpus = load_corpus(
        DataConfig(
            corpus=str(_write_counts(tmp_path / "w.txt")),
            min_char_count=1,
            dampening="none",
            valid_fraction=0,
            test_fraction=0,
        )
    )
    setup = EnvSetup.create(corpus=corpus, evaluator="morfessor")
    assert setup.weights == [WORDS[w] for w in setup.sentences]
    total = sum(WORDS.values())
    assert setup.draw_probabilities.tolist() == pytest.approx(
        [WORDS[w] / total for w in setup.sentences]
    )


def test_sentencepiece_trains_on_word_frequencies(tmp_path):
    from segrl.baselines.sentencepiece import SentencePieceUnigram

    path = tmp_path / "w.txt"
    # one very frequent long word among rare ones: as a word list with counts it gets one piece
    rare = [f"1 {w}" for w in ("abc", "bcd", "cde", "def", "efg", "fgh", "ghi", "hij")]
    path.write_text("\n".join(["100000 zyxwvut", *rare]) + "\n", encoding="utf-8")
    corpus = load_corpus(
        DataConfig(corpus=str(path), min_char_count=1, valid_fraction=0, test_fraction=0)
    )
    seg = SentencePieceUnigram(vocab_size=30).train(corpus)
    assert seg.segment("zyxwvut") == ["zyxwvut"]


def test_morfessor_trains_on_the_list_counts(tmp_path):
    from segrl.baselines.morfessor import MorfessorSegmenter

    corpus = load_corpus(
        DataConfig(
            corpus=str(_write_counts(tmp_path / "w.txt")),
            min_char_count=1,
            valid_fraction=0,
            test_fraction=0,
        )
    )
    seg = MorfessorSegmenter(dampening="none", cache_dir="").train(corpus)
    counts = {"".join(s): n for n, _compound, s in seg.model.get_segmentations()}
    assert counts == WORDS
    ones = MorfessorSegmenter(dampening="ones", cache_dir="").train(corpus)
    assert {n for n, _c, _s in ones.model.get_segmentations()} == {1}


def test_cli_data_shows_a_word_list(tmp_path, capsys):
    from segrl.cli import main

    path = _write_counts(tmp_path / "w.txt")
    assert main(["data", "--corpus", str(path), "--min-char-count", "1"]) in (0, None)
    out = capsys.readouterr().out
    assert '"format": "counts"' in out
    bad = tmp_path / "bad.txt"
    bad.write_text("12 walking\nx walked\n", encoding="utf-8")
    assert main(["data", "--corpus", str(bad), "--corpus-format", "counts"]) == 2
    assert "bad.txt:2" in capsys.readouterr().err


def test_weights_of_text_corpora_are_none(corpus):
    assert corpus.kind == "text"
    assert corpus.weights(corpus.train) is None
    assert np.all(np.asarray(corpus.weights(corpus.train, "ones") or [1]) == 1)


def test_goldwords_corpus_is_the_words_of_a_gold_file(tmp_path):
    """``goldwords:PATH``: the words (first column) of a gold file, each once, phrases left out;
    its language is the gold file's."""
    from segrl.data.corpus import corpus_path
    from segrl.data.languages import corpus_language

    path = tmp_path / "mon.word.train.tsv"
    rows = ["нуруунд\tнуруу @@д\t100", "үеийг\tүе @@ийг\t100", "dēlitum esse\tdēlitum esse", ""]
    rows += [f"w{i}a\tw{i} @@a\t100" for i in range(20)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    source = f"goldwords:{path}"
    corpus = load_corpus(DataConfig(corpus=source, min_char_count=1))
    assert corpus.kind == "words" and corpus.settings["format"] == "goldwords"
    assert sorted(corpus.sentences) == sorted(["нуруунд", "үеийг", *(f"w{i}a" for i in range(20))])
    assert set(corpus.counts.values()) == {1}
    assert corpus_language(source) == "mon"
    assert corpus_path(source) == path
    with pytest.raises(DataError, match="--corpus-format text does not apply"):
        load_corpus(DataConfig(corpus=source, corpus_format="text"))
    with pytest.raises(DataError, match="nowhere.tsv"):
        load_corpus(DataConfig(corpus=f"goldwords:{tmp_path / 'nowhere.tsv'}"))
