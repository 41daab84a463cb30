"""NVIB fine-tuning (the NVIB fine-tuning paper): a trained Transformer autoencoder turned into an NVIB
model reconstructs as before at step 0; each of the paper's options changes what it should (identity
initialisation, the |x|^2 term, proportional clipping, the learned prior mean, the simplified test-time
attention, no skip connection); ``finetune_config`` and ``segrl units finetune``."""

import math

import pytest
import torch
from mlflow.tracking import MlflowClient

from segrl.cli import main
from segrl.data.corpus import PLACEHOLDER
from segrl.data.vocab import CharVocab
from segrl.errors import ConfigError, ModelError
from segrl.experiments.units_finetune import finetune_config
from segrl.experiments.units_train import start_from_trained
from segrl.tracking.queries import segmenter_runs
from segrl.units.base import make_autoencoder_batch
from segrl.units.config import build_units_config
from segrl.units.dcsa import DCSAAutoencoder, DCSAConfig
from segrl.units.layers import Attention
from segrl.units.nvib import (
    DPParameters,
    NVIBLayer,
    clip_pseudo_counts,
    denoising_attention_eval,
    denoising_attention_simplified,
)
from segrl.units.nvib_model import NVIBAutoencoder, NVIBConfig
from segrl.units.saving import save_unit_model
from segrl.units.transformer import TransformerAutoencoder, TransformerConfig

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = ["the cat sat on the mat", "a dog", "cats and dogs and mats"]
SHAPE = {"dim": 32, "feed_forward": 32, "heads": 2, "encoder_layers": 4, "decoder_layers": 1}
FINETUNE = {
    k.split(".", 1)[1]: v for k, v in NVIBAutoencoder.finetune_defaults.items() if "arch." in k
}


@pytest.fixture
def vocab():
    return CharVocab.from_texts(TEXTS, PLACEHOLDER)


@pytest.fixture
def transformer(vocab):
    torch.manual_seed(0)
    model = TransformerAutoencoder(TransformerConfig(**SHAPE), len(vocab))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(30):  # trained a little, so that its attention is not uniform
        loss = model.loss(make_autoencoder_batch(vocab, TEXTS)).total
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def finetuned(transformer, vocab, **changes):
    torch.manual_seed(1)
    config = NVIBConfig(**{**SHAPE, "nvib_layers": 2, **FINETUNE, **changes})
    model = NVIBAutoencoder(config, len(vocab))
    model.init_from_pretrained(transformer)
    return model.eval()


def eval_logits(model, vocab):
    batch = make_autoencoder_batch(vocab, TEXTS)
    with torch.no_grad():
        out = model.loss(batch)
    return out.logits[batch.target_mask], out


def test_at_step_0_the_nvib_model_reconstructs_as_the_transformer(transformer, vocab):
    expected, before = eval_logits(transformer, vocab)
    got, after = eval_logits(finetuned(transformer, vocab), vocab)
    assert torch.allclose(got, expected, atol=1e-4)
    assert after.terms["reconstruction"] == pytest.approx(
        float(before.terms["reconstruction"]), abs=1e-5
    )
    assert after.encoding.memory_mask.sum() == before.encoding.memory_mask.sum()  # all kept


def test_the_gap_to_the_transformer_shrinks_as_tau_alpha_grows(transformer, vocab):
    """The prior key's share is about exp(-tau_alpha): the larger tau_alpha, the closer the identity."""
    expected, _ = eval_logits(transformer, vocab)
    gaps = []
    for tau in (0.0, 3.0, 6.0):
        got, _ = eval_logits(finetuned(transformer, vocab, tau_alpha=tau, clip_alpha=False), vocab)
        gaps.append(float((got - expected).abs().max()))
    assert gaps[0] > gaps[1] > gaps[2] and gaps[0] > 1e-3


def test_without_identity_init_the_start_is_lost(transformer, vocab):
    expected, _ = eval_logits(transformer, vocab)
    got, _ = eval_logits(finetuned(transformer, vocab, identity_init=False), vocab)
    assert float((got - expected).abs().max()) > 0.1


def test_identity_init_sets_mean_variance_and_pseudo_counts():
    layer = NVIBLayer(8, learn_prior_mean=True, quadratic_alpha=True)
    layer.identity_init(tau_sigma=0.1, tau_alpha=4.0, head_dim=4)
    x = torch.randn(2, 5, 8)
    mask = torch.ones(2, 5, dtype=torch.bool)
    params = layer(x, mask)
    assert torch.allclose(params.mu[:, :5], x, atol=1e-6)
    assert torch.allclose(params.logvar[:, :5], torch.full((2, 5, 8), math.log(0.01)))
    expected = x.pow(2).sum(-1) / (2 * math.sqrt(4)) + 4.0
    assert torch.allclose(params.token_log_alpha, expected, atol=1e-5)
    assert torch.all(params.mu[:, 5] == 0)  # the prior's mean starts at 0
    with pytest.raises(ValueError, match="quadratic_alpha"):
        NVIBLayer(8).identity_init(0.1, 4.0, 4)


def test_proportional_clipping_keeps_ratios_and_bounds_the_total():
    log_alpha = torch.tensor([[2.0, 5.0, 9.0, -20.0, 0.0]])
    mask = torch.tensor([[True, True, True, True, False]])
    clipped = clip_pseudo_counts(log_alpha, mask, epsilon=1e-6, omega=100.0)
    alpha = clipped.exp()[0, :4]
    assert float(alpha.sum()) == pytest.approx(100.0, rel=1e-4)  # the total, 8.2e3, is cut to omega
    raw = log_alpha.exp()[0, :3]
    assert torch.allclose(alpha[:3] / alpha[:3].sum(), raw / raw.sum(), atol=1e-5)  # ratios kept
    assert float(alpha[3]) == pytest.approx(1e-6 * 100.0, rel=1e-4)  # floored at epsilon
    small = torch.tensor([[0.0, 1.0]])
    both = torch.ones(1, 2, dtype=torch.bool)
    assert torch.allclose(clip_pseudo_counts(small, both, 1e-6, 100.0), small)  # under omega: as is


def test_learned_prior_mean_gets_gradient_and_fixed_one_does_not():
    x = torch.randn(2, 5, 8)
    mask = torch.ones(2, 5, dtype=torch.bool)
    learned = NVIBLayer(8, learn_prior_mean=True)
    learned(x, mask).mu.pow(2).sum().backward()
    assert isinstance(learned.prior_mu, torch.nn.Parameter) and learned.prior_mu.grad is not None
    fixed = NVIBLayer(8)
    assert "prior_mu" not in dict(fixed.named_parameters())


def test_simplified_eval_attention_is_the_posterior_attention_without_variance():
    """The paper's test-time attention tends to the simplified one as sigma -> 0 (spec, check 2); with
    sizeable sigma they differ."""
    torch.manual_seed(0)
    attention = Attention(8, heads=2)
    queries = torch.randn(2, 5, 8)
    mu = torch.randn(2, 6, 8)
    log_alpha = torch.randn(2, 6)
    mask = torch.ones(2, 6, dtype=torch.bool)
    simplified, _ = denoising_attention_simplified(
        attention, queries, DPParameters(mu, torch.zeros(2, 6, 8), log_alpha, mask)
    )
    tiny = DPParameters(mu, torch.full((2, 6, 8), -30.0), log_alpha, mask)
    assert torch.allclose(
        denoising_attention_eval(attention, queries, tiny)[0], simplified, atol=1e-4
    )
    wide = DPParameters(mu, torch.zeros(2, 6, 8), log_alpha, mask)
    assert not torch.allclose(
        denoising_attention_eval(attention, queries, wide)[0], simplified, atol=1e-2
    )


def test_without_skip_connection_each_layer_has_its_own_pseudo_counts(vocab):
    """With the skip connection the upper NVIB layer's log pseudo-counts are its own plus the lower
    layer's; without it, its own (the lower layer, the first, is the same either way)."""
    torch.manual_seed(0)
    batch = make_autoencoder_batch(vocab, TEXTS)
    model = NVIBAutoencoder(NVIBConfig(**SHAPE, nvib_layers=2, alpha_skip=False), len(vocab)).eval()

    def log_alphas(skip):
        model.config.alpha_skip = skip
        with torch.no_grad():
            (_, lower), (_, upper) = model.encode(batch.source, batch.source_mask).extras["nvib"]
        return lower.token_log_alpha, upper.token_log_alpha

    lower, without = log_alphas(False)
    _, with_skip = log_alphas(True)
    mask = batch.source_mask
    assert torch.allclose(with_skip[mask] - without[mask], lower[mask], atol=1e-5)
    assert lower[mask].abs().max() > 0.01


def test_options_that_do_not_go_together():
    with pytest.raises(ConfigError, match="identity_init needs"):
        build_units_config("nvib", None, {"arch.identity_init": True})
    with pytest.raises(ConfigError, match="choose one of"):
        build_units_config(
            "nvib",
            None,
            {"arch.exact_eval_attention": True, "arch.simplified_eval_attention": True},
        )
    with pytest.raises(ConfigError, match="clip_omega"):
        build_units_config("nvib", None, {"arch.clip_alpha": True, "arch.clip_omega": 0.5})


def test_only_a_transformer_of_the_same_shape_can_start_an_nvib_model(transformer, vocab):
    other = TransformerAutoencoder(TransformerConfig(**{**SHAPE, "dim": 16}), len(vocab))
    with pytest.raises(ModelError, match="another shape .*dim 16 against 32"):
        finetuned(other, vocab)
    dcsa = DCSAAutoencoder(DCSAConfig(dim=32, feed_forward=32, unit_dim=16, slots=4), len(vocab))
    with pytest.raises(ModelError, match="cannot start from a trained DCSAAutoencoder"):
        finetuned(dcsa, vocab)


def saved_transformer(tmp_path, corpus_file, vocab=None, **changes):
    config = build_units_config(
        "transformer",
        None,
        {
            "data.corpus": str(corpus_file),
            "train.steps": 40,
            "train.lr": 2e-3,
            "tracking.run_name": "tiny",
            **{f"arch.{k}": v for k, v in SHAPE.items()},
            **changes,
        },
    )
    from segrl.data import load_corpus

    vocab = vocab or load_corpus(config.data).vocab
    model = TransformerAutoencoder(config.arch, len(vocab))
    return save_unit_model(tmp_path / "tiny", model, vocab, config), config


def test_finetune_config_keeps_the_trained_models_options(tmp_path, small_corpus_file):
    folder, trained = saved_transformer(tmp_path, small_corpus_file)
    config = finetune_config(folder, "nvib")
    assert config.model == "nvib" and config.init_from == str(folder)
    assert config.data.corpus == str(small_corpus_file) and config.train.lr == 2e-3
    assert (config.arch.dim, config.arch.heads, config.arch.encoder_layers) == (32, 2, 4)
    assert config.arch.identity_init and not config.arch.alpha_skip and config.arch.clip_alpha
    assert config.train.steps == 10  # a quarter of the trained model's 40
    assert config.train.warmup_steps == 0
    assert config.tracking.run_name == "tiny-nvib-finetune"
    assert str(config.run_folder) == "runs/units/tiny-nvib-finetune"
    file = tmp_path / "ft.toml"
    file.write_text("[arch]\nlambda_d = 0.5\n[train]\nlr = 1e-4\n")
    config = finetune_config(folder, "nvib", file, {"train.steps": 3})
    assert (config.arch.lambda_d, config.train.lr, config.train.steps) == (0.5, 1e-4, 3)
    with pytest.raises(ModelError, match="no model.pt here"):
        finetune_config(tmp_path / "none", "nvib")


@pytest.mark.parametrize("model", ["transformer", "seqreduce", "nvib"])
def test_nvib_from_a_shallow_encoder_takes_as_many_nvib_layers_as_it_has(tmp_path, vocab, model):
    changes = {"arch.encoder_layers": 2}
    if model == "nvib":
        changes["arch.nvib_layers"] = 1
    config = build_units_config(model, None, changes)
    from segrl.units.saving import build_model

    folder = save_unit_model(tmp_path / model, build_model(config, len(vocab)), vocab, config)
    finetuned = finetune_config(folder, "nvib")
    assert finetuned.arch.encoder_layers == 2
    assert finetuned.arch.nvib_layers == (1 if model == "nvib" else 2)  # NVIB keeps its own


def test_the_control_fine_tunes_the_transformer_itself(tmp_path, small_corpus_file):
    """``--model transformer`` from a Transformer: the same further training without NVIB."""
    folder, _ = saved_transformer(tmp_path, small_corpus_file)
    config = finetune_config(folder, "transformer")
    assert (config.model, config.tracking.run_name) == ("transformer", "tiny-transformer-finetune")
    from segrl.units.saving import load_unit_model

    source, vocab, _ = load_unit_model(folder)
    model = TransformerAutoencoder(config.arch, len(vocab))
    start_from_trained(model, folder, vocab, torch.device("cpu"))
    for (name, a), b in zip(model.state_dict().items(), source.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_finetuning_refuses_a_model_of_another_vocabulary(tmp_path, small_corpus_file, vocab):
    folder, _ = saved_transformer(tmp_path, small_corpus_file, vocab)
    model = NVIBAutoencoder(NVIBConfig(**SHAPE, **FINETUNE), 50)
    other = CharVocab.from_texts(["xyz"], PLACEHOLDER)
    with pytest.raises(ConfigError, match="another character vocabulary"):
        start_from_trained(model, folder, other, torch.device("cpu"))


@pytest.mark.slow
def test_units_cli_finetune(mlflow_store, small_corpus_file, tmp_path, capsys):
    folder = tmp_path / "transformer"
    tiny = {f"arch.{k}": v for k, v in SHAPE.items()}
    tiny.update({"eval.robustness": "false", "eval.figure_valid_sentences": 1, "log_every": 2})
    args = ["units", "train", "--model", "transformer", "--steps", "8", "--out", str(folder)]
    args += ["--corpus", str(small_corpus_file), "--gold-max-words", "30", "--threads", "1"]
    assert main(args + [f"--set={k}={v}" for k, v in tiny.items()]) == 0
    capsys.readouterr()
    out_folder = tmp_path / "ft"
    args = ["units", "finetune", "--from", str(folder), "--model", "nvib", "--out", str(out_folder)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"fine-tuning {folder} for 2 steps" in out and "[transformer-nvib-finetune]" in out
    runs = {r["segmenter"]: r for r in segmenter_runs()}
    assert set(runs) == {"transformer", "transformer-nvib-finetune"}
    run = MlflowClient().get_run(runs["transformer-nvib-finetune"]["run_id"])
    assert run.data.params["init_from"] == str(folder)
    assert run.data.params["arch.identity_init"] == "True"
    with pytest.raises(SystemExit):
        main(["units", "finetune", "--model", "nvib"])  # --from is required


@pytest.mark.parametrize("model", ["nvib", "transformer", "stride"])
def test_finetuning_from_a_model_it_cannot_start_from_names_it_and_leaves_no_run(
    mlflow_store, small_corpus_file, tmp_path, capsys, model
):
    """A SeqReduce model into NVIB, a Transformer or Stride: one line naming the trained model's
    folder, and ``--out`` left as it was (no ``config.toml``, no lock)."""
    from segrl.data import load_corpus
    from segrl.units.saving import build_model

    config = build_units_config("seqreduce", None, {"data.corpus": str(small_corpus_file)})
    vocab = load_corpus(config.data).vocab
    folder = save_unit_model(tmp_path / "sr", build_model(config, len(vocab)), vocab, config)
    out = tmp_path / "runs" / "ft"
    args = ["units", "finetune", "--from", str(folder), "--model", model, "--steps", "2"]
    args += ["--threads", "1", "--corpus", str(small_corpus_file), "--gold-max-words", "30"]
    assert main(args + ["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{folder}: a " in err and "cannot start from a trained SeqReduceAutoencoder" in err
    assert len([line for line in err.splitlines() if line.startswith("segrl: error:")]) == 1
    assert not (tmp_path / "runs").exists()


def test_finetuning_from_weights_that_are_no_checkpoint_leaves_no_run(
    mlflow_store, small_corpus_file, tmp_path, capsys
):
    """A folder with a unit model's config but weights that are no segrl checkpoint: refused,
    naming its ``model.pt``, with ``--out`` left as it was."""
    folder, _ = saved_transformer(tmp_path, small_corpus_file)
    (folder / "model.pt").write_bytes(b"not a checkpoint")
    out = tmp_path / "runs" / "ft"
    args = ["units", "finetune", "--from", str(folder), "--model", "transformer", "--steps", "2"]
    args += ["--threads", "1", "--gold-max-words", "30", "--out", str(out)]
    assert main(args) == 2
    assert f"{folder / 'model.pt'}: " in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def logged_unit_model(folder) -> str:
    """The id of a run that logged the unit model in ``folder`` as an MLflow model's ``segmenter``
    artifact (``MLmodel`` beside ``artifacts/segmenter``), as ``segrl units train`` logs it."""
    import mlflow
    from segrl.tracking.runs import start_run

    with start_run({}, "segrl") as run:  # this test's store and experiment, whatever came before
        mlflow.log_artifacts(str(folder), "model/artifacts/segmenter")
        mlflow.log_text("flavors: {}\n", "model/MLmodel")
    return run.info.run_id


def test_finetuning_starts_from_a_logged_model(mlflow_store, tmp_path, small_corpus_file):
    """``--from`` and ``init_from`` take an MLflow URI of a logged unit model, and an MLflow model
    folder, as the loader does: the run's config is the trained model's, its weights are its."""
    import mlflow

    folder, _ = saved_transformer(tmp_path, small_corpus_file)
    run_id = logged_unit_model(folder)
    downloaded = mlflow.artifacts.download_artifacts(
        f"runs:/{run_id}/model", dst_path=str(tmp_path / "mlflow-model")
    )
    from segrl.units.saving import load_unit_model

    source, vocab, _ = load_unit_model(folder)
    for given in (f"runs:/{run_id}/model", f"runs:/{run_id}", downloaded):
        config = finetune_config(given, "transformer")
        assert config.init_from == str(given) and config.train.steps == 10
        assert (config.arch.dim, config.tracking.run_name) == (32, "tiny-transformer-finetune")
        model = TransformerAutoencoder(config.arch, len(vocab))
        start_from_trained(model, given, vocab, torch.device("cpu"))
        for (name, a), b in zip(
            model.state_dict().items(), source.state_dict().values(), strict=True
        ):
            assert torch.equal(a, b), name
    with mlflow.start_run(run_id=run_id):
        mlflow.log_text("not a model", "notes/readme.txt")
    with pytest.raises(ModelError, match=r"runs:/\w+/notes: no model.pt here"):
        finetune_config(f"runs:/{run_id}/notes", "nvib")
    mlflow.register_model(f"runs:/{run_id}/model", "tiny")
    assert finetune_config("models:/tiny/1", "nvib").init_from == "models:/tiny/1"
