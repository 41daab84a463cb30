"""DCSA and the stride baseline: hard-concrete gates against Monte Carlo, targeted sparsity, the lambda
schedule, slot attention's equivariance and padding, the stride units, the decoder-attention segments,
probing's matching and scores, and ``segrl units train --model dcsa`` / ``segrl units probe``."""

import math

import numpy as np
import pytest
import torch
from mlflow.tracking import MlflowClient

from segrl.cli import main
from segrl.config import validate_config
from segrl.data.corpus import PLACEHOLDER
from segrl.data.vocab import CharVocab
from segrl.errors import ConfigError, ModelError
from segrl.tracking.queries import segmenter_runs
from segrl.units.base import Encoding, make_autoencoder_batch
from segrl.units.config import build_units_config
from segrl.units.dcsa import (
    SPARSITY,
    DCSAAutoencoder,
    DCSAConfig,
    StrideAutoencoder,
    StrideConfig,
)
from segrl.units.evaluation import segment_texts
from segrl.units.l0drop import (
    L0Drop,
    closed_probability,
    deterministic_gates,
    expected_open_gates,
    lambda_schedule,
    sample_gates,
    targeted_sparsity,
)
from segrl.units.probing import (
    EMPTY,
    UNKNOWN,
    ProbeConfig,
    count_outcomes,
    forward_probe,
    hungarian_match,
    pad_example,
    prf,
)
from segrl.units.slot_attention import SlotAttention, SlotInitialiser
from segrl.units.transformer import TransformerAutoencoder, TransformerConfig

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = {"dim": 32, "feed_forward": 64, "heads": 2, "unit_dim": 16, "max_len": 64}

# -- L0Drop -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("log_alpha", "expected"), [(-3.0, 0.8049), (0.0, 0.1704), (1.0, 0.0703)])
def test_closed_gate_probability_matches_monte_carlo(log_alpha, expected):
    value = closed_probability(torch.tensor(log_alpha)).item()
    assert value == pytest.approx(expected, abs=1e-4)  # the spec's values
    generator = torch.Generator().manual_seed(0)
    gates = sample_gates(torch.full((400_000,), log_alpha), generator=generator)
    assert (gates == 0).float().mean().item() == pytest.approx(value, abs=3e-3)
    assert 0 < (gates == 1).float().mean().item() < 1  # exact ones have mass too
    assert gates.min() >= 0 and gates.max() <= 1


def test_expected_open_gates_and_test_time_gates():
    log_alpha = torch.tensor([[-3.0, 0.0, 1.0], [1.0, 1.0, -50.0]])
    mask = torch.tensor([[True, True, True], [True, False, True]])
    l0 = expected_open_gates(log_alpha, mask)
    assert l0.tolist() == pytest.approx([0.1951 + 0.8296 + 0.9297, 0.9297], abs=1e-3)
    gates = deterministic_gates(log_alpha)
    assert gates[0, 2].item() == pytest.approx(0.7773, abs=1e-4)  # not E[g] (about 0.707)
    assert gates[1, 2].item() == 0.0 and deterministic_gates(torch.tensor(9.0)).item() == 1.0


def test_targeted_sparsity_has_no_gradient_below_the_target():
    lengths = torch.tensor([60.0, 60.0])
    log_alpha = torch.tensor([[2.0] * 20, [-4.0] * 20], requires_grad=True)  # L0 ~ 19.3 and ~ 1.8
    targeted_sparsity(expected_open_gates(log_alpha), lengths, ratio=6.0).sum().backward()
    assert torch.all(log_alpha.grad[0] > 0)  # above N / r = 10: pushed to close
    assert torch.all(log_alpha.grad[1] == 0)  # below: left alone


def test_gates_on_normalised_slots_keep_the_penalty_s_gradient_when_slots_grow():
    """Slots a decoder reads grow along the gate's weights (log alpha 6-12 in trained models): on
    the slots themselves the gates saturate and the penalty's gradient vanishes; on LayerNorm'd
    slots log alpha stays within |w| sqrt(D) + |b| whatever the slots' scale, and the same penalty
    still moves the gate's weights."""
    torch.manual_seed(0)
    plain, normalized = L0Drop(16), L0Drop(16, normalize=True)
    with torch.no_grad():
        normalized.weight.copy_(plain.weight)
    w = plain.weight.detach()
    slots = 0.3 * torch.randn(4, 8, 16) + w * 8.0 / w.square().sum()  # log alpha about 8
    grown = 5.0 * slots
    bound = normalized.weight.norm() * 16**0.5 + normalized.bias.abs()
    assert normalized.log_alpha(grown).abs().max() <= bound + 1e-4
    assert torch.allclose(normalized.log_alpha(slots), normalized.log_alpha(grown), atol=1e-3)
    assert plain.log_alpha(grown).min() > 30  # every gate saturated open

    def penalty_gradient(gate: L0Drop) -> float:
        gate.zero_grad()
        l0 = expected_open_gates(gate.log_alpha(grown))  # 8 slots open, the target is 2
        targeted_sparsity(l0, torch.tensor([12.0] * 4), 6.0).sum().backward()
        return gate.weight.grad.norm().item()

    assert penalty_gradient(plain) < 1e-6 < 0.05 < penalty_gradient(normalized)
    model = DCSAAutoencoder(DCSAConfig(slots=6, gate_input="normalized", **SMALL), 12)
    assert model.l0drop.bias is not None
    with pytest.raises(ConfigError, match="arch.gate_input"):
        validate_config(DCSAConfig(gate_input="norm"), "arch.")


def test_targeted_sparsity_stops_closing_gates_at_the_target():
    log_alpha = torch.full((1, 32), 1.0, requires_grad=True)  # nearly all open, L0 ~ 30
    optimizer = torch.optim.SGD([log_alpha], lr=1.0)
    for _ in range(300):
        loss = targeted_sparsity(expected_open_gates(log_alpha), torch.tensor([60.0]), 6.0)
        optimizer.zero_grad()
        loss.sum().backward()
        optimizer.step()
    # a last step may overshoot the target by at most 32 * 0.25^2 (all gates at the steepest slope)
    assert 10.0 - 2.0 < expected_open_gates(log_alpha).item() <= 10.0
    plain = torch.full((1, 32), 1.0, requires_grad=True)  # the plain L0 penalty closes them all
    optimizer = torch.optim.SGD([plain], lr=1.0)
    for _ in range(300):
        optimizer.zero_grad()
        expected_open_gates(plain).sum().backward()
        optimizer.step()
    assert expected_open_gates(plain).item() < 2.0


def test_lambda_schedule():
    english = [lambda_schedule(e / 200, 2e-5, 2.0, 6.4e-4, 0.05) for e in (0, 9, 10, 49, 50, 199)]
    assert english == pytest.approx([2e-5, 2e-5, 4e-5, 3.2e-4, 6.4e-4, 6.4e-4])
    assert lambda_schedule(0.35, 2e-5, 1.5, 3e-4, 0.05) == pytest.approx(3e-4)  # capped
    assert lambda_schedule(0.3, 2e-5, 1.5, 3e-4, 0.05) == pytest.approx(2e-5 * 1.5**6)


# -- slot attention ---------------------------------------------------------------------------------


def test_slot_attention_is_permutation_equivariant_in_the_slots():
    torch.manual_seed(0)
    layer = SlotAttention(input_dim=24, dim=16, iterations=2)
    inputs, slots = torch.randn(2, 7, 24), torch.randn(2, 5, 16)
    mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    out, attention = layer(inputs, mask, slots)
    permutation = torch.tensor([3, 0, 4, 1, 2])
    out_p, attention_p = layer(inputs, mask, slots[:, permutation])
    assert torch.allclose(out_p, out[:, permutation], atol=1e-5)
    assert torch.allclose(attention_p, attention[:, :, permutation], atol=1e-6)
    # each character distributes its mass over the slots; padding takes no part
    assert torch.allclose(attention.sum(-1), mask.float(), atol=1e-6)
    alone, _ = layer(inputs[1:, :4], mask[1:, :4], slots[1:])
    assert torch.allclose(alone, out[1:], atol=1e-5)


def test_slot_scale_multiplies_the_logits():
    torch.manual_seed(0)
    plain = SlotAttention(input_dim=24, dim=16)
    sharp = SlotAttention(input_dim=24, dim=16, scale=4.0)
    sharp.load_state_dict(plain.state_dict())
    inputs, slots, mask = (
        torch.randn(1, 7, 24),
        torch.randn(1, 5, 16),
        torch.ones(1, 7, dtype=torch.bool),
    )
    _, attention = plain(inputs, mask, slots)
    _, sharper = sharp(inputs, mask, slots)
    logits = attention.log()  # up to a constant per character
    expected = torch.softmax(4.0 * logits, dim=-1)
    assert torch.allclose(sharper, expected, atol=1e-5)
    assert sharper.max(-1).values.mean() > attention.max(-1).values.mean()
    with pytest.raises(ConfigError, match="arch.slot_scale must be positive"):
        build_units_config("dcsa", None, {"arch.slot_scale": 0.0})


@pytest.mark.parametrize("init", ["per_slot", "shared", "positional"])
def test_slot_initialisations(init):
    torch.manual_seed(0)
    initialiser = SlotInitialiser(slots=8, dim=16, init=init, sigma=0.5, max_len=32)
    learned_sigma = any(name == "log_sigma" for name, _ in initialiser.named_parameters())
    assert learned_sigma == (init != "per_slot")
    means = initialiser.means()
    assert (means[0] != means[1]).any() == (init != "shared")
    train = initialiser(3)
    assert train.shape == (3, 8, 16) and not torch.equal(train[0], train[1])  # sampled
    initialiser.eval()
    assert torch.equal(initialiser(2)[0], means)  # the means at test time


# -- the models -------------------------------------------------------------------------------------


def test_stride_keeps_every_kth_encoder_output():
    model = StrideAutoencoder(StrideConfig(stride=3, **SMALL), vocab_size=20)
    chars = torch.arange(2 * 8 * 32, dtype=torch.float32).view(2, 8, 32)
    mask = torch.tensor([[True] * 8, [True] * 4 + [False] * 4])
    encoding = model.units(Encoding(chars, mask, torch.zeros(2, 8, 8)), mask)
    assert torch.equal(encoding.memory, model.down(chars[:, [0, 3, 6]]))
    assert encoding.memory_mask.tolist() == [[True, True, True], [True, True, False]]
    assert encoding.kept.tolist() == [3.0, 2.0]  # ceil(N / k)


def test_dcsa_gates_mask_closed_slots_and_segments_come_from_the_decoder():
    torch.manual_seed(0)
    vocab = CharVocab.from_texts(["the cat sat on the mat"], PLACEHOLDER)
    model = DCSAAutoencoder(DCSAConfig(slots=6, **SMALL), len(vocab))
    with torch.no_grad():  # gates: slot vectors dotted with w; close about half of them
        model.l0drop.weight.copy_(torch.randn(16) * 3)
    model.eval()
    texts = ["the cat", "sat on the mat"]
    batch = make_autoencoder_batch(vocab, texts)
    with torch.no_grad():
        encoding = model.encode(batch.source, batch.source_mask)
    closed = ~encoding.memory_mask
    assert closed.any() and encoding.memory_mask.any()
    assert torch.all(encoding.memory[closed] == 0)
    assert encoding.kept.tolist() == encoding.memory_mask.sum(1).float().tolist()
    attention = encoding.attention  # [B, L, K]: the decoder's, rows = predicted characters
    assert attention.shape == (2, 14, 6)
    assert torch.all(attention.masked_select(closed.unsqueeze(1).expand_as(attention)) == 0)
    assert torch.allclose(attention[0, :7].sum(-1), torch.ones(7), atol=1e-5)
    assert torch.all(attention[0, 7:] == 0)
    assert {"slot attention", "decoder"} <= set(encoding.layer_attention)
    segments = segment_texts(model, vocab, texts)
    assert ["".join(s) for s in segments] == texts
    model.train()
    out = model.loss(batch, progress=0.0)
    expected = (
        2e-5
        * torch.maximum(out.encoding.extras["l0"], torch.tensor([7.0, 14.0]) / 6).sum()
        / (7 + 1 + 14 + 1)
    )
    assert out.terms[SPARSITY].item() == pytest.approx(expected.item(), rel=1e-5)
    out.total.backward()
    assert model.l0drop.weight.grad.abs().sum() > 0


def test_gate_warmup_keeps_every_slot_open_and_the_penalty_off():
    torch.manual_seed(0)
    vocab = CharVocab.from_texts(["the cat sat on the mat"], PLACEHOLDER)
    model = DCSAAutoencoder(DCSAConfig(slots=6, gate_warmup=0.5, **SMALL), len(vocab))
    with torch.no_grad():
        model.l0drop.weight.fill_(-10.0)  # every gate would be closed
    batch = make_autoencoder_batch(vocab, ["the cat", "sat on the mat"])
    early = model.loss(batch, progress=0.4)
    assert early.encoding.memory_mask.all() and early.terms[SPARSITY].item() == 0.0
    late = model.loss(batch, progress=0.5)
    assert late.terms[SPARSITY].item() > 0 and late.encoding.kept.sum() < 12


def test_dcsa_starts_from_a_trained_stride_models_encoder_and_decoder():
    torch.manual_seed(0)
    stride = StrideAutoencoder(StrideConfig(stride=3, **SMALL), vocab_size=20)
    dcsa = DCSAAutoencoder(DCSAConfig(slots=6, **SMALL), vocab_size=20)
    own = {k: v.clone() for k, v in dcsa.state_dict().items()}
    dcsa.init_from_pretrained(stride)
    trained, after = stride.state_dict(), dcsa.state_dict()
    copied = [k for k in after if k.startswith(("embedding.", "encoder_", "decoder."))]
    assert copied and all(torch.equal(after[k], trained[k]) for k in copied)
    kept = [k for k in after if k.startswith(("slot_init.", "slot_attention.", "l0drop."))]
    assert kept and all(torch.equal(after[k], own[k]) for k in kept)
    assert set(copied) | set(kept) == set(after)  # and the stride model's down-projection is left
    with pytest.raises(ModelError, match="another shape .*unit_dim 8 against 16"):
        dcsa.init_from_pretrained(StrideAutoencoder(StrideConfig(**{**SMALL, "unit_dim": 8}), 20))
    with pytest.raises(ModelError, match="cannot start from a trained TransformerAutoencoder"):
        dcsa.init_from_pretrained(TransformerAutoencoder(TransformerConfig(), 20))


def test_dcsa_config_errors():
    with pytest.raises(ConfigError, match="arch.slot_init must be one of"):
        build_units_config("dcsa", None, {"arch.slot_init": "random"})
    with pytest.raises(ConfigError, match="arch.stride must be at least 1"):
        build_units_config("stride", None, {"arch.stride": 0})
    config = build_units_config("dcsa")
    assert (config.train.lr, config.train.batch_size, config.arch.slots) == (1e-4, 16, 64)


# -- probing ----------------------------------------------------------------------------------------


def test_hungarian_matching_minimises_the_total_cross_entropy():
    # greedy (each target its best vector) would give vector 0 to both targets 0 and 1
    probs = torch.tensor(
        [
            [0.05, 0.90, 0.05],  # vector 0: label 1 (0.9) or label 2 (0.05)
            [0.10, 0.70, 0.20],  # vector 1: label 1 (0.7)
            [0.80, 0.10, 0.10],  # vector 2: empty
        ]
    )
    labels = torch.tensor([1, 2, EMPTY])
    match = hungarian_match(probs.log(), labels)
    # vector 1 -> label 2 would cost -log 0.2; vector 0 -> label 2 -log 0.05: keep 0 -> 1
    assert match.tolist() == [0, 1, 2]
    cost = -sum(math.log(probs[v, y]) for v, y in zip(match, labels.tolist(), strict=True))
    brute = min(
        -sum(math.log(probs[v, y]) for v, y in zip(p, labels.tolist(), strict=True))
        for p in __import__("itertools").permutations(range(3))
    )
    assert cost == pytest.approx(brute)


def test_probe_scores_count_empty_as_negative():
    labels = torch.tensor([5, 6, 7, UNKNOWN, EMPTY, EMPTY])
    predictions = torch.tensor([5, EMPTY, 8, UNKNOWN, 9, EMPTY])
    assert count_outcomes(predictions, labels) == (1, 2, 3)
    assert prf(1, 2, 3) == pytest.approx({"precision": 1 / 3, "recall": 1 / 4, "f1": 2 / 7})
    vectors, padded = pad_example(torch.ones(2, 4), [3, 4, 5])
    assert vectors.tolist()[2] == [0.0] * 4 and padded.tolist() == [3, 4, 5]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_forward_probe_reads_units_from_informative_vectors_only(seed):
    torch.manual_seed(seed)  # the codes and orders, whatever tests ran before
    rng = np.random.default_rng(seed)
    codes = torch.randn(10, 8)  # one vector per unit 2..9

    def examples(informative: bool, n: int):
        out = []
        for _ in range(n):
            units = rng.choice(np.arange(2, 10), size=3, replace=False).tolist()
            vectors = codes[units] if informative else torch.randn(3, 8)
            out.append(pad_example(vectors[torch.randperm(3)], units))  # order does not matter
        return out

    config = ProbeConfig(epochs=60, batch_size=8, hidden=32)  # at 30 some codes still took 0.68
    _, good = forward_probe(examples(True, 120), examples(True, 40), 10, config)
    _, noise = forward_probe(examples(False, 120), examples(False, 40), 10, config)
    assert good["f1"] > 0.95
    assert noise["f1"] < 0.5


@pytest.mark.slow
def test_units_cli_train_dcsa_and_probe(mlflow_store, small_corpus_file, tmp_path, capsys):
    folder = tmp_path / "dcsa"
    args = ["units", "train", "--model", "dcsa", "--steps", "6", "--out", str(folder)]
    args += ["--corpus", str(small_corpus_file), "--gold-max-words", "30", "--threads", "1"]
    tiny = {**{f"arch.{k}": v for k, v in SMALL.items()}, "arch.slots": 8, "log_every": 3}
    tiny.update({"eval.robustness": "false", "eval.figure_valid_sentences": 1})
    args += [f"--set={k}={v}" for k, v in tiny.items()]
    assert main(args) == 0
    assert "[dcsa] segment_f1" in capsys.readouterr().out
    runs = segmenter_runs()
    assert [(r["segmenter"], r["kind"]) for r in runs] == [("dcsa", "units")]
    history = MlflowClient().get_metric_history(runs[0]["run_id"], "train/open_slots")
    assert [m.step for m in history] == [3, 6] and all(0 <= m.value <= 8 for m in history)
    assert list((mlflow_store / "mlruns").rglob("attention/sentence_0.png"))
    probe = ["units", "probe", str(folder), "--targets", "bpe", "--epochs", "2"]
    probe += ["--reverse-epochs", "2", "--train-sentences", "20", "--test-sentences", "10"]
    probe += ["--bpe-vocab-size", "60", "--threads", "1"]
    assert main(probe) == 0
    out = capsys.readouterr().out
    assert "dcsa untrained" in out and "bpe" in out
    client = MlflowClient()
    experiment = client.get_experiment_by_name("segrl").experiment_id
    [run] = [r for r in client.search_runs([experiment]) if r.info.run_name == "probe"]
    for name in ("dcsa", "dcsa untrained"):
        assert 0 <= run.data.metrics[f"probe/{name}/bpe/f1"] <= 1
        assert math.isfinite(run.data.metrics[f"probe/{name}/bpe/reverse"])
