"""NVIB: KL terms against hand-computed values, denoising attention in its limits and against a
Monte-Carlo posterior mean, Dirichlet sampling, the skip connection, mixed precision, degenerate
pseudo-counts, and the autoencoder."""

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.distributions import Dirichlet, kl_divergence

from segrl.config import validate_config
from segrl.data.corpus import PLACEHOLDER
from segrl.data.vocab import CharVocab
from segrl.errors import ConfigError
from segrl.units.base import make_autoencoder_batch
from segrl.units.layers import Attention
from segrl.units.nvib import (
    DPParameters,
    NVIBLayer,
    denoising_attention_eval,
    kl_annealing,
    kl_dirichlet,
    kl_dirichlet_exact,
    kl_gaussian,
    layer_weights,
    sample_log_weights,
    training_key_bias,
)
from segrl.units.nvib_model import NVIBAutoencoder, NVIBConfig, NVIBEncoderLayer


def identity_attention(dim: int) -> Attention:
    """Single-head attention whose projections are identities: u = query, values = components."""
    attention = Attention(dim, heads=1)
    with torch.no_grad():
        for linear in (attention.query, attention.key, attention.value, attention.out):
            linear.weight.copy_(torch.eye(dim))
            linear.bias.zero_()
    return attention


def dp(mu, logvar, log_alpha, mask=None) -> DPParameters:
    """DP parameters from per-component tensors (the prior component must be the last one)."""
    mu, logvar, log_alpha = (
        torch.as_tensor(t, dtype=torch.float32) for t in (mu, logvar, log_alpha)
    )
    if mask is None:
        mask = torch.ones(log_alpha.shape, dtype=torch.bool)
    return DPParameters(mu, logvar, log_alpha, mask)


# -- KL terms -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("alpha0_q", "alpha0_p", "kappa0", "expected"),
    [(10, 1, 5, 3.9614), (0.5, 3.5, 13, 46.6726), (30, 3.5, 13, 10.0421), (7.3, 7.3, 4, 0.0)],
)
def test_kl_dirichlet_reference_values(alpha0_q, alpha0_p, kappa0, expected):
    value = kl_dirichlet(torch.tensor(float(alpha0_q)), torch.tensor(float(alpha0_p)), kappa0)
    assert value.item() == pytest.approx(expected, abs=1e-4)
    # it is the KL between two symmetric kappa0-dimensional Dirichlets
    q = Dirichlet(torch.full((kappa0,), alpha0_q / kappa0, dtype=torch.float64))
    p = Dirichlet(torch.full((kappa0,), alpha0_p / kappa0, dtype=torch.float64))
    assert value.item() == pytest.approx(kl_divergence(q, p).item(), abs=1e-9)


def test_exact_dirichlet_kl():
    # equal pseudo-counts: the exact term equals the approximation (spec: 3.9614 both ways)
    equal = torch.full((5,), 2.0)
    assert kl_dirichlet_exact(equal, 1.0).item() == pytest.approx(3.9614, abs=1e-4)
    alpha = torch.tensor([0.3, 2.0, 5.0, 1.0, 0.0])
    mask = torch.tensor([True, True, True, True, False])
    value = kl_dirichlet_exact(alpha, 2.5, mask)
    present = alpha[:4].double()
    reference = kl_divergence(Dirichlet(present), Dirichlet(present * 2.5 / present.sum()))
    assert value.item() == pytest.approx(reference.item(), abs=1e-9)
    assert value.item() > 0


def test_kl_dirichlet_rejects_zero_totals():
    with pytest.raises(ValueError, match="positive"):
        kl_dirichlet(torch.tensor([0.0]), torch.tensor([1.0]), 3)
    with pytest.raises(ValueError, match="positive"):
        kl_dirichlet_exact(torch.tensor([0.0, 1.0]), 1.0)


def test_kl_gaussian_hand_value_and_zero_at_the_prior():
    # one token (mu = [1, 0], sigma^2 = [1, 2], alpha = 3) and the prior (alpha = 1): weights 3/4, 1/4
    params = dp(
        [[[1.0, 0.0], [0.0, 0.0]]],
        [[[0.0, math.log(2.0)], [0.0, 0.0]]],
        [[math.log(3.0), 0.0]],
    )
    token = 0.5 * ((1 + 1 - 1 - 0) + (0 + 2 - 1 - math.log(2))) / 2
    assert kl_gaussian(params).item() == pytest.approx(0.75 * token, abs=1e-6)
    at_prior = dp(torch.zeros(2, 4, 3), torch.zeros(2, 4, 3), torch.randn(2, 4) * 3)
    assert torch.allclose(kl_gaussian(at_prior), torch.zeros(2))
    # padding components do not count, whatever their parameters
    padded = dp(
        [[[1.0, 0.0], [50.0, 50.0], [0.0, 0.0]]],
        [[[0.0, math.log(2.0)], [200.0, 200.0], [0.0, 0.0]]],
        [[math.log(3.0), 5.0, 0.0]],
        mask=torch.tensor([[True, False, True]]),
    )
    assert kl_gaussian(padded).item() == pytest.approx(0.75 * token, abs=1e-6)


def test_layer_weights_and_annealing():
    assert layer_weights(3) == pytest.approx([1 / 6, 1 / 3, 1 / 2])
    assert layer_weights(2, "uniform") == [0.5, 0.5]
    assert [kl_annealing(p) for p in (0.0, 0.3, 0.45, 0.6, 0.9)] == pytest.approx([0, 0, 0.5, 1, 1])


# -- denoising attention --------------------------------------------------------------------------


@pytest.mark.parametrize("heads", [1, 2])
def test_denoising_attention_reduces_to_standard_attention(heads):
    """With pi_i proportional to exp(|z_i|^2 / (2 sqrt(d))) the training form is ordinary attention."""
    torch.manual_seed(0)
    dim, head_dim = 8, 8 // heads
    attention = Attention(dim, heads)
    queries, z = torch.randn(2, 5, dim), torch.randn(2, 6, dim) * 2
    log_pi = torch.log_softmax(z.pow(2).sum(-1) / (2 * math.sqrt(head_dim)), dim=-1)
    denoising, _ = attention(queries, z, key_bias=training_key_bias(log_pi, z, head_dim))
    q, k, v = (
        attention.split_heads(p(x))
        for p, x in ((attention.query, queries), (attention.key, z), (attention.value, z))
    )
    standard = attention.out(attention.merge_heads(F.scaled_dot_product_attention(q, k, v)))
    assert torch.allclose(denoising, standard, atol=1e-5)


def mixture_posterior_mean_mc(u, mu, var, weights, d, samples=4_000_000, seed=0):
    """E[v g(u; v, sqrt(d) I)] / E[g(u; v, sqrt(d) I)] for v from the Gaussian mixture, by sampling."""
    generator = torch.Generator().manual_seed(seed)
    component = torch.multinomial(weights, samples, replacement=True, generator=generator)
    noise = torch.randn(samples, mu.shape[1], generator=generator, dtype=torch.float64)
    v = mu[component] + var[component].sqrt() * noise  # [N, P]
    log_g = -(u - v).pow(2).sum(-1) / (2 * math.sqrt(d))
    w = torch.softmax(log_g, dim=0)
    return (w[:, None] * v).sum(0)


def test_test_time_attention_against_monte_carlo():
    """The exact test-time form is the posterior mean of a noisy observation u of v ~ G; the paper's
    form drops a term and differs when components have different variances."""
    dim = 3  # d = 3 (one head): observation variance sqrt(3)
    u = torch.tensor([1.5, 2.0, -1.0])
    mu = torch.tensor([[0.2, 0.8, 0.1], [-0.6, 0.3, 0.5], [0.0, 0.0, 0.0]])
    var = torch.tensor([[0.3, 0.5, 0.2], [4.0, 3.0, 5.0], [1.0, 1.0, 1.0]])  # last: the prior
    alpha = torch.tensor([1.5, 2.5, 1.0])
    params = dp(mu[None], var.log()[None], alpha.log()[None])
    attention = identity_attention(dim)
    exact, _ = denoising_attention_eval(attention, u[None, None], params, threshold=0, exact=True)
    printed, _ = denoising_attention_eval(attention, u[None, None], params, threshold=0)
    reference = mixture_posterior_mean_mc(
        u.double(), mu.double(), var.double(), alpha.double() / alpha.sum(), dim
    )
    assert torch.allclose(exact[0, 0].double(), reference, atol=3e-3)
    assert (printed[0, 0].double() - reference).abs().max() > 3e-2  # about 0.088 here
    # with one variance for all components the dropped term is constant over keys: both agree
    same = dp(mu[None], torch.zeros(1, 3, 3), alpha.log()[None])
    exact, _ = denoising_attention_eval(attention, u[None, None], same, threshold=0, exact=True)
    printed, _ = denoising_attention_eval(attention, u[None, None], same, threshold=0)
    assert torch.allclose(exact, printed, atol=1e-6)


@pytest.mark.parametrize("heads", [1, 2])
def test_test_time_attention_without_variance_is_the_training_form_at_the_means(heads):
    torch.manual_seed(1)
    dim = 8
    attention = Attention(dim, heads)
    queries = torch.randn(2, 4, dim)
    mu = torch.randn(2, 5, dim)
    log_alpha = torch.randn(2, 5)
    log_alpha[:, -1] = 0.0
    params = dp(mu, torch.full((2, 5, dim), -40.0), log_alpha)
    test_form, weights = denoising_attention_eval(attention, queries, params, threshold=0)
    log_pi = torch.log_softmax(log_alpha, dim=-1)
    bias = training_key_bias(log_pi, mu, attention.head_dim)
    train_form, train_weights = attention(queries, mu, key_bias=bias)
    assert torch.allclose(test_form, train_form, atol=1e-5)
    assert torch.allclose(weights, train_weights, atol=1e-6)


def test_threshold_drops_small_pseudo_counts_at_test_time():
    dim = 4
    log_alpha = torch.log(torch.tensor([[2.0, 0.05, 0.5, 0.09, 1.0]]))  # last: the prior
    params = dp(torch.randn(1, 5, dim), torch.zeros(1, 5, dim), log_alpha)
    assert params.token_kept().tolist() == [[True, False, True, False]]
    _, weights = denoising_attention_eval(Attention(dim), torch.randn(1, 3, dim), params)
    assert (weights[0, 0, :, [1, 3]] == 0).all()
    assert (weights[0, 0, :, [0, 2, 4]] > 0).all()


# -- sampling ---------------------------------------------------------------------------------------


def test_dirichlet_samples_have_the_right_mean_and_gradient():
    torch.manual_seed(0)
    n = 200_000
    log_alpha = torch.log(torch.tensor([0.5, 2.0, 0.01, 1.0])).requires_grad_(True)
    mask = torch.tensor([True, True, True, True])
    log_pi = sample_log_weights(log_alpha.expand(n, 4), mask.expand(n, 4))
    pi = log_pi.exp()
    assert torch.allclose(pi.sum(-1), torch.ones(n), atol=1e-5)
    alpha = log_alpha.detach().exp()
    assert torch.allclose(pi.mean(0), alpha / alpha.sum(), atol=3e-3)
    assert torch.isfinite(log_pi[:, 2]).all()  # log weights of a small pseudo-count never underflow
    # reparameterised gradient of E[pi_0] against the analytic alpha_0 (a_0 - alpha_0) / a_0^2
    pi[:, 0].mean().backward()
    a0 = alpha.sum()
    expected = alpha[0] * (a0 - alpha[0]) / a0**2  # d E[pi_0] / d log alpha_0
    assert log_alpha.grad[0].item() == pytest.approx(expected.item(), rel=0.05)


def test_masked_components_get_no_weight():
    log_alpha = torch.zeros(3, 4)
    mask = torch.tensor([[True, True, False, True]] * 3)
    log_pi = sample_log_weights(log_alpha, mask)
    assert torch.isinf(log_pi[:, 2]).all()
    assert torch.allclose(log_pi.exp().sum(-1), torch.ones(3), atol=1e-6)


def test_skip_connection_adds_log_pseudo_counts():
    layer = NVIBLayer(4)
    with torch.no_grad():
        layer.log_alpha.weight.zero_()
        layer.log_alpha.bias.fill_(0.5)
    x, mask = torch.randn(2, 3, 4), torch.ones(2, 3, dtype=torch.bool)
    first = layer(x, mask)
    second = layer(x, mask, first.token_log_alpha)
    assert torch.allclose(first.token_log_alpha, torch.full((2, 3), 0.5))
    assert torch.allclose(second.token_log_alpha, torch.full((2, 3), 1.0))
    assert (second.log_alpha[:, -1] == 0).all()  # each layer appends its own prior (alpha = 1)
    assert second.mu.shape == (2, 4, 4)


# -- the autoencoder ---------------------------------------------------------------------------------

TEXTS = ["the cat sat on the mat", "a dog ran", "what ever you are, be a good one."]


def small_model(**changes) -> tuple[NVIBAutoencoder, CharVocab]:
    torch.manual_seed(0)
    vocab = CharVocab.from_texts(TEXTS, PLACEHOLDER)
    config = NVIBConfig(dim=16, feed_forward=16, encoder_layers=3, nvib_layers=2, **changes)
    return NVIBAutoencoder(config, len(vocab)), vocab


def set_log_alpha_bias(model: NVIBAutoencoder, value: float) -> None:
    with torch.no_grad():
        for layer in model.encoder_layers:
            if isinstance(layer, NVIBEncoderLayer):
                layer.nvib.log_alpha.weight.zero_()
                layer.nvib.log_alpha.bias.fill_(value)


def test_nvib_autoencoder_shapes_and_kept_vectors():
    model, vocab = small_model()
    batch = make_autoencoder_batch(vocab, TEXTS)
    model.eval()
    encoding = model.encode(batch.source, batch.source_mask)
    width = batch.source.shape[1]
    assert encoding.attention.shape == (3, width, width + 1)  # keys: characters + the prior
    assert list(encoding.layer_attention) == ["layer 1", "layer 2", "layer 3"]
    assert encoding.layer_attention["layer 1"].shape == (3, width, width)
    assert encoding.memory_mask.sum(1).tolist() == encoding.kept.tolist()
    set_log_alpha_bias(model, -1.5)  # layer 2: alpha = e^-1.5 = 0.22 kept; layer 3: e^-3 dropped
    encoding = model.encode(batch.source, batch.source_mask)
    assert encoding.stats["kept_fraction/layer_2"].item() == 1.0
    assert encoding.stats["kept_fraction/layer_3"].item() == 0.0
    assert encoding.kept.tolist() == [0.0, 0.0, 0.0]


def test_penalty_is_annealed_and_weighted():
    model, vocab = small_model(lambda_d=2.0, lambda_g=0.5)
    batch = make_autoencoder_batch(vocab, TEXTS)
    early = model.loss(batch, progress=0.1)
    assert early.terms["kl_dirichlet"].item() == 0.0 and early.terms["kl_gaussian"].item() == 0.0
    late = model.loss(batch, progress=1.0)
    d = [late.stats[f"kl_dirichlet/layer_{n}"].item() for n in (2, 3)]
    g = [late.stats[f"kl_gaussian/layer_{n}"].item() for n in (2, 3)]
    assert late.terms["kl_dirichlet"].item() == pytest.approx(
        2.0 * (d[0] / 3 + 2 * d[1] / 3), rel=1e-5
    )
    assert late.terms["kl_gaussian"].item() == pytest.approx(
        0.5 * (g[0] / 3 + 2 * g[1] / 3), rel=1e-5
    )
    assert min(d + g) > 0


@pytest.mark.parametrize("prior_alpha", [1.0, 0.2])
def test_the_prior_pseudo_count_sets_the_prior_component_and_the_kl_target(prior_alpha):
    """The prior component carries ``prior_alpha``, and the conditional prior's total counts it:
    every character at ``alpha_delta`` is then the Dirichlet KL's target exactly (KL 0); characters
    off it are not."""
    model, vocab = small_model(prior_alpha=prior_alpha, alpha_delta=0.5, alpha_skip=False)
    batch = make_autoencoder_batch(vocab, TEXTS)
    set_log_alpha_bias(model, math.log(0.5))
    for _, params in model.encode(batch.source, batch.source_mask).extras["nvib"]:
        assert torch.allclose(params.log_alpha[:, -1], torch.tensor(math.log(prior_alpha)))
    at_target = model.loss(batch, progress=1.0)
    assert max(at_target.stats[f"kl_dirichlet/layer_{n}"].item() for n in (2, 3)) < 1e-6
    set_log_alpha_bias(model, math.log(0.25))
    off_target = model.loss(batch, progress=1.0)
    assert min(off_target.stats[f"kl_dirichlet/layer_{n}"].item() for n in (2, 3)) > 1e-3
    with pytest.raises(ConfigError, match="prior_alpha"):
        validate_config(NVIBConfig(prior_alpha=0.0), "arch.")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("log_alpha_bias", [0.0, 25.0, -60.0])
def test_gradients_are_finite_under_autocast(dtype, log_alpha_bias):
    model, vocab = small_model()
    set_log_alpha_bias(model, log_alpha_bias)
    batch = make_autoencoder_batch(vocab, TEXTS, ["the ct sat on th mat", "a dog an", "what"])
    with torch.autocast("cpu", dtype=dtype):
        out = model.loss(batch, progress=0.9)
    out.total.backward()
    assert torch.isfinite(out.total)
    for name, parameter in model.named_parameters():
        assert parameter.grad is None or torch.isfinite(parameter.grad).all(), name


def test_all_zero_pseudo_counts_give_a_defined_output():
    """Every character's pseudo-count is 0: only the prior is left to attend to, the decoder reads
    no vector; everything stays finite and the encoding says nothing was kept."""
    model, vocab = small_model()
    set_log_alpha_bias(model, -1000.0)  # exp(-1000) = 0 exactly
    batch = make_autoencoder_batch(vocab, TEXTS)
    for training in (True, False):
        model.train(training)
        out = model.loss(batch, progress=1.0)
        assert torch.isfinite(out.total) and torch.isfinite(out.logits).all()
        assert out.encoding.kept.tolist() == [0.0, 0.0, 0.0]
        assert not out.encoding.memory_mask.any()
    model.eval()
    encoding = model.encode(batch.source, batch.source_mask)
    prior_weight = encoding.attention[0, : len(TEXTS[0]), -1]
    assert torch.allclose(prior_weight, torch.ones_like(prior_weight))
    model.train()
    model.loss(batch, progress=1.0).total.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.slow
def test_trained_nvib_keeps_fewer_vectors_in_upper_layers(
    mlflow_store, small_corpus_file, tmp_path
):
    """A small NVIB model (3 NVIB layers, the paper's KL weights and annealing) learns to reconstruct
    first, then the KL drops vectors, more of them in higher layers."""
    from segrl.experiments.units_train import train_unit_model
    from segrl.units.config import build_units_config

    overrides = {
        "data.corpus": str(small_corpus_file),
        "out": str(tmp_path / "nvib"),
        "arch.dim": 32,
        "arch.feed_forward": 32,
        "arch.encoder_layers": 4,
        "arch.decoder_layers": 1,
        "train.steps": 400,
        "train.batch_size": 16,
        "train.lr": 3e-3,
        "train.optimizer": "adam",
        "train.grad_clip": 1.0,
        "threads": 1,
        "eval_every": 1000,
        "gold.max_words": 50,
        "eval.gold_words_during_training": 20,
        "eval.robustness": False,
    }
    result = train_unit_model(build_units_config("nvib", None, overrides))
    kept = [result.metrics[f"kept_fraction/layer_{n}"] for n in (2, 3, 4)]
    assert kept[2] < kept[1] < kept[0], kept
    assert kept[2] < 0.95, kept
    assert result.metrics["reconstruction"] < 0.5
    assert result.metrics["kept_per_char"] < 0.95  # the decoder reads fewer vectors than characters


CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.parametrize("name", ["nvib_paper", "transformer_paper", "nvib_cpu", "transformer_cpu"])
def test_shipped_configs(name):
    from segrl.units.config import build_units_config
    from segrl.units.saving import build_model

    config = build_units_config(path=CONFIGS / f"{name}.toml")
    assert config.model == name.split("_")[0]
    assert (config.arch.encoder_layers, config.arch.decoder_layers, config.arch.heads) == (6, 2, 1)
    model = build_model(config, vocab_size=100)
    parameters = sum(p.numel() for p in model.parameters())
    if name.endswith("paper"):
        # the paper: width 512, "approximately 12-17 million trainable parameters"
        assert config.arch.dim == 512 and 12e6 <= parameters <= 17e6, parameters
        assert (config.train.batch_size, config.device) == (512, "cuda")
    if name.startswith("nvib"):
        assert config.arch.nvib_layers == 3 and 0 < config.arch.alpha_delta <= 0.25
    vocab = CharVocab.from_texts(TEXTS, PLACEHOLDER)
    batch = make_autoencoder_batch(vocab, TEXTS[:2])
    out = model.loss(batch, progress=0.5)
    out.total.backward()
    assert out.logits.shape == (*batch.target.shape, 100)


def test_pseudo_count_spread_reads_the_characters_of_a_layer_only():
    """Percentiles over the batch's characters (padding and the prior left out): the signature of
    a model that concentrates its pseudo-counts (p10 below the threshold, p90 above) or spreads them."""
    from segrl.units.nvib_model import pseudo_count_spread

    log_alpha = torch.log(torch.tensor([[0.2, 0.3, 5.0, 1.0], [0.05, 7.0, 9.0, 1.0]]))
    mask = torch.tensor([[True, True, True], [True, False, False]])
    full_mask = torch.cat([mask, torch.ones(2, 1, dtype=torch.bool)], 1)
    params = DPParameters(torch.zeros(2, 4, 3), torch.zeros(2, 4, 3), log_alpha, full_mask)
    spread = pseudo_count_spread(params, mask, 6)
    # the characters' counts: 0.2, 0.3, 5.0 and 0.05 (7.0 and 9.0 are padding, 1.0 the prior)
    assert spread["pseudo_count_p10/layer_6"].item() == pytest.approx(0.095)
    assert spread["pseudo_count_p50/layer_6"].item() == pytest.approx(0.25)
    assert spread["pseudo_count_p90/layer_6"].item() == pytest.approx(3.59)
