"""Trained segmenters as artifacts: one loader, MLflow pyfunc models, ``segrl segment``, ``segrl
evaluate``, and a ``segrl compare`` that keeps every run and never mixes corpora or gold sets."""

from __future__ import annotations

import gc
import io
import re
import shutil
import sys
import tempfile
from pathlib import Path

import morfessor
import pytest
from mlflow.tracking import MlflowClient

import mlflow
import segrl
from segrl import load_segmenter
from segrl.baselines import SEGMENTERS
from segrl.cli import EXIT_USER_ERROR, main
from segrl.data.corpus import read_lines
from segrl.errors import DataError, ModelError
from segrl.formats import format_sentence, format_word, group_into_words, read_predictions
from segrl.metrics import morph_prf
from segrl.tracking.ui import scored_on_part, view_group

SMALL = ["--min-char-count", "1", "--gold-max-words", "50"]


def _stdin(monkeypatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8"))))


def _only_run_id(experiment: str = "segrl") -> str:
    client = MlflowClient()
    exp = client.get_experiment_by_name(experiment)
    (run,) = client.search_runs([exp.experiment_id])
    return run.info.run_id


def test_a_saved_classic_segmenter_loads_and_spells_its_input(corpus, tmp_path):
    folder = SEGMENTERS["bpe"](vocab_size=60).train(corpus).save(tmp_path / "bpe")
    segmenter = load_segmenter(folder)
    assert segmenter.kind == "classic"
    words = ["Walked", "jumping", "", "ÉTÉ"]
    found = segmenter.segment_words(words)
    assert ["".join(s) for s in found] == words  # cut from the original, case kept
    assert found[2] == []
    (sentence,) = segmenter.segment_sentences(["The  cats\tsat"])
    assert "".join(sentence) == "The cats sat"
    assert sentence.count(" ") == 2 and " " not in "".join(s for s in sentence if s != " ")
    with pytest.raises(ModelError, match="no such folder"):
        load_segmenter(tmp_path / "nowhere")
    with pytest.raises(ModelError, match="not a saved segmenter"):
        load_segmenter(tmp_path)


def test_a_baseline_run_is_an_mlflow_model_round_trip(
    mlflow_store, small_corpus_file, monkeypatch, capsys
):
    args = ["baseline", "--method", "characters", "--corpus", str(small_corpus_file), *SMALL]
    assert main([*args, "--register", "chars"]) == 0
    run_id = _only_run_id()
    uri = f"runs:/{run_id}/model"
    model = mlflow.pyfunc.load_model(uri)
    assert model.predict(["unexpectedly"]) == [list("unexpectedly")]
    # a text with spaces is a sentence: the spaces are segments of their own
    assert model.predict(["the cat"]) == [["t", "h", "e", " ", "c", "a", "t"]]
    assert mlflow.pyfunc.load_model("models:/chars/1").predict(["ab"]) == [["a", "b"]]
    assert load_segmenter(f"runs:/{run_id}").segment_words(["ox"]) == [["o", "x"]]
    # the downloaded copy lives as long as the segmenter, in one folder of the temporary folder
    temp = mlflow_store / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    loaded = load_segmenter(uri)
    (copy,) = temp.iterdir()
    assert loaded.folder.is_relative_to(copy) and (loaded.folder / "segmenter.json").exists()
    del loaded
    gc.collect()
    assert list(temp.iterdir()) == []
    capsys.readouterr()

    _stdin(monkeypatch, "walked\nTalks\n")
    assert main(["segment", "--model", uri, "--quiet"]) == 0
    assert capsys.readouterr().out == "w a l k e d\nT a l k s\n"

    counts = mlflow_store / "counts.txt"
    counts.write_text("12 ab\n3 cd\n", encoding="utf-8")
    assert main(["segment", "--model", uri, str(counts), "--format", "sigmorphon"]) == 0
    # SIGMORPHON 2022's third column is the category, not a count: counts are left out
    assert capsys.readouterr().out == "ab\ta @@b\ncd\tc @@d\n"
    # counted words are Morfessor's segmentation file, which Morfessor's own reader reads back
    assert main(["segment", "--model", uri, str(counts), "--format", "morfessor"]) == 0
    segmentations = mlflow_store / "segmentations.txt"
    segmentations.write_text(capsys.readouterr().out, encoding="utf-8")
    assert list(morfessor.MorfessorIO().read_segmentation_file(str(segmentations))) == [
        (12, "ab", ("a", "b")),
        (3, "cd", ("c", "d")),
    ]

    _stdin(monkeypatch, "the cats sat\nno  way\n")
    assert main(["segment", "--model", "models:/chars/1", "--input-format", "text"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "the cats sat\tt @@h @@e c @@a @@t @@s s @@a @@t",
        "no way\tn @@o w @@a @@y",
    ]
    _stdin(monkeypatch, "the cats\n")
    code = main(["segment", "--model", uri, "--input-format", "text", "--format", "morfessor"])
    assert code == EXIT_USER_ERROR and "no word boundaries" in capsys.readouterr().err
    _stdin(monkeypatch, "ab\n")
    assert main(["segment", "--model", uri, "--format", "separator", "--separator", "+"]) == 0
    assert capsys.readouterr().out == "a+b\n"


def test_load_segmenter_refuses_a_name_too_long(tmp_path):
    with pytest.raises(ModelError, match="cannot open it .File name too long"):
        load_segmenter(tmp_path / ("a" * 300))


def test_segment_refuses_bad_input_in_one_line(mlflow_store, monkeypatch, capsys):
    code = main(["segment", "--model", str(mlflow_store / "missing")])
    assert code == EXIT_USER_ERROR and "no such folder" in capsys.readouterr().err
    code = main(["segment", "--model", "runs:/0123456789abcdef/model"])
    err = capsys.readouterr().err
    assert code == EXIT_USER_ERROR and err.startswith("segrl: error: runs:/0123456789abcdef/model")
    assert "Traceback" not in err


def test_evaluate_scores_predictions_and_a_model_and_logs_them(
    mlflow_store, small_corpus_file, capsys
):
    gold = mlflow_store / "gold.tsv"
    gold.write_text("walked\twalk @@ed\t010\njumps\tjump @@s\t010\nhome\thome\t000\n", "utf-8")
    predictions = mlflow_store / "pred.txt"
    predictions.write_text("walk ed\nju mps\nhome\nextra word\n", encoding="utf-8")
    code = main(["evaluate", "--predictions", str(predictions), "--gold", str(gold), "--log"])
    out = capsys.readouterr().out
    assert code == 0
    # boundaries: walk|ed right, ju|mps wrong (1 of 2 predicted, 1 of 2 gold); morphs (SIGMORPHON
    # 2022): walk, ed, home right of 5 predicted and 5 gold
    assert "boundary P/R/F1 0.500 / 0.500 / 0.500, morph F1 0.600" in out
    assert "100.0% of gold words covered" in out
    main(["compare"])
    table = capsys.readouterr().out
    assert "pred.txt" in table and "evaluated" in table and f"gold {gold}" in table
    # the run's datasets: the gold file it was scored against and the predictions it read
    (run,) = MlflowClient().search_runs(["1"])
    inputs = {
        (i.dataset.name, i.tags[0].value, str(f.resolve()) in i.dataset.source)
        for i, f in zip(
            sorted(run.inputs.dataset_inputs, key=lambda i: i.dataset.name),
            [gold, predictions],
            strict=True,
        )
    }
    assert inputs == {("gold", "evaluation", True), ("predictions", "predictions", True)}
    assert run.data.params["predictions.format"] == "auto"
    assert run.data.params["predictions.min_coverage"] == "0.5"

    assert (
        main(["baseline", "--method", "characters", "--corpus", str(small_corpus_file), *SMALL])
        == 0
    )
    run_id = next(
        r.info.run_id
        for r in MlflowClient().search_runs(["1"])
        if r.data.tags.get("segrl.segmenter") == "characters"
    )
    capsys.readouterr()
    assert main(["evaluate", "--model", f"runs:/{run_id}/model", "--gold", str(gold)]) == 0
    out = capsys.readouterr().out
    assert "boundary P/R/F1 0.167 / 1.000 / 0.286" in out  # 12 splits, 2 of them gold

    empty = mlflow_store / "other.txt"
    empty.write_text("cat\n", encoding="utf-8")
    code = main(["evaluate", "--predictions", str(empty), "--gold", str(gold)])
    assert code == EXIT_USER_ERROR and "segments 0 of the 3 words" in capsys.readouterr().err


def test_a_model_has_one_units_per_char_in_training_and_in_evaluate(
    mlflow_store, small_corpus_file, capsys
):
    """``units_per_char`` is of held-out corpus text, which only training has; the units per
    character of the gold words are ``gold_units_per_char`` in both runs, and equal."""
    gold = mlflow_store / "gold.tsv"
    gold.write_text("walked\twalk @@ed\njumps\tjump @@s\nhome\thome\n", "utf-8")
    args = ["--corpus", str(small_corpus_file), "--gold", str(gold), "--min-char-count", "1"]
    assert main(["baseline", "--method", "words", *args]) == 0
    run = MlflowClient().get_run(_only_run_id())
    assert sorted(i.dataset.name for i in run.inputs.dataset_inputs) == ["corpus", "gold"]
    trained = run.data.metrics
    assert trained["gold_units_per_char"] == pytest.approx(3 / 15)  # one unit per gold word
    assert trained["units_per_char"] != pytest.approx(3 / 15)  # the corpus's words are longer
    capsys.readouterr()
    model = f"runs:/{_only_run_id()}/model"
    assert main(["evaluate", "--model", model, "--gold", str(gold), "--log"]) == 0
    assert "gold units/char 0.200 (3 words)" in capsys.readouterr().out
    runs = MlflowClient().search_runs(["1"], "tags.`segrl.kind` = 'evaluated'")
    (evaluated,) = [r.data.metrics for r in runs]
    assert [i.dataset.name for i in runs[0].inputs.dataset_inputs] == ["gold"]  # its dataset
    assert evaluated["gold_units_per_char"] == trained["gold_units_per_char"]
    assert "units_per_char" not in evaluated
    assert evaluated["covered_fraction"] == 1.0  # a model scores every gold word
    coverage = {r.data.tags["segrl.gold_coverage"] for r in MlflowClient().search_runs(["1"])}
    assert coverage == {"all 3 words"}  # trained and evaluated: in one group of the UI's view
    assert main(["compare"]) == 0
    table = capsys.readouterr().out
    assert "gold_units_per_char" in table and " units_per_char" not in table


def test_evaluate_reads_the_segmentation_file_morfessor_writes(mlflow_store, capsys):
    gold = mlflow_store / "gold.tsv"
    gold.write_text("walked\twalk @@ed\t010\njumps\tjump @@s\t010\nhome\thome\t000\n", "utf-8")
    predictions = mlflow_store / "morfessor.segmentations"
    segmentations = [
        (5, "walked", ("walk", "ed")),
        (2, "jumps", ("ju", "mps")),
        (1, "home", ("home",)),
    ]
    morfessor.MorfessorIO().write_segmentation_file(str(predictions), segmentations)
    assert predictions.read_text("utf-8").splitlines()[1:] == [
        "5 walk + ed",
        "2 ju + mps",
        "1 home",
    ]
    assert main(["evaluate", "--predictions", str(predictions), "--gold", str(gold)]) == 0
    assert "boundary P/R/F1 0.500 / 0.500 / 0.500, morph F1 0.600" in capsys.readouterr().out


def test_evaluate_tells_the_formats_apart_and_refuses_a_small_coverage(mlflow_store, capsys):
    gold = mlflow_store / "gold.tsv"
    words = ["unexpectedly\tun @@expect @@ed @@ly", "walked\twalk @@ed", "jumps\tjump @@s"]
    gold.write_text("\n".join([*words, "home\thome"]) + "\n", "utf-8")
    forms = {
        "separator": "un-expect-ed-ly\nwalk-ed\njump-s\nhome\n",
        "sentencepiece": "▁un expect ed ly ▁walk ed\n▁jump s ▁home\n",
        "bpe": "un@@ expect@@ ed@@ ly walk@@ ed\njump@@ s home\n",
    }
    for name, text in forms.items():
        predictions = mlflow_store / f"{name}.txt"
        predictions.write_text(text, encoding="utf-8")
        log = ["--log", "--name", "full"] if name == "separator" else []
        assert main(["evaluate", "--predictions", str(predictions), "--gold", str(gold), *log]) == 0
        assert "boundary P/R/F1 1.000 / 1.000 / 1.000" in capsys.readouterr().out, name

    predictions = mlflow_store / "one.txt"
    predictions.write_text("un-expect-ed-ly\nwell-known\n", encoding="utf-8")
    assert main(["evaluate", "--predictions", str(predictions), "--gold", str(gold)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"segrl: error: {predictions}: segments 1 of the 4 words of {gold} (25.0%, below "
        "--min-coverage 0.5) read as separator (saw '-'); give the predictions for that gold "
        "file's words, the format with --predictions-format, or a lower --min-coverage"
    ]
    args = ["--predictions", str(predictions), "--gold", str(gold), "--min-coverage", "0.25"]
    assert main(["evaluate", *args, "--log", "--name", "partial"]) == 0
    assert "(1 words, 25.0% of gold words covered)" in capsys.readouterr().out
    main(["compare"])
    assert f"gold {gold} (unknown, 1 of 4 words)" in capsys.readouterr().out
    # the UI's view groups the part apart from the whole gold set: a score on one word is not
    # ranked above one on all four
    runs = {r.info.run_name: r for r in MlflowClient().search_runs(["1"])}
    assert runs["full"].data.tags["segrl.gold_coverage"] == "all 4 words"
    assert runs["partial"].data.tags["segrl.gold_coverage"] == "1 of 4 words (25.0%)"
    assert runs["partial"].data.metrics["covered_fraction"] == 0.25
    assert view_group(runs["full"]) != view_group(runs["partial"])
    assert scored_on_part(runs["partial"]) and not scored_on_part(runs["full"])


def test_a_word_column_is_read_as_the_word_in_every_format(mlflow_store, capsys):
    gold = mlflow_store / "gold.tsv"
    gold.write_text("walked\twalk @@ed\njumps\tjump @@s\nhome\thome\n", "utf-8")
    # `paste words.txt subword-nmt.out`: the word column is the word, not a second segmentation
    pasted = mlflow_store / "pasted.tab"
    pasted.write_text("walked\twalk@@ ed\njumps\tju@@ mps\nhome\thome\n", encoding="utf-8")
    args = ["evaluate", "--predictions", str(pasted), "--gold", str(gold)]
    assert main([*args, "--predictions-format", "bpe"]) == 0
    assert "boundary P/R/F1 0.500 / 0.500 / 0.500" in capsys.readouterr().out
    # under auto a tab is SIGMORPHON's: refused, with the format the analysis looks to be in
    assert main(args) == EXIT_USER_ERROR
    assert capsys.readouterr().err.splitlines() == [
        f"segrl: error: {pasted}:1: the morphs 'walk@@ ed' do not spell 'walked' (read as "
        "sigmorphon); it looks bpe (saw '@@'): give --predictions-format bpe"
    ]
    # analyses that do not spell their word are refused in the named format too
    pasted.write_text("walked\twalk@@ ed\njumps\tjump@@ ed\n", encoding="utf-8")
    assert main([*args, "--predictions-format", "bpe"]) == EXIT_USER_ERROR
    assert f"{pasted}:2: the morphs 'jump ed' do not spell 'jumps' (read as bpe)" in (
        capsys.readouterr().err
    )


def test_a_word_segmented_two_ways_is_reported(mlflow_store, capsys):
    gold = mlflow_store / "gold.tsv"
    gold.write_text("walked\twalk @@ed\njumps\tjump @@s\n", "utf-8")
    predictions = mlflow_store / "text.txt"
    predictions.write_text("walk-ed jump-s\njumps walk-ed\nWalk-ed\n", encoding="utf-8")
    args = ["evaluate", "--predictions", str(predictions), "--gold", str(gold)]
    assert main([*args, "--predictions-format", "separator"]) == 0
    out, err = capsys.readouterr()
    assert "boundary P/R/F1 1.000 / 1.000 / 1.000" in out  # the first segmentation is scored
    assert err.splitlines() == [
        f"segrl: warning: {predictions}: lines that segment a word differently from its first "
        f"line, which is the one scored: 1 ({predictions}:2: jumps is 'jumps' here, 'jump s' on "
        "line 1)"
    ]


def test_predictions_formats_read_back_what_segment_writes():
    lines = [
        ("p", 1, "walked\twalk @@ed\t010"),
        ("p", 2, "3 jump s"),
        ("p", 3, "the cats\tthe cat @@s"),
        ("p", 4, "ice cream\tice  @@cream"),  # a morph marker on the space, as some tools write
    ]
    assert list(read_predictions(lines)) == [
        ("walked", ["walk", "ed"]),
        ("jumps", ["jump", "s"]),
        ("the", ["the"]),
        ("cats", ["cat", "s"]),
        ("ice", ["ice"]),
        ("cream", ["cream"]),
    ]
    assert list(read_predictions([("p", 1, "un-do ne")], "separator", "-")) == [
        ("undo", ["un", "do"]),
        ("ne", ["ne"]),
    ]
    # a number first is a count only where every line has one (Morfessor's segmentation files)
    words = [("p", 1, "1990 s"), ("p", 2, "walk ed")]
    assert list(read_predictions(words)) == [("1990s", ["1990", "s"]), ("walked", ["walk", "ed"])]
    counts = [("p", 1, "7 1990 s\n"), ("p", 2, "2 walk ed\n")]
    assert list(read_predictions(counts, "morfessor")) == [
        ("1990s", ["1990", "s"]),
        ("walked", ["walk", "ed"]),
    ]
    # Morfessor's ' + ' between morphs, SentencePiece's '▁' and subword-nmt's '@@' are told apart
    assert list(read_predictions([("p", 1, "# Morfessor"), ("p", 2, "3 1990 + s")])) == [
        ("1990s", ["1990", "s"])
    ]
    assert list(read_predictions([("p", 1, "▁the ▁ cat s")])) == [
        ("the", ["the"]),
        ("cats", ["cat", "s"]),
    ]
    assert list(read_predictions([("p", 1, "the cat@@ s")])) == [
        ("the", ["the"]),
        ("cats", ["cat", "s"]),
    ]
    with pytest.raises(DataError, match="p:1: the morphs 'walk e' do not spell 'walked'"):
        list(read_predictions([("p", 1, "walked\twalk @@e")]))
    assert format_word("cats", ["cat", "s"], "morfessor", count=4) == "4 cat + s"
    assert format_word("cats", ["cat", "s"], "morfessor") == "cat s"
    assert format_word("cats", ["cat", "s"], "sigmorphon") == "cats\tcat @@s"
    assert format_sentence("a cats", ["a", " ", "cat", "s"], "separator", "+") == "a cat+s"
    assert group_into_words(["the c", "at", " ", "s"]) == [["the"], ["c", "at"], ["s"]]


def test_morph_f1_is_the_shared_task_s():
    # per word, the longest common subsequence of the morph sequences counts
    prf = morph_prf([["a", "b", "a"], ["xy"]], [[("a", "ba")], [("x", "y")]])
    assert (prf.hits, prf.predicted, prf.gold) == (1, 4, 4)
    # a word left whole, as in the gold, is one correct morph (boundary F1 has nothing to score)
    assert morph_prf([["home"]], [[("home",)]]).f1 == 1.0
    # alternatives: the one with most correct morphs
    assert morph_prf([["walk", "ed"]], [[("wal", "ked"), ("walk", "ed")]]).f1 == 1.0


def test_compare_keeps_every_run_and_separates_corpora(
    mlflow_store, small_corpus_file, corpus, capsys
):
    base = ["baseline", "--corpus", str(small_corpus_file), *SMALL]
    assert main([*base, "--method", "unigram", "--vocab-size", "60"]) == 0
    assert main([*base, "--method", "unigram", "--vocab-size", "80"]) == 0
    assert main([*base, "--method", "characters", "--max-sentences", "20"]) == 0
    capsys.readouterr()
    assert main(["compare"]) == 0
    out = capsys.readouterr().out
    assert "unigram-60" in out and "unigram-80" in out  # neither replaces the other
    tables = out.split("\n\n")
    assert len(tables) == 2  # two corpora (all sentences, the first 20): never one table
    assert sum("characters" in t for t in tables) == 1
    assert all(("characters" in t) != ("unigram-60" in t) for t in tables)
    assert main(["compare", "--name", "unigram", "--latest"]) == 0
    out = capsys.readouterr().out
    assert "unigram-60" in out and "characters" not in out
    assert main(["compare", "--mixed", "--kind", "baseline"]) == 0
    out = capsys.readouterr().out
    assert "corpus" in out.splitlines()[1] and out.count("\n\n") == 0
    assert main(["compare", "--kind", "agent"]) == 0
    assert "no segmenter runs that match" in capsys.readouterr().out
    # unset options are not logged as the string "None"
    run = MlflowClient().search_runs(["1"])[0]
    assert "None" not in run.data.params.values()
    assert "gold.path" not in run.data.params


def test_read_lines_of_a_predictions_file(tmp_path):
    path = tmp_path / "p.tsv"
    path.write_text("walked\twalk @@ed\n", encoding="utf-8")
    assert list(read_predictions(read_lines(path))) == [("walked", ["walk", "ed"])]


@pytest.mark.slow
def test_mlflow_models_serve_serves_a_segmenter(mlflow_store, small_corpus_file):
    """``mlflow models serve`` (in segrl's own environment) answers with segmentations."""
    import json
    import os
    import signal
    import socket
    import subprocess
    import time
    import urllib.request
    from pathlib import Path

    args = ["baseline", "--method", "characters", "--corpus", str(small_corpus_file), *SMALL]
    assert main(args) == 0
    run_id = _only_run_id()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    bin_dir = str(Path(sys.executable).parent)
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "models", "serve", "-m", f"runs:/{run_id}/model"]
        + ["--env-manager", "local", "-p", str(port)],
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"},
        cwd=mlflow_store,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2):
                    break
            except OSError:
                assert server.poll() is None, "mlflow models serve exited"
                assert time.monotonic() < deadline, "mlflow models serve did not start in 120 s"
                time.sleep(0.5)
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/invocations",
            data=json.dumps({"inputs": ["ox", "an ox"]}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.load(response)
        assert answer == {"predictions": [["o", "x"], ["a", "n", " ", "o", "x"]]}
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def _environment_without_segrl(folder: Path) -> Path:
    """This environment's installed packages, segrl left out: links to each entry of its
    site-packages but segrl's own (its metadata, an editable install's hooks)."""
    import sysconfig

    folder.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().replace("__editable__", "").lstrip("_.").startswith("segrl"):
            (folder / entry.name).symlink_to(entry)
    return folder


@pytest.mark.slow
def test_a_logged_model_installs_segrl_from_its_own_wheel(mlflow_store, small_corpus_file):
    """The model's requirements find segrl's wheel inside the model: pip installs them offline into
    a fresh virtualenv that has segrl's dependencies but not segrl, as MLflow's virtualenv serving
    and ``build-docker`` do, and the model loads and predicts there with that segrl."""
    import json
    import os
    import subprocess
    import venv
    import zipfile

    args = ["baseline", "--method", "characters", "--corpus", str(small_corpus_file), *SMALL]
    assert main(args) == 0
    model = Path(mlflow.artifacts.download_artifacts(f"runs:/{_only_run_id()}/model"))
    requirements = (model / "requirements.txt").read_text().splitlines()
    (wheel,) = (model / "artifacts").glob("segrl-*.whl")
    version = wheel.name.split("-")[1]
    assert re.fullmatch(re.escape(segrl.__version__) + r"\+[0-9a-f]{12}", version)
    assert requirements[-2:] == ["--find-links artifacts", f"segrl=={version}"]
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(f"segrl-{version}.dist-info/METADATA").decode()
    assert f"Version: {version}\n" in metadata
    assert {
        "segrl/loading.py",
        "segrl/pyfunc_model.py",
        "segrl/data/bundled/ATTRIBUTION.md",
    } <= names
    assert not [n for n in names if "__pycache__" in n]
    assert "Requires-Dist: torch" in metadata and 'extra == "wordfreq"' in metadata

    env_dir = mlflow_store / "served-env"
    venv.EnvBuilder().create(env_dir)  # its pip, like the rest, is this environment's
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    others = _environment_without_segrl(mlflow_store / "dependencies")
    (Path(site) / "dependencies.pth").write_text(f"import site; site.addsitedir({str(others)!r})\n")
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PIP_")}
    clean["PIP_CONFIG_FILE"] = os.devnull  # nothing but the model's own files and what is here
    install = subprocess.run(  # from another folder, as a model's Docker image installs it
        [python, "-m", "pip", "install", "--no-index", "-r", model / "requirements.txt"],
        cwd=env_dir, env=clean, capture_output=True, text=True,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    assert "Successfully installed segrl" in install.stdout
    script = (
        "import json, mlflow.pyfunc, segrl, sys; "
        "model = mlflow.pyfunc.load_model(sys.argv[1]); "
        "print(json.dumps([segrl.__file__, model.predict(['ox', 'an ox'])]))"
    )
    loaded = subprocess.run(
        [python, "-c", script, str(model)], cwd=env_dir, env=clean, capture_output=True, text=True
    )
    assert loaded.returncode == 0, loaded.stderr
    where, predicted = json.loads(loaded.stdout.splitlines()[-1])
    assert Path(where).is_relative_to(site)  # segrl from the model's wheel, not this checkout
    assert predicted == [["o", "x"], ["a", "n", " ", "o", "x"]]


def test_segment_stops_quietly_when_its_reader_does(mlflow_store, small_corpus_file):
    """``segrl segment ... | head -1``: the reader closes the pipe; segrl stops without a traceback."""
    import subprocess

    args = ["baseline", "--method", "characters", "--corpus", str(small_corpus_file), *SMALL]
    assert main(args) == 0
    words = mlflow_store / "words.txt"
    words.write_text("walking\n" * 20000, encoding="utf-8")
    command = [sys.executable, "-m", "segrl", "segment", "--model", f"runs:/{_only_run_id()}/model"]
    process = subprocess.Popen(
        [*command, str(words)], cwd=mlflow_store, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None
    assert process.stdout.readline() == b"w a l k i n g\n"
    process.stdout.close()  # as head does after its line
    assert process.wait(timeout=120) == 0
    assert b"Traceback" not in process.stderr.read()


def test_models_of_different_segrl_code_get_different_environments(tmp_path):
    """The wheel's version labels its content: the same code gives the same version, one changed
    byte another, and MLflow's own virtualenv naming then gives the two models two environments."""
    from mlflow.utils.environment import _PythonEnv
    from mlflow.utils.virtualenv import _get_virtualenv_name

    from segrl.tracking.models import build_wheel, wheel_requirements

    package = Path(shutil.copytree(Path(segrl.__file__).parent, tmp_path / "code" / "segrl"))
    first = build_wheel(package, Path(tmp_path / "a"))
    again = build_wheel(package, Path(tmp_path / "b"))
    (package / "version.py").write_text((package / "version.py").read_text() + "\n")
    changed = build_wheel(package, Path(tmp_path / "c"))
    assert first.name == again.name != changed.name
    names = set()
    for wheel in (first, again, changed):
        requirements = wheel_requirements(wheel)
        assert requirements[-1] == f"segrl=={wheel.name.split('-')[1]}"
        names.add(_get_virtualenv_name(_PythonEnv(dependencies=requirements), tmp_path))
    assert len(names) == 2


def test_logging_a_model_says_nothing_of_its_own_wheel(mlflow_store, small_corpus_file, caplog):
    """MLflow compares the model's requirements with the installed packages as it logs: segrl's
    labelled wheel is not the installed ``0.1.0``, which is no mismatch while that code runs; any
    other package's mismatch is still said."""
    import logging

    from segrl.tracking.models import _OwnWheelMismatch

    with caplog.at_level(logging.WARNING):
        assert (
            main(["baseline", "--method", "characters", "--corpus", str(small_corpus_file), *SMALL])
            == 0
        )
    assert not [r for r in caplog.records if "mismatches" in r.getMessage()]
    own = "Detected one or more mismatches ...:\n - segrl (current: 0.1.0, required: segrl==0.1.0+ab)\n"
    other = own + " - torch (current: 2.13.0, required: torch==9)\n"
    keeps = _OwnWheelMismatch().filter
    assert not keeps(logging.makeLogRecord({"msg": own}))
    assert keeps(logging.makeLogRecord({"msg": other}))
    assert keeps(logging.makeLogRecord({"msg": "anything else"}))
