"""The project's segmenter policy inside stable-baselines3: a features extractor around its encoder,
and an actor-critic whose actor is the policy's decision head.

- ``SegmenterFeaturesExtractor`` reads ``CharSegment``'s ``Dict`` observation and returns the
  encoder's features at the position being decided: ``[B, F]``. It holds a whole
  ``SegmenterPolicy``; with word context it encodes only the word around the position, which gives
  the same features as encoding the sentence (``SegmenterPolicy.features``) at a fraction of the cost.
  The decisions taken so far are not read: a segmenter policy decides every position from the text
  alone, ``p(S | X) = prod_i p(s_i | X)``, so what it learns here is what ``AgentSegmenter`` runs.
- ``build_sb3_model`` builds ``PPO`` (or ``MaskablePPO`` with the full rule set) whose actor network
  is ``Linear(F, H) -> Tanh`` and action net ``Linear(H, A)``, the layers of ``DecisionHead``; they are
  tied to the segmenter policy's head (``tie_decision_head``), so the policy SB3 trains is the one
  saved and evaluated, with no export step. The critic has the same shape, on the same features.
- SB3's logger writes to the ``output_formats`` that ``build_sb3_model`` is given, and to nothing
  else (the ``segrl train --agent ppo`` job gives it ``MlflowOutputFormat``,
  ``segrl.experiments.sb3_train``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO
from stable_baselines3.common.logger import KVWriter, Logger
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from segrl.agents.config import TrainConfig
from segrl.agents.policies import PolicyConfig, SegmenterPolicy, bucketed_char_states
from segrl.agents.sb3.vec_env import SegmentVecEnv


def current_words(
    ids: torch.Tensor, lengths: torch.Tensor, position: torch.Tensor, separator_id: int | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The word around each row's ``position`` (the maximal run of characters other than
    ``separator_id`` that holds characters ``position`` and ``position + 1``; the whole text when
    ``separator_id`` is None).

    ``ids`` [B, L], ``lengths`` [B], ``position`` [B] -> ``(word ids [B, Lw] 0-padded, word lengths
    [B], offset [B])`` with ``offset`` the position inside the word.
    """
    batch, width = ids.shape
    steps = torch.arange(width, device=ids.device).unsqueeze(0)  # [1, L]
    outside = steps >= lengths.unsqueeze(1)  # [B, L] True past the text
    if separator_id is not None:
        outside = outside | (ids == separator_id)
    pos = position.unsqueeze(1)  # [B, 1]
    before = torch.where(outside & (steps <= pos), steps, torch.full_like(steps, -1))
    start = before.max(dim=1).values + 1  # [B] first character of the word
    after = torch.where(outside & (steps > pos), steps, torch.full_like(steps, width))
    end = after.min(dim=1).values  # [B] one past its last character
    word_lengths = end - start
    longest = max(int(word_lengths.max()), 2)
    offsets = torch.arange(longest, device=ids.device).unsqueeze(0)  # [1, Lw]
    index = (start.unsqueeze(1) + offsets).clamp(max=width - 1)  # [B, Lw]
    inside = offsets < word_lengths.unsqueeze(1)
    words = torch.where(inside, ids.gather(1, index), torch.zeros_like(index))
    return words, word_lengths, position - start


class SegmenterFeaturesExtractor(BaseFeaturesExtractor):
    """``CharSegment`` observation -> the segmenter policy's features at the current position [B, F].

    Arguments: the observation space, and what ``SegmenterPolicy`` takes (``vocab_size``,
    ``n_actions``, ``max_len``, ``policy_config``, ``separator_id``). The policy is its
    ``segmenter`` (the name its parameters are saved under in SB3's zip).
    """

    def __init__(
        self,
        observation_space: gym.spaces.Dict,
        vocab_size: int,
        n_actions: int,
        max_len: int,
        policy_config: PolicyConfig,
        separator_id: int | None,
    ):
        policy = SegmenterPolicy(vocab_size, n_actions, max_len, policy_config, separator_id)
        super().__init__(observation_space, features_dim=policy.feature_dim)
        self.segmenter = policy

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        ids = observations["chars"].long()  # [B, L] (SB3 hands Box observations over as floats)
        lengths = observations["length"][:, 0].long()  # [B]
        position = observations["position"][:, 0].long()  # [B]
        position = torch.minimum(position, (lengths - 2).clamp(min=0))  # past the end: the last
        words, word_lengths, offset = current_words(
            ids, lengths, position, self.segmenter.separator_id
        )
        encoder = self.segmenter.encoder
        states = bucketed_char_states(encoder, words, word_lengths)  # [B, Lw, D]
        features = encoder.position_features(states)  # [B, Lw - 1, F]
        rows = torch.arange(len(ids), device=ids.device)
        return features[rows, offset]  # [B, F]


def tie_decision_head(policy: nn.Module) -> SegmenterPolicy:
    """Make the segmenter policy's ``DecisionHead`` the SB3 actor's layers (shared parameters) and
    return the segmenter policy."""
    segmenter: SegmenterPolicy = policy.features_extractor.segmenter
    hidden = policy.mlp_extractor.policy_net
    segmenter.head.net = nn.Sequential(hidden[0], hidden[1], policy.action_net)
    return segmenter


def build_sb3_model(
    config: TrainConfig,
    venv: SegmentVecEnv,
    separator: int | None,
    device: torch.device,
    output_formats: Sequence[KVWriter] = (),
) -> PPO:
    """SB3 ``PPO`` on ``venv`` (``MaskablePPO`` with the full rule set) as ``config.ppo`` says, with
    the segmenter policy as its features extractor and actor; SB3's logs go to ``output_formats``
    (none: nowhere, no folder written)."""
    setup = venv.env.setup
    ppo = config.ppo
    hidden = config.policy.hidden_dim
    policy_kwargs: dict[str, Any] = {
        "features_extractor_class": SegmenterFeaturesExtractor,
        "features_extractor_kwargs": {
            "vocab_size": setup.vocab_size,
            "n_actions": setup.n_actions,
            "max_len": setup.max_len,
            "policy_config": config.policy,
            "separator_id": separator,
        },
        "net_arch": {"pi": [hidden], "vf": [hidden]},
        "activation_fn": nn.Tanh,
        "ortho_init": False,  # keep the segmenter's own initialisation, as REINFORCE starts from
        "share_features_extractor": True,
        "optimizer_kwargs": {"eps": 1e-5},
    }
    rollout = venv.num_envs * ppo.n_steps
    algorithm = MaskablePPO if setup.config.rules == "full" else PPO
    model = algorithm(
        "MultiInputPolicy",
        venv,
        learning_rate=ppo.lr,
        n_steps=ppo.n_steps,
        batch_size=max(rollout // ppo.minibatches, 1),
        n_epochs=ppo.epochs,
        gamma=ppo.discount(config.env.reward),
        gae_lambda=ppo.gae_lambda,
        clip_range=ppo.clip_coef,
        normalize_advantage=ppo.normalize(config.env.reward),
        ent_coef=ppo.entropy(config.env.reward),
        vf_coef=ppo.vf_coef,
        max_grad_norm=ppo.max_grad_norm,
        policy_kwargs=policy_kwargs,
        seed=config.seed,
        device=device,
        verbose=0,
    )
    tie_decision_head(model.policy)
    model.set_logger(Logger(folder=None, output_formats=list(output_formats)))
    return model
