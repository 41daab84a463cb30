"""Agents that learn to segment: segmenter policies (BiLSTM, Transformer), REINFORCE and PPO.

from segrl.agents import TrainConfig, train
result = train(TrainConfig())          # REINFORCE, BiLSTM, Morfessor rewards, bundled corpus
"""

from segrl.agents.config import PPOConfig, ReinforceConfig, TrainConfig
from segrl.agents.policies import (
    BiLSTMEncoder,
    DecisionHead,
    PolicyConfig,
    SegmenterPolicy,
    TransformerEncoder,
)
from segrl.agents.registry import AGENTS
from segrl.agents.reinforce import Reinforce, ValueBaseline, reinforce_loss
from segrl.agents.segmenter import AgentSegmenter
from segrl.agents.trainer import train

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
    "train",
]
