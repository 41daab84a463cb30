"""Agents that learn to segment: segmenter policies (BiLSTM, Transformer), REINFORCE and PPO.

from segrl.agents import TrainConfig
from segrl.experiments.agent_train import train
result = train(TrainConfig())          # REINFORCE, BiLSTM, Morfessor rewards, bundled corpus

The training jobs (run folder, checkpoints, MLflow) are ``segrl.experiments``', above the agents.
"""

import importlib

from segrl.agents.config import PPOConfig, ReinforceConfig, TrainConfig
from segrl.agents.policies import (
    BiLSTMEncoder,
    DecisionHead,
    PolicyConfig,
    SegmenterPolicy,
    TransformerEncoder,
)
from segrl.agents.registry import AGENTS
from segrl.agents.segmenter import AgentSegmenter

_TRAINING = {
    "Reinforce": "segrl.agents.reinforce",
    "ValueBaseline": "segrl.agents.reinforce",
    "reinforce_loss": "segrl.agents.reinforce",
}
"""What trains loads when it is first asked for: a saved agent segments without the learners (and
the environments and evaluators they import)."""


def __getattr__(name: str):  # noqa: ANN202 - PEP 562
    if name in _TRAINING:
        return getattr(importlib.import_module(_TRAINING[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AGENTS",
    "AgentSegmenter",
    "BiLSTMEncoder",
    "DecisionHead",
    "PPOConfig",
    "PolicyConfig",
    "Reinforce",
    "ReinforceConfig",
    "SegmenterPolicy",
    "TrainConfig",
    "TransformerEncoder",
    "ValueBaseline",
    "reinforce_loss",
]
