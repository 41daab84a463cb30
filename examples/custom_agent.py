"""A custom agent on ``segrl/CharSegment-v0``, through ``gymnasium.make`` only.

The agent is a contextual bandit: for each pair of characters around a position (the ids just left
and right of it) it keeps the mean per-action reward of "no split" and "split", and acts
epsilon-greedily. Morfessor's decisions reward it (+1 right, -1 wrong); it then segments held-out
sentences greedily, and, as a ``segrl.FunctionSegmenter``, is scored on gold words.

    python examples/custom_agent.py            # bundled corpus, about a minute
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import segrl  # registers the segrl environments
from segrl.data import load_gold
from segrl.metrics import evaluate_word_segmenter


class CharacterPairBandit:
    """Mean reward of each action for each (left character, right character) pair."""

    def __init__(self, vocab_size: int, n_actions: int, epsilon: float = 0.1, seed: int = 0):
        self.total = np.zeros((vocab_size, vocab_size, n_actions))
        self.count = np.zeros((vocab_size, vocab_size, n_actions))
        self.epsilon = epsilon
        self.rng = np.random.default_rng(seed)

    @staticmethod
    def context(observation: dict[str, np.ndarray]) -> tuple[int, int]:
        position = int(observation["position"][0])
        chars = observation["chars"]
        return int(chars[position]), int(chars[position + 1])

    def act(self, observation: dict[str, np.ndarray], greedy: bool = False) -> int:
        left, right = self.context(observation)
        if not greedy and self.rng.random() < self.epsilon:
            return int(self.rng.integers(self.total.shape[-1]))
        means = self.total[left, right] / np.maximum(self.count[left, right], 1)
        return int(means.argmax())

    def learn(self, observation: dict[str, np.ndarray], action: int, reward: float) -> None:
        left, right = self.context(observation)
        self.total[left, right, action] += reward
        self.count[left, right, action] += 1


def main(episodes: int = 2000) -> None:
    env = gym.make("segrl/CharSegment-v0", evaluator="morfessor", reward="per-action")
    vocab_size = int(env.observation_space["chars"].high[0]) + 1
    agent = CharacterPairBandit(vocab_size, int(env.action_space.n))

    rewards = []
    for episode in range(episodes):
        observation, _info = env.reset(seed=episode)
        terminated, total = False, 0.0
        while not terminated:
            action = agent.act(observation)
            next_observation, reward, terminated, _truncated, _info = env.step(action)
            agent.learn(observation, action, reward)
            observation, total = next_observation, total + reward
        rewards.append(total)
        if (episode + 1) % 500 == 0:
            print(f"episode {episode + 1}: mean reward {np.mean(rewards[-500:]):.2f}")

    # greedy segmentations of held-out sentences, with the fraction of right decisions
    heldout = gym.make("segrl/CharSegment-v0", split="valid", evaluator="morfessor")
    right = decisions = 0
    for episode in range(5):
        observation, info = heldout.reset(seed=episode)
        terminated = False
        while not terminated:
            observation, reward, terminated, _truncated, info = heldout.step(
                agent.act(observation, greedy=True)
            )
            right += reward > 0
            decisions += 1
        print("|".join(info["segments"]).replace("| |", " "))  # segments split by |
    print(f"right decisions on held-out sentences: {right / decisions:.2%}")

    # the greedy agent as a segrl segmenter, scored on the bundled gold words as segrl's own are
    segmenter = segrl.FunctionSegmenter.from_agent(
        lambda o: agent.act(o, greedy=True), heldout, "pair-bandit"
    )
    metrics = evaluate_word_segmenter(segmenter.segment_words, load_gold(max_words=500))
    print(f"boundary F1 on 500 gold words: {metrics['boundary_f1']:.3f}")


if __name__ == "__main__":
    main()
