"""Batched PPO on ``segrl/SentenceSegment-v0``: all decisions of a sentence in one step (after CleanRL's
``ppo.py``; every hyperparameter in ``PPOConfig``).

One iteration (``BatchedPPO.step``):

1. **Rollout.** ``num_envs`` sentences from ``VectorSentenceSegmentEnv``; the segmenter policy
   samples every decision ``a_bi ~ pi_old(. | X_b)`` (in eval mode, with the full rule set's masks
   applied to the logits), a value head predicts ``V_bi``; the evaluator rewards the batch in one call.
2. **Advantages.** Per-action rewards: each decision has its own reward ``r_bi`` (a decision does not
   change another's), so its return is ``r_bi`` and ``A_bi = r_bi - V_bi``. Sequence rewards: one
   score ``R_b`` per sentence, its value ``V_b`` the mean of ``V_bi`` over its decisions, and
   ``A_bi = R_b - V_b`` for all its decisions. Advantages are standardised over the batch's
   decisions (per-action) or sentences (sequence) where ``ppo.normalize_advantages`` says (by
   default only with sequence rewards).
3. **Update.** ``epochs`` passes over the sentences in ``minibatches`` shuffled minibatches, each one
   Adam step (in train mode) on

       loss = -mean_i min(rho_i A_i, clip(rho_i, 1 - eps, 1 + eps) A_i)
              - ent_coef * mean_i H_i + vf_coef * value loss,   rho_i = pi(a_i) / pi_old(a_i)

   with the means over the minibatch's free decisions (the value loss over its decisions, or with
   sequence rewards over its sentences), gradients clipped to ``max_grad_norm``.

The entropy bonus's weight depends on the reward mode as REINFORCE's does (``PPOConfig.ent_coef``).
Sampling is for training; evaluation is greedy (argmax).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from segrl.agents.config import PPOConfig, TrainConfig
from segrl.agents.policies import SegmenterPolicy, masked_mean
from segrl.agents.segmenter import pad_positions, trim
from segrl.envs.masks import batch_rule_masks
from segrl.envs.vector import VectorSentenceSegmentEnv
from segrl.evaluators import SegmentationBatch

MASKED_LOGIT = -1e8
"""The logit of an action the rule masks forbid (probability 0, entropy stays finite)."""


def ppo_loss(
    logits: torch.Tensor,
    actions: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    free_mask: torch.Tensor,
    clip_coef: float,
    ent_coef: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO's clipped policy loss per decision, minus the entropy bonus (no value term).

    ``logits`` [B, P, A], ``actions``, ``old_log_prob``, ``advantages`` [B, P], ``free_mask`` [B, P]
    bool (True at the decisions the loss averages over).
    """
    dist = Categorical(logits=logits)
    log_ratio = dist.log_prob(actions) - old_log_prob  # [B, P]
    ratio = log_ratio.exp()
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef) * advantages
    mask = free_mask.to(logits.dtype)
    n = mask.sum().clamp(min=1.0)
    policy_loss = -(torch.minimum(unclipped, clipped) * mask).sum() / n
    entropy = (dist.entropy() * mask).sum() / n
    with torch.no_grad():
        approx_kl = (((ratio - 1.0) - log_ratio) * mask).sum() / n
        clip_fraction = (((ratio - 1.0).abs() > clip_coef).to(mask.dtype) * mask).sum() / n
    stats = {
        "policy_loss": policy_loss.item(),
        "entropy": entropy.item(),
        "approx_kl": approx_kl.item(),
        "clip_fraction": clip_fraction.item(),
    }
    return policy_loss - ent_coef * entropy, stats


class BatchedPPO:
    """The learner: a segmenter policy, a value head on its features, one Adam optimiser."""

    def __init__(
        self,
        policy: SegmenterPolicy,
        config: PPOConfig,
        reward_mode: str,
        device: torch.device | str = "cpu",
    ):
        self.policy = policy
        self.config = config
        self.reward_mode = reward_mode
        self.device = torch.device(device)
        hidden = policy.config.hidden_dim
        self.value = nn.Sequential(
            nn.Linear(policy.feature_dim, hidden), nn.Tanh(), nn.Linear(hidden, 1)
        ).to(self.device)
        parameters = list(policy.parameters()) + list(self.value.parameters())
        self.optimizer = torch.optim.Adam(parameters, lr=config.lr, eps=1e-5)

    def forward(
        self, ids: torch.Tensor, lengths: torch.Tensor, allowed: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, W] ids, [B] lengths, ``allowed`` [B, W-1, A] bool or None -> (logits [B, W-1, A]
        with forbidden actions masked out, values [B, W-1])."""
        features = self.policy.features(ids, lengths)  # [B, W-1, F]
        logits = self.policy.head(features)
        if allowed is not None:
            logits = logits.masked_fill(~allowed, MASKED_LOGIT)
        return logits, self.value(features).squeeze(-1)

    @property
    def sentences_per_step(self) -> int:
        return self.config.num_envs

    @property
    def steps(self) -> int:
        return self.config.steps

    def step(
        self, env: VectorSentenceSegmentEnv, observation: dict[str, np.ndarray]
    ) -> tuple[dict[str, np.ndarray], dict[str, float], SegmentationBatch]:
        """One iteration (rollout, advantages, update; see the module docstring). Returns the next
        observation, stats, and the rewarded batch."""
        cfg = self.config
        ids, lengths, width = trim(observation["chars"], observation["length"][:, 0])
        ids, lengths = ids.to(self.device), lengths.to(self.device)
        free = torch.from_numpy(observation["free"][:, : width - 1].astype(bool)).to(self.device)
        allowed = None
        if env.setup.n_actions > 2:
            masks = batch_rule_masks(env.slots.texts, width - 1, env.setup.n_actions)
            allowed = torch.from_numpy(masks).to(self.device)  # [B, W-1, A]

        # 1. rollout
        self.policy.eval()
        with torch.no_grad():
            logits, values = self.forward(ids, lengths, allowed)
            dist = Categorical(logits=logits)
            actions = dist.sample()  # [B, W-1]
            old_log_prob = dist.log_prob(actions)
        padded = pad_positions(actions.cpu(), env.slots.positions).numpy()
        padded_probs = pad_positions(dist.probs.cpu(), env.slots.positions).numpy()
        next_observation, rewards, _dones, info = env.step(padded, padded_probs)

        # 2. advantages: per decision [B, W-1], or per sentence [B] spread over its decisions
        if self.reward_mode == "per-action":
            returns = torch.from_numpy(info["action_rewards"][:, : width - 1]).float()
            returns = returns.to(self.device)
            advantages = returns - values
            if cfg.normalize(self.reward_mode) and free.sum() > 1:
                advantages = standardise(advantages, free)
        else:
            returns = torch.from_numpy(rewards).float().to(self.device)  # [B]
            sentence_advantage = returns - masked_mean(values, free)
            if cfg.normalize(self.reward_mode) and len(returns) > 1:
                sentence_advantage = standardise(sentence_advantage)
            advantages = sentence_advantage.unsqueeze(1).expand_as(values)

        # 3. update
        self.policy.train()
        n = len(ids)
        runs: dict[str, list[float]] = {}
        for _epoch in range(cfg.epochs):
            for rows in torch.randperm(n).tensor_split(min(cfg.minibatches, n)):
                stats = self.update(
                    rows, ids, lengths, free, allowed, actions, old_log_prob, advantages, returns
                )
                for key, value in stats.items():
                    runs.setdefault(key, []).append(value)

        stats = {key: float(np.mean(v)) for key, v in runs.items()}
        stats["reward"] = float(rewards.mean())
        if self.reward_mode == "per-action":
            stats["reward_per_decision"] = float(masked_mean(returns, free).mean())
        stats["split_rate"] = float((actions != 0)[free].float().mean()) if free.any() else 0.0
        return next_observation, stats, info["batch"]

    def update(
        self,
        rows: torch.Tensor,
        ids: torch.Tensor,
        lengths: torch.Tensor,
        free: torch.Tensor,
        allowed: torch.Tensor | None,
        actions: torch.Tensor,
        old_log_prob: torch.Tensor,
        advantages: torch.Tensor,
        returns: torch.Tensor,
    ) -> dict[str, float]:
        """One Adam step on the sentences ``rows`` of the rollout (cut to their longest text)."""
        cfg = self.config
        width = max(int(lengths[rows].max()), 2)
        cut = slice(0, width - 1)
        mb_free = free[rows, cut]
        logits, values = self.forward(
            ids[rows, :width], lengths[rows], None if allowed is None else allowed[rows, cut]
        )
        loss, stats = ppo_loss(
            logits,
            actions[rows, cut],
            old_log_prob[rows, cut],
            advantages[rows, cut],
            mb_free,
            cfg.clip_coef,
            cfg.entropy(self.reward_mode),
        )
        if self.reward_mode == "per-action":
            errors = (values - returns[rows, cut]).pow(2) * mb_free
            value_loss = errors.sum() / mb_free.sum().clamp(min=1)
        else:
            value_loss = (masked_mean(values, mb_free) - returns[rows]).pow(2).mean()
        loss = loss + cfg.vf_coef * value_loss
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        parameters = [p for group in self.optimizer.param_groups for p in group["params"]]
        grad_norm = nn.utils.clip_grad_norm_(parameters, cfg.max_grad_norm)
        self.optimizer.step()
        stats["value_loss"] = value_loss.item()
        stats["grad_norm"] = float(grad_norm)
        return stats

    def state_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy.state_dict(),
            "value": self.value.state_dict(),
            "optimizer": self.optimizer.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        self.value.load_state_dict(state["value"])
        self.optimizer.load_state_dict(state["optimizer"])


def standardise(values: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """``values`` minus their mean, over their standard deviation (over ``mask``'s True entries)."""
    chosen = values if mask is None else values[mask]
    return (values - chosen.mean()) / (chosen.std() + 1e-8)


def make_batched_ppo(
    config: TrainConfig, policy: SegmenterPolicy, device: torch.device
) -> BatchedPPO:
    """The batched PPO learner of ``policy`` as the resolved ``config`` says."""
    return BatchedPPO(policy, config.ppo, config.env.reward, device)
