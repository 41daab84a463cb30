import gzip

import pytest

from segrl.config import DataConfig
from segrl.data import CharVocab, load_corpus
from segrl.data.corpus import (
    PLACEHOLDER,
    NormalizationSettings,
    normalize,
    split_into_sentences,
    split_sentences,
)
from segrl.errors import DataError, DataWarning, ModelError


def lines(*texts):
    return [("test.txt", i, t) for i, t in enumerate(texts, start=1)]


def test_normalize_follows_the_study():
    settings = NormalizationSettings(min_char_count=1, max_len=40)
    sentences, stats = normalize(
        lines(
            " = Heading = ",
            "The Guest @-@ star role , in 1 @,@ 000 rooms . He left ! and then ?",
            "A sentence that is far too long to keep under the limit of forty characters .",
        ),
        settings,
    )
    assert sentences == ["the guest-star role , in 1,000 rooms .", "he left ! and then ?"]
    assert stats["too_long"] == 1


def test_rare_characters_map_to_placeholder():
    settings = NormalizationSettings(min_char_count=3)
    sentences, stats = normalize(lines("aaa bbb", "aaa bbz"), settings)
    # 'z' occurs once (< 3): replaced; 'b' occurs 5 times: kept
    assert sentences == ["aaa bbb", f"aaa bb{PLACEHOLDER}"]
    assert stats["rare_characters"] == 1


def test_sentence_splitting():
    assert split_into_sentences('He said "no." Then left . e.g. this stays ! Ok') == [
        'He said "no."',
        "Then left . e.g. this stays !",
        "Ok",
    ]


def test_split_is_deterministic_and_disjoint():
    sentences = [f"s{i}" for i in range(100)]
    train, valid, test = split_sentences(sentences, 0.1, 0.1, seed=0)
    assert (len(train), len(valid), len(test)) == (80, 10, 10)
    assert sorted(train + valid + test) == sorted(sentences)
    assert split_sentences(sentences, 0.1, 0.1, seed=0) == (train, valid, test)
    assert split_sentences(sentences, 0.1, 0.1, seed=1)[1] != valid


def test_load_corpus_from_file(small_corpus_file):
    corpus = load_corpus(DataConfig(corpus=str(small_corpus_file), min_char_count=1))
    assert corpus.train and corpus.valid and corpus.test
    assert all(len(s) <= 128 and s == s.lower() for s in corpus.sentences)
    assert corpus.word_counts()["the"] > 0
    assert corpus.settings["counts"]["sentences"] == len(corpus.sentences)
    again = load_corpus(DataConfig(corpus=str(small_corpus_file), min_char_count=1))
    assert again.fingerprint == corpus.fingerprint
    other = load_corpus(DataConfig(corpus=str(small_corpus_file), min_char_count=1, seed=5))
    assert other.fingerprint != corpus.fingerprint


def test_load_corpus_reads_folders_and_gzip(tmp_path):
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt").write_text("First file here .\n")
    with gzip.open(folder / "b.txt.gz", "wt") as f:
        f.write("Second file here .\n")
    (folder / ".hidden").write_text("Never read .\n")
    config = DataConfig(corpus=str(folder), min_char_count=1, valid_fraction=0, test_fraction=0)
    with pytest.warns(DataWarning, match="only 2 training sentences"):
        corpus = load_corpus(config)
    assert sorted(corpus.train) == ["first file here .", "second file here ."]


def test_bundled_corpus():
    corpus = load_corpus()
    assert len(corpus.sentences) > 5000
    assert corpus.vocab.placeholder == PLACEHOLDER
    assert all(len(s) <= 128 for s in corpus.sentences)
    assert corpus.settings["source"].startswith("bundled:")


def test_not_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"a good line .\n" + "caf\xe9 .\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin1\.txt:2: not valid UTF-8.*iconv"):
        load_corpus(DataConfig(corpus=str(path)))


def test_empty_after_normalisation(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("= Only a heading =\n" + "x" * 300 + "\n")
    with pytest.raises(DataError, match=r"long\.txt: no sentences left after normalisation"):
        load_corpus(DataConfig(corpus=str(path)))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    with pytest.raises(DataError, match=r"empty\.txt: .* it is empty, or holds only blank lines"):
        load_corpus(DataConfig(corpus=str(empty)))


def test_utf16_is_named_as_such(tmp_path):
    path = tmp_path / "utf16.txt"
    path.write_bytes("the cat sat .\n".encode("utf-16"))
    with pytest.raises(DataError, match=r"utf16\.txt:1: UTF-16, not UTF-8.*iconv -f utf-16"):
        load_corpus(DataConfig(corpus=str(path)))


def test_unknown_path_and_empty_folder(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        load_corpus(DataConfig(corpus=str(tmp_path / "nope.txt")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no files"):
        load_corpus(DataConfig(corpus=str(tmp_path / "empty")))


def test_absurdly_long_line(tmp_path, monkeypatch):
    monkeypatch.setattr("segrl.data.corpus.MAX_LINE_CHARS", 50)
    path = tmp_path / "blob.txt"
    path.write_text("short .\n" + "y" * 60 + "\n")
    with pytest.raises(DataError, match=r"blob\.txt:2: line longer than"):
        load_corpus(DataConfig(corpus=str(path)))


def test_a_corpus_of_a_few_sentences_trains_with_a_warning(tmp_path, capsys):
    from segrl.cli import main

    path = tmp_path / "tiny.txt"
    path.write_text("One cat.\nTwo dogs.\nRed fox.\n", encoding="utf-8")
    with pytest.warns(DataWarning, match=r"tiny\.txt: only 1 training sentences \(and 1 valid"):
        corpus = load_corpus(DataConfig(corpus=str(path), min_char_count=1))
    assert len(corpus.train) == 1
    assert main(["data", "--corpus", str(path), "--min-char-count", "1"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("segrl: warning: ") and "only 1 training sentences" in err
    assert len(err.splitlines()) == 1


def test_vocab_round_trip(tmp_path):
    vocab = CharVocab.from_texts(["abba", "cab"], PLACEHOLDER)
    assert vocab.symbols[:4] == ["<pad>", "<bos>", "<eos>", PLACEHOLDER]
    assert vocab.symbols[4:] == ["a", "b", "c"]  # most frequent first
    assert vocab.encode("abz") == [4, 5, vocab.unk_id]
    assert vocab.decode(vocab.encode("cab")) == "cab"
    loaded = CharVocab.load(vocab.save(tmp_path / "vocab.json"))
    assert loaded == vocab
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ModelError, match="broken.json"):
        CharVocab.load(tmp_path / "broken.json")
    with pytest.raises(ModelError, match="missing"):
        CharVocab.load(tmp_path / "missing.json")
