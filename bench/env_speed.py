"""Speed of the segmentation environments, as ratios measured side by side in one run.

Prints environment steps per second of ``segrl/CharSegment-v0`` (Morfessor evaluator, per-action and
sequence rewards) as a ratio to Gymnasium's ``CartPole-v1``, and sentences per second of the batched
``VectorSentenceSegmentEnv`` as a ratio to ``segrl/SentenceSegment-v0`` stepped one sentence at a
time. Every environment is stepped with random actions, through ``gymnasium.make`` (so with
Gymnasium's default wrappers) where it is registered. The measurements alternate in rounds and each
ratio is the median over rounds, so that load from other processes affects both sides alike.

    python bench/env_speed.py                     # bundled corpus, about a minute
    python bench/env_speed.py --rounds 5 --seconds 3 --num-envs 256
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

import segrl  # noqa: F401  (registers the environments)
from segrl.data import load_corpus
from segrl.envs import CHAR_SEGMENT_ID, SENTENCE_SEGMENT_ID, EnvSetup, VectorSentenceSegmentEnv
from segrl.envs.vector import VectorCharSegmentEnv


def rate(run: Callable[[], int], seconds: float) -> float:
    """Units per second of ``run`` (which does some work and returns how many units) for ``seconds``."""
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        done += run()
    return done / (time.perf_counter() - start)


def single_env_stepper(env: gym.Env, chunk: int = 200) -> Callable[[], int]:
    """Steps ``env`` with random actions, resetting when an episode ends; counts steps."""
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    space = env.action_space
    space.seed(0)

    def run() -> int:
        for _ in range(chunk):
            action = (
                space.sample() if not isinstance(space, gym.spaces.Discrete) else rng.integers(2)
            )
            _obs, _reward, terminated, truncated, _info = env.step(action)
            if terminated or truncated:
                env.reset()
        return chunk

    return run


def vector_stepper(env, counts_sentences: bool) -> Callable[[], int]:
    """Steps a batched env with random actions; counts sentences (finished episodes) or steps."""
    rng = np.random.default_rng(0)
    env.reset()
    shape = (env.num_envs, env.slots.positions) if counts_sentences else (env.num_envs,)

    def run() -> int:
        _obs, _rewards, dones, _info = env.step(rng.integers(0, 2, size=shape))
        return int(dones.sum()) if counts_sentences else env.num_envs

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement and round")
    parser.add_argument("--num-envs", type=int, default=256, help="sentences per batched step")
    args = parser.parse_args()

    corpus = load_corpus()
    setup = EnvSetup.create(corpus=corpus, evaluator="morfessor")  # trains or loads Morfessor
    evaluator = setup.evaluator
    benches: dict[str, Callable[[], int]] = {
        "cartpole": single_env_stepper(gym.make("CartPole-v1")),
        "char_per_action": single_env_stepper(
            gym.make(CHAR_SEGMENT_ID, corpus=corpus, evaluator=evaluator)
        ),
        "char_sequence": single_env_stepper(
            gym.make(CHAR_SEGMENT_ID, corpus=corpus, evaluator=evaluator, reward="sequence")
        ),
        "vector_char": vector_stepper(
            VectorCharSegmentEnv(args.num_envs, setup=setup), counts_sentences=False
        ),
        "sentence_single": single_env_stepper(
            gym.make(SENTENCE_SEGMENT_ID, corpus=corpus, evaluator=evaluator)
        ),
        "sentence_batched": vector_stepper(
            VectorSentenceSegmentEnv(args.num_envs, setup=setup), counts_sentences=True
        ),
    }
    for run in benches.values():  # warm up (Morfessor's reference decisions get cached)
        rate(run, 0.5)
    rounds: dict[str, list[float]] = {name: [] for name in benches}
    for _ in range(args.rounds):
        for name, run in benches.items():
            rounds[name].append(rate(run, args.seconds))

    def median(name: str) -> float:
        return statistics.median(rounds[name])

    def ratio(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(rounds[a], rounds[b], strict=True))

    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} CPUs")
    print(f"{'CartPole-v1 steps/s':<45}{median('cartpole'):>12,.0f}")
    for name, label in [
        ("char_per_action", "CharSegment-v0 (Morfessor, per-action) steps/s"),
        ("char_sequence", "CharSegment-v0 (Morfessor, sequence) steps/s"),
        ("vector_char", f"VectorCharSegmentEnv x{args.num_envs} steps/s"),
    ]:
        print(
            f"{label:<45}{median(name):>12,.0f}   ratio to CartPole {ratio(name, 'cartpole'):.3f}"
        )
    print(f"{'SentenceSegment-v0 sentences/s':<45}{median('sentence_single'):>12,.0f}")
    print(
        f"{f'VectorSentenceSegmentEnv x{args.num_envs} sentences/s':<45}"
        f"{median('sentence_batched'):>12,.0f}   "
        f"ratio to SentenceSegment-v0 {ratio('sentence_batched', 'sentence_single'):.1f}"
    )


if __name__ == "__main__":
    main()
