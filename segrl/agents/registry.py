"""Training algorithms by name: ``segrl train --agent NAME`` dispatches here.

Each entry names a function ``train(config: TrainConfig, corpus=None, gold=None) -> TrainResult`` by
import path, so naming one does not import the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from segrl.errors import ConfigError

if TYPE_CHECKING:
    from segrl.agents.config import TrainConfig
    from segrl.agents.trainer import TrainResult

AGENTS: dict[str, str] = {
    "reinforce": "segrl.agents.reinforce:train_reinforce",
    "ppo": "segrl.agents.sb3.train:train_ppo",
    "ppo-batched": "segrl.agents.ppo_batched:train_ppo_batched",
}


def train(config: TrainConfig, **options: Any) -> TrainResult:
    """Run the training job of ``config.agent``."""
    try:
        module, _, function = AGENTS[config.agent].partition(":")
    except KeyError:
        raise ConfigError(
            f"unknown agent {config.agent!r}; choose one of: {', '.join(AGENTS)}"
        ) from None
    return getattr(importlib.import_module(module), function)(config, **options)
