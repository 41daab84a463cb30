import pytest

from segrl.data.gold import GoldWord, bundled_gold, load_gold, read_gold
from segrl.errors import DataError
from tests.conftest import shared_path


def write(tmp_path, text, name="gold.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_morpho_challenge_format_with_labels_and_alternatives(tmp_path):
    path = write(
        tmp_path,
        "# comment\nwalked\twalk:walk_V ed:+PAST, walked:walked_V\nCats\tcat:cat_N s:+PL\n",
    )
    gold = read_gold(path)
    assert gold == [
        GoldWord("walked", (("walk", "ed"), ("walked",))),
        GoldWord("cats", (("cat", "s"),)),
    ]


def test_sigmorphon_word_format_keeps_surface_rows(tmp_path):
    path = write(
        tmp_path,
        "players\tplay @@er @@s\t110\nsubsidised\tsubside @@y @@ise @@ed\t110\ndog\tdog\t000\n",
    )
    gold = read_gold(path)
    assert [g.word for g in gold] == ["players", "dog"]  # subsidised is canonical, not surface
    assert gold[0].analyses == (("play", "er", "s"),)


def test_sigmorphon_sentence_format(tmp_path):
    path = write(tmp_path, "Six weeks of training .\tSix week @@s of train @@ing .\n")
    gold = {g.word: g.analyses for g in read_gold(path)}
    assert gold["weeks"] == (("week", "s"),)
    assert gold["training"] == (("train", "ing"),)


def test_file_in_neither_format_names_the_line(tmp_path):
    path = write(tmp_path, "walked\twalk ed\njust some words without a tab\n")
    with pytest.raises(DataError, match=r"gold\.txt:2: not a gold segmentation line"):
        read_gold(path)
    labels_only = write(tmp_path, "walked\twalk_V +PAST\n", "labels.txt")
    with pytest.raises(DataError, match="no surface segmentations"):
        read_gold(labels_only)
    with pytest.raises(DataError, match="empty"):
        read_gold(write(tmp_path, "\n", "empty.txt"))
    with pytest.raises(DataError, match="no such file"):
        read_gold(tmp_path / "missing.tsv")


def test_bundled_gold():
    gold = bundled_gold()
    assert len(gold) == 40298
    by_word = {g.word: g.analyses for g in gold}
    assert by_word["strides"] == (("stride", "s"),)
    assert "patronesses" not in by_word  # patron @@ess @@s does not spell it
    assert len(load_gold(max_words=100)) == 100
    assert load_gold(max_words=100) == load_gold(max_words=100)


def test_shared_sigmorphon_dev_matches_bundled():
    gold = read_gold(shared_path("sigmorphon2022", "eng.word.dev.tsv"))
    assert {g.word for g in gold} == {g.word for g in bundled_gold()}
