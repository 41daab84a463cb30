"""The language models' public API: segmentations in, scores out, in the shapes the evaluators use."""

from __future__ import annotations

import math

import pytest
import torch

from segrl.data.vocab import CharVocab
from segrl.errors import ConfigError, ModelError
from segrl.lm import LMConfig, SegmentedBatch, build_lexicon, build_lm, load_lm, save_lm
from segrl.lm.training import LMTrainer, bits_per_char

VOCAB = CharVocab.from_texts(["the cats walked home", "unexpectedly"], "?")


pytestmark = pytest.mark.usefixtures("one_thread")


def small(model="slm", **options):
    torch.manual_seed(0)
    config = LMConfig(
        model=model, char_dim=8, embedding_dim=16, hidden_dim=16, speller_dim=16, **options
    )
    return build_lm(config, VOCAB)


def test_decisions_become_segments_with_spaces_forced():
    texts = ["the cats", "walked"]
    decisions = torch.tensor([[0, 1, 0, 0, 0, 0, 1], [0, 0, 0, 1, 0, 0, 0]])
    batch = SegmentedBatch.from_decisions(VOCAB, texts, decisions)
    assert batch.segments() == [["th", "e", "cat", "s"], ["walk", "ed"]]
    assert batch.ends[0].tolist() == [0, 1, 1, 0, 0, 0, 1, 1]
    assert batch.flippable[0].tolist() == [1, 1, 0, 0, 1, 1, 1, 0]
    assert batch.flippable[1].tolist() == [1, 1, 1, 1, 1, 0, 0, 0]
    # forced positions and those past the end are ignored whatever their value
    forced = torch.tensor([[0, 1, 0, 1, 0, 0, 1], [0, 0, 0, 1, 0, 1, 1]])
    assert SegmentedBatch.from_decisions(VOCAB, texts, forced).segments() == batch.segments()
    assert batch.decisions()[0].tolist() == [0, 1, 1, 1, 0, 0, 1]
    again = SegmentedBatch.from_segments(VOCAB, [["th", "e ", "cat", "s"], ["walk", "ed"]])
    assert torch.equal(again.ends, batch.ends)
    hidden = SegmentedBatch.from_decisions(VOCAB, ["thecats"], torch.tensor([[0, 0, 1, 0, 0, 1]]))
    assert hidden.segments() == [["the", "cat", "s"]]  # word discovery: every position is free
    assert hidden.flippable[0].tolist() == [1, 1, 1, 1, 1, 1, 0]
    rows, starts, lengths = batch.segment_spans()
    assert list(zip(rows.tolist(), starts.tolist(), lengths.tolist(), strict=True)) == [
        (0, 0, 2), (0, 2, 1), (0, 4, 3), (0, 7, 1), (1, 0, 4), (1, 4, 2)
    ]  # fmt: skip


def test_texts_the_models_cannot_generate_are_refused():
    for bad in ["", " the", "the  cat", "cat "]:
        with pytest.raises(ModelError, match="text 0"):
            SegmentedBatch.from_segments(VOCAB, [[bad]])
    with pytest.raises(ModelError, match="columns"):
        SegmentedBatch.from_decisions(VOCAB, ["walked"], torch.zeros(1, 3))
    no_space = CharVocab.from_texts(["abc"], "?")
    with pytest.raises(ModelError, match="no space character"):
        SegmentedBatch.from_segments(no_space, [["a", " ", "b"]])


@pytest.mark.parametrize("model", ["slm", "segment-lstm"])
def test_scores_per_position_sum_to_the_total_and_sit_at_segment_ends(model):
    lm = small(model).eval()
    batch = lm.segmented(segments=[["the", " ", "cat", "s"], ["walk", "ed", " ", "home"]])
    scores = lm.score(batch)
    assert scores.per_position.shape == batch.ends.shape
    assert torch.allclose(scores.per_position.sum(1), scores.total)
    assert ((scores.per_position != 0) == batch.ends).all()
    assert (scores.total < 0).all()
    assert scores.n_chars.tolist() == [9, 12]
    expected = -scores.total / (scores.n_chars * math.log(2))
    assert torch.allclose(scores.bits_per_char(), expected)
    # a segment's contribution in slm depends only on its span and the characters before it
    if model == "slm":
        other = lm.score(lm.segmented(segments=[["the", " ", "c", "a", "t", "s"]]))
        assert other.per_position[0, 2].item() == pytest.approx(scores.per_position[0, 2].item())


def test_batching_and_padding_do_not_change_scores():
    for model in ("slm", "segment-lstm"):
        lm = small(model).eval()
        alone = lm.score(lm.segmented(segments=[["walk", "ed"]])).total
        padded = lm.score(lm.segmented(segments=[["walk", "ed"], ["the", " ", "cats", " ", "x"]]))
        assert padded.total[0].item() == pytest.approx(alone.item(), abs=1e-5)
    slm = small("slm").eval()
    assert slm.log_marginal(slm.encode(["walked"])).item() == pytest.approx(
        slm.log_marginal(slm.encode(["walked", "the cats walked home"]))[0].item(), abs=1e-5
    )


def test_segments_longer_than_the_limit_are_impossible():
    lm = small("slm", max_segment_length=3).eval()
    batch = lm.segmented(segments=[["walk", "ed"]])
    assert lm.score(batch).total.item() == -math.inf
    with pytest.raises(ModelError, match="max_segment_length=3"):
        LMTrainer(lm).step(batch)
    fine = lm.segmented(segments=[["wal", "k", "ed"]])
    flips = lm.flip_scores(fine)
    assert flips[0, 2].item() == math.inf  # merging "wal" and "k" needs 4 characters
    assert math.isfinite(flips[0, 3].item())


@pytest.mark.parametrize("model", ["slm", "segment-lstm"])
def test_save_and_load_give_the_same_scores(tmp_path, model):
    lexicon = ["the", "cat", "s"] if model == "segment-lstm" else None
    torch.manual_seed(0)
    config = LMConfig(model=model, char_dim=8, embedding_dim=16, hidden_dim=16, speller_dim=16)
    lm = build_lm(config, VOCAB, lexicon).eval()
    batch = lm.segmented(segments=[["the", " ", "cat", "s"]])
    path = save_lm(lm, tmp_path / "lm")
    assert sorted(p.name for p in path.iterdir()) == ["model.pt", "vocab.json"]
    loaded = load_lm(path).eval()
    assert loaded.vocab == VOCAB and loaded.config == config
    assert torch.equal(lm.score(batch).total, loaded.score(batch).total)
    save_lm(lm, path)  # replacing a saved model leaves nothing else behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lm"]
    with pytest.raises(ModelError, match="no saved language model"):
        load_lm(tmp_path / "missing")
    (path / "model.pt").write_bytes(b"not a model")
    with pytest.raises(ModelError, match="damaged"):
        load_lm(path)


def test_bad_configs_are_config_errors():
    with pytest.raises(ConfigError, match="model must be one of: slm, segment-lstm; got 'gpt'"):
        build_lm(LMConfig(model="gpt"), VOCAB)
    with pytest.raises(ConfigError, match="slm's lexicon needs context = 'none'"):
        build_lm(LMConfig(model="slm"), VOCAB, ["the"])  # context "lstm"
    with pytest.raises(ConfigError, match="max_segment_length"):
        build_lm(LMConfig(max_segment_length=0), VOCAB)


def test_lexicon_keeps_frequent_segments():
    segmentations = [["the", "cat", "s"], ["the", "dog", "s"], ["a", "cat"]]
    assert build_lexicon(segmentations, size=10) == ["cat", "s", "the"]
    assert build_lexicon(segmentations, size=2) == ["cat", "s"]
    assert build_lexicon(segmentations, size=10, min_count=1)[-1] == "dog"


def test_training_on_segmentations_and_on_the_marginal_lowers_the_loss():
    texts = ["the cats walked home", "the cat walked"] * 4
    for model in ("slm", "segment-lstm"):
        lm = small(model, dropout=0.0)
        words = [[w for word in t.split() for w in (" ", word)][1:] for t in texts]
        batch = lm.segmented(segments=words)
        before = bits_per_char(lm, texts, words)
        trainer = LMTrainer(lm, lr=1e-2)
        for _ in range(15):
            stats = trainer.step(batch)
        assert stats["bits_per_char"] == pytest.approx(stats["nll"] / math.log(2))
        assert bits_per_char(lm, texts, words) < before - 0.5
        assert lm.training  # the trainer restores the mode it found
    slm = small("slm", dropout=0.0)
    before = bits_per_char(slm, texts)
    trainer = LMTrainer(slm, lr=1e-2)
    for _ in range(15):
        trainer.marginal_step(texts)
    assert bits_per_char(slm, texts) < before - 0.5
    assert trainer.steps == 15
    fresh = LMTrainer(small("slm", dropout=0.0), lr=1e-2)
    fresh.load_state_dict(trainer.state_dict())
    assert bits_per_char(fresh.model, texts) == pytest.approx(bits_per_char(slm, texts))
    with pytest.raises(ValueError, match="do not spell"):
        bits_per_char(slm, ["the cats"], [["the", "cats"]])  # the space is missing
    with pytest.raises(ConfigError, match="needs the slm language model"):
        LMTrainer(small("segment-lstm")).marginal_step(texts)


def test_ragged_lstm_is_an_lstm():
    """The ragged LSTM gives what ``nn.LSTM`` with the same weights gives on each sequence alone."""
    from segrl.lm.rnn import RaggedLSTM

    torch.manual_seed(0)
    embedding = torch.nn.Embedding(7, 5)
    ragged = RaggedLSTM(embedding, 4)
    reference = torch.nn.LSTM(5, 4, batch_first=True)
    cell = ragged.cell
    reference.load_state_dict(
        {
            "weight_ih_l0": cell.weight_ih,
            "weight_hh_l0": cell.weight_hh,
            "bias_ih_l0": cell.bias_ih,
            "bias_hh_l0": cell.bias_hh,
        }
    )
    inputs = torch.tensor([[1, 2, 3, 0], [4, 5, 6, 6], [2, 0, 0, 0]])
    lengths = torch.tensor([3, 4, 1])
    h0, c0 = torch.randn(3, 4), torch.randn(3, 4)
    output, row, step, last = ragged(inputs, lengths, (h0, c0))
    assert output.shape == (8, 4) and step.tolist() == [0, 0, 0, 1, 1, 2, 2, 3]
    for n in range(3):
        state = (h0[n].view(1, 1, 4), c0[n].view(1, 1, 4))
        expected, _ = reference(embedding(inputs[n : n + 1, : lengths[n]]), state)
        mine = output[row == n]
        assert torch.allclose(mine, expected[0], atol=1e-6)
        assert torch.allclose(last[n], expected[0, -1], atol=1e-6)


def test_lm_segmenter_decodes_by_viterbi_or_by_posterior():
    from itertools import product

    from segrl.lm.decoding import LMSegmenter

    torch.manual_seed(3)
    model = build_lm(
        LMConfig(model="slm", context="none", char_dim=8, hidden_dim=8, speller_dim=8), VOCAB
    )
    words = ["cats", "walked", "home", "a"]
    viterbi = LMSegmenter(model, decoding="viterbi").segment_words(words)
    posterior = LMSegmenter(model, decoding="posterior").segment_words(words)
    for word, v, p in zip(words, viterbi, posterior, strict=True):
        assert "".join(v) == word and "".join(p) == word
    word = "walked"
    # posterior decoding splits exactly where the exact posterior of a boundary is above one half,
    # the posterior being the mass of the segmentations that split there (by enumeration)
    splits = list(product([0, 1], repeat=len(word) - 1))
    batch = model.segmented(texts=[word] * len(splits), decisions=[list(s) for s in splits])
    with torch.no_grad():
        weights = torch.softmax(model.score(batch).total, dim=0)
    mass = [float(sum(w for w, s in zip(weights, splits, strict=True) if s[k])) for k in range(5)]
    expected = [k + 1 for k in range(5) if mass[k] > 0.5]
    cuts = [0, *expected, len(word)]
    assert posterior[1] == [word[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
    best = max(range(len(splits)), key=lambda i: float(weights[i]))
    cuts = [0, *[k + 1 for k in range(5) if splits[best][k]], len(word)]
    assert viterbi[1] == [word[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
    with pytest.raises(ConfigError, match="viterbi or posterior"):
        LMSegmenter(model, decoding="greedy")
    # another threshold splits where the posterior is above it: here between the positions'
    # posteriors, so that each threshold gives another segmentation
    ranked = sorted(mass)
    for low, high in zip(ranked, ranked[1:], strict=False):
        threshold = (low + high) / 2
        cuts = [0, *[k + 1 for k in range(5) if mass[k] > threshold], len(word)]
        at = LMSegmenter(model, decoding="posterior", threshold=threshold).segment_words(words)
        assert at[1] == [word[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
        assert len(at[1]) == 1 + sum(m > threshold for m in mass)
    with pytest.raises(ConfigError, match="threshold"):
        LMSegmenter(model, decoding="posterior", threshold=1.0)


def test_an_unset_context_builds_the_model_without_context():
    from segrl.lm.config import resolve_lm_config

    vocab = CharVocab.from_texts(["walked talks"], "?")
    unset = LMConfig(context=None, hidden_dim=8, speller_dim=8, char_dim=4)
    model = build_lm(resolve_lm_config(unset, "text"), vocab)  # resolved as a job resolves it
    assert model.config.context == "none"


def test_a_model_is_built_from_a_resolved_config_only(tmp_path):
    """``build_lm`` decides nothing: an option left unset is an error naming it; a model file saved
    before configs were resolved (options saved as None) loads as its model read them then."""
    from segrl.checkpoint import load_tensor_file, save_tensor_file
    from segrl.lm.models import MODEL_FILE

    with pytest.raises(ConfigError, match="context, length_penalty unset"):
        build_lm(LMConfig(context=None, length_penalty=None), VOCAB)
    model = build_lm(LMConfig(context="none", hidden_dim=8, speller_dim=8, char_dim=4), VOCAB)
    assert model.config.max_segment_length == -1 and model.config.length_penalty == 0.0
    path = save_lm(model, tmp_path / "old")
    saved = load_tensor_file(path / MODEL_FILE)
    saved["config"].update(max_segment_length=None, length_penalty=None)  # as saved before
    save_tensor_file(saved, path / MODEL_FILE)
    loaded = load_lm(path)
    assert (loaded.config.max_segment_length, loaded.config.length_penalty) == (-1, 0.0)
    chars = loaded.encode(["ab ba"])
    assert torch.equal(loaded.eval().log_marginal(chars), model.eval().log_marginal(chars))
