"""Other tools' models used directly: a SentencePiece ``.model`` written by SentencePiece's own
trainer and the files the ``morfessor`` command writes (its segmentation file; its binary model, a
pickle, refused unread) load with ``segrl.load_segmenter`` and ``segrl segment``/``evaluate
--model``."""

from __future__ import annotations

import json
import os
import pickle
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece as spm
from sentencepiece.sentencepiece_model_pb2 import ModelProto

from segrl import load_segmenter
from segrl.cli import EXIT_USER_ERROR, main
from segrl.errors import ConfigError, ModelError

from .conftest import command_segments, write_small_corpus

MORFESSOR = Path(sys.executable).with_name("morfessor")


@pytest.fixture(scope="module")
def text(tmp_path_factory) -> Path:
    return write_small_corpus(tmp_path_factory.mktemp("text") / "small.txt")


@pytest.fixture(scope="module")
def spm_model(text, tmp_path_factory) -> Path:
    """A unigram model as ``spm_train`` writes it (default normalisation, ``nmt_nfkc``)."""
    prefix = tmp_path_factory.mktemp("spm") / "en"
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(prefix), vocab_size=60, minloglevel=2, num_threads=1
    )
    return prefix.with_suffix(".model")


@pytest.fixture(scope="module")
def morfessor_files(text, tmp_path_factory) -> tuple[Path, Path]:
    """(segmentation file, binary model) that the ``morfessor`` command wrote for the text."""
    folder = tmp_path_factory.mktemp("morfessor")
    subprocess.run(
        [MORFESSOR, "-t", text, "-S", folder / "model.txt", "-s", folder / "model.bin"],
        check=True,
        capture_output=True,
    )
    return folder / "model.txt", folder / "model.bin"


def test_a_sentencepiece_model_segments_as_sentencepiece_does(spm_model):
    segmenter = load_segmenter(spm_model)
    words = ["walked", "jumping", "talks"]
    processor = spm.SentencePieceProcessor(model_file=str(spm_model))
    expected = [[p.lstrip("\u2581") for p in processor.encode(w, out_type=str)] for w in words]
    expected = [[p for p in pieces if p] for pieces in expected]
    assert segmenter.kind == "classic"
    assert segmenter.segment_words(words) == expected
    assert any(len(pieces) > 1 for pieces in expected)


def sentencepiece_segments(model: Path, words: list[str]) -> list[list[str]]:
    """``words`` as SentencePiece's own ``encode`` segments them, the word-start marker dropped."""
    processor = spm.SentencePieceProcessor(model_file=str(model))
    encoded = [processor.encode(w, out_type=str) for w in words]
    return [[p for p in (piece.lstrip("\u2581") for piece in pieces) if p] for pieces in encoded]


def test_a_cased_sentencepiece_model_gets_words_as_written(spm_model):
    # trained on the text as written ("The", "She", "They"): its pieces have upper case, so its
    # input is not lower-cased, and it segments as sp.encode does
    words = ["The", "They", "She", "We", "Walked", "Dongyi"]
    expected = sentencepiece_segments(spm_model, words)
    assert load_segmenter(spm_model).segment_words(words) == expected
    lowered = sentencepiece_segments(spm_model, [w.lower() for w in words])
    assert [[m.lower() for m in morphs] for morphs in expected] != lowered


def test_a_lower_cased_sentencepiece_model_gets_words_lower_cased(text, tmp_path):
    lower = tmp_path / "lower.txt"
    lower.write_text(text.read_text(encoding="utf-8").lower(), encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(lower), model_prefix=str(tmp_path / "lower"), vocab_size=60, minloglevel=2
    )
    model = tmp_path / "lower.model"
    words = ["The", "They", "Walked"]
    expected = sentencepiece_segments(model, [w.lower() for w in words])
    found = load_segmenter(model).segment_words(words)
    assert [[m.lower() for m in morphs] for morphs in found] == expected
    assert found[0][0][0] == "T"  # cut from the word as written
    assert sentencepiece_segments(model, ["The"]) != expected[:1]


def test_segments_spell_the_input_whatever_the_normalisation(spm_model):
    # nmt_nfkc turns the ligature into "fi" and the full-width letter into "A": segments stay
    # the input's own characters
    segmenter = load_segmenter(spm_model)
    for word in ["ﬁnﬁshed", "Ａwalked", "walkéd"]:
        assert "".join(segmenter.segment_words([word])[0]) == word


def test_a_morfessor_segmentation_file_segments_as_morfessor_does(morfessor_files, text):
    segmentation, _binary = morfessor_files
    segmenter = load_segmenter(segmentation)
    words = ["walked", "jumping", "talks", "kicker"]
    found = subprocess.run(
        [MORFESSOR, "-L", segmentation, "-T", "-"],
        input="\n".join(words) + "\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    expected = [line.split(" ") for line in found if line]
    assert segmenter.segment_words(words) == expected
    assert ["walk", "ed"] in expected


UNSEEN = [
    "talkative",
    "playful",
    "openness",
    "unhelpful",
    "reworked",
    "three",
    "thinking",
    "nowhere",
]
"""Words not in the small corpus, which Morfessor's library default (smoothing 1) splits otherwise."""


def morfessor_command(model: Path, words: list[str], *flags: str) -> list[list[str]]:
    """``words`` as the ``morfessor`` command segments them with the segmentation file ``model``."""
    return command_segments([MORFESSOR, "-L", model, *flags, "-T", "-"], words)


def test_unseen_words_segment_as_the_morfessor_command_segments_them(morfessor_files):
    segmentation, _binary = morfessor_files
    expected = morfessor_command(segmentation, UNSEEN)
    assert load_segmenter(segmentation).segment_words(UNSEEN) == expected
    assert ["t", "h", "r", "e", "e"] in expected  # the command's default: no smoothing
    smoothed = morfessor_command(segmentation, UNSEEN, "--viterbi-smoothing", "1")
    assert ["three"] in smoothed and smoothed != expected  # the library's default differs


def test_a_cased_morfessor_model_gets_words_as_written(morfessor_files):
    # the command trained on the text as written ("The"): segrl does not lower-case its input,
    # and `morfessor -L model.txt -T words` (no --lowercase) gives the same segments
    segmentation, _binary = morfessor_files
    words = ["Walked", "THREE", "Reworked", "walked"]
    expected = morfessor_command(segmentation, words)
    assert load_segmenter(segmentation).segment_words(words) == expected
    assert expected[0] != ["Walk", "ed"] and expected[3] == ["walk", "ed"]


def test_a_morfessor_binary_model_is_refused_unread(tmp_path, morfessor_files):
    _segmentation, binary = morfessor_files
    with pytest.raises(ModelError) as refused:
        load_segmenter(binary)
    message = str(refused.value)
    assert str(binary) in message and "pickle" in message and "-S" in message
    assert "\n" not in message
    marker = tmp_path / "ran"

    class RunsACommand:
        def __reduce__(self):
            return (os.system, (f"touch {shlex.quote(str(marker))}",))

    hostile = tmp_path / "hostile.bin"
    hostile.write_bytes(pickle.dumps(RunsACommand(), pickle.HIGHEST_PROTOCOL))
    assert main(["segment", "--model", str(hostile), os.devnull]) == EXIT_USER_ERROR
    assert not marker.exists()


def test_a_file_of_no_known_kind_is_one_line(tmp_path, capsys):
    junk = tmp_path / "notes.txt"
    junk.write_text("just some words\n", encoding="utf-8")
    assert main(["segment", "--model", str(junk), os.devnull]) == EXIT_USER_ERROR
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(junk) in err
    for kind in ("SentencePiece", "youtokentome", "Morfessor segmentation file"):
        assert kind in err


@pytest.fixture(scope="module")
def yttm_model(text, tmp_path_factory) -> Path:
    """A BPE model as the ``yttm`` command writes it, trained on the text as written (cased)."""
    pytest.importorskip("youtokentome", reason="youtokentome is not installed (optional backend)")
    model = tmp_path_factory.mktemp("yttm") / "yttm.model"
    command = [Path(sys.executable).with_name("yttm"), "bpe", "--data", text, "--model", model]
    subprocess.run(
        [*command, "--vocab_size", "60", "--n_threads", "1"], check=True, capture_output=True
    )
    return model


def yttm_segments(model: Path, words: list[str]) -> list[list[str]]:
    """``words`` as youtokentome's own ``encode`` segments them, the word-start marker dropped."""
    import youtokentome as yttm

    encoded = yttm.BPE(str(model)).encode(words, output_type=yttm.OutputType.SUBWORD)
    return [[p for p in (piece.lstrip("\u2581") for piece in pieces) if p] for pieces in encoded]


def test_a_youtokentome_model_segments_as_youtokentome_does(yttm_model, tmp_path, capsys):
    words = ["walked", "jumping", "The", "They", "Zebra€"]
    expected = yttm_segments(yttm_model, words)
    segmenter = load_segmenter(yttm_model)
    assert segmenter.segment_words(words) == expected
    assert any(len(pieces) > 1 for pieces in expected)
    # cased: its pieces have upper case, so "The" is not lower-cased (which segments otherwise)
    assert expected[2] != [m.capitalize() for m in yttm_segments(yttm_model, ["the"])[0]]
    listed = tmp_path / "words.txt"
    listed.write_text("\n".join(words[:2]) + "\n", encoding="utf-8")
    assert main(["segment", "--model", str(yttm_model), str(listed), "--quiet"]) == 0
    assert capsys.readouterr().out == "".join(" ".join(s) + "\n" for s in expected[:2])


def test_evaluate_scores_a_youtokentome_model(yttm_model, tmp_path, capsys):
    gold = tmp_path / "gold.tsv"
    found = yttm_segments(yttm_model, ["walked", "jumping"])
    analyses = [" @@".join(morphs) for morphs in found]
    gold.write_text(f"walked\t{analyses[0]}\njumping\t{analyses[1]}\n", encoding="utf-8")
    assert main(["evaluate", "--model", str(yttm_model), "--gold", str(gold)]) == 0
    out = capsys.readouterr().out
    assert "yttm.model" in out and "1.000" in out and "0.000" not in out


def test_a_damaged_youtokentome_model_is_refused(yttm_model, tmp_path, capsys):
    cut = tmp_path / "cut.model"
    cut.write_text("".join(yttm_model.read_text().splitlines(keepends=True)[:-3]))
    assert main(["segment", "--model", str(cut), os.devnull]) == EXIT_USER_ERROR
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(cut) in err and "youtokentome" in err and "damaged" in err


def test_segment_and_evaluate_take_the_files(morfessor_files, spm_model, tmp_path, capsys):
    words = tmp_path / "words.txt"
    words.write_text("walked\njumping\n", encoding="utf-8")
    segmentation, _binary = morfessor_files
    assert main(["segment", "--model", str(segmentation), str(words), "--quiet"]) == 0
    assert capsys.readouterr().out == "walk ed\njump ing\n"
    gold = tmp_path / "gold.tsv"
    gold.write_text("walked\twalk @@ed\njumping\tjump @@ing\n", encoding="utf-8")
    assert main(["evaluate", "--model", str(segmentation), "--gold", str(gold)]) == 0
    out = capsys.readouterr().out
    assert "model.txt" in out and "1.000" in out
    assert main(["evaluate", "--model", str(spm_model), "--gold", str(gold)]) == 0
    assert "en.model" in capsys.readouterr().out


def test_sampling_is_seeded_and_varies(spm_model):
    words = ["walking"] * 40
    segmenter = load_segmenter(spm_model)
    segmenter.sample(0.1, seed=3)
    sampled = segmenter.segment_words(words)
    segmenter.sample(0.1, seed=3)
    assert segmenter.segment_words(words) == sampled
    assert len({tuple(s) for s in sampled}) > 1
    assert all("".join(s) == "walking" for s in sampled)


def test_sampling_needs_a_sentencepiece_model(morfessor_files):
    with pytest.raises(ModelError, match="SentencePiece"):
        load_segmenter(morfessor_files[0]).sample(0.1)


def test_segment_sample_draws_segmentations_of_the_word(spm_model, tmp_path, capsys):
    words = tmp_path / "words.txt"
    words.write_text("walking\n" * 30, encoding="utf-8")
    command = ["segment", "--model", str(spm_model), str(words), "--quiet", "--sample", "0.1"]
    assert main([*command, "--seed", "5"]) == 0
    first = capsys.readouterr().out.splitlines()
    assert main([*command, "--seed", "5"]) == 0
    assert capsys.readouterr().out.splitlines() == first
    assert len(set(first)) > 1 and all(line.replace(" ", "") == "walking" for line in first)
    assert main([*command[:-2], "--sample", "2"]) == EXIT_USER_ERROR
    assert "--sample 2" in capsys.readouterr().err


def test_sample_repeats_across_runs_and_draws_from_sentencepiece_s_nbest(spm_model, tmp_path):
    """Each run is a new process: SentencePiece's own generator gives other samples in each,
    whatever its seed; segrl's gives the same."""
    words = tmp_path / "words.txt"
    words.write_text("walking\njumped\ntalks\n" * 10, encoding="utf-8")
    command = [sys.executable, "-m", "segrl", "segment", "--model", str(spm_model), str(words)]
    command += ["--quiet", "--sample", "0.1", "--seed", "7"]
    outputs = [subprocess.run(command, capture_output=True, text=True, check=True).stdout]
    outputs.append(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    assert outputs[0] == outputs[1] and len(set(outputs[0].splitlines())) > 3
    processor = spm.SentencePieceProcessor(model_file=str(spm_model))
    for word, line in zip(words.read_text("utf-8").split(), outputs[0].splitlines(), strict=True):
        nbest = processor.nbest_encode(word, nbest_size=64, out_type=str)
        assert line.split() in [[p.lstrip("\u2581") for p in n if p != "\u2581"] for n in nbest]


def test_sample_refuses_a_bpe_model(mlflow_store, text):
    out = mlflow_store / "bpe"
    args = ["--corpus", str(text), "--gold-max-words", "50", "--vocab-size", "60"]
    assert main(["baseline", "--method", "bpe", *args, "--out", str(out)]) == 0
    with pytest.raises(ConfigError, match="a SentencePiece bpe model, .*sample a unigram model"):
        load_segmenter(out).sample(0.1, seed=0)


def test_baseline_out_writes_a_model_spm_reads(mlflow_store, text, capsys):
    out = mlflow_store / "unigram"
    args = ["--corpus", str(text), "--gold-max-words", "50", "--vocab-size", "60"]
    assert main(["baseline", "--method", "unigram", *args, "--out", str(out)]) == 0
    assert "[unigram] saved in" in capsys.readouterr().out
    processor = spm.SentencePieceProcessor(model_file=str(out / "sentencepiece.model"))
    words = ["walked", "jumping", "talks"]
    pieces = [[p.lstrip("\u2581") for p in processor.encode(w, out_type=str)] for w in words]
    expected = [[p for p in word if p] for word in pieces]
    assert load_segmenter(out).segment_words(words) == expected
    assert load_segmenter(out / "sentencepiece.model").segment_words(words) == expected


def test_baseline_character_coverage_reaches_sentencepiece(mlflow_store, text):
    out = mlflow_store / "bpe"
    args = ["--corpus", str(text), "--gold-max-words", "50", "--vocab-size", "60"]
    assert main(["baseline", "--method", "bpe", *args, "--out", str(out)]) == 0
    coverage = ModelProto.FromString((out / "sentencepiece.model").read_bytes())
    assert coverage.trainer_spec.character_coverage == 1.0
    assert (
        main(
            [
                "baseline",
                "--method",
                "bpe",
                *args,
                "--character-coverage",
                "0.98",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    coverage = ModelProto.FromString((out / "sentencepiece.model").read_bytes())
    assert coverage.trainer_spec.character_coverage == pytest.approx(0.98)
    assert main(["baseline", "--method", "bpe", *args, "--character-coverage", "0"]) == 2


def test_baseline_out_writes_a_file_morfessor_reads(mlflow_store, text, capsys):
    out = mlflow_store / "morfessor"
    args = ["--corpus", str(text), "--gold-max-words", "50", "--out", str(out)]
    assert main(["baseline", "--method", "morfessor", *args]) == 0
    words = ["helped", "kicking", "opener", "callers", *UNSEEN]  # letters of the training split
    expected = morfessor_command(out / "morfessor.segmentations.txt", words)
    assert load_segmenter(out).segment_words(words) == expected
    assert ["t", "h", "r", "e", "e"] in expected
    # trained lower-cased: segrl lower-cases its input, as the command's --lowercase does, and
    # cuts the segments from the word as written
    cased = ["Walked", "THREE", "Reworked"]
    found = load_segmenter(out).segment_words(cased)
    expected = morfessor_command(out / "morfessor.segmentations.txt", cased, "--lowercase")
    assert [[m.lower() for m in morphs] for morphs in found] == expected
    assert found[0] == ["Walk", "ed"] and expected[1] == ["t", "h", "r", "e", "e"]


def test_viterbi_smoothing_is_saved_and_the_command_reproduces_it(mlflow_store, text, capsys):
    out = mlflow_store / "smoothed"
    args = ["--corpus", str(text), "--gold-max-words", "50", "--out", str(out)]
    assert main(["baseline", "--method", "morfessor", *args, "--viterbi-smoothing", "1"]) == 0
    meta = json.loads((out / "segmenter.json").read_text(encoding="utf-8"))
    assert meta["options"]["viterbi_smoothing"] == 1
    model = out / "morfessor.segmentations.txt"
    expected = morfessor_command(model, UNSEEN, "--viterbi-smoothing", "1")
    assert load_segmenter(out).segment_words(UNSEEN) == expected
    assert expected != morfessor_command(model, UNSEEN)
    assert main(["baseline", "--method", "morfessor", *args, "--viterbi-smoothing", "-1"]) == 2
    assert "--viterbi-smoothing must be 0 or more, got -1" in capsys.readouterr().err


def test_corpus_weight_sets_morfessors_alpha(corpus):
    from segrl.baselines import MorfessorSegmenter

    def morphs(weight: float) -> int:
        segmenter = MorfessorSegmenter(corpusweight=weight, cache_dir="").train(corpus)
        assert segmenter.model.get_corpus_coding_weight() == weight
        return sum(len(segmenter.segment(w)) for w in corpus.word_counts("train"))

    assert morphs(0.05) > morphs(1.0) > morphs(20.0)  # more weight on the corpus: fewer splits


def test_baseline_out_refuses_a_folder_of_other_files(mlflow_store, text, capsys):
    mine = mlflow_store / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("keep me", encoding="utf-8")
    args = ["--corpus", str(text), "--method", "characters", "--out", str(mine)]
    assert main(["baseline", *args]) == EXIT_USER_ERROR
    assert "--out" in capsys.readouterr().err
    assert (mine / "thesis.tex").read_text(encoding="utf-8") == "keep me"


def test_morfessor_annotations_train_semi_supervised(corpus, tmp_path):
    from segrl.baselines import MorfessorSegmenter

    annotations = tmp_path / "annotations.txt"
    annotations.write_text("# Morfessor's annotation format\noften of ten\nhome ho me\n", "utf-8")
    plain = MorfessorSegmenter(cache_dir="").train(corpus)
    taught = MorfessorSegmenter(annotations=str(annotations), cache_dir="").train(corpus)
    # "home" is in the text only as "home.": unseen, it splits into its letters (no smoothing,
    # as the morfessor command segments) until the annotations teach "ho" and "me"
    assert [plain.segment(w) for w in ("often", "home")] == [["often"], ["h", "o", "m", "e"]]
    assert [taught.segment(w) for w in ("often", "home")] == [["of", "ten"], ["ho", "me"]]
    assert taught.segment("walked") == ["walk", "ed"]


def test_annotations_are_read_as_morfessor_reads_them(tmp_path):
    """Tab-separated lines (Morpho Challenge's), which ``morfessor -A`` reads, are read too."""
    import morfessor

    from segrl.baselines.morfessor import read_annotations_file

    annotations = tmp_path / "annotations.mc"
    annotations.write_text("incult\tincult\noften\tof ten, often\nhome ho me\n", "utf-8")
    ours = read_annotations_file(annotations)
    assert ours == {
        "incult": [["incult"]],
        "often": [["of", "ten"], ["often"]],
        "home": [["ho", "me"]],
    }
    assert ours == morfessor.MorfessorIO().read_annotations_file(str(annotations))


def test_a_bad_annotation_line_is_one_line(mlflow_store, text, capsys):
    annotations = mlflow_store / "annotations.txt"
    annotations.write_text("often of ten\nhome hom me\n", encoding="utf-8")
    args = ["--corpus", str(text), "--morfessor-annotations", str(annotations)]
    assert main(["baseline", "--method", "morfessor", *args]) == EXIT_USER_ERROR
    said = capsys.readouterr().err.strip().splitlines()
    err = "\n".join(line for line in said if not line.startswith("segrl: warning: "))
    assert "\n" not in err and f"{annotations}:2:" in err and "'home'" in err


def test_baseline_morfessor_epochs_reaches_the_run(mlflow_store, text, capsys):
    args = ["--method", "morfessor", "--corpus", str(text), "--gold-max-words", "50"]
    assert main(["baseline", *args, "--morfessor-epochs", "0"]) == 2
    assert "--morfessor-epochs must be at least 1, got 0" in capsys.readouterr().err
    assert (
        main(["baseline", *args, "--morfessor-epochs", "1", "--out", str(mlflow_store / "m")]) == 0
    )
    saved = json.loads((mlflow_store / "m" / "segmenter.json").read_text())
    assert saved["options"]["max_epochs"] == 1
