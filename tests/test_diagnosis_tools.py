"""The diagnosis scripts in ``tools/``: what they print is the metrics of ``segrl.metrics``, and what
is wrong with their input is one line, as the CLI says it, instead of a traceback."""

from __future__ import annotations

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
