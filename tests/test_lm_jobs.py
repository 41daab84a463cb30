"""``segrl lm train`` (slm as a segmenter) and ``segrl lm levels`` (the representation-level study)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from mlflow.tracking import MlflowClient

from segrl.cli import EXIT_USER_ERROR, main
from segrl.config import DataConfig, GoldConfig, TrackingConfig, build_config
from segrl.data import load_corpus, load_gold
from segrl.errors import ConfigError
from segrl.experiments.lm_levels import LevelsConfig, held_out_sentences, levels_lm, run_levels
from segrl.experiments.lm_train import LMTrainConfig, train_lm_segmenter
from segrl.jobs import RunDir, TrainingInterrupted
from segrl.lm import LMConfig, load_lm
from segrl.lm.decoding import LMSegmenter
from segrl.lm.training import training_texts
from segrl.metrics import evaluate_word_segmenter
from segrl.tracking.queries import segmenter_runs
from tests.conftest import shared_path

TINY = {"char_dim": 8, "embedding_dim": 16, "hidden_dim": 16, "speller_dim": 16}


pytestmark = pytest.mark.usefixtures("one_thread")


def test_word_type_texts_hold_out_unseen_types(corpus):
    train, valid, test = training_texts(corpus, "word-types")
    assert len(train) == len(set(train)) and " " not in "".join(train)
    assert valid and (not set(valid) & set(train) or set(valid) <= set(train))
    assert training_texts(corpus, "sentences")[0] == corpus.train
    with pytest.raises(ConfigError, match="texts must be one of: word-types, sentences"):
        build_config(LMTrainConfig, overrides={"texts": "paragraphs"})


def test_lm_train_logs_an_slm_segmenter_and_resumes(corpus, mlflow_store, capsys):
    gold = load_gold(max_words=200)
    config = LMTrainConfig(
        lm=LMConfig(context="none", **TINY),
        epochs=2,
        batch_size=16,
        lr=5e-3,
        out=str(mlflow_store / "out"),
        data=DataConfig(corpus="small", min_char_count=1),
        gold=GoldConfig(max_words=200),
        tracking=TrackingConfig(experiment="lm"),
    )
    metrics = train_lm_segmenter(config, corpus, gold).metrics
    assert 0 <= metrics["boundary_f1"] <= 1 and 0 < metrics["units_per_char"] <= 1
    assert 0 < metrics["bits_per_char"] < 8
    runs = segmenter_runs("lm")
    assert [(r["segmenter"], r["kind"]) for r in runs] == [("slm", "lm")]
    assert runs[0]["bits_per_char"] == pytest.approx(metrics["bits_per_char"])
    from segrl import load_segmenter

    segmenter = load_segmenter(f"runs:/{runs[0]['run_id']}")
    assert segmenter.kind == "slm"
    assert segmenter.segment_words(["walked"]) == load_segmenter(
        mlflow_store / "out"
    ).segment_words(["walked"])
    model = load_lm(mlflow_store / "out" / "best")
    # the posterior decoding is scored beside Viterbi, under its prefix, in MLflow too (to 4 decimals)
    posterior = evaluate_word_segmenter(
        LMSegmenter(model, decoding="posterior").segment_words, gold, corpus.test
    )
    assert metrics["posterior/boundary_f1"] == pytest.approx(posterior["boundary_f1"])
    assert metrics["posterior/units_per_char"] == pytest.approx(posterior["units_per_char"])
    logged = MlflowClient().get_run(runs[0]["run_id"]).data.metrics
    assert logged["posterior/boundary_f1"] == pytest.approx(posterior["boundary_f1"], abs=5e-5)
    assert not any(k.startswith("posterior/boundary_f1_by_length") for k in metrics)
    # the saved model keeps the length penalty it trained with (unset: 0 on running text)
    assert model.config == dataclasses.replace(config.lm, length_penalty=0.0)
    out = capsys.readouterr().out
    valid = [
        float(line.split("valid ")[1].split()[0]) for line in out.splitlines() if "valid" in line
    ]
    assert len(valid) == 2 and valid[1] < valid[0]
    # more epochs: the run resumes after the two it has done
    config.epochs = 3
    train_lm_segmenter(config, corpus, gold)
    out = capsys.readouterr().out
    assert "after epoch 2" in out and "epoch 3:" in out and "epoch 1:" not in out
    config.lr = 1e-2
    with pytest.raises(ConfigError, match="different config"):
        train_lm_segmenter(config, corpus, gold)


def test_lm_train_has_a_step_budget_and_resumes_mid_epoch_exactly(corpus, mlflow_store):
    """Stopped in the middle of its second epoch and run again, ``lm train`` ends with the metrics
    and best weights of a run never interrupted, in one MLflow run."""
    gold = load_gold(max_words=200)

    per_epoch = math.ceil(len(training_texts(corpus, "word-types")[0]) / 16)
    budget, stop = 2 * per_epoch + 2, per_epoch + 1  # the budget cuts the third epoch

    def config(out: str) -> LMTrainConfig:
        return LMTrainConfig(
            lm=LMConfig(context="none", **TINY),
            epochs=3,
            steps=budget,
            batch_size=16,
            lr=5e-3,
            out=str(mlflow_store / out),
            data=DataConfig(corpus="small", min_char_count=1),
            gold=GoldConfig(max_words=200),
        )

    assert per_epoch >= 2  # the run stops in the middle of its second epoch
    straight = train_lm_segmenter(config("a"), corpus, gold)
    assert RunDir(mlflow_store / "a").info["step"] == budget  # steps is the budget
    with pytest.raises(TrainingInterrupted, match=f"stopped at step {stop}"):
        train_lm_segmenter(config("b"), corpus, gold, on_step=lambda step, stats: step == stop)
    resumed = train_lm_segmenter(config("b"), corpus, gold)
    without_time = lambda m: {k: v for k, v in m.items() if k != "train_seconds"}  # noqa: E731
    assert without_time(resumed.metrics) == without_time(straight.metrics)
    assert resumed.resumed_from == stop and straight.resumed_from is None
    a, b = load_lm(mlflow_store / "a" / "best"), load_lm(mlflow_store / "b" / "best")
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y), name
    run = RunDir(mlflow_store / "b")
    assert run.finished and run.info["step"] == budget
    history = MlflowClient().get_metric_history(run.info["mlflow_run_id"], "valid_bits_per_char")
    assert [m.step for m in history] == [per_epoch, 2 * per_epoch, budget]  # after each epoch


def test_lm_train_refuses_segment_lstm(corpus, mlflow_store):
    config = LMTrainConfig(lm=LMConfig(model="segment-lstm"))
    with pytest.raises(ConfigError, match="marginal likelihood"):
        train_lm_segmenter(config, corpus, [])


def test_levels_compare_bits_per_character_on_the_same_characters(corpus, mlflow_store):
    config = LevelsConfig(
        lm=dataclasses.replace(levels_lm(), **TINY),
        levels=["characters", "morfessor", "words"],
        epochs=1,
        batch_size=16,
        lr=5e-3,
        tracking=TrackingConfig(experiment="levels"),
    )
    results = run_levels(config, corpus)
    by_level = {r.level: r for r in results}
    assert list(by_level) == ["characters", "morfessor", "words"]
    assert by_level["characters"].units_per_char == 1.0
    assert by_level["words"].units_per_char < by_level["morfessor"].units_per_char < 1.0
    assert by_level["characters"].lexicon_coverage == 1.0
    for result in results:
        assert 0 < result.test_bits_per_char < 2 * math.log2(len(corpus.vocab))
        assert len(result.curve) == 1 and result.valid_bits_per_char == result.curve[0]
    import mlflow

    run = mlflow.search_runs(experiment_names=["levels"], output_format="list")[0]
    assert run.data.metrics["words.test_bits_per_char"] == pytest.approx(
        by_level["words"].test_bits_per_char
    )
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id)}
    assert {"levels.json", "levels.txt", "levels.png", "config.toml"} <= artifacts
    with pytest.raises(ConfigError, match="levels must be one of: .*; got .syllables."):
        run_levels(LevelsConfig(levels=["syllables"]), corpus)


def test_levels_config_keeps_the_study_model_when_flags_change_sizes():
    config = build_config(LevelsConfig, overrides={"lm.hidden_dim": 32})
    assert config.lm.model == "segment-lstm" and config.lm.lexicon_size == 10000
    assert config.lm.hidden_dim == 32


def test_cli_reports_bad_lm_options(mlflow_store, small_corpus_file, capsys):
    code = main(["lm", "levels", "--corpus", str(small_corpus_file), "--levels", "bytes"])
    assert code == EXIT_USER_ERROR
    assert (
        "command line: levels must be one of: characters, bpe, yttm-bpe, morfessor, words; got 'bytes'"
        in capsys.readouterr().err
    )
    code = main(["lm", "train", "--corpus", str(small_corpus_file), "--context", "window"])
    assert code == EXIT_USER_ERROR
    assert (
        "command line: lm.context must be one of: lstm, words, segment, none; got 'window'"
        in capsys.readouterr().err
    )


@pytest.mark.slow
def test_levels_on_ptb_with_its_own_test_file(mlflow_store):
    train = shared_path("ptb", "ptb.train.txt")
    test = shared_path("ptb", "ptb.test.txt")
    config = LevelsConfig(
        lm=dataclasses.replace(levels_lm(), **TINY),
        levels=["characters", "words"],
        epochs=1,
        max_train_sentences=300,
        max_eval_sentences=100,
        test_corpus=str(test),
        data=DataConfig(corpus=str(train), max_len=400, max_sentences=600),
        tracking=TrackingConfig(experiment="ptb"),
    )
    corpus = load_corpus(config.data)
    held_out = held_out_sentences(str(test), corpus)
    assert held_out[0].startswith("no it was n't black monday")
    assert all(c in corpus.vocab or c == " " for s in held_out for c in s)
    results = run_levels(config, corpus)
    assert [r.level for r in results] == ["characters", "words"]
    assert all(0 < r.test_bits_per_char < 8 for r in results)


def test_lm_train_logs_the_gold_curve_of_every_epoch(corpus, mlflow_store):
    """After every epoch ``lm train`` scores a fixed sample of the gold words by Viterbi and logs
    it as ``eval/...`` at the epoch's step: the segmentation's curve to the stopping point; the
    best epoch's point is what its saved model scores on that sample."""
    gold = load_gold(max_words=200)
    config = LMTrainConfig(
        lm=LMConfig(context="none", **TINY),
        epochs=2,
        batch_size=16,
        lr=5e-3,
        eval_gold_words=120,
        out=str(mlflow_store / "out"),
        data=DataConfig(corpus="small", min_char_count=1),
        gold=GoldConfig(max_words=200),
    )
    train_lm_segmenter(config, corpus, gold)
    run = RunDir(mlflow_store / "out")
    client = MlflowClient()
    per_epoch = math.ceil(len(training_texts(corpus, "word-types")[0]) / 16)
    history = client.get_metric_history(run.info["mlflow_run_id"], "eval/boundary_f1")
    assert [m.step for m in history] == [per_epoch, 2 * per_epoch]
    valid = client.get_metric_history(run.info["mlflow_run_id"], "valid_bits_per_char")
    best = min(range(2), key=lambda i: valid[i].value)
    saved = LMSegmenter(load_lm(mlflow_store / "out" / "best")).segment_words
    expected = evaluate_word_segmenter(saved, gold[:120])
    assert history[best].value == pytest.approx(expected["boundary_f1"])
    density = client.get_metric_history(run.info["mlflow_run_id"], "eval/gold_units_per_char")
    assert density[best].value == pytest.approx(expected["gold_units_per_char"])
    with pytest.raises(ConfigError, match="eval_gold_words must be at least 0"):
        train_lm_segmenter(dataclasses.replace(config, eval_gold_words=-1), corpus, gold)


def test_lm_train_without_a_gold_curve_logs_no_eval_metrics(corpus, mlflow_store):
    gold = load_gold(max_words=50)
    config = LMTrainConfig(
        lm=LMConfig(context="none", **TINY),
        epochs=1,
        steps=3,
        batch_size=16,
        eval_gold_words=0,
        out=str(mlflow_store / "out"),
        data=DataConfig(corpus="small", min_char_count=1),
        gold=GoldConfig(max_words=50),
    )
    train_lm_segmenter(config, corpus, gold)
    logged = MlflowClient().get_run(RunDir(mlflow_store / "out").info["mlflow_run_id"])
    assert "valid_bits_per_char" in logged.data.metrics
    assert not any(name.startswith("eval/") for name in logged.data.metrics)
