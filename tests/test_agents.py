"""Segmenter policies, the REINFORCE loss and learner, and the policy as a segmenter."""

import json

import numpy as np
import pytest
import torch

from segrl.agents import (
    AgentSegmenter,
    PolicyConfig,
    Reinforce,
    ReinforceConfig,
    SegmenterPolicy,
    ValueBaseline,
    reinforce_loss,
)
from segrl.agents.policies import bucketed_char_states, reverse_index
from segrl.agents.segmenter import separator_id
from segrl.config import validate_config
from segrl.data import GoldWord
from segrl.envs import VectorSentenceSegmentEnv
from segrl.errors import ConfigError, ModelError
from segrl.evaluators.gold import GoldEvaluator

SMALL = {"embedding_dim": 8, "hidden_dim": 16, "dropout": 0.0}


def policy(kind, vocab_size=20, n_actions=2, max_len=32):
    torch.manual_seed(0)
    return SegmenterPolicy(vocab_size, n_actions, max_len, PolicyConfig(kind=kind, **SMALL))


@pytest.mark.parametrize("kind", ["bilstm", "transformer"])
def test_policy_gives_one_distribution_per_position(kind):
    model = policy(kind, n_actions=5)
    ids = torch.randint(4, 20, (3, 10))
    lengths = torch.tensor([10, 7, 2])
    logits = model(ids, lengths)
    assert logits.shape == (3, 9, 5)
    assert model.features(ids, lengths).shape == (3, 9, model.feature_dim)


@pytest.mark.parametrize("kind", ["bilstm", "transformer"])
def test_padding_does_not_change_real_positions(kind):
    model = policy(kind).eval()
    ids = torch.randint(4, 20, (2, 8))
    lengths = torch.tensor([8, 5])
    padded = torch.cat([ids, torch.zeros(2, 6, dtype=torch.long)], dim=1)
    padded[1, 5:] = 0
    noisy = padded.clone()
    noisy[1, 5:] = torch.randint(4, 20, (9,))  # garbage beyond the text must not matter
    with torch.no_grad():
        short = model(ids, lengths)
        long = model(padded, lengths)
        garbage = model(noisy, lengths)
    assert torch.allclose(short[0], long[0, :7], atol=1e-5)
    assert torch.allclose(long[1, :4], garbage[1, :4], atol=1e-5)


@pytest.mark.parametrize("kind", ["bilstm", "transformer"])
def test_length_buckets_change_nothing(kind):
    model = policy(kind).eval()
    torch.manual_seed(1)
    lengths = torch.randint(1, 12, (13,))
    ids = torch.randint(4, 20, (13, 12)) * (torch.arange(12) < lengths[:, None])
    with torch.no_grad():
        whole = model.encoder.char_states(ids, lengths)
        bucketed = bucketed_char_states(model.encoder, ids, lengths, buckets=3)
    real = torch.arange(12) < lengths[:, None]
    assert torch.allclose(whole[real], bucketed[real], atol=1e-5)


def test_word_context_reads_each_word_alone():
    model = SegmenterPolicy(20, 2, 32, PolicyConfig(**SMALL), separator_id=4).eval()
    ids = torch.tensor([[5, 6, 7, 4, 8, 9, 10, 11]])  # "abc defg" with 4 as the space
    other = torch.tensor([[5, 6, 7, 4, 12, 13, 14, 15]])  # another second word
    alone = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        logits = model(ids, torch.tensor([8]))
        changed = model(other, torch.tensor([8]))
        first_word = model(alone, torch.tensor([3]))
    assert torch.allclose(logits[0, :2], first_word[0, :2], atol=1e-5)
    assert torch.allclose(logits[0, :2], changed[0, :2], atol=1e-5)
    assert not torch.allclose(logits[0, 4:], changed[0, 4:])


def test_repeated_words_are_encoded_once_with_the_result_of_each_alone():
    """With word context each distinct word of a batch is encoded once; every occurrence (and words
    that are prefixes of others) gets what the word alone gets."""
    model = SegmenterPolicy(20, 2, 32, PolicyConfig(**SMALL), separator_id=4).eval()
    ab, abc, b = [5, 6], [5, 6, 7], [6]
    rows = [ab + [4] + abc + [4] + ab, b + [4] + ab + [4] + b]
    width = max(map(len, rows))
    ids = torch.tensor([row + [0] * (width - len(row)) for row in rows])
    with torch.no_grad():
        logits = model(ids, torch.tensor([len(row) for row in rows]))
        alone = {
            tuple(word): model(torch.tensor([word]), torch.tensor([len(word)]))[0]
            for word in (ab, abc, b)
        }
    for row, text in enumerate(rows):
        start = 0
        for end in [i for i, c in enumerate(text) if c == 4] + [len(text)]:
            word = tuple(text[start:end])
            inside = logits[row, start : end - 1]  # decisions after each character but the last
            assert torch.allclose(inside, alone[word][: len(word) - 1], atol=1e-5)
            start = end + 1


def test_bilstm_left_and_right_parts_are_disjoint():
    """Cao & Rei: position i's forward half sees characters 0..i only, its backward half i+1.. only."""
    model = policy("bilstm").eval()
    hidden = model.encoder.hidden_dim
    ids = torch.randint(4, 20, (1, 9))
    lengths = torch.tensor([9])
    i = 4
    right_changed = ids.clone()
    right_changed[0, i + 1 :] = torch.randint(4, 20, (9 - i - 1,))
    left_changed = ids.clone()
    left_changed[0, : i + 1] = (ids[0, : i + 1] + 1) % 16 + 4
    with torch.no_grad():
        base = model.features(ids, lengths)[0, i]
        right = model.features(right_changed, lengths)[0, i]
        left = model.features(left_changed, lengths)[0, i]
    assert torch.allclose(base[:hidden], right[:hidden])  # left part unchanged
    assert not torch.allclose(base[hidden:], right[hidden:])
    assert torch.allclose(base[hidden:], left[hidden:])  # right part unchanged
    assert not torch.allclose(base[:hidden], left[:hidden])


def test_reverse_index_reverses_within_length():
    index = reverse_index(torch.tensor([3, 5]), 5)
    assert index.tolist() == [[2, 1, 0, 3, 4], [4, 3, 2, 1, 0]]


def test_bad_policy_config_is_a_config_error():
    with pytest.raises(
        ConfigError, match="policy.kind must be one of: bilstm, transformer; got 'cnn'"
    ):
        validate_config(PolicyConfig(kind="cnn"), "policy.")
    with pytest.raises(ConfigError, match="multiple"):
        validate_config(
            PolicyConfig(kind="transformer", hidden_dim=15, transformer_heads=2), "policy."
        )


def test_reinforce_loss_raises_rewarded_and_lowers_punished_actions():
    logits = torch.zeros(1, 3, 2, requires_grad=True)
    actions = torch.tensor([[1, 1, 1]])
    free = torch.tensor([[True, True, False]])
    weights = torch.tensor([[1.0, -1.0, 5.0]])
    loss, stats = reinforce_loss(logits, actions, free, weights, entropy_coef=0.0)
    loss.backward()
    grad = logits.grad[0, :, 1] - logits.grad[0, :, 0]  # d loss / d (split logit - no-split logit)
    assert grad[0] < 0  # descending the loss raises the rewarded split
    assert grad[1] > 0  # and lowers the punished one
    assert grad[2] == 0  # not the agent's decision: no gradient
    assert stats["entropy"] == pytest.approx(np.log(2))


def test_the_expected_gradient_is_the_mean_of_the_sampled_ones_over_both_actions():
    """With mirrored rewards (the other action's is minus the reward), the expected policy term's
    gradient is sum_a pi(a) times the sampled term's gradient for a, whichever action was drawn."""
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 2)
    free = torch.tensor([[True, True, True, False], [True, False, True, True]])
    split_reward = torch.randn(2, 4)  # r(split); r(no split) = -r(split)

    def gradient(actions, expected):
        x = logits.clone().requires_grad_(True)
        weights = torch.where(actions == 1, split_reward, -split_reward)
        mode = "expected" if expected else "sampled"
        loss, _ = reinforce_loss(x, actions, free, weights, 0.0, gradient=mode)
        loss.backward()
        return x.grad

    split, keep = torch.ones(2, 4, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long)
    p = torch.softmax(logits, -1)[..., 1:]  # [B, P, 1] pi(split)
    mean = p * gradient(split, False) + (1 - p) * gradient(keep, False)
    assert torch.allclose(gradient(split, True), mean, atol=1e-6)
    assert torch.allclose(gradient(keep, True), mean, atol=1e-6)  # the draw does not matter
    assert not torch.allclose(gradient(split, False), gradient(keep, False))


def test_the_forward_kl_gradient_is_the_policy_minus_the_entropy_regularised_optimum():
    """Per decision, d loss / d (split logit - no-split logit) = (pi - pi*) / n with pi*(split) =
    sigmoid(2 r(split) / c), whichever action was drawn; it stays large where the policy is
    confidently wrong, where the expected gradient (the reverse KL) vanishes."""
    logits = torch.tensor([[[0.0, 0.0], [0.0, 3.0], [6.0, -6.0], [0.0, 1.0]]])  # [1, 4, 2]
    free = torch.tensor([[True, True, True, False]])
    split_reward = torch.tensor([[1.0, -2.0, 4.0, 3.0]])  # r(no split) = -r(split)
    coef = 2.0

    def logit_gradient(actions, mode):
        x = logits.clone().requires_grad_(True)
        weights = torch.where(actions == 1, split_reward, -split_reward)
        loss, stats = reinforce_loss(x, actions, free, weights, coef, gradient=mode)
        loss.backward()
        return (x.grad[..., 1] - x.grad[..., 0])[0] / 2, stats  # d loss / d (z_split - z_keep)

    pi = torch.softmax(logits, -1)[0, :, 1]
    target = torch.sigmoid(2 * split_reward[0] / coef)
    want = (pi - target) * free[0] / 3  # three free decisions
    for actions in (torch.ones(1, 4, dtype=torch.long), torch.zeros(1, 4, dtype=torch.long)):
        got, stats = logit_gradient(actions, "forward-kl")
        assert torch.allclose(got, want, atol=1e-6)
        assert got[3] == 0  # not a decision of the agent's
    # position 2: the policy never splits (pi = 6e-6) where the optimum splits (0.98); the reverse
    # KL's gradient (expected, with the entropy bonus) is almost nil there, the forward KL's is not
    reverse, _ = logit_gradient(torch.ones(1, 4, dtype=torch.long), "expected")
    assert abs(reverse[2]) < 1e-3 < 0.3 < abs(got[2])
    assert got[2] < 0  # descending the loss raises the split
    # at the optimum the forward KL's gradient is 0
    x = torch.stack([torch.zeros(4), torch.logit(target)], -1).unsqueeze(0).requires_grad_(True)
    weights = torch.where(actions == 1, split_reward, -split_reward)
    loss, _ = reinforce_loss(x, actions, free, weights, coef, gradient="forward-kl")
    loss.backward()
    assert torch.allclose(x.grad, torch.zeros_like(x.grad), atol=1e-6)


def test_the_expected_gradient_needs_mirrored_rewards(corpus):
    """Refused in the config, before anything is trained: unmirrored rewards, more than two actions,
    a per-action baseline; gold rewards are mirrored and train."""
    from segrl.agents import TrainConfig

    with pytest.raises(ConfigError, match="per_action_baseline goes with"):
        validate_config(
            ReinforceConfig(per_action_baseline=True, per_action_gradient="expected"), "reinforce."
        )
    with pytest.raises(ConfigError, match="reinforce.per_action_gradient"):
        validate_config(ReinforceConfig(per_action_gradient="exact"), "reinforce.")
    config = TrainConfig()
    config.reinforce.per_action_gradient = "expected"
    validate_config(config)  # Morfessor's +-1 rewards are mirrored
    for variant, mirrored in {"posterior": True, "flip": True, "resample": False}.items():
        config.evaluator.name, config.evaluator.lm.reward_variant = "lm", variant
        assert config.evaluator.mirrored_action_rewards() is mirrored
        if not mirrored:
            with pytest.raises(ConfigError, match="here: binary rules, 'resample' lm rewards"):
                validate_config(config)
    config.evaluator.name, config.env.rules = "gold", "full"
    with pytest.raises(ConfigError, match="needs binary rules"):
        validate_config(config)
    config.env.reward = "sequence"  # the option is for per-action rewards only: ignored
    validate_config(config)
    env = VectorSentenceSegmentEnv(
        4, corpus=corpus, texts=["walked"], evaluator=GoldEvaluator(GOLD), reward="per-action"
    )
    model = SegmenterPolicy(len(corpus.vocab), 2, env.setup.max_len, PolicyConfig(**SMALL))
    learner = Reinforce(model, ReinforceConfig(per_action_gradient="expected"), "per-action")
    assert learner.gradient == "expected"
    _, stats, _ = learner.step(env, env.reset())
    assert np.isfinite(stats["policy_loss"])
    config.env.reward, config.evaluator.lm.reward_variant = "per-action", "resample"
    config.evaluator.name, config.env.rules = "lm", "binary"
    config.reinforce.per_action_gradient = "forward-kl"
    with pytest.raises(ConfigError, match="'forward-kl' needs binary rules"):
        validate_config(config)
    with pytest.raises(ConfigError, match="needs an entropy bonus above 0"):
        validate_config(
            ReinforceConfig(per_action_gradient="forward-kl", entropy_coef=0.0), "reinforce."
        )
    learner = Reinforce(model, ReinforceConfig(per_action_gradient="forward-kl"), "per-action")
    _, stats, _ = learner.step(env, env.reset())
    assert stats["policy_loss"] > 0  # a cross-entropy


def test_the_per_action_gradient_defaults_to_the_forward_kl_for_the_lm_posterior_only():
    """None resolves to forward-kl for the LM's posterior reward with binary rules, sampled for
    every other reward and where a per-action baseline or no entropy bonus is asked for; a choice
    made is kept; the other LM rewards still validate with the default."""
    from segrl.agents import TrainConfig

    config = TrainConfig()
    assert config.reinforce.per_action_gradient is None
    assert config.per_action_gradient() == "sampled"  # Morfessor's +-1
    config.evaluator.name, config.env.reward = "lm", "per-action"
    assert config.per_action_gradient() == "forward-kl"
    for variant in ("flip", "resample", "incremental"):
        config.evaluator.lm.reward_variant = variant
        assert config.per_action_gradient() == "sampled"
        validate_config(config)
    config.evaluator.lm.reward_variant = "posterior"
    config.reinforce.per_action_baseline = True
    assert config.per_action_gradient() == "sampled"
    config.reinforce.per_action_baseline, config.reinforce.entropy_coef = False, 0.0
    assert config.per_action_gradient() == "sampled"
    config.reinforce.entropy_coef = None
    config.env.rules = "full"
    assert config.per_action_gradient() == "sampled"
    config.env.rules, config.reinforce.per_action_gradient = "binary", "expected"
    assert config.per_action_gradient() == "expected"


def test_entropy_bonus_pushes_towards_uniform():
    logits = torch.tensor([[[2.0, 0.0]]], requires_grad=True)
    loss, _ = reinforce_loss(
        logits, torch.tensor([[0]]), torch.tensor([[True]]), torch.zeros(1, 1), entropy_coef=1.0
    )
    loss.backward()
    assert logits.grad[0, 0, 0] > 0 and logits.grad[0, 0, 1] < 0  # gap between logits shrinks


def test_value_baseline_averages_free_positions_only():
    baseline = ValueBaseline(4, hidden=100)
    features = torch.randn(2, 5, 4)
    free = torch.tensor([[True, True, False, False, False], [True] * 5])
    changed = features.clone()
    changed[0, 2:] = 100.0  # not free: ignored
    assert torch.allclose(baseline(features, free), baseline(changed, free))
    assert len(baseline.net) == 3 and baseline.net[0].out_features == 100


GOLD = [GoldWord("walked", (("walk", "ed"),)), GoldWord("jumping", (("jump", "ing"),))]


@pytest.mark.parametrize("reward", ["per-action", "sequence"])
def test_reinforce_updates_raise_the_reward_on_one_word(corpus, reward):
    """On one word with a gold split, a few updates make the rewarded segmentation more likely."""
    torch.manual_seed(0)
    env = VectorSentenceSegmentEnv(
        16, corpus=corpus, texts=["walked"], evaluator=GoldEvaluator(GOLD), reward=reward
    )
    model = SegmenterPolicy(len(corpus.vocab), 2, env.setup.max_len, PolicyConfig(**SMALL))
    config = ReinforceConfig(lr=1e-2, entropy_coef=0.0)
    learner = Reinforce(model, config, reward)
    assert (learner.baseline is not None) == (reward == "sequence")
    batch = env.reset()
    ids = torch.from_numpy(batch["chars"][:1, :6])
    lengths = torch.tensor([6])
    reference = torch.tensor([0, 0, 0, 1, 0])  # walk|ed

    def log_prob_of_reference():
        with torch.no_grad():
            logits = model(ids, lengths)[0]
            return torch.log_softmax(logits, -1).gather(1, reference[:, None]).sum().item()

    before = log_prob_of_reference()
    observation = batch
    for _ in range(30):
        observation, stats, _ = learner.step(env, observation)
    assert log_prob_of_reference() > before + 1.0
    assert set(stats) >= {"reward", "entropy", "policy_loss", "grad_norm", "split_rate"}


def test_agent_segmenter_spells_sentences_and_survives_save_load(corpus, tmp_path):
    model = policy("transformer", vocab_size=len(corpus.vocab), max_len=128)
    for hide_spaces in (False, True):
        segmenter = AgentSegmenter(model, corpus.vocab, hide_spaces=hide_spaces)
        sentences = corpus.test[:5] + ["walked"]
        segmented = segmenter.segment_sentences(sentences)
        for sentence, segments in zip(sentences, segmented, strict=True):
            assert "".join(segments) == sentence
        if not hide_spaces:  # known word boundaries: every space is a segment of its own
            assert all(" " not in s or s == " " for segs in segmented for s in segs)
        loaded = AgentSegmenter.load(segmenter.save(tmp_path / f"agent-{hide_spaces}"))
        assert loaded.hide_spaces == hide_spaces
        assert loaded.segment_sentences(sentences) == segmented
    with pytest.raises(ModelError, match="no saved agent segmenter"):
        AgentSegmenter.load(tmp_path / "missing")


def test_an_agent_saved_with_the_old_segmenter_key_loads(corpus, tmp_path):
    """``agent_segmenter.json`` names the policy's config ``policy``; folders saved when it was
    ``segmenter`` load as they did."""
    model = policy("transformer", vocab_size=len(corpus.vocab), max_len=128)
    saved = AgentSegmenter(model, corpus.vocab).save(tmp_path / "agent")
    meta_file = saved / "agent_segmenter.json"
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    assert meta["policy"]["kind"] == "transformer" and "segmenter" not in meta
    meta_file.write_text(json.dumps({"segmenter": meta.pop("policy"), **meta}), encoding="utf-8")
    loaded = AgentSegmenter.load(saved)
    assert loaded.policy.config == model.config
    sentences = corpus.test[:5]
    assert loaded.segment_sentences(sentences) == AgentSegmenter(
        model, corpus.vocab
    ).segment_sentences(sentences)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bilstm", "transformer"])
def test_a_briefly_trained_agent_agrees_with_morfessor_better_than_an_untrained_one(
    corpus, kind, tmp_path
):
    """Per-action REINFORCE against Morfessor: agreement on held-out sentences rises well above the
    untrained policy's."""
    from segrl.agents.evaluation import evaluate_agent
    from segrl.evaluators import EvaluatorConfig, build_evaluator

    torch.manual_seed(0)
    morfessor = build_evaluator(EvaluatorConfig(cache_dir=str(tmp_path)), corpus)
    env = VectorSentenceSegmentEnv(16, corpus=corpus, evaluator=morfessor)
    model = SegmenterPolicy(
        len(corpus.vocab),
        2,
        env.setup.max_len,
        PolicyConfig(kind=kind),
        separator_id(corpus.vocab),
    )
    segmenter = AgentSegmenter(model, corpus.vocab)
    heldout = corpus.valid + corpus.test

    def agreement() -> float:
        metrics, _ = evaluate_agent(segmenter, heldout, {"morfessor": morfessor})
        return metrics["morfessor_boundary_f1"]

    untrained = agreement()
    learner = Reinforce(model, ReinforceConfig(), "per-action")
    observation = env.reset()
    for _ in range(150):
        observation, _stats, _batch = learner.step(env, observation)
    trained = agreement()
    assert trained > max(untrained + 0.3, 0.7), (untrained, trained)
