"""Damaged model files of the native libraries (SentencePiece, youtokentome) are refused with one
line before the library reads them: a random, empty, pickled or cut-short file, another tool's or
one segrl saved, and a file segrl saved that was changed since. youtokentome aborts the whole
process on some of these, so the commands run in a child process, where an abort is an exit status
the test sees rather than the end of the test run."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece as spm
from sentencepiece.sentencepiece_model_pb2 import ModelProto

from segrl import load_segmenter
from segrl.baselines import SentencePieceBPE
from segrl.baselines.yttm import YttmBPE, yttm_available
from segrl.cli import EXIT_USER_ERROR
from segrl.errors import ModelError

from .conftest import CHECKOUT, write_small_corpus

needs_yttm = pytest.mark.skipif(
    not yttm_available(), reason="youtokentome is not installed (optional backend)"
)
WORDS = ["walked", "jumping", "talks", "unexpectedly"]


def run_segment(models: list[Path], words_file: Path) -> list[tuple[int, str]]:
    """(exit status, standard error) of ``segrl segment --model M WORDS --quiet`` for each model,
    all in one child process; an aborted child fails the test with its exit status."""
    script = (
        "import contextlib, io, json, sys\n"
        "from segrl.cli import main\n"
        "out = []\n"
        "for model in sys.argv[2:]:\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):\n"
        "        rc = main(['segment', '--model', model, sys.argv[1], '--quiet'])\n"
        "    out.append([rc, err.getvalue()])\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, words_file, *models],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(CHECKOUT), "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert done.returncode == 0, f"the child ended with {done.returncode}: {done.stderr[-500:]}"
    return [tuple(r) for r in json.loads(done.stdout)]


def assert_refused(results: list[tuple[int, str]], models: list[Path]) -> None:
    for (rc, err), model in zip(results, models, strict=True):
        assert rc == EXIT_USER_ERROR, (model, rc, err)
        assert err.count("\n") == 1 and str(model) in err and "Traceback" not in err, err


@pytest.fixture(scope="module")
def words_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("words") / "words.txt"
    path.write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def saved(corpus, tmp_path_factory) -> dict[str, Path]:
    """A SentencePiece BPE and (where installed) a youtokentome BPE folder as segrl saves them."""
    root = tmp_path_factory.mktemp("saved")
    folders = {"bpe": SentencePieceBPE(vocab_size=80).train(corpus).save(root / "bpe")}
    if yttm_available():
        folders["yttm"] = YttmBPE(vocab_size=80).train(corpus).save(root / "yttm")
    return folders


def damaged_copies(folder: Path, name: str, into: Path) -> list[Path]:
    """Copies of the saved ``folder`` whose model file ``name`` is random, empty, a pickle, or its
    first part only."""
    whole = (folder / name).read_bytes()
    contents = {
        "random": bytes(range(256)) * 2,
        "empty": b"",
        "pickle": pickle.dumps({"pieces": ["walk", "ed"]}),
        "cut": whole[: len(whole) // 2],
    }
    copies = []
    for kind, content in contents.items():
        copy = into / f"{folder.name}-{kind}"
        copy.mkdir()
        for file in folder.iterdir():
            (copy / file.name).write_bytes(file.read_bytes())
        (copy / name).write_bytes(content)
        copies.append(copy)
    return copies


@needs_yttm
def test_a_damaged_saved_youtokentome_model_is_refused_not_aborted(saved, words_file, tmp_path):
    copies = damaged_copies(saved["yttm"], "yttm.model", tmp_path)
    results = run_segment([saved["yttm"], *copies], words_file)
    assert results[0][0] == 0, results[0]
    assert_refused(results[1:], copies)
    assert "(0 bytes, saved with" in results[2][1]  # the empty one: its recorded size


def test_a_damaged_saved_sentencepiece_model_is_refused(saved, words_file, tmp_path):
    copies = damaged_copies(saved["bpe"], "sentencepiece.model", tmp_path)
    assert_refused(run_segment(copies, words_file), copies)


def test_a_changed_saved_model_is_refused_though_its_library_reads_it(saved, corpus, tmp_path):
    """A file edited into another valid model: the library loads it and segments otherwise, and
    only the size and SHA-256 that ``save`` recorded tell it from the saved one."""
    folder = tmp_path / "bpe"
    SentencePieceBPE(vocab_size=80).train(corpus).save(folder)
    model = ModelProto.FromString((folder / "sentencepiece.model").read_bytes())
    merged = max((p for p in model.pieces if len(p.piece) > 2), key=lambda p: p.score)
    merged.score = -1e9  # never chosen: words that used it are segmented otherwise
    edited = model.SerializeToString()
    processor = spm.SentencePieceProcessor(model_proto=edited)
    word = merged.piece.lstrip("\u2581")
    assert processor.encode(word, out_type=str) != load_segmenter(folder).segment_words([word])
    (folder / "sentencepiece.model").write_bytes(edited)
    with pytest.raises(ModelError, match=r"sentencepiece\.model: not the file this segmenter was"):
        load_segmenter(folder)


def test_folders_saved_without_fingerprints_still_load(saved, tmp_path):
    folder = tmp_path / "old"
    folder.mkdir()
    for file in saved["bpe"].iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    meta = json.loads((folder / "segmenter.json").read_text(encoding="utf-8"))
    assert set(meta.pop("files")) == {"sentencepiece.model"}
    (folder / "segmenter.json").write_text(json.dumps(meta), encoding="utf-8")
    assert load_segmenter(folder).segment_words(WORDS) == load_segmenter(
        saved["bpe"]
    ).segment_words(WORDS)


@pytest.fixture(scope="module")
def spm_file(tmp_path_factory) -> Path:
    """A unigram model as ``spm_train`` writes it (no fingerprint: only its layout is checked)."""
    text = write_small_corpus(tmp_path_factory.mktemp("text") / "small.txt")
    prefix = tmp_path_factory.mktemp("spm") / "en"
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(prefix), vocab_size=60, minloglevel=2, num_threads=1
    )
    return prefix.with_suffix(".model")


def test_every_cut_of_a_sentencepiece_model_file_is_refused(spm_file, tmp_path):
    whole = spm_file.read_bytes()
    model = ModelProto.FromString(whole)
    # the file's first k pieces: SentencePiece writes its pieces first, then its settings
    at_pieces = [len(ModelProto(pieces=model.pieces[:k]).SerializeToString()) for k in (5, 30)]
    at_settings = len(
        ModelProto(pieces=model.pieces, trainer_spec=model.trainer_spec).SerializeToString()
    )
    evenly = range(0, len(whole), max(1, len(whole) // 40))
    for n in sorted({*evenly, *at_pieces, at_settings}):
        cut = tmp_path / f"cut{n}.model"
        cut.write_bytes(whole[:n])
        with pytest.raises(ModelError) as refused:
            load_segmenter(cut)
        assert "\n" not in str(refused.value) and str(cut) in str(refused.value)
        if n in (*at_pieces, at_settings):
            # SentencePiece itself loads these and segments otherwise: the probe's silent cut
            assert spm.SentencePieceProcessor(model_proto=whole[:n]).get_piece_size() > 0
            assert "a SentencePiece model cut short" in str(refused.value)
            assert "pieces are not followed by its" in str(refused.value)


@needs_yttm
def test_every_cut_of_a_youtokentome_model_file_is_refused(tmp_path, words_file):
    text = write_small_corpus(tmp_path / "small.txt")
    model = tmp_path / "yttm.model"
    yttm = Path(sys.executable).with_name("yttm")
    subprocess.run(
        [yttm, "bpe", "--data", text, "--model", model, "--vocab_size", "60", "--n_threads", "1"],
        check=True,
        capture_output=True,
    )
    whole = model.read_bytes()
    cuts = []
    for n in range(0, len(whole) - 1, 7):  # the last byte is the final newline: not a cut
        cut = tmp_path / f"cut{n}.model"
        cut.write_bytes(whole[:n])
        cuts.append(cut)
    assert_refused(run_segment(cuts, words_file), cuts)
    assert run_segment([model], words_file) == [(0, "")]
