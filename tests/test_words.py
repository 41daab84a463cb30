"""Word discovery: segmented corpora (spaces are the gold), word token / boundary / lexicon metrics,
the jobs that score unspaced utterances, the words suite."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from segrl.agents.config import TrainConfig
from segrl.agents.task import check_word_discovery, hidden_spaces_lm_options
from segrl.benchmark import load_suite
from segrl.benchmark.report import format_markdown, summarise
from segrl.config import BaselineConfig, DataConfig, GoldConfig, validate_config
from segrl.data import load_corpus, without_spaces
from segrl.errors import ConfigError, DataError
from segrl.evaluators import EvaluatorConfig
from segrl.evaluators.lm import evaluator_lm_options
from segrl.lm.config import (
    WORD_DISCOVERY_CONTEXT,
    WORD_DISCOVERY_EVALUATOR_CONTEXT,
    WORD_DISCOVERY_LENGTH_PENALTY,
    WORD_MAX_SEGMENT_LENGTH,
    LMConfig,
    resolve_lm_config,
    word_discovery_lm,
)
from segrl.lm.models import load_lm
from segrl.metrics import (
    lexicon_prf,
    metrics_summary,
    word_discovery_metrics,
    word_token_prf,
)
from tests.conftest import shared_path

PREDICTED = [["yuwant", "tu", "si", "D6b", "Uk"], ["yu", "si"]]
UTTERANCES = ["yu want tu si D6 bUk", "yu si"]


def test_word_token_f1_counts_words_whose_both_edges_are_right():
    # gold spans (0,2) (2,6) (6,8) (8,10) (10,12) (12,15) and (0,2) (2,4); predicted (0,6) (6,8)
    # (8,10) (10,13) (13,15) and (0,2) (2,4): 4 of 7 predicted, 4 of 8 gold
    prf = word_token_prf(PREDICTED, [u.split() for u in UTTERANCES])
    assert (prf.hits, prf.predicted, prf.gold) == (4, 7, 8)
    assert prf.f1 == pytest.approx(8 / 15)


def test_lexicon_f1_counts_each_type_once():
    # predicted types yuwant tu si D6b Uk yu; gold yu want tu si D6 bUk: tu, si, yu shared
    prf = lexicon_prf(PREDICTED, [u.split() for u in UTTERANCES])
    assert (prf.hits, prf.predicted, prf.gold) == (3, 6, 6)
    assert prf.f1 == pytest.approx(0.5)


def test_word_discovery_metrics_by_hand():
    metrics = word_discovery_metrics(PREDICTED, UTTERANCES)
    assert metrics["word_precision"] == pytest.approx(4 / 7)
    assert metrics["word_recall"] == pytest.approx(0.5)
    # boundaries without the utterance edges: gold {2,6,8,10,12} and {2}; predicted {6,8,10,13}, {2}
    assert metrics["word_boundary_precision"] == pytest.approx(4 / 5)
    assert metrics["word_boundary_recall"] == pytest.approx(4 / 6)
    assert metrics["word_boundary_f1"] == pytest.approx(8 / 11)
    assert metrics["lexicon_f1"] == pytest.approx(0.5)
    assert metrics["gold_words_per_char"] == pytest.approx(8 / 19)
    # the segmenter's units on the gold utterances, which are the held-out text too: 7 of 19
    assert metrics["gold_units_per_char"] == metrics["units_per_char"] == pytest.approx(7 / 19)
    assert "word P/R/F1 0.571 / 0.500 / 0.533" in metrics_summary(metrics)


def test_trivial_segmentations_score_as_the_field_reports_them():
    chars = [list(u.replace(" ", "")) for u in UTTERANCES]
    every = word_discovery_metrics(chars, UTTERANCES)
    assert every["word_boundary_recall"] == 1.0 and every["word_f1"] == 0.0
    whole = word_discovery_metrics([[u.replace(" ", "")] for u in UTTERANCES], UTTERANCES)
    assert whole["word_boundary_f1"] == 0.0 and whole["word_f1"] == 0.0


def test_a_prediction_of_other_text_is_refused():
    with pytest.raises(ValueError, match="differ in text"):
        word_discovery_metrics([["yu", "wont"]], ["yu want"])


def write_splits(folder: Path, names=("tr", "va", "te")) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["yu want tu si D6 bUk", "lUk D*z 6 b7", "&nd 6 dOgi", "yu si D6 dOgi"] * 10
    for name, part in zip(names, (lines, lines[:8], lines[8:16]), strict=True):
        (folder / f"{name}.txt").write_text("\n".join(part) + "\n", encoding="utf-8")
    return folder


def test_a_folder_of_splits_is_read_as_written(tmp_path):
    folder = write_splits(tmp_path / "br")
    corpus = load_corpus(DataConfig(corpus=f"segmented:{folder}", min_char_count=1))
    assert corpus.gold_from_spaces and corpus.settings["format"] == "segmented"
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (40, 8, 8)
    assert corpus.train[0] == "yu want tu si D6 bUk"  # not lower-cased: D and d differ
    unspaced = without_spaces(corpus)
    assert unspaced.test[0] == "yuwanttusiD6bUk" and not unspaced.gold_from_spaces
    assert unspaced.word_counts("train")["yuwanttusiD6bUk"] == 10  # utterances, not gold words


def test_a_split_pattern_and_a_single_file(tmp_path):
    write_splits(tmp_path / "ptb", names=("p.train", "p.valid", "p.test"))
    corpus = load_corpus(
        DataConfig(corpus=f"segmented:{tmp_path}/ptb/p.{{split}}.txt", min_char_count=1)
    )
    assert len(corpus.valid) == 8
    one = load_corpus(DataConfig(corpus=f"segmented:{tmp_path}/ptb/p.train.txt", min_char_count=1))
    assert (len(one.train), len(one.valid), len(one.test)) == (32, 4, 4)  # the seeded split


def test_missing_splits_and_empty_paths_are_clear_errors(tmp_path):
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "tr.txt").write_text("a b\n", encoding="utf-8")
    with pytest.raises(DataError, match="no valid split; looked for"):
        load_corpus(DataConfig(corpus=f"segmented:{tmp_path}/only"))
    with pytest.raises(DataError, match="give the file, folder"):
        load_corpus(DataConfig(corpus="segmented:"))
    with pytest.raises(DataError, match="no such file or folder"):
        load_corpus(DataConfig(corpus=f"segmented:{tmp_path}/absent.txt"))
    with pytest.raises(DataError, match="does not apply"):
        load_corpus(DataConfig(corpus=f"segmented:{tmp_path}/only", corpus_format="words"))
    (tmp_path / "blank.txt").write_text("\n  \n", encoding="utf-8")
    with pytest.raises(DataError, match=r"blank\.txt: no utterances left after normalisation"):
        load_corpus(DataConfig(corpus=f"segmented:{tmp_path}/blank.txt"))
    corpus = load_corpus(DataConfig(max_sentences=20))
    with pytest.raises(DataError, match="not a segmented corpus"):
        without_spaces(corpus)
    # a split file that is empty is named as empty, one whose lines are all too long as too long
    write_splits(tmp_path / "splits")
    (tmp_path / "splits" / "va.txt").write_text("\n", encoding="utf-8")
    with pytest.raises(
        DataError, match=r"va\.txt: the valid split has no utterances \(the file is"
    ):
        load_corpus(DataConfig(corpus=f"segmented:{tmp_path}/splits", min_char_count=1))
    (tmp_path / "splits" / "va.txt").write_text("a " * 80 + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"no utterances of at most max_len=128 characters"):
        load_corpus(DataConfig(corpus=f"segmented:{tmp_path}/splits", min_char_count=1))


def bundled_utterances(max_sentences: int = 300) -> DataConfig:
    """The project's own small segmented corpus: short sentences of the bundled WikiText slice."""
    return DataConfig(corpus="segmented:bundled", max_len=48, max_sentences=max_sentences)


def test_baselines_on_unspaced_text_are_scored_as_word_discovery(mlflow_store):
    from segrl.experiments.baseline import run_baseline

    data = bundled_utterances()
    chars = run_baseline(BaselineConfig(method="characters", data=data))
    assert chars["word_boundary_recall"] == 1.0 and chars["units_per_char"] == 1.0
    whole = run_baseline(BaselineConfig(method="words", data=data))
    assert whole["word_boundary_f1"] == 0.0  # one word per utterance
    assert math.isclose(whole["units_per_char"], whole["gold_utterances"] / _chars(data))
    with pytest.raises(ConfigError, match="its own gold"):
        run_baseline(BaselineConfig(method="characters", data=data, gold=GoldConfig(path="g")))


def _chars(data: DataConfig) -> int:
    return sum(len(s.replace(" ", "")) for s in load_corpus(data).test)


def test_morfessor_on_unspaced_text_never_sees_a_space(mlflow_store):
    from segrl.experiments.baseline import make_segmenter

    corpus = load_corpus(bundled_utterances())
    segmenter = make_segmenter(BaselineConfig(method="morfessor")).train(without_spaces(corpus))
    text = corpus.test[0].replace(" ", "")
    segments = segmenter.segment(text)
    assert "".join(segments) == text and len(segments) > 1


@pytest.mark.slow
def test_lm_train_logs_viterbi_and_posterior_word_discovery(mlflow_store, one_thread):
    from segrl.experiments.lm_train import LMTrainConfig, train_lm_segmenter

    config = LMTrainConfig(
        data=bundled_utterances(120), steps=2, batch_size=32, out=str(mlflow_store / "run")
    )
    config.lm.hidden_dim = config.lm.speller_dim = 32
    metrics = train_lm_segmenter(config).metrics
    assert 0 <= metrics["word_f1"] <= 1 and 0 <= metrics["posterior/word_f1"] <= 1
    assert "boundary_f1" not in metrics  # no gold words: the spaces are the gold
    # the saved model carries the settings for words: a word's length limit, no context, a priced
    # and pruned lexicon of the utterances' substrings spelled by a bigram, the words' length prior
    best = load_lm(mlflow_store / "run" / "best")
    saved = best.config
    assert saved.max_segment_length == WORD_MAX_SEGMENT_LENGTH
    assert saved.context == WORD_DISCOVERY_CONTEXT == "none"
    assert saved.length_penalty == WORD_DISCOVERY_LENGTH_PENALTY
    assert (saved.speller, saved.lexicon_prune, saved.lexicon_init) == ("bigram", True, "counts")
    assert saved.lexicon_cost > 0 and saved.speller_entries > 0
    # its entries are substrings of the unspaced utterances: some span a gold word boundary
    utterances = [u.replace(" ", "") for u in load_corpus(bundled_utterances(120)).train]
    entries = best.lexicon.entries
    assert all(len(e) <= WORD_MAX_SEGMENT_LENGTH for e in entries)
    assert all(any(e in u for u in utterances) for e in entries[:50])


@pytest.mark.slow
def test_word_discovery_stopped_after_a_pruning_resumes_exactly(mlflow_store, one_thread):
    """``lm train``'s word-discovery default (a lexicon pruned after every epoch) stopped in its
    second epoch, after the first pruning, and run again ends as a run never stopped: the same
    metrics, the same kept entries and the same best weights."""
    import torch

    from segrl.experiments.lm_train import LMTrainConfig, train_lm_segmenter
    from segrl.jobs import TrainingInterrupted
    from segrl.lm.lexicon import LexiconUsage

    data = bundled_utterances(120)
    per_epoch = math.ceil(len(load_corpus(data).train) / 32)
    budget, stop = 2 * per_epoch + 1, per_epoch + 1

    def config(out: str) -> LMTrainConfig:
        made = LMTrainConfig(data=data, steps=budget, batch_size=32, out=str(mlflow_store / out))
        made.lm.hidden_dim = made.lm.speller_dim = 16
        return made

    straight = train_lm_segmenter(config("a"))
    with pytest.raises(TrainingInterrupted, match=f"stopped at step {stop}"):
        train_lm_segmenter(config("b"), on_step=lambda step, stats: step == stop)
    resumed = train_lm_segmenter(config("b"))
    assert resumed.resumed_from == stop
    without_time = lambda m: {k: v for k, v in m.items() if k != "train_seconds"}  # noqa: E731
    assert without_time(resumed.metrics) == without_time(straight.metrics)
    a, b = load_lm(mlflow_store / "a" / "best"), load_lm(mlflow_store / "b" / "best")
    assert a.lexicon is not None and a.lexicon.entries == b.lexicon.entries
    kept = LexiconUsage(a.lexicon).kept()
    assert 0 < int(kept.sum()) < len(a.lexicon)  # pruned before the stop
    assert torch.equal(kept, LexiconUsage(b.lexicon).kept())
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y), name


@pytest.mark.slow
def test_a_length_penalty_given_for_word_discovery_is_kept(mlflow_store, one_thread):
    from segrl.experiments.lm_train import LMTrainConfig, train_lm_segmenter

    config = LMTrainConfig(
        data=bundled_utterances(120), steps=1, batch_size=32, out=str(mlflow_store / "run")
    )
    config.lm.hidden_dim = config.lm.speller_dim = 32
    config.lm.length_penalty = 0.0
    train_lm_segmenter(config)
    assert load_lm(mlflow_store / "run" / "best").config.length_penalty == 0.0


def test_the_segment_context_is_refused_on_text_with_spaces_before_any_training(
    mlflow_store, capsys
):
    from segrl.cli import EXIT_USER_ERROR, main

    assert resolve_lm_config(LMConfig(context="segment"), "unspaced").context == "segment"
    for text in ("words", "text"):
        with pytest.raises(ConfigError, match=f"without spaces only.*on {text} give"):
            resolve_lm_config(LMConfig(context="segment"), text)
    out = str(mlflow_store / "refused")
    assert main(["lm", "train", "--context", "segment", "--steps", "1", "--out", out]) == (
        EXIT_USER_ERROR
    )
    assert "context = 'segment' (a bigram over segments) reads text" in capsys.readouterr().err
    assert not (mlflow_store / "refused").exists()


@pytest.mark.slow
def test_lm_train_with_the_segment_context_saves_a_bigram_over_segments(mlflow_store, one_thread):
    """``--context segment``: ``segrl lm train`` trains the bigram over segments on text without
    spaces, logs the option as a value and saves a model that reloads with the same marginal."""
    import torch

    from segrl.experiments.lm_train import LMTrainConfig, train_lm_segmenter

    config = LMTrainConfig(
        data=bundled_utterances(60), steps=2, batch_size=16, out=str(mlflow_store / "run")
    )
    config.lm.hidden_dim = config.lm.speller_dim = 16
    config.lm.context = "segment"
    metrics = train_lm_segmenter(config).metrics
    assert 0 < metrics["units_per_char"] <= 1 and 0 <= metrics["word_f1"] <= 1
    saved = load_lm(mlflow_store / "run" / "best").eval()
    assert saved.config.context == "segment"
    assert saved.config.max_segment_length == WORD_MAX_SEGMENT_LENGTH
    texts = [t.replace(" ", "") for t in load_corpus(bundled_utterances(60)).test[:4]]
    again = load_lm(mlflow_store / "run" / "best").eval()
    with torch.no_grad():
        assert torch.equal(
            saved.log_marginal(saved.encode(texts)), again.log_marginal(again.encode(texts))
        )
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [run.data.params["lm.context"] for run in runs] == ["segment"]


def test_word_discovery_defaults_the_context_and_prices_length_only_without_one():
    from segrl.experiments.lm_train import segmenter_lm

    unset = segmenter_lm()
    assert unset.context is None and unset.length_penalty is None
    words = resolve_lm_config(word_discovery_lm(unset), "text")
    assert (words.context, words.length_penalty) == ("none", WORD_DISCOVERY_LENGTH_PENALTY)
    assert WORD_DISCOVERY_LENGTH_PENALTY == 0.15
    assert words.lexicon_size > 0 and words.speller == "bigram" and words.lexicon_prune
    assert words.max_segment_length == WORD_MAX_SEGMENT_LENGTH
    unset.context = "lstm"  # with the character context: no length prior, no lexicon
    lstm = resolve_lm_config(word_discovery_lm(unset), "text")
    assert (lstm.length_penalty, lstm.lexicon_size, lstm.speller) == (0.0, 0, "lstm")
    assert not lstm.lexicon_prune and lstm.speller_entries == 0.0
    given = word_discovery_lm(LMConfig(context="lstm", length_penalty=0.1, max_segment_length=8))
    assert (given.length_penalty, given.max_segment_length) == (0.1, 8)
    # with spaces an unset context stays what it was: none, a lexicon on a word list
    spaced = resolve_lm_config(segmenter_lm(), "words")
    assert spaced.context == "none" and spaced.lexicon_size > 0


def test_hidden_spaces_get_a_word_length_limit_and_a_segmented_corpus_needs_them():
    lm = EvaluatorConfig(name="lm").lm
    assert lm.lm.max_segment_length is None and lm.lm.context is None
    hidden = hidden_spaces_lm_options(lm).lm
    assert hidden.max_segment_length == WORD_MAX_SEGMENT_LENGTH == 12
    assert hidden.context == WORD_DISCOVERY_EVALUATOR_CONTEXT == "lstm"
    assert hidden.length_penalty is None  # the evaluator's own rule resolves it, not lm train's
    assert evaluator_lm_options(lm, "text").context == "none"  # spaces shown: no context
    lm.lm.max_segment_length, lm.lm.context = 8, "none"
    hidden = hidden_spaces_lm_options(lm).lm
    assert (hidden.max_segment_length, hidden.context) == (8, "none")
    config = TrainConfig(evaluator=EvaluatorConfig(name="lm"), data=bundled_utterances())
    config.data.corpus = "segmented:bundled"
    with pytest.raises(ConfigError, match="add --hide-spaces"):
        check_word_discovery(config)
    config.env.hide_spaces = True
    check_word_discovery(config)
    config.gold.path = "gold.tsv"
    with pytest.raises(ConfigError, match="its own gold"):
        check_word_discovery(config)


def test_the_words_suite_reads_its_corpora_as_segmented(tmp_path):
    write_splits(tmp_path / "brent" / "br-phono")
    write_splits(tmp_path / "brent" / "br-text")
    (tmp_path / "ptb").mkdir()
    suite = load_suite("words", data_dir=tmp_path)
    corpora = {language.name: language.corpus for language in suite.languages}
    assert corpora["br-text"] == f"segmented:{(tmp_path / 'brent' / 'br-text').resolve()}"
    assert corpora["ptb"].endswith("ptb/ptb.{split}.txt")
    assert {"characters", "utterances", "morfessor", "unigram", "slm", "agent"} <= {
        s.name for s in suite.systems
    }
    assert suite.seeds == (0, 1, 2)
    # the regularised rows: lm train's model and the agent's evaluator get the weight, by flag
    from segrl.agents import TrainConfig
    from segrl.cli import build_parser
    from segrl.cli.common import config_from_args
    from segrl.experiments.lm_train import LMTrainConfig

    systems = {s.name: s.command for s in suite.systems}
    parser = build_parser()
    slm_args = parser.parse_args(list(systems["slm-el"]))
    slm = config_from_args(LMTrainConfig, slm_args, lm_command=None)
    assert (slm.lm.expected_length_weight, slm.steps) == (0.015, 1000)
    agent = config_from_args(TrainConfig, parser.parse_args(list(systems["agent-el"])))
    assert agent.evaluator.lm.lm.expected_length_weight == 0.015
    assert agent.env.hide_spaces is True
    # the main job's students as the job resolves them: who reads its teacher, rewarded how
    from segrl.experiments.agent_train import resolve_train_config
    from segrl.jobs import JobStart

    start = JobStart("segmented:brent", "text", True, texts=7800, device="cpu", threads=1)
    students = {
        name: resolve_train_config(
            config_from_args(TrainConfig, parser.parse_args(list(systems[name]))), start
        )
        for name in ("agent", "agent-lstm", "agent-posterior", "agent-chars", "agent-el")
    }
    assert (
        {
            name: (
                c.env.teacher_features,
                c.evaluator.lm.reward_variant,
                c.evaluator.lm.pretrain_steps,
                c.evaluator.lm.lm.context,
                c.evaluator.lm.lm.lexicon_size > 0,
            )
            for name, c in students.items()
        }
        == {  # the main job's teacher has a lexicon; the others the LSTM context they were measured with
            "agent": (True, "description-length", 123, "none", True),
            "agent-lstm": (True, "description-length", 123, "lstm", False),
            "agent-posterior": (True, "posterior", 123, "lstm", False),
            "agent-chars": (False, "posterior", 123, "lstm", False),
            "agent-el": (False, "posterior", 123, "lstm", False),
        }
    )


def test_a_word_discovery_table_has_word_columns_and_posterior_rows():
    base = {
        "language": "br-text",
        "status": "done",
        "units_per_char": 0.3,
        "gold_language": "spaces",
    }
    word = {"word_precision": 0.5, "word_recall": 0.5, "word_boundary_f1": 0.7, "lexicon_f1": 0.4}
    results = [
        {
            **base,
            **word,
            "system": "slm",
            "word_f1": 0.5,
            "posterior/word_f1": 0.6,
            **{f"posterior/{k}": v for k, v in word.items()},
            "posterior/units_per_char": 0.3,
        },
        {**base, **word, "system": "morfessor", "word_f1": 0.55},
    ]
    rows = summarise(results)
    assert [r["system"] for r in rows] == ["slm", "slm-posterior", "morfessor"]
    table = format_markdown(rows)
    assert "### br-text (gold: its spaces)" in table
    assert "| system | seeds | word P | word R | word F1 |" in table
    assert "| **slm-posterior** | 1 | 0.500 | 0.500 | **0.600** |" in table


def test_brent_as_the_papers_split_it():
    folder = shared_path("brent", "br-phono")
    corpus = load_corpus(DataConfig(corpus=f"segmented:{folder}"))
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (7832, 978, 978)
    assert corpus.train[0] == "yu want tu si D6 bUk"


def test_segment_evaluate_and_compare_on_cased_utterances(mlflow_store, tmp_path, capsys):
    from segrl.cli import main

    folder = write_splits(tmp_path / "br")
    corpus = ["--corpus", f"segmented:{folder}", "--min-char-count", "1"]
    saved = tmp_path / "chars"
    assert main(["baseline", "--method", "characters", *corpus, "--out", str(saved)]) == 0
    assert "[characters] word P/R/F1 " in capsys.readouterr().out
    source = tmp_path / "in.txt"
    source.write_text("yuwant\nD6 bUk\n", encoding="utf-8")
    assert (
        main(
            [
                "segment",
                "--model",
                str(saved),
                "--input-format",
                "utterances",
                "--quiet",
                str(source),
            ]
        )
        == 0
    )
    # cased: D and U stay as written (a lower-cased D would be another, unseen phoneme)
    assert capsys.readouterr().out == "y u w a n t\nD 6 b U k\n"
    predictions = tmp_path / "pred.txt"
    predictions.write_text(
        "\n".join(line.replace(" ", "") for line in (folder / "te.txt").read_text().split("\n")),
        encoding="utf-8",
    )
    assert (
        main(
            [
                "evaluate",
                "--predictions",
                str(predictions),
                "--gold",
                f"segmented:{folder}",
                "--log",
                "--name",
                "whole",
            ]
        )
        == 0
    )
    assert "word P/R/F1 0.000 / 0.000 / 0.000, boundary P/R/F1 0.000 / 0.000 / 0.000" in (
        capsys.readouterr().out
    )
    assert main(["evaluate", "--model", str(saved), "--gold", f"segmented:{folder}"]) == 0
    # every character: per four utterances 38 boundaries predicted, 13 gold, all found
    assert "boundary P/R/F1 0.342 / 1.000 / 0.510" in capsys.readouterr().out
    predictions.write_text("yu want\n", encoding="utf-8")
    with pytest.raises(DataError, match="1 utterances for the 8"):
        from segrl.scoring import evaluate_predictions

        evaluate_predictions(str(predictions), [f"segmented:{folder}"])


def test_with_hidden_spaces_the_lm_evaluator_never_learns_the_corpus_words():
    config = TrainConfig(evaluator=EvaluatorConfig(name="lm"))
    config.env.hide_spaces = True
    validate_config(config)  # the defaults: the sampled sentences, no lexicon
    config.evaluator.lm.texts = "corpus-words"
    with pytest.raises(ConfigError, match="corpus-words' with hidden spaces"):
        validate_config(config)
    config.evaluator.lm.texts = "word-types"
    config.evaluator.lm.lm.lexicon_size = 1000
    validate_config(config)  # a lexicon: drawn from a segmented corpus's unspaced utterances
    from segrl.experiments.agent_train import resolve_train_config
    from tests.test_resolved_config import replace_start

    with pytest.raises(ConfigError, match="lexicon_size = 1000 with hidden spaces on .* segmented"):
        resolve_train_config(config, replace_start(spaces_are_gold=False))  # from its words
    resolved = resolve_train_config(config, replace_start(spaces_are_gold=True))
    assert resolved.evaluator.lm.lm.lexicon_size == 1000


def test_with_hidden_spaces_every_evaluator_learns_the_utterances_without_their_spaces(
    mlflow_store,
):
    """On a segmented corpus the evaluators (the reward's and the Morfessor reference) learn from
    the utterances without their spaces, never from the gold words: Morfessor's own training
    compounds are the unspaced utterances, the LM's lexicon their substrings."""
    from segrl.agents.task import build_task
    from segrl.data import evaluator_corpus
    from segrl.experiments.agent_train import resolve_train_config
    from tests.test_resolved_config import replace_start

    data = bundled_utterances(60)
    corpus = load_corpus(data)
    utterances = {u.replace(" ", "") for u in corpus.train}
    assert set(evaluator_corpus(corpus, True).train) == utterances
    assert evaluator_corpus(corpus, False) is corpus
    config = TrainConfig(evaluator=EvaluatorConfig(name="lm"), data=data)
    config.env.hide_spaces = True
    config.evaluator.lm.lm.context, config.evaluator.lm.lm.lexicon_size = "none", 300
    config.evaluator.cache_dir = str(mlflow_store / "cache")
    start = replace_start(spaces_are_gold=True, corpus_kind="text")
    task = build_task(resolve_train_config(config, start), corpus)
    lm = task.evaluator
    assert set(lm.words) == utterances and not any(" " in w for w in lm.words)
    entries = lm.lm.lexicon.entries
    assert len(entries) == 300 and all(any(e in u for u in utterances) for e in entries)
    # some entries span two gold words: drawn from the utterances, not from the words
    words = {w for u in corpus.train for w in u.split()}
    assert any(not any(e in w for w in words) for e in entries)
    assert "morfessor" not in task.references  # a reference of morphs, not of words
    config.evaluator = EvaluatorConfig(name="morfessor", cache_dir=str(mlflow_store / "cache"))
    morfessor = build_task(resolve_train_config(config, start), corpus).evaluator
    assert set(morfessor.segmenter.model.get_compounds()) == utterances  # Morfessor's own record
