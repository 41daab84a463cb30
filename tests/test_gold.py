import re

import pytest

from segrl.data.gold import GoldWord, bundled_gold, load_gold, read_gold
from segrl.errors import DataError, DataWarning
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
    with pytest.raises(DataError, match=r"labels\.txt:1: 'walked' is analysed as labels"):
        read_gold(labels_only)
    canonical_only = write(tmp_path, "subsidised\tsubside @@y @@ise @@ed\t110\n", "canon.txt")
    with pytest.raises(DataError, match="no surface segmentations"):
        read_gold(canonical_only)
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


LABELS_GOLD = (
    "".join(f"{w}ed\t{w}_V +PAST\n" for w in ["walk", "talk", "jump", "play", "work"] * 4)
    + "and\tand\nthe\tthe\nof\tof\n"
)
"""20 rows of labels (``walked<TAB>walk_V +PAST``), then 3 identity rows: the probe's file."""


def test_a_gold_file_mostly_of_labels_is_refused_naming_a_row(tmp_path):
    path = write(tmp_path, LABELS_GOLD, "labels.tsv")
    with pytest.raises(DataError) as refused:
        read_gold(path)
    message = str(refused.value)
    assert message.startswith(f"{path}:1: 'walked' is analysed as labels ('walk_V +PAST')")
    assert "20 of its 23 rows" in message and "3 are surface segmentations" in message
    assert "\n" not in message
    # a few labelled rows among surface ones are dropped as before
    mostly_surface = write(tmp_path, LABELS_GOLD.replace("_V +PAST", " ed", 17))
    assert {g.word: g.analyses for g in read_gold(mostly_surface)}["walked"] == (("walk", "ed"),)


def test_canonical_rows_are_not_taken_for_labels(tmp_path):
    """SIGMORPHON 2022's Spanish dev set is 88% canonical rows (lower-case letters, a proper
    noun's capital now and then): dropped, as before, without refusing the file."""
    rows = [
        "hablaste\thablar @@aste\t010",
        "mexicanidad\tMéxico @@ano @@idad\t010",
        "cantamos\tcantar @@amos\t010",
        "comimos\tcomer @@imos\t010",
        "vivieron\tvivir @@ieron\t010",
        "casas\tcasa @@s\t010",
    ]
    with pytest.warns(DataWarning) as said:
        gold = read_gold(write(tmp_path, "\n".join(rows) + "\n", "spa.tsv"))
    assert [g.word for g in gold] == ["casas"]
    assert [str(w.message) for w in said] == [
        f"{tmp_path / 'spa.tsv'}: 1 of its 6 rows (17%) are surface segmentations, and only they "
        "are scored; the others are canonical, their morphs not spelling the word (line 1: "
        "'hablaste' as 'hablar + aste'). Its scores are of the words whose morphs keep their "
        "form, not of the whole file"
    ]


def test_a_gold_file_mostly_of_surface_rows_says_nothing_of_the_rest(tmp_path, recwarn):
    """One canonical row in three is no warning (English's dev set: 70% surface)."""
    path = write(tmp_path, "players\tplay @@er @@s\t110\nmade\tmake @@ed\t010\ndog\tdog\t000\n")
    assert [g.word for g in read_gold(path)] == ["players", "dog"]
    assert not [w for w in recwarn if issubclass(w.category, DataWarning)]


def test_the_shared_sigmorphon_sets_still_read_and_say_how_little_is_scored():
    for name, words, share in [
        ("spa.word.dev.tsv", 9996, "(12%)"),
        ("mon.word.dev.tsv", 651, "(34%)"),
    ]:
        with pytest.warns(DataWarning, match=re.escape(f"rows {share} are surface")):
            assert len(read_gold(shared_path("sigmorphon2022", name))) == words


def test_every_command_that_reads_gold_refuses_another_script_and_labels(
    mlflow_store, small_corpus_file, capsys
):
    """``evaluate --model`` refuses a gold set in another script as ``baseline`` does (against the
    model's characters, not a corpus), and every command refuses a file mostly of labels, before
    any run is logged."""
    from mlflow.tracking import MlflowClient

    from segrl.agents.policies import PolicyConfig, SegmenterPolicy
    from segrl.agents.segmenter import AgentSegmenter
    from segrl.cli import EXIT_USER_ERROR, main
    from segrl.data.corpus import PLACEHOLDER
    from segrl.data.vocab import CharVocab

    corpus = ["--corpus", str(small_corpus_file), "--min-char-count", "1"]
    model = mlflow_store / "chars"
    assert main(["baseline", "--method", "characters", *corpus, "--out", str(model)]) == 0
    vocab = CharVocab.from_texts(["the cat sat walked"], PLACEHOLDER)
    policy = SegmenterPolicy(len(vocab), 2, 32, PolicyConfig(embedding_dim=8, hidden_dim=8), 1)
    agent = AgentSegmenter(policy, vocab).save(mlflow_store / "agent")
    russian = write(mlflow_store, "домами\tдом @@ами\t100\nкнигами\tкниг @@ами\t100\n", "ru.tsv")
    labels = write(mlflow_store, LABELS_GOLD, "labels.tsv")
    english = write(mlflow_store, "walked\twalk @@ed\t010\nthe\tthe\t000\n", "en.tsv")
    runs = len(MlflowClient().search_runs(["1"]))
    capsys.readouterr()

    def refused(args: list[str], expected: str) -> None:
        assert main(args) == EXIT_USER_ERROR, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err, err

    for folder in (model, agent):
        evaluate = ["evaluate", "--model", str(folder), "--log"]
        refused(
            [*evaluate, "--gold", str(russian)],
            f"{russian}: only 0% of its characters occur in the model {folder}",
        )
        refused([*evaluate, "--gold", str(labels)], f"{labels}:1: 'walked' is analysed as labels")
    refused(["baseline", "--method", "characters", *corpus, "--gold", str(russian)], "only 0%")
    for command in (["baseline", "--method", "characters"], ["data"]):
        refused([*command, *corpus, "--gold", str(labels)], "is analysed as labels")
    assert len(MlflowClient().search_runs(["1"])) == runs
    assert main(["evaluate", "--model", str(model), "--gold", str(english)]) == 0
    assert "boundary P/R/F1 0.143 / 1.000 / 0.250" in capsys.readouterr().out
