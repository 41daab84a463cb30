"""A Dirichlet prior on a direct lexicon's entry probabilities whose mean is each entry's share of
the training word types that hold it (``LMConfig.lexicon_prior``)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from segrl.config import validate_config
from segrl.errors import ConfigError
from segrl.lm import LMConfig
from segrl.lm.lexicon import PRUNED_LOGIT, set_lexicon_prior
from segrl.lm.training import LMTrainer
from tests.test_lexicon_init import WORDS, held
from tests.test_lm_probability import LEXICON, tiny

pytestmark = pytest.mark.usefixtures("one_thread")


def prior_lm(weight: float):
    lm = tiny("slm", context="none", lexicon=LEXICON, lexicon_logits="direct", speller="bigram")
    lm.config = replace(lm.config, lexicon_prior=weight, lexicon_size=len(LEXICON))
    set_lexicon_prior(lm, held(WORDS))  # a: 4, ab: 4, ba: 3, bab: 2
    return lm


def test_the_prior_is_the_cross_entropy_from_the_held_shares_to_the_lexicon():
    lm = prior_lm(1.0)
    assert torch.equal(lm.lexicon.prior_held, torch.tensor([4.0, 4.0, 3.0, 2.0]))
    with torch.no_grad():
        lm.lexicon.logits[...] = torch.tensor([0.0, 1.0, -1.0, 2.0])
    q = torch.log_softmax(lm.lexicon.logits.detach(), dim=0)
    expected = -(torch.tensor([4.0, 4.0, 3.0, 2.0]) / 13 * q).sum()
    assert lm.lexicon.prior_cross_entropy().item() == pytest.approx(expected.item(), rel=1e-6)
    with torch.no_grad():  # at q = pi it is the shares' entropy, its minimum
        lm.lexicon.logits[...] = torch.tensor([4.0, 4.0, 3.0, 2.0]).log()
    entropy = -sum(n / 13 * math.log(n / 13) for n in (4, 4, 3, 2))
    assert lm.lexicon.prior_cross_entropy().item() == pytest.approx(entropy, rel=1e-6)


def test_a_pruned_entry_has_no_share_of_the_prior():
    lm = prior_lm(1.0)
    with torch.no_grad():
        lm.lexicon.logits[...] = torch.tensor([0.0, 0.0, PRUNED_LOGIT, 0.0])
    # the kept entries share 4 + 4 + 2 = 10 uniformly: each log q = log 1/3
    assert lm.lexicon.prior_cross_entropy().item() == pytest.approx(math.log(3), rel=1e-5)


def test_without_a_weight_there_is_no_prior_and_no_cross_entropy():
    lm = prior_lm(0.0)
    assert lm.lexicon.prior_held is None
    assert lm.lexicon.prior_cross_entropy().item() == 0.0


def test_an_update_moves_the_lexicon_toward_the_held_shares():
    """With the prior alone to pull them (a huge weight against one text's likelihood), logits
    that start equal move apart in the order of the word types that hold their entries."""
    lm = prior_lm(1000.0)
    with torch.no_grad():
        lm.lexicon.logits.zero_()
    trainer = LMTrainer(lm, lr=1e-3, corpus=["ab"] * 4)
    stats = trainer.marginal_step(["ab"])
    assert stats["lexicon_prior_nats"] == pytest.approx(math.log(4), rel=1e-5)
    logits = lm.lexicon.logits.detach()
    assert logits[0] > logits[2] > logits[3]  # held 4, 3, 2
    assert logits[1] > logits[2]


def test_a_trainer_adds_the_prior_at_its_weight_in_pseudo_uses_a_text():
    """The prior's gradient on the logits is ``weight * texts / characters * (q - pi)``: the
    gradients with and without it differ by exactly that."""
    texts = ["abab", "ba"]
    grads = {}
    for weight in (0.0, 2.0):
        lm = prior_lm(weight)
        LMTrainer(lm, lr=1e-9, clip=1e9, corpus=texts).marginal_step(["ab"])
        grads[weight] = lm.lexicon.logits.grad.detach().clone()
    q = torch.softmax(prior_lm(2.0).lexicon.logits.detach(), dim=0)
    pi = torch.tensor([4.0, 4.0, 3.0, 2.0]) / 13
    chars = len("abab") + 1 + len("ba") + 1
    expected = 2.0 * len(texts) / chars * (q - pi)
    assert torch.allclose(grads[2.0] - grads[0.0], expected, atol=1e-6)
    assert expected.abs().max() > 1e-3  # a difference the check can see


@pytest.mark.parametrize(
    "options, message",
    [
        ({"lexicon_prior": -0.5}, "lexicon_prior must be at least 0, got -0.5"),
        ({"lexicon_prior": 1.0, "lexicon_size": 0}, "lexicon_prior weighs a direct lexicon"),
        (
            {"lexicon_prior": 1.0, "lexicon_logits": "projected", "lexicon_size": 10},
            "lexicon_prior weighs a direct lexicon",
        ),
        (
            {"lexicon_prior": 1.0, "categories": "prefix-stem-suffix", "lexicon_size": 10},
            "lexicon_prior weighs a direct lexicon",
        ),
    ],
)
def test_a_prior_without_a_direct_lexicon_is_a_config_error(options, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(LMConfig(model="slm", context="none", **options), "lm.")
