"""The sequence-reduction autoencoder: the reducing attention's shapes and masks, the number of latent
vectors per sentence, independence of the batch, the window initialisation, reconstruction learning
on a tiny corpus, config errors and ``segrl units train --model seqreduce`` (resume is checked with
the other models in test_units_infra)."""

import pytest
import torch

from segrl.cli import main
from segrl.data.corpus import PLACEHOLDER
from segrl.data.vocab import CharVocab
from segrl.errors import ConfigError
from segrl.tracking.queries import segmenter_runs
from segrl.units.base import RECONSTRUCTION, make_autoencoder_batch
from segrl.units.config import build_units_config
from segrl.units.evaluation import ACCURACY, KEPT_PER_CHAR, reconstruction_metrics, segment_texts
from segrl.units.seqreduce import (
    EXPANSION_MAP,
    REDUCTION_MAP,
    ReducingAttention,
    SeqReduceAutoencoder,
    SeqReduceConfig,
    window_scale,
)

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = ["the cat sat on the mat", "a dog", "cats and dogs and mats", "x"]
SMALL = {"dim": 32, "attention_dim": 32, "feed_forward": 32, "max_len": 40}


@pytest.fixture
def vocab():
    return CharVocab.from_texts(TEXTS, PLACEHOLDER)


def model_of(vocab, **changes):
    torch.manual_seed(0)
    return SeqReduceAutoencoder(SeqReduceConfig(**{**SMALL, **changes}), len(vocab)).eval()


@pytest.mark.parametrize(
    ("latents", "expected"),
    [("proportional", [6, 2, 6, 1]), ("fixed", [10, 10, 10, 10])],
)
def test_shapes_masks_and_latent_counts(vocab, latents, expected):
    model = model_of(vocab, latents=latents)
    batch = make_autoencoder_batch(vocab, TEXTS)  # 22, 5, 22 and 1 characters
    out = model.loss(batch)
    e = out.encoding
    assert e.kept.tolist() == expected  # ceil(0.25 n), or ceil(0.25 * max_len) = 10 for all
    assert e.memory.shape == (4, max(expected), 32)
    assert e.memory_mask.sum(1).tolist() == expected
    assert torch.all(e.memory[~e.memory_mask] == 0)  # vectors beyond a sentence's count are empty
    assert e.attention.shape == (4, 22, max(expected))  # rows: characters, columns: latents
    rows = e.attention[1, :5]
    assert torch.allclose(rows.sum(-1), torch.ones(5))
    assert torch.all(rows[:, expected[1] :] == 0)  # a character is rebuilt only from its latents
    assert e.layer_attention[REDUCTION_MAP].shape == e.attention.shape
    assert set(e.layer_attention) == {"layer 1", REDUCTION_MAP, EXPANSION_MAP}
    assert out.logits.shape == (4, 23, len(vocab))  # every character and <eos>, all at once
    assert torch.isfinite(out.total)


def test_reduction_reads_only_the_sentence_and_queries_mix_only_its_positions():
    attention = ReducingAttention(3, 6, dim=8, attention_dim=8, heads=2, scale=torch.randn(3, 6))
    x = torch.randn(1, 6, 8)
    mask = torch.tensor([[True, True, True, True, False, False]])
    out, weights = attention(x, mask, rows=2)
    assert out.shape == (1, 2, 8) and weights.shape == (1, 2, 2, 6)
    assert torch.all(weights[..., 4:] == 0)
    changed = x.clone()
    changed[:, 4:] = torch.randn(1, 2, 8)  # whatever sits at masked positions changes nothing
    assert torch.allclose(attention(changed, mask, rows=2)[0], out)
    with pytest.raises(ValueError, match="exceed"):
        attention(x, mask, rows=4)


def test_a_sentence_is_encoded_and_decoded_the_same_in_any_batch(vocab):
    for latents in ("proportional", "fixed"):
        model = model_of(vocab, latents=latents)
        alone = make_autoencoder_batch(vocab, ["a dog"])
        together = make_autoencoder_batch(vocab, TEXTS)
        with torch.no_grad():
            a, b = (
                model.encode(alone.source, alone.source_mask),
                model.encode(together.source, together.source_mask),
            )
            k = int(a.kept[0])
            assert torch.allclose(a.memory[0, :k], b.memory[1, :k], atol=1e-5)
            logits_alone = model.decode(a, alone.decoder_input, alone.target_mask)
            logits_together = model.decode(b, together.decoder_input, together.target_mask)
        assert torch.allclose(logits_alone[0], logits_together[1, :6], atol=1e-5)
        assert segment_texts(model, vocab, ["a dog"]) == [segment_texts(model, vocab, TEXTS)[1]]


def test_window_scale_averages_the_positions_each_latent_covers():
    reduce = window_scale(3, 10, 0.25, reduce=True)
    assert reduce[0].tolist() == [0.25] * 4 + [0.0] * 6
    assert reduce[2].tolist() == [0.0] * 8 + [0.5, 0.5]
    assert torch.allclose(reduce.sum(1), torch.ones(3))
    expand = window_scale(11, 3, 0.25, reduce=False)
    assert expand.argmax(1).tolist() == [0] * 4 + [1] * 4 + [2] * 3  # the last rows read the last
    assert torch.all(expand.sum(1) == 1)


def test_window_initialised_expansion_reads_blocks_of_one_over_ratio(vocab):
    """W^S of the expansion starts one-hot (position i reads latent floor(i * ratio)); with queries
    and keys the identity, position i's query is its own latent, which it matches best (latents have
    equal norms after the LayerNorm): segments of 1 / ratio characters."""
    model = model_of(vocab, encoder_layers=0, decoder_layers=0)
    with torch.no_grad():
        for projection in (model.expand.query, model.expand.key):
            projection.weight.copy_(3.0 * torch.eye(32))
            projection.bias.zero_()
    assert segment_texts(model, vocab, ["the cat sat"]) == [["the ", "cat ", "sat"]]


def test_reconstruction_learns_on_a_tiny_corpus(vocab):
    torch.manual_seed(0)
    model = SeqReduceAutoencoder(SeqReduceConfig(**SMALL, ratio=0.5), len(vocab))
    texts = TEXTS[:3]
    before, _ = reconstruction_metrics(model, vocab, texts)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(300):
        loss = model.loss(make_autoencoder_batch(vocab, texts)).total
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert model.reduce.scale.grad is not None and model.expand.scale.grad.abs().sum() > 0
    after, diagnostics = reconstruction_metrics(model, vocab, texts)
    assert after[RECONSTRUCTION] < 0.5 * before[RECONSTRUCTION]
    # from about 0.02 untrained; 0.885-1.0 after 300 steps over seeds 0-2 on this project's CPU
    # machine (0.885 for seed 0: the old bound of 0.9 held on one machine's rounding, not another's)
    assert before[ACCURACY] < 0.2 and after[ACCURACY] > 0.8
    lengths = [len(t) for t in texts]
    expected = sum((n + 1) // 2 for n in lengths) / sum(lengths)
    assert diagnostics[KEPT_PER_CHAR] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"arch.ratio": 0.0}, "arch.ratio must be in"),
        ({"arch.ratio": 1.5}, "arch.ratio must be in"),
        ({"arch.latents": "some"}, "arch.latents must be one of: proportional, fixed"),
        ({"arch.scale_init": "zeros"}, "arch.scale_init must be one of: window, random"),
        ({"arch.heads": 3}, "divisible by arch.heads"),
    ],
)
def test_config_errors(override, message):
    with pytest.raises(ConfigError, match=message):
        build_units_config("seqreduce", None, override)


def test_paper_training_defaults():
    config = build_units_config("seqreduce")
    t = config.train
    assert (t.optimizer, t.lr, t.batch_size, t.deletion_prob) == ("adamw", 1e-3, 16, 0.0)
    assert config.arch.dropout == 0.0


@pytest.mark.slow
def test_units_cli_train_seqreduce(mlflow_store, small_corpus_file, tmp_path, capsys):
    folder = tmp_path / "seqreduce"
    args = ["units", "train", "--model", "seqreduce", "--steps", "8", "--out", str(folder)]
    args += ["--corpus", str(small_corpus_file), "--gold-max-words", "30", "--threads", "1"]
    tiny = {f"arch.{k}": v for k, v in SMALL.items() if k != "max_len"}
    tiny.update({"eval.robustness": "false", "eval.figure_valid_sentences": 1})
    args += [f"--set={k}={v}" for k, v in tiny.items()]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "[seqreduce] segment_f1" in out and "kept_per_char 0.2" in out  # ceil(n / 4) / n
    [row] = segmenter_runs()
    assert (row["segmenter"], row["kind"]) == ("seqreduce", "units")
    assert 0 < row["gold_units_per_char"] < 0.6  # at most ceil(n / 4) segments for a word of n
    assert list((mlflow_store / "mlruns").rglob("attention/sentence_0.png"))
    assert main(["compare"]) == 0
    assert "seqreduce  units" in capsys.readouterr().out
