"""Morfessor FlatCat as a classic segmenter: trained from Morfessor Baseline as FlatCat's authors
train it, saved as FlatCat's text model, segmenting as FlatCat's own ``flatcat-segment`` and
Python API segment the saved files; FlatCat's tarball loads, its pickles are refused unread."""

from __future__ import annotations

import json
import os
import pickle
import shlex
import subprocess
import sys
from pathlib import Path

import flatcat
import pytest

from segrl import load_segmenter
from segrl.baselines import FlatCatSegmenter, MorfessorSegmenter, Segmenter
from segrl.baselines.flatcat import ANALYSIS_FILE, PARAMS_FILE
from segrl.cli import EXIT_USER_ERROR, main
from segrl.config import BaselineConfig
from segrl.errors import ModelError
from segrl.experiments.baseline import segmenter_name

from .conftest import command_segments, write_small_corpus

BIN = Path(sys.executable).parent
WORDS = ["walked", "kicker", "opens", "callers", "helped", "jumping", "talks", "often", "home"]
"""Words of the small corpus's training text."""
UNSEEN = ["talkative", "reworked", "unhelpful", "three", "openness", "playful", "kickers"]


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory) -> tuple[FlatCatSegmenter, Path]:
    """FlatCat trained on the small corpus, and the folder it is saved in."""
    segmenter = FlatCatSegmenter(cache_dir=str(tmp_path_factory.mktemp("cache"))).train(corpus)
    return segmenter, segmenter.save(tmp_path_factory.mktemp("saved") / "flatcat")


@pytest.fixture(scope="module")
def flatcat_files(tmp_path_factory) -> Path:
    """What FlatCat's commands wrote, as its authors train it: ``morfessor`` on the small text (as
    written: cased), then ``flatcat-train`` on its segmentation, saving a tarball and a pickle."""
    folder = tmp_path_factory.mktemp("flatcat")
    text = write_small_corpus(folder / "small.txt")
    run = {"check": True, "capture_output": True, "cwd": folder}
    subprocess.run([BIN / "morfessor", "-t", text, "-S", "baseline.txt"], **run)
    train = ["-p", "10", "-s", "model.tar.gz", "--save-binary-model", "model.pickled"]
    subprocess.run([BIN / "flatcat-train", "baseline.txt", *train], **run)
    return folder


def flatcat_segment(words: list[str], *model: str | Path) -> list[list[str]]:
    """``words`` as the ``flatcat-segment`` command segments them with ``model`` (its arguments)."""
    return command_segments([BIN / "flatcat-segment", *model, "-"], words)


def test_flatcat_finds_the_suffixes(trained):
    segmenter, _folder = trained
    assert segmenter.segment_words(["walked", "kicker", "callers"]) == [
        ["walk", "ed"],
        ["kick", "er"],
        ["call", "er", "s"],
    ]
    analysis = dict(
        ("".join(m.morph for m in word.analysis), [str(m) for m in word.analysis])
        for word in segmenter.model.segmentations
    )
    assert analysis["walked"] == ["walk/STM", "ed/SUF"]  # FlatCat's categories


def test_words_segment_as_flatcat_segment_segments_the_saved_files(trained):
    segmenter, folder = trained
    words = WORDS + UNSEEN
    expected = flatcat_segment(
        words, folder / ANALYSIS_FILE, "--load-parameters", folder / PARAMS_FILE
    )
    assert segmenter.segment_words(words) == expected
    assert load_segmenter(folder).segment_words(words) == expected
    # FlatCat keeps an unseen word whole where no morphs of its lexicon spell it; Morfessor's
    # command splits it into single letters
    assert ["three"] in expected and ["walk", "ed"] in expected


def test_counts_not_dampened_to_ones_segment_as_flatcat_segment_does(corpus, tmp_path):
    # with counts other than one, FlatCat's token perplexity differs from its type perplexity,
    # which FlatCat would read back from a parameter file saying "type-perplexity: False"
    segmenter = FlatCatSegmenter(dampening="none", cache_dir="").train(corpus)
    folder = segmenter.save(tmp_path / "flatcat")
    assert "type-perplexity" not in (folder / PARAMS_FILE).read_text(encoding="utf-8")
    counted = sorted({word.count for word in segmenter.model.segmentations})
    assert len(counted) > 1
    words = WORDS + UNSEEN
    expected = flatcat_segment(
        words, folder / ANALYSIS_FILE, "--load-parameters", folder / PARAMS_FILE
    )
    assert segmenter.segment_words(words) == expected


def test_flatcats_python_api_segments_the_saved_files_as_segrl_does(trained):
    segmenter, folder = trained
    reader = flatcat.FlatcatIO(encoding="utf-8")
    model = flatcat.FlatcatModel()
    model.set_params(reader.read_parameter_file(str(folder / PARAMS_FILE)))
    model.add_corpus_data(reader.read_segmentation_file(str(folder / ANALYSIS_FILE)))
    model.initialize_hmm()
    words = WORDS + UNSEEN
    assert segmenter.segment_words(words) == [list(model.viterbi_segment(w)[0]) for w in words]
    assert not model._morph_usage.type_perplexity  # as trained: False is left out of the file


def test_a_saved_folder_reloads_to_the_same_segmentations(trained, corpus):
    segmenter, folder = trained
    loaded = Segmenter.load(folder)
    assert type(loaded) is FlatCatSegmenter
    words = WORDS + UNSEEN
    assert loaded.segment_words(words) == segmenter.segment_words(words)
    meta = json.loads((folder / "segmenter.json").read_text(encoding="utf-8"))
    assert meta["options"]["perplexity_threshold"] == 10
    assert meta["options"]["dampening"] == "ones"
    # given text as it comes: lower-cased (as trained), segments cut from the word as written
    assert load_segmenter(folder).segment_words(["Walked"]) == [["Walk", "ed"]]


def test_the_cache_gives_the_same_model_and_reuses_the_baseline(trained, corpus, tmp_path):
    segmenter, _folder = trained
    cache = Path(segmenter.cache_dir)
    assert sorted(p.name.split("-")[0] for p in cache.iterdir()) == ["flatcat", "morfessor"]
    again = FlatCatSegmenter(cache_dir=str(cache)).train(corpus)
    assert again.from_cache
    assert again.segment_words(WORDS + UNSEEN) == segmenter.segment_words(WORDS + UNSEEN)
    # the Baseline FlatCat started from is the one `segrl baseline --method morfessor` caches
    assert MorfessorSegmenter(cache_dir=str(cache)).train(corpus).from_cache
    damaged = next(cache.glob("flatcat-*"))
    (damaged / ANALYSIS_FILE).write_text("1 walk/XYZ\n", encoding="utf-8")
    repaired = FlatCatSegmenter(cache_dir=str(cache)).train(corpus)
    assert not repaired.from_cache and repaired.segment("walked") == ["walk", "ed"]


def test_the_perplexity_threshold_reaches_flatcat(corpus):
    strict = FlatCatSegmenter(perplexity_threshold=100, cache_dir="").train(corpus)
    assert strict.model.get_params()["perplexity-threshold"] == 100
    assert strict.model.get_params()["corpusweight"] == 1
    weighted = FlatCatSegmenter(corpusweight=0.5, max_epochs=1, cache_dir="").train(corpus)
    assert weighted.model.get_params()["corpusweight"] == 0.5
    for bad in ({"perplexity_threshold": 0}, {"corpusweight": -1}, {"max_epochs": 0}):
        with pytest.raises(ValueError):
            FlatCatSegmenter(**bad)
    name = segmenter_name(
        BaselineConfig(
            method="flatcat", flatcat_perplexity_threshold=100, morfessor_corpus_weight=0.5
        )
    )
    assert name == "flatcat-p100-bcw0.5"
    assert segmenter_name(BaselineConfig(method="flatcat")) == "flatcat"


def test_a_flatcat_tarball_segments_as_flatcat_segment_does(flatcat_files):
    tarball = flatcat_files / "model.tar.gz"
    # trained by the commands on the text as written: the words go to it as they are
    words = [*WORDS, *UNSEEN, "The", "Walked", "naïve"]
    expected = flatcat_segment(words, tarball)
    assert load_segmenter(tarball).segment_words(words) == expected
    assert ["walk", "ed"] in expected


def test_a_flatcat_pickle_is_refused_unread_with_the_command_that_converts_it(
    flatcat_files, tmp_path, capsys
):
    pickled = flatcat_files / "model.pickled"
    assert main(["segment", "--model", str(pickled), os.devnull]) == EXIT_USER_ERROR
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(pickled) in err and "FlatCat binary model" in err
    assert "flatcat MODEL -m none -s model.tar.gz" in err
    # the command it names converts the pickle into a tarball segrl reads
    subprocess.run(
        [BIN / "flatcat", pickled, "-m", "none", "-s", tmp_path / "model.tar.gz"],
        check=True,
        capture_output=True,
    )
    converted = load_segmenter(tmp_path / "model.tar.gz").segment_words(WORDS)
    assert converted == load_segmenter(flatcat_files / "model.tar.gz").segment_words(WORDS)

    marker = tmp_path / "ran"

    class RunsACommand:
        def __reduce__(self):
            return (os.system, (f"touch {shlex.quote(str(marker))}",))

    hostile = tmp_path / "hostile.pickled"
    payload = pickle.dumps([flatcat.FlatcatModel, RunsACommand()], pickle.HIGHEST_PROTOCOL)
    hostile.write_bytes(payload)
    with pytest.raises(ModelError, match="FlatCat binary model"):
        load_segmenter(hostile)
    assert not marker.exists()


def test_an_analysis_file_without_its_parameters_is_one_line(trained, capsys):
    _segmenter, folder = trained
    analysis = folder / ANALYSIS_FILE
    assert main(["segment", "--model", str(analysis), os.devnull]) == EXIT_USER_ERROR
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(analysis) in err and "--load-parameters" in err


def test_baseline_flatcat_logs_its_metrics_and_options(mlflow_store, capsys):
    import mlflow

    text = write_small_corpus(mlflow_store / "small.txt")
    out = mlflow_store / "flatcat"
    args = ["--corpus", str(text), "--gold-max-words", "50", "--out", str(out)]
    assert main(["baseline", "--method", "flatcat", "--perplexity-threshold", "20", *args]) == 0
    printed = capsys.readouterr().out
    assert "[flatcat] boundary P/R/F1" in printed
    run = mlflow.search_runs(experiment_names=["segrl"], output_format="list")[0]
    assert run.info.run_name == "flatcat-p20"
    assert 0 <= run.data.metrics["boundary_f1"] <= 1 and run.data.metrics["train_seconds"] > 0
    params = run.data.params
    assert params["method"] == "flatcat" and params["flatcat_perplexity_threshold"] == "20.0"
    assert params["flatcat_corpus_weight"] == "1.0" and params["flatcat_max_epochs"] == "4"
    assert params["morfessor_dampening"] == "ones"  # the Baseline it started from
    # characters too rare to keep reach FlatCat as the corpus's placeholder, which the command
    # does not know to do: the words compared have none
    alphabet = json.loads((out / "segmenter.json").read_text(encoding="utf-8"))["alphabet"]
    words = [w for w in WORDS + UNSEEN if set(w) <= set(alphabet)]
    assert len(words) > 10
    expected = flatcat_segment(words, out / ANALYSIS_FILE, "--load-parameters", out / PARAMS_FILE)
    assert load_segmenter(out).segment_words(words) == expected
    assert main(["baseline", "--method", "flatcat", *args, "--perplexity-threshold", "0"]) == 2
    assert "--perplexity-threshold must be above 0, got 0" in capsys.readouterr().err
