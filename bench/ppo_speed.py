"""Training speed of the two PPOs, as ratios measured side by side in one run (CPU).

Prints PPO training steps per second of stable-baselines3 on ``CharSegment`` (one decision per
environment step; rollout and update included) and sentences per second of the batched PPO on
``SentenceSegment`` (all decisions of a sentence in one step; rollout and update included), with the
same policy, evaluator (Morfessor, per-action rewards) and PPO settings (episodes side by side,
epochs, minibatches). SB3's steps per second are turned into sentences per second with the mean
number of decisions per training sentence, so the two can be compared. The measurements alternate,
one iteration of each per round, and each ratio is the median over rounds, so that load from other
processes affects both sides alike.

    python bench/ppo_speed.py                     # bundled corpus, BiLSTM, about two minutes
    python bench/ppo_speed.py --rounds 5 --policy transformer
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

from segrl.agents.config import TrainConfig
from segrl.agents.policies import SegmenterPolicy
from segrl.agents.ppo_batched import BatchedPPO
from segrl.agents.sb3.policy import build_sb3_model
from segrl.agents.sb3.vec_env import SegmentVecEnv
from segrl.agents.segmenter import separator_id
from segrl.config import build_config
from segrl.data import load_corpus
from segrl.envs import EnvSetup, VectorCharSegmentEnv, VectorSentenceSegmentEnv
from segrl.evaluators import decision_layout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--num-envs", type=int, default=64, help="episodes side by side")
    parser.add_argument("--n-steps", type=int, default=32, help="SB3 steps per slot per rollout")
    parser.add_argument("--policy", default="bilstm", help="bilstm or transformer")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    overrides = {
        "policy.kind": args.policy,
        "ppo.num_envs": args.num_envs,
        "ppo.n_steps": args.n_steps,
    }
    config = build_config(TrainConfig, overrides=overrides)
    corpus = load_corpus()
    setup = EnvSetup.create(corpus=corpus, evaluator="morfessor")  # trains or loads Morfessor
    separator = separator_id(corpus.vocab)
    decisions_per_sentence = float(
        np.mean([decision_layout(s, False)[1].sum() for s in setup.sentences])
    )

    torch.manual_seed(0)
    venv = SegmentVecEnv(VectorCharSegmentEnv(args.num_envs, seed=0, setup=setup))
    sb3 = build_sb3_model(config, venv, separator, torch.device("cpu"))
    sb3._last_obs = venv.reset()
    sb3._last_episode_starts = np.ones(args.num_envs, dtype=bool)
    rollout = args.num_envs * args.n_steps

    policy = SegmenterPolicy(
        setup.vocab_size, setup.n_actions, setup.max_len, config.policy, separator
    )
    batched = BatchedPPO(policy, config.ppo, "per-action")
    sentence_env = VectorSentenceSegmentEnv(args.num_envs, seed=0, setup=setup)
    observation = sentence_env.reset()

    def sb3_iteration() -> float:
        start = time.perf_counter()
        sb3.learn(rollout, log_interval=None, reset_num_timesteps=False)
        return rollout / (time.perf_counter() - start)  # decisions (steps) per second

    def batched_iteration() -> float:
        nonlocal observation
        start = time.perf_counter()
        observation, _stats, _batch = batched.step(sentence_env, observation)
        return args.num_envs / (time.perf_counter() - start)  # sentences per second

    sb3_iteration(), batched_iteration()  # warm up
    sb3_steps, batched_sentences = [], []
    for _ in range(args.rounds):
        sb3_steps.append(sb3_iteration())
        batched_sentences.append(batched_iteration())
    sb3_sentences = [s / decisions_per_sentence for s in sb3_steps]
    ratio = statistics.median(b / s for b, s in zip(batched_sentences, sb3_sentences, strict=True))

    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} CPUs")
    print(
        f"{args.policy}, {args.num_envs} episodes side by side, {config.ppo.epochs} epochs x "
        f"{config.ppo.minibatches} minibatches, {args.threads} thread(s); "
        f"{decisions_per_sentence:.1f} decisions per training sentence"
    )
    print(
        f"{'SB3 PPO on CharSegment: steps/s':<48}{statistics.median(sb3_steps):>10,.0f}"
        f"   (sentences/s {statistics.median(sb3_sentences):,.1f})"
    )
    print(
        f"{'batched PPO on SentenceSegment: sentences/s':<48}"
        f"{statistics.median(batched_sentences):>10,.1f}"
        f"   (decisions/s {statistics.median(batched_sentences) * decisions_per_sentence:,.0f})"
    )
    print(f"{'ratio (sentences/s, batched / SB3)':<48}{ratio:>10.1f}")


if __name__ == "__main__":
    main()
