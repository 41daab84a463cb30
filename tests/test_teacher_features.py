"""A student that reads its teacher (``env.teacher_features``): the environments' ``teacher``
observation is the LM evaluator's posterior log-odds, the policy adds it to its split logit, and a
trained agent keeps its teacher beside its policy."""

import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

import segrl
from segrl.agents import TrainConfig
from segrl.agents.policies import SegmenterPolicy
from segrl.agents.segmenter import TEACHER_DIR, AgentSegmenter, separator_id
from segrl.config import build_config, validate_config
from segrl.envs import CharSegmentEnv, SentenceSegmentEnv
from segrl.envs.episodes import TEACHER_LIMIT
from segrl.errors import ConfigError, ModelError
from segrl.evaluators import encode_segmentation_batch
from segrl.evaluators.lm import TEACHER_FILE, LMEvaluator
from segrl.evaluators.registry import EvaluatorConfig, LMEvaluatorConfig
from segrl.experiments.agent_train import train_reinforce

TINY_LM = dict(char_dim=16, hidden_dim=32, speller_dim=32, dropout=0.0, lr=1e-2, lexicon_size=40)


@pytest.fixture(scope="module")
def evaluator(corpus):
    """An slm evaluator with a lexicon, trained a little on the corpus's words (marginal)."""
    torch.manual_seed(0)
    lm = build_config(LMEvaluatorConfig, overrides=TINY_LM)  # the LM's options by their old names
    config = EvaluatorConfig(name="lm", lm=lm)
    evaluator = LMEvaluator.from_config(config, corpus)
    words = sorted(corpus.word_counts("train"))
    for _ in range(30):
        evaluator.trainer.marginal_step(words)
    return evaluator


def test_observations_carry_the_teachers_log_odds(corpus, evaluator):
    env = SentenceSegmentEnv(corpus=corpus, evaluator=evaluator, teacher_features=True)
    observation, _ = env.reset(seed=0)
    assert env.observation_space.contains(observation)
    sentence = env.unwrapped.slots.sentences[0]
    batch = encode_segmentation_batch(corpus.vocab, [sentence], env.unwrapped.setup.max_len)
    expected = evaluator.teacher.log_odds(batch)[0]
    n = len(sentence) - 1
    assert observation["teacher"].dtype == np.float32
    np.testing.assert_allclose(observation["teacher"][:n], expected[:n], rtol=1e-5, atol=1e-5)
    assert (observation["teacher"][n:] == 0).all()
    # the teacher has opinions of both signs, within the space's bounds
    free = observation["free"][:n].astype(bool)
    assert (observation["teacher"][:n][free] < 0).any() and (
        observation["teacher"][:n][free] > 0
    ).any()
    assert np.abs(observation["teacher"]).max() <= TEACHER_LIMIT
    check_env(env, skip_render_check=True)


def test_char_segment_observes_the_same_teacher(corpus, evaluator):
    env = CharSegmentEnv(
        corpus=corpus, evaluator=evaluator, reward="sequence", teacher_features=True
    )
    observation, _ = env.reset(seed=0)
    first = observation["teacher"].copy()
    observation, *_ = env.step(1)
    np.testing.assert_array_equal(observation["teacher"], first)  # the text's, not the decisions'
    check_env(env, skip_render_check=True)


def test_teacher_features_are_refused_where_nothing_reads_them(corpus, morfessor, evaluator):
    with pytest.raises(ConfigError, match="morfessor evaluator has no boundary probabilities"):
        SentenceSegmentEnv(corpus=corpus, evaluator=morfessor, teacher_features=True)
    with pytest.raises(ConfigError, match="binary rules only"):
        SentenceSegmentEnv(corpus=corpus, evaluator=evaluator, rules="full", teacher_features=True)
    for agent, name in (("ppo", "lm"), ("reinforce", "morfessor")):
        config = build_config(
            TrainConfig,
            overrides={"agent": agent, "evaluator.name": name, "env.teacher_features": True},
        )
        with pytest.raises(ConfigError, match="env.teacher_features"):
            validate_config(config)


def test_a_policy_that_reads_its_teacher_starts_as_its_posterior():
    torch.manual_seed(0)
    policy = SegmenterPolicy(vocab_size=10, n_actions=2, max_len=8, reads_teacher=True)
    torch.nn.init.zeros_(policy.head.net[-1].weight)
    torch.nn.init.zeros_(policy.head.net[-1].bias)
    ids = torch.tensor([[1, 2, 3, 4, 0, 0, 0, 0]])
    teacher = torch.tensor([[2.0, -1.0, 0.5, 0, 0, 0, 0]])
    probs = torch.softmax(policy(ids, torch.tensor([4]), teacher), dim=-1)[
        ..., 1
    ].detach()  # [1, 7]
    np.testing.assert_allclose(probs[0, :3], torch.sigmoid(teacher[0, :3]), rtol=1e-6)
    with torch.no_grad():
        policy.teacher_weight.fill_(2.0)  # the learnt weight scales the teacher's log-odds
    probs = torch.softmax(policy(ids, torch.tensor([4]), teacher), dim=-1)[..., 1].detach()
    np.testing.assert_allclose(probs[0, :3], torch.sigmoid(2 * teacher[0, :3]), rtol=1e-6)
    with pytest.raises(ValueError, match="reads its teacher"):
        policy(ids, torch.tensor([4]))
    with pytest.raises(ConfigError, match="split/no-split"):
        SegmenterPolicy(vocab_size=10, n_actions=5, max_len=8, reads_teacher=True)


def test_a_saved_student_keeps_its_teacher(corpus, evaluator, tmp_path):
    torch.manual_seed(0)
    policy = SegmenterPolicy(
        len(corpus.vocab), 2, 128, separator_id=separator_id(corpus.vocab), reads_teacher=True
    )
    student = AgentSegmenter(policy, corpus.vocab, teacher=evaluator.teacher)
    sentences = corpus.valid[:20]
    before = student.segment_sentences(sentences)
    student.save(tmp_path / "agent")
    assert (tmp_path / "agent" / TEACHER_DIR / TEACHER_FILE).exists()
    loaded = segrl.load_segmenter(tmp_path / "agent")
    assert loaded.segment_sentences(sentences) == before
    # greedy decisions follow the teacher wherever it is sure (the head's own logits are small)
    batch = student.decide_sentences(sentences)
    log_odds = evaluator.teacher.log_odds(batch)
    sure = batch.free_mask & (np.abs(log_odds) > 1.0)
    assert sure.sum() > 50
    assert ((batch.splits == (log_odds > 0))[sure]).mean() > 0.97
    with pytest.raises(ModelError, match="no teacher"):
        AgentSegmenter(policy, corpus.vocab)
    (tmp_path / "agent" / TEACHER_DIR / TEACHER_FILE).write_text("{", encoding="utf-8")
    with pytest.raises(ModelError, match="teacher.json: damaged"):
        AgentSegmenter.load(tmp_path / "agent")


def test_train_a_student_that_reads_its_teacher(small_corpus_file, tmp_path):
    config = build_config(
        TrainConfig,
        overrides={
            "evaluator.name": "lm",
            "env.teacher_features": True,
            "reinforce.steps": 4,
            "reinforce.batch_size": 8,
            "evaluator.lm.pretrain_epochs": 0,
            "data.corpus": str(small_corpus_file),
            "data.min_char_count": 1,
            "eval_every": 2,
            "eval_gold_words": 50,
            "threads": 1,
            "out": str(tmp_path / "run"),
            **{f"evaluator.lm.{k}": v for k, v in TINY_LM.items()},
        },
    )
    result = train_reinforce(config)
    assert result.step == 4
    assert config.name.endswith("reads-teacher")
    saved = result.run_dir / "segmenter"
    assert (saved / TEACHER_DIR / TEACHER_FILE).exists()
    segments = segrl.load_segmenter(saved).segment_sentences(["the man walked home"])[0]
    assert "".join(segments) == "the man walked home"


def test_on_a_word_list_the_agent_reads_a_priced_lexicons_teacher(
    tmp_path, small_corpus_file, monkeypatch
):
    """The defaults by corpus: on a word list the LM evaluator has the priced lexicon of ``segrl lm
    train`` and the reinforce agent reads its log-odds and is rewarded per action by the
    description length (``STUDENT_PER_ACTION_REWARD``), sampled; on running text, and for agents
    that cannot read it, no lexicon and the LM's posterior, fitted by the forward KL; on text
    without spaces the reinforce agent reads its LM without a lexicon, rewarded as on a word list."""
    from segrl.agents.task import build_task
    from segrl.data import load_corpus
    from segrl.experiments.agent_train import (
        open_run,
        resolve_train_config,
        segmenter_name,
        train_start,
    )
    from segrl.lm.config import LEXICON_COST
    from segrl.lm.lexicon import DirectLexicon

    monkeypatch.chdir(tmp_path)  # the runs/ folders of open_run
    counts = tmp_path / "words.counts"
    stems, suffixes = ["walk", "talk", "jump", "play", "kick", "look"], ["ed", "ing", "s", ""]
    words = [stem + suffix for stem in stems for suffix in suffixes]
    counts.write_text("".join(f"{100 - i} {w}\n" for i, w in enumerate(words)), encoding="utf-8")
    gold = tmp_path / "gold.tsv"
    gold.write_text("walked\twalk ed\njumping\tjump ing\n", encoding="utf-8")

    def asked(corpus, **overrides):
        values = {"evaluator.name": "lm", "data.corpus": str(corpus), "data.min_char_count": 1}
        if corpus == counts:
            values["gold.path"] = str(gold)
        config = build_config(TrainConfig, overrides={**values, **overrides})
        validate_config(config)
        return config, load_corpus(config.data)

    def resolved(corpus, **overrides):
        config, loaded = asked(corpus, **overrides)
        return resolve_train_config(config, train_start(config, loaded)), loaded

    def task(corpus, **overrides):  # the task of the config as the job resolves it
        return build_task(*resolved(corpus, **overrides))

    def reward(corpus, **overrides):  # the LM's reward and REINFORCE's per-action gradient
        config = resolved(corpus, **overrides)[0]
        return config.evaluator.lm.reward_variant, config.reinforce.per_action_gradient

    on_words = task(counts)
    assert on_words.setup.config.teacher_features is True
    assert on_words.evaluator.lm.config.lexicon_cost == LEXICON_COST
    assert isinstance(on_words.evaluator.lm.lexicon, DirectLexicon)  # as segrl lm train's
    assert reward(counts) == ("description-length", "sampled")
    on_text = task(small_corpus_file)
    assert on_text.setup.config.teacher_features is False
    assert on_text.evaluator.lm.lexicon is None
    assert on_text.evaluator.lm.config.lexicon_cost == 0
    assert reward(small_corpus_file) == ("posterior", "forward-kl")
    for overrides in ({"agent": "ppo-batched"}, {"env.teacher_features": False}):
        other = task(counts, **overrides)
        assert other.setup.config.teacher_features is False
        assert other.evaluator.lm.lexicon is None
        assert reward(counts, **overrides)[0] == "posterior"
    for corpus, variant in ((counts, "description-length"), (small_corpus_file, "posterior")):
        run = open_run(*asked(corpus))  # its folder and run named by its reward
        assert run.path.name == f"reinforce-bilstm-lm-per-action-{variant}" == segmenter_name(run)
    posterior = {"evaluator.lm.reward_variant": "posterior"}  # asked for, it stays
    assert reward(counts, **posterior) == ("posterior", "forward-kl")
    assert reward(counts, **{"env.reward": "sequence"})[0] == "likelihood"
    # text without spaces: the student reads its teacher, an LM without a lexicon, by default
    hidden = {"env.hide_spaces": True}
    unspaced = task(small_corpus_file, **hidden)
    assert unspaced.setup.config.teacher_features is True
    assert unspaced.evaluator.lm.lexicon is None
    assert reward(small_corpus_file, **hidden) == ("description-length", "sampled")
    for overrides in ({"agent": "ppo-batched"}, {"env.teacher_features": False}):
        chars = resolved(small_corpus_file, **hidden, **overrides)[0]
        assert chars.env.teacher_features is False
        assert chars.evaluator.lm.reward_variant == "posterior"
