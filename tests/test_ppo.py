"""PPO: the SB3 VecEnv adapter, the features extractor, the rule masks, the batched PPO's loss, and
both ``segrl train`` jobs end to end (registration, resumption)."""

import numpy as np
import pytest
import torch
from mlflow.tracking import MlflowClient
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from stable_baselines3 import PPO

from segrl.agents import TrainConfig
from segrl.agents.policies import PolicyConfig, SegmenterPolicy
from segrl.agents.ppo_batched import BatchedPPO, ppo_loss
from segrl.agents.sb3.policy import SegmenterFeaturesExtractor, build_sb3_model
from segrl.agents.sb3.vec_env import SegmentVecEnv
from segrl.agents.segmenter import AgentSegmenter, separator_id
from segrl.checkpoint import load_checkpoint
from segrl.cli import EXIT_USER_ERROR, main
from segrl.config import build_config, validate_config
from segrl.data import GoldWord
from segrl.envs import VectorCharSegmentEnv, VectorSentenceSegmentEnv
from segrl.envs.masks import DELETE, MODIFY, REPEAT, text_rule_masks
from segrl.errors import ConfigError
from segrl.evaluators.gold import GoldEvaluator
from segrl.experiments.agent_train import train_ppo_batched
from segrl.experiments.sb3_train import EvaluatorUpdates, MlflowOutputFormat, train_ppo
from segrl.jobs import RunDir, TrainingInterrupted
from segrl.tracking.queries import segmenter_runs
from segrl.tracking.runs import start_run

pytestmark = pytest.mark.usefixtures("one_thread")
SMALL = {"embedding_dim": 8, "hidden_dim": 16}
GOLD = [GoldWord("walked", (("walk", "ed"),))]


def small_train_config(corpus_file, out, agent="ppo", **overrides):
    values = {
        "agent": agent,
        "data.corpus": str(corpus_file),
        "data.min_char_count": 1,
        "gold.max_words": 100,
        "policy.embedding_dim": 8,
        "policy.hidden_dim": 16,
        "ppo.steps": 6,
        "ppo.num_envs": 4,
        "ppo.n_steps": 8,
        "ppo.minibatches": 2,
        "ppo.epochs": 2,
        "eval_every": 3,
        "eval_gold_words": 30,
        "checkpoint_every": 2,
        "log_every": 1,
        "threads": 1,
        "out": str(out),
    }
    values.update(overrides)
    return build_config(TrainConfig, overrides=values)


# --- the VecEnv adapter --------------------------------------------------------------------------
def test_vec_env_follows_the_sb3_contract(corpus, morfessor):
    venv = SegmentVecEnv(VectorCharSegmentEnv(3, seed=1, corpus=corpus, evaluator=morfessor))
    twin = VectorCharSegmentEnv(3, seed=1, corpus=corpus, evaluator=morfessor)
    observation = venv.reset()
    expected = twin.reset()
    assert all(np.array_equal(observation[k], expected[k]) for k in expected)
    assert venv.observation_space.contains({k: v[0] for k, v in observation.items()})
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(200):
        actions = rng.integers(0, 2, size=3)
        venv.step_async(actions)
        observation, rewards, dones, infos = venv.step_wait()
        twin_observation, twin_rewards, twin_dones, twin_info = twin.step(actions)
        assert rewards.shape == (3,) and rewards.dtype == np.float32 and dones.shape == (3,)
        np.testing.assert_allclose(rewards, twin_rewards, rtol=1e-6)
        assert np.array_equal(dones, twin_dones)
        assert len(infos) == 3
        for i in range(3):
            if dones[i]:
                ended += 1
                terminal = infos[i]["terminal_observation"]
                final = {k: v[i] for k, v in twin_info["final_observation"].items()}
                assert all(np.array_equal(terminal[k], final[k]) for k in final)
                # the terminal position is past the last; the new episode starts at its first
                assert terminal["position"][0] == terminal["length"][0] - 1
                assert observation["position"][i] < observation["length"][i] - 1
                assert infos[i]["episode"]["l"] >= 1
                assert "".join(infos[i]["segments"]) == twin_info["batch"].texts[i]
            else:
                assert "terminal_observation" not in infos[i]
        assert all(np.array_equal(observation[k], twin_observation[k]) for k in observation)
    assert ended > 3
    assert venv.env_is_wrapped(object) == [False] * 3
    assert venv.get_attr("num_envs", indices=[0, 2]) == [3, 3]
    assert is_masking_supported(venv)
    assert get_action_masks(venv).shape == (3, 2) and get_action_masks(venv).all()


def test_vec_env_state_restores_episodes_in_progress(corpus, morfessor):
    venv = SegmentVecEnv(VectorCharSegmentEnv(2, seed=0, corpus=corpus, evaluator=morfessor))
    venv.reset()
    for _ in range(3):
        venv.step(np.array([1, 0]))
    state = venv.state_dict()
    after = [venv.step(np.array([0, 1]))[1] for _ in range(20)]
    venv.load_state_dict(state)
    again = [venv.step(np.array([0, 1]))[1] for _ in range(20)]
    np.testing.assert_array_equal(np.stack(after), np.stack(again))


# --- masks of the full rule set ------------------------------------------------------------------
def test_full_rule_masks_on_constructed_words():
    def allowed(word: str, position: int) -> set[int]:
        return set(np.flatnonzero(text_rule_masks(word, len(word) - 1, 5)[position]).tolist())

    assert allowed("planning", 3) == {0, 1, REPEAT}  # plan|ning: n doubled
    assert allowed("created", 4) == {0, 1, DELETE}  # creat|ed: e dropped before a vowel
    assert allowed("studied", 4) == {0, 1, MODIFY}  # studi|ed: y shown as i
    # walk|ed: the text cannot tell walk+ed from walke+ed, so delete is allowed too
    assert allowed("walked", 3) == {0, 1, DELETE}
    assert allowed("cats", 2) == {0, 1}  # cat|s: nothing repeated, no vowel after, no i before
    assert allowed("taxis", 3) == {0, 1, MODIFY}  # taxi|s: an i before a letter
    assert allowed("it's", 1) == {0, 1}  # t|': only letters take the rules
    assert text_rule_masks("planning", 7, 2).all()  # the binary rule set allows everything


def test_vec_env_exposes_the_masks_maskable_ppo_reads(corpus, morfessor):
    venv = SegmentVecEnv(
        VectorCharSegmentEnv(2, seed=0, corpus=corpus, evaluator=morfessor, rules="full")
    )
    venv.reset()
    venv.env.load(["planning", "studied"])
    masks = get_action_masks(venv)  # at position 0: p|l and s|t
    assert masks.shape == (2, 5)
    assert masks[0].tolist() == [True, True, False, False, False]
    for _ in range(3):
        venv.step(np.array([0, 0]))
    masks = get_action_masks(venv)  # position 3: n|n and d|i
    assert masks[0, REPEAT] and not masks[0, DELETE]
    assert masks[1, DELETE] and not masks[1, REPEAT] and not masks[1, MODIFY]


# --- the features extractor ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "kind,context", [("bilstm", "word"), ("transformer", "word"), ("bilstm", "text")]
)
def test_features_extractor_gives_the_policy_features_at_the_position(
    corpus, morfessor, kind, context
):
    env = VectorCharSegmentEnv(5, seed=0, corpus=corpus, evaluator=morfessor)
    observation = env.reset()
    for _ in range(4):
        observation, *_ = env.step(np.ones(5, dtype=np.int64))
    config = PolicyConfig(kind=kind, context=context, **SMALL)
    extractor = SegmenterFeaturesExtractor(
        env.single_observation_space,
        len(corpus.vocab),
        2,
        env.setup.max_len,
        config,
        separator_id(corpus.vocab),
    ).eval()
    tensors = {k: torch.from_numpy(v).float() for k, v in observation.items()}  # as SB3 gives
    with torch.no_grad():
        features = extractor(tensors)
        ids, lengths = (
            torch.from_numpy(observation["chars"]),
            torch.from_numpy(observation["length"][:, 0]),
        )
        full = extractor.segmenter.features(ids, lengths)  # [B, P, F]
    assert features.shape == (5, extractor.features_dim) == (5, 2 * SMALL["hidden_dim"])
    expected = full[torch.arange(5), torch.from_numpy(observation["position"][:, 0])]
    torch.testing.assert_close(features, expected, atol=1e-5, rtol=1e-4)


def test_sb3_actor_is_the_segmenter_policy_head(corpus, morfessor, tmp_path):
    config = build_config(TrainConfig, overrides={"policy.hidden_dim": 16})
    venv = SegmentVecEnv(VectorCharSegmentEnv(4, seed=0, corpus=corpus, evaluator=morfessor))
    model = build_sb3_model(config, venv, separator_id(corpus.vocab), torch.device("cpu"))
    assert type(model) is PPO and model.gamma == 0.0  # per-action rewards: no discount
    observation = venv.reset()
    obs_tensor, _ = model.policy.obs_to_tensor(observation)
    model.policy.set_training_mode(False)
    with torch.no_grad():
        sb3_logits = model.policy.get_distribution(obs_tensor).distribution.logits
        policy = model.policy.features_extractor.segmenter
        ids = torch.from_numpy(observation["chars"])
        logits = policy(ids, torch.from_numpy(observation["length"][:, 0]))
    rows = torch.arange(4)
    expected = torch.log_softmax(logits[rows, torch.from_numpy(observation["position"][:, 0])], -1)
    torch.testing.assert_close(sb3_logits, expected, atol=1e-5, rtol=1e-4)
    full = build_config(TrainConfig, overrides={"env.rules": "full"})
    venv_full = SegmentVecEnv(
        VectorCharSegmentEnv(2, seed=0, corpus=corpus, evaluator=morfessor, rules="full")
    )
    assert type(build_sb3_model(full, venv_full, None, torch.device("cpu"))) is MaskablePPO


@pytest.mark.parametrize("reward", ["per-action", "sequence"])
def test_sb3_ppo_learns_one_word(corpus, reward):
    """SB3 PPO on the word ``walked`` with its gold split: the greedy segmentation becomes walk|ed."""
    small = {"policy.embedding_dim": 8, "policy.hidden_dim": 16, "ppo.lr": 1e-2}
    config = build_config(TrainConfig, overrides={**small, "ppo.n_steps": 10, "env.reward": reward})
    env = VectorCharSegmentEnv(
        8, seed=0, corpus=corpus, texts=["walked"], evaluator=GoldEvaluator(GOLD), reward=reward
    )
    model = build_sb3_model(config, SegmentVecEnv(env), None, torch.device("cpu"))
    assert model.gamma == (0.0 if reward == "per-action" else 1.0)
    segmenter = AgentSegmenter(model.policy.features_extractor.segmenter, corpus.vocab)
    assert segmenter.segment_sentences(["walked"]) != [["walk", "ed"]]
    model.learn(8 * 10 * 8, log_interval=None)
    assert segmenter.segment_sentences(["walked"]) == [["walk", "ed"]]


class RecordingGold(GoldEvaluator):
    """The gold evaluator, recording what it is asked to co-train on."""

    def __init__(self):
        super().__init__(GOLD)
        self.updates = []

    def update(self, batch):
        self.updates.append(batch)
        return {"sentences": float(len(batch))}


def test_the_evaluator_co_trains_once_per_rollout_on_the_finished_episodes(corpus):
    evaluator = RecordingGold()
    env = VectorCharSegmentEnv(4, seed=0, corpus=corpus, texts=["walked"], evaluator=evaluator)
    config = build_config(TrainConfig, overrides={"ppo.n_steps": 10, "policy.hidden_dim": 16})
    model = build_sb3_model(config, SegmentVecEnv(env), None, torch.device("cpu"))
    callback = EvaluatorUpdates(model.env)
    model.learn(40, callback=callback, log_interval=None)
    # 5 decisions per episode: each of the 4 slots finishes 2 episodes in 10 steps
    assert [len(batch) for batch in evaluator.updates] == [8]
    assert all("".join(segments) == "walked" for segments in evaluator.updates[0].segmentations())
    assert callback.stats == {"sentences": 8.0}


def test_mlflow_output_format_logs_numbers_only(mlflow_store):
    with start_run({"agent": "ppo"}) as run:
        MlflowOutputFormat().write(
            {"train/approx_kl": 0.5, "time/fps": 12, "note": "text", "train/flag": True},
            {"train/approx_kl": None, "time/fps": ("mlflow",)},
            step=7,
        )
    history = MlflowClient().get_metric_history(run.info.run_id, "train/approx_kl")
    assert [(m.step, m.value) for m in history] == [(7, 0.5)]
    assert set(MlflowClient().get_run(run.info.run_id).data.metrics) == {"train/approx_kl"}


# --- the batched PPO -----------------------------------------------------------------------------
def test_ppo_loss_clips_and_has_the_right_sign():
    logits = torch.zeros(1, 3, 2, requires_grad=True)  # p = 0.5 everywhere
    actions = torch.tensor([[1, 1, 0]])
    old = torch.log(torch.tensor([[0.25, 0.5, 0.5]]))  # ratios 2.0, 1.0, 1.0
    advantages = torch.tensor([[1.0, 1.0, -1.0]])
    free = torch.tensor([[True, True, False]])
    loss, stats = ppo_loss(logits, actions, old, advantages, free, clip_coef=0.2, ent_coef=0.0)
    # position 0: ratio 2 clipped to 1.2 (advantage > 0): 1.2; position 1: 1.0; position 2 not free
    assert loss.item() == pytest.approx(-(1.2 + 1.0) / 2)
    assert stats["clip_fraction"] == pytest.approx(0.5)
    loss.backward()
    grad = logits.grad[0]
    assert torch.all(grad[0] == 0)  # clipped: no gradient
    assert grad[1, 1] < 0 < grad[1, 0]  # descending raises the advantaged action's logit
    assert torch.all(grad[2] == 0)  # not a decision
    # a negative advantage with a ratio below 1 - eps is clipped too
    loss, _ = ppo_loss(
        logits, actions, torch.log(torch.tensor([[0.9, 0.5, 0.5]])), -advantages, free, 0.2, 0.0
    )
    assert loss.item() == pytest.approx(-(-0.8 - 1.0) / 2)


@pytest.mark.parametrize("reward", ["per-action", "sequence"])
def test_batched_ppo_learns_one_word(corpus, reward):
    torch.manual_seed(0)
    env = VectorSentenceSegmentEnv(
        16, corpus=corpus, texts=["walked"], evaluator=GoldEvaluator(GOLD), reward=reward
    )
    policy = SegmenterPolicy(len(corpus.vocab), 2, env.setup.max_len, PolicyConfig(**SMALL))
    learner = BatchedPPO(policy, build_config(TrainConfig, overrides={"ppo.lr": 1e-2}).ppo, reward)
    segmenter = AgentSegmenter(policy, corpus.vocab)
    observation = env.reset()
    assert segmenter.segment_sentences(["walked"]) != [["walk", "ed"]]
    for _ in range(15):
        observation, stats, _ = learner.step(env, observation)
    assert segmenter.segment_sentences(["walked"]) == [["walk", "ed"]]
    assert {"reward", "entropy", "approx_kl", "clip_fraction", "value_loss"} <= set(stats)


def test_batched_ppo_with_full_rules_never_samples_a_forbidden_action(corpus):
    env = VectorSentenceSegmentEnv(
        8, corpus=corpus, texts=["planning", "studied"], evaluator=GoldEvaluator(GOLD), rules="full"
    )
    policy = SegmenterPolicy(len(corpus.vocab), 5, env.setup.max_len, PolicyConfig(**SMALL))
    learner = BatchedPPO(policy, TrainConfig().ppo, "per-action")
    _, _, batch = learner.step(env, env.reset())
    for row, text in enumerate(batch.texts):
        masks = text_rule_masks(text, batch.positions, 5)
        decided = batch.decisions[row, : len(text) - 1]
        assert masks[np.arange(len(decided)), decided].all()


# --- the jobs ------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "agent,rules", [("ppo", "binary"), ("ppo-batched", "binary"), ("ppo", "full")]
)
def test_ppo_jobs_log_and_register(mlflow_store, small_corpus_file, agent, rules):
    config = small_train_config(
        small_corpus_file, mlflow_store / "run", agent, **{"env.rules": rules}
    )
    result = (train_ppo if agent == "ppo" else train_ppo_batched)(config)
    assert result.step == 6
    client = MlflowClient()
    metrics = client.get_run(result.run_id).data.metrics
    assert {"morfessor_boundary_f1", "boundary_f1", "units_per_char"} <= set(metrics)
    logged = "train/approx_kl" if agent == "ppo" else "train/clip_fraction"
    assert logged in metrics
    rows = segmenter_runs("segrl")
    assert [r["segmenter"] for r in rows] == [f"{agent}-bilstm-morfessor-per-action"]
    if agent == "ppo":  # SB3's own metrics, at SB3's step (decisions taken)
        history = client.get_metric_history(result.run_id, "rollout/ep_rew_mean")
        assert history and history[-1].step == 6 * 4 * 8
    loaded = AgentSegmenter.load(result.run_dir / "segmenter")
    sentence = "the man walked home"
    assert "".join(loaded.segment_sentences([sentence])[0]) == sentence


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["ppo", "ppo-batched"])
def test_interrupted_ppo_runs_resume_exactly(mlflow_store, small_corpus_file, agent, monkeypatch):
    """Stopped at step 3 and resumed, a run ends with the weights of one never interrupted (the SB3
    job in one ``learn`` call per session, stopped by its callbacks)."""
    from stable_baselines3 import PPO

    learned = []
    real_learn = PPO.learn

    def learn(self, total_timesteps, *args, **kwargs):
        learned.append(total_timesteps)
        return real_learn(self, total_timesteps, *args, **kwargs)

    monkeypatch.setattr(PPO, "learn", learn)
    train = train_ppo if agent == "ppo" else train_ppo_batched
    straight = train(small_train_config(small_corpus_file, mlflow_store / "a", agent))
    config = small_train_config(small_corpus_file, mlflow_store / "b", agent)
    with pytest.raises(TrainingInterrupted):
        train(config, on_step=lambda step, stats: step == 3)
    assert (
        load_checkpoint(RunDir(mlflow_store / "b").checkpoint_path, restore_rng=False)["step"] == 3
    )
    resumed = train(config)
    assert resumed.resumed_from == 3 and resumed.step == 6
    a = AgentSegmenter.load(straight.run_dir / "segmenter").policy.state_dict()
    b = AgentSegmenter.load(resumed.run_dir / "segmenter").policy.state_dict()
    for name, tensor in a.items():
        assert torch.equal(tensor, b[name]), name
    rollout = 4 * 8
    assert learned == ([6 * rollout, 6 * rollout, 3 * rollout] if agent == "ppo" else [])


def test_ppo_config_errors_and_command_line(mlflow_store, small_corpus_file, capsys):
    with pytest.raises(ConfigError, match="ppo.clip_coef"):
        validate_config(build_config(TrainConfig, overrides={"ppo.clip_coef": 0.0}))
    with pytest.raises(ConfigError, match="gamma"):
        validate_config(build_config(TrainConfig, overrides={"ppo.gamma": 1.5}))
    code = main(["train", "--corpus", str(small_corpus_file), "--agent", "ppo", "--epochs", "0"])
    assert code == EXIT_USER_ERROR
    assert "at least 1" in capsys.readouterr().err
    args = ["train", "--corpus", str(small_corpus_file), "--agent", "ppo-batched"]
    args += ["--ppo-steps", "2", "--num-envs", "4", "--epochs", "1", "--minibatches", "2"]
    args += ["--gold-max-words", "50", "--threads", "1", "--out", str(mlflow_store / "cli")]
    assert main(args) == 0
    assert "ppo-batched-bilstm-morfessor-per-action" in capsys.readouterr().out
    assert RunDir(mlflow_store / "cli").info["step"] == 2


@pytest.mark.slow
@pytest.mark.parametrize(
    "agent,reward,lm_reward",
    [("ppo", "per-action", "incremental"), ("ppo-batched", "per-action", "resample")],
)
def test_ppo_jobs_with_the_lm_evaluator(mlflow_store, small_corpus_file, agent, reward, lm_reward):
    """Both PPO agents pre-train the LM evaluator once and co-train it; ``resample`` reads the
    policy's probabilities, which the batched learner hands to the environment."""
    lm = {
        "evaluator.name": "lm",
        "evaluator.lm.reward_variant": lm_reward,
        "evaluator.lm.lm.char_dim": 8,
        "evaluator.lm.lm.hidden_dim": 16,
        "evaluator.lm.lm.speller_dim": 16,
        "evaluator.lm.batch_size": 8,
        "env.reward": reward,
    }
    config = small_train_config(small_corpus_file, mlflow_store / "run", agent, **lm)
    result = (train_ppo if agent == "ppo" else train_ppo_batched)(config)
    assert result.step == 6
    metrics = MlflowClient().get_run(result.run_id).data.metrics
    assert metrics["pretrain/lm_bits_per_char"] > 0
    assert metrics["train/evaluator/lm_bits_per_char"] > 0
    assert 0.0 < metrics["units_per_char"] <= 1.0
