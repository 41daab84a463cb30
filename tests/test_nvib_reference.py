"""segrl's NVIB layer against numbers of the reference NVIB code (idiap/nvib) on fixed inputs.

The numbers in ``data/nvib_reference.json`` were computed with the reference code, run outside this
repository, on exactly the inputs and weights built here by ``fixed``. The reference stores the prior
component first; segrl stores it last, so the reference's key axis is rotated before comparing.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from segrl.units.layers import Attention
from segrl.units.nvib import (
    NVIBLayer,
    denoising_attention_eval,
    kl_dirichlet,
    kl_gaussian,
    training_key_bias,
)

REFERENCE = json.loads((Path(__file__).parent / "data" / "nvib_reference.json").read_text())
DIM = 8
DELTA = 0.25
CASES = {"one_head": (1, [5, 3]), "two_heads": (2, [5])}
TOLERANCE = 1e-5
"""Absolute and relative: fp32 sums over 8 dimensions in another order differ by about 1e-7."""


def fixed(shape: tuple[int, ...], phase: float, scale: float = 0.5) -> torch.Tensor:
    """Deterministic values without a random generator: ``scale * sin(0.731 i + phase)``."""
    n = math.prod(shape)
    values = scale * torch.sin(torch.arange(n, dtype=torch.float64) * 0.731 + phase)
    return values.reshape(shape).float()


def setup(case: str):
    heads, lengths = CASES[case]
    b, length = len(lengths), max(lengths)
    x = fixed((b, length, DIM), 0.3, 1.0)  # [B, L, P]
    mask = torch.tensor([[i < n for i in range(length)] for n in lengths])  # [B, L]
    layer = NVIBLayer(DIM)
    attention = Attention(DIM, heads)
    in_weight, in_bias = fixed((3 * DIM, DIM), 4.3), fixed((3 * DIM,), 4.7, 0.2)
    with torch.no_grad():
        layer.mu.weight.copy_(fixed((DIM, DIM), 1.1))
        layer.mu.bias.copy_(fixed((DIM,), 1.7, 0.2))
        layer.logvar.weight.copy_(fixed((DIM, DIM), 2.3))
        layer.logvar.bias.copy_(fixed((DIM,), 2.9))
        layer.log_alpha.weight.copy_(fixed((1, DIM), 3.1, 1.0))
        layer.log_alpha.bias.zero_()
        for i, projection in enumerate((attention.query, attention.key, attention.value)):
            projection.weight.copy_(in_weight[i * DIM : (i + 1) * DIM])
            projection.bias.copy_(in_bias[i * DIM : (i + 1) * DIM])
        attention.out.weight.copy_(fixed((DIM, DIM), 5.3))
        attention.out.bias.copy_(fixed((DIM,), 5.9, 0.2))
    return x, mask, layer, attention


def prior_last(values: list, axis: int = -1) -> torch.Tensor:
    """A reference tensor with its component axis rotated so that the prior comes last."""
    return torch.tensor(values).roll(-1, dims=axis)


def close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(actual, expected, atol=TOLERANCE, rtol=TOLERANCE)


@pytest.mark.parametrize("case", list(CASES))
def test_pseudo_counts_and_kl_terms_match_the_reference(case):
    x, mask, layer, _ = setup(case)
    expected = REFERENCE["v2.0"][case]
    with torch.no_grad():
        params = layer(x, mask)
    close(params.alpha, prior_last(expected["alpha"]) * params.mask)  # padding: 0 in segrl
    n = mask.sum(1).double()
    alpha0_q = params.alpha.double().sum(-1)
    l_d = kl_dirichlet(alpha0_q, 1.0 + DELTA * n, n + 1) / (n + 1)
    close(l_d.float(), torch.tensor(expected["kl_dirichlet"]))
    close(kl_gaussian(params), torch.tensor(expected["kl_gaussian"]))


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize(("version", "log_variance_weight"), [("v2.0", 1.0), ("head", 0.5)])
def test_test_time_read_out_matches_the_reference(case, version, log_variance_weight):
    """The v2.0 code subtracts the whole sum of log variances; the later code (and the paper) half."""
    x, mask, layer, attention = setup(case)
    expected = REFERENCE[version][case]
    real = mask.unsqueeze(-1)  # queries at padding are not compared
    with torch.no_grad():
        params = layer(x, mask)
        output, weights = denoising_attention_eval(
            attention, x, params, log_variance_weight=log_variance_weight
        )
    close(output * real, torch.tensor(expected["eval_output"]) * real)
    close(weights * real.unsqueeze(1), prior_last(expected["eval_weights"]) * real.unsqueeze(1))
    other = 1.5 - log_variance_weight  # the other version's weight gives other weights
    with torch.no_grad():
        _, other_weights = denoising_attention_eval(attention, x, params, log_variance_weight=other)
    gap = (other_weights - prior_last(expected["eval_weights"])).abs().amax()
    assert gap > 1e-3


@pytest.mark.parametrize("case", list(CASES))
def test_training_time_attention_on_fixed_samples_matches_the_reference(case):
    x, mask, _, attention = setup(case)
    expected = REFERENCE["v2.0"][case]
    b, length, _ = x.shape
    z = prior_last(fixed((length + 1, b, DIM), 6.1, 1.0).transpose(0, 1).tolist(), axis=1)
    keep = torch.cat([mask, mask.new_ones(b, 1)], dim=1)  # [B, S] prior last
    raw = prior_last(fixed((length + 1, b), 6.7, 1.0).exp().T.tolist()) * keep
    log_pi = torch.log(raw / raw.sum(-1, keepdim=True))
    real = mask.unsqueeze(-1)
    with torch.no_grad():
        bias = training_key_bias(log_pi, z, attention.head_dim)
        output, weights = attention(x, z, key_mask=keep, key_bias=bias)
    close(output * real, torch.tensor(expected["train_output"]) * real)
    close(weights * real.unsqueeze(1), prior_last(expected["train_weights"]) * real.unsqueeze(1))


def test_multihead_initialisation_is_xavier_with_zero_biases():
    torch.manual_seed(0)
    dim = 64
    attention = Attention(dim, heads=1, init="xavier")
    bound = math.sqrt(6.0 / (4 * dim))
    for projection in (attention.query, attention.key, attention.value):
        assert projection.weight.abs().max() <= bound
        assert projection.weight.abs().max() > 0.95 * bound  # uniform up to the bound
        assert torch.equal(projection.bias, torch.zeros(dim))
    assert torch.equal(attention.out.bias, torch.zeros(dim))
    default = Attention(dim, heads=1)
    assert default.query.weight.abs().max() <= 1 / math.sqrt(dim)
    assert default.query.bias.abs().max() > 0
    with pytest.raises(ValueError, match="unknown attention init"):
        Attention(dim, init="normal")


def test_attention_weight_dropout_acts_in_training_only():
    torch.manual_seed(0)
    attention = Attention(8, heads=2, dropout=0.5)
    x = fixed((2, 6, 8), 0.1, 1.0)
    attention.eval()
    eval_output, eval_weights = attention(x, x)
    attention.train()
    train_output, train_weights = attention(x, x)
    torch.testing.assert_close(train_weights, eval_weights)  # weights returned before dropout
    assert (train_output - eval_output).abs().amax() > 1e-3
    no_dropout = Attention(8, heads=2)
    no_dropout.load_state_dict(attention.state_dict())
    torch.testing.assert_close(no_dropout.train()(x, x)[0], eval_output)


def test_a_saved_model_is_evaluated_with_another_read_out_and_the_same_weights():
    from segrl.errors import ConfigError
    from segrl.experiments.units_eval import _rebuilt
    from segrl.units.config import build_units_config
    from segrl.units.nvib_model import NVIBAutoencoder, NVIBEncoderLayer

    tiny = {"arch.dim": 16, "arch.feed_forward": 16, "arch.encoder_layers": 2}
    saved = build_units_config("nvib", None, {**tiny, "arch.nvib_layers": 1})
    model = NVIBAutoencoder(saved.arch, vocab_size=12)
    v2 = build_units_config(
        "nvib", None, {**tiny, "arch.nvib_layers": 1, "arch.eval_log_variance_weight": 1.0}
    )
    rebuilt = _rebuilt(model, v2, 12, "folder")
    assert [layer.log_variance_weight for layer in rebuilt.encoder_layers[1:]] == [1.0]
    assert isinstance(rebuilt.encoder_layers[1], NVIBEncoderLayer)
    for (name, a), b in zip(model.state_dict().items(), rebuilt.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    wider = build_units_config("nvib", None, {**tiny, "arch.nvib_layers": 1, "arch.dim": 32})
    with pytest.raises(ConfigError, match="change the model's weights"):
        _rebuilt(model, wider, 12, "folder")
