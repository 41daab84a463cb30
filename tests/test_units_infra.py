"""The shared unit-model infrastructure: layers, batches, noise, configs, the training loop, resume,
saving and evaluation, the ``segrl units`` command; exercised with the plain Transformer."""

import random
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from mlflow.tracking import MlflowClient

from segrl.cli import EXIT_USER_ERROR, main
from segrl.data import load_corpus
from segrl.data.corpus import PLACEHOLDER
from segrl.data.vocab import CharVocab
from segrl.errors import ConfigError, ModelError
from segrl.experiments.units_train import train_unit_model, training_batches
from segrl.jobs import CHECKPOINT_FILE
from segrl.metrics import BOUNDARY_F1, SEGMENT_F1
from segrl.tracking.queries import segmenter_runs
from segrl.tracking.runs import start_run
from segrl.tracking.store import tracking_uri
from segrl.units.base import RECONSTRUCTION, make_autoencoder_batch
from segrl.units.config import build_units_config, units_config_class
from segrl.units.evaluation import reconstruction_metrics, segment_texts
from segrl.units.layers import Attention, masked_softmax
from segrl.units.noise import delete_characters, noise_alphabet, perturb
from segrl.units.registry import model_class
from segrl.units.saving import load_unit_model
from segrl.units.stepping import UnitTrainer, lr_factor, matmul_tf32, noised
from segrl.units.transformer import TransformerAutoencoder, TransformerConfig

TINY = {
    "arch.dim": 32,
    "arch.feed_forward": 32,
    "arch.encoder_layers": 2,
    "arch.decoder_layers": 1,
    "train.batch_size": 16,
    "eval_every": 1000,
    "log_every": 5,
    "threads": 1,
    "gold.max_words": 60,
    "eval.gold_words_during_training": 30,
    "eval.robustness_sentences": 8,
    "eval.robustness_rates": [0.0, 0.2],
    "eval.robustness_kinds": ["swap", "insert"],
    "eval.figure_valid_sentences": 1,
}


def tiny_config(corpus_file, tmp_path, model="transformer", **changes):
    overrides = {**TINY, "data.corpus": str(corpus_file), "out": str(tmp_path / "run")}
    overrides.update(changes)
    return build_units_config(model, None, overrides)


def test_attention_matches_torch_reference():
    torch.manual_seed(0)
    attention = Attention(8, heads=2)
    x = torch.randn(3, 5, 8)
    keys = torch.randn(3, 4, 8)
    mask = torch.tensor([[True] * 4, [True, True, False, False], [True, False, True, True]])
    out, weights = attention(x, keys, key_mask=mask)
    q = attention.split_heads(attention.query(x))
    k = attention.split_heads(attention.key(keys))
    v = attention.split_heads(attention.value(keys))
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
    assert torch.allclose(out, attention.out(attention.merge_heads(expected)), atol=1e-6)
    assert weights.shape == (3, 2, 5, 4)
    assert torch.allclose(weights.sum(-1), torch.ones(3, 2, 5))
    assert (weights[1, :, :, 2:] == 0).all()


def test_causal_attention_sees_no_future():
    attention = Attention(4)
    x = torch.randn(1, 5, 4)
    _, weights = attention(x, x, causal=True)
    assert (weights[0, 0].triu(1) == 0).all()


def test_fully_masked_rows_give_zero_weights_and_finite_gradients():
    logits = torch.randn(2, 3, requires_grad=True)
    mask = torch.tensor([[False, False, False], [True, False, True]])
    weights = masked_softmax(logits, mask)
    assert (weights[0] == 0).all()
    assert weights[1].sum().item() == pytest.approx(1.0)
    (weights * torch.arange(3.0)).sum().backward()
    assert torch.isfinite(logits.grad).all()


@pytest.mark.parametrize("case", ["mask", "mask+bias", "bias", "causal", "none"])
def test_fused_attention_is_the_explicit_function(case):
    """Without weights (training), fused attention gives the explicit attention's output and
    gradients: with a key mask (one query row with no key at all, which gives zero, not NaN), a
    per-key bias that takes gradients (NVIB's), causal right-padded keys, and none of these."""
    torch.manual_seed(0)
    explicit = Attention(8, heads=2, fused=False)
    fused = Attention(8, heads=2, fused=True)
    fused.load_state_dict(explicit.state_dict())
    x = torch.randn(3, 5, 8)
    keys = x if case == "causal" else torch.randn(3, 4, 8)
    size = keys.shape[1]
    mask = torch.ones(3, size, dtype=torch.bool)
    if case == "causal":
        mask[1, 3:] = False  # right padding
    elif "mask" in case:
        mask[1, 2:] = False
        mask[2] = False  # a sentence whose vectors were all dropped
    options = {"causal": case == "causal"}
    if case in ("mask", "mask+bias", "causal"):
        options["key_mask"] = mask
    results = []
    key_bias = torch.randn(3, size)
    for module in (explicit, fused):
        bias = key_bias.clone().requires_grad_(True)
        queries = x.clone().requires_grad_(True)
        kwargs = dict(options, key_bias=bias) if "bias" in case else options
        out, weights = module(queries, keys, need_weights=False, **kwargs)
        assert (weights is None) == (module is fused)
        rows = mask[1, :, None].expand(5, 8) if case == "causal" else torch.ones(5, 8).bool()
        loss = (out[1] * rows).pow(2).sum() + out[0].pow(2).sum() + out[2].pow(2).sum()
        loss.backward()
        results.append((out, queries.grad, bias.grad))
    (out_a, grad_a, bias_a), (out_b, grad_b, bias_b) = results
    if case == "causal":  # padded query rows are never read: compare the real ones
        out_a, out_b = out_a[1, :3], out_b[1, :3]
    assert torch.allclose(out_a, out_b, atol=1e-5)
    assert torch.allclose(grad_a, grad_b, atol=1e-5)
    if "bias" in case:
        assert torch.allclose(bias_a, bias_b, atol=1e-5)
    if case.startswith("mask"):
        assert torch.allclose(out_b[2], fused.out.bias.expand(5, 8))  # no key: output bias only
        assert torch.isfinite(grad_b).all()


def test_fused_attention_keeps_dropout_in_training_only():
    torch.manual_seed(0)
    attention = Attention(8, dropout=0.5)
    x = torch.randn(2, 6, 8)
    first, _ = attention(x, x, need_weights=False)
    second, _ = attention(x, x, need_weights=False)
    assert not torch.allclose(first, second)  # weights dropped at random
    attention.eval()
    third, _ = attention(x, x, need_weights=False)
    fourth, weights = attention(x, x)
    assert torch.allclose(third, fourth, atol=1e-6) and weights is not None


def test_trainer_reads_an_update_back_and_refuses_a_non_finite_loss():
    corpus = load_corpus()
    config = build_units_config("transformer", None, {"arch.dim": 16, "arch.feed_forward": 16})
    model = model_class("transformer")(config.arch, len(corpus.vocab))
    trainer = UnitTrainer(model, corpus.vocab, config.train, torch.device("cpu"), config.seed)
    batch = trainer.batch(corpus.train[:4], step=0)
    assert batch.noisy_texts == noised(corpus.train[:4], config.train.deletion_prob, 0, 0)
    before = [p.detach().clone() for p in model.parameters()]
    out = trainer.update(batch, progress=0.0)
    values = trainer.values(out, 0, "FOLDER")
    assert values["loss"] == pytest.approx(
        values[RECONSTRUCTION]
    )  # a plain Transformer: no penalty
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    out.total = torch.tensor(float("nan"))
    with pytest.raises(ModelError, match="non-finite loss at step 3 .*FOLDER is intact"):
        trainer.values(out, 3, "FOLDER")
    before = torch.get_float32_matmul_precision()
    with matmul_tf32(torch.device("cpu"), True):  # a CPU's products are left as they are
        assert torch.get_float32_matmul_precision() == before


def test_autoencoder_batch_layout():
    vocab = CharVocab.from_texts(["abc"], PLACEHOLDER)
    batch = make_autoencoder_batch(vocab, ["abc", "a"], ["ac", "a"])
    assert batch.source.tolist() == [vocab.encode("ac"), vocab.encode("a") + [vocab.pad_id]]
    assert batch.decoder_input[:, 0].tolist() == [vocab.bos_id] * 2
    assert batch.decoder_input[0, 1:].tolist() == vocab.encode("abc")
    assert batch.target[0].tolist() == vocab.encode("abc") + [vocab.eos_id]
    assert batch.target[1].tolist() == vocab.encode("a") + [vocab.eos_id] + [vocab.pad_id] * 2
    assert batch.target_mask.sum(1).tolist() == [4, 2]
    with pytest.raises(ValueError, match="empty"):
        make_autoencoder_batch(vocab, ["abc"], [""])


def test_deletion_noise():
    rng = random.Random(0)
    assert delete_characters("hello", 0.0, rng) == "hello"
    assert all(len(delete_characters("hello", 0.999, rng)) == 1 for _ in range(20))
    texts = ["abcdefghij" * 10] * 20
    deleted = sum(100 - len(delete_characters(t, 0.1, rng)) for t in texts)
    assert 120 < deleted < 280  # about 10% of 2000 characters


@pytest.mark.parametrize("kind", ["swap", "delete", "insert", "substitute"])
def test_perturbations(kind):
    rng = random.Random(1)
    alphabet = noise_alphabet(CharVocab.from_texts(["xyz abc"], PLACEHOLDER).symbols)
    assert " " not in alphabet and "x" in alphabet
    text = "the quick brown fox jumps over the lazy dog"
    assert perturb(text, kind, 0.0, rng, alphabet) == text
    noisy = perturb(text, kind, 0.3, rng, alphabet)
    assert noisy != text
    if kind == "swap":
        assert sorted(noisy) == sorted(text)
    elif kind == "delete":
        assert len(noisy) < len(text)
    elif kind == "insert":
        assert len(noisy) > len(text)
    else:
        assert len(noisy) == len(text)
    with pytest.raises(ValueError, match="unknown noise"):
        perturb(text, "shuffle", 0.1, rng, alphabet)


def test_units_config_layers(tmp_path):
    config = build_units_config("transformer", None, {"arch.dim": 64, "train.lr": 3e-4})
    assert isinstance(config.arch, TransformerConfig)
    assert (config.arch.dim, config.train.lr) == (64, 3e-4)
    assert type(config) is units_config_class("transformer")
    path = tmp_path / "run.toml"
    path.write_text('model = "transformer"\n[arch]\ndim = 48\n[train]\nsteps = 7\n')
    config = build_units_config(None, path, {"train.steps": 9})
    assert (config.model, config.arch.dim, config.train.steps) == ("transformer", 48, 9)
    with pytest.raises(ConfigError, match="unknown unit model 'bogus'"):
        build_units_config("bogus")
    with pytest.raises(ConfigError, match="unknown option 'arch.width'"):
        build_units_config("transformer", None, {"arch.width": 3})
    with pytest.raises(ConfigError, match="train.precision"):
        build_units_config("transformer", None, {"train.precision": "fp8"})


def test_registry_builds_models():
    cls = model_class("transformer")
    assert cls is TransformerAutoencoder
    model = cls(TransformerConfig(dim=16, feed_forward=16, encoder_layers=2), vocab_size=10)
    ids = torch.tensor([[4, 5, 6], [4, 5, 0]])
    training = model.encode(ids, ids != 0)  # a model in training builds no maps
    assert training.attention is None and training.layer_attention == {}
    encoding = model.eval().encode(ids, ids != 0)
    assert encoding.memory.shape == (2, 3, 16)
    assert encoding.attention.shape == (2, 3, 3)
    assert list(encoding.layer_attention) == ["layer 1", "layer 2"]
    assert encoding.kept.tolist() == [3.0, 2.0]


def test_lr_schedule_and_resumable_batches():
    config = build_units_config("transformer", None, {"train.steps": 10, "train.warmup_steps": 2})
    factors = [lr_factor(s, config.train) for s in range(10)]
    assert factors[:2] == [0.5, 1.0]
    assert factors[2] == pytest.approx(1.0) and factors[-1] < factors[5] < factors[2]
    texts = [str(i) for i in range(10)]
    straight = training_batches(texts, 4, seed=3)
    first = [next(straight) for _ in range(7)]
    resumed = training_batches(texts, 4, seed=3, start_step=4)
    assert [next(resumed) for _ in range(3)] == first[4:]
    assert sorted(sum(first[:3], [])) == sorted(texts)  # one epoch covers every text once


@pytest.mark.slow
def test_training_lowers_the_loss_and_registers_the_segmenter(
    mlflow_store, small_corpus_file, tmp_path
):
    config = tiny_config(small_corpus_file, tmp_path, **{"train.steps": 200, "train.lr": 3e-3})
    corpus = load_corpus(config.data)
    model = TransformerAutoencoder(config.arch, len(corpus.vocab))
    torch.manual_seed(config.seed)
    before, _ = reconstruction_metrics(model, corpus.vocab, corpus.valid)
    result = train_unit_model(config)
    assert result.metrics[RECONSTRUCTION] < before[RECONSTRUCTION] - 0.5
    for name in (SEGMENT_F1, BOUNDARY_F1, "reconstruction_clean", "kept_per_char"):
        assert 0.0 <= result.metrics[name] < 10
    assert result.metrics["kept_per_char"] == pytest.approx(1.0)
    rows = segmenter_runs()
    assert [(r["segmenter"], r["kind"]) for r in rows] == [("transformer", "units")]
    assert rows[0][SEGMENT_F1] == pytest.approx(result.metrics[SEGMENT_F1], abs=5e-5)  # 4 decimals
    artifacts = mlflow_store / "mlruns"
    assert list(artifacts.rglob("attention/sentence_0.png"))
    assert list(artifacts.rglob("robustness/accuracy.png"))
    assert not (result.run_dir / CHECKPOINT_FILE).exists()
    # the saved model gives the same segments as the trained one
    loaded, vocab, saved_config = load_unit_model(result.run_dir)
    assert saved_config == config
    texts = corpus.test[:5]
    with torch.no_grad():
        assert segment_texts(loaded, vocab, texts) == segment_texts(loaded, vocab, texts)
    assert vocab == corpus.vocab
    # the run's MLflow model and its folder load as the same segmenter
    from segrl import load_segmenter

    logged = load_segmenter(f"runs:/{result.run_id}/model")
    assert logged.kind == "units"
    assert logged.segment_sentences(texts) == segment_texts(loaded, vocab, texts)
    assert load_segmenter(result.run_dir).segment_sentences(texts) == logged.segment_sentences(
        texts
    )
    with pytest.raises(ConfigError, match="already holds a trained model"):
        train_unit_model(config)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["transformer", "seqreduce"])
def test_interrupted_training_resumes_to_the_same_model(
    model, mlflow_store, small_corpus_file, tmp_path, monkeypatch
):
    common = {"train.steps": 12, "checkpoint_every": 4, "eval.robustness": False}
    straight = tiny_config(small_corpus_file, tmp_path / "a", model, **common)
    expected = train_unit_model(straight)

    interrupted = tiny_config(small_corpus_file, tmp_path / "b", model, **common)
    import segrl.units.stepping as stepping

    calls = {"n": 0}
    real = stepping.make_autoencoder_batch

    def stop_at_step_7(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 8:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(stepping, "make_autoencoder_batch", stop_at_step_7)
    with pytest.raises(KeyboardInterrupt):
        train_unit_model(interrupted)
    assert (interrupted.run_folder / CHECKPOINT_FILE).exists()
    monkeypatch.setattr(stepping, "make_autoencoder_batch", real)
    other = tiny_config(small_corpus_file, tmp_path / "b", model, **{**common, "arch.dim": 16})
    with pytest.raises(ConfigError, match="different config"):
        train_unit_model(other)
    resumed = train_unit_model(interrupted)
    assert resumed.resumed_from == 7
    first, _, _ = load_unit_model(expected.run_dir)
    second, _, _ = load_unit_model(resumed.run_dir)
    for (name, a), b in zip(first.state_dict().items(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert resumed.metrics[RECONSTRUCTION] == pytest.approx(expected.metrics[RECONSTRUCTION])
    run = MlflowClient(tracking_uri()).get_run(resumed.run_id)
    assert run.info.status == "FINISHED"
    steps = [m.step for m in MlflowClient().get_metric_history(resumed.run_id, "train/loss")]
    assert steps == [5, 10, 12]  # one history across the interruption


def test_load_unit_model_errors(tmp_path):
    with pytest.raises(ModelError, match="no model.pt"):
        load_unit_model(tmp_path)


@pytest.mark.slow
def test_units_cli_train_eval_compare(mlflow_store, small_corpus_file, tmp_path, capsys):
    folder = tmp_path / "m"
    args = ["units", "train", "--model", "transformer", "--steps", "10", "--out", str(folder)]
    args += ["--corpus", str(small_corpus_file), "--gold-max-words", "40", "--threads", "1"]
    args += [f"--set={k}={v}" for k, v in TINY.items() if not k.startswith("gold")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "[transformer] segment_f1" in out and f"model: {folder}" in out
    assert main(["units", "eval", str(folder), str(folder), "--gold-max-words", "40"]) == 0
    assert out.count("[transformer]") == 1
    assert capsys.readouterr().out.count("[transformer] segment_f1") == 2
    assert main(["compare"]) == 0
    assert "transformer  units" in capsys.readouterr().out
    client = MlflowClient()
    experiment = client.get_experiment_by_name("segrl").experiment_id
    names = sorted(r.info.run_name for r in client.search_runs([experiment]))
    # the training run and both evaluations are named as compare names their segmenter
    assert names == ["robustness-comparison", "transformer", "transformer", "transformer"]


def test_units_cli_bad_input(mlflow_store, tmp_path):
    for args, message in [
        (["units", "train", "--model", "bogus"], "unknown unit model 'bogus'"),
        (["units", "train", "--set", "arch.dim"], "write KEY=VALUE"),
        (["units", "train", "--set", "arch.dim=wide"], "arch.dim must be int"),
        (["units", "eval", str(tmp_path / "none")], "no model.pt here"),
    ]:
        result = subprocess.run(
            [sys.executable, "-m", "segrl", *args],
            capture_output=True,
            text=True,
            cwd=mlflow_store,
            timeout=300,
        )
        assert result.returncode == EXIT_USER_ERROR, (args, result.stderr)
        assert message in result.stderr
        assert "Traceback" not in result.stderr
    assert not (mlflow_store / "mlruns").exists()


def test_gold_words_are_segmented_alone():
    model = TransformerAutoencoder(TransformerConfig(dim=16, feed_forward=16), vocab_size=40)
    vocab = CharVocab.from_texts(["walked talks"], PLACEHOLDER)
    segments = segment_texts(model, vocab, ["walked", "", "talks"])
    assert (
        "".join(segments[0]) == "walked" and segments[1] == [] and "".join(segments[2]) == "talks"
    )


def test_robustness_curves_and_comparison_plot(mlflow_store):
    from segrl.experiments.units_eval import log_robustness
    from segrl.units.robustness import robustness_curves

    config = build_units_config(
        "transformer",
        None,
        {"arch.dim": 16, "arch.feed_forward": 16, "eval.robustness_rates": [0.0, 0.3]},
    )
    texts = ["the cat sat on the mat", "a dog ran home", "what ever you are"]
    vocab = CharVocab.from_texts(texts, PLACEHOLDER)
    model = TransformerAutoencoder(config.arch, len(vocab))
    rows = robustness_curves(model, vocab, texts, config)
    assert [(r["kind"], r["rate"]) for r in rows] == [
        (kind, rate) for kind in ("swap", "delete", "insert", "substitute") for rate in (0.0, 0.3)
    ]
    clean = [r for r in rows if r["rate"] == 0.0]
    assert len({(r[RECONSTRUCTION], r["accuracy"]) for r in clean}) == 1  # rate 0: the same input
    noisy = {r["kind"]: r[RECONSTRUCTION] for r in rows if r["rate"] == 0.3}
    assert noisy["insert"] != clean[0][RECONSTRUCTION]
    with start_run({"what": "robustness"}, "segrl", "robustness"):
        log_robustness({"a": rows, "b": rows})
    assert list((mlflow_store / "mlruns").rglob("robustness/accuracy.png"))
    assert list((mlflow_store / "mlruns").rglob("robustness/robustness.json"))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["nvib_paper", "transformer_paper", "dcsa_paper", "stride_paper"])
def test_paper_configs_train_a_few_steps_on_cpu(name, mlflow_store, small_corpus_file, tmp_path):
    """The GPU-sized configs go through the same training code on a CPU: a few steps of the
    paper-sized model (mixed precision only where there is CUDA: fp32 here), logging training
    characters per second."""
    from pathlib import Path

    from segrl.runtime import mixed_precision

    path = Path(__file__).resolve().parents[1] / "configs" / f"{name}.toml"
    overrides = {
        "data.corpus": str(small_corpus_file),
        "out": str(tmp_path / name),
        "train.steps": 2,
        "train.batch_size": 4,
        "device": "cpu",
        "log_every": 1,
        "eval_every": 1000,
        "threads": 1,
        "gold.max_words": 20,
        "eval.gold_words_during_training": 10,
        "eval.robustness": False,
        "eval.figure_valid_sentences": 0,
        "eval.figure_sentences": [],
    }
    config = build_units_config(None, path, overrides)
    assert not mixed_precision(torch.device("cpu"), config.train.precision)
    result = train_unit_model(config)
    assert result.metrics["reconstruction"] > 0
    history = MlflowClient().get_metric_history(result.run_id, "train/chars_per_second")
    assert [m.step for m in history] == [1, 2] and all(m.value > 0 for m in history)
