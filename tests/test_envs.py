"""The Gymnasium environments and the batched ones: registration, API checks, transitions, rewards."""

import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import segrl  # noqa: F401  (registers the environments)
from segrl.data import GoldWord
from segrl.envs import (
    CHAR_SEGMENT_ID,
    SENTENCE_SEGMENT_ID,
    VectorCharSegmentEnv,
    VectorSentenceSegmentEnv,
)
from segrl.envs.rendering import frame_shape, text_frame
from segrl.errors import ConfigError, DataError
from segrl.evaluators.gold import GoldEvaluator

GOLD = [
    GoldWord("walked", (("walk", "ed"),)),
    GoldWord("cats", (("cat", "s"),)),
    GoldWord("the", (("the",),)),
]


@pytest.fixture
def gold():
    return GoldEvaluator(GOLD)


def test_import_segrl_registers_without_torch():
    code = (
        "import sys, gymnasium, segrl; "
        "print('segrl/CharSegment-v0' in gymnasium.registry, "
        "'segrl/SentenceSegment-v0' in gymnasium.registry, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "False"]


@pytest.mark.parametrize("env_id", [CHAR_SEGMENT_ID, SENTENCE_SEGMENT_ID])
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"reward": "sequence"},
        {"hide_spaces": True, "rules": "full"},
        {"hide_spaces": True, "reward": "sequence", "max_len": 100},
    ],
)
def test_registered_envs_pass_gymnasium_and_sb3_checks(env_id, options, corpus, morfessor):
    env = gym.make(env_id, corpus=corpus, evaluator=morfessor, render_mode="ansi", **options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gym_check_env(env.unwrapped)
        sb3_check_env(env.unwrapped, warn=True)
    messages = [str(w.message) for w in caught if "segrl" not in str(w.filename)]
    assert not messages, messages
    env.reset(seed=0)
    assert isinstance(env.render(), str)


def test_char_segment_skips_known_spaces_and_rewards_each_decision(corpus, gold):
    env = gym.make(CHAR_SEGMENT_ID, corpus=corpus, evaluator=gold, render_mode="ansi")
    obs, info = env.reset(seed=0, options={"text": "the cats"})
    assert info == {"sentence": "the cats"}
    assert obs["length"].tolist() == [8]
    assert obs["decisions"][:7].tolist() == [0, 0, 1, 1, 0, 0, 0]  # the space's two sides forced
    positions, rewards = [], []
    # reference: the | cat|s -> decisions at 0, 1 (no), 4, 5 (no), 6 (split)
    for action in [0, 1, 0, 0, 1]:
        positions.append(int(obs["position"][0]))
        obs, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
    assert positions == [0, 1, 4, 5, 6]  # 2 and 3 are beside the space
    assert rewards == [1.0, -1.0, 1.0, 1.0, 1.0]
    assert terminated and not truncated
    assert info["segments"] == ["th", "e", " ", "cat", "s"]
    assert obs["decisions"][:7].tolist() == [0, 1, 1, 1, 0, 0, 1]
    assert env.render() == "th-e cat-s"
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_char_segment_sequence_reward_comes_at_the_end(corpus, gold):
    env = gym.make(CHAR_SEGMENT_ID, corpus=corpus, evaluator=gold, reward="sequence")
    env.reset(seed=0, options={"text": "walked"})
    rewards = [env.step(a)[1] for a in [0, 0, 0, 0]]
    _obs, last, terminated, _trunc, _info = env.step(0)
    assert rewards == [0.0] * 4 and terminated
    assert last == pytest.approx(-0.75 / 5)  # one missed split (walk|ed) in five decisions


def test_char_segment_hidden_spaces_decides_word_boundaries(corpus, gold):
    env = gym.make(CHAR_SEGMENT_ID, corpus=corpus, evaluator=gold, hide_spaces=True)
    obs, _ = env.reset(seed=0, options={"text": "the cats"})
    assert obs["length"].tolist() == [7]  # "thecats"
    total, steps, terminated = 0.0, 0, False
    while not terminated:
        obs, reward, terminated, _, info = env.step(1 if int(obs["position"][0]) in (2, 5) else 0)
        total += reward
        steps += 1
    assert steps == 6 and total == 6.0
    assert info["segments"] == ["the", "cat", "s"]


def test_char_segment_random_draws_follow_the_seed(corpus, morfessor):
    env = gym.make(CHAR_SEGMENT_ID, corpus=corpus, evaluator=morfessor)
    first = [env.reset(seed=7)[1]["sentence"] for _ in range(2)]
    assert first[0] == first[1]
    assert first[0] in corpus.train


def test_sentence_segment_gives_action_rewards_in_info(corpus, gold):
    env = gym.make(
        SENTENCE_SEGMENT_ID, corpus=corpus, texts=["the cats"], evaluator=gold, max_len=12
    )
    obs, _ = env.reset(seed=0, options={"text": "the cats"})
    assert obs["free"].tolist() == [1, 1, 0, 0, 1, 1, 1] + [0] * 4
    action = np.zeros(11, dtype=np.int8)
    action[[1, 6, 9]] = 1  # 1 is wrong, 6 right, 9 beyond the text (ignored)
    _obs, reward, terminated, _trunc, info = env.step(action)
    assert terminated
    assert info["action_rewards"].tolist() == [1, -1, 0, 0, 1, 1, 1] + [0] * 4
    assert reward == 3.0
    assert info["segments"] == ["th", "e", " ", "cat", "s"]


def test_bad_options_and_texts_are_clear_errors(corpus, gold):
    with pytest.raises(
        ConfigError, match="env.reward must be one of: sequence, per-action; got 'bogus'"
    ):
        gym.make(CHAR_SEGMENT_ID, corpus=corpus, evaluator=gold, reward="bogus")
    with pytest.raises(ConfigError, match="env.rules must be one of: binary, full; got 'many'"):
        gym.make(CHAR_SEGMENT_ID, corpus=corpus, evaluator=gold, rules="many")
    with pytest.raises(DataError, match="longer than max_len=8"):
        gym.make(
            CHAR_SEGMENT_ID, corpus=corpus, evaluator=gold, texts=["the cats walked"], max_len=8
        )
    with pytest.raises(DataError, match="leaves a decision to make"):
        gym.make(CHAR_SEGMENT_ID, corpus=corpus, evaluator=gold, texts=["a b c"])
    env = gym.make(CHAR_SEGMENT_ID, corpus=corpus, evaluator=gold)
    with pytest.raises(DataError, match="leaves no decision"):
        env.reset(options={"text": "a b"})
    env.reset(options={"text": "the cats"})
    with pytest.raises(ValueError, match="not in"):
        env.step(2)


def test_vector_sentence_env_matches_the_single_env(corpus, gold):
    texts = ["the cats walked", "cats walked", "the cats", "walked"]
    vector = VectorSentenceSegmentEnv(
        2, seed=3, corpus=corpus, texts=texts, evaluator=gold, max_len=20
    )
    single = gym.make(SENTENCE_SEGMENT_ID, corpus=corpus, evaluator=gold, max_len=20)
    observation = vector.reset()
    seen = []
    rng = np.random.default_rng(0)
    for _ in range(4):  # two epochs of four sentences
        actions = rng.integers(0, 2, size=(2, 19))
        sentences = list(vector.slots.sentences)
        seen.extend(sentences)
        next_observation, rewards, dones, info = vector.step(actions)
        assert dones.all()
        for row, sentence in enumerate(sentences):
            obs, _ = single.reset(options={"text": sentence})
            assert np.array_equal(obs["chars"], observation["chars"][row])
            _, reward, _, _, single_info = single.step(actions[row])
            assert reward == rewards[row]
            assert np.array_equal(single_info["action_rewards"], info["action_rewards"][row])
        observation = next_observation
    assert sorted(seen[:4]) == sorted(texts) and sorted(seen[4:]) == sorted(texts)


def test_vector_env_state_resumes_the_same_sentences(corpus, gold):
    def make():
        return VectorSentenceSegmentEnv(3, seed=1, corpus=corpus, evaluator=gold)

    env = make()
    env.reset()
    actions = np.zeros((3, env.slots.positions), dtype=np.int64)
    env.step(actions)
    state = env.state_dict()
    expected = [env.step(actions)[3]["batch"].sentences for _ in range(5)]
    resumed = make()
    resumed.reset()
    resumed.load_state_dict(state)
    assert [resumed.step(actions)[3]["batch"].sentences for _ in range(5)] == expected


def test_vector_char_env_steps_in_lock_step_and_resets_finished_episodes(corpus, gold):
    texts = ["the cats", "walked", "cats walked"]
    env = VectorCharSegmentEnv(3, seed=0, corpus=corpus, texts=texts, evaluator=gold, max_len=16)
    observation = env.reset()
    totals = {}
    running = np.zeros(3)
    steps = 0
    while len(totals) < 3 and steps < 50:
        position = observation["position"][:, 0]
        actions = (position % 2).astype(np.int64)  # split at odd positions
        sentences = list(env.slots.sentences)
        observation, rewards, dones, info = env.step(actions)
        running += rewards
        for slot in np.flatnonzero(dones):
            totals.setdefault(sentences[slot], running[slot])
            assert info["final_observation"]["position"][slot, 0] == len(sentences[slot]) - 1
            assert info["segments"][slot] is not None
            running[slot] = 0.0
        steps += 1
    # the same decisions in one step give the same total per sentence
    single = gym.make(SENTENCE_SEGMENT_ID, corpus=corpus, texts=texts, evaluator=gold, max_len=16)
    for sentence, total in totals.items():
        single.reset(options={"text": sentence})
        actions = (np.arange(15) % 2).astype(np.int8)
        assert single.step(actions)[1] == total
    with pytest.raises(ValueError, match="actions"):
        env.step(np.zeros(2, dtype=np.int64))


@pytest.mark.parametrize("env_id", [CHAR_SEGMENT_ID, SENTENCE_SEGMENT_ID])
def test_stable_baselines3_multi_input_policy_trains_on_the_envs(env_id, corpus, morfessor):
    from stable_baselines3 import PPO

    env = gym.make(env_id, corpus=corpus, evaluator=morfessor, max_len=64)
    model = PPO(
        "MultiInputPolicy", env, n_steps=32, batch_size=16, n_epochs=1, seed=0, device="cpu"
    )
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(total_timesteps=64)
    assert model.num_timesteps == 64
    changed = [
        not torch.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True)
    ]
    assert any(changed)  # PPO updated the policy from the env's rewards
    observation, _ = env.reset(seed=0)
    action, _ = model.predict(observation, deterministic=True)
    _obs, reward, _terminated, _truncated, _info = env.step(action)  # the env takes SB3's action
    assert np.isfinite(reward)


@pytest.mark.parametrize("env_id", [CHAR_SEGMENT_ID, SENTENCE_SEGMENT_ID])
def test_stable_baselines3_make_vec_env_builds_the_envs_by_name(env_id, corpus, gold):
    """SB3's ``make_vec_env`` asks an env given by name for ``render_mode="rgb_array"``: the text
    comes back drawn in an image of one size for every frame, which SB3 tiles."""
    from stable_baselines3.common.env_util import make_vec_env

    envs = make_vec_env(env_id, n_envs=2, seed=0, env_kwargs={"corpus": corpus, "evaluator": gold})
    assert envs.render_mode == "rgb_array"
    envs.reset()
    frames = envs.get_images()
    assert [f.shape for f in frames] == [frame_shape(128)] * 2 and frames[0].dtype == np.uint8
    assert (frames[0] < 128).any() and (frames[0] == 255).any()  # dark text on white
    height, width, _ = frame_shape(128)
    assert envs.render().shape == (2 * height, width, 3)  # SB3's tiling: one above the other
    envs.step(np.ones((2, *envs.action_space.shape), dtype=np.int64))
    assert [f.shape for f in envs.get_images()] == [frame_shape(128)] * 2
    env_class = type(envs.envs[0].unwrapped)
    envs.close()
    with pytest.raises(ValueError, match="render_mode must be None, 'ansi' or 'rgb_array'"):
        env_class(corpus=corpus, evaluator=gold, render_mode="rgb")


def test_rgb_frames_draw_the_ansi_text():
    blank = text_frame("", 8)
    assert blank.shape == frame_shape(8) == (32, 528, 3) and (blank == 255).all()
    one, two = text_frame("th-e", 8), text_frame("the", 8)
    assert not np.array_equal(one, two) and not np.array_equal(one, blank)
    # a text longer than a line wraps into the next line of the same frame
    long = text_frame("a" * 70, 64)
    assert long.shape == frame_shape(64) and (long[frame_shape(64)[0] // 2 :] < 128).any()


def test_char_segment_env_gives_action_masks_and_its_vocabulary(corpus, gold):
    """``gymnasium.make`` + sb3-contrib's ``MaskablePPO`` work without an adapter, and a custom
    agent reads the vocabulary from the environment."""
    from sb3_contrib import MaskablePPO

    env = gym.make(CHAR_SEGMENT_ID, corpus=corpus, evaluator=gold, rules="full", max_len=64)
    observation, _ = env.reset(seed=0, options={"text": "planning studied"})
    base = env.unwrapped
    length = int(observation["length"][0])
    assert base.vocab.decode(observation["chars"][:length].tolist()) == "planning studied"
    masks = []
    for _ in range(6):  # p|l a|n n|n n|i i|n n|g
        masks.append(base.action_masks().tolist())
        env.step(0)
    assert masks[3] == [True, True, True, False, False]  # n|n: split+repeat allowed
    assert masks[4] == [True, True, False, True, False]  # n|i: split+delete (consonant, vowel)
    assert masks[5] == [True, True, False, False, True]  # i|n: split+modify (y -> i)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=32, batch_size=16, n_epochs=1, seed=0)
    model.learn(64)
    observation, _ = env.reset(seed=1, options={"text": "hmm"})
    action, _ = model.predict(observation, action_masks=base.action_masks())
    assert int(action) in (0, 1)  # h|m allows neither repeat, delete nor modify


def test_make_vec_builds_one_batched_environment(corpus, gold):
    envs = gym.make_vec(CHAR_SEGMENT_ID, num_envs=3, corpus=corpus, evaluator=gold)
    assert envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    assert envs.action_space == gym.spaces.MultiDiscrete([2, 2, 2])
    observation, _ = envs.reset(seed=0)
    assert observation["chars"].shape == (3, envs.single_observation_space["chars"].shape[0])
    ended = 0
    for _ in range(200):
        before = observation["chars"].copy()
        observation, rewards, terminated, truncated, infos = envs.step(np.ones(3, dtype=np.int64))
        assert rewards.shape == (3,) and not truncated.any()
        assert np.array_equal(infos["_segments"], terminated)  # Gymnasium's mask of the key
        for i in np.flatnonzero(terminated):  # the row is the next episode's; final_obs the last
            assert np.array_equal(infos["final_obs"]["chars"][i], before[i])
            assert "".join(infos["segments"][i]).replace(" ", "") == envs.vocab.decode(
                before[i][: int(infos["final_obs"]["length"][i][0])].tolist()
            ).replace(" ", "")
            ended += 1
    assert ended >= 3
    assert envs.action_masks().shape == (3, 2)
