"""The co-trained LM evaluator: the sign and formula of every reward, causality, resumption, and a
``segrl train`` run rewarded by it."""

import copy
import io
import math
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
import torch
from mlflow.tracking import MlflowClient

from segrl.agents import TrainConfig
from segrl.checkpoint import load_checkpoint, save_checkpoint
from segrl.config import build_config, validate_config
from segrl.data.vocab import CharVocab
from segrl.envs import CharSegmentEnv
from segrl.errors import ConfigError
from segrl.evaluators import SPLIT, encode_segmentation_batch
from segrl.evaluators.lm import MAX_NATS, LMEvaluator
from segrl.evaluators.registry import LMEvaluatorConfig
from segrl.experiments.agent_train import train_reinforce
from segrl.jobs import RunDir, TrainingInterrupted
from segrl.lm import build_lm
from segrl.lm.config import LMConfig
from segrl.lm.models import SAVED_UNSET

# Every stem is followed by one of a few suffixes: split after the stem is the right segmentation.
STEMS = ["walk", "talk", "jump", "play", "kick", "look"]
SUFFIXES = ["ed", "ing", "s"]
WORDS = [stem + suffix for stem in STEMS for suffix in SUFFIXES]
SENTENCES = [" ".join(WORDS[i : i + 3]) for i in range(0, len(WORDS), 3)]


def tiny_config(**changes) -> LMEvaluatorConfig:
    values = dict(
        objective="joint", char_dim=16, hidden_dim=32, speller_dim=32, dropout=0.0, lr=1e-2
    )
    values.update(changes)
    # the LM's options by their old names
    config = build_config(LMEvaluatorConfig, overrides=values)
    # the LM's options left unset, as build_lm read them before it took resolved configs only
    lm = config.lm
    unset = {k: v for k, v in SAVED_UNSET.items() if getattr(lm, k) is None}
    return replace(config, lm=replace(lm, **unset))


def right_decisions(batch):
    """[B, P] the stem | suffix segmentation of every word (forced word boundaries are kept)."""
    decisions = np.zeros(batch.decisions.shape, dtype=np.int64)
    for row, sentence in enumerate(batch.texts):
        offset = 0
        for word in sentence.split(" "):
            stem = next(s for s in STEMS if word.startswith(s))
            decisions[row, offset + len(stem) - 1] = SPLIT
            offset += len(word) + 1
    return decisions


@pytest.fixture(scope="module")
def trained():
    """An LM evaluator whose LM learnt the stem | suffix segmentations (joint likelihood). Trained
    once for the module: a test scores with its own evaluator of it (``evaluator_of``)."""
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    vocab = CharVocab.from_texts(SENTENCES, "?")
    config = tiny_config()
    evaluator = LMEvaluator(build_lm(config.lm, vocab), config, seed=0)
    batch = encode_segmentation_batch(vocab, SENTENCES)
    good = batch.with_decisions(right_decisions(batch))
    evaluator.pretrain([good] * 1)
    for _ in range(150):
        evaluator.update(good)
    torch.set_num_threads(threads)
    return evaluator, vocab, good


def evaluator_of(trained, lm_changes: dict | None = None, **changes) -> LMEvaluator:
    """A new evaluator of the ``trained`` fixture's LM, its config the fixture's with ``changes``
    (``reward_variant="flip"``) and the LM's options with ``lm_changes``
    (``{"lexicon_cost": 3.0}``). It holds a copy of the LM: what a test sets stays in its own evaluator, and a failing test leaves nothing
    behind for the next."""
    evaluator, _vocab, _good = trained
    lm = copy.deepcopy(evaluator.lm)
    lm.config = replace(lm.config, **(lm_changes or {}))
    return LMEvaluator(lm, replace(evaluator.config, lm=lm.config, **changes), seed=0)


@pytest.mark.parametrize(("epochs", "steps", "updates"), [(3, None, 9), (3, 4, 4), (1, 0, 0)])
def test_pretraining_stops_at_its_steps(epochs, steps, updates):
    vocab = CharVocab.from_texts(SENTENCES, "?")
    config = tiny_config(batch_size=2, pretrain_epochs=epochs, pretrain_steps=steps)
    evaluator = LMEvaluator(build_lm(config.lm, vocab), config, seed=0)
    batch = encode_segmentation_batch(vocab, SENTENCES)  # 6 sentences: 3 updates an epoch
    evaluator.pretrain([batch])
    adam = evaluator.trainer.optimizer.state_dict()["state"]
    assert max((int(s["step"]) for s in adam.values()), default=0) == updates
    assert evaluator.pretrained and len(evaluator.buffer) == len(SENTENCES)
    for wrong in ({"pretrain_steps": -1}, {"patience": -1}):
        with pytest.raises(ConfigError, match="pretrain_steps and patience at least 0"):
            validate_config(tiny_config(**wrong))


def test_right_segmentation_scores_higher_than_characters_and_words(trained):
    _evaluator, _vocab, good = trained
    evaluator = evaluator_of(trained)
    characters = good.with_decisions(np.ones_like(good.decisions))
    words = good.with_decisions(np.zeros_like(good.decisions))
    assert (evaluator.score(good) > evaluator.score(characters)).all()
    assert (evaluator.score(good) > evaluator.score(words)).all()
    total, n_chars = evaluator._log_probs(good)
    assert evaluator.score(good) == pytest.approx(total / n_chars)
    assert (n_chars == [len(t) + 1 for t in good.texts]).all()


def test_its_own_segmenters_are_its_lm_s_decodings(trained):
    """A training job scores the evaluator's own segmenters beside the agent: the co-trained
    ``slm``'s Viterbi and posterior decodings, which split each word after its stem."""
    evaluator = evaluator_of(trained)
    segmenters = evaluator.own_segmenters()
    assert list(segmenters) == ["lm-viterbi", "lm-posterior"]
    for segmenter in segmenters.values():
        assert segmenter.kind == "lm"
        assert segmenter.segment_words(["walked", "kicks"]) == [["walk", "ed"], ["kick", "s"]]
        assert segmenter.segment_sentence("played looking") == [["play", "ed"], ["look", "ing"]]


def test_posterior_flip_and_resample_reward_the_right_decisions(trained):
    _evaluator, _vocab, good = trained
    wrong = good.with_decisions(1 - good.decisions)  # every free decision flipped
    free = good.free_mask
    for variant in ("posterior", "flip"):
        evaluator = evaluator_of(trained, reward_variant=variant)
        assert (evaluator.action_rewards(good)[free] > 0).all(), variant
        assert (evaluator.action_rewards(good)[~free] == 0).all()
    posterior = evaluator_of(trained, reward_variant="posterior")
    # the posterior does not depend on the other decisions
    assert (posterior.action_rewards(wrong)[free] < 0).all()
    # flip compares with the other decisions fixed: one wrong decision among right ones
    flip = evaluator_of(trained, reward_variant="flip")
    for position in (0, 3):  # a spurious split "w|alk", a missed one "walked" (walk|ed)
        one_wrong = good.decisions.copy()
        one_wrong[:, position] = 1 - one_wrong[:, position]
        assert (flip.action_rewards(good.with_decisions(one_wrong))[:, position] < 0).all()
    flips = flip.action_rewards(good)
    # resample: a policy that always splits changes exactly the decisions that did not split
    always_split = np.zeros((*good.decisions.shape, 2))
    always_split[..., SPLIT] = 1.0
    resample = evaluator_of(trained, reward_variant="resample")
    rewards = resample.action_rewards(_with_probs(good, always_split))
    expected = np.where(good.splits, 0.0, flips)
    np.testing.assert_allclose(rewards, expected, atol=1e-6)
    never_split = always_split[..., ::-1].copy()
    rewards = resample.action_rewards(_with_probs(good, never_split))
    np.testing.assert_allclose(rewards, np.where(good.splits, flips, 0.0), atol=1e-6)
    with pytest.raises(ConfigError, match="policy's probabilities"):
        resample.action_rewards(good)


def test_the_posterior_floor_bounds_the_rewards_and_keeps_their_signs(trained):
    _evaluator, _vocab, good = trained
    free = good.free_mask
    sharp = evaluator_of(trained, reward_variant="posterior").action_rewards(good)[free]
    assert np.abs(sharp).max() > 5.0  # the trained LM is confident: beyond the floor's bound below
    with_floor = evaluator_of(trained, reward_variant="posterior", posterior_floor=0.05)
    floored = with_floor.action_rewards(good)[free]
    bound = math.log(0.95 / 0.05)
    assert np.abs(floored).max() == pytest.approx(bound)
    assert (np.sign(floored) == np.sign(sharp)).all()
    np.testing.assert_allclose(floored, np.clip(sharp, -bound, bound), atol=1e-9)
    with pytest.raises(ConfigError, match="posterior_floor must be between 0 and 0.5"):
        validate_config(tiny_config(posterior_floor=0.5))
    from segrl.evaluators.registry import EvaluatorConfig

    mirrored = {
        variant: EvaluatorConfig(
            "lm", lm=tiny_config(reward_variant=variant)
        ).mirrored_action_rewards()
        for variant in ("posterior", "flip", "resample", "incremental")
    }
    assert mirrored == {"posterior": True, "flip": True, "resample": False, "incremental": False}


def test_incremental_rewards_are_causal_and_sum_to_the_likelihood(trained):
    _evaluator, _vocab, good = trained
    evaluator = evaluator_of(trained, reward_variant="incremental")
    rng = np.random.default_rng(0)
    batch = good.with_decisions(rng.integers(0, 2, good.decisions.shape))
    rewards = evaluator.action_rewards(batch)
    np.testing.assert_allclose(rewards.sum(axis=1), evaluator.score(batch), rtol=1e-5)
    assert (rewards <= 0).all() and (rewards[:, : batch.lengths.min() - 1].sum(axis=1) < 0).all()
    # column i depends only on the decisions up to i: change everything after position 5
    later = batch.decisions.copy()
    later[:, 6:] = 1 - later[:, 6:]
    changed = evaluator.action_rewards(batch.with_decisions(later))
    np.testing.assert_allclose(changed[:, :6], rewards[:, :6], atol=1e-6)
    # the split of "walk|ed" closes "walk": its reward; no segment closes after "w"
    right = evaluator.action_rewards(good)
    assert right[0, 3] < 0 and right[0, 0] == 0


def _with_probs(batch, probs):
    return replace(batch, policy_probs=probs)


def test_sequence_variants_follow_their_formulas(trained):
    _evaluator, vocab, good = trained
    evaluator = evaluator_of(trained)
    total, n_chars = evaluator._log_probs(good)
    p_split = np.full(good.decisions.shape, 0.2)
    probs = np.stack([1 - p_split, p_split], axis=-1)
    batch = _with_probs(good, probs)
    free = good.free_mask
    entropy = np.where(free, -(0.2 * math.log(0.2) + 0.8 * math.log(0.8)), 0.0).sum(axis=1)
    log_pi = np.where(free, np.where(good.splits, math.log(0.2), math.log(0.8)), 0.0).sum(axis=1)
    gamma = evaluator.config.gamma
    evaluator = evaluator_of(trained, reward_variant="entropy")
    np.testing.assert_allclose(evaluator.score(batch), (total + gamma * entropy) / n_chars)
    evaluator = evaluator_of(trained, reward_variant="marginal")
    np.testing.assert_allclose(evaluator.score(batch), (total - log_pi) / n_chars)
    assert (evaluator.score(batch) > total / n_chars).all()  # -log pi(S|X) > 0
    evaluator = evaluator_of(trained, reward_variant="likelihood")
    np.testing.assert_allclose(evaluator.score(batch), total / n_chars)

    # the space penalty: hidden spaces, one removed space not split costs beta per character
    config = tiny_config(max_segment_length=8, gamma=0.0, beta=2.0)
    hidden = LMEvaluator(build_lm(config.lm, vocab), config)
    hidden.sequence_variant = "space-penalty"
    batch = encode_segmentation_batch(vocab, ["walked talks"], hide_spaces=True)
    split_all = batch.with_decisions(batch.word_boundary_mask.astype(np.int64))
    missed = split_all.with_decisions(np.zeros_like(batch.decisions))
    total, n_chars = hidden._log_probs(missed)
    # "walkedtalks" in one segment is longer than max_segment_length: impossible, floored
    np.testing.assert_allclose(total, -MAX_NATS * n_chars)
    np.testing.assert_allclose(hidden.score(missed), (total - 2.0 * 1) / n_chars)
    base_total, base_chars = hidden._log_probs(split_all)
    np.testing.assert_allclose(hidden.score(split_all), base_total / base_chars)


def test_evaluator_state_resumes_exactly(trained):
    _evaluator, vocab, good = trained
    config = tiny_config(batch_size=2, buffer_size=5)
    torch.manual_seed(1)
    first = LMEvaluator(build_lm(config.lm, vocab), config, seed=3)
    first.pretrain([good])
    first.update(good)
    saved = io.BytesIO()
    torch.save(first.state_dict(), saved)
    torch.manual_seed(2)  # another initialisation, replaced by the checkpoint
    second = LMEvaluator(build_lm(config.lm, vocab), config, seed=4)
    saved.seek(0)
    second.load_state_dict(torch.load(saved, weights_only=False))
    assert second.pretrained and len(second.buffer) == 5 and second.batches_seen == 1
    for _ in range(2):
        assert first.update(good) == second.update(good)  # same draws from the buffer, same step
    np.testing.assert_allclose(first.action_rewards(good), second.action_rewards(good))


def test_options_that_do_not_fit_are_config_errors(small_corpus_file):
    config = build_config(
        TrainConfig,
        overrides={
            "evaluator.name": "lm",
            "env.reward": "sequence",
            "evaluator.lm.reward_variant": "flip",
        },
    )
    with pytest.raises(ConfigError, match="does not go with sequence rewards"):
        validate_config(config)
    with pytest.raises(
        ConfigError, match="evaluator.lm.reward_variant must be one of: .*; got 'flipp'"
    ):
        validate_config(LMEvaluatorConfig(reward_variant="flipp"), "evaluator.lm.")
    with pytest.raises(ConfigError, match="need evaluator.lm.lm.model = 'slm'"):
        validate_config(LMEvaluatorConfig(lm=LMConfig(model="segment-lstm")), "evaluator.lm.")
    # CharSegment decides one position at a time: only causal rewards
    options = {"corpus": str(small_corpus_file), "reward": "per-action"}
    with pytest.raises(ConfigError, match="CharSegment supports"):
        CharSegmentEnv(evaluator=_small_lm_evaluator(small_corpus_file, "flip"), **options)
    env = CharSegmentEnv(evaluator=_small_lm_evaluator(small_corpus_file, "incremental"), **options)
    env.reset(seed=0)
    _obs, reward, _terminated, _truncated, _info = env.step(1)
    assert reward < 0  # the split closed a segment: its log-probability per character


def _small_lm_evaluator(corpus_file, reward):
    from segrl.envs.setup import resolve_corpus

    corpus = resolve_corpus(corpus_file, None)
    config = tiny_config(reward_variant=reward)
    return LMEvaluator(build_lm(config.lm, corpus.vocab), config)


def lm_train_config(corpus_file, tmp_path, **overrides):
    values = {
        "data.corpus": str(corpus_file),
        "data.min_char_count": 1,
        "gold.max_words": 100,
        "policy.embedding_dim": 8,
        "policy.hidden_dim": 16,
        "evaluator.name": "lm",
        "evaluator.lm.lm.char_dim": 8,
        "evaluator.lm.lm.hidden_dim": 16,
        "evaluator.lm.lm.speller_dim": 16,
        "evaluator.lm.batch_size": 8,
        "reinforce.steps": 6,
        "reinforce.batch_size": 8,
        "eval_every": 3,
        "eval_gold_words": 30,
        "checkpoint_every": 2,
        "log_every": 1,
        "threads": 1,
        "out": str(tmp_path / "run"),
    }
    values.update(overrides)
    return build_config(TrainConfig, overrides=values)


@pytest.mark.slow
def test_lm_rewarded_training_logs_diagnostics_and_resumes_exactly(mlflow_store, small_corpus_file):
    """``segrl train --evaluator lm``: pre-trained once, collapse diagnostics logged, and a run
    interrupted at step 3 ends with the same LM as one never interrupted."""
    straight = train_reinforce(lm_train_config(small_corpus_file, mlflow_store / "a"))
    assert straight.metrics["lm_bits_per_char"] > 0
    client = MlflowClient()
    metrics = client.get_run(straight.run_id).data.metrics
    for key in (
        "pretrain/lm_bits_per_char",
        "train/evaluator/lm_bits_per_char",
        "train/split_rate",
        "train/entropy",
        "eval/units_per_char",
        "eval/boundary_f1",
        "eval/morfessor_boundary_f1",
        "eval/lm_bits_per_char",
        "eval/lm_marginal_bits_per_char",
    ):
        assert key in metrics, key
    assert straight.run_dir.name == "run"
    # the teacher beside its student: the LM's own Viterbi and posterior segmentations, child runs
    children = client.search_runs(
        [client.get_run(straight.run_id).info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{straight.run_id}'",
    )
    names = sorted(r.data.tags["segrl.segmenter"] for r in children)
    assert names == [
        "reinforce-bilstm-lm-per-action-posterior/lm-posterior",
        "reinforce-bilstm-lm-per-action-posterior/lm-viterbi",
    ]
    for child in children:
        assert child.data.tags["segrl.kind"] == "lm"
        assert 0.0 <= child.data.metrics["boundary_f1"] <= 1.0
        assert child.data.params["data.corpus"] == str(small_corpus_file)  # compared in one table
    config = lm_train_config(small_corpus_file, mlflow_store / "b")
    assert config.name == "reinforce-bilstm-lm-per-action-posterior"
    with pytest.raises(TrainingInterrupted):
        train_reinforce(config, on_step=lambda step, stats: step == 3)
    resumed = train_reinforce(config)
    assert resumed.resumed_from == 3 and resumed.step == 6
    history = client.get_metric_history(resumed.run_id, "pretrain/lm_bits_per_char")
    assert len(history) == 1  # the resumed run did not pre-train again
    a = load_checkpoint(straight.run_dir / "checkpoint.pt", restore_rng=False)["evaluator"]
    b = load_checkpoint(RunDir(resumed.run_dir).checkpoint_path, restore_rng=False)["evaluator"]
    for key, value in a["trainer"]["model"].items():
        torch.testing.assert_close(value, b["trainer"]["model"][key])
    assert a["batches_seen"] == b["batches_seen"] == 6


def test_marginal_objective_reads_word_types_or_sentences(trained, monkeypatch):
    _evaluator, vocab, good = trained
    for texts, expected in (("word-types", sorted(set(WORDS))), ("sentences", SENTENCES)):
        config = tiny_config(objective="marginal", texts=texts, batch_size=len(SENTENCES))
        evaluator = LMEvaluator(build_lm(config.lm, vocab), config)
        read: list[list[str]] = []

        def recording(batch_texts, read=read, step=evaluator.trainer.marginal_step):
            read.append(batch_texts)
            return step(batch_texts)

        monkeypatch.setattr(evaluator.trainer, "marginal_step", recording)
        stats = evaluator.update(good)
        assert sorted(read[0]) == sorted(expected) and stats["lm_bits_per_char"] > 0


def test_corpus_words_are_drawn_by_log_dampened_count_whatever_the_agent_samples(
    trained, monkeypatch
):
    _evaluator, vocab, good = trained
    counts = {"walked": 1, "talks": 1, "jumping": 2**20 - 1}  # log-dampened weights 1, 1, 20
    config = tiny_config(objective="marginal", texts="corpus-words", batch_size=8)
    evaluator = LMEvaluator(build_lm(config.lm, vocab), config, seed=0, words=counts)
    assert evaluator.word_probs.tolist() == pytest.approx([20 / 22, 1 / 22, 1 / 22])
    read: list[list[str]] = []

    def recording(batch_texts, step=evaluator.trainer.marginal_step):
        read.append(batch_texts)
        return step(batch_texts)

    monkeypatch.setattr(evaluator.trainer, "marginal_step", recording)
    for _ in range(20):
        evaluator.update(good)  # sentences of other words: not what the LM reads
    drawn = [word for texts in read for word in texts]
    assert len(read) == 20 and set(drawn) <= set(counts) and "jumping" in read[0]
    assert all(len(texts) == len(set(texts)) <= 3 for texts in read)
    with pytest.raises(ConfigError, match="needs the corpus's word counts"):
        LMEvaluator(build_lm(config.lm, vocab), config)
    with pytest.raises(ConfigError, match="marginal objective only"):
        validate_config(tiny_config(objective="joint", texts="corpus-words"))


def test_a_lexicon_lets_the_marginal_likelihood_split_off_reused_suffixes(one_thread):
    """Trained on the word types alone, by marginal likelihood without a length penalty: the speller
    alone keeps every word whole; with a lexicon of frequent substrings, stems and suffixes reused
    across words become segments (a boundary after every stem)."""
    from segrl.lm.lexicon import substring_lexicon

    vocab = CharVocab.from_texts(WORDS, "?")
    batch = encode_segmentation_batch(vocab, WORDS)
    stem_ends = [len(next(s for s in STEMS if w.startswith(s))) - 1 for w in WORDS]
    at_stem_end = {}
    for size in (0, 40):
        torch.manual_seed(0)
        config = tiny_config(
            objective="marginal", context="none", length_penalty=0.0, lexicon_size=size
        )
        lexicon = substring_lexicon(WORDS, size) if size else None
        evaluator = LMEvaluator(build_lm(config.lm, vocab, lexicon), config, seed=0)
        for _ in range(200):
            evaluator.update(batch)
        evaluator.lm.eval()
        posterior = evaluator.lm.boundary_posteriors(evaluator.lm.encode(WORDS))
        at_stem_end[size] = posterior[torch.arange(len(WORDS)), stem_ends]
    assert (at_stem_end[0] < 0.1).all()
    assert (at_stem_end[40] > 0.9).all()


def test_the_evaluators_lexicon_comes_from_the_training_words(corpus):
    from segrl.evaluators.registry import EvaluatorConfig

    lm_options = tiny_config(objective="marginal", lexicon_size=30, context="lstm")
    config = EvaluatorConfig(name="lm", lm=lm_options)
    with pytest.raises(ConfigError, match="context = 'none'"):
        LMEvaluator.from_config(config, corpus)
    config.lm.lm.context = "none"
    lm = LMEvaluator.from_config(config, corpus).lm
    assert len(lm.lexicon) == 30
    words = set(corpus.word_counts("train"))
    assert all(any(entry in w for w in words) for entry in lm.lexicon.entries)


def test_the_posterior_reward_reads_words_alone_only_with_a_lexicon(one_thread):
    from segrl.lm.lexicon import substring_lexicon

    vocab = CharVocab.from_texts(SENTENCES, "?")
    batch = encode_segmentation_batch(vocab, SENTENCES)
    batch = batch.with_decisions(right_decisions(batch))
    for lexicon, objective, alone in (
        (substring_lexicon(WORDS, 20), "marginal", True),
        (None, "marginal", False),
        (substring_lexicon(WORDS, 20), "joint", False),
    ):
        torch.manual_seed(0)
        config = tiny_config(objective=objective, context="none", reward_variant="posterior")
        evaluator = LMEvaluator(build_lm(config.lm, vocab, lexicon), config)
        assert evaluator.scores_words_alone is alone
        rewards = evaluator.action_rewards(batch)
        chars = evaluator.lm.encode(SENTENCES)
        expected = (
            evaluator.lm.word_boundary_posteriors(chars)
            if alone
            else evaluator.lm.boundary_posteriors(chars)
        ).double()
        q = expected.clamp(1e-6, 1 - 1e-6)
        log_odds = (torch.log(q) - torch.log1p(-q)).numpy()[:, : rewards.shape[1]]
        signed = np.where(batch.splits, log_odds, -log_odds)
        free = batch.free_mask
        assert np.allclose(rewards[free], np.clip(signed, -MAX_NATS, MAX_NATS)[free], atol=1e-6)
    sentence = evaluator.lm.boundary_posteriors(chars)
    words = evaluator.lm.word_boundary_posteriors(chars)
    assert not torch.allclose(sentence, words, atol=1e-3)  # the two readings differ


def test_the_description_length_reward_prices_the_batchs_lexicon(trained):
    """A split whose parts other words of the batch reuse is cheaper to keep than one whose parts
    no other word uses: the lexicon's part of the reward, by hand, and the whole reward is the
    flip reward plus it."""
    from segrl.evaluators.lm import lexicon_flip_costs

    _evaluator, vocab, _good = trained
    batch = encode_segmentation_batch(vocab, ["walked", "jumped", "talks"])
    decisions = np.zeros(batch.decisions.shape, dtype=np.int64)
    decisions[0, 3] = decisions[1, 3] = decisions[2, 3] = SPLIT  # walk|ed jump|ed talk|s
    batch = batch.with_decisions(decisions)
    costs = lexicon_flip_costs(batch, cost=3.0)
    # walk|ed -> walked: "walk" leaves the lexicon (-3 * 5), "ed" stays (jump|ed), "walked" enters
    assert costs[0, 3] == pytest.approx(3.0 * 7 - 3.0 * 5)
    # talk|s -> talks: "talk" and "s" leave (-15, -6), "talks" enters (+18)
    assert costs[2, 3] == pytest.approx(3.0 * 6 - 3.0 * 5 - 3.0 * 2)
    # wa|lk|ed from walk|ed: "walk" leaves (-15), "wa" and "lk" enter (+9 each)
    assert costs[0, 1] == pytest.approx(3.0 * 3 + 3.0 * 3 - 3.0 * 5)
    assert (costs[:, 5:] == 0).all() and lexicon_flip_costs(batch, cost=0.0).sum() == 0
    evaluator = evaluator_of(trained, lm_changes={"lexicon_cost": 3.0}, reward_variant="flip")
    assert evaluator.config.description_length_counts == "batch"  # the default
    flip = evaluator.action_rewards(batch)
    evaluator = evaluator_of(
        trained, lm_changes={"lexicon_cost": 3.0}, reward_variant="description-length"
    )
    np.testing.assert_allclose(evaluator.action_rewards(batch), flip + costs)


def test_the_description_length_reward_prices_the_corpus_lexicon(one_thread, tmp_path):
    """Over the corpus, a split whose parts words outside the batch reuse is cheap to keep, where
    the batch alone would call it dear; a row replaces its own text's last segmentation; the lexicon
    part is weighted; the evaluator keeps the latest segmentation of every text it has seen, across a
    checkpoint."""
    from segrl.evaluators.lm import SegmentationLexicon, lexicon_flip_costs

    lexicon = SegmentationLexicon()
    lexicon.update(
        [("walked", ["walk", "ed"]), ("jumped", ["jump", "ed"]), ("singing", ["sing", "ing"])]
    )
    lexicon.update([("talking", ["talk", "ing"]), ("jumped", ["jumped"])])  # jumped: its latest
    assert lexicon.counts == Counter(walk=1, ed=1, sing=1, ing=2, talk=1, jumped=1)
    vocab = CharVocab.from_texts(["jumping walked"], "?")
    batch = encode_segmentation_batch(vocab, ["jumping", "walked"])
    decisions = np.zeros(batch.decisions.shape, dtype=np.int64)
    decisions[0, 3] = SPLIT  # jump|ing; walked whole
    batch = batch.with_decisions(decisions)
    corpus = lexicon_flip_costs(batch, 1.0, lexicon)
    alone = lexicon_flip_costs(batch, 1.0)
    # jump|ing -> jumping: "jump" leaves (-5), "ing" stays (talking, singing), "jumping" enters (+8)
    assert corpus[0, 3] == pytest.approx(3.0)
    assert alone[0, 3] == pytest.approx(-1.0)  # alone, "ing" leaves too (-4)
    # walked -> walk|ed, in place of walk|ed: "walked" leaves (-7), "walk" (+5) and "ed" (+3) enter
    assert corpus[1, 3] == pytest.approx(1.0) == alone[1, 3]
    lexicon.update([("jumped", ["jump", "ed"])])  # now "ed" stays in the lexicon without walked
    corpus = lexicon_flip_costs(batch, 1.0, lexicon)
    assert corpus[1, 3] == pytest.approx(-2.0)

    torch.manual_seed(0)
    config = tiny_config(
        reward_variant="description-length",
        description_length_counts="corpus",
        description_length_weight=0.5,
    )
    evaluator = LMEvaluator(build_lm(config.lm, vocab), config, seed=0)
    evaluator.lm.config.lexicon_cost = 1.0
    assert evaluator.counts_segmentations
    other = encode_segmentation_batch(vocab, ["walked", "jumped"])
    split_at_3 = np.zeros(other.decisions.shape, dtype=np.int64)
    split_at_3[:, 3] = SPLIT
    other = other.with_decisions(split_at_3)  # walk|ed jump|ed
    evaluator.pretrain([other])  # the lexicon starts from the pre-trained LM's decoding
    decoded = other.with_decisions(np.where(evaluator.teacher.log_odds(other) > 0, SPLIT, 0))
    jumped = tuple(decoded.segmentations()[1])
    assert evaluator.segmentation_lexicon.segmentations == dict(
        zip(other.texts, map(tuple, decoded.segmentations()), strict=True)
    )
    evaluator.update(batch)  # jump|ing and walked (whole) replace what was there
    assert evaluator.segmentation_lexicon.segmentations == {
        "walked": ("walked",),
        "jumped": jumped,
        "jumping": ("jump", "ing"),
    }
    assert evaluator.segmentation_lexicon.counts == Counter(("walked", "jump", "ing", *jumped))
    evaluator.action_variant = "flip"
    flip = evaluator.action_rewards(batch)
    evaluator.action_variant = "description-length"
    expected = lexicon_flip_costs(batch, 1.0, evaluator.segmentation_lexicon)
    assert np.abs(expected).sum() > 0
    np.testing.assert_allclose(evaluator.action_rewards(batch), flip + 0.5 * expected)
    path = save_checkpoint(tmp_path / "checkpoint", evaluator=evaluator.state_dict())
    restored = LMEvaluator(build_lm(config.lm, vocab), config, seed=0)
    restored.load_state_dict(load_checkpoint(path, restore_rng=False)["evaluator"])
    assert restored.segmentation_lexicon.counts == evaluator.segmentation_lexicon.counts
    assert (
        restored.segmentation_lexicon.segmentations == evaluator.segmentation_lexicon.segmentations
    )
    with pytest.raises(ConfigError, match="description_length_weight"):
        tiny_config(description_length_weight=-1.0).check("evaluator.lm.")


def test_the_evaluators_lm_prunes_its_lexicon_after_pretraining_and_every_epoch(one_thread):
    """``lexicon_prune``: the evaluator's LM prunes the entries that do not pay once its
    pre-training ends and then after every epoch's worth of updates of the corpus's word types."""
    from segrl.lm.lexicon import substring_lexicon

    vocab = CharVocab.from_texts(WORDS, "?")
    batch = encode_segmentation_batch(vocab, WORDS)
    config = tiny_config(
        objective="marginal",
        context="none",
        lexicon_size=40,
        lexicon_cost=2.0,
        lexicon_logits="direct",
        lexicon_prune=True,
        lexicon_prune_fraction=0.5,  # half at most a pruning: some entries left to prune later
        speller="bigram",
        batch_size=6,
    )
    lm = build_lm(config.lm, vocab, substring_lexicon(WORDS, 40))
    counts = {word: 1 for word in WORDS}  # 18 word types, 6 a batch: 3 updates an epoch
    evaluator = LMEvaluator(lm, config, seed=0, words=counts)
    assert evaluator.prune_every == 3
    stats = evaluator.pretrain([batch])
    # pruned once, after its third update (an epoch), not again where it ends right after
    assert stats["lm_lexicon_entries"] == 20 and "lexicon_pruned" not in stats
    after_pretraining = evaluator.trainer.usage.kept()
    logged = [evaluator.update(batch) for _ in range(6)]
    pruned_at = [i for i, s in enumerate(logged) if "lm_lexicon_entries" in s]
    first = evaluator.trainer.steps - 6  # the pre-training's updates
    assert pruned_at == [i for i in range(6) if (first + i + 1) % 3 == 0]
    kept = evaluator.trainer.usage.kept()
    assert not (kept & ~after_pretraining).any()  # a pruned entry stays out
    assert logged[pruned_at[-1]]["lm_lexicon_entries"] == kept.sum().item()
    # a pre-training shorter than an epoch does not prune on its uses; the first pruning comes
    # once an epoch's updates are counted, never on the few updates that end an epoch's count
    short = replace(config, pretrain_steps=2)
    lm = build_lm(short.lm, vocab, substring_lexicon(WORDS, 40))
    evaluator = LMEvaluator(lm, short, seed=0, words=counts)
    stats = evaluator.pretrain([batch])
    assert evaluator.trainer.steps == 2 and "lm_lexicon_entries" not in stats
    logged = [evaluator.update(batch) for _ in range(4)]
    assert [i for i, s in enumerate(logged) if "lm_lexicon_entries" in s] == [0, 3]
    # prune_uses = 'corpus': each pruning after pre-training weighs an exact count over every
    # training word type, whatever the updates drew (here the first six words alone)
    exact = replace(config, prune_uses="corpus")
    with pytest.raises(ConfigError, match="prune_uses = 'corpus' needs"):
        LMEvaluator(build_lm(exact.lm, vocab, substring_lexicon(WORDS, 40)), exact, seed=0)
    evaluator = LMEvaluator(
        build_lm(exact.lm, vocab, substring_lexicon(WORDS, 40)), exact, seed=0, words=counts
    )
    evaluator.pretrain([batch])
    counted = []
    count_uses = evaluator.trainer.count_uses

    def spy(texts, batch_size):
        count_uses(texts, batch_size)
        usage = evaluator.trainer.usage
        counted.append((list(texts), usage.counts.clone(), usage.kept()))

    evaluator.trainer.count_uses = spy
    few = encode_segmentation_batch(vocab, WORDS[:6])
    logged = [evaluator.update(few) for _ in range(6)]
    assert [i for i, s in enumerate(logged) if "lm_lexicon_entries" in s] == [2, 5]
    assert len(counted) == 2 and all(texts == sorted(WORDS) for texts, _, _ in counted)
    _, uses, kept = counted[0]
    unseen = WORDS[6:]  # words no update read: their own kept substrings are counted as used
    only_unseen = [
        i
        for i, entry in enumerate(evaluator.lm.lexicon.entries)
        if kept[i] and any(entry in w for w in unseen) and not any(entry in w for w in WORDS[:6])
    ]
    assert only_unseen and all(uses[i] > 0 for i in only_unseen)
    assert (uses[~kept] == 0).all()  # a pruned entry has no uses


def test_the_evaluators_lm_stops_learning_on_its_patience_with_its_best_weights(one_thread):
    """``patience``: every epoch of the corpus's word types in updates the LM's held-out marginal
    bits per character are checked; after ``patience`` checks without improvement its best
    weights come back and it learns no more (the agent then reads a fixed teacher); a resumed
    evaluator keeps its best and stops where it would have stopped."""
    vocab = CharVocab.from_texts(WORDS, "?")
    batch = encode_segmentation_batch(vocab, WORDS)
    config = tiny_config(objective="marginal", context="none", batch_size=6, lr=0.05, patience=1)
    counts = {word: 1 for word in WORDS}  # 18 word types, 6 a batch: a check every 3 updates
    with pytest.raises(ConfigError, match="held-out texts"):
        LMEvaluator(build_lm(config.lm, vocab), config, seed=0, words=counts)
    with pytest.raises(ConfigError, match="lm.model = 'slm'"):
        validate_config(
            tiny_config(model="segment-lstm", objective="joint", patience=1), "evaluator.lm."
        )
    # held-out words the tiny LM can only get worse at: the corpus's letters reversed
    heldout = [word[::-1] for word in WORDS]
    evaluator = LMEvaluator(build_lm(config.lm, vocab), config, 0, counts, heldout)
    assert evaluator.check_every == 3
    stats = evaluator.pretrain([batch])
    assert stats["lm_stopped"] == 0.0  # the pre-trained LM: the first best
    first_best = evaluator.stopping["best_bpc"]
    assert stats["lm_valid_bits_per_char"] == pytest.approx(first_best)
    logged, step = [], 0
    while not evaluator.stopping["stopped"]:
        logged.append(evaluator.update(batch))
        step += 1
        assert step <= 300, "the LM never stopped on held-out texts it only gets worse at"
    checks = [s for s in logged if "lm_valid_bits_per_char" in s]
    assert len(checks) == step // 3 and step % 3 == 0  # checked every epoch, stopped on a check
    assert checks[-1]["lm_stopped"] == 1.0
    best = evaluator.stopping["best_bpc"]
    assert checks[-1]["lm_valid_bits_per_char"] >= best  # the patience ran out on a worse one
    # the best weights are back: the held-out texts score the best check's bits
    from segrl.lm.training import bits_per_char

    assert bits_per_char(evaluator.lm, heldout, batch_size=6) == pytest.approx(best, abs=1e-5)
    weights = {k: v.clone() for k, v in evaluator.lm.state_dict().items()}
    steps = evaluator.trainer.steps
    assert all(evaluator.update(batch) == {} for _ in range(4))  # it learns no more
    assert evaluator.trainer.steps == steps
    for key, value in evaluator.lm.state_dict().items():
        assert torch.equal(value, weights[key]), key
    # resumed: stopped, with the same best
    saved = io.BytesIO()
    torch.save(evaluator.state_dict(), saved)
    saved.seek(0)
    resumed = LMEvaluator(build_lm(config.lm, vocab), config, 1, counts, heldout)
    resumed.load_state_dict(torch.load(saved, weights_only=True))
    assert resumed.stopping == evaluator.stopping and resumed.update(batch) == {}
    # patience 0: it learns on whatever its held-out bits do, and checks nothing
    never = replace(config, patience=0)
    evaluator = LMEvaluator(build_lm(never.lm, vocab), never, 0, counts, heldout)
    assert "lm_valid_bits_per_char" not in evaluator.pretrain([batch])
    assert all("lm_valid_bits_per_char" not in evaluator.update(batch) for _ in range(6))
    assert not evaluator.stopping["stopped"]


@pytest.mark.parametrize("variant", ["flip", "resample", "description-length"])
def test_flip_rewards_stay_finite_where_a_segment_is_longer_than_the_lm_allows(variant):
    """With hidden spaces the LM spells at most ``max_segment_length`` characters a segment; an
    agent may still keep more in one. The flip of a decision inside such a segment can leave it too
    long (both segmentations impossible): the reward is then -MAX_NATS for keeping it whole and 0 for
    a split, never NaN, which would reach the policy's gradient."""
    vocab = CharVocab.from_texts(SENTENCES, "?")
    torch.manual_seed(0)
    config = tiny_config(max_segment_length=4, reward_variant=variant)
    evaluator = LMEvaluator(build_lm(config.lm, vocab), config, seed=0)
    batch = encode_segmentation_batch(vocab, ["walked talks"], hide_spaces=True)
    decisions = np.zeros(batch.decisions.shape, dtype=np.int64)
    decisions[0, 9] = SPLIT  # "walkedtalk|s": 10 characters in one segment, the LM allows 4
    batch = batch.with_decisions(decisions)
    probs = np.full((*batch.decisions.shape, 2), 0.5)
    batch = replace(batch, policy_probs=probs)
    rewards = evaluator.action_rewards(batch)
    assert rewards.shape == (1, 10) and np.isfinite(rewards).all()
    if variant == "flip":
        # a split after "wa" leaves "lkedtalk" too long: keeping the segment whole costs the most
        assert (rewards[0, :9] == -MAX_NATS).all()
        assert rewards[0, 9] == 0.0  # the split before "s" is not what makes it impossible
    elif variant == "description-length":
        assert (rewards[0, :9] < 0).all()
