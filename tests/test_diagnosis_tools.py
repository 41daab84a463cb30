"""The diagnosis scripts in ``tools/``: what they print is the metrics of ``segrl.metrics``, and what
is wrong with their input is one line, as the CLI says it, instead of a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

TOOLS = Path(__file__).resolve().parent.parent / "tools"


def test_teacher_density_names_a_folder_that_is_no_run(tmp_path):
    gold = tmp_path / "gold.tsv"
    gold.write_text("walked\twalk ed\n", encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            str(TOOLS / "teacher_density.py"),
            str(tmp_path / "nothing"),
            "--gold",
            str(gold),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("teacher_density: error: ")
    assert str(tmp_path / "nothing") in done.stderr


def test_teacher_density_reads_a_saved_slm_alone(tmp_path):
    """An LM with no student: its Viterbi row, then a row a threshold, each the metrics of that
    decoding on the gold words."""
    from segrl.data.corpus import PLACEHOLDER
    from segrl.data.gold import load_gold
    from segrl.data.vocab import CharVocab
    from segrl.lm import LMConfig, build_lm, save_lm
    from segrl.lm.segmenter import LMSegmenter
    from segrl.metrics import segmentation_metrics

    torch.manual_seed(0)
    gold = load_gold(max_words=40)
    vocab = CharVocab.from_texts([g.word for g in gold], PLACEHOLDER)
    config = LMConfig(context="none", char_dim=8, hidden_dim=8, speller_dim=8, max_segment_length=6)
    lm = build_lm(config, vocab)
    folder = save_lm(lm, tmp_path / "slm")
    done = subprocess.run(
        [
            sys.executable,
            str(TOOLS / "teacher_density.py"),
            str(folder),
            "--gold-max-words",
            "40",
            "--thresholds",
            "0.3",
            "0.6",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    table = [line.split(" | ") for line in done.stdout.splitlines()[2:]]
    assert [row[0] for row in table] == [
        "| teacher, Viterbi",
        "| teacher, posterior > 0.3",
        "| teacher, posterior > 0.6",
    ]
    words = [g.word for g in gold]
    for row, segmenter in zip(
        table,
        [
            LMSegmenter(lm),
            LMSegmenter(lm, decoding="posterior", threshold=0.3),
            LMSegmenter(lm, decoding="posterior", threshold=0.6),
        ],
        strict=True,
    ):
        metrics = segmentation_metrics(segmenter.segment_words(words), gold)
        assert float(row[3]) == pytest.approx(metrics["boundary_f1"], abs=5e-4)
        assert float(row[4].rstrip(" |")) == pytest.approx(metrics["units_per_char"], abs=5e-4)
    assert float(table[1][4].rstrip(" |")) >= float(table[2][4].rstrip(" |"))  # lower: denser


def curve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(TOOLS / "lm_budget_curve.py"), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def utterance_splits(folder: Path) -> Path:
    """A corpus without spaces in the papers' layout (tr/va/te), 160 training utterances: three
    updates of 64 an epoch."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["yu want tu si D6 bUk", "lUk D*z 6 b7", "&nd 6 dOgi", "yu si D6 dOgi"]
    for name, repeat in (("tr", 40), ("va", 2), ("te", 2)):
        (folder / f"{name}.txt").write_text("\n".join(lines * repeat) + "\n", encoding="utf-8")
    return folder


@pytest.mark.slow
def test_lm_budget_curve_scores_what_lm_train_trains(mlflow_store, one_thread):
    """Its point at N updates is `segrl lm train --steps N`'s result: the same model, batches and
    updates, scored the same way."""
    from segrl.config import DataConfig
    from segrl.lm.segmenter import LMTrainConfig, train_lm_segmenter

    folder = utterance_splits(mlflow_store / "br")
    out = mlflow_store / "curve.jsonl"
    done = curve(
        f"segmented:{folder}", "--at", "1,2", "--device", "cpu", "--threads", "1", "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [row["updates"] for row in rows] == [1, 2]
    assert done.stdout.splitlines()[1].startswith("2 updates: word F1 ")
    config = LMTrainConfig(
        data=DataConfig(corpus=f"segmented:{folder}"),
        steps=2,
        device="cpu",
        out=str(mlflow_store / "run"),
    )
    metrics = train_lm_segmenter(config)
    assert rows[1]["word_f1"] == pytest.approx(metrics["word_f1"])
    assert rows[1]["posterior/word_f1"] == pytest.approx(metrics["posterior/word_f1"])
    assert rows[1]["lexicon_f1"] == pytest.approx(metrics["lexicon_f1"])
    assert (
        rows[0]["word_f1"] != rows[1]["word_f1"]
        or rows[0]["valid_bits_per_char"] != rows[1]["valid_bits_per_char"]
    )  # the second point is a second update's, not the first's again


def test_lm_budget_curve_refuses_text_with_spaces_and_counts_out_of_order(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat\n" * 30, encoding="utf-8")
    done = curve(str(text), "--at", "1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("lm_budget_curve: error: ") and "segmented:PATH" in done.stderr
    done = curve(f"segmented:{utterance_splits(tmp_path / 'br')}", "--at", "500,250")
    assert done.returncode == 2 and "positive and increasing" in done.stderr
