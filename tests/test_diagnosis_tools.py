"""The diagnosis scripts in ``tools/``: what they print is the metrics of ``segrl.metrics``, and what
is wrong with their input is one line, as the CLI says it, instead of a traceback."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

TOOLS = Path(__file__).resolve().parent.parent / "tools"


def run_tool(name: str, *args: str) -> subprocess.CompletedProcess:
    """``tools/NAME.py`` run with ``args`` as a user runs it, its output captured."""
    return subprocess.run(
        [sys.executable, str(TOOLS / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def _tool(name: str):
    """``tools/NAME.py`` imported as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_teacher_density_names_a_folder_that_is_no_run(tmp_path):
    gold = tmp_path / "gold.tsv"
    gold.write_text("walked\twalk ed\n", encoding="utf-8")
    done = run_tool("teacher_density", str(tmp_path / "nothing"), "--gold", str(gold))
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
    from segrl.lm.decoding import LMSegmenter
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
        assert float(row[4].rstrip(" |")) == pytest.approx(metrics["gold_units_per_char"], abs=5e-4)
    assert float(table[1][4].rstrip(" |")) >= float(table[2][4].rstrip(" |"))  # lower: denser


def curve(*args: str) -> subprocess.CompletedProcess:
    return run_tool("lm_budget_curve", *args)


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
    from segrl.experiments.lm_train import LMTrainConfig, train_lm_segmenter
    from segrl.lm.lexicon import PRUNED_LOGIT
    from segrl.lm.models import load_lm

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
    metrics = train_lm_segmenter(config).metrics
    assert rows[1]["word_f1"] == pytest.approx(metrics["word_f1"])
    assert rows[1]["posterior/word_f1"] == pytest.approx(metrics["posterior/word_f1"])
    assert rows[1]["lexicon_f1"] == pytest.approx(metrics["lexicon_f1"])
    assert (
        rows[0]["word_f1"] != rows[1]["word_f1"]
        or rows[0]["valid_bits_per_char"] != rows[1]["valid_bits_per_char"]
    )  # the second point is a second update's, not the first's again
    # past an epoch (three updates) the lexicon is pruned as segrl lm train prunes it
    pruned = mlflow_store / "pruned.jsonl"
    done = curve(
        f"segmented:{folder}",
        "--at",
        "4",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--out",
        str(pruned),
    )
    assert done.returncode == 0, done.stderr
    (after,) = [json.loads(line) for line in pruned.read_text(encoding="utf-8").splitlines()]
    four = train_lm_segmenter(replace(config, steps=4, out=str(mlflow_store / "run-4"))).metrics
    kept = (load_lm(mlflow_store / "run-4" / "best").lexicon.logits > PRUNED_LOGIT / 2).sum()
    assert after["lexicon_entries"] == int(kept) < rows[1]["lexicon_entries"]
    assert after["word_f1"] == pytest.approx(four["word_f1"])
    assert after["posterior/word_f1"] == pytest.approx(four["posterior/word_f1"])
    # --set gives segrl lm train's options, and the row says which it was given
    regularised = mlflow_store / "regularised.jsonl"
    done = curve(
        f"segmented:{folder}", "--at", "2", "--device", "cpu", "--threads", "1",
        "--set", "lm.expected_length_weight=0.3", "--set", 'lm.context="lstm"',
        "--out", str(regularised),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (row,) = [json.loads(line) for line in regularised.read_text(encoding="utf-8").splitlines()]
    assert row["set"] == {"lm.context": "lstm", "lm.expected_length_weight": 0.3}
    config.lm.expected_length_weight, config.lm.context = 0.3, "lstm"
    config.out = str(mlflow_store / "run-regularised")
    assert row["valid_bits_per_char"] != rows[1]["valid_bits_per_char"]
    metrics = train_lm_segmenter(config).metrics
    assert row["word_f1"] == pytest.approx(metrics["word_f1"])
    assert row["word_boundary_f1"] == pytest.approx(metrics["word_boundary_f1"])


def test_lm_budget_curve_refuses_text_with_spaces_and_counts_out_of_order(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat\n" * 30, encoding="utf-8")
    done = curve(str(text), "--at", "1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("lm_budget_curve: error: ") and "segmented:PATH" in done.stderr
    done = curve(f"segmented:{utterance_splits(tmp_path / 'br')}", "--at", "500,250")
    assert done.returncode == 2 and "positive and increasing" in done.stderr


def test_transfer_table_judges_a_teacher_by_its_worst_corpus():
    """The margin over the best classic segmenter (the best mean of Morfessor, unigram and BPE,
    never characters) per corpus, its minimum and its mean; the stopping point beside 1,500
    updates, and the curve of seed 0."""
    tool = _tool("transfer_table")

    def seeds(*f1s, density=0.3):
        return {
            "seeds": {
                i: {
                    "boundary_precision": 0.5,
                    "boundary_recall": 0.5,
                    "boundary_f1": f1,
                    "density": density,
                    "run_id": f"r{i}",
                }
                for i, f1 in enumerate(f1s)
            }
        }

    rows = {
        ("a", "morfessor"): seeds(0.6, 0.6),
        ("a", "unigram"): seeds(0.4),
        ("a", "characters"): seeds(0.9),
        ("a", "slm"): seeds(0.7, 0.5),
        ("a", "slm-1500"): seeds(0.55, 0.55),
        ("b", "bpe"): seeds(0.3),
        ("b", "slm"): seeds(0.2, 0.2),
    }
    table = tool.corpus_table(rows, {"a": 0.25, "b": 0.4}, ["slm"])
    assert "| a | 0.250 | 0.600 morfessor |" in table  # characters is no subword segmenter
    assert "| slm − best classic | +0.000 | -0.100 | **-0.100** | -0.050 |" in table
    margins = tool.corpus_table(rows, {"a": 0.25, "b": 0.4}, ["slm"], margins_only=True)
    assert (
        margins.splitlines()[-1] == "| slm − best classic | +0.000 | -0.100 | **-0.100** | -0.050 |"
    )
    assert "morfessor" not in margins and len(margins.splitlines()) == 3
    assert "**0.600 ± 0.141**" in table
    history = {"a": {0: [(10, 0.4, 3.5), (20, 0.7, 3.2)], 1: [(10, 0.3, 3.6)]}}
    curve = tool.curve_table(rows, "slm", history)
    assert (
        "| a | 0.600 ± 0.141 | 0.550 ± 0.000 | +0.050 | 20, 10 | 0.400 / 3.50, 0.700 / 3.20 |"
        in curve
    )


def test_transfer_table_sets_each_student_beside_its_teacher():
    """What the agent adds over its own LM's segmentation, seed by seed, and the worst corpus's
    margins over its teacher and over the best classic segmenter."""
    tool = _tool("transfer_table")

    def seeds(*runs):
        return {
            "seeds": {
                i: {"boundary_f1": f1, "viterbi": viterbi, "posterior": posterior}
                for i, (f1, viterbi, posterior) in enumerate(runs)
            }
        }

    rows = {
        ("a", "morfessor"): {"seeds": {0: {"boundary_f1": 0.5}}},
        ("a", "agent"): seeds((0.6, 0.5, 0.55), (0.6, 0.7, 0.65)),
        ("b", "unigram"): {"seeds": {0: {"boundary_f1": 0.45}}},
        ("b", "agent"): seeds((0.3, 0.35, 0.3)),
    }
    table = tool.student_table(rows, ["a", "b"], ["agent"])
    assert "| a | 0.500 morfessor | agent | **0.600 ± 0.000** | 0.600 ± 0.141 |" in table
    assert "| +0.100, -0.100 |" in table  # per seed: student minus its own run's Viterbi
    assert "| agent − its teacher (Viterbi) | +0.000 | -0.050 | **-0.050** | -0.025 |" in table
    assert "| agent − best classic | +0.100 | -0.150 | **-0.150** | -0.025 |" in table


def test_transfer_table_names_an_earlier_designs_systems_by_its_suffix(tmp_path):
    """``FOLDER:SUFFIX`` keeps a bench's cells apart from a later bench's same cells, its systems
    renamed; a bench given plainly keeps its names, and the later of two plain benches wins."""
    tool = _tool("transfer_table")
    for name, run in (("old", "r-old"), ("new", "r-new")):
        (tmp_path / name).mkdir()
        cell = {"cell": "en/slm/seed-0", "system": "slm", "status": "done", "run_id": run}
        (tmp_path / name / "cells.json").write_text(json.dumps([cell]), encoding="utf-8")
    cells = tool.read_cells([f"{tmp_path / 'old'}:before", tmp_path / "new"])
    assert sorted((c["system"], c["run_id"]) for c in cells) == [
        ("slm", "r-new"),
        ("slm-before", "r-old"),
    ]
    assert [c["run_id"] for c in tool.read_cells([tmp_path / "old", tmp_path / "new"])] == ["r-new"]


def test_transfer_table_names_a_folder_that_is_no_bench(tmp_path):
    done = run_tool(
        "transfer_table", "collect", str(tmp_path), "--out", str(tmp_path / "report.json")
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("transfer_table: error: ") and "cells.json" in done.stderr
    assert not (tmp_path / "report.json").exists()


def _report_cells():
    def cell(language, system, seed, f1, **more):
        return {
            "language": language,
            "system": system,
            "seed": seed,
            "boundary_precision": 0.5,
            "boundary_recall": 0.5,
            "boundary_f1": f1,
            "density": 0.3,
        } | more

    return [
        cell("a", "morfessor", 0, 0.6),
        cell("a", "slm", 0, 0.7, curve=[[10, 0.4, 3.5], [20, 0.7, 3.2]]),
        cell("a", "slm", 1, 0.5, curve=[[10, 0.3, math.nan]]),
        cell("b", "bpe", 0, 0.3),
        cell("b", "slm", 0, 0.2, viterbi=math.nan),
    ]


def test_transfer_report_reads_back_what_it_wrote(tmp_path):
    """A report keeps every figure (a missing one as null, read back as NaN) and the corpora in
    the suite's order, so its tables are those of the runs it was collected from."""
    tool = _tool("transfer_table")
    path = tmp_path / "report.json"
    tool.write_report(path, {"b": 0.4, "a": 0.25}, _report_cells())
    assert "NaN" not in path.read_text(encoding="utf-8")  # strict JSON
    densities, cells = tool.read_report(path)
    assert list(densities) == ["b", "a"]
    assert math.isnan(cells[2]["curve"][0][2]) and math.isnan(cells[4]["viterbi"])
    table = tool.tables([str(path), "--curve", "slm"])
    assert "| slm − best classic | -0.100 | +0.000 | **-0.100** | -0.050 |" in table
    assert "| a | 0.600 ± 0.141 | - | - | 20, 10 | 0.400 / 3.50, 0.700 / 3.20 |" in table
    (tmp_path / "broken.json").write_text('{"cells": []}', encoding="utf-8")
    with pytest.raises(tool.SegrlError, match="broken.json: not a transfer report"):
        tool.read_report(tmp_path / "broken.json")


def test_transfer_page_regenerates_its_blocks_and_checks_them(tmp_path):
    """A page's generated block is rewritten from its report; ``--check`` names a block that no
    longer agrees with it (exit 1) and leaves the page as it is."""
    tool = _tool("transfer_table")
    docs = tmp_path / "docs"
    tool.write_report(tmp_path / "reports" / "r.json", {"a": 0.25, "b": 0.4}, _report_cells())
    docs.mkdir()
    page = docs / "results.md"
    page.write_text(
        "# Results\n\n<!-- table: reports/r.json --teachers slm -->\nstale text\n<!-- end table -->\nend\n",
        encoding="utf-8",
    )
    script = [sys.executable, str(TOOLS / "transfer_table.py"), "page", str(page)]
    stale = subprocess.run([*script, "--check"], capture_output=True, text=True, check=False)
    assert stale.returncode == 1 and "reports/r.json --teachers slm" in stale.stderr
    assert "stale text" in page.read_text(encoding="utf-8")
    subprocess.run(script, capture_output=True, text=True, check=True)
    text = page.read_text(encoding="utf-8")
    assert "stale text" not in text and "| slm − best classic | +0.000 | -0.100 |" in text
    assert text.endswith("<!-- end table -->\nend\n")
    fresh = subprocess.run([*script, "--check"], capture_output=True, text=True, check=False)
    assert fresh.returncode == 0, fresh.stderr


def test_boundary_offsets_places_each_cut_against_the_nearest_gold_boundary():
    tool = _tool("boundary_offsets")
    offsets, missed_beside = tool.offsets, tool.missed_beside
    gold = [("retractā", "rē", "mus"), ("calv", "ēs")]
    predicted = [["retract", "ārēmus"], ["calv", "ēs"]]  # one cut a letter early, one right
    figures = offsets(predicted, gold)
    assert figures["boundary_precision"] == 0.5 and figures["boundary_recall"] == 1 / 3
    assert figures["precision within 1"] == 1.0 and figures["recall within 1"] == 2 / 3
    assert figures["offset -1"] == 0.5 and figures["offset +0"] == 0.5
    assert (figures["cuts per word"], figures["gold cuts per word"]) == (1.0, 1.5)
    other = [["retractā", "rē", "mus"], ["calvēs"]]
    assert missed_beside(["retractārēmus", "calvēs"], gold, predicted, other) == {
        "rēmus": 1,
        "mus": 1,
    }


def test_boundary_offsets_names_a_model_that_is_not_one(tmp_path):
    gold = tmp_path / "gold.tsv"
    gold.write_text("walked\twalk ed\n", encoding="utf-8")
    done = run_tool("boundary_offsets", str(tmp_path / "no"), "--gold", str(gold))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("boundary_offsets: error: ") and "no" in done.stderr


def test_transfer_table_reads_a_curve_beside_its_own_designs_shorter_budget():
    """An earlier design's curve (``agent-6000-before``) is read beside that design's shorter
    budget (``agent-before``), never beside the current default's."""
    tool = _tool("transfer_table")
    assert tool.shorter_budget("slm") == "slm-1500"
    assert tool.shorter_budget("agent-6000") == "agent"
    assert tool.shorter_budget("agent-6000-before") == "agent-before"
    assert tool.shorter_budget("slm-before") == "slm-1500-before"
    for system in ("slm-1500", "slm-1500-before", "agent", "agent-before", "morfessor"):
        assert tool.shorter_budget(system) == "-", system


def test_lexicon_drift_names_what_the_later_lexicon_lost(tmp_path):
    """Two models that differ by one pruned entry, the one the earlier cuts with most: the tool's
    counts are the lexicons' and the Viterbi segmentations', and a boundary the pruned entry cut
    with is put down to the pruning."""
    from segrl.data.corpus import PLACEHOLDER
    from segrl.data.gold import load_gold
    from segrl.data.vocab import CharVocab
    from segrl.lm import LMConfig, build_word_lm, save_lm
    from segrl.lm.decoding import LMSegmenter
    from segrl.lm.lexicon import PRUNED_LOGIT
    from segrl.segmentation import boundaries_of

    torch.manual_seed(0)
    gold = load_gold(max_words=60)
    words = [g.word for g in gold]
    vocab = CharVocab.from_texts(words, PLACEHOLDER)
    config = LMConfig(
        context="none",
        char_dim=8,
        hidden_dim=8,
        speller_dim=8,
        max_segment_length=6,
        lexicon_size=200,
        lexicon_logits="direct",
    )
    early = build_word_lm(config, vocab, words)
    entries = list(early.lexicon.entries)
    early_segs = LMSegmenter(early).segment_words(words)
    uses = {}
    for segments in early_segs:
        for s in segments:
            if s in entries and len(s) > 1:
                uses[s] = uses.get(s, 0) + 1
    victim = max(uses, key=uses.get)  # the entry early cuts with most
    late = build_word_lm(config, vocab, words)
    late.load_state_dict(early.state_dict())
    with torch.no_grad():
        late.lexicon.logits[entries.index(victim)] = PRUNED_LOGIT
    save_lm(early, tmp_path / "early")
    save_lm(late, tmp_path / "late")

    done = run_tool(
        "lexicon_drift", str(tmp_path / "early"), str(tmp_path / "late"), "--gold-max-words", "60"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    kept = next(line for line in lines if line.startswith("| lexicon entries kept"))
    n_early = int(early.lexicon.kept().sum())
    assert kept == f"| lexicon entries kept | {n_early:,} | {n_early - 1:,} |"
    late_segs = LMSegmenter(late).segment_words(words)
    lost = gained = 0
    for g, a, b in zip(gold, early_segs, late_segs, strict=True):
        ref = boundaries_of(g.analyses[0])
        lost += len((ref & boundaries_of(a)) - boundaries_of(b))
        gained += len((ref & boundaries_of(b)) - boundaries_of(a))
    assert f"gold boundaries lost {lost:,}, gained {gained:,} (early to late)" in lines
    pruned_rows = lines[
        lines.index(
            "| pruned (kept early, not late) | uses by early on the gold words | log share early |"
        )
        + 2 :
    ]
    assert pruned_rows[0].startswith(f"| `{victim}` | {uses[victim]} | ")
    assert lost  # the pruned entry cut at gold boundaries: the later model lost them to the pruning
    assert any(line.startswith("| a piece early cut with is pruned in late |") for line in lines)


def test_lexicon_drift_refuses_a_model_without_a_direct_lexicon(tmp_path):
    from segrl.data.corpus import PLACEHOLDER
    from segrl.data.gold import load_gold
    from segrl.data.vocab import CharVocab
    from segrl.lm import LMConfig, build_lm, save_lm

    gold = load_gold(max_words=10)
    vocab = CharVocab.from_texts([g.word for g in gold], PLACEHOLDER)
    config = LMConfig(context="none", char_dim=8, hidden_dim=8, speller_dim=8, max_segment_length=6)
    folder = save_lm(build_lm(config, vocab), tmp_path / "slm")
    done = run_tool("lexicon_drift", str(folder), str(folder))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"lexicon_drift: error: {folder}: not a direct lexicon")
