"""Batching, checkpoints, devices, and segments read off attention: what every neural part uses."""

import random

import numpy as np
import pytest
import torch

from segrl.checkpoint import load_checkpoint, save_checkpoint
from segrl.data.batching import encode_batch, iterate_batches
from segrl.data.corpus import PLACEHOLDER
from segrl.data.gold import GoldWord
from segrl.data.vocab import CharVocab
from segrl.errors import ConfigError, ModelError
from segrl.metrics import (
    BOUNDARY_F1,
    SEGMENT_F1,
    UNITS_PER_CHAR,
    WORD_BOUNDARY_F1,
    despace,
    evaluate_sentence_segmenter,
)
from segrl.runtime import resolve_device, seed_everything, set_threads
from segrl.units.segments import segments_from_attention


def test_encode_batch_pads_and_masks():
    vocab = CharVocab.from_texts(["abc"], PLACEHOLDER)
    batch = encode_batch(vocab, ["ab", "cabz"])
    assert batch.ids.shape == (2, 4)
    assert batch.lengths.tolist() == [2, 4]
    assert batch.mask.tolist() == [[True, True, False, False], [True] * 4]
    assert batch.ids[0, 2:].tolist() == [vocab.pad_id] * 2
    assert batch.ids[1, 3].item() == vocab.unk_id
    assert encode_batch(vocab, ["ab"], max_len=6).ids.shape == (1, 6)
    with pytest.raises(ValueError, match="does not fit"):
        encode_batch(vocab, ["abcabc"], max_len=3)


def test_iterate_batches_covers_everything_once():
    texts = [str(i) for i in range(10)]
    batches = list(iterate_batches(texts, 4, shuffle=True, seed=1))
    assert [len(b) for b in batches] == [4, 4, 2]
    assert sorted(sum(batches, [])) == sorted(texts)
    assert batches == list(iterate_batches(texts, 4, shuffle=True, seed=1))


def test_checkpoint_restores_state_and_rng(tmp_path):
    model = torch.nn.Linear(3, 2)
    seed_everything(0)
    path = save_checkpoint(tmp_path / "last.pt", model=model.state_dict(), step=7)
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.random(), np.random.rand(), torch.rand(1)  # move every generator on
    state = load_checkpoint(path)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected
    assert state["step"] == 7
    fresh = torch.nn.Linear(3, 2)
    fresh.load_state_dict(state["model"])
    assert torch.equal(fresh.weight, model.weight)
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temporary files left


def test_damaged_checkpoint_is_a_model_error(tmp_path):
    (tmp_path / "bad.pt").write_bytes(b"truncated")
    with pytest.raises(ModelError, match="bad.pt: damaged"):
        load_checkpoint(tmp_path / "bad.pt")
    with pytest.raises(ModelError, match="no checkpoint"):
        load_checkpoint(tmp_path / "none.pt")


def test_resolve_device():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type in ("cpu", "cuda")
    with pytest.raises(ConfigError):
        resolve_device("tpu-nonsense")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA GPU"):
            resolve_device("cuda")


def test_a_jobs_cpu_settings_flush_denormal_floats():
    """``set_threads`` (every job's CPU settings) flushes denormal floats to zero, where a CPU
    computes slowly; normal floats are untouched."""
    threads = torch.get_num_threads()
    try:
        torch.set_flush_denormal(False)  # as a fresh process has it (a job earlier may have set it)
        denormal = torch.tensor([1e-39], dtype=torch.float32)  # below float32's normal range
        assert (denormal * 1.0).item() > 0.0
        set_threads(None)
        assert torch.get_num_threads() == threads
        assert (denormal * 1.0).item() == 0.0
        assert (torch.tensor([1e-30]) * 1.0).item() == pytest.approx(1e-30)
        with pytest.raises(ConfigError, match="--threads"):
            set_threads(0)
    finally:
        torch.set_num_threads(threads)


def test_segments_from_attention():
    attention = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    assert segments_from_attention(attention, "abca") == ["ab", "c", "a"]
    assert segments_from_attention(torch.tensor(attention), "abc") == ["ab", "c"]
    assert segments_from_attention(attention, "") == []
    with pytest.raises(ValueError):
        segments_from_attention(attention, "abcde")


def test_despace_and_sentence_segmenter_metrics():
    assert despace(["the ", "c", "at s", " "]) == ["the", "c", "ats"]

    def per_word(sentences):  # splits at spaces and after a word's first character
        out = []
        for sentence in sentences:
            segments = []
            for i, word in enumerate(sentence.split(" ")):
                segments += ([" "] if i else []) + (
                    [word[0], word[1:]] if len(word) > 1 else [word]
                )
            out.append(segments)
        return out

    gold = [GoldWord("cats", (("c", "ats"),)), GoldWord("dog", (("dog",),))]
    metrics = evaluate_sentence_segmenter(per_word, gold, ["the cats"])
    assert metrics[BOUNDARY_F1] == pytest.approx(2 / 3)  # one hit, two predicted, one gold
    assert metrics[UNITS_PER_CHAR] == pytest.approx(4 / 7)
    # words the, cats vs segments t, he, c, ats: each word matches one segment
    assert metrics[SEGMENT_F1] == pytest.approx(
        ((2 * (2 / 3) / (1 + 2 / 3)) + (2 * 0.75 / 1.75)) / 2
    )
    # word boundary after "the" found, plus two spurious ones: P 1/3, R 1
    assert metrics[WORD_BOUNDARY_F1] == pytest.approx(0.5)
