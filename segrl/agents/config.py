"""``segrl train``'s config: the agent, its segmenter policy, the environment, the evaluator, the data,
and how the run is logged and checkpointed. Every field has a default that works; the options left
unset (None) are decided where the job starts, once
(``segrl.experiments.agent_train.resolve_train_config``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from segrl.agents.policies import PolicyConfig
from segrl.agents.registry import AgentName, AgentSpec, agent_spec, agent_tables
from segrl.config import (
    NO_LIMIT,
    CadenceOptions,
    DataConfig,
    GoldConfig,
    RunOptions,
    TrackingConfig,
)
from segrl.envs.setup import EnvConfig
from segrl.errors import ConfigError
from segrl.evaluators.registry import EvaluatorConfig

PerActionGradient = Literal["sampled", "expected", "forward-kl"]

DEFAULT_ENTROPY = {"per-action": 2.0, "sequence": 0.05}
"""Entropy bonus per reward mode when ``ReinforceConfig.entropy_coef`` is None (see there): what
``segrl train`` resolves it to where it starts
(``segrl.experiments.agent_train.resolve_train_config``)."""


@dataclass
class ReinforceConfig:
    """REINFORCE (spec §1.4): all decisions of a sentence in one step, ``batch_size`` sentences per
    update. Sequence rewards use the learned baseline; per-action rewards are used as they are."""

    steps: int = 2000
    """Updates (each on ``batch_size`` sentences)."""
    batch_size: int = 64
    """Sentences per update."""
    lr: float = 3e-3
    """Adam learning rate of the policy."""
    baseline_lr: float = 1e-3
    """Adam learning rate of the baseline MLP (sequence rewards only)."""
    baseline_hidden: int = 100
    """Hidden units of the 2-layer baseline MLP (the study's 100)."""
    entropy_coef: float | None = None
    """Weight of the entropy bonus (mean entropy per decision). None: ``DEFAULT_ENTROPY`` of the
    reward mode. The bonus must be on the scale of the rewards. With +-1 per decision, the expected
    gradient of a decision's logit ``z`` (of the right action) is ``sigmoid'(z) (2 - coef * z)``:
    at 2.0 a logit settles at ``|z| = 1`` and a wrong one keeps a gradient close to a supervised
    model's, where a small bonus lets every decision saturate towards the majority action (never
    split), after which the minority's gradient vanishes. Evaluation is greedy, so the wide
    training distribution costs nothing there. Sequence rewards reach each decision standardised
    and shared with ~60 others: 0.05."""
    max_grad_norm: float = 1.0
    """Gradient clipping of the policy (global L2 norm)."""
    normalize_advantages: bool = True
    """Sequence rewards: standardise ``reward - baseline`` over the batch."""
    per_action_baseline: bool = False
    """Per-action rewards: subtract the learned baseline too (the study uses none; +-1 is centred)."""
    per_action_gradient: PerActionGradient | None = None
    """Per-action rewards: ``sampled`` (REINFORCE's ``r_i grad log pi(s_i)`` for the decision drawn)
    or, for an evaluator whose rewards are mirrored (the other action's reward is ``-r_i``),
    ``expected`` (the exact expectation over both actions, ``grad sum_a pi(a) r_i(a)``) or
    ``forward-kl`` (the cross-entropy from each decision's entropy-regularised optimum
    ``pi*(split) = sigmoid(2 r_i(split) / entropy_coef)`` to the policy). ``sampled`` and
    ``expected`` have the same expected gradient; ``expected`` has no sampling noise, and a
    decision the policy rarely samples (a split in a long, rare word) still gets its reward every
    step. ``forward-kl`` has the same optimum, but its gradient on a logit, ``pi - pi*``, does not
    vanish where the policy is confident (``segrl.agents.reinforce``). None (resolved where the
    job starts): ``TrainConfig.per_action_gradient``, ``forward-kl`` for the LM evaluator's ``posterior``
    reward (higher boundary F1 than ``sampled`` in English, Hungarian, Spanish and on the bundled
    corpus, the same in Czech; three seeds, docs/results.md), ``sampled`` otherwise."""

    def entropy(self, reward_mode: str) -> float:
        """The entropy bonus's weight for ``reward_mode``."""
        if self.entropy_coef is not None:
            return self.entropy_coef
        return DEFAULT_ENTROPY[reward_mode]

    def check(self, prefix: str) -> None:
        for name in ("steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{prefix}{name} must be at least 1, got {getattr(self, name)}")
        if self.lr <= 0 or self.baseline_lr <= 0:
            raise ConfigError(f"{prefix}lr and {prefix}baseline_lr must be positive")
        if (self.entropy_coef is not None and self.entropy_coef < 0) or self.max_grad_norm <= 0:
            raise ConfigError(f"{prefix}entropy_coef must be >= 0 and max_grad_norm > 0")
        if self.per_action_baseline and self.per_action_gradient not in (None, "sampled"):
            raise ConfigError(
                f"{prefix}per_action_baseline goes with per_action_gradient = 'sampled' only (the "
                "expectation over both actions and the forward KL need no baseline)"
            )
        if self.per_action_gradient == "forward-kl" and self.entropy_coef == 0:
            raise ConfigError(
                f"{prefix}per_action_gradient = 'forward-kl' needs an entropy bonus above 0 (its "
                f"target is sigmoid(2 r / {prefix}entropy_coef))"
            )


@dataclass
class PPOConfig:
    """PPO, both ways (``segrl.agents.sb3`` with stable-baselines3 on ``CharSegment``, one decision
    per step; ``segrl.agents.ppo_batched`` on ``SentenceSegment``, a sentence's decisions in one
    step). One training step is one iteration: a rollout, then ``epochs`` passes of
    ``minibatches`` minibatches over it."""

    steps: int = 300
    """Iterations (rollout + update)."""
    num_envs: int = 64
    """Episodes played side by side: ``CharSegment`` episodes in lock-step (SB3), or sentences per
    rollout (batched)."""
    n_steps: int = 32
    """SB3 only: steps of every episode slot per rollout (a rollout holds ``num_envs * n_steps``
    decisions)."""
    epochs: int = 4
    """Passes over each rollout."""
    minibatches: int = 4
    """Minibatches per epoch (of decisions for SB3, of sentences for the batched PPO)."""
    lr: float = 1e-3
    """Adam learning rate."""
    clip_coef: float = 0.2
    """The clip range of the probability ratio."""
    ent_coef: float | None = None
    """Weight of the entropy bonus (mean entropy per decision). None: ``DEFAULT_ENTROPY`` of the
    reward mode, as for REINFORCE and for the same reason (see ``ReinforceConfig.entropy_coef``):
    per-action advantages stay on the rewards' +-1 scale (``normalize_advantages``), and a small
    bonus lets every decision saturate towards never splitting, after which the splits it misses
    are never sampled again."""
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    gamma: float | None = None
    """SB3 only: discount. None (resolved where the job starts): 0 with per-action rewards (each reward belongs to the decision that
    earned it, and decisions do not see each other), 1 with sequence rewards (one score at the end)."""
    gae_lambda: float = 0.95
    normalize_advantages: bool | None = None
    """Standardise advantages over each (mini)batch. None (resolved where the job starts): only
    with sequence rewards (per-action
    rewards are +-1 already; standardising them would scale the policy term against the entropy
    bonus as the error rate falls)."""

    def entropy(self, reward_mode: str) -> float:
        """The entropy bonus's weight for ``reward_mode``."""
        return DEFAULT_ENTROPY[reward_mode] if self.ent_coef is None else self.ent_coef

    def normalize(self, reward_mode: str) -> bool:
        """Whether advantages are standardised for ``reward_mode``."""
        if self.normalize_advantages is None:
            return reward_mode == "sequence"
        return self.normalize_advantages

    def discount(self, reward_mode: str) -> float:
        """The discount for ``reward_mode`` (see ``gamma``)."""
        if self.gamma is not None:
            return self.gamma
        return 0.0 if reward_mode == "per-action" else 1.0

    def check(self, prefix: str) -> None:
        if min(self.steps, self.num_envs, self.n_steps, self.epochs, self.minibatches) < 1:
            raise ConfigError(
                f"{prefix}steps, num_envs, n_steps, epochs and minibatches must be at least 1"
            )
        if self.lr <= 0 or self.clip_coef <= 0 or self.max_grad_norm <= 0:
            raise ConfigError(
                f"{prefix}lr, {prefix}clip_coef and {prefix}max_grad_norm must be positive"
            )
        if (self.ent_coef is not None and self.ent_coef < 0) or self.vf_coef < 0:
            raise ConfigError(f"{prefix}ent_coef and {prefix}vf_coef must be >= 0")
        if (self.gamma is not None and not 0.0 <= self.gamma <= 1.0) or not (
            0.0 <= self.gae_lambda <= 1.0
        ):
            raise ConfigError(f"{prefix}gamma and {prefix}gae_lambda must be in [0, 1]")


@dataclass
class TrainConfig(RunOptions, CadenceOptions):
    """``segrl train``: train an agent to segment, rewarded by an evaluator; log it to MLflow. Its
    run options (``out``, ``seed``, ``device``, ``threads``) and cadences (``log_every``,
    ``eval_every``, ``checkpoint_every``) are every job's (``RunOptions``, ``CadenceOptions``); its
    budget is the agent's table's ``steps`` (``TrainConfig.steps``)."""

    agent: AgentName = "reinforce"
    """The training algorithm (``reinforce``, ``ppo``, ``ppo-batched``; ``segrl.agents.registry``)."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """The policy's architecture (``[segmenter]`` in configs saved before it was named so)."""
    env: EnvConfig = field(default_factory=EnvConfig)
    evaluator: EvaluatorConfig = field(default_factory=EvaluatorConfig)
    reinforce: ReinforceConfig = field(default_factory=ReinforceConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    data: DataConfig = field(default_factory=DataConfig)
    gold: GoldConfig = field(default_factory=GoldConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    gold_heldout_fraction: float = 0.1
    """Gold evaluator: the fraction of gold words kept out of the rewards and scored at the end."""
    eval_gold_words: int = 2000
    """Gold words in the periodic evaluation (the final one uses the whole gold set)."""
    max_minutes: float | None = None
    """Stop training after this many minutes (checkpointed and evaluated as at the last step); None
    (resolved: ``NO_LIMIT``, -1): no time limit."""

    RESUMABLE: ClassVar[frozenset[str]] = (
        RunOptions.RESUMABLE
        | CadenceOptions.RESUMABLE
        | {
            "evaluator.cache_dir",
            *(f"{table}.steps" for table in agent_tables()),
            "eval_gold_words",
            "max_minutes",
        }
    )
    """Options that may differ when a run is resumed (they do not change what was trained so far):
    every job's (``RunOptions.RESUMABLE``, ``CadenceOptions.RESUMABLE``), every agent's budget, the
    time limit, the periodic evaluation's size, Morfessor's cache."""

    OLD_NAMES: ClassVar[dict[str, str]] = {"segmenter": "policy"}
    """Options under their old names, read as the new ones (``build_config``): config files and run
    folders saved before the policy's table was named ``policy`` still load."""

    def check(self, prefix: str) -> None:
        """Options of different tables that must go together, and ranges
        (``segrl.config.validate_config`` checks the choices and the tables first)."""
        self.evaluator.check_reward_mode(self.env.reward)
        if self.evaluator.spec.lm and self.env.hide_spaces:
            self._check_hidden_spaces_lm()
        if self.env.teacher_features and not (
            self.agent_spec.reads_teacher and self.evaluator.teaches()
        ):
            raise ConfigError(
                "env.teacher_features: the reinforce agent's policy reads the lm evaluator's "
                f"log-odds; here agent {self.agent!r}, evaluator {self.evaluator.name!r}"
            )
        self._check_per_action_gradient()
        self.check_cadences(prefix)
        if not 0.0 < self.gold_heldout_fraction < 1.0:
            raise ConfigError(f"{prefix}gold_heldout_fraction must be between 0 and 1")
        if self.max_minutes not in (None, NO_LIMIT) and self.max_minutes <= 0:
            raise ConfigError(f"{prefix}max_minutes must be positive")
        self.check_run_options()

    def _check_hidden_spaces_lm(self) -> None:
        """With hidden spaces the LM evaluator may learn from nothing that carries them: not the
        corpus's words (``texts = "corpus-words"``); a lexicon is drawn from the unspaced
        utterances of a segmented corpus and refused elsewhere (``resolve_train_config``, which
        knows the corpus)."""
        lm = self.evaluator.lm
        if lm.texts == "corpus-words":
            raise ConfigError(
                "evaluator.lm.texts = 'corpus-words' with hidden spaces would teach the LM the "
                "corpus's words, whose edges are the word boundaries to discover; use 'word-types' "
                "or 'sentences' (with hidden spaces both read the sampled sentences whole)"
            )

    def per_action_gradient(self) -> PerActionGradient:
        """REINFORCE's per-action gradient: ``reinforce.per_action_gradient``, or where it is None,
        ``forward-kl`` for the LM evaluator's ``posterior`` reward with binary rules (unless a
        per-action baseline or no entropy bonus is asked for, which go with ``sampled`` only) and
        ``sampled`` for every other reward."""
        chosen = self.reinforce.per_action_gradient
        if chosen is not None:
            return chosen
        posterior = (
            self.env.reward == "per-action"
            and self.evaluator.fits_by_forward_kl()
            and self.env.rules == "binary"
        )
        plain = not self.reinforce.per_action_baseline and self.reinforce.entropy_coef != 0
        return "forward-kl" if posterior and plain else "sampled"

    def _check_per_action_gradient(self) -> None:
        """``reinforce.per_action_gradient = "expected"`` or ``"forward-kl"`` needs split/no-split
        decisions and mirrored per-action rewards (``EvaluatorConfig.mirrored_action_rewards``)."""
        gradient = self.per_action_gradient()
        if not (
            self.agent_spec.per_action_gradients
            and self.env.reward == "per-action"
            and gradient != "sampled"
        ):
            return
        if self.env.rules != "binary" or not self.evaluator.mirrored_action_rewards():
            variant = self.evaluator.reward_variant("per-action")
            variant = "" if variant is None else f"{variant!r} "
            raise ConfigError(
                f"reinforce.per_action_gradient = {gradient!r} needs binary rules and per-action "
                "rewards whose other action is rewarded with minus the reward (gold, morfessor, "
                f"the LM's posterior or flip); here: {self.env.rules} rules, {variant}"
                f"{self.evaluator.name} rewards; use 'sampled'"
            )

    @property
    def agent_spec(self) -> AgentSpec:
        """The registry's entry for ``agent`` (``segrl.agents.registry.AGENTS``)."""
        return agent_spec(self.agent)

    @property
    def steps(self) -> int:
        """The job's budget of updates: the ``steps`` of the agent's table (``AgentSpec.table``:
        ``ppo.steps`` for the PPO agents, ``reinforce.steps`` for REINFORCE)."""
        return getattr(self, self.agent_spec.table).steps

    @property
    def name(self) -> str:
        """The segmenter's name in ``segrl compare``: agent, policy, evaluator, reward (the LM
        evaluator's reward variant too, and ``hidden`` when spaces are hidden)."""
        parts = [self.agent, self.policy.kind, self.evaluator.name, self.env.reward]
        variant = self.evaluator.reward_variant(self.env.reward)
        if variant is not None:
            parts.append(variant)
        if self.env.teacher_features:
            parts.append("reads-teacher")
        if self.env.hide_spaces:
            parts.append("hidden")
        return "-".join(parts)


def can_read_teacher(config: TrainConfig) -> bool:
    """Whether the agent's policy can read its evaluator's log-odds (``env.teacher_features``):
    an agent that can (``AgentSpec.reads_teacher``: REINFORCE), split/no-split decisions, not turned
    off."""
    return (
        config.agent_spec.reads_teacher
        and config.env.rules == "binary"
        and config.env.teacher_features is not False
    )
