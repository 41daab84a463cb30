"""REINFORCE for segmentation (spec §1.4-1.5), batched over sentences.

Each update: ``batch_size`` sentences from the batched ``SentenceSegment`` environment; the policy
samples every decision at once (``p(S|X) = prod_i p(s_i|X)``); the evaluator rewards them in one call;
then one gradient step on

    loss = -sum_{b,i free} w_bi log p(s_bi | X_b) / n  -  entropy_coef * mean entropy per decision

with ``n`` the free decisions of the batch and the weights ``w``:

- **sequence** rewards: ``w_bi = A_b = R_b - baseline(X_b)`` for every position of sentence ``b``
  (eq. 5.3), standardised over the batch (``normalize_advantages``); the baseline is a 2-layer MLP
  (100 hidden units) on the sentence's mean position features (detached from the policy), trained to
  regress ``R`` with its own optimiser;
- **per-action** rewards: ``w_bi = r_bi`` (+1/-1 for Morfessor and gold), no baseline, as in the study
  (optionally ``r_bi - baseline(X_b)``). For mirrored rewards (the other action's is ``-r_bi``) the
  policy term can be the exact expectation over both actions (``per_action_gradient = "expected"``),
  or the cross-entropy to each decision's entropy-regularised optimum (``"forward-kl"``, below).

With a mirrored per-action reward ``r`` and the entropy bonus ``c``, each decision's objective
``E_pi[r] + c H(pi)`` is ``-c KL(pi || pi*) + const`` with ``pi*(split) = sigmoid(2 r(split) / c)``
(for the LM's ``posterior`` reward and ``c = 2``, ``pi*`` is the LM's posterior): REINFORCE and
``expected`` descend that reverse KL, whose gradient on a decision's logit carries the factor
``pi (1 - pi)`` and vanishes where the policy is confident, right or wrong. ``forward-kl`` fits the
policy to the same optimum by ``KL(pi* || pi)`` instead (the M-step of MPO and AWR): its gradient on
the logit is ``pi - pi*``, which does not vanish; the entropy bonus is then in ``pi*`` and not added.

The entropy bonus's weight depends on the reward's scale (``ReinforceConfig.entropy_coef``): large
for +-1 per decision, so that no decision saturates before the policy has learnt to tell splits
from non-splits. Gradients are clipped to ``max_grad_norm``. Sampling is for training; evaluation is greedy (argmax).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from segrl.agents.config import PerActionGradient, ReinforceConfig, TrainConfig
from segrl.agents.policies import SegmenterPolicy, masked_mean
from segrl.agents.segmenter import pad_positions, teacher_input, trim
from segrl.envs.vector import VectorSentenceSegmentEnv
from segrl.errors import ConfigError
from segrl.evaluators import SegmentationBatch


class ValueBaseline(nn.Module):
    """The learned baseline: a 2-layer MLP from a sentence's mean position features to its reward."""

    def __init__(self, feature_dim: int, hidden: int = 100):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(feature_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, features: torch.Tensor, free_mask: torch.Tensor) -> torch.Tensor:
        """``features`` [B, P, F], ``free_mask`` [B, P] True at decisions -> [B] predicted reward."""
        return self.net(masked_mean(features, free_mask)).squeeze(-1)


def reinforce_loss(
    logits: torch.Tensor,
    actions: torch.Tensor,
    free_mask: torch.Tensor,
    weights: torch.Tensor,
    entropy_coef: float,
    gradient: PerActionGradient = "sampled",
) -> tuple[torch.Tensor, dict[str, float]]:
    """The REINFORCE loss with one weight per decision (see the module docstring).

    ``logits`` [B, P, A], ``actions`` [B, P], ``free_mask`` [B, P] bool (True at the agent's
    decisions), ``weights`` [B, P] (advantage or reward of each decision; no gradient flows into it).
    ``gradient``: ``sampled``, REINFORCE's ``-r log pi(taken)``; for binary decisions with mirrored
    rewards (the other action's is ``-weights``) ``expected``, the exact expected reward ``sum_a
    pi(a) r(a)`` instead of its one-sample estimate, or ``forward-kl``, the cross-entropy from
    ``pi*(taken) = sigmoid(2 r / entropy_coef)`` to the policy (no entropy bonus added).
    """
    dist = Categorical(logits=logits)
    log_prob = dist.log_prob(actions)  # [B, P]
    entropy = dist.entropy()  # [B, P]
    mask = free_mask.to(log_prob.dtype)
    n = mask.sum().clamp(min=1.0)
    weights = weights.detach()
    if gradient == "forward-kl":
        if entropy_coef <= 0:
            raise ConfigError("the forward-kl gradient needs an entropy bonus above 0")
        target = torch.sigmoid(2.0 * weights / entropy_coef)  # [B, P] pi*(taken)
        other = (1 - actions).unsqueeze(-1)  # binary decisions: the action not taken
        log_other = dist.logits.gather(-1, other).squeeze(-1)  # [B, P] log pi(other)
        cross_entropy = -(target * log_prob + (1 - target) * log_other)
        policy_term = (cross_entropy * mask).sum() / n
        entropy_coef = 0.0  # the entropy bonus is inside the target
    elif gradient == "expected":  # sum_a pi(a) r(a), r(other) = -r(taken): (2 pi(taken) - 1) r
        policy_term = -(weights * (2 * log_prob.exp() - 1) * mask).sum() / n
    else:
        policy_term = -(weights * log_prob * mask).sum() / n
    mean_entropy = (entropy * mask).sum() / n
    loss = policy_term - entropy_coef * mean_entropy
    return loss, {"policy_loss": policy_term.item(), "entropy": mean_entropy.item()}


class Reinforce:
    """The learner: a segmenter policy, the learned baseline where used, and their optimisers.

    ``gradient``: the per-action policy term (``TrainConfig.per_action_gradient``, which resolves
    the config's None); None: ``config.per_action_gradient``, else ``sampled``."""

    def __init__(
        self,
        policy: SegmenterPolicy,
        config: ReinforceConfig,
        reward_mode: str,
        device: torch.device | str = "cpu",
        gradient: PerActionGradient | None = None,
    ):
        self.policy = policy
        self.config = config
        self.reward_mode = reward_mode
        self.device = torch.device(device)
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=config.lr)
        self.baseline: ValueBaseline | None = None
        self.baseline_optimizer: torch.optim.Optimizer | None = None
        chosen = gradient or config.per_action_gradient or "sampled"
        self.gradient: PerActionGradient = chosen if reward_mode == "per-action" else "sampled"
        if reward_mode == "sequence" or config.per_action_baseline:
            self.baseline = ValueBaseline(policy.feature_dim, config.baseline_hidden).to(device)
            self.baseline_optimizer = torch.optim.Adam(
                self.baseline.parameters(), lr=config.baseline_lr
            )

    @property
    def sentences_per_step(self) -> int:
        return self.config.batch_size

    @property
    def steps(self) -> int:
        return self.config.steps

    def step(
        self, env: VectorSentenceSegmentEnv, observation: dict[str, np.ndarray]
    ) -> tuple[dict[str, np.ndarray], dict[str, float], SegmentationBatch]:
        """Sample decisions for the sentences of ``observation``, get their rewards from ``env``,
        update. Returns the next observation, stats, and the rewarded batch."""
        self.policy.train()
        ids, lengths, width = trim(observation["chars"], observation["length"][:, 0])
        ids, lengths = ids.to(self.device), lengths.to(self.device)
        free = torch.from_numpy(observation["free"][:, : width - 1].astype(bool)).to(self.device)
        features = self.policy.features(ids, lengths)  # [B, W-1, F]
        logits = self.policy.logits(features, teacher_input(observation, self.device))
        with torch.no_grad():
            actions = Categorical(logits=logits).sample()  # [B, W-1]
            probs = torch.softmax(logits.float(), dim=-1)  # [B, W-1, A]
        padded = pad_positions(actions.cpu(), env.slots.positions).numpy()
        padded_probs = pad_positions(probs.cpu(), env.slots.positions).numpy()
        next_observation, rewards, _dones, info = env.step(padded, padded_probs)

        stats: dict[str, float] = {"reward": float(rewards.mean())}
        values = None
        if self.reward_mode == "per-action":
            per_decision = torch.from_numpy(info["action_rewards"][:, : width - 1]).float()
            per_decision = per_decision.to(self.device)
            target = masked_mean(per_decision, free)  # [B] mean reward per decision
            weights = per_decision
            if self.baseline is not None:
                values = self.baseline(features.detach(), free)
                weights = per_decision - values.detach().unsqueeze(1)
            stats["reward_per_decision"] = float(target.mean())
        else:
            target = torch.from_numpy(rewards).float().to(self.device)  # [B]
            values = self.baseline(features.detach(), free)
            advantage = target - values.detach()
            if self.config.normalize_advantages and len(advantage) > 1:
                advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
            weights = advantage.unsqueeze(1).expand_as(logits[..., 0])

        entropy_coef = self.config.entropy(self.reward_mode)
        loss, loss_stats = reinforce_loss(
            logits, actions, free, weights, entropy_coef, self.gradient
        )
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(self.policy.parameters(), self.config.max_grad_norm)
        self.optimizer.step()
        stats.update(loss_stats)
        stats["grad_norm"] = float(grad_norm)
        stats["split_rate"] = float((actions != 0)[free].float().mean()) if free.any() else 0.0

        if values is not None:
            baseline_loss = nn.functional.mse_loss(values, target)
            self.baseline_optimizer.zero_grad(set_to_none=True)
            baseline_loss.backward()
            self.baseline_optimizer.step()
            stats["baseline_loss"] = baseline_loss.item()
        return next_observation, stats, info["batch"]

    def state_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "baseline": self.baseline.state_dict() if self.baseline else None,
            "baseline_optimizer": (
                self.baseline_optimizer.state_dict() if self.baseline_optimizer else None
            ),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.baseline is not None:
            self.baseline.load_state_dict(state["baseline"])
            self.baseline_optimizer.load_state_dict(state["baseline_optimizer"])


def make_reinforce(config: TrainConfig, policy: SegmenterPolicy, device: torch.device) -> Reinforce:
    """The REINFORCE learner of ``policy`` as the resolved ``config`` says."""
    return Reinforce(
        policy, config.reinforce, config.env.reward, device, config.per_action_gradient()
    )
