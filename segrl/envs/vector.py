"""Batched environments: many sentences in lock-step, rewards from one evaluator call per step.

One process and one evaluator for all episodes (a process-based vector env would copy a co-trained
LM and break co-training). The API is small and explicit, with no Gymnasium vector autoreset quirks:

- ``reset(seed=None) -> observation``: a dict of ``[N, ...]`` arrays (the single env's keys);
- ``step(actions) -> (observation, rewards [N], dones [N], info)``: where an episode ended, the
  observation row is already the next episode's first (as in stable-baselines3's ``VecEnv``), and
  ``info["final_observation"]`` holds the rows as they ended.

``info["batch"]`` is the ``SegmentationBatch`` of the episodes as they stood after the actions (what
the evaluator scored); ``info["action_rewards"]`` the per-decision rewards of ``SentenceSegment`` in
per-action mode. Sentences come in seeded shuffled epochs (``SentenceSource``), so each training
sentence is seen once per epoch; ``state_dict``/``load_state_dict`` resume that exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from segrl.envs.episodes import EpisodeSlots
from segrl.envs.setup import EnvSetup, SentenceSource
from segrl.envs.spaces import (
    char_observation,
    char_observation_space,
    sentence_action_space,
    sentence_observation,
    sentence_observation_space,
)


class VectorSegmentationEnv:
    """Base of the batched environments: ``num_envs`` slots fed from one ``SentenceSource``.

    Takes ``num_envs``, ``seed`` (of the sentence order), and either a prepared ``setup`` or the
    options of ``CharSegmentEnv`` (``corpus``, ``evaluator``, ``reward``, ...).
    """

    def __init__(self, num_envs: int, seed: int = 0, setup: EnvSetup | None = None, **options: Any):
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        self.setup = setup or EnvSetup.create(**options)
        self.num_envs = num_envs
        self.slots = EpisodeSlots(self.setup, num_envs)
        self.source = SentenceSource(self.setup.sentences, seed, self.setup.draw_probabilities)

    @property
    def evaluator(self):
        return self.setup.evaluator

    def reset(self, seed: int | None = None) -> dict[str, np.ndarray]:
        """Start ``num_envs`` new episodes (a new sentence order when ``seed`` is given)."""
        if seed is not None:
            self.source = SentenceSource(self.setup.sentences, seed, self.setup.draw_probabilities)
        self.load(self.source.take(self.num_envs))
        return self.observe()

    def load(self, sentences: Sequence[str]) -> dict[str, np.ndarray]:
        """Start episodes on the given sentences (one per slot)."""
        if len(sentences) != self.num_envs:
            raise ValueError(f"{len(sentences)} sentences for {self.num_envs} slots")
        self.slots.load(range(self.num_envs), sentences)
        return self.observe()

    def observe(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """The sentence order and the sentences being played (see ``load_state_dict``)."""
        return {"source": self.source.state_dict(), "sentences": list(self.slots.sentences)}

    def load_state_dict(self, state: dict[str, Any]) -> dict[str, np.ndarray]:
        """Restore a ``state_dict``: the same sentence order, the same episodes restarted."""
        self.source.load_state_dict(state["source"])
        return self.load(state["sentences"])

    def close(self) -> None:
        pass


class VectorSentenceSegmentEnv(VectorSegmentationEnv):
    """``num_envs`` ``SentenceSegment`` episodes per step: each step segments ``num_envs``
    sentences, scores them in one evaluator call, and loads the next ones.

    ``step(actions [N, P])`` returns rewards ``[N]`` (the score, or with per-action rewards their
    sum), dones (all True), and ``info`` with ``batch`` and, in per-action mode, ``action_rewards``
    ``[N, P]``.
    """

    def __init__(self, num_envs: int, seed: int = 0, setup: EnvSetup | None = None, **options):
        super().__init__(num_envs, seed, setup, **options)
        self.single_observation_space = sentence_observation_space(self.setup)
        self.single_action_space = sentence_action_space(self.setup)

    def observe(self) -> dict[str, np.ndarray]:
        return sentence_observation(self.slots)

    def step(
        self, actions: np.ndarray, policy_probs: np.ndarray | None = None
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, dict[str, Any]]:
        """``policy_probs`` (``[N, P, A]``, optional): the probabilities the actions were drawn
        with, for evaluators whose rewards read them (``SegmentationBatch.policy_probs``)."""
        actions = np.asarray(actions, dtype=np.int64)
        expected = (self.num_envs, self.slots.positions)
        if actions.shape != expected:
            raise ValueError(f"actions of shape {actions.shape}, expected {expected}")
        rewards, action_rewards, batch = self.slots.step_all(actions, policy_probs)
        info: dict[str, Any] = {"batch": batch, "final_observation": self.observe()}
        if action_rewards is not None:
            info["action_rewards"] = action_rewards
        observation = self.load(self.source.take(self.num_envs))
        return observation, rewards, np.ones(self.num_envs, dtype=bool), info


class VectorCharSegmentEnv(VectorSegmentationEnv):
    """``num_envs`` ``CharSegment`` episodes in lock-step: each step takes one decision in every
    episode and rewards them with one evaluator call; an episode that ends is replaced at once by the
    next sentence.

    ``step(actions [N])`` returns rewards ``[N]``, dones ``[N]``, and ``info`` with ``batch`` (the
    episodes after the actions), ``final_observation`` (``[N, ...]`` arrays; rows where ``dones``
    hold the last observation of the finished episode) and ``segments`` (per slot, the finished
    episode's segmentation, or None).
    """

    def __init__(self, num_envs: int, seed: int = 0, setup: EnvSetup | None = None, **options):
        super().__init__(num_envs, seed, setup, **options)
        self.setup.evaluator.check_stepwise(self.setup.config.reward)
        self.single_observation_space = char_observation_space(self.setup)
        self.single_action_space = gym.spaces.Discrete(self.setup.n_actions)

    def observe(self) -> dict[str, np.ndarray]:
        return char_observation(self.slots)

    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, dict[str, Any]]:
        actions = np.asarray(actions, dtype=np.int64).reshape(-1)
        if actions.shape != (self.num_envs,):
            raise ValueError(f"{actions.shape[0]} actions for {self.num_envs} environments")
        if actions.min() < 0 or actions.max() >= self.setup.n_actions:
            raise ValueError(f"actions must be in 0..{self.setup.n_actions - 1}")
        rewards, dones = self.slots.step_one(actions)
        batch = self.slots.batch()
        final = self.observe()
        segments: list[list[str] | None] = [None] * self.num_envs
        finished = np.flatnonzero(dones)
        if len(finished):
            for slot in finished:
                segments[slot] = batch.segments(slot)
            self.slots.load(finished, self.source.take(len(finished)))
        info = {"batch": batch, "final_observation": final, "segments": segments}
        return self.observe(), rewards, dones, info


class GymnasiumVectorEnv(gym.vector.VectorEnv):
    """A batched environment behind Gymnasium's ``VectorEnv`` API, for ``gymnasium.make_vec``:

        envs = gymnasium.make_vec("segrl/CharSegment-v0", num_envs=64, evaluator="morfessor")

    Episodes reset in the same step they end (``AutoresetMode.SAME_STEP``): the returned observation
    row is already the next episode's first, and ``infos["final_obs"]`` (with the mask
    ``infos["_final_obs"]``) holds the rows as they ended. ``infos["segments"]`` gives each finished
    episode's segmentation (None for the others; the mask ``infos["_segments"]`` is True where it is
    given). One process and one evaluator serve every episode.
    """

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(self, batched: VectorSegmentationEnv):
        self.batched = batched
        self.num_envs = batched.num_envs
        self.single_observation_space = batched.single_observation_space
        self.single_action_space = batched.single_action_space
        self.observation_space = gym.vector.utils.batch_space(
            self.single_observation_space, self.num_envs
        )
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)

    @property
    def vocab(self):
        """The ``CharVocab`` of the observations' character ids."""
        return self.batched.setup.corpus.vocab

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        if options:
            raise ValueError(f"reset takes no options here, got {sorted(options)}")
        return self.batched.reset(seed=seed), {}

    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        observation, rewards, dones, info = self.batched.step(actions)
        dones = np.asarray(dones, dtype=bool)
        infos: dict[str, Any] = {"final_obs": info["final_observation"], "_final_obs": dones}
        if "segments" in info:
            infos["segments"] = info["segments"]
        else:  # every sentence ends in its step
            infos["segments"] = [info["batch"].segments(i) for i in range(self.num_envs)]
        infos["_segments"] = np.array([s is not None for s in infos["segments"]], dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        return observation, np.asarray(rewards, dtype=np.float64), dones, truncated, infos

    def action_masks(self) -> np.ndarray:
        """[N, A] bool (``CharSegment``): the actions allowed at each episode's next position."""
        from segrl.envs.masks import position_rule_masks

        slots = self.batched.slots
        return position_rule_masks(
            slots.texts, slots.current_position(), self.batched.setup.n_actions
        )


def make_char_segment_vector(
    num_envs: int = 1, seed: int = 0, **options: Any
) -> GymnasiumVectorEnv:
    """``gymnasium.make_vec("segrl/CharSegment-v0", num_envs, ...)``: ``VectorCharSegmentEnv``."""
    options.pop("render_mode", None)
    return GymnasiumVectorEnv(VectorCharSegmentEnv(num_envs, seed, **options))


def make_sentence_segment_vector(
    num_envs: int = 1, seed: int = 0, **options: Any
) -> GymnasiumVectorEnv:
    """``gymnasium.make_vec("segrl/SentenceSegment-v0", num_envs, ...)``."""
    options.pop("render_mode", None)
    return GymnasiumVectorEnv(VectorSentenceSegmentEnv(num_envs, seed, **options))
